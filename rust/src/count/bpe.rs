//! The `bpe-openai` backend (GitHub's `bpe` crate): the same pre-tokenization as tiktoken, then a
//! backtracking encoder that counts in linear time, even on one long run of a single character.
//! ringbound drives it: ASCII is split by hand (`pretokenize`), pieces up to 15 bytes are
//! merged here by tiktoken's rule (`ranks`), and the counts of pieces up to 62 bytes are
//! remembered (`memo`); the crate's regex and encoder see only what those leave. Its one slow
//! shape — runs of about a hundred to a few hundred identical punctuation or whitespace
//! characters, as in padded logs and ASCII tables (1-3 MB/s) — is counted by `tiktoken-rs`
//! instead, which handles such short runs at several times the speed; all are exact and equal,
//! so no choice changes a count.

use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};

use bpe_openai::Tokenizer;

use super::memo::{Memo, LONG_PIECE_BYTES, SHORT_PIECE_BYTES};
use super::ranks::{short_key, Ranks, MERGE_PIECE_BYTES};
use super::{encoder, pretokenize, tiktoken, Counter, Encoding};

struct BpeOpenai(Encoding);

static O200K_BASE: BpeOpenai = BpeOpenai(Encoding::O200kBase);
static CL100K_BASE: BpeOpenai = BpeOpenai(Encoding::Cl100kBase);

pub(super) fn counter(encoding: Encoding) -> &'static dyn Counter {
    match encoding {
        Encoding::O200kBase => &O200K_BASE,
        Encoding::Cl100kBase => &CL100K_BASE,
    }
}

/// `bpe-openai` itself, whatever the text's shape (the tiktoken backend's own guard uses it),
/// waiting for its tables if they are still being built.
pub(super) fn count_direct(encoding: Encoding, text: &str) -> usize {
    // The tokenizer has no special tokens: `<|endoftext|>` is counted as ordinary text.
    encoder::wait(encoding).count(text)
}

/// Shortest run of one punctuation or whitespace byte that slows `bpe-openai` down.
const SLOW_RUN: usize = 64;
/// From this length on, a run is better left to `bpe-openai`: `tiktoken-rs` merges a piece in
/// time quadratic in its length.
const LONG_RUN: usize = 4096;

/// Whether `text` has the shape `bpe-openai` is slow on: runs of one non-alphanumeric ASCII
/// byte at least `SLOW_RUN` long make up an eighth of it or more (a few such runs in prose
/// cost little, and `bpe-openai` is the faster backend on the rest), and no run of any byte is
/// `LONG_RUN` long.
fn slow_shape(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < SLOW_RUN {
        return false;
    }
    // Every run of `SLOW_RUN` bytes or more holds two bytes `STRIDE` apart at multiples of
    // `STRIDE`: comparing those finds every such run (and a few shorter ones, measured and
    // passed over) while reading one byte in `STRIDE`; every text is asked this before it is
    // counted.
    const STRIDE: usize = SLOW_RUN / 2;
    let (mut in_slow_runs, mut scanned) = (0usize, 0usize);
    let mut k = STRIDE;
    while k < b.len() {
        if k >= scanned && b[k] == b[k - STRIDE] {
            let byte = b[k];
            let start = k - b[..k].iter().rev().take_while(|&&c| c == byte).count();
            let end = k + b[k..].iter().take_while(|&&c| c == byte).count();
            let run = end - start;
            if run >= LONG_RUN {
                return false;
            }
            if run >= SLOW_RUN && byte.is_ascii() && !byte.is_ascii_alphanumeric() {
                in_slow_runs += run;
            }
            scanned = end;
        }
        k += STRIDE;
    }
    in_slow_runs * 8 >= b.len()
}

impl Counter for BpeOpenai {
    fn count(&self, text: &str) -> usize {
        self.count_until(text, usize::MAX).unwrap_or(usize::MAX)
    }

    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        if slow_shape(text) {
            return tiktoken::counter(self.0).count_until(text, limit);
        }
        match encoder::ready(self.0) {
            Some(tokenizer) => count_pieces(self.0, tokenizer, text, limit),
            // The tables are being built: tiktoken-rs counts the same, only slower.
            None => tiktoken::counter(self.0).count_until(text, limit),
        }
    }
}

/// Tables per encoding, each behind its own lock: a count takes the first free one (from a
/// place that depends on the thread, so a thread tends to find the table it warmed), so
/// threads counting at once never wait for each other, and a table outlives the threads that
/// filled it (a gateway's fresh worker thread starts warm). A table is allocated when first
/// used, so a process uses as many as it has threads counting at once; past that many, the
/// count goes without one.
const MEMO_TABLES: usize = 16;

type Table = Mutex<Memo>;

static TABLES: [[Table; MEMO_TABLES]; 2] = [
    [const { Mutex::new(Memo::new()) }; MEMO_TABLES],
    [const { Mutex::new(Memo::new()) }; MEMO_TABLES],
];

thread_local! {
    static FIRST_TABLE: usize = {
        let mut h = std::hash::DefaultHasher::new();
        std::thread::current().id().hash(&mut h);
        h.finish() as usize % MEMO_TABLES
    };
}

/// The rank tables of an encoding, built on its first count with `bpe_openai`'s tables.
fn short_ranks(encoding: Encoding, tokenizer: &Tokenizer) -> &'static Ranks {
    static RANKS: [OnceLock<Ranks>; 2] = [OnceLock::new(), OnceLock::new()];
    RANKS[encoding as usize].get_or_init(|| Ranks::new(&tokenizer.bpe))
}

/// Tokens of a piece of 2 to `MERGE_PIECE_BYTES` bytes by tiktoken's `byte_pair_merge`: a piece
/// that is a token is one; otherwise, starting from single bytes, merge the adjacent pair of
/// lowest rank (the leftmost of equals) until no adjacent pair is a token.
fn merge_count(ranks: &Ranks, piece: &[u8]) -> usize {
    let n = piece.len();
    if ranks.get(piece).is_some() {
        return 1;
    }
    let rank = |from: usize, to: usize| ranks.get(&piece[from..to]).unwrap_or(u32::MAX);
    // tiktoken's loop, on a fixed array: parts[k] = (where part k starts, the rank of part k
    // merged with part k + 1); the last entry marks the end.
    let mut parts = [(0usize, u32::MAX); MERGE_PIECE_BYTES + 1];
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

/// Tokens of one piece of two bytes or more.
fn count_piece(ranks: &Ranks, tokenizer: &Tokenizer, piece: &[u8]) -> usize {
    if piece.len() <= MERGE_PIECE_BYTES {
        merge_count(ranks, piece)
    } else {
        tokenizer.bpe.count(piece)
    }
}

/// Empties every piece table (a cold benchmark must not find the pieces of its last run); the
/// tables stay allocated, as in a process that has counted before.
pub(super) fn forget_pieces() {
    for table in TABLES.iter().flatten() {
        table.lock().unwrap_or_else(|e| e.into_inner()).forget();
    }
}

/// `tokenizer.count(text)`, piece by piece, with the counts of short pieces remembered (a
/// piece's count depends on nothing but its bytes, so the sum is exactly `tokenizer.count`);
/// `None` as soon as the sum passes `limit`.
fn count_pieces(
    encoding: Encoding,
    tokenizer: &Tokenizer,
    text: &str,
    limit: usize,
) -> Option<usize> {
    let tables = &TABLES[encoding as usize];
    let first = FIRST_TABLE.with(|f| *f);
    for i in 0..MEMO_TABLES {
        // A table left poisoned by a panic holds only whole slots (each written at once), so
        // it is still sound to use.
        let guard = match tables[(first + i) % MEMO_TABLES].try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => continue,
        };
        return count_with_table(encoding, tokenizer, text, limit, Some(guard));
    }
    count_with_table(encoding, tokenizer, text, limit, None)
}

fn count_with_table(
    encoding: Encoding,
    tokenizer: &Tokenizer,
    text: &str,
    limit: usize,
    mut memo: Option<MutexGuard<Memo>>,
) -> Option<usize> {
    if let Some(memo) = memo.as_mut() {
        memo.allocate();
    }
    let ranks = short_ranks(encoding, tokenizer);
    let b = text.as_bytes();
    let (mut total, mut p) = (0, 0);
    while p < b.len() {
        let end = match pretokenize::piece_end(encoding, b, p) {
            Some(end) => end,
            // The regex matches at every place of a text; were it not to, bpe-openai's own
            // count would end there too.
            None => match tokenizer.split(&text[p..]).next() {
                Some(piece) => p + piece.len(),
                None => break,
            },
        };
        let piece = &b[p..end];
        p = end;
        total += match (piece.len(), memo.as_mut()) {
            // Every byte is a token of its own in these vocabularies.
            (1, _) => 1,
            // A pair is one token or two, looked up directly.
            (2, _) => 2 - usize::from(ranks.pair(piece[0], piece[1]).is_some()),
            (n, Some(memo)) if n <= SHORT_PIECE_BYTES => {
                memo.short(short_key(piece), || merge_count(ranks, piece))
            }
            (n, Some(memo)) if n <= LONG_PIECE_BYTES => {
                memo.long(piece, || count_piece(ranks, tokenizer, piece))
            }
            _ => count_piece(ranks, tokenizer, piece),
        };
        if total > limit {
            return None;
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer(encoding: Encoding) -> &'static Tokenizer {
        encoder::wait(encoding)
    }

    #[test]
    fn slow_shapes_are_recognized_as_by_a_byte_scan() {
        for text in [
            "-".repeat(63),
            "-".repeat(64),
            format!("{}{}", "x".repeat(31), "-".repeat(64)),
            format!("{}{}", "-".repeat(70), "a".repeat(500)),
            format!("{}{}", "=".repeat(100), "a".repeat(700)),
            format!("{}{}", "=".repeat(100), "a".repeat(701)),
            "-".repeat(LONG_RUN),
            format!("{}{}", "a".repeat(LONG_RUN + 1), "-".repeat(900)),
        ] {
            assert_eq!(slow_shape(&text), slow_shape_by_byte(&text), "{text:?}");
        }
    }

    /// The definition, one byte at a time.
    fn slow_shape_by_byte(text: &str) -> bool {
        let b = text.as_bytes();
        if b.len() < SLOW_RUN {
            return false;
        }
        let (mut in_slow_runs, mut run) = (0usize, 1usize);
        let mut close = |run: usize, byte: u8| {
            if run >= SLOW_RUN && byte.is_ascii() && !byte.is_ascii_alphanumeric() {
                in_slow_runs += run;
            }
        };
        for i in 1..b.len() {
            if b[i] == b[i - 1] {
                run += 1;
                if run >= LONG_RUN {
                    return false;
                }
            } else {
                close(run, b[i - 1]);
                run = 1;
            }
        }
        close(run, b[b.len() - 1]);
        in_slow_runs * 8 >= b.len()
    }

    proptest::proptest! {
        #[test]
        fn slow_shapes_agree_with_the_definition(
            runs in proptest::collection::vec(("[-= a.\n]", 1usize..200), 0..40)
        ) {
            let text: String = runs.iter().map(|(c, n)| c.repeat(*n)).collect();
            proptest::prop_assert_eq!(slow_shape(&text), slow_shape_by_byte(&text));
        }
    }

    #[test]
    fn slow_shapes_are_recognized() {
        assert!(slow_shape(&format!("x{}y", "-".repeat(200))));
        assert!(slow_shape(&format!("a{}b", " ".repeat(64))));
        assert!(!slow_shape(&format!("a{}b", " ".repeat(63))));
        let prose_with_a_rule = format!("{}{}{}", "words ".repeat(500), "-".repeat(80), "end");
        assert!(
            !slow_shape(&prose_with_a_rule),
            "a few runs in prose stay with bpe-openai"
        );
        assert!(
            !slow_shape(&"a".repeat(1000)),
            "letters are fast in bpe-openai"
        );
        assert!(!slow_shape(&format!(
            "{}{}",
            "-".repeat(200),
            "=".repeat(5000)
        )));
        assert!(!slow_shape("short"));
    }

    #[test]
    fn remembered_piece_counts_are_exact() {
        let long_word = "x".repeat(LONG_PIECE_BYTES);
        let longer_word = "y".repeat(LONG_PIECE_BYTES + 1);
        let texts = [
            "the cat sat on the mat; the cat sat again".to_owned(),
            format!("{long_word} {long_word} {longer_word} {longer_word}"),
            "é中👋 é中👋 é中👋".to_owned(),
            "    def f(self):\n        return self.x\n".repeat(40),
        ];
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            // Twice over, so the second pass reads what the first remembered.
            for _ in 0..2 {
                for t in &texts {
                    let direct = count_direct(enc, t);
                    assert_eq!(counter(enc).count(t), direct, "{t:?}");
                    assert_eq!(tiktoken::counter(enc).count(t), direct, "{t:?}");
                }
            }
        }
    }

    #[test]
    fn merging_short_pieces_counts_as_the_encoder_does() {
        // Every window of 2 to MERGE_PIECE_BYTES bytes of varied text, pieces or not: the
        // merge here and the crate's encoder are two implementations of the same BPE.
        let text = "Hello, World! naïve café 中文 x86_64 aGVsbG8gd29ybGQ=/+Zq9 \t\n  def f(x):";
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let (ranks, bpe) = (short_ranks(enc, tokenizer(enc)), &tokenizer(enc).bpe);
            let b = text.as_bytes();
            for start in 0..b.len() {
                for len in 2..=MERGE_PIECE_BYTES.min(b.len() - start) {
                    let w = &b[start..start + len];
                    assert_eq!(merge_count(ranks, w), bpe.count(w), "{w:?} in {enc:?}");
                }
            }
        }
    }

    #[test]
    fn threads_past_the_tables_count_the_same() {
        // More threads than tables: some count without one, all must agree.
        let text = "    def parse(self, line):\n        return line.split(', ')\n".repeat(200);
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let want = count_direct(enc, &text);
            assert_eq!(
                count_with_table(enc, tokenizer(enc), &text, usize::MAX, None),
                Some(want),
                "{enc:?} without a table"
            );
            std::thread::scope(|s| {
                let workers: Vec<_> = (0..MEMO_TABLES + 8)
                    .map(|_| s.spawn(|| (0..20).map(|_| counter(enc).count(&text)).max()))
                    .collect();
                for w in workers {
                    assert_eq!(w.join().expect("no panic"), Some(want), "{enc:?}");
                }
            });
        }
    }

    #[test]
    fn routing_never_changes_a_count() {
        let texts = [
            ("x".to_owned() + &"-".repeat(491)).repeat(50),
            format!("| a{}| b |\n", " ".repeat(150)).repeat(40),
            "=".repeat(5000),
            "prose without runs, just words.".repeat(30),
        ];
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for t in &texts {
                assert_eq!(counter(enc).count(t), count_direct(enc, t), "{enc:?}");
            }
        }
    }
}
