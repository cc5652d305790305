//! Lays out the rank tables of each vocabulary (`rust/src/count/rank_layout.rs`) from the copy
//! `tiktoken-rs` embeds, so that the extension reads them in place from its first count.

#[path = "src/count/rank_layout.rs"]
#[allow(dead_code)]
mod rank_layout;
#[path = "src/count/rank_writer.rs"]
mod rank_writer;

use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=rust/src/count/rank_layout.rs");
    println!("cargo::rerun-if-changed=rust/src/count/rank_writer.rs");
    println!("cargo::rerun-if-changed=rust/build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let little = std::env::var("CARGO_CFG_TARGET_ENDIAN").as_deref() != Ok("big");
    for (name, core) in [
        ("o200k_base", tiktoken_rs::o200k_base()),
        ("cl100k_base", tiktoken_rs::cl100k_base()),
    ] {
        let core = core.expect("tiktoken-rs builds its own vocabularies");
        // Ordinary tokens are ranked 0 to n - 1; the special tokens come after a gap.
        let tokens: Vec<Vec<u8>> = (0..)
            .map_while(|rank| core.decode_bytes(&[rank]).ok())
            .collect();
        std::fs::write(
            out.join(format!("{name}.ranks")),
            rank_writer::write(&tokens, little),
        )
        .expect("OUT_DIR is writable");
    }
}
