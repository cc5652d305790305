//! Translation between providers: a history read with one provider's rules and written in
//! another's shape, tool pairing kept. Provider-bound items (signatures, encrypted reasoning,
//! opaque compaction) never cross; readable reasoning may become text; a part the target
//! cannot carry is refused or made a text placeholder; every drop and rewrite is reported.
//! The output is read back with the target's own rules before it is returned.

pub mod body;
pub mod ids;
pub mod portable;
pub mod read;
pub mod report;
mod schema;
mod settle;
pub mod write;

use crate::error::CoreError;
use crate::native;
pub use report::{Change, Report};
use serde_json::Value;

/// What becomes of reasoning the model wrote in readable text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reasoning {
    /// Left out, reported.
    #[default]
    Drop,
    /// Sent as plain text of the assistant's turn, reported.
    Text,
}

/// What becomes of a part the target cannot carry (an image where it takes none, audio, a
/// hosted tool's item).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unsupported {
    /// Refused: `InvalidMessage` naming the item and the part.
    #[default]
    Refuse,
    /// A short text in its place saying what was there, reported.
    Placeholder,
}

/// How to translate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub reasoning: Reasoning,
    pub unsupported: Unsupported,
    /// Summaries of opaque compaction items, by source item index: an item without one is
    /// refused.
    pub summaries: Vec<(usize, String)>,
    /// Gemini target: sign each call step with the sentinel Gemini documents for calls that
    /// come from elsewhere (`skip_thought_signature_validator`), so Gemini 3 takes them.
    pub gemini_sentinel: bool,
}

impl Options {
    pub fn new() -> Options {
        Options {
            gemini_sentinel: true,
            ..Options::default()
        }
    }
}

/// A translated history.
#[derive(Clone, Debug, PartialEq)]
pub struct Translated {
    /// The target's items.
    pub messages: Vec<Value>,
    /// The same items as JSON, as the target's validator read them.
    pub json: Vec<u8>,
    /// The target's top-level system, where it has one and there is one.
    pub system: Option<Value>,
    /// The tools in the target's shape, when tools were given.
    pub tools: Option<Value>,
    pub report: Report,
}

/// Parses `raw` (JSON) or names it in a typed error.
pub(crate) fn parse_json(raw: &[u8], what: &str) -> Result<Value, CoreError> {
    serde_json::from_slice(raw).map_err(|e| CoreError::InvalidMessage {
        index: None,
        reason: format!("{what} is not valid JSON ({e})"),
    })
}

/// Translates `messages` (a JSON array of `source`'s items) with its top-level `system` and
/// `tools` (JSON, each optional) into `target`'s shape.
///
/// Errors: `Config` for an unknown provider; `InvalidMessage` for a malformed item, a part
/// refused (`Unsupported::Refuse`) or an opaque compaction without a summary; `Pairing` when
/// the source's calls and results do not pair by its own rules.
pub fn translate(
    source: &str,
    target: &str,
    messages: &[u8],
    system: Option<&[u8]>,
    tools: Option<&[u8]>,
    options: &Options,
) -> Result<Translated, CoreError> {
    for p in [source, target] {
        native::item_seed(p)?;
    }
    let issues = native::validate_json(source, &[messages])?;
    if !issues.is_empty() {
        return Err(CoreError::Pairing(issues));
    }
    let items = match parse_json(messages, "messages")? {
        Value::Array(items) => items,
        _ => return Err(read::unknown_shape("messages must be a JSON array")),
    };
    let system = system.map(|s| parse_json(s, "system")).transpose()?;
    let tools = tools.map(|t| parse_json(t, "tools")).transpose()?;
    translate_values(
        source,
        target,
        &items,
        system.as_ref(),
        tools.as_ref(),
        options,
    )
}

/// `translate` of items already parsed (and the source's pairing checked).
pub(crate) fn translate_values(
    source: &str,
    target: &str,
    items: &[Value],
    system: Option<&Value>,
    tools: Option<&Value>,
    options: &Options,
) -> Result<Translated, CoreError> {
    if source == target {
        // Nothing to translate: the history is the target's already, bound items included.
        return Ok(Translated {
            messages: items.to_vec(),
            json: serde_json::to_vec(items).unwrap_or_default(),
            system: system.cloned(),
            tools: tools.cloned(),
            report: Report::default(),
        });
    }
    let conversation = read::read(source, items, system, tools)?;
    let mut report = Report::default();
    let settled = settle::settle(source, target, conversation, options, &mut report)?;
    let out = write::write(target, &settled, options, &mut report)?;
    let check: Vec<u8> =
        serde_json::to_vec(&out.messages).map_err(|e| CoreError::InvalidMessage {
            index: None,
            reason: format!("the translation could not be written ({e})"),
        })?;
    let issues = native::validate_json(target, &[&check])?;
    if !issues.is_empty() {
        return Err(CoreError::Pairing(issues));
    }
    Ok(Translated {
        messages: out.messages,
        json: check,
        system: out.system,
        tools: out.tools,
        report,
    })
}

/// The items of `messages` (a JSON array of `source`'s items) that are opaque compactions a
/// translation keeps, and so needs a summary of (`Options::summaries`).
///
/// Errors: those of reading the items.
pub fn opaque_compactions(source: &str, messages: &[u8]) -> Result<Vec<usize>, CoreError> {
    let items = match parse_json(messages, "messages")? {
        Value::Array(items) => items,
        _ => return Err(read::unknown_shape("messages must be a JSON array")),
    };
    let conversation = read::read(source, &items, None, None)?;
    Ok(settle::opaque(&conversation))
}

#[cfg(test)]
mod tests;
