//! Writes the block `rank_layout` describes; compiled by the build script (`rust/build.rs`),
//! and by the tests, which check that what it writes reads back.

use super::rank_layout::{
    filter_bits, long_home, short_home, short_key, EMPTY, FILTER_WORDS_LOG2, MAX_TOKEN_BYTES,
    PAIR_SLOTS, VERSION,
};

/// Slots for `n` keys, at most half full.
pub fn slots_log2(n: usize) -> u32 {
    (2 * n).next_power_of_two().trailing_zeros().max(4)
}

/// The block of a vocabulary given as its ordinary tokens in rank order, in little-endian
/// order if `little` (else big-endian).
pub fn write(tokens: &[Vec<u8>], little: bool) -> Vec<u8> {
    let mut pairs = vec![EMPTY; PAIR_SLOTS];
    let mut filter = vec![0u64; 1 << FILTER_WORDS_LOG2];
    let shorts = tokens.iter().filter(|t| (3..=7).contains(&t.len())).count();
    let longs = tokens.iter().filter(|t| t.len() >= 8).count();
    let (short_log2, long_log2) = (slots_log2(shorts), slots_log2(longs));
    let mut short_keys = vec![0u64; 1 << short_log2];
    let mut short_ranks = vec![0u32; 1 << short_log2];
    let mut long_slots = vec![EMPTY; 1 << long_log2];
    let (mut offsets, mut bytes) = (vec![0u32], Vec::new());
    for (rank, token) in tokens.iter().enumerate() {
        let rank = rank as u32;
        assert!(
            token.len() <= MAX_TOKEN_BYTES,
            "a token of {} bytes",
            token.len()
        );
        match token.len() {
            2 => pairs[usize::from(token[0]) << 8 | usize::from(token[1])] = rank,
            n if n >= 3 => {
                let (w, bits) = filter_bits(token);
                filter[w] |= bits;
                if n <= 7 {
                    let key = short_key(token);
                    let mask = short_keys.len() - 1;
                    let mut i = short_home(key, short_log2);
                    while short_keys[i] != 0 {
                        assert_ne!(short_keys[i], key, "a token twice");
                        i = (i + 1) & mask;
                    }
                    (short_keys[i], short_ranks[i]) = (key, rank);
                } else {
                    let mask = long_slots.len() - 1;
                    let mut i = long_home(token, long_log2);
                    while long_slots[i] != EMPTY {
                        i = (i + 1) & mask;
                    }
                    long_slots[i] = rank;
                }
            }
            _ => {}
        }
        bytes.extend_from_slice(token);
        offsets.push(bytes.len() as u32);
    }
    let mut out = Vec::new();
    let put64 = |out: &mut Vec<u8>, v: u64| {
        out.extend_from_slice(&if little {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        })
    };
    let header = [
        VERSION,
        tokens.len() as u64,
        u64::from(short_log2),
        u64::from(long_log2),
        bytes.len() as u64,
        0,
        0,
        0,
    ];
    for v in header {
        put64(&mut out, v);
    }
    let put32s = |out: &mut Vec<u8>, vs: &[u32]| {
        for &v in vs {
            out.extend_from_slice(&if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            });
        }
        while out.len() % 8 != 0 {
            out.push(0);
        }
    };
    put32s(&mut out, &pairs);
    for &v in &filter {
        put64(&mut out, v);
    }
    for &v in &short_keys {
        put64(&mut out, v);
    }
    put32s(&mut out, &short_ranks);
    put32s(&mut out, &long_slots);
    put32s(&mut out, &offsets);
    out.extend_from_slice(&bytes);
    while out.len() % 8 != 0 {
        out.push(0);
    }
    out
}
