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
pub mod resume;
mod schema;
mod settle;
pub mod write;

use crate::error::CoreError;
use crate::native;
pub use report::{Change, Report};
use serde_json::Value;
use std::sync::Arc;

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
    let (system, tools) = beside_history(source, target, system, tools)?;
    let issues = native::validate_json(source, &[messages])?;
    if !issues.is_empty() {
        return Err(CoreError::Pairing(issues));
    }
    let items = match parse_json(messages, "messages")? {
        Value::Array(items) => items,
        _ => return Err(read::unknown_shape("messages must be a JSON array")),
    };
    translate_values(
        source,
        target,
        &items,
        system.as_ref(),
        tools.as_ref(),
        options,
    )
}

/// `translate`, resumed from a checkpoint of the session's earlier items where one holds
/// (`translate_history`): the objects path (`rb.translate`, the integrations' counts) meets
/// the same growing session every turn, as the body path does. The output is `translate`'s,
/// byte for byte.
///
/// Errors: those of `translate`.
pub fn translate_resumed(
    source: &str,
    target: &str,
    messages: &[u8],
    system: Option<&[u8]>,
    tools: Option<&[u8]>,
    options: &Options,
) -> Result<History, CoreError> {
    let (system, tools) = beside_history(source, target, system, tools)?;
    translate_history(
        source,
        target,
        messages,
        None,
        system.as_ref(),
        tools.as_ref(),
        options,
        Some(resume::global()),
    )
}

/// The providers checked, and the `system` and `tools` given beside a history, read.
fn beside_history(
    source: &str,
    target: &str,
    system: Option<&[u8]>,
    tools: Option<&[u8]>,
) -> Result<(Option<Value>, Option<Value>), CoreError> {
    for p in [source, target] {
        native::item_seed(p)?;
    }
    let system = system.map(|s| parse_json(s, "system")).transpose()?;
    let tools = tools.map(|t| parse_json(t, "tools")).transpose()?;
    Ok((system, tools))
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
    let conversation = read::read(source, items, 0, system, tools)?;
    let mut report = Report::default();
    let (settled, _) = settle::settle(source, target, conversation, options, &mut report, 0)?;
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

/// A history translated, as the JSON the target's validator read.
pub struct History {
    pub json: Vec<u8>,
    pub system: Option<Value>,
    pub tools: Option<Value>,
    pub report: Report,
}

/// `translate` of the history `raw` (a JSON array of `source`'s items, its pairing checked
/// here; `elements`, its items if split already), resumed from a checkpoint of `checkpoints` where one holds the translation of the same
/// items up to a cut, and leaving one for the next turn of the session. The output is the
/// translation from scratch, byte for byte.
#[allow(clippy::too_many_arguments)]
pub(crate) fn translate_history(
    source: &str,
    target: &str,
    raw: &[u8],
    elements: Option<Vec<&[u8]>>,
    system: Option<&Value>,
    tools: Option<&Value>,
    options: &Options,
    checkpoints: Option<&resume::Checkpoints>,
) -> Result<History, CoreError> {
    let elements = match elements {
        Some(split) => split,
        None => crate::json_array::split(raw)?,
    };
    let issues = native::validate_elements(source, &elements)?;
    if !issues.is_empty() {
        return Err(CoreError::Pairing(issues));
    }
    let parse = |from: usize| -> Result<Vec<Value>, CoreError> {
        elements[from..]
            .iter()
            .map(|e| parse_json(e, "messages"))
            .collect()
    };
    // Only what the source's validator read reaches here; a summary given by item index
    // is not part of the key, so such translations are not resumed.
    let checkpoints =
        checkpoints.filter(|c| c.enabled() && source != target && options.summaries.is_empty());
    let Some(checkpoints) = checkpoints else {
        let out = translate_values(source, target, &parse(0)?, system, tools, options)?;
        return Ok(History {
            json: out.json,
            system: out.system,
            tools: out.tools,
            report: out.report,
        });
    };
    let starts: Vec<usize> = elements
        .iter()
        .map(|e| e.as_ptr() as usize - raw.as_ptr() as usize)
        .collect();
    let seed = resume::seed(source, target, options, system);
    let keys = resume::keys(seed, raw, &starts);
    let found = checkpoints.find(&keys);
    if let Some((at, checkpoint)) = found {
        let run = Run {
            source,
            target,
            raw,
            keys: &keys,
            options,
            checkpoints,
        };
        let resumed = parse(at)
            .and_then(|items| run.from(at, Some(keys[at]), &checkpoint, items, system, tools));
        // A tail the checkpoint cannot serve (a new compaction), or any error, goes the
        // long way, which gives the translation's own answer.
        if let Ok(Some(history)) = resumed {
            return Ok(history);
        }
    }
    let empty = resume::Checkpoint {
        state: write::State::new(target),
        items: Vec::new(),
        system: None,
        left_out: Vec::new(),
        settled: Vec::new(),
        written: Vec::new(),
    };
    let run = Run {
        source,
        target,
        raw,
        keys: &keys,
        options,
        checkpoints,
    };
    run.from(0, None, &empty, parse(0)?, system, tools)
        .map(|h| h.expect("a run from the start always writes"))
}

/// One translation of a history, from a checkpoint (the empty one at item 0).
struct Run<'a> {
    source: &'a str,
    target: &'a str,
    raw: &'a [u8],
    keys: &'a [u128],
    options: &'a Options,
    checkpoints: &'a resume::Checkpoints,
}

impl Run<'_> {
    /// The items from `at` on (`items`) translated after `checkpoint` (found under `key`;
    /// None for a run from the start); None when the checkpoint cannot serve them.
    fn from(
        &self,
        at: usize,
        key: Option<u128>,
        checkpoint: &resume::Checkpoint,
        items: Vec<Value>,
        system: Option<&Value>,
        tools: Option<&Value>,
    ) -> Result<Option<History>, CoreError> {
        let (source, target, options) = (self.source, self.target, self.options);
        let fresh = key.is_none();
        let conversation = read::read(source, &items, at, system, tools)?;
        drop(items);
        let compacted = conversation.turns.iter().any(|t| {
            t.parts
                .iter()
                .any(|p| matches!(p, portable::Part::Compaction { .. }))
        });
        if compacted && !fresh {
            // A compaction decides what before it is left out, the checkpoint's items too.
            return Ok(None);
        }
        let cut = resume::cut(source, &conversation.turns, fresh);
        let left_out = conversation.left_out.len();
        let left_out_before = conversation
            .left_out
            .iter()
            .filter(|(item, _, _)| cut.is_some_and(|c| *item < c))
            .count();
        let mut report = Report::default();
        let (settled, settled_at_cut) = settle::settle(
            source,
            target,
            conversation,
            options,
            &mut report,
            cut.unwrap_or(usize::MAX),
        )?;
        let settled_end = report.changes.len();
        let from = (!fresh).then(|| checkpoint.state.clone());
        let wrote = write::write_from(
            target,
            &settled,
            from,
            options,
            &mut report,
            cut.unwrap_or(usize::MAX),
        )?;
        drop(settled);
        let base = wrote.state.closed;
        let closed_len: usize = checkpoint.items.iter().map(|i| i.len() + 1).sum();
        // Room for the body's fields to go before the history without a second buffer.
        let mut json = Vec::with_capacity(closed_len + self.raw.len() + 4096);
        json.push(b'[');
        for item in &checkpoint.items {
            if json.len() > 1 {
                json.push(b',');
            }
            json.extend_from_slice(item);
        }
        // Where each item written now is in `json`.
        let mut spans = Vec::with_capacity(wrote.state.out.len());
        for item in &wrote.state.out {
            if json.len() > 1 {
                json.push(b',');
            }
            let start = json.len();
            serde_json::to_writer(&mut json, item).map_err(|e| CoreError::InvalidMessage {
                index: None,
                reason: format!("the translation could not be written ({e})"),
            })?;
            spans.push(start..json.len());
        }
        json.push(b']');
        // Read back by the target's rules, its items as written (the closed ones were
        // written so before, and its item cache knows them).
        let elements: Vec<&[u8]> = checkpoint
            .items
            .iter()
            .map(|i| &i[..])
            .chain(spans.iter().map(|s| &json[s.clone()]))
            .collect();
        let issues = native::validate_elements(target, &elements)?;
        if !issues.is_empty() {
            return Err(CoreError::Pairing(issues));
        }
        let changes = std::mem::take(&mut report.changes);
        let (tail_left_out, rest) = changes.split_at(left_out);
        let (tail_settled, rest) = rest.split_at(settled_end - left_out);
        let (tail_written, finish) = rest.split_at(wrote.changes - settled_end);
        let joined = |a: &[Change], b: &[Change]| [a, b].concat();
        let history = History {
            json,
            system: if fresh {
                wrote.system
            } else {
                checkpoint.system.clone()
            },
            tools: wrote.tools,
            report: Report {
                changes: [
                    &checkpoint.left_out[..],
                    tail_left_out,
                    &checkpoint.settled,
                    tail_settled,
                    &checkpoint.written,
                    tail_written,
                    finish,
                ]
                .concat(),
                ids: std::mem::take(&mut report.ids),
            },
        };
        if let (Some(cut), Some(mark)) = (cut, wrote.mark) {
            let closing = mark.state.closed - base;
            let items = checkpoint.items.iter().cloned();
            let now = spans[..closing]
                .iter()
                .map(|s| Arc::from(&history.json[s.clone()]));
            let next = resume::Checkpoint {
                items: items.chain(now).collect(),
                state: mark.state,
                system: history.system.clone(),
                left_out: joined(&checkpoint.left_out, &tail_left_out[..left_out_before]),
                settled: joined(
                    &checkpoint.settled,
                    &tail_settled[..settled_at_cut - left_out],
                ),
                written: joined(
                    &checkpoint.written,
                    &tail_written[..mark.changes - settled_end],
                ),
            };
            self.checkpoints.insert(self.keys[cut], next, key);
        }
        Ok(Some(history))
    }
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
    let conversation = read::read(source, &items, 0, None, None)?;
    Ok(settle::opaque(&conversation))
}

#[cfg(test)]
mod tests;
