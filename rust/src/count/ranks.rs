//! The rank (tiktoken's merge priority, which is the token id) of every token short enough for
//! `bpe`'s own merge, laid out for the lookups a merge makes. A merge asks about every
//! adjacent pair, then about the longer strings its merges form; most of those are no token,
//! and the tables of the longer tokens are megabytes, so each lookup that reaches them misses
//! the cache: a filter small enough to stay in cache turns most of those away first.

use bpe_openai::byte_pair_encoding::BytePairEncoding;
use rustc_hash::FxHashMap;

/// Tokens up to this long are in the tables.
pub(super) const MERGE_PIECE_BYTES: usize = 15;

/// Two-byte tokens sit in a table indexed by the pair (256 KB, no hashing, and the pairs of
/// ASCII text share a few of its cache lines); tokens of 3 to 7 bytes in a table of 8-byte
/// keys, longer ones in a map of 16-byte keys (about half the memory of one map for all).
pub(super) struct Ranks {
    pairs: Vec<u32>,
    filter: Filter,
    short: ShortMap,
    long: FxHashMap<u128, u32>,
}

/// A pair of bytes that is not a token.
const NO_RANK: u32 = u32::MAX;

impl Ranks {
    /// The tokens of `bpe` of at most `MERGE_PIECE_BYTES` bytes.
    pub(super) fn new(bpe: &BytePairEncoding) -> Ranks {
        let ids = 0..bpe.num_tokens() as u32;
        let shorts = ids
            .clone()
            .filter(|&id| (3..=7).contains(&bpe.token_bytes(id).len()))
            .count();
        let mut ranks = Ranks {
            pairs: vec![NO_RANK; 1 << 16],
            filter: Filter::new(),
            short: ShortMap::with_capacity(shorts),
            long: FxHashMap::default(),
        };
        for id in ids {
            let bytes = bpe.token_bytes(id);
            match *bytes {
                [a, b] => ranks.pairs[usize::from(a) << 8 | usize::from(b)] = id,
                _ if bytes.len() <= 7 => {
                    let key = short_key(bytes);
                    ranks.filter.insert(u128::from(key));
                    ranks.short.insert(key, id);
                }
                _ if bytes.len() <= MERGE_PIECE_BYTES => {
                    let key = key(bytes);
                    ranks.filter.insert(key);
                    ranks.long.insert(key, id);
                }
                _ => {}
            }
        }
        ranks
    }

    /// The rank of the token of two bytes `a b`.
    #[inline]
    pub(super) fn pair(&self, a: u8, b: u8) -> Option<u32> {
        Some(self.pairs[usize::from(a) << 8 | usize::from(b)]).filter(|&r| r != NO_RANK)
    }

    /// The rank of the token `bytes` (2 to `MERGE_PIECE_BYTES` bytes).
    pub(super) fn get(&self, bytes: &[u8]) -> Option<u32> {
        match *bytes {
            [a, b] => self.pair(a, b),
            _ if bytes.len() <= 7 => self.short(short_key(bytes)),
            _ => {
                let key = key(bytes);
                if !self.filter.may_hold(key) {
                    return None;
                }
                self.long.get(&key).copied()
            }
        }
    }

    /// The rank of the token of 3 to 7 bytes whose `short_key` is `key`.
    #[inline]
    pub(super) fn short(&self, key: u64) -> Option<u32> {
        if !self.filter.may_hold(u128::from(key)) {
            return None;
        }
        self.short.get(key)
    }
}

/// Two bits of one word per token (a blocked Bloom filter, 128 KB, about 9% false positives
/// for o200k_base's 190,000 tokens of 3 to 15 bytes): of the lookups a count of ordinary text
/// makes, about seven in ten are of strings that are no token.
struct Filter(Vec<u64>);

const FILTER_WORDS_LOG2: u32 = 14;

impl Filter {
    fn new() -> Filter {
        Filter(vec![0; 1 << FILTER_WORDS_LOG2])
    }

    /// The word of `key` and its two bits in it.
    #[inline(always)]
    fn bits(key: u128) -> (usize, u64) {
        let folded = key as u64 ^ (key >> 64) as u64;
        let h = (folded ^ folded >> 29).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let word = (h >> (64 - FILTER_WORDS_LOG2)) as usize;
        (word, 1 << (h & 63) | 1 << (h >> 6 & 63))
    }

    fn insert(&mut self, key: u128) {
        let (word, bits) = Self::bits(key);
        self.0[word] |= bits;
    }

    /// False when no token has this key.
    #[inline(always)]
    fn may_hold(&self, key: u128) -> bool {
        let (word, bits) = Self::bits(key);
        self.0[word] & bits == bits
    }
}

/// Tokens of 3 to 7 bytes by `short_key`, open-addressed with linear probing in slots that
/// hold key and rank together: a lookup reads one slot where a `HashMap` reads a control
/// group and then the bucket, two cache misses in a table of megabytes.
struct ShortMap {
    slots: Vec<(u64, u32)>,
    shift: u32,
}

impl ShortMap {
    /// A map for `tokens` keys, at most half full.
    fn with_capacity(tokens: usize) -> ShortMap {
        let log2 = (2 * tokens).next_power_of_two().trailing_zeros().max(4);
        ShortMap {
            slots: vec![(0, 0); 1 << log2],
            shift: 64 - log2,
        }
    }

    /// Where the search for `key` starts (Fibonacci hashing: the top bits of the product
    /// depend on every byte of the key).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn insert(&mut self, key: u64, rank: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i].0 != 0 && self.slots[i].0 != key {
            i = (i + 1) & mask;
        }
        self.slots[i] = (key, rank);
    }

    /// The rank of the token of key `key`; a key is never 0 (its length is in it), the mark
    /// of an empty slot.
    #[inline]
    fn get(&self, key: u64) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let (k, rank) = self.slots[i];
            if k == key {
                return Some(rank);
            }
            if k == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }
}

/// The bytes (at most 15) with their length in the top byte: no two byte strings share a key,
/// and up to 7 bytes the key fits in its low 64 bits (it is `short_key`).
pub(super) fn key(bytes: &[u8]) -> u128 {
    let n = bytes.len();
    if n < 8 {
        return u128::from(short_key(bytes));
    }
    let (low, high) = if n == 8 {
        (word(bytes), 0)
    } else {
        (word(&bytes[..8]), word(&bytes[8..]))
    };
    (u128::from(high) << 64 | u128::from(low)) | ((n as u128) << 120)
}

/// `key` of at most 7 bytes as 64 bits: the bytes in bits 0-55, the length in bits 56-58
/// (bits 59-63 are free: `memo` keeps a count there). Made for every short piece counted.
#[inline(always)]
pub(super) fn short_key(bytes: &[u8]) -> u64 {
    word(bytes) | (bytes.len() as u64) << 56
}

/// Up to 8 bytes as a little-endian word, read in at most two loads that may overlap (the
/// bytes they share are the same, so OR-ing them is exact): a key is made for every lookup of
/// a merge, and copying into a buffer took a call to `memcpy` each time.
#[inline(always)]
fn word(bytes: &[u8]) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::super::{encoder, Encoding};
    use super::*;

    #[test]
    fn keys_are_the_bytes_and_their_length() {
        for n in 0..=MERGE_PIECE_BYTES {
            let bytes: Vec<u8> = (1..=n as u8).map(|i| i.wrapping_mul(37)).collect();
            let mut padded = [0u8; 16];
            padded[..n].copy_from_slice(&bytes);
            let top = if n < 8 { 56 } else { 120 };
            assert_eq!(
                key(&bytes),
                u128::from_le_bytes(padded) | ((n as u128) << top),
                "{n}"
            );
            if n < 8 {
                assert_eq!(u128::from(short_key(&bytes)), key(&bytes));
            }
        }
    }

    /// Every token up to `MERGE_PIECE_BYTES` is found with its own rank, through the filter;
    /// strings that are no token are not.
    #[test]
    fn every_short_token_is_found() {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let bpe = &encoder::wait(encoding).bpe;
            let ranks = Ranks::new(bpe);
            let mut found = 0;
            for id in 0..bpe.num_tokens() as u32 {
                let bytes = bpe.token_bytes(id);
                if (2..=MERGE_PIECE_BYTES).contains(&bytes.len()) {
                    assert_eq!(ranks.get(bytes), Some(id), "{bytes:?}");
                    found += 1;
                }
            }
            assert!(found > 90_000, "{found}");
            for absent in [
                &b"\xff\xfe\xfd"[..],
                b"zq\x00",
                b"\x00\x00\x00\x00\x00\x00\x00\x00\x01",
            ] {
                let token = (0..bpe.num_tokens() as u32).find(|&id| bpe.token_bytes(id) == absent);
                assert_eq!(ranks.get(absent), token, "{absent:?}");
            }
        }
    }
}
