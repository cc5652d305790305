//! The OpenAI Responses API (`responses.create`'s `input` list): items read strictly (`parse`),
//! paired by `call_id` by the API's rules in its 400 wording (`rules`), and mapped onto the
//! canonical view with real costs (`canonical`). A model turn (consecutive items the model
//! produced) and the outputs answering its calls make one tool ring.
//!
//! Opaque items are kept verbatim and priced by their size: `encrypted_content` of reasoning
//! and `compaction` items. The latest `compaction` item carries the context of every item
//! before it, so it is the one item of the history ringbound always keeps (sources in
//! docs/providers/openai_responses.md).

mod canonical;
pub(crate) mod parse;
mod rules;

use super::item_cache::ItemCache;
use super::{cached_items, edit, json_string, Canonical, NoteAt, Provider, ResultAt, ResultsAt};
use crate::error::CoreError;
use crate::pairing::{IssueKind, PairingIssue};
use crate::view::{Image, Role, Text, ToolCall};
use serde_json::value::RawValue;
use std::sync::Arc;

/// Where an item sits in a conversation, which decides how it pairs and groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A user message.
    User,
    /// A system or developer message.
    Instruction,
    /// An item the model produced: its messages, reasoning, calls, hosted tool calls.
    Model,
    /// The output of a call, written by the caller.
    Output,
    /// A `compaction` item: opaque, standing for everything before it.
    Compaction,
    /// A `compaction_trigger`: asks the API to compact; always the final item.
    Trigger,
}

/// A call type and the output type answering it: the pair of item types and their wording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Function,
    Custom,
    McpApproval,
    Computer,
    Shell,
    LocalShell,
    ApplyPatch,
}

impl Family {
    pub const ALL: [Family; 7] = [
        Family::Function,
        Family::Custom,
        Family::McpApproval,
        Family::Computer,
        Family::Shell,
        Family::LocalShell,
        Family::ApplyPatch,
    ];

    /// The call item's type.
    pub fn call(self) -> &'static str {
        match self {
            Family::Function => "function_call",
            Family::Custom => "custom_tool_call",
            Family::McpApproval => "mcp_approval_request",
            Family::Computer => "computer_call",
            Family::Shell => "shell_call",
            Family::LocalShell => "local_shell_call",
            Family::ApplyPatch => "apply_patch_call",
        }
    }

    /// The output item's type.
    pub fn output(self) -> &'static str {
        match self {
            Family::Function => "function_call_output",
            Family::Custom => "custom_tool_call_output",
            Family::McpApproval => "mcp_approval_response",
            Family::Computer => "computer_call_output",
            Family::Shell => "shell_call_output",
            Family::LocalShell => "local_shell_call_output",
            Family::ApplyPatch => "apply_patch_call_output",
        }
    }

    /// The key of the call its output names: `call_id`, but an approval request is answered
    /// by its own `id`.
    pub fn call_key(self) -> &'static str {
        match self {
            Family::McpApproval => "id",
            _ => "call_id",
        }
    }

    pub fn output_key(self) -> &'static str {
        match self {
            Family::McpApproval => "approval_request_id",
            _ => "call_id",
        }
    }

    /// What the API says of a call without its output. OpenAI's wording where it is on record
    /// (function, custom and local shell calls); ringbound's own, saying so, elsewhere.
    pub fn no_output(self, id: &str) -> String {
        match self {
            Family::Function => format!("No tool output found for function call {id}."),
            Family::Custom => format!("No tool output found for custom tool call {id}."),
            Family::LocalShell => format!("No tool output found for local shell call {id}."),
            other => format!(
                "ringbound: {} {id} has no {}.",
                other.call(),
                other.output()
            ),
        }
    }

    /// What the API says of an output that answers no call.
    pub fn no_call(self, id: &str) -> String {
        match self {
            Family::Function => {
                format!("No tool call found for function call output with call_id {id}.")
            }
            Family::Custom => {
                format!("No tool call found for custom tool call output with call_id {id}.")
            }
            other => format!(
                "ringbound: {} answers no {} {id}.",
                other.output(),
                other.call()
            ),
        }
    }

    fn by_call(kind: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.call() == kind)
    }

    fn by_output(kind: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.output() == kind)
    }
}

/// What an item costs beyond its texts: images, and payloads priced by their size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub images: Vec<Image>,
    /// Tokens of opaque payloads (`encrypted_content`, files), from their byte size.
    pub opaque_tokens: u32,
}

/// One input item, as much of it as pairing and counting need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The item's `type` (`message` for an untyped one).
    pub ty: &'static str,
    pub kind: Kind,
    /// A message's role.
    pub role: Option<Role>,
    /// Texts the model reads, in order.
    pub texts: Vec<Text>,
    pub cost: Cost,
    /// The canonical call of a call item (paired or hosted `mcp_call`).
    pub call: Option<ToolCall>,
    /// The pair of types a call or output item belongs to; `None` for a hosted call.
    pub family: Option<Family>,
    /// The pairing key of a call or output item (an `mcp_call`'s own id).
    pub key: Option<String>,
    /// The result an `mcp_call` carries itself.
    pub result: Option<String>,
    /// Whether an output (or an `mcp_call`'s result) reports a failure.
    pub is_error: bool,
    /// The item's own `id`, unique across a request.
    pub item_id: Option<String>,
}

impl Item {
    fn new(ty: &'static str, kind: Kind) -> Self {
        Item {
            ty,
            kind,
            role: None,
            texts: Vec::new(),
            cost: Cost::default(),
            call: None,
            family: None,
            key: None,
            result: None,
            is_error: false,
            item_id: None,
        }
    }
}

/// The latest `compaction` item, if any: the API reads everything it needs from before it
/// out of that one item.
pub fn latest_compaction(items: &[Arc<Item>]) -> Option<usize> {
    items.iter().rposition(|it| it.kind == Kind::Compaction)
}

/// The latest group of consecutive `compaction` items: one compaction can answer with more
/// than one item (gpt-5-mini answers with two), and together they carry what came before.
pub fn latest_compaction_group(items: &[Arc<Item>]) -> std::ops::Range<usize> {
    let Some(last) = latest_compaction(items) else {
        return 0..0;
    };
    let first = items[..last]
        .iter()
        .rposition(|it| it.kind != Kind::Compaction)
        .map_or(0, |i| i + 1);
    first..last + 1
}

/// The OpenAI Responses API.
pub struct OpenAIResponses;

impl Provider for OpenAIResponses {
    const KEY: &'static str = "openai_responses";
    type Item = Item;

    fn parse(&self, i: usize, raw: &[u8]) -> Result<Item, CoreError> {
        parse::item(i, raw)
    }

    /// The note is an input message of its own, where the plan puts it.
    fn ledger_note(&self, _system: Option<&str>, _note: &str) -> NoteAt {
        NoteAt::Items
    }

    /// A synthesized output is an input item of its own, where the plan puts it.
    fn results_placed(&self) -> ResultsAt {
        ResultsAt::InPlace
    }

    /// The output item of the call's family: the error text as its `output`; a shell's as
    /// one chunk's `stderr` with exit code 1; an apply_patch's `failed`; an unanswered MCP
    /// approval declined (the one answer that executes nothing). None for a call the items
    /// do not hold.
    ///
    /// Errors: `Unrepairable` for a computer call, whose output is a screenshot only the
    /// caller can take (in the words the adapter used).
    fn synthesized_result(
        &self,
        items: &[Arc<Item>],
        _item: usize,
        _nth: usize,
        call: &ToolCall,
    ) -> Result<Option<String>, CoreError> {
        let Some((at, family)) = items.iter().enumerate().find_map(|(at, it)| {
            (it.key.as_deref() == Some(&*call.id))
                .then_some(it.family)
                .flatten()
                .map(|f| (at, f))
        }) else {
            return Ok(None);
        };
        let key = json_string(&call.id);
        let text = json_string(crate::plan::SYNTHESIZED_RESULT_TEXT);
        let output = family.output();
        Ok(Some(match family {
            // A computer call's output is a screenshot: there is none to write for it.
            Family::Computer => {
                return Err(CoreError::Unrepairable {
                    reason: format!(
                        "computer_call {} has no computer_call_output, and none can be \
                         synthesized: its output is a screenshot only the caller's computer \
                         can take",
                        call.id
                    ),
                    issues: vec![PairingIssue {
                        kind: IssueKind::MissingResult,
                        call_id: Some(call.id.to_string()),
                        index: at,
                        message: family.no_output(&call.id),
                    }],
                })
            }
            Family::McpApproval => format!(
                r#"{{"type":"{output}","approval_request_id":{key},"approve":false,"reason":{text}}}"#
            ),
            Family::Shell => format!(
                r#"{{"type":"{output}","call_id":{key},"output":[{{"stdout":"","stderr":{text},"outcome":{{"type":"exit","exit_code":1}}}}]}}"#
            ),
            Family::ApplyPatch => format!(
                r#"{{"type":"{output}","call_id":{key},"status":"failed","output":{text}}}"#
            ),
            _ => format!(r#"{{"type":"{output}","call_id":{key},"output":{text}}}"#),
        }))
    }

    /// One output per item.
    fn results_item(&self, results: &[String]) -> Option<Vec<u8>> {
        match results {
            [one] => Some(one.clone().into_bytes()),
            _ => None,
        }
    }

    /// An output answering the call holds the text as its `output` (an MCP approval response
    /// as its `reason`); a computer screenshot has no text to cut and stays as it is. A shell
    /// output's chunks and a hosted MCP call are the adapter's to write.
    fn result_rewritten(
        &self,
        item: &[u8],
        at: ResultAt<'_>,
        text: &str,
    ) -> Option<Option<Vec<u8>>> {
        let object: &RawValue = serde_json::from_slice(item).ok()?;
        let fields = edit::fields(object)?;
        let kind = edit::last(&fields, "type").and_then(edit::string);
        let key = |name: &str| edit::last(&fields, name).and_then(edit::string);
        let (answers, field) = match kind.as_deref() {
            Some(
                "function_call_output" | "custom_tool_call_output" | "apply_patch_call_output",
            ) => (key("call_id"), "output"),
            // The API reads a local shell output's `call_id`; the SDK's type calls it `id`.
            Some("local_shell_call_output") => (key("call_id").or_else(|| key("id")), "output"),
            Some("mcp_approval_response") => (key("approval_request_id"), "reason"),
            Some("computer_call_output") => return Some(None),
            Some("shell_call_output") if key("call_id").as_deref() == Some(at.call_id) => {
                return None
            }
            Some("mcp_call") if key("id").as_deref() == Some(at.call_id) => return None,
            _ => return Some(None),
        };
        if answers.as_deref() != Some(at.call_id) {
            return Some(None);
        }
        let edit = edit::set_field(item, object, field, json_string(text).into_bytes())?;
        edit::spliced(item, vec![edit]).map(Some)
    }

    /// Each `input_image` part of a message's content becomes an `input_text` part, in the
    /// first item the canonical message stands for.
    fn media_rewritten(&self, item: &[u8], first: bool, text: &str) -> Option<Option<Vec<u8>>> {
        if !first {
            return Some(None);
        }
        let Some(parts) = edit::array_field(item, "content")? else {
            return Some(None);
        };
        let placeholder = format!(r#"{{"type":"input_text","text":{}}}"#, json_string(text));
        let mut edits = Vec::new();
        for part in parts {
            let kind = edit::field(part, "type").and_then(edit::string);
            if kind.as_deref() == Some("input_image") {
                edits.push((super::within(item, part)?, placeholder.clone().into_bytes()));
            }
        }
        edit::applied(item, edits)
    }

    fn validate(&self, items: &[Arc<Item>]) -> Vec<PairingIssue> {
        rules::Walk::new(items).issues()
    }

    fn canonical(&self, items: &[Arc<Item>]) -> Canonical {
        canonical::canonical(items)
    }

    fn issues_and_canonical(&self, items: &[Arc<Item>]) -> (Vec<PairingIssue>, Canonical) {
        canonical::issues_and_canonical(items)
    }

    /// The latest `compaction` items, as one group: they carry everything before them, which
    /// may go first.
    fn pinned(&self, items: &[Arc<Item>]) -> Vec<usize> {
        latest_compaction_group(items).collect()
    }

    fn item_cache(&self) -> Option<&'static ItemCache<Item>> {
        cached_items!(Item, 2)
    }

    fn check_items(&self, items: &[Arc<Item>]) -> Result<(), CoreError> {
        parse::check_trigger_last(items)
    }
}

#[cfg(test)]
mod tests;
