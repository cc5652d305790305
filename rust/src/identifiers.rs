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

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'.' | b'/' | b':' | b'@' | b'#' | b'+' | b'~' | b'-'
        )
}

/// The words of `text`, in order (module doc). Split on bytes: a word is ASCII, so its ends
/// are character boundaries, and no character needs decoding.
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    text.as_bytes()
        .split(|&b| !is_word_byte(b))
        .filter(|w| !w.is_empty())
        .map(|w| {
            let end = w
                .iter()
                .rposition(|b| !matches!(b, b'.' | b':' | b'-'))
                .map_or(0, |i| i + 1);
            // ASCII bytes only: always UTF-8.
            std::str::from_utf8(&w[..end]).unwrap_or_default()
        })
        .filter(|w| !w.is_empty())
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
    if w.len() < MIN_CHARS {
        return false;
    }
    let alpha = w.iter().any(u8::is_ascii_alphabetic);
    let digit = w.iter().any(u8::is_ascii_digit);
    let camel = w
        .windows(2)
        .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase());
    ((alpha || digit) && w.iter().any(|&b| matches!(b, b'/' | b'_' | b'@' | b'#')))
        || (alpha && digit)
        || camel
        || is_file_name(w)
        || is_number(w)
}

/// A word's hash: two texts share an identifier when they hold the same word.
pub fn hash(word: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(word.as_bytes())
}

fn push_text(text: &str, out: &mut Vec<u64>) {
    for word in words(text).filter(|w| is_identifier(w)) {
        out.push(hash(word));
        // A path also names its file from any directory above it: `/testbed/src/a.py` read
        // in a listing is `src/a.py` in the next command.
        for (at, _) in word.match_indices('/') {
            let tail = &word[at + 1..];
            if is_identifier(tail) {
                out.push(hash(tail));
            }
        }
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
