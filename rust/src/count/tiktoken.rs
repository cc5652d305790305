//! The `tiktoken-rs` backend: OpenAI's own algorithm (split by regex, merge by rank), the
//! reference the faster backend is checked against.

use tiktoken_rs::CoreBPE;

use super::{bpe, Counter, Encoding};

/// fancy-regex, under tiktoken's `\s+(?!\S)`, keeps one backtracking entry per character of a
/// whitespace run and errors past a million of them, an error tiktoken-rs unwraps. Texts with a
/// run this long (a tenth of that) are counted by bpe-openai, whose counts are tested equal.
const WHITESPACE_RUN_LIMIT: usize = 100_000;

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
pub(super) fn core(encoding: Encoding) -> &'static CoreBPE {
    (tiktoken(encoding).bpe)()
}

impl Counter for Tiktoken {
    fn count(&self, text: &str) -> usize {
        if text.len() >= WHITESPACE_RUN_LIMIT && has_whitespace_run(text, WHITESPACE_RUN_LIMIT) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_whitespace_runs() {
        assert!(has_whitespace_run("a   b", 3));
        assert!(!has_whitespace_run("a  b  c", 3));
        assert!(has_whitespace_run("a \t\u{3000}", 3));
        assert!(!has_whitespace_run("", 1));
    }
}
