//! Amazon Bedrock Converse: messages of `{role, content: [blocks]}`, each block an object
//! setting one member (text, image, document, video, toolUse, toolResult, reasoningContent,
//! cachePoint, guardContent, ...), read from JSON (`parse`), paired by Bedrock's rules in its
//! ValidationException wording (`rules`: results in the very next user turn, roles alternating,
//! a user turn first), and mapped onto the canonical view with real costs (`canonical`).

mod canonical;
mod parse;
// Read by the binding only (`py::provider_rules`).
#[cfg(feature = "python")]
pub(crate) use parse::{ASSISTANT_BLOCKS, RESULT_BLOCKS, USER_BLOCKS};
mod rules;

use super::item_cache::ItemCache;
use super::{appended, edit, json_string, push_array, NoteAt, ResultAt, ResultsAt};
use super::{cached_items, message_of, runs, within, Canonical, ItemFacts, Provider, Run};
use crate::error::CoreError;
use crate::pairing::PairingIssue;
use crate::view::{Role, Text, ToolCall};
use serde_json::value::RawValue;
use std::sync::Arc;

/// Bedrock's ValidationException texts, verbatim (sources in docs/providers/bedrock_converse.md).
pub const START_WITH_USER: &str = "A conversation must start with a user message. Try again \
     with a conversation that starts with a user message.";
pub const ALTERNATE: &str = "A conversation must alternate between user and assistant roles. \
     Make sure the conversation alternates between user and assistant roles and try again.";
/// `{n}` is the message index.
pub const MIXED_TURN: &str = "messages.{n}.content: Conversation blocks and tool result blocks \
     cannot be provided in the same turn.";
/// `{n}` is the message index, `{ids}` the ids.
pub const EXPECTED_RESULTS: &str =
    "Expected toolResult blocks at messages.{n}.content for the following Ids: {ids}";
pub const TOO_MANY_RESULTS: &str = "The number of toolResult blocks at messages.{n}.content \
     exceeds the number of toolUse blocks of previous turn.";
pub const DUPLICATE_USES: &str =
    "The toolUse blocks at messages.{n}.content contain duplicate Ids: {ids}";
pub const DUPLICATE_RESULTS: &str =
    "The toolResult blocks at messages.{n}.content contain duplicate Ids: {ids}";
/// `{b}` is the block index.
pub const EMPTY_ERROR_RESULT: &str = "The content field at messages.{n}.content.{b}.toolResult \
     cannot be empty when status value is error.";
pub const EMPTY_CONTENT: &str = "The content field in the Message object at messages.{n} is empty.";

/// What the model reads of a block or a tool result: counted as the Anthropic provider counts
/// it, since Converse mostly serves Claude.
pub use super::anthropic::Parts;

/// One `toolUse` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolUse {
    pub id: Text,
    pub name: Text,
    /// The input as compact JSON.
    pub input: Text,
}

/// One `toolResult` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    pub id: String,
    /// `status` is "error".
    pub is_error: bool,
    /// Index of the block in its message.
    pub block: usize,
    /// Its `content` list is empty.
    pub empty: bool,
    pub parts: Parts,
}

/// One message, as much of it as pairing and counting need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BedrockMessage {
    /// `User` or `Assistant`.
    pub role: Role,
    /// Everything but the tool blocks.
    pub parts: Parts,
    pub uses: Vec<ToolUse>,
    pub results: Vec<ToolResult>,
    /// Holds a conversation block (text, media, guard content), which Bedrock refuses next to
    /// tool results.
    pub conversation: bool,
}

/// Amazon Bedrock Converse.
pub struct BedrockConverse;

impl Provider for BedrockConverse {
    const KEY: &'static str = "bedrock_converse";
    const SYSTEM_HOLDS_FIRST_TURN: bool = true;
    type Item = BedrockMessage;

    fn item_cache(&self) -> Option<&'static ItemCache<BedrockMessage>> {
        cached_items!(BedrockMessage, 4)
    }

    fn facts(&self, m: &BedrockMessage) -> ItemFacts {
        ItemFacts::of_role(m.role, "assistant")
    }

    fn parse(&self, i: usize, raw: &[u8]) -> Result<BedrockMessage, CoreError> {
        parse::message(i, raw)
    }

    /// The note goes in the system, a text block of its own after the caller's; a ledger
    /// note takes the place of the ledger note an earlier assembly left among them (the
    /// adapter's order: the caller may have added blocks after it since).
    fn ledger_note(&self, system: Option<&str>, note: &str) -> NoteAt {
        let block = format!(r#"{{"text":{}}}"#, json_string(note));
        let written = match system {
            None | Some("null") => Some(format!("[{block}]")),
            Some(s) if note.starts_with(crate::ledger::MARKER) => in_place_of_ledger(s, &block),
            Some(s) => appended(s, &block),
        };
        written.map_or(NoteAt::Adapter, NoteAt::System)
    }

    /// Kept neighbours of one role are merged when the request is rendered.
    fn sends_as_given(&self, facts: &[ItemFacts], kept: &[usize]) -> bool {
        !kept
            .windows(2)
            .any(|w| facts[w[0]].role == facts[w[1]].role)
    }

    /// Bedrock wants roles to alternate: every run of kept neighbours of one role goes out as
    /// one message, as the adapter merges them.
    fn merges(&self, facts: &[ItemFacts], kept: &[usize]) -> Option<Vec<Run>> {
        let joins = |j: usize| facts[kept[j]].role == facts[kept[j - 1]].role;
        Some(runs(kept.len(), joins, |_| true))
    }

    /// `{"role": role, "content": blocks}`, the blocks of each item in order; None for a user
    /// turn that would mix tool results with other content, which Bedrock refuses (the
    /// assembly refuses such a plan: a reading that pairs does not lead to one).
    fn merged(&self, role: &str, items: &[&[u8]]) -> Option<Vec<u8>> {
        #[derive(serde::Deserialize)]
        struct Content<'a> {
            #[serde(borrow)]
            content: Vec<&'a RawValue>,
        }
        #[derive(serde::Deserialize)]
        struct Block<'a> {
            #[serde(borrow, rename = "toolResult")]
            tool_result: Option<&'a RawValue>,
        }
        let mut blocks = Vec::new();
        for raw in items {
            blocks.extend(serde_json::from_slice::<Content<'_>>(raw).ok()?.content);
        }
        let results = blocks
            .iter()
            .filter(|b| {
                serde_json::from_str::<Block<'_>>(b.get())
                    .is_ok_and(|b| b.tool_result.is_some_and(|r| r.get() != "null"))
            })
            .count();
        if role == "user" && results > 0 && results < blocks.len() {
            return None;
        }
        Some(message_of(role, blocks.iter().map(|b| b.get().as_bytes())))
    }

    /// The blocks without the summary notes; a ledger note's block stays where it lies, for
    /// the new one to take its place (`ledger_note`).
    fn without_notes(&self, system: &str) -> Option<String> {
        super::array_without(system, |t| t.starts_with(crate::summary::MARKER))
    }

    /// A synthesized result joins the user turn the plan puts it behind, or opens one.
    fn results_placed(&self) -> ResultsAt {
        ResultsAt::Behind
    }

    /// The turn's results with the synthesized ones after them; None for a turn holding
    /// other content, which Bedrock refuses (the assembly refuses such a plan).
    fn with_results(&self, item: &[u8], results: &[String]) -> Option<Vec<u8>> {
        let object: &RawValue = serde_json::from_slice(item).ok()?;
        let content = edit::field(object, "content")?;
        let blocks = edit::elements(content)?;
        if !blocks
            .iter()
            .all(|b| edit::field(b, "toolResult").is_some())
        {
            return None;
        }
        let elements = blocks
            .iter()
            .map(|b| b.get())
            .chain(results.iter().map(String::as_str));
        super::with_array(item, content, elements.map(str::as_bytes))
    }

    fn synthesized_result(
        &self,
        _items: &[Arc<Self::Item>],
        _item: usize,
        _nth: usize,
        call: &ToolCall,
    ) -> Result<Option<String>, CoreError> {
        Ok(Some(synthesized_block(&call.id)))
    }

    /// Each `toolResult` answering the call holds the text as one text block, before the
    /// images it held (counted apart, as the adapter keeps them); its status stays.
    fn result_rewritten(
        &self,
        item: &[u8],
        at: ResultAt<'_>,
        text: &str,
    ) -> Option<Option<Vec<u8>>> {
        // The adapter rewrites the first message the canonical one stands for.
        if at.nth.is_none() {
            return Some(None);
        }
        let Some(blocks) = edit::array_field(item, "content")? else {
            return Some(None);
        };
        let mut edits = Vec::new();
        for block in blocks {
            let Some(result) = edit::field(block, "toolResult") else {
                continue;
            };
            let Some(fields) = edit::fields(result) else {
                return None; // not an object: the parser refused it already
            };
            if edit::last(&fields, "toolUseId")
                .and_then(edit::string)
                .as_deref()
                != Some(at.call_id)
            {
                continue;
            }
            let lead = format!(r#"{{"text":{}}}"#, json_string(text));
            let images = edit::last(&fields, "content")
                .and_then(edit::elements)
                .unwrap_or_default();
            let mut value = Vec::new();
            push_array(
                &mut value,
                std::iter::once(lead.as_bytes()).chain(
                    images
                        .iter()
                        .filter(|b| is_image(b))
                        .map(|b| b.get().as_bytes()),
                ),
            );
            edits.push(edit::set_field(item, result, "content", value)?);
        }
        edit::applied(item, edits)
    }

    /// Each image block, inside a `toolResult` too, becomes a text block, in the first
    /// message the canonical one stands for.
    fn media_rewritten(&self, item: &[u8], first: bool, text: &str) -> Option<Option<Vec<u8>>> {
        if !first {
            return Some(None);
        }
        let Some(blocks) = edit::array_field(item, "content")? else {
            return Some(None);
        };
        let placeholder = format!(r#"{{"text":{}}}"#, json_string(text)).into_bytes();
        let mut edits = Vec::new();
        for block in blocks {
            let inner = edit::field(block, "toolResult")
                .and_then(|r| edit::field(r, "content"))
                .and_then(edit::elements)
                .unwrap_or_default();
            for b in std::iter::once(block).chain(inner).filter(|b| is_image(b)) {
                edits.push((within(item, b)?, placeholder.clone()));
            }
        }
        edit::applied(item, edits)
    }

    fn validate(&self, items: &[Arc<BedrockMessage>]) -> Vec<PairingIssue> {
        rules::validate(items)
    }

    fn canonical(&self, items: &[Arc<BedrockMessage>]) -> Canonical {
        canonical::canonical(items)
    }
}

/// Whether a content block is an image, or a guarded one, as the adapter tells them.
fn is_image(block: &RawValue) -> bool {
    edit::field(block, "image").is_some()
        || edit::field(block, "guardContent").is_some_and(|g| edit::field(g, "image").is_some())
}

/// The error result a plan synthesizes for `call_id`, as the adapter writes it.
fn synthesized_block(call_id: &str) -> String {
    format!(
        r#"{{"toolResult":{{"toolUseId":{},"status":"error","content":[{{"text":{}}}]}}}}"#,
        json_string(call_id),
        json_string(crate::plan::SYNTHESIZED_RESULT_TEXT)
    )
}
#[cfg(test)]
mod tests;

/// The system blocks `system` (JSON) with `block` in the place of the first ledger note's
/// block and without the others, or after them all where there is none.
fn in_place_of_ledger(system: &str, block: &str) -> Option<String> {
    let blocks: Vec<&RawValue> = serde_json::from_str(system).ok()?;
    let ledger =
        |b: &RawValue| super::element_text(b).is_some_and(|t| t.starts_with(crate::ledger::MARKER));
    let Some(first) = blocks.iter().position(|b| ledger(b)) else {
        return appended(system, block);
    };
    let kept = blocks.iter().enumerate().filter_map(|(k, b)| match k {
        _ if k == first => Some(block),
        _ if ledger(b) => None,
        _ => Some(b.get()),
    });
    Some(format!("[{}]", kept.collect::<Vec<_>>().join(",")))
}
