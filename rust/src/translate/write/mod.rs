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

/// A target's request parts.
pub struct Written {
    pub messages: Vec<Value>,
    pub system: Option<Value>,
    pub tools: Option<Value>,
}

pub fn write(
    target: &str,
    conversation: &Conversation,
    options: &Options,
    report: &mut Report,
) -> Result<Written, CoreError> {
    let rule = if target == "openai_chat" {
        IdRule::CHAT
    } else {
        IdRule::STRICT_64
    };
    let mut ids = Ids::new(rule);
    let mut w = match target {
        "openai_chat" => chat::write(conversation, &mut ids, report),
        "openai_responses" => responses::write(conversation, &mut ids, report),
        "anthropic" => anthropic::write(conversation, &mut ids, report),
        "gemini" => gemini::write(conversation, &mut ids, options, report),
        "bedrock_converse" => bedrock::write(conversation, &mut ids, report),
        other => return Err(super::read::unknown(other)),
    };
    w.tools = super::schema::write_tools(target, &conversation.tools, options, report)?;
    report.ids = std::mem::take(&mut ids.rewritten);
    Ok(w)
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
