//! The token counts of the pieces a count has met, remembered for the next time the piece comes
//! by: text is mostly short pieces that recur (keywords, common words, indentation), and a
//! lookup is several times cheaper than merging. Two direct-mapped tables: a miss overwrites
//! its slot, so remembering allocates nothing and never needs clearing, and random pieces
//! (base64) cost one hash more than counting them alone.

use xxhash_rust::xxh3::xxh3_64;

/// Pieces of 3 to this many bytes go to the table of short pieces, as their key (the bytes
/// with their length, `ranks::short_key`) with the count in its top four bits: 8 bytes a
/// slot, so the table that nearly every piece looked up goes to takes a quarter of the cache
/// it took in 32-byte slots. (Pieces of one or two bytes are counted without a table.)
pub(super) const SHORT_PIECE_BYTES: usize = 7;
/// Longer pieces up to this many bytes go to the table of long pieces, as their bytes, in
/// slots of one cache line: the rules of test logs and tables (` ====…\n`, 30 to 60 bytes)
/// recur by the dozen, and each costs the crate's encoder an allocation and an automaton walk.
/// Longer ones (identifiers, base64) rarely recur.
pub(super) const LONG_PIECE_BYTES: usize = 62;

/// 256 KB of short slots and 256 KB of long ones, the 512 KB one table of 32-byte slots took.
const SHORT_SLOTS_LOG2: u32 = 15;
const LONG_SLOTS_LOG2: u32 = 12;
/// 64 KB of runs: padded logs and ASCII tables repeat a few dozen run lengths.
const RUN_SLOTS_LOG2: u32 = 12;
const COUNT_SHIFT: u32 = 60;

#[derive(Clone, Copy)]
#[repr(align(64))]
struct Slot {
    len: u8,
    count: u8,
    bytes: [u8; LONG_PIECE_BYTES],
}

const EMPTY: Slot = Slot {
    len: 0,
    count: 0,
    bytes: [0; LONG_PIECE_BYTES],
};

/// One pair of tables; empty (nothing allocated) until first used.
pub(super) struct Memo {
    short: Vec<u64>,
    long: Vec<Slot>,
    runs: Vec<(u64, u64)>,
}

impl Memo {
    pub(super) const fn new() -> Memo {
        Memo {
            short: Vec::new(),
            long: Vec::new(),
            runs: Vec::new(),
        }
    }

    /// Allocates the tables if this is their first use.
    pub(super) fn allocate(&mut self) {
        if self.short.is_empty() {
            self.short = vec![0; 1 << SHORT_SLOTS_LOG2];
            self.long = vec![EMPTY; 1 << LONG_SLOTS_LOG2];
            self.runs = vec![(0, 0); 1 << RUN_SLOTS_LOG2];
        }
    }

    /// Forgets every piece; the tables stay allocated.
    pub(super) fn forget(&mut self) {
        self.short.fill(0);
        self.long.fill(EMPTY);
        self.runs.fill((0, 0));
    }

    /// The count of the short piece whose key is `key` (3 to `SHORT_PIECE_BYTES` bytes, so
    /// never 0, the empty slot), from `count` when it is not remembered. The tables must be
    /// allocated.
    #[inline]
    pub(super) fn short(&mut self, key: u64, count: impl FnOnce() -> usize) -> usize {
        // Fibonacci hashing: the product's top bits depend on every byte of the key.
        let at = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHORT_SLOTS_LOG2);
        let slot = &mut self.short[at as usize];
        if *slot & ((1 << COUNT_SHIFT) - 1) == key {
            return (*slot >> COUNT_SHIFT) as usize;
        }
        // A piece never has more tokens than bytes: at most 7, which fits in four bits.
        let n = count();
        *slot = key | (n as u64) << COUNT_SHIFT;
        n
    }

    /// The count of `piece` (`SHORT_PIECE_BYTES` + 1 to `LONG_PIECE_BYTES` bytes), from `count`
    /// when it is not remembered. The tables must be allocated.
    #[inline]
    pub(super) fn long(&mut self, piece: &[u8], count: impl FnOnce() -> usize) -> usize {
        let n = piece.len();
        let slot = &mut self.long[(xxh3_64(piece) >> (64 - LONG_SLOTS_LOG2)) as usize];
        if usize::from(slot.len) == n && slot.bytes[..n] == *piece {
            return usize::from(slot.count);
        }
        // A piece never has more tokens than bytes, so the count fits in a u8.
        let count = count();
        *slot = Slot {
            len: n as u8,
            count: count as u8,
            bytes: [0; LONG_PIECE_BYTES],
        };
        slot.bytes[..n].copy_from_slice(piece);
        count
    }
}

impl Memo {
    /// The count of the run piece whose key is `key` (`run_key`), from `count` when it is not
    /// remembered. The tables must be allocated.
    #[inline]
    pub(super) fn run(&mut self, key: u64, count: impl FnOnce() -> usize) -> usize {
        let at = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - RUN_SLOTS_LOG2);
        let slot = &mut self.runs[at as usize];
        if slot.0 == key {
            return slot.1 as usize;
        }
        let n = count();
        *slot = (key, n as u64);
        n
    }
}

/// A key for `piece` if it is one byte repeated, after at most one other byte (` -----`),
/// fewer than 2^32 times: the lead byte, the repeated byte and the length, never 0. `None`
/// for any other piece.
pub(super) fn run_key(piece: &[u8]) -> Option<u64> {
    let (lead, run) = match piece {
        [a, b, ..] if a != b => (Some(*a), &piece[1..]),
        _ => (None, piece),
    };
    let (&byte, rest) = run.split_first()?;
    let n = u32::try_from(run.len()).ok()?;
    if !rest.iter().all(|&b| b == byte) {
        return None;
    }
    let lead = lead.map_or(0, |l| 1 << 8 | u64::from(l));
    Some(1 << 63 | lead << 40 | u64::from(byte) << 32 | u64::from(n))
}

#[cfg(test)]
mod tests {
    use super::super::ranks::short_key;
    use super::*;

    #[test]
    fn remembers_each_piece_by_all_its_bytes() {
        let mut memo = Memo::new();
        memo.allocate();
        let never = || -> usize { panic!("remembered") };
        for (piece, count) in [
            (&b"abc"[..], 1),
            (b"abd", 2),
            (b"a\0c", 3),
            (b"\0\0\0\0\0\0\0", 7),
        ] {
            assert_eq!(memo.short(short_key(piece), || count), count);
            assert_eq!(memo.short(short_key(piece), never), count, "{piece:?}");
        }
        let long = |c: u8, n: usize| vec![c; n];
        for (piece, count) in [
            (long(b'=', 8), 1),
            (long(b'=', 9), 2),
            (long(b'-', LONG_PIECE_BYTES), 4),
        ] {
            assert_eq!(memo.long(&piece, || count), count);
            assert_eq!(memo.long(&piece, never), count, "{piece:?}");
        }
        memo.forget();
        assert_eq!(memo.short(short_key(b"abc"), || 9), 9);
        assert_eq!(memo.long(&long(b'=', 8), || 9), 9);
    }

    #[test]
    fn run_keys_name_each_run_once() {
        let keys: Vec<Option<u64>> = [
            &b"-----"[..],
            b"------",
            b" -----",
            b"x-----",
            b"=====",
            b"-",
            b"",
            b"--=--",
            b"ab",
            b" - -",
        ]
        .iter()
        .map(|p| run_key(p))
        .collect();
        assert!(keys[..6].iter().all(Option::is_some), "{keys:?}");
        assert_eq!(keys[6..], [None, None, Some(keys[8].unwrap()), None]);
        let mut distinct: Vec<u64> = keys.iter().flatten().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 7);
        let mut memo = Memo::new();
        memo.allocate();
        assert_eq!(memo.run(keys[0].unwrap(), || 3), 3);
        assert_eq!(memo.run(keys[0].unwrap(), || panic!("remembered")), 3);
        assert_eq!(memo.run(keys[1].unwrap(), || 4), 4);
    }

    /// Pieces that share a slot replace each other; neither is ever taken for the other.
    #[test]
    fn a_slot_holds_one_piece_at_a_time() {
        let mut memo = Memo::new();
        memo.allocate();
        let keys: Vec<u64> = (0..(1u64 << SHORT_SLOTS_LOG2) * 4)
            .map(|i| short_key(&i.to_le_bytes()[..5]))
            .collect();
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(memo.short(key, || i % 6), i % 6);
        }
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(memo.short(key, || i % 6), i % 6);
        }
    }
}
