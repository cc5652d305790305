//! Anthropic Messages: the system top-level; user and assistant turns alternating, same-role
//! neighbours merged (results into the user message after their calls, first in it); blank
//! text left out, as Anthropic refuses it; a user turn opens the conversation.

use super::{arguments_object, blank, push_merged, State};
use crate::translate::portable::{Part, Source, Speaker, Turn};
use crate::translate::Report;
use serde_json::{json, Value};

/// The user turn put before a conversation that opens with the assistant.
pub const OPENING_TEXT: &str = "(session start)";

/// Writes one turn after those `st` holds.
pub fn turn(st: &mut State, turn: &Turn, report: &mut Report) {
    let (out, ids) = (&mut st.out, &mut st.ids);
    {
        let role = if turn.speaker == Speaker::Assistant {
            "assistant"
        } else {
            "user"
        };
        super::report_late_instruction(turn, "Anthropic has one top-level system", report);
        let mut blocks = Vec::new();
        for p in &turn.parts {
            match p {
                Part::Result {
                    id,
                    content,
                    is_error,
                } => {
                    let mut r = json!({"type": "tool_result", "tool_use_id": ids.result(id)});
                    let parts = blocks_of(turn.item, content, report);
                    if !parts.is_empty() {
                        r["content"] = Value::Array(parts);
                    }
                    if *is_error {
                        r["is_error"] = json!(true);
                    }
                    blocks.push(r);
                }
                Part::Call {
                    id,
                    name,
                    arguments,
                } => blocks.push(json!({
                    "type": "tool_use",
                    "id": ids.call(id),
                    "name": name,
                    "input": arguments_object(turn.item, arguments, report),
                })),
                other => blocks.extend(blocks_of(turn.item, std::slice::from_ref(other), report)),
            }
        }
        if out.is_empty() && role == "assistant" && !blocks.is_empty() {
            report.add(
                Some(turn.item),
                "inserted",
                "opening_turn",
                format!("Anthropic needs a user turn first: `{OPENING_TEXT}` put before"),
            );
            push_merged(
                out,
                "user",
                vec![json!({"type": "text", "text": OPENING_TEXT})],
            );
        }
        push_merged(out, role, blocks);
    }
}

/// The top-level system of `texts`: a string for one, text blocks for more.
pub fn system(texts: &[String]) -> Option<Value> {
    match texts.len() {
        0 => None,
        1 => Some(json!(texts[0])),
        _ => Some(Value::Array(
            texts
                .iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect(),
        )),
    }
}

/// Text, image and document blocks of `parts`; blank texts left out (reported).
fn blocks_of(item: usize, parts: &[Part], report: &mut Report) -> Vec<Value> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::Text(t) if blank(t) => report.add(
                Some(item),
                "dropped",
                "blank_text",
                "a text of only whitespace, which Anthropic refuses",
            ),
            Part::Text(t) => out.push(json!({"type": "text", "text": t})),
            Part::Image(s) => out.push(json!({"type": "image", "source": source(s)})),
            Part::Document { source: s, name } => {
                let mut d = json!({"type": "document", "source": document_source(s)});
                if let Some(name) = name {
                    d["title"] = json!(name);
                }
                out.push(d);
            }
            _ => {}
        }
    }
    out
}

fn source(s: &Source) -> Value {
    match s {
        Source::Base64 { mime, data } => {
            json!({"type": "base64", "media_type": mime, "data": data})
        }
        Source::Url { url, .. } | Source::S3 { uri: url, .. } => json!({"type": "url", "url": url}),
        Source::FileId(id) => json!({"type": "file", "file_id": id}),
    }
}

fn document_source(s: &Source) -> Value {
    match s {
        Source::Base64 { mime, data } if mime == "text/plain" => {
            use base64::Engine;
            let text = base64::engine::general_purpose::STANDARD
                .decode(data)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
                .unwrap_or_default();
            json!({"type": "text", "media_type": "text/plain", "data": text})
        }
        other => source(other),
    }
}
