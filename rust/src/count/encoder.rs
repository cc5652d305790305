//! `bpe-openai`'s tokenizers, built from the token list of the rank tables (`ranks`). The
//! tables `bpe-openai` ships prebuilt are 47 MB, ten times the vocabularies they come from, and
//! building them takes about a second (o200k_base: 0.6-2.3 s of one core). The `bpe_openai`
//! backend merges pieces itself (`merge`) from the rank tables, which cost nothing to build,
//! and needs these tables only for long pieces, which its encoder counts in linear time: the
//! first piece of `bpe::START_TABLES_PIECE` bytes starts their build on a thread of its own, and
//! a piece that would cost more to merge than to wait for (`bpe::Merger`) waits. A
//! process forked while a build runs starts its own when it next needs them.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use bpe_openai::byte_pair_encoding::BytePairEncoding;
use bpe_openai::Tokenizer;

use super::ranks::{page_in, ranks};
use super::Encoding;

/// The tokenizer of each encoding once built: published by one atomic store, so a reader
/// never waits, and a process forked mid-build inherits no lock.
static BUILT: [AtomicPtr<Tokenizer>; 2] = [AtomicPtr::new(null_mut()), AtomicPtr::new(null_mut())];
/// The process that started each build (0: none yet).
static BUILDER: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];

/// The hash factor `bpe-openai` builds both vocabularies with: its token hashes have no
/// collision under it (the default factor collides, and the build would assert).
const HASH_FACTOR: u64 = 17_846_336_922_010_275_747;

/// The tokenizer if built; otherwise starts its build (once per process) and answers `None`.
pub(super) fn ready(encoding: Encoding) -> Option<&'static Tokenizer> {
    let tokenizer = built(encoding);
    if tokenizer.is_none() {
        start(encoding);
    }
    tokenizer
}

/// The tokenizer if built, starting nothing.
pub(super) fn built(encoding: Encoding) -> Option<&'static Tokenizer> {
    let built = BUILT[encoding as usize].load(Ordering::Acquire);
    // SAFETY: a non-null pointer was made by `Box::into_raw` in `publish` and is never freed.
    (!built.is_null()).then(|| unsafe { &*built })
}

/// The tokenizer, waiting for its build if it is under way.
pub(super) fn wait(encoding: Encoding) -> &'static Tokenizer {
    loop {
        if let Some(tokenizer) = ready(encoding) {
            return tokenizer;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn start(encoding: Encoding) {
    let pid = std::process::id();
    if BUILDER[encoding as usize].swap(pid, Ordering::AcqRel) == pid {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name(format!("ringbound-{}", encoding.name()))
        .spawn(move || prepare(encoding));
    if spawned.is_err() {
        // No thread to be had (a process at its limit): build here rather than never.
        prepare(encoding);
    }
}

/// Everything a count of `encoding` may need, made resident before the tokenizer is
/// published, so that whoever waits for it (`warmup()`) finds the process as it will stay:
/// the rank tables paged in, the tokenizer built, and what its build freed given back.
fn prepare(encoding: Encoding) {
    page_in(encoding);
    let tokenizer = build(encoding);
    give_back_freed();
    publish(encoding, tokenizer);
}

/// Returns the memory the build freed to the system, once per build. The build allocates
/// about three times what it keeps (o200k_base: about 90 MB resident for 35 MB of tables,
/// `bpe-openai`'s automaton builders and hash maps grown by doubling), and glibc keeps what
/// was freed in the builder thread's arena, which no other thread uses until a new thread
/// takes it over: 50 MB of a process's RSS for o200k_base and 20 MB for cl100k_base, never
/// used again. Not after counts: they free little, into arenas their own threads reuse.
fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's malloc_trim takes no pointer and locks each arena it trims.
        unsafe {
            malloc_trim(0);
        }
    }
}

fn publish(encoding: Encoding, tokenizer: Tokenizer) {
    let built = Box::into_raw(Box::new(tokenizer));
    let slot = &BUILT[encoding as usize];
    if slot
        .compare_exchange(null_mut(), built, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // SAFETY: `built` was never shared; another build published first.
        drop(unsafe { Box::from_raw(built) });
    }
}

/// `bpe-openai`'s tables and pre-tokenizer, from the vocabulary's tokens in rank order (the
/// token list of the rank tables, `ranks`).
fn build(encoding: Encoding) -> Tokenizer {
    let ranks = ranks(encoding);
    let tokens = (0..ranks.num_tokens() as u32).map(|rank| ranks.token(rank).to_vec());
    let bpe = BytePairEncoding::from_dictionary(tokens, Some(HASH_FACTOR));
    Tokenizer::new_lookahead(bpe, &patterns(encoding), false).expect("valid pre-tokenizer")
}

/// The pre-tokenizer alone (its regex, about 3 ms to build, over a table of the 256 single
/// bytes): what a count needs of `bpe-openai` while its tables are being built, for the
/// pieces `pretokenize` leaves to the regex.
pub(super) fn splitter(encoding: Encoding) -> &'static Tokenizer {
    static SPLITTERS: [OnceLock<Tokenizer>; 2] = [OnceLock::new(), OnceLock::new()];
    SPLITTERS[encoding as usize].get_or_init(|| {
        let bytes =
            BytePairEncoding::from_dictionary((0..=255u8).map(|b| vec![b]), Some(HASH_FACTOR));
        Tokenizer::new_lookahead(bytes, &patterns(encoding), false).expect("valid pre-tokenizer")
    })
}

/// tiktoken's pre-tokenization patterns as `bpe-openai` runs them: its regex engine has no
/// look-ahead, so `\s+(?!\S)` becomes `\s+\s` flagged as a look-ahead pattern (the splitter
/// gives its last character back), with `\s+$` for the end of the text.
fn patterns(encoding: Encoding) -> [(&'static str, bool); 3] {
    let words = match encoding {
        Encoding::Cl100kBase => concat!(
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
            r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$",
        ),
        Encoding::O200kBase => concat!(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+$",
        ),
    };
    [(words, false), (r"\s+\s", true), (r"\s+", false)]
}

#[cfg(test)]
mod tests {
    use super::super::tiktoken;
    use super::*;

    #[test]
    fn builds_every_ordinary_token_once() {
        for (encoding, n) in [
            (Encoding::Cl100kBase, 100_256),
            (Encoding::O200kBase, 199_998),
        ] {
            let bpe = &wait(encoding).bpe;
            assert_eq!(bpe.num_tokens(), n, "{}", encoding.name());
            let core = tiktoken::core(encoding);
            for rank in [0, 1, 255, 256, n as u32 / 2, n as u32 - 1] {
                assert_eq!(bpe.token_bytes(rank), core.decode_bytes(&[rank]).unwrap());
            }
            // The same tokenizer from then on.
            assert!(std::ptr::eq(wait(encoding), ready(encoding).unwrap()));
        }
    }

    /// The patterns are written out here; `bpe-openai`'s prebuilt tokenizers (linked into
    /// this test only) must split every text the same way.
    #[test]
    fn splits_as_bpe_openai_does() {
        let texts = [
            "Hello, World! It's a TEST they'll've done. I'M HERE.",
            "naïve café, Zürich, Ελληνικά, русский текст, עברית, العربية 中文字符 한국어",
            "tabs\t\tand   spaces    and\u{a0}nbsp\u{3000}ideographic\n\n  \r\n x",
            "fn main() {\n    let x = vec![1, 2, 3];\n    println!(\"{x:?}\");\n}\n  ",
            "12345678901 // path/to/file.rs:12:34 /* block */ http://example.com/a?b=c",
            "emoji 👋🏽👨‍👩‍👧‍👦 combining e\u{301} a\u{308}\u{323} ﷽ ǅ CamelCaseWords lowerUPPER",
        ];
        for (encoding, theirs) in [
            (Encoding::Cl100kBase, bpe_openai::cl100k_base()),
            (Encoding::O200kBase, bpe_openai::o200k_base()),
        ] {
            for text in texts {
                let ours: Vec<&str> = wait(encoding).split(text).collect();
                let want: Vec<&str> = theirs.split(text).collect();
                assert_eq!(ours, want, "{text:?} in {}", encoding.name());
            }
        }
    }
}
