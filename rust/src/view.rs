//! The canonical view of a request: what every provider's messages reduce to before counting,
//! validation and planning. Provider parsers build it; nothing downstream looks at native JSON.

/// A text of a canonical message: shared, so that the messages a reading builds from cached
/// items, and the readings kept, hold the items' own texts rather than copies of them.
pub type Text = std::sync::Arc<str>;

/// The texts as string slices.
pub fn strs(texts: &[Text]) -> Vec<&str> {
    texts.iter().map(|t| &**t).collect()
}

/// The role of a message in the canonical view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
}

impl Role {
    /// The role's name as OpenAI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// System and developer messages carry the rules of the conversation.
    pub fn is_instruction(self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

/// How much detail the caller asked for on an image (OpenAI's `detail`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    Low,
    High,
    Auto,
}

/// An image part. The pixel size is read from a data URL's header when it has one; a remote
/// URL has no known size, and counting then assumes the most expensive size the detail allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub detail: Detail,
    pub size: Option<(u32, u32)>,
}

/// One function call made by an assistant message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: Text,
    pub name: Text,
    pub arguments: Text,
}

/// How a tool result rewritten to a text goes out (Gemini's `functionResponse.response`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framed {
    /// As the value under this key of a one-key JSON object, read back as the object's JSON
    /// (`{"output": text}`).
    Object(Text),
    /// As an error (`{"error": text}`), read back as `Error: text` unless it opens like one.
    Error,
}

/// One message of the canonical view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    /// The optional participant `name` (counted as the cookbook counts it).
    pub name: Option<String>,
    /// Every text the model reads from this message, in order (content string, text parts,
    /// refusal).
    pub texts: Vec<Text>,
    pub images: Vec<Image>,
    /// Tokens of parts that are neither text nor image, counted by the parser (audio, files).
    pub other_part_tokens: u32,
    /// Calls made by an assistant message, in order.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool result: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// For a tool result: whether it reports a failure.
    pub is_error: bool,
    /// Size of the message as the caller serialized it.
    pub bytes: usize,
    /// For a tool result whose rewritten text the provider does not read as that text alone:
    /// how the adapter sends it, so that the rewrite is counted as the provider reads it
    /// (`rewrite::rewritten`). None: as the text.
    pub framed_as: Option<Framed>,
    /// For a tool result that also stands for items folded into it (a Responses item met
    /// while its ring was open): the parts those items brought, the last of `texts` and
    /// `images` and part of `other_part_tokens`. A rewrite of the result leaves them, as the
    /// adapter leaves those items.
    pub folded: Folded,
}

/// Parts of a message that items folded into it brought (`Message::folded`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    /// The last `texts` of the message.
    pub texts: usize,
    /// The last `images` of the message.
    pub images: usize,
    /// Of the message's `other_part_tokens`.
    pub other_part_tokens: u32,
}

impl Message {
    /// A message with only a role and text, as insertions and tests build them.
    pub fn text(role: Role, text: &str) -> Self {
        Message {
            role,
            name: None,
            texts: vec![text.into()],
            images: Vec::new(),
            other_part_tokens: 0,
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            bytes: text.len(),
            framed_as: None,
            folded: Folded::default(),
        }
    }

    /// A tool result answering `call_id`.
    pub fn tool_result(call_id: &str, text: &str, is_error: bool) -> Self {
        Message {
            tool_call_id: Some(call_id.to_owned()),
            is_error,
            ..Message::text(Role::Tool, text)
        }
    }

    /// An assistant message making `calls`.
    pub fn assistant_calls(calls: Vec<ToolCall>) -> Self {
        Message {
            tool_calls: calls,
            ..Message::text(Role::Assistant, "")
        }
    }

    pub fn has_tool_calls(&self) -> bool {
        !self.tool_calls.is_empty()
    }
}

/// Whether a tool result's text opens as tool runtimes report a failure (`Error`, an
/// exception, a Python traceback), whatever the case and leading whitespace.
pub(crate) fn opens_like_an_error(text: &str) -> bool {
    const HEADS: [&str; 3] = ["error", "exception", "traceback (most recent call last)"];
    // Lowercasing never shortens a char, so the heads are found in the first chars' lowercase.
    let head: String = text
        .trim_start()
        .chars()
        .take(40)
        .collect::<String>()
        .to_lowercase();
    HEADS.iter().any(|h| head.starts_with(h))
}

/// The text of an error result as the model reads it when the provider frames errors so
/// (Gemini's `{"error": text}`): as written when it opens like an error, else after
/// `Error: `.
pub(crate) fn error_text(text: String) -> String {
    if opens_like_an_error(&text) {
        text
    } else {
        format!("Error: {text}")
    }
}
