//! Replays the committed seed corpora (and any findings saved under `artifacts/`) through the
//! fuzz targets' checks, with a fixed set of mutations of each seed: the bounded, stable
//! toolchain form of the fuzzing that `cargo fuzz run` does open-ended.

use std::fs;
use std::path::Path;

fn inputs(target: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [
        root.join("seeds").join(target),
        root.join("artifacts").join(target),
    ] {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            out.push(fs::read(entry.unwrap().path()).unwrap());
        }
    }
    out
}

/// Each seed, then every prefix at 1/8 steps and the seed with one byte at a time (at most
/// 512 places) replaced by each byte that matters to JSON structure.
fn mutations(seed: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![seed.to_vec()];
    for k in 1..8 {
        out.push(seed[..seed.len() * k / 8].to_vec());
    }
    let step = (seed.len() / 512).max(1);
    for at in (0..seed.len()).step_by(step) {
        for &c in b"\"\\{}[],: 0\xff" {
            let mut m = seed.to_vec();
            m[at] = c;
            out.push(m);
        }
    }
    out
}

fn replay(target: &str, check: fn(&[u8])) {
    let seeds = inputs(target);
    assert!(!seeds.is_empty(), "no seeds for {target}");
    for seed in &seeds {
        for input in mutations(seed) {
            check(&input);
        }
    }
}

#[test]
fn json_array() {
    replay("json_array", ringbound_fuzz::json_array);
}

#[test]
fn openai_chat() {
    replay("openai_chat", ringbound_fuzz::openai_chat);
}

#[test]
fn anthropic() {
    replay("anthropic", ringbound_fuzz::anthropic);
}

#[test]
fn openai_responses() {
    replay("openai_responses", ringbound_fuzz::openai_responses);
}

#[test]
fn native() {
    replay("native", ringbound_fuzz::native);
}

#[test]
fn stray() {
    replay("stray", ringbound_fuzz::stray);
}
