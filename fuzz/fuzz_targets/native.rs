#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| ringbound_fuzz::native(data));
