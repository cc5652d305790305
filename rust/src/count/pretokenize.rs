//! The pre-tokenizer's split of ASCII text, by hand. `bpe-openai` splits with a regex that it
//! runs afresh, anchored, at every piece; on code and logs that search was about a third of a
//! count. The patterns of `cl100k_base` and `o200k_base` decide most pieces from a few ASCII
//! bytes, so this module decides those and answers `None` wherever a decision would read a
//! byte outside ASCII (a letter, digit, mark or space of another script could change it): the
//! regex then takes that one piece. The pieces are the regex's pieces, tested so.

use super::Encoding;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Upper,
    Lower,
    Digit,
    /// `\s` except `\r` and `\n`: space, tab, vertical tab, form feed.
    Space,
    /// `\r` or `\n`.
    Newline,
    /// Anything else in ASCII: punctuation, symbols, control characters.
    Other,
    NonAscii,
}

const fn classify(b: u8) -> Class {
    match b {
        b'A'..=b'Z' => Class::Upper,
        b'a'..=b'z' => Class::Lower,
        b'0'..=b'9' => Class::Digit,
        b' ' | b'\t' | 0x0b | 0x0c => Class::Space,
        b'\r' | b'\n' => Class::Newline,
        0x80.. => Class::NonAscii,
        _ => Class::Other,
    }
}

/// Every byte's class, looked up rather than matched: the split reads each byte once or twice.
static CLASSES: [Class; 256] = {
    let mut table = [Class::Other; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = classify(b as u8);
        b += 1;
    }
    table
};

#[inline(always)]
fn class(b: u8) -> Class {
    CLASSES[usize::from(b)]
}

fn class_at(b: &[u8], i: usize) -> Option<Class> {
    b.get(i).map(|&c| class(c))
}

fn is_letter(c: Class) -> bool {
    matches!(c, Class::Upper | Class::Lower)
}

fn is_space(c: Class) -> bool {
    matches!(c, Class::Space | Class::Newline)
}

/// End of the run of bytes from `i` whose class satisfies `keep`; `None` if it stops at a byte
/// outside ASCII, which the regex might have taken into the run.
fn run_end(b: &[u8], mut i: usize, keep: impl Fn(Class) -> bool) -> Option<usize> {
    while let Some(c) = class_at(b, i) {
        if keep(c) {
            i += 1;
        } else if c == Class::NonAscii {
            return None;
        } else {
            break;
        }
    }
    Some(i)
}

/// Which ASCII letters a run takes.
#[derive(Clone, Copy)]
enum Letters {
    Any,
    Upper,
    Lower,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

impl Letters {
    fn keeps(self, c: Class) -> bool {
        match self {
            Letters::Any => is_letter(c),
            Letters::Upper => c == Class::Upper,
            Letters::Lower => c == Class::Lower,
        }
    }

    /// The high bit of each byte of `w` that is a letter of this kind. Every byte of `x` is
    /// below 0x80 and every constant added at most 0x7f, so no sum carries into the next byte.
    #[inline(always)]
    fn mask(self, w: u64) -> u64 {
        let x = w & !HIGH;
        let within = |x: u64, lo: u8, hi: u8| {
            (x + ONES * u64::from(0x80 - lo)) & !(x + ONES * u64::from(0x7f - hi))
        };
        let letters = match self {
            // `| 0x20` folds A-Z onto a-z and nothing else onto them.
            Letters::Any => within(x | (ONES * 0x20), b'a', b'z'),
            Letters::Upper => within(x, b'A', b'Z'),
            Letters::Lower => within(x, b'a', b'z'),
        };
        letters & !w & HIGH
    }
}

/// `run_end` of a run of letters, eight bytes at a time (words are most pieces, and reading
/// them a byte at a time was most of the split).
fn letters_end(b: &[u8], mut i: usize, kind: Letters) -> Option<usize> {
    while let Some(chunk) = b.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().unwrap());
        let stop = !kind.mask(w) & HIGH;
        if stop == 0 {
            i += 8;
            continue;
        }
        let k = stop.trailing_zeros() as usize / 8;
        return (chunk[k] < 0x80).then_some(i + k);
    }
    run_end(b, i, |c| kind.keeps(c))
}

/// Length of the contraction (`'s 't 're 've 'm 'll 'd`, any case) at `i`: `Some(0)` if there is
/// none, `None` if a byte outside ASCII decides (`ſ` folds to `s`).
fn contraction(b: &[u8], i: usize) -> Option<usize> {
    if b.get(i) != Some(&b'\'') {
        return Some(0);
    }
    let lower = |k: usize| -> Option<Option<u8>> {
        match b.get(i + k) {
            None => Some(None),
            Some(&c) if c >= 0x80 => None,
            Some(&c) => Some(Some(c.to_ascii_lowercase())),
        }
    };
    Some(match lower(1)? {
        Some(b's' | b't' | b'm' | b'd') => 2,
        Some(first @ (b'r' | b'v' | b'l')) => {
            let second = if first == b'l' { b'l' } else { b'e' };
            if lower(2)? == Some(second) {
                3
            } else {
                0
            }
        }
        _ => 0,
    })
}

/// End of the piece of `b` that starts at `p` (`p < b.len()`), as the encoding's pattern splits
/// it, or `None` when bytes outside ASCII could decide it.
pub(super) fn piece_end(encoding: Encoding, b: &[u8], p: usize) -> Option<usize> {
    let c0 = class(b[p]);
    if c0 == Class::NonAscii {
        return None;
    }
    if encoding == Encoding::Cl100kBase {
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        let n = contraction(b, p)?;
        if n > 0 {
            return Some(p + n);
        }
    }
    // A letter, or one byte that is not \r, \n, a letter or a digit before a letter.
    let letters = if is_letter(c0) {
        Some(p)
    } else if matches!(c0, Class::Space | Class::Other) {
        match class_at(b, p + 1) {
            Some(Class::NonAscii) => return None,
            Some(c) if is_letter(c) => Some(p + 1),
            _ => None,
        }
    } else {
        None
    };
    if let Some(start) = letters {
        return match encoding {
            // [^\r\n\p{L}\p{N}]?\p{L}+
            Encoding::Cl100kBase => letters_end(b, start, Letters::Any),
            // [^\r\n\p{L}\p{N}]?[upper]*[lower]+(contraction)? and
            // [^\r\n\p{L}\p{N}]?[upper]+[lower]*(contraction)? read as one: in ASCII the two
            // together take every upper-case run followed by any lower-case run.
            Encoding::O200kBase => {
                let uppers = letters_end(b, start, Letters::Upper)?;
                let lowers = letters_end(b, uppers, Letters::Lower)?;
                Some(lowers + contraction(b, lowers)?)
            }
        };
    }
    match c0 {
        // \p{N}{1,3}
        Class::Digit => {
            let mut end = p + 1;
            while end < p + 3 {
                match class_at(b, end) {
                    Some(Class::Digit) => end += 1,
                    Some(Class::NonAscii) => return None,
                    _ => break,
                }
            }
            Some(end)
        }
        // ` ?[^\s\p{L}\p{N}]+` then [\r\n]* (cl100k) or [\r\n/]* (o200k)
        Class::Other => punctuation(encoding, b, p),
        Class::Space if b[p] == b' ' && class_at(b, p + 1) == Some(Class::Other) => {
            punctuation(encoding, b, p + 1)
        }
        _ => whitespace(b, p),
    }
}

fn punctuation(encoding: Encoding, b: &[u8], start: usize) -> Option<usize> {
    let end = run_end(b, start, |c| c == Class::Other)?;
    let tail = |c: u8| c == b'\r' || c == b'\n' || (c == b'/' && encoding == Encoding::O200kBase);
    Some(end + b[end..].iter().take_while(|&&c| tail(c)).count())
}

/// A piece starting at a space or newline that no earlier pattern took:
/// `\s*[\r\n]+`, then `\s+$`, then `\s+(?!\S)`, then `\s+`.
fn whitespace(b: &[u8], p: usize) -> Option<usize> {
    let end = run_end(b, p, is_space)?;
    let run = &b[p..end];
    if let Some(last) = run.iter().rposition(|&c| c == b'\r' || c == b'\n') {
        return Some(p + last + 1);
    }
    if end == b.len() || end - p == 1 {
        return Some(end);
    }
    Some(end - 1)
}

#[cfg(test)]
mod tests {
    use super::super::encoder::wait as tokenizer;
    use super::*;
    use proptest::prelude::*;

    /// The pieces with the fast path where it answers and the regex elsewhere.
    fn pieces(encoding: Encoding, text: &str) -> Vec<String> {
        let (b, mut p, mut out) = (text.as_bytes(), 0, Vec::new());
        while p < b.len() {
            let end = piece_end(encoding, b, p).unwrap_or_else(|| {
                p + tokenizer(encoding)
                    .split(&text[p..])
                    .next()
                    .expect("a piece")
                    .len()
            });
            out.push(text[p..end].to_owned());
            p = end;
        }
        out
    }

    fn assert_same_pieces(text: &str) {
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let regex: Vec<String> = tokenizer(encoding).split(text).map(str::to_owned).collect();
            assert_eq!(pieces(encoding, text), regex, "{text:?} in {encoding:?}");
        }
    }

    #[test]
    fn splits_like_the_regex() {
        for text in [
            "",
            "hello world",
            "Hello, World! It's a TEST they'll've done. I'M HERE.",
            "HTTPServer helloWorld ABCdefGHI x'S y'Ll 'sfoo 're 'x",
            "def f(self, x=1):\n    return {'a': [1, 2, 3]}  # ok\r\n\r\n\tdone\n",
            "12345678 1.5e-9 0x1F  \t\x0b\x0c end   ",
            "  \n  \n  x\n\n    def  ",
            "};\n\n  x // path/to/file.rs:12 -->\n/ ./.\n//",
            "=====  FAILURES  =====\n_____ test_case _____\n",
            "naïve café 中文 'ſ x\u{a0}y \u{3000}z a\u{301}b 12\u{663} ",
            "a'",
            "'",
            " '",
            "' ",
            "\n",
            " ",
            "  ",
            "x ",
            " x",
            "\r\n",
            "a\r\n b",
            "supercalifragilistic ABCDEFGHIJKLMNOPqrstuvwxyz camelCaseIdentifierWithManyWords",
            "HTTPSConnectionPoolManager xmlhttprequestfactoryé abcdefghijklmnopqrstuvwxyzſ",
        ] {
            assert_same_pieces(text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn splits_any_mix_like_the_regex(
            parts in prop::collection::vec(prop::sample::select(&[
                "a", "Z", "ab", "AB", "Ab", "aB", "x1", "7", "123", "4567", " ", "  ", "\t",
                "\n", "\r\n", "\x0b", "\x0c", "'", "'s", "'S", "'re", "'LL", "'ve", "'d", "'m",
                "'t", "'l", "'r", ".", "/", "//", "-", "=", "{", "}", "(", "\"", "\\", "#",
                "\x00", "\x7f", "é", "中", "\u{a0}", "\u{3000}", "\u{301}", "\u{663}", "ſ",
                "\u{85}", "\u{2028}", "K", "\u{212a}",
            ][..]), 0..40)
        ) {
            assert_same_pieces(&parts.concat());
        }

        #[test]
        fn splits_any_string_like_the_regex(text in any::<String>()) {
            assert_same_pieces(&text);
        }

        /// Eight bytes at a time, the runs end where the byte-by-byte scan ends them.
        #[test]
        fn letter_runs_end_as_byte_by_byte(
            text in "([a-zA-Z]{0,20}[ -~\t\n\u{80}-\u{10ffff}]?){0,8}",
            from in 0usize..200,
        ) {
            let b = text.as_bytes();
            let from = from.min(b.len());
            for kind in [Letters::Any, Letters::Upper, Letters::Lower] {
                prop_assert_eq!(letters_end(b, from, kind), run_end(b, from, |c| kind.keeps(c)));
            }
        }

        #[test]
        fn splits_ascii_like_the_regex(text in "[ -~\t\n\r\x0b\x0c]{0,120}") {
            assert_same_pieces(&text);
        }
    }
}
