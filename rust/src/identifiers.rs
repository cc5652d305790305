//! Identifiers: the words of a text that name one concrete thing (a path, an id, a number), the
//! values an agent can only have from where it read them. The plan uses them to see which tool
//! results later turns build on (`plan::citations`); a message's identifiers are hashed once
//! and cached with it (`Request::identifiers`).
//!
//! The rule, one for every text:
//! - a **word** is a maximal run of ASCII letters, digits and `_ . / : @ # + ~ -`, trailing
//!   `. : -` left out (the punctuation of a sentence or a `file:line:`);
//! - a word of at least `MIN_CHARS` characters is an **identifier** when it holds a `/` beside
//!   a letter or digit (a path, a URL), is a file name (`name.ext`, an extension of 1-8
//!   letters and digits opening with a letter), is a number (digits with single `. : -`
//!   between groups: amounts, dates, times, line ranges), mixes letters and digits (ids,
//!   hashes, flight numbers), holds `_`, `@` or `#` beside a letter or digit (snake_case
//!   names, emails, tickets), or is camelCase;
//! - a path also stands for each of its tails after a `/` that is an identifier itself
//!   (`/testbed/src/a.py` is `src/a.py` from the repository and `a.py` from its folder);
//! - two texts **share** an identifier when the same word occurs in both (hashed: equality of
//!   the whole word, not a substring).
//!
//! Plain words ("economy", "python") and all-capital words ("ERROR", "PASSED") are vocabulary
//! that every result repeats, not a value one result supplied; non-ASCII letters end a word
//! (the ids tools mint are ASCII).

use crate::view::Message;

/// Shorter words (airport codes, small counts) are too common to say where they came from.
pub const MIN_CHARS: usize = 4;

/// What a byte is to a word, one table lookup instead of a chain of comparisons: the split
/// into words and the identifier rule ran at the speed of counting the tokens themselves on a
/// first assembly, on every message of the session.
const WORD: u8 = 1;
const ALPHA: u8 = 2;
const DIGIT: u8 = 4;
/// `/ _ @ #`: a path, a snake_case name, an email, a ticket.
const MARK: u8 = 8;
const LOWER: u8 = 16;
const UPPER: u8 = 32;
const SLASH: u8 = 64;

static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = match c {
            b'a'..=b'z' => WORD | ALPHA | LOWER,
            b'A'..=b'Z' => WORD | ALPHA | UPPER,
            b'0'..=b'9' => WORD | DIGIT,
            b'/' => WORD | MARK | SLASH,
            b'_' | b'@' | b'#' => WORD | MARK,
            b'.' | b':' | b'+' | b'~' | b'-' => WORD,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// In a word's class (the union of its bytes' classes) when a lowercase letter in it is
/// followed by an uppercase one.
const CAMEL: u8 = 128;
const _: () = assert!(LOWER << 1 == UPPER && UPPER << 2 == CAMEL);

/// The words of `bytes` (module doc) with their classes, in order, in one pass.
fn classified(bytes: &[u8]) -> impl Iterator<Item = (&[u8], u8)> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        loop {
            let start = rest.iter().position(|&b| CLASS[b as usize] & WORD != 0)?;
            rest = &rest[start..];
            let mut class = 0u8;
            let mut previous = 0u8;
            let mut len = 0;
            for &b in rest {
                let c = CLASS[b as usize];
                if c & WORD == 0 {
                    break;
                }
                // CAMEL when a lowercase letter (16) precedes an uppercase one (32), without
                // a branch in the loop every byte of every message goes through.
                class |= c | (((previous << 1) & c & UPPER) << 2);
                previous = c;
                len += 1;
            }
            let (run, after) = rest.split_at(len);
            rest = after;
            // Trailing `. : -` are a sentence's or a `file:line:`'s; they carry no class bit,
            // so the class of the run is the class of the word.
            let end = run
                .iter()
                .rposition(|b| !matches!(b, b'.' | b':' | b'-'))
                .map_or(0, |i| i + 1);
            if end > 0 {
                return Some((&run[..end], class));
            }
        }
    })
}

/// The words of `text`, in order (module doc). Split on bytes: a word is ASCII, so its ends
/// are character boundaries, and no character needs decoding.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    // ASCII bytes only: always UTF-8.
    classified(text.as_bytes()).map(|(w, _)| std::str::from_utf8(w).unwrap_or_default())
}

/// `name.ext`: a name opening with a letter or `_` (letters, digits, `_`, `-`), a dot, and an
/// extension of 1-8 letters and digits opening with a letter.
fn is_file_name(w: &[u8]) -> bool {
    let Some(dot) = w.iter().rposition(|&b| b == b'.') else {
        return false;
    };
    let (stem, ext) = (&w[..dot], &w[dot + 1..]);
    matches!(stem.first(), Some(b) if b.is_ascii_alphabetic() || *b == b'_')
        && stem
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && (1..=8).contains(&ext.len())
        && ext[0].is_ascii_alphabetic()
        && ext.iter().all(u8::is_ascii_alphanumeric)
}

/// Digits with single `. : -` between groups, maybe signed.
fn is_number(w: &[u8]) -> bool {
    let body = match w.first() {
        Some(b'+' | b'-') => &w[1..],
        _ => w,
    };
    !body.is_empty()
        && body
            .split(|&b| matches!(b, b'.' | b':' | b'-'))
            .all(|group| !group.is_empty() && group.iter().all(u8::is_ascii_digit))
}

/// Whether `word` (one of `words`) is an identifier (module doc).
pub fn is_identifier(word: &str) -> bool {
    let w = word.as_bytes();
    identifies(w, class_of(w))
}

fn class_of(w: &[u8]) -> u8 {
    classified(w).fold(0, |class, (_, c)| class | c)
}

/// `is_identifier` of a word whose class is known: the cheap tests first, the file name and
/// number shapes only for the words the class leaves open (most words are plain letters).
fn identifies(w: &[u8], class: u8) -> bool {
    if w.len() < MIN_CHARS {
        return false;
    }
    let (alpha, digit) = (class & ALPHA != 0, class & DIGIT != 0);
    ((alpha || digit) && class & MARK != 0)
        || (alpha && digit)
        || class & CAMEL != 0
        || (alpha && is_file_name(w))
        || (digit && !alpha && is_number(w))
}

/// A word's hash: two texts share an identifier when they hold the same word.
pub fn hash(word: &str) -> u64 {
    hash_bytes(word.as_bytes())
}

fn hash_bytes(word: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(word)
}

fn push_text(text: &str, out: &mut Vec<u64>) {
    for (word, class) in classified(text.as_bytes()) {
        if !identifies(word, class) {
            continue;
        }
        out.push(hash_bytes(word));
        if class & SLASH == 0 {
            continue;
        }
        // A path also names its file from any directory above it: `/testbed/src/a.py` read
        // in a listing is `src/a.py` in the next command. Each tail's class is gathered from
        // the end in one pass: classifying each tail anew read a deep path once per `/`,
        // more bytes than the whole text on a session of file listings.
        let first = out.len();
        let (mut tail, mut next) = (0u8, 0u8);
        for at in (0..word.len()).rev() {
            if word[at] == b'/' && identifies(&word[at + 1..], tail) {
                out.push(hash_bytes(&word[at + 1..]));
            }
            let c = CLASS[word[at] as usize];
            tail |= c | (((c << 1) & next & UPPER) << 2);
            next = c;
        }
        // In the order the tails come, as the rule reads them.
        out[first..].reverse();
    }
}

/// Pushes the string leaves of a JSON value.
fn push_leaves(value: &serde_json::Value, out: &mut Vec<u64>) {
    match value {
        serde_json::Value::String(s) => push_text(s, out),
        serde_json::Value::Array(items) => items.iter().for_each(|v| push_leaves(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| push_leaves(v, out)),
        _ => {}
    }
}

/// The identifiers of a message, hashed, sorted, each once: those of its texts and, for its
/// tool calls, those of the arguments as written (numbers as they appear) and of their
/// string values decoded (a path after a `\n` in a shell command).
pub fn of_message(msg: &Message) -> Vec<u64> {
    let mut out = Vec::new();
    for t in &msg.texts {
        push_text(t, &mut out);
    }
    for call in &msg.tool_calls {
        push_text(&call.arguments, &mut out);
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(&call.arguments) {
            push_leaves(&value, &mut out);
        }
    }
    out.sort_unstable();
    out.dedup();
    // Kept for the session's life (in the request and the count cache): grown by doubling
    // and then deduplicated, the vector held up to several times its hashes (4.5 MB of a
    // first assembly's 29 MB on a 10 MB session).
    out.shrink_to_fit();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(text: &str) -> Vec<&str> {
        words(text).filter(|w| is_identifier(w)).collect()
    }

    #[test]
    fn paths_ids_and_numbers_are_identifiers_and_vocabulary_is_not() {
        assert_eq!(
            idents("Opened src/app.py at 2024-05-01 for mia_li_3668 (economy), HAT170: ERROR."),
            vec!["src/app.py", "2024-05-01", "mia_li_3668", "HAT170"]
        );
        assert_eq!(
            idents("see setup.cfg, loadSession and ana@example.com; ticket #4521, $1200.50."),
            vec![
                "setup.cfg",
                "loadSession",
                "ana@example.com",
                "#4521",
                "1200.50"
            ]
        );
        // Too short, vocabulary, all capitals, punctuation alone.
        assert!(idents("the JFK 42 3.1 PASSED python ---- ://: .... a-b").is_empty());
    }

    #[test]
    fn words_end_at_non_ascii_and_lose_trailing_punctuation() {
        assert_eq!(
            words("café/x1 src/a.py: line-").collect::<Vec<_>>(),
            vec!["caf", "/x1", "src/a.py", "line"]
        );
    }

    /// The rule as the module doc states it, one test per clause: the oracle of the
    /// one-pass classifier.
    fn stated(text: &str) -> Vec<String> {
        let word_byte = |b: u8| b.is_ascii_alphanumeric() || b"_./:@#+~-".contains(&b);
        let rule = |w: &str| {
            let b = w.as_bytes();
            let alpha = b.iter().any(u8::is_ascii_alphabetic);
            let digit = b.iter().any(u8::is_ascii_digit);
            let camel = b
                .windows(2)
                .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase());
            b.len() >= MIN_CHARS
                && (((alpha || digit) && b.iter().any(|c| b"/_@#".contains(c)))
                    || (alpha && digit)
                    || camel
                    || is_file_name(b)
                    || is_number(b))
        };
        let mut out = Vec::new();
        for run in text.as_bytes().split(|&b| !word_byte(b)) {
            let end = run
                .iter()
                .rposition(|b| !b".:-".contains(b))
                .map_or(0, |i| i + 1);
            let w = std::str::from_utf8(&run[..end]).unwrap();
            if !rule(w) {
                continue;
            }
            out.push(w.to_string());
            for (at, _) in w.match_indices('/') {
                if rule(&w[at + 1..]) {
                    out.push(w[at + 1..].to_string());
                }
            }
        }
        out
    }

    #[test]
    fn a_tail_is_camel_case_only_where_a_lower_letter_meets_an_upper_one() {
        for text in [
            "x/Zaaa y/aaaZ",
            "src/fooBar.rs/x9/",
            "a/b/c/dd_e /a.b/c:1-2.",
        ] {
            let mut got = Vec::new();
            push_text(text, &mut got);
            let want: Vec<u64> = stated(text).iter().map(|w| hash(w)).collect();
            assert_eq!(got, want, "{text}");
        }
        let mut got = Vec::new();
        push_text("x/Zaaa y/aaaZ", &mut got);
        assert!(got.contains(&hash("aaaZ")) && !got.contains(&hash("Zaaa")));
    }

    proptest::proptest! {
        #[test]
        fn the_one_pass_classifier_is_the_stated_rule(
            // Every byte class, and a small alphabet of them, where paths, camelCase tails,
            // file names and numbers come up often.
            text in "([a-zA-Z0-9_./:@#+~ -]|é|\\n){0,60}|[aZ1/._: -]{0,40}"
        ) {
            let mut got = Vec::new();
            push_text(&text, &mut got);
            let want: Vec<u64> = stated(&text).iter().map(|w| hash(w)).collect();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_call_cites_what_its_arguments_hold_written_and_decoded() {
        let mut msg = Message::text(crate::view::Role::Assistant, "");
        msg.texts.clear();
        msg.tool_calls.push(crate::view::ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: r#"{"cmd": "cd /repo\nsrc/x.py", "n": 1200}"#.into(),
        });
        let got = of_message(&msg);
        for w in ["/repo", "src/x.py", "x.py", "1200"] {
            assert!(got.contains(&hash(w)), "{w}");
        }
        assert!(
            !got.contains(&hash("repo")),
            "a tail that is a plain word names nothing"
        );
        assert!(got.windows(2).all(|p| p[0] < p[1]));
    }
}
