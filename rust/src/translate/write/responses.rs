//! OpenAI Responses: the system as `instructions`; messages as `message` items with typed
//! content; calls and outputs as `function_call` and `function_call_output` items, paired by
//! `call_id` (no item `id`: those are OpenAI's own, and a foreign one is refused).

use super::chat::url;
use super::{flagged, State};
use crate::translate::portable::{Part, Source, Speaker, Turn};
use crate::translate::Report;
use serde_json::{json, Value};

/// Writes one turn after those `st` holds.
pub fn turn(st: &mut State, turn: &Turn, report: &mut Report) {
    let (out, ids) = (&mut st.out, &mut st.ids);
    {
        match turn.speaker {
            Speaker::System | Speaker::Developer | Speaker::User => {
                let role = match turn.speaker {
                    Speaker::System => "system",
                    Speaker::Developer => "developer",
                    _ => "user",
                };
                let content = input(&turn.parts);
                if !content.is_empty() {
                    out.push(json!({"type": "message", "role": role, "content": content}));
                }
            }
            Speaker::Assistant => {
                let texts: Vec<Value> = turn
                    .parts
                    .iter()
                    .filter_map(super::text_of)
                    .map(|t| json!({"type": "output_text", "text": t, "annotations": []}))
                    .collect();
                if !texts.is_empty() {
                    out.push(json!({"type": "message", "role": "assistant", "content": texts}));
                }
                for p in &turn.parts {
                    if let Part::Call {
                        id,
                        name,
                        arguments,
                    } = p
                    {
                        out.push(json!({
                            "type": "function_call",
                            "call_id": ids.call(id),
                            "name": name,
                            "arguments": arguments,
                        }));
                    }
                }
            }
            Speaker::Tool => {
                for p in &turn.parts {
                    if let Part::Result {
                        id,
                        content,
                        is_error,
                    } = p
                    {
                        let only_text = content.iter().all(|p| matches!(p, Part::Text(_)));
                        let output = if only_text {
                            let text = content
                                .iter()
                                .filter_map(super::text_of)
                                .collect::<Vec<_>>()
                                .join("\n");
                            json!(flagged(turn.item, text, *is_error, report))
                        } else {
                            let mut parts = content.clone();
                            if *is_error {
                                parts.insert(
                                    0,
                                    Part::Text(flagged(turn.item, String::new(), true, report)),
                                );
                            }
                            Value::Array(input(&parts))
                        };
                        out.push(json!({
                            "type": "function_call_output",
                            "call_id": ids.result(id),
                            "output": output,
                        }));
                    }
                }
            }
        }
    }
}

/// The `instructions` of `texts`.
pub fn system(texts: &[String]) -> Option<Value> {
    (!texts.is_empty()).then(|| json!(texts.join("\n\n")))
}

/// Input content parts.
fn input(parts: &[Part]) -> Vec<Value> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(json!({"type": "input_text", "text": t})),
            Part::Image(Source::FileId(id)) => {
                Some(json!({"type": "input_image", "file_id": id, "detail": "auto"}))
            }
            Part::Image(s) => {
                Some(json!({"type": "input_image", "image_url": url(s), "detail": "auto"}))
            }
            Part::Document { source, name } => Some(match source {
                Source::FileId(id) => json!({"type": "input_file", "file_id": id}),
                Source::Base64 { .. } => json!({
                    "type": "input_file",
                    "file_data": url(source),
                    "filename": name.clone().unwrap_or_else(|| "document.pdf".to_owned()),
                }),
                s => json!({"type": "input_file", "file_url": url(s)}),
            }),
            _ => None,
        })
        .collect()
}
