//! The rank tables of a vocabulary as one block of bytes, laid out at build time (`rust/build.rs`
//! includes this file) and read in place at run time (`ranks`): a fresh process counts from its
//! first text with tables that cost nothing to build, instead of building them from the
//! vocabulary's text first (0.1-0.3 s, longer than a warm assembly by a hundred times).
//!
//! The block, in the target's byte order, each section 8-byte aligned:
//! a header of eight `u64` (`HEADER`); `pairs`: the rank of every two-byte token by the pair,
//! `u32::MAX` for none; `filter`: a blocked Bloom filter of the tokens of 3 bytes or more;
//! `short_keys` and `short_ranks`: the tokens of 3 to 7 bytes by `short_key`, open-addressed;
//! `long_slots`: the rank of each token of 8 bytes or more, open-addressed by `long_hash` of
//! its bytes (a slot is compared through `offsets` and `bytes`); `offsets` and `bytes`: every
//! ordinary token's bytes in rank order.
//!
//! Everything here is plain `std`: the build script compiles it, with `rank_writer`, on its own.

/// The longest token of either vocabulary is 128 bytes.
pub const MAX_TOKEN_BYTES: usize = 128;
/// The two-byte table: one slot per pair of bytes.
pub const PAIR_SLOTS: usize = 1 << 16;
/// The filter's words (128 KB).
pub const FILTER_WORDS_LOG2: u32 = 14;
/// The header's `u64`s: format version, tokens, log2 of the short slots, log2 of the long
/// slots, length of `bytes`, three spare.
pub const HEADER: usize = 8;
/// Raised whenever the layout changes.
pub const VERSION: u64 = 2;
/// A slot of `long_slots` or `pairs` with no token.
pub const EMPTY: u32 = u32::MAX;

/// Up to 8 bytes as a little-endian word, read in at most two loads that may overlap (the
/// bytes they share are the same, so OR-ing them is exact): a key is made for every lookup of
/// a merge, and copying into a buffer took a call to `memcpy` each time.
#[inline(always)]
pub fn word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    let load4 = |at: usize| u64::from(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()));
    let load2 = |at: usize| u64::from(u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()));
    match n {
        0 => 0,
        1 => u64::from(bytes[0]),
        2..=3 => load2(0) | load2(n - 2) << (8 * (n - 2)),
        4..=7 => load4(0) | load4(n - 4) << (8 * (n - 4)),
        _ => u64::from_le_bytes(bytes[..8].try_into().unwrap()),
    }
}

/// The bytes (at most 7) with their length in bits 56-58: no two byte strings share a key
/// (bits 59-63 are free: `memo` keeps a count there).
#[inline(always)]
pub fn short_key(bytes: &[u8]) -> u64 {
    word(bytes) | (bytes.len() as u64) << 56
}

/// The filter's word of a token of 3 bytes or more and its two bits in it (read from its first
/// 16 bytes and its length).
#[inline(always)]
pub fn filter_bits(bytes: &[u8]) -> (usize, u64) {
    let low = word(&bytes[..bytes.len().min(8)]);
    let high = if bytes.len() > 8 {
        word(&bytes[8..bytes.len().min(16)])
    } else {
        0
    };
    let folded = low ^ high.rotate_left(17) ^ (bytes.len() as u64) << 56;
    let h = (folded ^ folded >> 29).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let word = (h >> (64 - FILTER_WORDS_LOG2)) as usize;
    (word, 1 << (h & 63) | 1 << (h >> 6 & 63))
}

/// Where the search for a short key starts in a table of `1 << log2` slots (Fibonacci hashing:
/// the top bits of the product depend on every byte of the key).
#[inline(always)]
pub fn short_home(key: u64, log2: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - log2)) as usize
}

/// Where the search for a token of 8 bytes or more starts in a table of `1 << log2` slots.
#[inline(always)]
pub fn long_home(bytes: &[u8], log2: u32) -> usize {
    let mut h = (bytes.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in bytes.chunks(8) {
        h = (h ^ word(chunk)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 31;
    }
    (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - log2)) as usize
}

/// The sections of a block, as byte ranges: what `write` wrote, read back from its header.
pub struct Sections {
    pub short_log2: u32,
    pub long_log2: u32,
    pub pairs: std::ops::Range<usize>,
    pub filter: std::ops::Range<usize>,
    pub short_keys: std::ops::Range<usize>,
    pub short_ranks: std::ops::Range<usize>,
    pub long_slots: std::ops::Range<usize>,
    pub offsets: std::ops::Range<usize>,
    pub bytes: std::ops::Range<usize>,
}

impl Sections {
    /// The sections of a block whose header holds `header` (in the host's order).
    pub fn of(header: [u64; HEADER]) -> Sections {
        assert_eq!(header[0], VERSION, "a rank table of another layout");
        let tokens = header[1] as usize;
        let (short_log2, long_log2) = (header[2] as u32, header[3] as u32);
        let mut at = HEADER * 8;
        let mut take = |len: usize| {
            let range = at..at + len;
            at += len.div_ceil(8) * 8;
            range
        };
        Sections {
            short_log2,
            long_log2,
            pairs: take(PAIR_SLOTS * 4),
            filter: take((1 << FILTER_WORDS_LOG2) * 8),
            short_keys: take((1 << short_log2) * 8),
            short_ranks: take((1 << short_log2) * 4),
            long_slots: take((1 << long_log2) * 4),
            offsets: take((tokens + 1) * 4),
            bytes: take(header[4] as usize),
        }
    }
}
