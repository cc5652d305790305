//! The `bpe-openai` backend (GitHub's `bpe` crate): the same pre-tokenization as tiktoken, then a
//! backtracking encoder that counts in linear time, even on one long run of a single character.

use bpe_openai::Tokenizer;

use super::{Counter, Encoding};

struct BpeOpenai(fn() -> &'static Tokenizer);

static O200K_BASE: BpeOpenai = BpeOpenai(bpe_openai::o200k_base);
static CL100K_BASE: BpeOpenai = BpeOpenai(bpe_openai::cl100k_base);

pub(super) fn counter(encoding: Encoding) -> &'static dyn Counter {
    match encoding {
        Encoding::O200kBase => &O200K_BASE,
        Encoding::Cl100kBase => &CL100K_BASE,
    }
}

impl Counter for BpeOpenai {
    fn count(&self, text: &str) -> usize {
        // The tokenizer has no special tokens: `<|endoftext|>` is counted as ordinary text.
        (self.0)().count(text)
    }
}
