//! The `bpe-openai` backend (GitHub's `bpe` crate): the same pre-tokenization as tiktoken, then a
//! backtracking encoder that counts in linear time, even on one long run of a single character.
//! ringbound drives it: ASCII is split by hand (`pretokenize`), pieces up to 15 bytes are
//! merged here by tiktoken's rule (`ranks`), the counts of pieces up to 62 bytes are
//! remembered (`memo`), and so are runs of one byte (`memo::run_key`); the crate's regex and
//! encoder see only what those leave. Its one slow shape, runs of about a hundred to a few
//! thousand identical punctuation or whitespace characters, as in padded logs and ASCII tables
//! (1-3 MB/s), is counted by `tiktoken-rs` instead, a run at a time, which handles such runs at
//! several times the speed; all are exact and equal, so no choice changes a count.

use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard, TryLockError};

use bpe_openai::Tokenizer;

use super::memo::{run_key, Memo, LONG_PIECE_BYTES, SHORT_PIECE_BYTES};
use super::ranks::{ranks, short_key, Ranks, MERGE_PIECE_BYTES};
use super::{encoder, merge, pretokenize, Counter, Encoding};

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

/// Runs of one byte from this long (padded logs, ASCII tables) are slow in `bpe-openai`'s
/// encoder (1-3 MB/s); the merge here takes them at several times that.
const SLOW_RUN: usize = 64;
/// From this length on, a run is better left to `bpe-openai`, linear where the merge here
/// takes `n log n`.
const LONG_RUN: usize = 4096;

impl Counter for BpeOpenai {
    fn count(&self, text: &str) -> usize {
        self.count_until(text, usize::MAX).unwrap_or(usize::MAX)
    }

    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        count_pieces(self.0, text, limit)
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

/// The first piece this long starts the build of `bpe-openai`'s tables: a process that meets
/// long pieces (lines of a script without spaces, long words, encoded blobs) gets the linear
/// encoder for them a second later; one that never does never pays for the tables (about a
/// second of a core and 150 MB).
const START_TABLES_PIECE: usize = 256;
/// Before the tables are built, a piece this long waits for them (the merge here is `n log n`
/// in a piece and needs memory for each of its bytes) ...
const COLD_PIECE_BYTES: usize = 64 << 10;
/// ... and so does any piece of 1 KiB or more once a count has merged this many bytes of such
/// pieces itself: past that, the wait (about a second) and the linear count cost less.
const COLD_LONG_BYTES: usize = 4 << 20;
const LONG_COLD_PIECE_BYTES: usize = 1024;

/// How one count counts pieces: the rank tables, and `bpe-openai`'s encoder once built.
struct Merger {
    encoding: Encoding,
    ranks: &'static Ranks,
    tokenizer: Option<&'static Tokenizer>,
    /// Bytes of pieces of `LONG_COLD_PIECE_BYTES` or more merged here so far.
    merged_long: usize,
}

impl Merger {
    fn new(encoding: Encoding) -> Merger {
        Merger {
            encoding,
            ranks: ranks(encoding),
            tokenizer: encoder::built(encoding),
            merged_long: 0,
        }
    }

    /// As a fresh process counts, before the encoder's tables are built.
    #[cfg(test)]
    fn cold(encoding: Encoding) -> Merger {
        Merger {
            tokenizer: None,
            ..Merger::new(encoding)
        }
    }

    /// Tokens of one piece of two bytes or more: by the merge here, or by `bpe-openai`'s
    /// encoder for a long piece once its tables are built.
    fn piece(&mut self, piece: &[u8]) -> usize {
        let n = piece.len();
        if n <= MERGE_PIECE_BYTES {
            return merge::count_short(self.ranks, piece);
        }
        if self.tokenizer.is_none() && n >= START_TABLES_PIECE {
            encoder::ready(self.encoding);
            if n >= LONG_COLD_PIECE_BYTES {
                self.merged_long += n;
            }
            if n >= COLD_PIECE_BYTES || self.merged_long > COLD_LONG_BYTES {
                self.tokenizer = Some(encoder::wait(self.encoding));
            }
        }
        match self.tokenizer {
            Some(tokenizer) => tokenizer.bpe.count(piece),
            None => merge::count_long(self.ranks, piece),
        }
    }

    /// Tokens of a run piece (`memo::run_key`): by the merge here in the lengths
    /// `bpe-openai` is slow on.
    fn run(&mut self, piece: &[u8]) -> usize {
        if (SLOW_RUN..LONG_RUN).contains(&piece.len()) {
            merge::count_long(self.ranks, piece)
        } else {
            self.piece(piece)
        }
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
fn count_pieces(encoding: Encoding, text: &str, limit: usize) -> Option<usize> {
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
        return count_with_table(Merger::new(encoding), text, limit, Some(guard));
    }
    count_with_table(Merger::new(encoding), text, limit, None)
}

fn count_with_table(
    mut merger: Merger,
    text: &str,
    limit: usize,
    mut memo: Option<MutexGuard<Memo>>,
) -> Option<usize> {
    if let Some(memo) = memo.as_mut() {
        memo.allocate();
    }
    let (encoding, ranks) = (merger.encoding, merger.ranks);
    let b = text.as_bytes();
    let (mut total, mut p) = (0, 0);
    while p < b.len() {
        let end = match pretokenize::piece_end(encoding, b, p) {
            Some(end) => end,
            // The regex matches at every place of a text; were it not to, bpe-openai's own
            // count would end there too.
            None => match encoder::splitter(encoding).split(&text[p..]).next() {
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
                memo.short(short_key(piece), || merge::count_short(ranks, piece))
            }
            (n, Some(memo)) if n <= LONG_PIECE_BYTES => memo.long(piece, || merger.piece(piece)),
            (_, memo) => match (run_key(piece), memo) {
                (Some(key), Some(memo)) => memo.run(key, || merger.run(piece)),
                (Some(_), None) => merger.run(piece),
                (None, _) => merger.piece(piece),
            },
        };
        if total > limit {
            return None;
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::super::tiktoken;
    use super::*;

    /// The count of a fresh process, before the encoder's tables are built, with a fresh
    /// table of pieces or none.
    fn cold(encoding: Encoding, text: &str, memo: bool) -> Option<usize> {
        let table = Mutex::new(Memo::new());
        let guard = memo.then(|| table.lock().expect("a fresh lock"));
        count_with_table(Merger::cold(encoding), text, usize::MAX, guard)
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
    fn threads_past_the_tables_count_the_same() {
        // More threads than tables: some count without one, all must agree.
        let text = "    def parse(self, line):\n        return line.split(', ')\n".repeat(200);
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let want = count_direct(enc, &text);
            assert_eq!(
                count_with_table(Merger::new(enc), &text, usize::MAX, None),
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
            // Runs of every length band, alone and after a space, a letter or a mark, twice
            // over (the second time from the table of runs).
            [63, 64, 65, 100, 491, 600, 4095, 4096, 5000]
                .iter()
                .map(|&n| {
                    format!(
                        "x{d} {d}\n{s}y {e}\"{a} {a}\n{n}",
                        d = "-".repeat(n),
                        s = " ".repeat(n),
                        e = "=".repeat(n),
                        a = "a".repeat(n),
                        n = "\n".repeat(n),
                    )
                })
                .collect::<String>()
                .repeat(2),
        ];
        for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
            for t in &texts {
                let direct = count_direct(enc, t);
                assert_eq!(counter(enc).count(t), direct, "{enc:?}");
                // As a fresh process counts before the tables are built, with and without a
                // table of pieces.
                assert_eq!(cold(enc, t, true), Some(direct), "{enc:?}");
                assert_eq!(cold(enc, t, false), Some(direct));
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Before the tables are built, every text counts as `bpe-openai` counts it.
        #[test]
        fn counts_before_the_tables_are_exact(text in "\\PC{0,300}|[a-z -=\n]{0,2000}") {
            for enc in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let direct = count_direct(enc, &text);
                proptest::prop_assert_eq!(cold(enc, &text, true), Some(direct));
            }
        }
    }
}
