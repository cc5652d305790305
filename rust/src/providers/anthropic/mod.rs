//! The Anthropic Messages API (`/v1/messages`): messages of content blocks, read strictly
//! (`parse`), paired by Anthropic's rules in its 400 wording (`rules`), and mapped onto the
//! canonical view with real costs (`canonical`). Consecutive same-role messages are one turn
//! to the API, so a turn is what pairs and what the core groups.
//!
//! Two rules of the API shape what is counted at all: a `compaction` block makes the API drop
//! every block before it (only the latest one matters), and a text block of only whitespace is
//! refused, so such blocks are stripped, never counted (sources in docs/providers/anthropic.md).

mod canonical;
pub(crate) mod parse;
mod rules;

use super::item_cache::ItemCache;
use super::{appended, edit, json_string, note_in_string, push_array, NoteAt, ResultAt, ResultsAt};
use super::{
    cached_items, message_of, runs, with_array, within, Canonical, ItemFacts, MarkerLimit,
    Provider, Run,
};
use crate::error::CoreError;
use crate::pairing::PairingIssue;
use crate::view::{Image, Role, Text, ToolCall};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

/// Blocks with `cache_control` a request may carry, the system's included (the API refuses a
/// fifth: docs/providers/anthropic.md).
pub const MAX_CACHE_MARKERS: u32 = 4;

/// The text of the user turn placed between two assistant turns that may not be merged
/// (`parted`): it says what stood there.
macro_rules! omitted_turns {
    () => {
        "[earlier turns omitted]"
    };
}
pub const OMITTED_TURNS_TEXT: &str = omitted_turns!();
const OMITTED_TURNS: &str = concat!(r#"{"role":"user","content":""#, omitted_turns!(), r#""}"#);

/// Counted parts of a block the model reads: texts, images, and costs known only as a number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    pub texts: Vec<Text>,
    pub images: Vec<Image>,
    /// Tokens of parts with a published price but no text (a PDF page's text layer).
    pub other_tokens: u32,
}

/// One content block, as much of it as pairing and counting need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Block {
    /// A text block; `blank` when it holds only whitespace, which the API refuses.
    Text { text: Text, blank: bool },
    /// A `thinking` block's text, or a `redacted_thinking` block's data.
    Thinking { text: Text },
    ToolUse {
        id: Text,
        name: Text,
        /// The input as compact JSON.
        input: Text,
    },
    ToolResult {
        id: String,
        parts: Parts,
        is_error: bool,
    },
    /// An image, document or search result in a user message.
    Media(Parts),
    /// A `compaction` block's summary (empty when compaction failed): the API ignores every
    /// block before the latest one, and reads the summary in their place.
    Compaction { text: Text },
    /// Any other block (server tool blocks and results, ...): its JSON, counted as text.
    Other { json: Text },
}

impl Block {
    pub fn is_thinking(&self) -> bool {
        matches!(self, Block::Thinking { .. })
    }
}

/// One message: its role (user or assistant) and blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnthropicMessage {
    pub role: Role,
    pub blocks: Vec<Block>,
    /// Blocks carrying `cache_control` (never counted; rendering checks the API's limit).
    pub cache_markers: u32,
}

/// Where the API starts reading: the message and block of the latest `compaction` block, or
/// the very start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Start {
    pub message: usize,
    pub block: usize,
}

/// The first block the API reads: the latest `compaction` block, else the first block.
pub fn start(messages: &[Arc<AnthropicMessage>]) -> Start {
    latest_compaction(messages).unwrap_or_default()
}

/// Where the latest `compaction` block stands, if any.
pub fn latest_compaction(messages: &[Arc<AnthropicMessage>]) -> Option<Start> {
    messages.iter().enumerate().rev().find_map(|(i, m)| {
        let b = m
            .blocks
            .iter()
            .rposition(|b| matches!(b, Block::Compaction { .. }))?;
        Some(Start {
            message: i,
            block: b,
        })
    })
}

/// The blocks of message `i` the API reads, given where it starts.
pub fn read_blocks(messages: &[Arc<AnthropicMessage>], from: Start, i: usize) -> &[Block] {
    let blocks = &messages[i].blocks;
    match i.cmp(&from.message) {
        std::cmp::Ordering::Less => &[],
        std::cmp::Ordering::Equal => &blocks[from.block..],
        std::cmp::Ordering::Greater => blocks,
    }
}

/// Whether a text is whitespace only, which Anthropic refuses ("text content blocks must
/// contain non-whitespace text"): the whitespace of Python's `str.isspace`, which the adapter
/// strips by (Unicode's, and the separators U+001C to U+001F).
pub fn blank(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// The Anthropic Messages API.
pub struct Anthropic;

impl Provider for Anthropic {
    const KEY: &'static str = "anthropic";
    type Item = AnthropicMessage;

    /// The tool-use system prompt Anthropic adds when tools are given: the largest figure it
    /// lists (Claude 3 Opus, `tool_choice` auto: 530 tokens; docs/providers/anthropic.md).
    const TOOL_SYSTEM_TOKENS: u32 = 530;

    fn item_cache(&self) -> Option<&'static ItemCache<AnthropicMessage>> {
        cached_items!(AnthropicMessage, 1)
    }

    fn facts(&self, m: &AnthropicMessage) -> ItemFacts {
        ItemFacts {
            blank_text: m
                .blocks
                .iter()
                .any(|b| matches!(b, Block::Text { blank: true, .. })),
            cache_markers: m.cache_markers,
            // As the adapter sends it: after its whitespace-only text is stripped.
            opens_with_thinking: m
                .blocks
                .iter()
                .find(|b| !matches!(b, Block::Text { blank: true, .. }))
                .is_some_and(Block::is_thinking),
            ..ItemFacts::of_role(m.role, "assistant")
        }
    }

    fn parse(&self, i: usize, raw: &[u8]) -> Result<AnthropicMessage, CoreError> {
        parse::message(i, raw)
    }

    /// The note goes in the system: after a blank line in a string, as a text block of its
    /// own in a list of blocks.
    fn ledger_note(&self, system: Option<&str>, note: &str) -> NoteAt {
        match system {
            None | Some("null") => NoteAt::System(json_string(note)),
            Some(s) if s.starts_with('"') => note_in_string(s, note),
            Some(s) => {
                let block = format!(r#"{{"type":"text","text":{}}}"#, json_string(note));
                appended(s, &block).map_or(NoteAt::Adapter, NoteAt::System)
            }
        }
    }

    /// Kept neighbours of one role are merged (`merges`) and whitespace-only text is stripped
    /// when the request is written.
    fn sends_as_given(&self, facts: &[ItemFacts], kept: &[usize]) -> bool {
        !kept
            .windows(2)
            .any(|w| facts[w[0]].role == facts[w[1]].role)
            && !kept.iter().any(|&i| facts[i].blank_text)
    }

    /// Kept neighbours of one role go out as the adapter sends them (whitespace-only text
    /// stripped first, `stripped`): as they are when the caller sent them in one turn, else
    /// as one message; an assistant message that opens with thinking behind another is kept
    /// apart from it (`parted`).
    fn merges(&self, facts: &[ItemFacts], kept: &[usize]) -> Option<Vec<Run>> {
        // The caller's turns: a turn ends where the role changes, dropped items included.
        let mut turn = Vec::with_capacity(facts.len());
        let mut t = 0usize;
        for (i, f) in facts.iter().enumerate() {
            if i > 0 && facts[i - 1].role != f.role {
                t += 1;
            }
            turn.push(t);
        }
        let joins = |j: usize| same_role(facts, kept, j) && !facts[kept[j]].opens_with_thinking;
        let merge = |run: &Range<usize>| turn[kept[run.start]] != turn[kept[run.end - 1]];
        Some(runs(kept.len(), joins, merge))
    }

    /// At most 4 `cache_control` blocks, the system's included; the refusal is the API's 400
    /// message, then what ringbound does about it.
    fn marker_limit(&self) -> Option<MarkerLimit> {
        Some(MarkerLimit {
            most: MAX_CACHE_MARKERS,
            count: cache_markers_in,
            refusal: |n| {
                format!(
                    "A maximum of {MAX_CACHE_MARKERS} blocks with cache_control may be provided. \
                     Found {n}. (ringbound: the request keeps the caller's cache_control \
                     breakpoints and adds its own only within the limit; remove some before \
                     assembling)"
                )
            },
        })
    }

    /// Merged behind other blocks, thinking would no longer open its turn, which Anthropic
    /// rejects: the adapter places a user turn between the two assistant turns.
    fn parted(&self, facts: &[ItemFacts], kept: &[usize]) -> (Vec<usize>, &'static str) {
        let at = (1..kept.len())
            .filter(|&j| same_role(facts, kept, j) && facts[kept[j]].opens_with_thinking)
            .collect();
        (at, OMITTED_TURNS)
    }

    /// `{"role": role, "content": blocks}`, the blocks of each item in order (a string
    /// content as one text block), as the adapter merges them.
    fn merged(&self, role: &str, items: &[&[u8]]) -> Option<Vec<u8>> {
        #[derive(serde::Deserialize)]
        struct Content<'a> {
            #[serde(borrow)]
            content: &'a RawValue,
        }
        let mut blocks: Vec<Cow<'_, str>> = Vec::new();
        for raw in items {
            let content = serde_json::from_slice::<Content<'_>>(raw)
                .ok()?
                .content
                .get();
            match content.as_bytes().first() {
                Some(b'"') => blocks.push(format!(r#"{{"type":"text","text":{content}}}"#).into()),
                Some(b'[') => blocks.extend(
                    serde_json::from_str::<Vec<&RawValue>>(content)
                        .ok()?
                        .into_iter()
                        .map(|b| Cow::Borrowed(b.get())),
                ),
                _ => return None,
            }
        }
        Some(message_of(role, blocks.iter().map(|b| b.as_bytes())))
    }

    /// The message without its whitespace-only text blocks, the rest of it as it was; as it
    /// is when every block is blank (nothing to keep: the caller's to fix) or none is.
    fn stripped(&self, item: &[u8]) -> Option<Option<Vec<u8>>> {
        #[derive(serde::Deserialize)]
        struct Content<'a> {
            #[serde(borrow)]
            content: &'a RawValue,
        }
        #[derive(serde::Deserialize)]
        struct TextBlock<'a> {
            #[serde(borrow, rename = "type")]
            kind: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            text: Option<std::borrow::Cow<'a, str>>,
        }
        let content = serde_json::from_slice::<Content<'_>>(item).ok()?.content;
        if !content.get().starts_with('[') {
            return Some(None); // a string content is one text block: all of it or nothing
        }
        let blocks: Vec<&RawValue> = serde_json::from_str(content.get()).ok()?;
        let is_blank = |b: &&RawValue| {
            serde_json::from_str::<TextBlock<'_>>(b.get()).is_ok_and(|t| {
                t.kind.as_deref() == Some("text") && t.text.as_deref().is_some_and(blank)
            })
        };
        let kept: Vec<&RawValue> = blocks.iter().copied().filter(|b| !is_blank(b)).collect();
        if kept.len() == blocks.len() || kept.is_empty() {
            return Some(None);
        }
        with_array(item, content, kept.iter().map(|b| b.get().as_bytes())).map(Some)
    }

    /// A string without the notes joined to it, a list of blocks without the note blocks
    /// (the adapter's `_system` keeps the rest and appends the notes).
    fn without_notes(&self, system: &str) -> Option<String> {
        match system.as_bytes().first() {
            Some(b'"') => super::string_without_notes(system),
            Some(b'[') => super::array_without_notes(system),
            _ => None,
        }
    }

    /// A synthesized result goes into the turn after its call's, after that turn's own
    /// results (`tool_result` blocks must open a message).
    fn results_placed(&self) -> ResultsAt {
        ResultsAt::NextTurn
    }

    /// The message with the results after its leading `tool_result` blocks (a string content
    /// becomes one text block), every other field as it was.
    fn with_results(&self, item: &[u8], results: &[String]) -> Option<Vec<u8>> {
        let object: &RawValue = serde_json::from_slice(item).ok()?;
        let content = edit::field(object, "content")?;
        let text;
        let blocks: Vec<&str> = match content.get().as_bytes().first() {
            Some(b'"') => {
                text = format!(r#"{{"type":"text","text":{}}}"#, content.get());
                vec![text.as_str()]
            }
            Some(b'[') => edit::elements(content)?.iter().map(|b| b.get()).collect(),
            _ => return None,
        };
        let is_result = |b: &str| {
            serde_json::from_str::<&RawValue>(b).ok().is_some_and(|b| {
                edit::field(b, "type").and_then(edit::string).as_deref() == Some("tool_result")
            })
        };
        let lead = blocks.iter().take_while(|b| is_result(b)).count();
        let elements = blocks[..lead]
            .iter()
            .copied()
            .chain(results.iter().map(String::as_str))
            .chain(blocks[lead..].iter().copied());
        with_array(item, content, elements.map(str::as_bytes))
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

    /// Each `tool_result` block answering the call holds the text (after the images it
    /// held, which are counted apart, as the adapter keeps them).
    fn result_rewritten(
        &self,
        item: &[u8],
        at: ResultAt<'_>,
        text: &str,
    ) -> Option<Option<Vec<u8>>> {
        let Some(blocks) = edit::array_field(item, "content")? else {
            return Some(None); // a string: no result in it
        };
        let mut edits = Vec::new();
        for block in blocks {
            let Some(fields) = edit::fields(block) else {
                continue;
            };
            let is = |key: &str, want: &str| {
                edit::last(&fields, key).and_then(edit::string).as_deref() == Some(want)
            };
            if !is("type", "tool_result") || !is("tool_use_id", at.call_id) {
                continue;
            }
            let images: Vec<&RawValue> = edit::last(&fields, "content")
                .and_then(edit::elements)
                .unwrap_or_default()
                .into_iter()
                .filter(|b| {
                    edit::field(b, "type").and_then(edit::string).as_deref() == Some("image")
                })
                .collect();
            let value = if images.is_empty() {
                json_string(text).into_bytes()
            } else {
                let lead = format!(r#"{{"type":"text","text":{}}}"#, json_string(text));
                let mut out = Vec::new();
                push_array(
                    &mut out,
                    std::iter::once(lead.as_bytes())
                        .chain(images.iter().map(|b| b.get().as_bytes())),
                );
                out
            };
            edits.push(edit::set_field(item, block, "content", value)?);
        }
        edit::applied(item, edits)
    }

    /// Each image, and each document priced as page images, becomes a text block (its cache
    /// marker kept), inside tool results and content documents too, in every message the
    /// canonical message stands for.
    fn media_rewritten(&self, item: &[u8], _first: bool, text: &str) -> Option<Option<Vec<u8>>> {
        let Some(blocks) = edit::array_field(item, "content")? else {
            return Some(None);
        };
        let mut edits = Vec::new();
        for block in blocks {
            without_media(item, block, text, &mut edits)?;
        }
        edit::applied(item, edits)
    }

    fn validate(&self, items: &[Arc<AnthropicMessage>]) -> Vec<PairingIssue> {
        rules::validate(items)
    }

    fn canonical(&self, items: &[Arc<AnthropicMessage>]) -> Canonical {
        canonical::canonical(items)
    }

    /// The message holding the latest `compaction` block: its summary is the only record of
    /// everything before it, so no budget drops it (a `tool_use` beside it keeps its ring).
    fn pinned(&self, items: &[Arc<AnthropicMessage>]) -> Vec<usize> {
        latest_compaction(items)
            .map(|s| s.message)
            .into_iter()
            .collect()
    }
}

/// The error result a plan synthesizes for `call_id`, as the adapter writes it.
/// The blocks with a `cache_control` (not null) in a message as sent; none in one the core
/// cannot read (it wrote it: never so).
fn cache_markers_in(item: &[u8]) -> u32 {
    #[derive(serde::Deserialize)]
    struct Content<'a> {
        #[serde(borrow)]
        content: &'a RawValue,
    }
    #[derive(serde::Deserialize)]
    struct Marked<'a> {
        #[serde(borrow, default)]
        cache_control: Option<&'a RawValue>,
    }
    serde_json::from_slice::<Content<'_>>(item)
        .ok()
        .and_then(|c| serde_json::from_str::<Vec<Marked<'_>>>(c.content.get()).ok())
        .map_or(0, |blocks| {
            blocks
                .iter()
                .filter(|b| b.cache_control.is_some_and(|c| c.get() != "null"))
                .count() as u32
        })
}

/// Whether kept item `j` shares its role with the kept item before it.
fn same_role(facts: &[ItemFacts], kept: &[usize], j: usize) -> bool {
    facts[kept[j]].role == facts[kept[j - 1]].role
}

fn synthesized_block(call_id: &str) -> String {
    format!(
        r#"{{"type":"tool_result","tool_use_id":{},"is_error":true,"content":{}}}"#,
        json_string(call_id),
        json_string(crate::plan::SYNTHESIZED_RESULT_TEXT)
    )
}

/// The edits of `json` making `block`'s images text blocks `text` (the adapter's
/// `_without_media`); None when one does not lie in `json`.
fn without_media(
    json: &[u8],
    block: &RawValue,
    text: &str,
    edits: &mut Vec<edit::Edit>,
) -> Option<()> {
    let Some(fields) = edit::fields(block) else {
        return Some(()); // not an object: sent as it is
    };
    let kind = edit::last(&fields, "type").and_then(edit::string);
    let source = edit::last(&fields, "source").and_then(edit::fields);
    let source_kind = source
        .as_ref()
        .and_then(|s| edit::last(s, "type"))
        .and_then(edit::string);
    let priced_as_image = match kind.as_deref() {
        Some("image") => true,
        Some("document") => matches!(source_kind.as_deref(), Some("base64" | "url" | "file")),
        _ => false,
    };
    if priced_as_image {
        let mut out = format!(r#"{{"type":"text","text":{}"#, json_string(text));
        if let Some(marker) = edit::last(&fields, "cache_control") {
            out.push_str(r#","cache_control":"#);
            out.push_str(marker.get());
        }
        out.push('}');
        edits.push((within(json, block)?, out.into_bytes()));
        return Some(());
    }
    let inner = match (kind.as_deref(), source_kind.as_deref()) {
        (Some("tool_result"), _) => edit::last(&fields, "content"),
        (Some("document"), Some("content")) => {
            source.as_ref().and_then(|s| edit::last(s, "content"))
        }
        _ => None,
    };
    for block in inner.and_then(edit::elements).unwrap_or_default() {
        without_media(json, block, text, edits)?;
    }
    Some(())
}

#[cfg(test)]
mod tests;
