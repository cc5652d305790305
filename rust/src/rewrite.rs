//! The cheap stages' rewrites of a middle message: a huge tool result cut to its head and tail
//! with a recovery anchor, an older result of a read superseded by a newer one stubbed, images
//! replaced by a placeholder. Each keeps the message (so pairing holds) and changes only its
//! content; the texts are fixed so the same history always rewrites to the same bytes.

use crate::count::Counter;
use crate::view::Message;

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
/// this is the cut a binary search finds: within budget, and at most a token or two short of
/// the longest one.
pub fn cut<'t>(text: &'t str, max_tokens: usize, counter: &dyn Counter, from_end: bool) -> &'t str {
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
    if counter.count(text) <= max_tokens {
        return text;
    }
    // Search a window a few bytes per token wide, widened until it overflows: each probe then
    // tokenizes about as much as the cut keeps, however long the text.
    let mut hi = boundary(text.len().min(max_tokens.saturating_mul(8).max(16)));
    while hi < text.len() && counter.count(piece(hi)) <= max_tokens {
        hi = boundary(text.len().min(hi.saturating_mul(2)));
    }
    let mut lo = 0usize;
    while lo < hi {
        let mid = boundary(lo + (hi - lo).div_ceil(2));
        if mid <= lo {
            break;
        }
        if counter.count(piece(mid)) <= max_tokens {
            lo = mid;
        } else {
            hi = mid - 1;
            hi = boundary(hi);
        }
    }
    piece(lo)
}

/// A tool result over the size limit, cut so that the whole message stays within
/// `max_tokens`: two thirds head, one third tail, and between them the anchor naming the
/// original for `expand_message`. None when the text is too short to gain anything.
pub fn truncated_result(
    original: &Message,
    max_tokens: u64,
    counter: &dyn Counter,
    message_tokens: impl Fn(&Message) -> u64,
) -> Option<(Message, String)> {
    let text: String = original.texts.concat();
    let total = counter.count(&text);
    let anchor = |omitted: usize| {
        format!(
            "\n[ringbound: {omitted} of {total} tokens of this tool result were cut. To read \
             them, call expand_message with {{\"message_id\": \"{}\"}}]\n",
            content_id(&text)
        )
    };
    let probe = rewritten(original, &anchor(total));
    let overhead = message_tokens(&probe);
    let room = usize::try_from(max_tokens.checked_sub(overhead)?).ok()?;
    let head = cut(&text, room * 2 / 3, counter, false);
    let tail = cut(&text, room - room * 2 / 3, counter, true);
    if head.len() + tail.len() >= text.len() {
        return None;
    }
    let omitted = total.saturating_sub(counter.count(head) + counter.count(tail));
    let new_text = format!("{head}{}{tail}", anchor(omitted));
    Some((rewritten(original, &new_text), new_text))
}

/// The stub that replaces an older result of a read whose newer result is still in the view.
pub fn dedupe_stub(tool: &str) -> String {
    format!(
        "[ringbound: superseded by a later {tool} call with the same arguments; this older \
         result was removed]"
    )
}

/// A tool result with its content replaced by `text` (ids, name, error flag kept).
pub fn rewritten(original: &Message, text: &str) -> Message {
    Message {
        name: original.name.clone(),
        ..Message::tool_result(
            original.tool_call_id.as_deref().unwrap_or_default(),
            text,
            original.is_error,
        )
    }
}

/// A message whose images each became the placeholder text.
pub fn without_media(original: &Message) -> Message {
    let mut msg = original.clone();
    msg.texts.extend(std::iter::repeat_n(
        MEDIA_PLACEHOLDER.to_owned(),
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
        assert!(tokens(&cut_msg) <= 500);
        assert!(text.starts_with("line 0: ok\n"));
        assert!(text.trim_end().ends_with("line 2999: ok"));
        assert!(text.contains(&content_id(&body)));
        assert_eq!(cut_msg.tool_call_id.as_deref(), Some("call_1"));
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
