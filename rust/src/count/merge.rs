//! tiktoken's merge (`byte_pair_merge`), counted: a piece that is a token is one; otherwise,
//! starting from single bytes, the adjacent pair of lowest rank (the leftmost of equals) is
//! merged until no adjacent pair is a token. Short pieces on a fixed array; longer ones with a
//! heap, in time `n log n`, so no piece costs more than its length says.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::rank_layout::MAX_TOKEN_BYTES;
use super::ranks::{Ranks, MERGE_PIECE_BYTES};

/// Tokens of a piece of 2 to `MERGE_PIECE_BYTES` bytes.
pub(super) fn count_short(ranks: &Ranks, piece: &[u8]) -> usize {
    count_fixed::<{ MERGE_PIECE_BYTES + 1 }>(ranks, piece)
}

/// Pieces up to this long are merged on a fixed array even when long: a scan of at most 64
/// parts a merge costs less than a heap's allocations and pushes.
const FIXED_PIECE_BYTES: usize = 64;

/// Tokens of a piece of 2 to `PARTS - 1` bytes by tiktoken's `byte_pair_merge`, on a fixed
/// array.
fn count_fixed<const PARTS: usize>(ranks: &Ranks, piece: &[u8]) -> usize {
    let n = piece.len();
    if ranks.get(piece).is_some() {
        return 1;
    }
    let rank = |from: usize, to: usize| ranks.get(&piece[from..to]).unwrap_or(u32::MAX);
    // tiktoken's loop, on a fixed array: parts[k] = (where part k starts, the rank of part k
    // merged with part k + 1); the last entry marks the end.
    let mut parts = [(0usize, u32::MAX); PARTS];
    for (i, part) in parts.iter_mut().enumerate().take(n + 1) {
        *part = (i, if i + 2 <= n { rank(i, i + 2) } else { u32::MAX });
    }
    let mut len = n + 1;
    loop {
        let (mut i, mut min) = (0, u32::MAX);
        for (k, part) in parts[..len - 1].iter().enumerate() {
            if part.1 < min {
                (i, min) = (k, part.1);
            }
        }
        if min == u32::MAX {
            break;
        }
        // Part i absorbs part i + 1: the ranks of the pairs it now forms, read before the
        // removal as tiktoken reads them.
        let pair_after = |k: usize| {
            if k + 3 < len {
                rank(parts[k].0, parts[k + 3].0)
            } else {
                u32::MAX
            }
        };
        let (left, right) = (if i > 0 { pair_after(i - 1) } else { 0 }, pair_after(i));
        if i > 0 {
            parts[i - 1].1 = left;
        }
        parts[i].1 = right;
        parts.copy_within(i + 2..len, i + 1);
        len -= 1;
    }
    len - 1
}

/// Tokens of a piece of any length by the same rule: the pairs wait in a heap by rank and
/// then by where they start (the leftmost of equals first); a pair taken from it is merged if
/// it still joins two neighbouring parts (its rank depends only on the bytes it spans, so a
/// pair whose parts are the same span is the same pair).
pub(super) fn count_long(ranks: &Ranks, piece: &[u8]) -> usize {
    let n = piece.len();
    if n <= FIXED_PIECE_BYTES {
        return count_fixed::<{ FIXED_PIECE_BYTES + 1 }>(ranks, piece);
    }
    if n <= MAX_TOKEN_BYTES && ranks.get(piece).is_some() {
        return 1;
    }
    let rank = |from: usize, to: usize| {
        if to - from <= MAX_TOKEN_BYTES {
            ranks.get(&piece[from..to])
        } else {
            None
        }
    };
    // Parts by where they start: the end of each (`end[s]`), and the start of the part before
    // it; a part merged into its left neighbour is dead (`end[s] == 0`).
    let mut end: Vec<usize> = (1..=n).collect();
    let mut before: Vec<usize> = (0..n).map(|s| s.wrapping_sub(1)).collect();
    let mut heap: BinaryHeap<Reverse<(u32, usize, usize)>> = (0..n.saturating_sub(1))
        .filter_map(|s| rank(s, s + 2).map(|r| Reverse((r, s, s + 2))))
        .collect();
    let mut parts = n;
    while let Some(Reverse((_, start, stop))) = heap.pop() {
        // Still two live neighbours spanning exactly start..stop?
        let mid = end[start];
        if mid == 0 || mid >= n || end[mid] != stop {
            continue;
        }
        end[start] = stop;
        end[mid] = 0;
        if stop < n {
            before[stop] = start;
        }
        parts -= 1;
        if start > 0 {
            let left = before[start];
            if let Some(r) = rank(left, stop) {
                heap.push(Reverse((r, left, stop)));
            }
        }
        if stop < n {
            if let Some(r) = rank(start, end[stop]) {
                heap.push(Reverse((r, start, end[stop])));
            }
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::super::{encoder, ranks::ranks, Encoding};
    use super::*;
    use proptest::prelude::*;

    fn check(piece: &[u8]) {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let want = encoder::wait(encoding).bpe.count(piece);
            let ranks = ranks(encoding);
            assert_eq!(count_long(ranks, piece), want, "{piece:?} in {encoding:?}");
            if (2..=MERGE_PIECE_BYTES).contains(&piece.len()) {
                assert_eq!(count_short(ranks, piece), want, "{piece:?} in {encoding:?}");
            }
        }
    }

    #[test]
    fn merging_counts_as_the_encoder_does() {
        // Every window of 2 to 40 bytes of varied text, pieces or not: the merges here and the
        // crate's encoder are implementations of the same BPE.
        let text = "Hello, World! naïve café 中文 x86_64 aGVsbG8gd29ybGQ=/+Zq9 \t\n  def f(x):";
        let b = text.as_bytes();
        for start in 0..b.len() {
            for len in 2..=40.min(b.len() - start) {
                check(&b[start..start + len]);
            }
        }
        for n in [63, 64, 127, 128, 129, 491, 1000, 4096] {
            for c in [b'-', b' ', b'=', b'a', b'\n'] {
                check(&vec![c; n]);
                let mut led = vec![c; n];
                led[0] = if c == b' ' { b'\t' } else { b' ' };
                check(&led);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn long_pieces_merge_as_the_encoder_does(
            piece in prop::collection::vec(
                prop::sample::select(&b"aaeeinst-= _.\n0QZ\xc3\xa9"[..]), 2..300)
        ) {
            check(&piece);
        }
    }
}
