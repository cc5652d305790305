//! The portable form of a conversation: what every provider's items say, part by part, with
//! nothing left out. Readers fill it from native JSON; writers render it in a target's shape.
//! Unlike the canonical view (`view::Message`), which keeps what counting needs, it keeps the
//! payloads: image bytes and URLs, call arguments, and the provider-bound items, so that each
//! one is either written or reported.

use serde_json::Value;

/// Who speaks a turn, in the words every provider maps onto.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    System,
    Developer,
    User,
    Assistant,
    /// Tool results: one turn per result.
    Tool,
}

impl Speaker {
    pub fn is_instruction(self) -> bool {
        matches!(self, Speaker::System | Speaker::Developer)
    }
}

/// Where the bytes of an image or document are.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// Inline, base64, with its media type (`image/png`, `application/pdf`).
    Base64 { mime: String, data: String },
    /// At a URL the provider fetches (`https://`, `gs://`).
    Url { url: String, mime: Option<String> },
    /// A file the source provider stores (`file_id`): only that provider can read it.
    FileId(String),
    /// An Amazon S3 object (Bedrock's `s3Location`).
    S3 { uri: String, mime: Option<String> },
}

impl Source {
    /// The media type, where the source states one.
    pub fn mime(&self) -> Option<&str> {
        match self {
            Source::Base64 { mime, .. } => Some(mime),
            Source::Url { mime, .. } | Source::S3 { mime, .. } => mime.as_deref(),
            Source::FileId(_) => None,
        }
    }

    /// A short description for a placeholder or an error: never the payload itself.
    pub fn describe(&self) -> String {
        match self {
            Source::Base64 { mime, data } => format!("{mime}, {} base64 bytes", data.len()),
            Source::Url { url, .. } => format!("at {}", clip(url, 200)),
            Source::FileId(id) => format!("file {}", clip(id, 100)),
            Source::S3 { uri, .. } => format!("at {}", clip(uri, 200)),
        }
    }
}

fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}

/// What a provider-bound item is, as the report names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundKind {
    /// Anthropic `thinking.signature`, Bedrock `reasoningText.signature`.
    Signature,
    /// Anthropic `redacted_thinking`, Bedrock `redactedContent`.
    RedactedThinking,
    /// OpenAI Responses `reasoning.encrypted_content`.
    EncryptedReasoning,
    /// Gemini `thoughtSignature` on a part.
    ThoughtSignature,
}

impl BoundKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BoundKind::Signature => "signature",
            BoundKind::RedactedThinking => "redacted_thinking",
            BoundKind::EncryptedReasoning => "encrypted_content",
            BoundKind::ThoughtSignature => "thought_signature",
        }
    }
}

/// One part of a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(String),
    Image(Source),
    Document {
        source: Source,
        name: Option<String>,
    },
    /// A function call; `arguments` is the JSON text of the arguments as the source gave them.
    Call {
        id: String,
        name: String,
        arguments: String,
    },
    /// A tool result (only in `Speaker::Tool` turns): text, image and document parts.
    Result {
        id: String,
        content: Vec<Part>,
        is_error: bool,
    },
    /// Reasoning the model wrote: readable text (if any) and what binds it to its provider.
    Reasoning {
        text: Option<String>,
        bound: Option<BoundKind>,
    },
    /// A provider-bound item with nothing readable in it.
    Bound(BoundKind),
    /// A compaction: the readable summary if there is one (Anthropic's `compaction.content`);
    /// None for an opaque one (OpenAI's `encrypted_content` alone).
    Compaction {
        summary: Option<String>,
    },
    /// A part with no equivalent elsewhere (audio, a hosted tool's call), named by its type.
    Other {
        what: String,
    },
}

/// One turn of the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub speaker: Speaker,
    pub parts: Vec<Part>,
    /// The source item it was read from (an index into the source's list).
    pub item: usize,
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq)]
pub enum Tool {
    Function {
        name: String,
        description: Option<String>,
        /// JSON Schema of the arguments.
        schema: Value,
    },
    /// A provider's own tool (web search, code execution): no equivalent elsewhere.
    Hosted { what: String },
}

/// Which tool the model must use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    Auto,
    None,
    /// Some tool.
    Any,
    Named(String),
}

/// A conversation in portable form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The top-level system texts (where the source has a system outside its items).
    pub system: Vec<String>,
    pub turns: Vec<Turn>,
    pub tools: Vec<Tool>,
    /// Source items the reader left out, each with what it was and why: `(item, what, why)`.
    pub left_out: Vec<(usize, String, String)>,
}
