//! The cheap stages' rewrites of a middle message: a huge tool result cut to its head and tail
//! with a recovery anchor, an older result of a read superseded by a newer one stubbed, images
//! replaced by a placeholder. Each keeps the message (so pairing holds) and changes only its
//! content; the texts are fixed so the same history always rewrites to the same bytes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use serde_json::Value;
use xxhash_rust::xxh3::Xxh3;

use crate::count::Counter;
use crate::view::error_text;
use crate::view::{Folded, Framed, Message, Text};

/// What a rewrite did to a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RewriteKind {
    Truncated,
    Deduped,
    Media,
}

impl RewriteKind {
    pub fn name(self) -> &'static str {
        match self {
            RewriteKind::Truncated => "truncated",
            RewriteKind::Deduped => "deduped",
            RewriteKind::Media => "media",
        }
    }

    pub fn from_name(name: &str) -> Option<RewriteKind> {
        [
            RewriteKind::Truncated,
            RewriteKind::Deduped,
            RewriteKind::Media,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// The text that stands in for each image a message loses.
pub const MEDIA_PLACEHOLDER: &str = "[ringbound: image omitted to save context]";

/// The id a recovery anchor gives a tool result: a hash of its full text, so a stale anchor
/// (the history changed) finds nothing rather than the wrong message.
pub fn content_id(text: &str) -> String {
    format!("rb-{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

/// The longest prefix of `text` (or suffix, `from_end`) that ends on a char boundary and has at
/// most `max_tokens` tokens. A BPE count is not strictly monotone in the length of a prefix, so
/// this is the cut a search finds: within budget, and at most a token or two short of the
/// longest one.
pub fn cut<'t>(text: &'t str, max_tokens: usize, counter: &dyn Counter, from_end: bool) -> &'t str {
    cut_counted(text, counter.count(text), max_tokens, counter, from_end)
}

/// [`cut`] of a text whose token count `total` is known.
pub fn cut_counted<'t>(
    text: &'t str,
    total: usize,
    max_tokens: usize,
    counter: &dyn Counter,
    from_end: bool,
) -> &'t str {
    if total <= max_tokens {
        return text;
    }
    let piece = |len: usize| -> &'t str {
        if from_end {
            &text[text.len() - len..]
        } else {
            &text[..len]
        }
    };
    let boundary = |mut len: usize| -> usize {
        // Shrink to a char boundary of the kept side.
        while len > 0 && !text.is_char_boundary(if from_end { text.len() - len } else { len }) {
            len -= 1;
        }
        len
    };
    let scaled = |len: usize, num: usize, den: usize| -> usize {
        usize::try_from(len as u128 * num as u128 / den.max(1) as u128).unwrap_or(usize::MAX)
    };
    // `lo` fits, `hi` does not. Secant steps from the text's own bytes per token land within a
    // token or two in a few probes, each tokenizing about as much as the cut keeps.
    let (mut lo, mut hi) = (0usize, text.len());
    let mut guess = scaled(text.len(), max_tokens, total);
    for _ in 0..8 {
        let p = boundary(guess.clamp(lo + 1, hi.saturating_sub(1).max(lo + 1)));
        if p <= lo || p >= hi {
            break;
        }
        let c = counter.count(piece(p));
        if c <= max_tokens {
            lo = p;
            if max_tokens - c <= 1 {
                return piece(lo);
            }
        } else {
            hi = p;
        }
        let next = scaled(p, max_tokens, c);
        // A step that would not move (or overshoot the bracket) bisects instead.
        guess = if next <= lo || next >= hi || next == p {
            lo + (hi - lo) / 2
        } else {
            next
        };
    }
    while hi - lo > 1 {
        let mid = boundary(lo + (hi - lo) / 2);
        if mid <= lo {
            break;
        }
        if counter.count(piece(mid)) <= max_tokens {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // A BPE count can fall as a piece grows (a character joins the token before it), so a
    // few characters past the first overflow may fit again: keep the longest that does.
    let mut best = lo;
    let mut next = lo;
    for _ in 0..MAX_EXTRA_CHARS {
        next = grow(text, next, from_end);
        if next <= best || next > text.len() {
            break;
        }
        if counter.count(piece(next)) <= max_tokens {
            best = next;
        }
    }
    piece(best)
}

/// Characters tried past the first length that overflows.
const MAX_EXTRA_CHARS: usize = 8;

/// The length of the kept side with one more character.
fn grow(text: &str, len: usize, from_end: bool) -> usize {
    if len >= text.len() {
        return len + 1;
    }
    let next_char = if from_end {
        text[..text.len() - len].chars().next_back()
    } else {
        text[len..].chars().next()
    };
    len + next_char.map_or(1, char::len_utf8)
}

/// The recovery anchor written between the head and the tail of a cut result.
fn anchor(id: &str, omitted: usize, total: usize) -> String {
    format!(
        "\n[ringbound: {omitted} of {total} tokens of this tool result were cut. To read them, \
         call expand_message with {{\"message_id\": \"{id}\"}}]\n"
    )
}

/// Tokens, beyond its text, that a cut result costs at most: the message with only the
/// anchor, for the largest numbers and the costliest id (one token per hex digit). A cut is
/// planned only when the limit leaves room for text beyond this.
pub fn truncation_overhead(original: &Message, raw_tokens: impl Fn(&Message) -> u64) -> u64 {
    let widest = anchor("rb-", u32::MAX as usize, u32::MAX as usize);
    raw_tokens(&rewritten(original, &widest)) + 16
}

/// Fewest tokens of text a cut keeps: below this, cutting is not worth an anchor.
pub const MIN_KEPT_TOKENS: u64 = 16;

/// A tool result over the size limit, cut so that the whole message has at most `max_raw`
/// tokens (as `raw_tokens` counts a message): two thirds of the room as head, one third as
/// tail, and between them the anchor naming the original for `expand_message` (the anchor
/// alone when the text no longer fits beside it). None when not even the anchor fits.
pub fn truncated_result(
    original: &Message,
    max_raw: u64,
    counter: &dyn Counter,
    raw_tokens: impl Fn(&Message) -> u64,
) -> Option<(Message, String)> {
    // The anchor names the whole result as the caller's recovery reads it; the cut keeps
    // head and tail of what the model reads of it.
    let whole: String = original.texts.concat();
    let id = content_id(&whole);
    let text = cut_text(original, whole);
    let total = counter.count(&text);
    let overhead = raw_tokens(&rewritten(original, &anchor(&id, total, total)));
    let mut room = usize::try_from(max_raw.checked_sub(overhead)?).ok()?;
    // Text joined across the anchor can tokenize a little differently than apart: check the
    // whole and give back what it overshot.
    for _ in 0..4 {
        if (room as u64) < MIN_KEPT_TOKENS {
            break;
        }
        let head = cut_counted(&text, total, room * 2 / 3, counter, false);
        let mut tail = cut_counted(&text, total, room - room * 2 / 3, counter, true);
        if head.len() + tail.len() >= text.len() {
            tail = "";
        }
        let omitted = total.saturating_sub(counter.count(head) + counter.count(tail));
        let new_text = format!("{head}{}{tail}", anchor(&id, omitted, total));
        let msg = rewritten(original, &new_text);
        let tokens = raw_tokens(&msg);
        if tokens <= max_raw {
            return Some((msg, new_text));
        }
        room = room.saturating_sub(usize::try_from(tokens - max_raw).unwrap_or(room) + 2);
    }
    // The anchor alone: what the overhead was measured on, so it fits.
    let new_text = anchor(&id, total, total);
    Some((rewritten(original, &new_text), new_text))
}

/// Cuts made before, by everything that decides one (`cut_key`): a session's next turn plans
/// the same cuts of the same results again, and cutting tokenizes each result whole. Bounded,
/// emptied when full (which costs only cutting again) and with the count cache.
static CUTS: LazyLock<Mutex<HashMap<u128, Option<String>>>> = LazyLock::new(Mutex::default);
const MAX_CUTS: usize = 4096;

/// `truncated_result`'s text, kept: the same result, limit and counter cut alike. `raw_tokens`
/// must count as `counter` does, by the message alone (a rewritten result holds no image).
pub fn truncated_text(
    original: &Message,
    max_raw: u64,
    counter: &'static dyn Counter,
    raw_tokens: impl Fn(&Message) -> u64,
) -> Option<String> {
    let key = cut_key(original, max_raw, counter);
    let cuts = || CUTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(text) = cuts().get(&key) {
        return text.clone();
    }
    let text = truncated_result(original, max_raw, counter, raw_tokens).map(|(_, text)| text);
    let mut kept = cuts();
    if kept.len() >= MAX_CUTS {
        kept.clear();
    }
    kept.insert(key, text.clone());
    text
}

/// Forgets every cut kept (`cache_clear`).
pub fn forget_cuts() {
    CUTS.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

/// What a cut depends on: the result's texts, what its message counts beside them (name, call
/// id, error flag, how it goes out), the limit and the counter.
fn cut_key(original: &Message, max_raw: u64, counter: &'static dyn Counter) -> u128 {
    let mut h = Xxh3::new();
    let mut put = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for text in &original.texts {
        put(text.as_bytes());
    }
    put(original.name.as_deref().unwrap_or("\0none").as_bytes());
    put(original
        .tool_call_id
        .as_deref()
        .unwrap_or("\0none")
        .as_bytes());
    put(format!("{:?}", original.framed_as).as_bytes());
    put(&[u8::from(original.is_error)]);
    put(&max_raw.to_le_bytes());
    // Counters are statics: one address per encoding and backend.
    put(&(std::ptr::from_ref(counter).cast::<()>() as usize).to_le_bytes());
    h.digest128()
}

/// The stub that replaces an older result of a read whose newer result is still in the view.
pub fn dedupe_stub(tool: &str) -> String {
    format!(
        "[ringbound: superseded by a later {tool} call with the same arguments; this older \
         result was removed]"
    )
}

/// What a rewrite of `original` (its texts joined, `whole`) cuts: for a result the provider
/// sends as a JSON object, what is under its one key (a string as itself, anything else as
/// its JSON), else the object's JSON; for any other result, its text.
fn cut_text(original: &Message, whole: String) -> String {
    if !matches!(original.framed_as, Some(Framed::Object(_))) {
        return whole;
    }
    match serde_json::from_str::<Value>(&whole) {
        Ok(Value::Object(object)) if object.len() == 1 => match object.into_iter().next() {
            Some((_, Value::String(inner))) => inner,
            Some((_, inner)) => inner.to_string(),
            None => whole,
        },
        _ => whole,
    }
}

/// A tool result with its content replaced by `text` (ids, name, error flag kept), counted
/// as the provider reads what the adapter sends (`framed_as`): Gemini writes `{"output":
/// text}` and reads that back as its JSON, or `{"error": text}` and reads `Error: text`.
/// What items folded into it brought stays (`Message::folded`).
pub fn rewritten(original: &Message, text: &str) -> Message {
    let sent = match &original.framed_as {
        Some(Framed::Object(key)) => {
            let mut object = serde_json::Map::new();
            object.insert(key.to_string(), Value::String(text.to_owned()));
            Cow::Owned(Value::Object(object).to_string())
        }
        Some(Framed::Error) => Cow::Owned(error_text(text.to_owned())),
        None => Cow::Borrowed(text),
    };
    let mut out = Message {
        name: original.name.clone(),
        framed_as: original.framed_as.clone(),
        ..Message::tool_result(
            original.tool_call_id.as_deref().unwrap_or_default(),
            &sent,
            original.is_error,
        )
    };
    let folded = original.folded;
    if folded != Folded::default() {
        let tail = |n: usize, len: usize| len.saturating_sub(n)..len;
        out.texts
            .extend_from_slice(&original.texts[tail(folded.texts, original.texts.len())]);
        out.images
            .extend_from_slice(&original.images[tail(folded.images, original.images.len())]);
        out.other_part_tokens = folded.other_part_tokens;
        out.folded = folded;
    }
    out
}

/// The result's own part of a tool result, without what items folded into it brought.
pub fn own(original: &Message) -> Cow<'_, Message> {
    let folded = original.folded;
    if folded == Folded::default() {
        return Cow::Borrowed(original);
    }
    let mut own = original.clone();
    own.texts
        .truncate(own.texts.len().saturating_sub(folded.texts));
    own.images
        .truncate(own.images.len().saturating_sub(folded.images));
    own.other_part_tokens = own
        .other_part_tokens
        .saturating_sub(folded.other_part_tokens);
    own.folded = Folded::default();
    Cow::Owned(own)
}

/// A message whose images each became the placeholder text.
pub fn without_media(original: &Message) -> Message {
    let mut msg = original.clone();
    msg.texts.extend(std::iter::repeat_n(
        Text::from(MEDIA_PLACEHOLDER),
        msg.images.len(),
    ));
    msg.images.clear();
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{counter, Backend, Encoding};
    use proptest::prelude::*;

    fn c() -> &'static dyn Counter {
        counter(Encoding::O200kBase, Backend::BpeOpenai)
    }

    #[test]
    fn cut_keeps_short_texts_whole() {
        assert_eq!(cut("hello world", 10, c(), false), "hello world");
        assert_eq!(cut("", 0, c(), true), "");
    }

    #[test]
    fn cut_is_token_exact_and_near_maximal() {
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(400);
        for max in [1, 7, 100, 1000] {
            let head = cut(&text, max, c(), false);
            assert!(c().count(head) <= max);
            assert!(c().count(head) + 3 >= max, "{max}: {}", c().count(head));
            assert!(text.starts_with(head));
            let tail = cut(&text, max, c(), true);
            assert!(c().count(tail) <= max);
            assert!(text.ends_with(tail));
        }
    }

    #[test]
    fn truncation_fits_and_names_the_original() {
        let body = (0..3000)
            .map(|i| format!("line {i}: ok\n"))
            .collect::<String>();
        let msg = Message::tool_result("call_1", &body, false);
        let tokens = |m: &Message| u64::from(crate::count::chat::message_tokens(m, c()));
        let (cut_msg, text) = truncated_result(&msg, 500, c(), tokens).unwrap();
        assert!(truncation_overhead(&msg, tokens) < 200);
        assert!(tokens(&cut_msg) <= 500);
        assert!(text.starts_with("line 0: ok\n"));
        assert!(text.trim_end().ends_with("line 2999: ok"));
        assert!(text.contains(&content_id(&body)));
        assert_eq!(cut_msg.tool_call_id.as_deref(), Some("call_1"));
    }

    #[test]
    fn a_result_sent_as_an_object_is_cut_inside_and_counted_as_sent() {
        // Gemini's `{"output": "..."}`: the cut is of the string the model reads, and the
        // rewrite is counted as the object the adapter writes, read back as its JSON.
        let body = (0..3000)
            .map(|i| format!("line {i}: \"ok\"\n"))
            .collect::<String>();
        let json = serde_json::json!({ "output": body }).to_string();
        let msg = Message {
            framed_as: Some(Framed::Object("output".into())),
            ..Message::tool_result("call_1", &json, false)
        };
        let tokens = |m: &Message| u64::from(crate::count::chat::message_tokens(m, c()));
        let (cut_msg, text) = truncated_result(&msg, 500, c(), tokens).unwrap();
        assert!(text.starts_with("line 0: \"ok\"\n"), "{}", &text[..40]);
        assert!(text.contains(&content_id(&json)));
        assert_eq!(
            crate::view::strs(&cut_msg.texts),
            [serde_json::json!({ "output": text }).to_string()]
        );
        assert!(tokens(&cut_msg) <= 500);
        // Another one key: under it; a value other than a string is cut as its JSON.
        let rows = serde_json::json!({ "rows": [[1, "a"], [2, "b"]] }).to_string();
        let msg = Message {
            framed_as: Some(Framed::Object("rows".into())),
            ..Message::tool_result("call_2", &rows, false)
        };
        assert_eq!(cut_text(&msg, rows.clone()), r#"[[1,"a"],[2,"b"]]"#);
        assert_eq!(
            crate::view::strs(&rewritten(&msg, "x").texts),
            [r#"{"rows":"x"}"#]
        );
    }

    #[test]
    fn a_cut_kept_is_the_cut_made_again() {
        let body = (0..2000)
            .map(|i| format!("row {i}: value\n"))
            .collect::<String>();
        let tokens = |m: &Message| u64::from(crate::count::chat::message_tokens(m, c()));
        let made = |m: &Message, max: u64| truncated_result(m, max, c(), tokens).map(|(_, t)| t);
        let one = Message::tool_result("call_1", &body, false);
        let other = Message::tool_result("call_22222222222222222222", &body, false);
        for max in [80, 300, 80] {
            for msg in [&one, &other] {
                let kept = truncated_text(msg, max, c(), tokens);
                assert_eq!(kept, made(msg, max));
                assert!(tokens(&rewritten(msg, &kept.unwrap())) <= max);
            }
        }
        // The call id counts beside the text: a longer one leaves less room for it.
        assert_ne!(
            truncated_text(&one, 80, c(), tokens),
            truncated_text(&other, 80, c(), tokens)
        );
        assert_eq!(truncated_text(&one, 5, c(), tokens), None);
    }

    #[test]
    fn an_error_rewritten_is_counted_as_the_error_the_provider_reads() {
        let msg = Message {
            framed_as: Some(Framed::Error),
            ..Message::tool_result("call_1", "Error: disk full", true)
        };
        let stub = dedupe_stub("read_file");
        assert_eq!(
            crate::view::strs(&rewritten(&msg, &stub).texts),
            [format!("Error: {stub}")]
        );
        assert_eq!(
            crate::view::strs(&rewritten(&msg, "Traceback (most recent call last): x").texts),
            ["Traceback (most recent call last): x"]
        );
        let plain = Message::tool_result("call_1", "fine", false);
        assert_eq!(crate::view::strs(&rewritten(&plain, "x").texts), ["x"]);
    }

    proptest! {
        #[test]
        fn cut_never_splits_a_char(text in "\\PC{0,300}", max in 0usize..40, end in any::<bool>()) {
            let piece = cut(&text, max, c(), end);
            prop_assert!(c().count(piece) <= max || c().count(&text) <= max);
            if end {
                prop_assert!(text.ends_with(piece));
            } else {
                prop_assert!(text.starts_with(piece));
            }
        }
    }
}
