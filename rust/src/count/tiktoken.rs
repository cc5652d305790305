//! The `tiktoken-rs` backend: OpenAI's own algorithm (split by regex, merge by rank), the
//! reference the faster backend is checked against.

use tiktoken_rs::CoreBPE;

use super::{bpe, Counter, Encoding};

/// fancy-regex, under tiktoken's `\s+(?!\S)`, keeps one backtracking entry per character of a
/// whitespace run and errors past a million of them, an error tiktoken-rs unwraps. Texts with a
/// run this long (a tenth of that) are counted by bpe-openai, whose counts are tested equal.
const WHITESPACE_RUN_LIMIT: usize = 100_000;

/// tiktoken-rs merges a long piece at about 2 MB/s with some 48 bytes of working memory per
/// byte (a 50 MB run of one letter: 33 s and 2.6 GB). Texts that may hold a piece this long
/// are counted by bpe-openai, linear in time and memory, whose counts are tested equal.
const LONG_PIECE_LIMIT: usize = 64 * 1024;

struct Tiktoken {
    encoding: Encoding,
    bpe: fn() -> &'static CoreBPE,
}

static O200K_BASE: Tiktoken = Tiktoken {
    encoding: Encoding::O200kBase,
    bpe: tiktoken_rs::o200k_base_singleton,
};

static CL100K_BASE: Tiktoken = Tiktoken {
    encoding: Encoding::Cl100kBase,
    bpe: tiktoken_rs::cl100k_base_singleton,
};

pub(super) fn counter(encoding: Encoding) -> &'static dyn Counter {
    tiktoken(encoding)
}

fn tiktoken(encoding: Encoding) -> &'static Tiktoken {
    match encoding {
        Encoding::O200kBase => &O200K_BASE,
        Encoding::Cl100kBase => &CL100K_BASE,
    }
}

/// `tiktoken-rs`'s tokenizer, built on first use from the vocabulary it embeds: the one copy
/// of each vocabulary in the extension, which `bpe_openai`'s tables are built from too.
#[cfg(test)]
pub(super) fn core(encoding: Encoding) -> &'static CoreBPE {
    (tiktoken(encoding).bpe)()
}

impl Counter for Tiktoken {
    fn count(&self, text: &str) -> usize {
        if text.len() >= WHITESPACE_RUN_LIMIT && has_whitespace_run(text, WHITESPACE_RUN_LIMIT)
            || may_hold_long_piece(text, LONG_PIECE_LIMIT)
        {
            return bpe::count_direct(self.encoding, text);
        }
        // `count_ordinary` never treats `<|endoftext|>` and the like as special tokens.
        (self.bpe)().count_ordinary(text)
    }
}

/// Whether `text` holds `limit` consecutive whitespace characters (`char::is_whitespace` is the
/// regex's `\s`: Unicode White_Space).
fn has_whitespace_run(text: &str, limit: usize) -> bool {
    let mut run = 0;
    for c in text.chars() {
        if c.is_whitespace() {
            run += 1;
            if run >= limit {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Whether the pre-tokenizer of either encoding might cut a piece of `bytes` or more from
/// `text`: false is certain, true may be wrong. A piece of either pattern holds no ASCII digit
/// unless it is one to three digits, and past its first character its ASCII bytes are of one
/// class (letters; spaces and line ends; anything else), but for a tail of line ends after
/// punctuation. So a piece of `bytes` holds a stretch of at least `(bytes - 4) / 2` bytes
/// whose ASCII bytes are all of one class and none a digit; the bytes of other scripts are
/// taken to fit any class. One pass, no allocation.
pub(super) fn may_hold_long_piece(text: &str, bytes: usize) -> bool {
    let stretch = (bytes.saturating_sub(4) / 2).max(1);
    let b = text.as_bytes();
    if b.len() < stretch {
        return false;
    }
    // Where the current stretch may begin, the class of its ASCII bytes, and just past the
    // last ASCII byte read: on a change of class the new stretch takes the bytes of other
    // scripts after it.
    let (mut start, mut class, mut after_ascii) = (0, Stretch::None, 0);
    for (i, &c) in b.iter().enumerate() {
        if c.is_ascii() {
            let this = Stretch::of(c);
            if this == Stretch::None {
                start = i + 1;
            } else if class != this && class != Stretch::None {
                start = after_ascii;
            }
            class = this;
            after_ascii = i + 1;
        }
        if i + 1 - start >= stretch {
            return true;
        }
    }
    false
}

/// The classes of ASCII bytes a piece does not mix; `None` for digits, which end any
/// stretch (a digit is a piece of its own or of up to three digits).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stretch {
    None,
    Letter,
    Space,
    Other,
}

impl Stretch {
    fn of(c: u8) -> Stretch {
        match c {
            b'0'..=b'9' => Stretch::None,
            b'a'..=b'z' | b'A'..=b'Z' => Stretch::Letter,
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => Stretch::Space,
            _ => Stretch::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Never false where a piece is that long: the over-estimate only ever sends a text
        /// to the faster backend, never keeps a long piece from it.
        #[test]
        fn a_long_piece_is_never_missed(
            parts in proptest::collection::vec(
                "[a-zA-Z]{0,40}|[ \t\n\r]{0,40}|[-=.,!/'\"]{0,40}|[0-9]{0,5}|[é中👋\u{3000}\u{301}]{0,12}",
                0..12,
            ),
            bytes in 6usize..60,
        ) {
            let text = parts.concat();
            for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
                let longest = super::super::encoder::wait(encoding)
                    .split(&text)
                    .map(str::len)
                    .max()
                    .unwrap_or(0);
                if longest >= bytes {
                    proptest::prop_assert!(may_hold_long_piece(&text, bytes), "{:?}", text);
                }
            }
        }
    }

    #[test]
    fn long_pieces_are_found_and_short_ones_pass() {
        assert!(may_hold_long_piece(&"x".repeat(2000), 1024));
        assert!(may_hold_long_piece(&"中".repeat(700), 1024));
        assert!(may_hold_long_piece(&format!("a{}", "-=".repeat(600)), 1024));
        assert!(!may_hold_long_piece(&"word ".repeat(2000), 1024));
        assert!(!may_hold_long_piece(&"x1".repeat(2000), 1024));
        assert!(!may_hold_long_piece(&"ab-cd ".repeat(2000), 1024));
    }

    #[test]
    fn finds_whitespace_runs() {
        assert!(has_whitespace_run("a   b", 3));
        assert!(!has_whitespace_run("a  b  c", 3));
        assert!(has_whitespace_run("a \t\u{3000}", 3));
        assert!(!has_whitespace_run("", 1));
    }
}
