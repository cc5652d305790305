//! What a message costs in an OpenAI Chat Completions request: its texts plus the framing the
//! API wraps around each message, as the OpenAI cookbook "How to count tokens with tiktoken"
//! counts it (3 per message, 1 per name, 3 to prime the reply).

use super::image_price::{image_tokens_for, ImageFormula};
use super::Counter;
use crate::view::Message;

/// `<|start|>{role}\n ... <|end|>` around every message.
pub const TOKENS_PER_MESSAGE: u32 = 3;
/// A participant `name` costs its text plus this.
pub const TOKENS_PER_NAME: u32 = 1;
/// Every reply is primed with `<|start|>assistant<|message|>`, once per request.
pub const REPLY_PRIMING: u32 = 3;
/// ringbound's envelope per tool call (the separators around id, name and arguments). The
/// cookbook gives no figure for calls; this one is ringbound's documented convention.
pub const TOOL_CALL_OVERHEAD: u32 = 3;

/// Tokens one message costs in a request:
/// 3 + count(role name) + count(each text in msg.texts) + (if name: count(name)+1)
/// + (if tool_call_id: count(tool_call_id)) + image_tokens(each image) + msg.other_part_tokens
/// + for each tool call: count(id) + count(name) + count(arguments) + TOOL_CALL_OVERHEAD.
pub fn message_tokens(msg: &Message, counter: &dyn Counter) -> u32 {
    message_tokens_with(msg, counter, ImageFormula::OpenAi)
}

/// [`message_tokens`] with images priced by another provider's formula.
pub fn message_tokens_with(msg: &Message, counter: &dyn Counter, images: ImageFormula) -> u32 {
    message_tokens_until(msg, counter, images, u32::MAX).unwrap_or(u32::MAX)
}

/// [`message_tokens_with`] when it is at most `limit`, else `None`, found without tokenizing
/// much past the limit: what deciding that a huge message cannot fit needs.
pub fn message_tokens_until(
    msg: &Message,
    counter: &dyn Counter,
    images: ImageFormula,
    limit: u32,
) -> Option<u32> {
    let mut t = Tally {
        total: 0,
        limit,
        counter,
    };
    t.add(TOKENS_PER_MESSAGE)?;
    t.text(msg.role.as_str())?;
    for text in &msg.texts {
        t.text(text)?;
    }
    if let Some(name) = &msg.name {
        t.text(name)?;
        t.add(TOKENS_PER_NAME)?;
    }
    if let Some(id) = &msg.tool_call_id {
        t.text(id)?;
    }
    for image in &msg.images {
        t.add(image_tokens_for(image, images))?;
    }
    t.add(msg.other_part_tokens)?;
    for call in &msg.tool_calls {
        t.text(&call.id)?;
        t.text(&call.name)?;
        t.text(&call.arguments)?;
        t.add(TOOL_CALL_OVERHEAD)?;
    }
    Some(t.total)
}

/// A running sum that gives up once it passes its limit.
struct Tally<'c> {
    total: u32,
    limit: u32,
    counter: &'c dyn Counter,
}

impl Tally<'_> {
    fn add(&mut self, tokens: u32) -> Option<()> {
        self.total = self.total.saturating_add(tokens);
        (self.total <= self.limit).then_some(())
    }

    fn text(&mut self, text: &str) -> Option<()> {
        let room = (self.limit - self.total) as usize;
        let n = self.counter.count_until(text, room)?;
        self.add(u32::try_from(n).unwrap_or(u32::MAX))
    }
}

/// An upper bound of `message_tokens` from the size of the message's JSON, without tokenizing:
/// every token covers at least one byte, and every counted text and framing token has at least
/// one byte of its own in the JSON. Images and opaque parts are priced by their own formulas.
pub fn message_tokens_bound(msg: &Message, json_bytes: usize, images: ImageFormula) -> u32 {
    let mut total = u32::try_from(json_bytes)
        .unwrap_or(u32::MAX)
        .saturating_add(TOKENS_PER_MESSAGE)
        .saturating_add(msg.other_part_tokens);
    for image in &msg.images {
        total = total.saturating_add(image_tokens_for(image, images));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{counter, Backend, Encoding};
    use crate::view::{Detail, Image, Role, ToolCall};

    // cl100k_base so that every pinned count can be checked against Python tiktoken.
    fn cl100k() -> &'static dyn Counter {
        counter(Encoding::Cl100kBase, Backend::BpeOpenai)
    }

    fn n(text: &str) -> u32 {
        cl100k().count(text) as u32
    }

    #[test]
    fn plain_text_message() {
        let msg = Message::text(Role::User, "hello world");
        // 3 + "user" (1) + "hello world" (2)
        assert_eq!(n("user"), 1);
        assert_eq!(message_tokens(&msg, cl100k()), 6);
    }

    /// The cookbook's example conversation: its `num_tokens_from_messages` gives 124 for
    /// gpt-4o (o200k_base), 129 for gpt-4 (cl100k_base), both matching the API, reply priming
    /// included.
    #[test]
    fn cookbook_conversation() {
        let named = |name: &str, text: &str| Message {
            name: Some(name.to_owned()),
            ..Message::text(Role::System, text)
        };
        let messages = [
            Message::text(
                Role::System,
                "You are a helpful, pattern-following assistant that translates corporate \
                 jargon into plain English.",
            ),
            named(
                "example_user",
                "New synergies will help drive top-line growth.",
            ),
            named(
                "example_assistant",
                "Things working well together will increase revenue.",
            ),
            named(
                "example_user",
                "Let's circle back when we have more bandwidth to touch base on opportunities \
                 for increased leverage.",
            ),
            named(
                "example_assistant",
                "Let's talk later when we're less busy about how to do better.",
            ),
            Message::text(
                Role::User,
                "This late pivot means we don't have time to boil the ocean for the client \
                 deliverable.",
            ),
        ];
        for (encoding, expected) in [(Encoding::O200kBase, 124), (Encoding::Cl100kBase, 129)] {
            for backend in [Backend::Tiktoken, Backend::BpeOpenai] {
                let c = counter(encoding, backend);
                let total: u32 = messages.iter().map(|m| message_tokens(m, c)).sum();
                assert_eq!(total + REPLY_PRIMING, expected, "{}", encoding.name());
            }
        }
    }

    #[test]
    fn tool_result_with_name_and_call_id() {
        let msg = Message {
            name: Some("get_weather".to_owned()),
            ..Message::tool_result("call_abc123", "{\"temp\": 21}", false)
        };
        let expected =
            3 + n("tool") + n("{\"temp\": 21}") + n("get_weather") + 1 + n("call_abc123");
        assert_eq!(message_tokens(&msg, cl100k()), expected);
        // Pinned by hand so a change in the parts counted shows up here.
        assert_eq!(
            (
                n("tool"),
                n("{\"temp\": 21}"),
                n("get_weather"),
                n("call_abc123")
            ),
            (1, 6, 2, 4)
        );
        assert_eq!(expected, 17);
    }

    #[test]
    fn assistant_with_two_tool_calls() {
        let call = |id: &str, name: &str, arguments: &str| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        };
        let msg = Message::assistant_calls(vec![
            call("call_1", "get_weather", r#"{"city":"Paris"}"#),
            call("call_2", "get_time", r#"{"tz":"Europe/Paris"}"#),
        ]);
        // The empty content text costs nothing; each call costs its three strings plus 3.
        let expected = 3
            + n("assistant")
            + (n("call_1") + n("get_weather") + n(r#"{"city":"Paris"}"#) + 3)
            + (n("call_2") + n("get_time") + n(r#"{"tz":"Europe/Paris"}"#) + 3);
        assert_eq!(message_tokens(&msg, cl100k()), expected);
        assert_eq!(
            (n("call_1"), n("get_weather"), n(r#"{"city":"Paris"}"#)),
            (3, 2, 5)
        );
        assert_eq!(
            (n("call_2"), n("get_time"), n(r#"{"tz":"Europe/Paris"}"#)),
            (3, 2, 7)
        );
        assert_eq!(expected, 32);
    }

    #[test]
    fn image_message() {
        let msg = Message {
            images: vec![
                Image {
                    detail: Detail::High,
                    size: Some((1024, 1024)),
                },
                Image {
                    detail: Detail::Low,
                    size: None,
                },
            ],
            other_part_tokens: 40,
            ..Message::text(Role::User, "What is in this image?")
        };
        // 3 + "user" + text + 765 (4 tiles) + 85 (low) + 40 (other parts)
        let expected = 3 + n("user") + n("What is in this image?") + 765 + 85 + 40;
        assert_eq!(message_tokens(&msg, cl100k()), expected);
        assert_eq!(expected, 3 + 1 + 6 + 765 + 85 + 40);
    }
}
