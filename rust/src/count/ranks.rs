//! The rank (tiktoken's merge priority, which is the token id) of every token, laid out for the
//! lookups a merge makes, in tables laid out at build time (`rank_layout`) and read in place.
//! A merge asks about every adjacent pair, then about the longer strings its merges form; most
//! of those are no token, and the tables of the longer tokens are megabytes, so each lookup
//! that reaches them misses the cache: a filter small enough to stay in cache turns most of
//! those away first.

use std::sync::OnceLock;

use super::rank_layout::{
    filter_bits, long_home, short_home, Sections, EMPTY, HEADER, MAX_TOKEN_BYTES,
};
use super::Encoding;

pub(super) use super::rank_layout::short_key;

/// Tokens up to this long are merged by the fixed-size merge (`merge::count_short`).
pub(super) const MERGE_PIECE_BYTES: usize = 15;

/// A vocabulary's tables, borrowed from the extension's read-only data: two-byte tokens in a
/// table indexed by the pair (256 KB, no hashing, and the pairs of ASCII text share a few of
/// its cache lines); tokens of 3 to 7 bytes by their 8-byte key, in slots that hold key and
/// rank side by side in two arrays; longer ones by a hash of their bytes, compared through
/// the token list.
pub(super) struct Ranks {
    pairs: &'static [u32],
    filter: &'static [u64],
    short_keys: &'static [u64],
    short_ranks: &'static [u32],
    short_log2: u32,
    long_slots: &'static [u32],
    long_log2: u32,
    offsets: &'static [u32],
    bytes: &'static [u8],
}

/// The block `rust/build.rs` wrote, aligned for the `u64` sections it holds.
#[repr(C, align(64))]
struct Aligned<B: ?Sized>(B);

static O200K_BASE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/o200k_base.ranks"
)));
static CL100K_BASE: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(
    env!("OUT_DIR"),
    "/cl100k_base.ranks"
)));

fn block(encoding: Encoding) -> &'static [u8] {
    match encoding {
        Encoding::O200kBase => &O200K_BASE.0,
        Encoding::Cl100kBase => &CL100K_BASE.0,
    }
}

/// The tables of `encoding`: slices of the block, made once (no copy, nothing built).
pub(super) fn ranks(encoding: Encoding) -> &'static Ranks {
    static RANKS: [OnceLock<Ranks>; 2] = [OnceLock::new(), OnceLock::new()];
    RANKS[encoding as usize].get_or_init(|| Ranks::of(block(encoding)))
}

/// Reads a byte of every page of `encoding`'s block (6.8 MB for o200k_base), so that its
/// tables are resident before the counts that need them. The block is the extension's
/// read-only data, paged in from the file as first read: left to the counts, a process's
/// first large request faults in a few megabytes of it (3.4 MB for a 10 MB session), which a
/// cold page cache serves by random reads and which then show in that request's peak memory
/// instead of in the tables'. Called where the encoder's tables are built, off the counting
/// thread, so `warmup()` leaves every table of the encoding resident.
pub(super) fn page_in(encoding: Encoding) {
    // Pages are 4 KiB or larger: a byte every 4 KiB reads each of them.
    for byte in block(encoding).iter().step_by(4096) {
        std::hint::black_box(*byte);
    }
}

/// `bytes[range]` as `T`s. The block is 64-byte aligned and every section starts at a multiple
/// of 8 bytes, in the target's byte order (`rust/build.rs`).
fn section<T: Copy>(block: &'static [u8], range: std::ops::Range<usize>) -> &'static [T] {
    let bytes = &block[range];
    assert_eq!(bytes.as_ptr() as usize % std::mem::align_of::<T>(), 0);
    // SAFETY: in bounds (sliced above), aligned (checked), and `T` is `u32` or `u64`, for
    // which any bytes are a value; the block is immutable and lives for the whole process.
    unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size_of::<T>()) }
}

impl Ranks {
    fn of(block: &'static [u8]) -> Ranks {
        let header: &[u64] = section(block, 0..HEADER * 8);
        let s = Sections::of(header.try_into().expect("a header of HEADER words"));
        Ranks {
            pairs: section(block, s.pairs),
            filter: section(block, s.filter),
            short_keys: section(block, s.short_keys),
            short_ranks: section(block, s.short_ranks),
            short_log2: s.short_log2,
            long_slots: section(block, s.long_slots),
            long_log2: s.long_log2,
            offsets: section(block, s.offsets),
            bytes: &block[s.bytes],
        }
    }

    /// The ordinary tokens of the vocabulary.
    pub(super) fn num_tokens(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The bytes of the token of rank `rank`.
    pub(super) fn token(&self, rank: u32) -> &'static [u8] {
        let r = rank as usize;
        &self.bytes[self.offsets[r] as usize..self.offsets[r + 1] as usize]
    }

    /// The rank of the token of two bytes `a b`.
    #[inline]
    pub(super) fn pair(&self, a: u8, b: u8) -> Option<u32> {
        Some(self.pairs[usize::from(a) << 8 | usize::from(b)]).filter(|&r| r != EMPTY)
    }

    /// The rank of the token `bytes` (2 bytes or more).
    #[inline]
    pub(super) fn get(&self, bytes: &[u8]) -> Option<u32> {
        match *bytes {
            [a, b] => self.pair(a, b),
            _ if bytes.len() <= 7 => {
                if !self.may_hold(bytes) {
                    return None;
                }
                self.short(short_key(bytes))
            }
            _ if bytes.len() <= MAX_TOKEN_BYTES => {
                if !self.may_hold(bytes) {
                    return None;
                }
                self.long(bytes)
            }
            _ => None,
        }
    }

    #[inline(always)]
    fn may_hold(&self, bytes: &[u8]) -> bool {
        let (word, bits) = filter_bits(bytes);
        self.filter[word] & bits == bits
    }

    /// The rank of the token of 3 to 7 bytes whose `short_key` is `key`; a key is never 0
    /// (its length is in it), the mark of an empty slot.
    #[inline]
    fn short(&self, key: u64) -> Option<u32> {
        let mask = self.short_keys.len() - 1;
        let mut i = short_home(key, self.short_log2);
        loop {
            match self.short_keys[i] {
                k if k == key => return Some(self.short_ranks[i]),
                0 => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The rank of the token `bytes` of 8 bytes or more.
    fn long(&self, bytes: &[u8]) -> Option<u32> {
        let mask = self.long_slots.len() - 1;
        let mut i = long_home(bytes, self.long_log2);
        loop {
            match self.long_slots[i] {
                EMPTY => return None,
                rank if self.token(rank) == bytes => return Some(rank),
                _ => i = (i + 1) & mask,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{tiktoken, Encoding};
    use super::*;

    /// A vocabulary written in the target's order reads back: every token by its bytes, with
    /// its rank, and nothing else.
    #[test]
    fn a_written_block_reads_back() {
        let tokens: Vec<Vec<u8>> = (0..=255u8)
            .map(|b| vec![b])
            .chain(
                [
                    &b"ab"[..],
                    b"abc",
                    b"abcdefg",
                    b"abcdefgh",
                    b"0123456789abcdef",
                ]
                .map(<[u8]>::to_vec),
            )
            .chain((0..3000u32).map(|i| format!("tok{i}").into_bytes()))
            .chain((0..500u32).map(|i| format!("a longer token {i:>12}").into_bytes()))
            .collect();
        let block = super::super::rank_writer::write(&tokens, cfg!(target_endian = "little"));
        // Leaked into u64s: aligned as the compiled-in block is.
        let words: &'static [u64] = Vec::leak(
            block
                .chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
                .collect(),
        );
        // SAFETY: the u64s' own bytes, alive for the whole test process.
        let bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) };
        let ranks = Ranks::of(bytes);
        assert_eq!(ranks.num_tokens(), tokens.len());
        for (rank, token) in tokens.iter().enumerate() {
            assert_eq!(ranks.token(rank as u32), &token[..]);
            if token.len() >= 2 {
                assert_eq!(ranks.get(token), Some(rank as u32), "{token:?}");
            }
        }
        for absent in [
            &b"ba"[..],
            b"abd",
            b"tok3000",
            b"abcdefgi",
            b"a longer token",
        ] {
            assert_eq!(ranks.get(absent), None, "{absent:?}");
        }
    }

    #[test]
    fn short_keys_are_the_bytes_and_their_length() {
        for n in 0..=7 {
            let bytes: Vec<u8> = (1..=n as u8).map(|i| i.wrapping_mul(37)).collect();
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(&bytes);
            assert_eq!(
                short_key(&bytes),
                u64::from_le_bytes(padded) | (n as u64) << 56
            );
        }
    }

    /// The tables laid out at build time hold tiktoken-rs's vocabulary exactly: every ordinary
    /// token found with its own rank, in rank order, and strings that are no token not found.
    #[test]
    fn every_token_is_found_with_its_rank() {
        for (encoding, n) in [
            (Encoding::O200kBase, 199_998),
            (Encoding::Cl100kBase, 100_256),
        ] {
            let (ranks, core) = (ranks(encoding), tiktoken::core(encoding));
            assert_eq!(ranks.num_tokens(), n, "{encoding:?}");
            for rank in 0..n as u32 {
                let bytes = core.decode_bytes(&[rank]).expect("an ordinary token");
                assert_eq!(ranks.token(rank), bytes, "{rank}");
                if bytes.len() >= 2 {
                    assert_eq!(ranks.get(&bytes), Some(rank), "{bytes:?}");
                }
            }
            let longest = (0..n as u32).map(|r| ranks.token(r).len()).max();
            assert_eq!(longest, Some(MAX_TOKEN_BYTES));
            for absent in [
                &b"\xff\xfe\xfd"[..],
                b"zq\x00",
                b"\x00\x00\x00\x00\x00\x00\x00\x00\x01",
                &[b'q'; 40],
                &[b'z'; MAX_TOKEN_BYTES + 1],
            ] {
                let token = (0..n as u32).find(|&r| ranks.token(r) == absent);
                assert_eq!(ranks.get(absent), token, "{absent:?}");
            }
        }
    }
}
