//! OpenAI Chat: system texts as leading system messages, one `tool` message per result right
//! after its call's message, images and files as user content parts.

use super::{flagged, State};
use crate::translate::portable::{Part, Source, Speaker, Turn};
use crate::translate::Report;
use serde_json::{json, Value};

/// The source's top-level system as the leading system messages Chat keeps it in.
pub fn open(system: &[String], st: &mut State) {
    st.out.extend(
        system
            .iter()
            .map(|t| json!({"role": "system", "content": t})),
    );
}

/// Writes one turn after those `st` holds.
pub fn turn(st: &mut State, turn: &Turn, report: &mut Report) {
    let (out, ids) = (&mut st.out, &mut st.ids);
    {
        match turn.speaker {
            Speaker::System | Speaker::Developer => {
                let role = if turn.speaker == Speaker::System {
                    "system"
                } else {
                    "developer"
                };
                out.push(json!({"role": role, "content": content(&turn.parts)}));
            }
            Speaker::User => out.push(json!({"role": "user", "content": content(&turn.parts)})),
            Speaker::Assistant => {
                let texts: Vec<&Part> = turn
                    .parts
                    .iter()
                    .filter(|p| matches!(p, Part::Text(_)))
                    .collect();
                let calls: Vec<Value> = turn
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Call {
                            id,
                            name,
                            arguments,
                        } => Some(json!({
                            "id": ids.call(id),
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        })),
                        _ => None,
                    })
                    .collect();
                if texts.is_empty() && calls.is_empty() {
                    // Nothing is left of it (its reasoning was all it held): Chat refuses an
                    // assistant message with neither content nor calls.
                    return;
                }
                let mut m = json!({"role": "assistant", "content": if texts.is_empty() {
                    Value::Null
                } else {
                    content(&turn.parts)
                }});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                out.push(m);
            }
            Speaker::Tool => {
                for p in &turn.parts {
                    if let Part::Result {
                        id,
                        content: parts,
                        is_error,
                    } = p
                    {
                        let text = parts
                            .iter()
                            .filter_map(super::text_of)
                            .collect::<Vec<_>>()
                            .join("\n");
                        let text = flagged(turn.item, text, *is_error, report);
                        out.push(json!({
                            "role": "tool",
                            "tool_call_id": ids.result(id),
                            "content": text,
                        }));
                    }
                }
            }
        }
    }
}

/// A message's content: the string of a lone text, else parts.
fn content(parts: &[Part]) -> Value {
    match parts {
        [Part::Text(t)] => return json!(t),
        [] => return json!(""),
        _ => {}
    }
    Value::Array(
        parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(json!({"type": "text", "text": t})),
                Part::Image(s) => Some(json!({"type": "image_url", "image_url": {"url": url(s)}})),
                Part::Document { source, name } => Some(match source {
                    Source::FileId(id) => json!({"type": "file", "file": {"file_id": id}}),
                    s => json!({"type": "file", "file": {
                        "file_data": url(s),
                        "filename": name.clone().unwrap_or_else(|| "document.pdf".to_owned()),
                    }}),
                }),
                _ => None,
            })
            .collect(),
    )
}

/// A source as a URL: a data URL for inline bytes.
pub(super) fn url(s: &Source) -> String {
    match s {
        Source::Base64 { mime, data } => format!("data:{mime};base64,{data}"),
        Source::Url { url, .. } | Source::S3 { uri: url, .. } => url.clone(),
        Source::FileId(id) => id.clone(),
    }
}
