//! The settled conversation written in a target's shape, one module per provider. Each
//! writer keeps its provider's rules (who speaks first, alternation, where results go) and
//! reports the turns it adds and the rewrites it makes; call ids go through `Ids`.

mod anthropic;
pub mod bedrock;
mod chat;
mod gemini;
mod responses;

use super::ids::{IdRule, Ids};
use super::portable::{Conversation, Part, Turn};
use super::{Options, Report};
use crate::error::CoreError;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// A target's request parts.
pub struct Written {
    pub messages: Vec<Value>,
    pub system: Option<Value>,
    pub tools: Option<Value>,
}

/// What a writer carries from one turn to the next. Only the last item written can still
/// change (a later turn of its role merges into it), so a translation resumed at a turn
/// needs the items before only as the bytes they were written as (`closed` of them).
#[derive(Clone, Debug)]
pub struct State {
    /// Items written before those in `out`, which no later turn changes.
    pub closed: usize,
    pub out: Vec<Value>,
    pub ids: Ids,
    /// Gemini: the tool name of each call id, to name each response as its call.
    pub names: HashMap<String, String>,
    /// Gemini: how many of the `closed` items were signed with the sentinel.
    pub signed: usize,
}

impl State {
    /// A writer's state before any turn.
    pub fn new(target: &str) -> State {
        let rule = if target == "openai_chat" {
            IdRule::CHAT
        } else {
            IdRule::STRICT_64
        };
        State {
            closed: 0,
            out: Vec::new(),
            ids: Ids::new(rule),
            names: HashMap::new(),
            signed: 0,
        }
    }

    /// The state as a resumed translation needs it: the last item kept, those before closed.
    fn marked(&self) -> State {
        State {
            closed: self.closed + self.out.len().saturating_sub(1),
            out: self.out.last().cloned().into_iter().collect(),
            ids: self.ids.clone(),
            names: self.names.clone(),
            signed: self.signed,
        }
    }
}

/// Where a writer stood at the first turn of a source item: its state and the changes the
/// report held.
pub struct Mark {
    pub state: State,
    pub changes: usize,
}

/// The writing of some turns from a state.
pub struct Wrote {
    /// The state after the last turn, `out` finished (Gemini's steps signed).
    pub state: State,
    /// The state at the first turn of the cut item (`signed` counting the steps signed at the
    /// finish among the items it closes), if such a turn came.
    pub mark: Option<Mark>,
    /// The changes the report held after the turns, before what the finish reported.
    pub changes: usize,
    /// The top-level system, when the leading turns were written (a fresh state).
    pub system: Option<Value>,
    pub tools: Option<Value>,
}

/// `conversation` written in `target`'s shape from scratch.
pub fn write(
    target: &str,
    conversation: &Conversation,
    options: &Options,
    report: &mut Report,
) -> Result<Written, CoreError> {
    let w = write_from(target, conversation, None, options, report, usize::MAX)?;
    Ok(Written {
        messages: w.state.out,
        system: w.system,
        tools: w.tools,
    })
}

/// The turns of `conversation` written in `target`'s shape after `from`, the state a
/// translation of the session's earlier items left (None: from the start, the leading system
/// turns made the target's system), marking the state at the first turn of source item `cut`
/// or later.
pub fn write_from(
    target: &str,
    conversation: &Conversation,
    from: Option<State>,
    options: &Options,
    report: &mut Report,
    cut: usize,
) -> Result<Wrote, CoreError> {
    let turn: fn(&mut State, &Turn, &mut Report) = match target {
        "openai_chat" => chat::turn,
        "openai_responses" => responses::turn,
        "anthropic" => anthropic::turn,
        "gemini" => gemini::turn,
        "bedrock_converse" => bedrock::turn,
        other => return Err(super::read::unknown(other)),
    };
    let (mut st, system, start) = match from {
        Some(st) => (st, None, 0),
        None => {
            let mut st = State::new(target);
            let (texts, start) = if target == "openai_chat" {
                // Chat has no top-level system: the source's goes first as system messages.
                chat::open(&conversation.system, &mut st);
                (Vec::new(), 0)
            } else {
                leading_system(conversation)
            };
            let system = match target {
                "openai_responses" => responses::system(&texts),
                "anthropic" => anthropic::system(&texts),
                "gemini" => gemini::system(&texts),
                "bedrock_converse" => bedrock::system(&texts),
                _ => None,
            };
            (st, system, start)
        }
    };
    let mut mark = None;
    for t in &conversation.turns[start..] {
        if t.item >= cut && mark.is_none() {
            mark = Some(Mark {
                state: st.marked(),
                changes: report.changes.len(),
            });
        }
        turn(&mut st, t, report);
    }
    let changes = report.changes.len();
    if target == "gemini" {
        let signed = gemini::sign(&mut st, options, report);
        if let Some(m) = mark.as_mut() {
            let closing = m.state.closed - st.closed;
            m.state.signed += signed.iter().filter(|&&k| k < closing).count();
        }
    }
    let tools = super::schema::write_tools(target, &conversation.tools, options, report)?;
    report.ids = st.ids.rewritten.clone();
    Ok(Wrote {
        state: st,
        mark,
        changes,
        system,
        tools,
    })
}

/// Reports a system or developer turn after the conversation started, which a target with one
/// top-level system (`system_name`) receives as user text.
pub(super) fn report_late_instruction(turn: &Turn, system_name: &str, report: &mut Report) {
    if turn.speaker.is_instruction() {
        report.add(
            Some(turn.item),
            "rewritten",
            "instruction",
            format!(
                "a system or developer message after the conversation started sent as user \
                 text: {system_name}"
            ),
        );
    }
}

/// Turns split where the target's top-level system ends: the leading instruction turns' texts
/// (after the source's own system), and the turns after them.
pub(super) fn leading_system(c: &Conversation) -> (Vec<String>, usize) {
    let mut texts = c.system.clone();
    let mut k = 0;
    while let Some(t) = c.turns.get(k).filter(|t| t.speaker.is_instruction()) {
        texts.extend(t.parts.iter().filter_map(text_of).map(str::to_owned));
        k += 1;
    }
    (texts, k)
}

pub(super) fn text_of(p: &Part) -> Option<&str> {
    match p {
        Part::Text(t) => Some(t),
        _ => None,
    }
}

/// Call arguments as the JSON object a target that takes objects needs: the source's object
/// as it is, anything else under `arguments` (reported).
pub(super) fn arguments_object(item: usize, arguments: &str, report: &mut Report) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(o)) => Value::Object(o),
        _ => {
            report.add(
                Some(item),
                "rewritten",
                "arguments",
                "arguments that are not a JSON object sent as {\"arguments\": <the text>}",
            );
            json!({ "arguments": arguments })
        }
    }
}

/// A result's text as a target without an error flag sends it: `Error: ` before it unless it
/// opens like one already (reported).
pub(super) fn flagged(item: usize, text: String, is_error: bool, report: &mut Report) -> String {
    if !is_error || crate::view::opens_like_an_error(&text) {
        return text;
    }
    report.add(
        Some(item),
        "rewritten",
        "is_error",
        "the target has no error flag on results: the text says `Error:`",
    );
    format!("Error: {text}")
}

/// Appends `blocks` as a message of `role` in the `{"role", "content": [...]}` shape,
/// merged into the last message when it has that role.
pub(super) fn push_merged(out: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    if let Some(Value::Object(last)) = out.last_mut() {
        if last.get("role").and_then(Value::as_str) == Some(role) {
            if let Some(Value::Array(content)) = last.get_mut("content") {
                content.extend(blocks);
                return;
            }
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), role.into());
    m.insert("content".into(), Value::Array(blocks));
    out.push(Value::Object(m));
}

/// Whether a text is empty or only whitespace (Anthropic and Bedrock refuse such blocks).
pub(super) fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Appends `parts` as a Gemini content of `role`, merged into the last content when it has
/// that role.
pub(super) fn push_parts(out: &mut Vec<Value>, role: &str, parts: Vec<Value>) {
    if let Some(last) = out.last_mut() {
        if last["role"] == role {
            if let Some(held) = last["parts"].as_array_mut() {
                held.extend(parts);
                return;
            }
        }
    }
    out.push(json!({"role": role, "parts": parts}));
}
