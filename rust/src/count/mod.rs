//! Exact token counts: the BPE encodings OpenAI models read, behind one `Counter` trait with two
//! interchangeable backends, plus what a request costs around its texts (message framing, images,
//! the `tools` parameter).

mod bpe;
pub mod chat;
mod encoder;
pub mod image;
pub mod image_price;
mod memo;
mod merge;
mod pretokenize;
mod rank_layout;
#[cfg(test)]
mod rank_writer;
mod ranks;
mod tiktoken;
pub mod tools;

/// A BPE vocabulary and its pre-tokenization pattern, named as tiktoken names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200kBase,
    Cl100kBase,
}

impl Encoding {
    pub fn from_name(name: &str) -> Option<Encoding> {
        match name {
            "o200k_base" => Some(Encoding::O200kBase),
            "cl100k_base" => Some(Encoding::Cl100kBase),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// The library that does the counting. Both give the same counts; they differ in speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `tiktoken-rs`: OpenAI's own algorithm (regex split, then merges by rank).
    Tiktoken,
    /// GitHub's `bpe-openai`: the same split, then a backtracking encoder that counts without
    /// building the token list, in time linear in the input.
    BpeOpenai,
}

impl Backend {
    pub fn from_name(name: &str) -> Option<Backend> {
        match name {
            "tiktoken" => Some(Backend::Tiktoken),
            "bpe_openai" => Some(Backend::BpeOpenai),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Tiktoken => "tiktoken",
            Backend::BpeOpenai => "bpe_openai",
        }
    }
}

/// `bpe-openai`. Measured on 5 MB inputs in a release build: 1.6-2.5x faster than `tiktoken-rs`
/// on prose and code, 1.3-1.7x on random base64, 30-60x on one letter repeated, where
/// `tiktoken-rs` falls to 2 MB/s and keeps slowing as the run grows. Its own slow case, runs of
/// 100-600 identical spaces or punctuation marks back to back (2-3 MB/s), is about as slow as
/// that worst case of `tiktoken-rs`, which also needs a guard against panicking on whitespace.
pub const DEFAULT_BACKEND: Backend = Backend::BpeOpenai;

/// Exact BPE token count of a text for one encoding.
pub trait Counter: Send + Sync {
    /// Tokens of `text` as ordinary text: strings that look like special tokens
    /// (`<|endoftext|>`) are counted as the characters they are.
    fn count(&self, text: &str) -> usize;

    /// `Some(count(text))` when it is at most `limit`, else `None`; a backend may stop as soon
    /// as the limit is passed, so a huge text costs about `limit` tokens of work.
    fn count_until(&self, text: &str, limit: usize) -> Option<usize> {
        let n = self.count(text);
        (n <= limit).then_some(n)
    }
}

/// Forgets the token counts of text pieces remembered so far (`bpe_openai` keeps the counts of
/// short pieces it has seen: a cache of its own, apart from the cache of message counts).
pub fn forget_pieces() {
    bpe::forget_pieces();
}

/// The process-wide counter for an encoding and backend. `tiktoken`'s vocabulary is built on
/// its first count; `bpe_openai` counts from its first text with rank tables laid out at build
/// time, and builds its encoder's tables on a thread of its own only once it meets a long
/// piece (see `wait_for_tables`).
pub fn counter(encoding: Encoding, backend: Backend) -> &'static dyn Counter {
    match backend {
        Backend::Tiktoken => tiktoken::counter(encoding),
        Backend::BpeOpenai => bpe::counter(encoding),
    }
}

/// Blocks until the `bpe_openai` encoder's tables of `encoding` are built (starting their build
/// if nothing has yet): from then on that backend counts long pieces with its linear encoder.
/// For a process that would rather pay the build before its first long piece, and for tests and
/// benchmarks of that backend.
pub fn wait_for_tables(encoding: Encoding) {
    encoder::wait(encoding);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ENCODINGS: [Encoding; 2] = [Encoding::O200kBase, Encoding::Cl100kBase];
    const BACKENDS: [Backend; 2] = [Backend::Tiktoken, Backend::BpeOpenai];

    #[test]
    fn names_round_trip() {
        for e in ENCODINGS {
            assert_eq!(Encoding::from_name(e.name()), Some(e));
        }
        for b in BACKENDS {
            assert_eq!(Backend::from_name(b.name()), Some(b));
        }
        assert_eq!(Encoding::from_name("p50k_base"), None);
        assert_eq!(Backend::from_name("Tiktoken"), None);
    }

    /// Counts published in the OpenAI cookbook ("How to count tokens with tiktoken") or
    /// computed with Python tiktoken 0.14 (cl100k_base; o200k_base was not available offline,
    /// so those rows are the cookbook's).
    #[test]
    fn known_counts() {
        let cases: &[(Encoding, &str, usize)] = &[
            (Encoding::Cl100kBase, "hello world", 2),
            (Encoding::O200kBase, "hello world", 2),
            (Encoding::Cl100kBase, "tiktoken is great!", 6),
            (Encoding::O200kBase, "tiktoken is great!", 6),
            (Encoding::Cl100kBase, "antidisestablishmentarianism", 6),
            (Encoding::O200kBase, "antidisestablishmentarianism", 6),
            (Encoding::Cl100kBase, "2 + 2 = 4", 7),
            (Encoding::O200kBase, "2 + 2 = 4", 7),
            (Encoding::Cl100kBase, "お誕生日おめでとう", 9),
            (Encoding::O200kBase, "お誕生日おめでとう", 8),
            (Encoding::Cl100kBase, "", 0),
            (Encoding::Cl100kBase, "<|endoftext|>", 7),
            (
                Encoding::Cl100kBase,
                "hello <|endoftext|> world <|fim_prefix|>",
                14,
            ),
            (Encoding::Cl100kBase, "\n\n\n", 1),
            (Encoding::Cl100kBase, "12345678901234567890", 7),
            (
                Encoding::Cl100kBase,
                "fn main() {\n    println!(\"hi\");\n}\n",
                10,
            ),
            (Encoding::Cl100kBase, "👋🏽 café naïve 中文字符", 12),
            (Encoding::Cl100kBase, "a   b\t\t\tc \n  \n   ", 7),
        ];
        for &(encoding, text, expected) in cases {
            wait_for_tables(encoding);
            for backend in BACKENDS {
                assert_eq!(
                    counter(encoding, backend).count(text),
                    expected,
                    "{text:?} in {} by {}",
                    encoding.name(),
                    backend.name()
                );
            }
        }
    }

    fn assert_backends_agree(text: &str) {
        for encoding in ENCODINGS {
            // Otherwise bpe_openai may still be counting with tiktoken.
            wait_for_tables(encoding);
            let tiktoken = counter(encoding, Backend::Tiktoken).count(text);
            let bpe = counter(encoding, Backend::BpeOpenai).count(text);
            assert_eq!(tiktoken, bpe, "{text:?} in {}", encoding.name());
        }
    }

    #[test]
    fn backends_agree_on_varied_texts() {
        let long_digits = "1234567890".repeat(500);
        let one_char = "a".repeat(20_000);
        let spaces = " ".repeat(5_000) + "x";
        let newlines = "\n".repeat(3_000) + "  \n \t";
        let texts = [
            "",
            " ",
            "hello world",
            "Hello, World! It's a TEST they'll've done. I'M HERE.",
            "naïve café, Zürich, São Paulo, Ελληνικά, русский текст, עברית, العربية",
            "中文字符和日本語のテキスト、한국어 텍스트",
            "emoji 👋🏽👨‍👩‍👧‍👦🏳️‍🌈 and flags 🇫🇷🇯🇵",
            "tabs\t\tand   spaces    and\u{a0}nbsp\u{3000}ideographic",
            "\n\n\n",
            "trailing spaces   ",
            "line\r\nwindows\r\n\r\n  indented\n\t\ttabbed\n",
            "fn main() {\n    let x = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n",
            r#"{"role":"user","content":[{"type":"text","text":"hi"}],"n":12345.678e-9}"#,
            "<|endoftext|><|fim_prefix|><|fim_middle|><|fim_suffix|><|endofprompt|>",
            "path/to/file.rs:12:34 // comment /* block */ http://example.com/a?b=c&d=e",
            "combining marks: e\u{301} a\u{308}\u{323} ﷽ ǅ",
            &long_digits,
            &one_char,
            &spaces,
            &newlines,
        ];
        for text in texts {
            assert_backends_agree(text);
        }
    }

    // tiktoken-rs unwraps its regex's error on a whitespace run near a million characters;
    // the Tiktoken counter must still answer, and answer exactly.
    #[test]
    fn tiktoken_survives_a_million_spaces() {
        let text = " ".repeat(1_200_000) + "x";
        for encoding in ENCODINGS {
            let tiktoken = counter(encoding, Backend::Tiktoken).count(&text);
            let bpe = counter(encoding, Backend::BpeOpenai).count(&text);
            assert_eq!(tiktoken, bpe);
            assert!(tiktoken > 1_200_000 / 128, "{tiktoken}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn backends_agree_on_any_string(text in any::<String>()) {
            assert_backends_agree(&text);
        }

        #[test]
        fn backends_agree_on_pieces_the_patterns_treat_apart(
            pieces in prop::collection::vec(prop::sample::select(&[
                " ", "   ", "\n", "\r\n", "\t", "\u{a0}", "\u{3000}", "'s", "'LL", "'ve",
                "word", "Word", "WORD", "123", "4567", "中文", "ひらがな", "👋🏽", "é", "\u{301}",
                "<|endoftext|>", "...", "/", "//", "{\"k\":", "-->", "$x",
            ][..]), 0..80)
        ) {
            assert_backends_agree(&pieces.concat());
        }

        #[test]
        fn backends_agree_on_random_short_pieces(
            text in "[A-Za-z0-9+/=]{0,300}|[a-zA-Z]{1,7}( [a-zA-Z]{1,7}){0,30}"
        ) {
            assert_backends_agree(&text);
        }

        #[test]
        fn backends_agree_on_text_like_strings(
            text in "[a-zA-Z0-9 \t\n\r'.,!?:;/(){}\"<|>_-]{0,200}"
        ) {
            assert_backends_agree(&text);
        }
    }
}
