//! OpenAI Responses input items read into turns. An assistant's consecutive items (its
//! message, reasoning and calls) make one turn; each call output is a tool turn. Calls of
//! other families (computer, shell, patch) and hosted tools' items are named for the writer.

use super::{arguments, bad, get, list, need, obj, push_text, string, url_source};
use crate::error::CoreError;
use crate::translate::portable::{BoundKind, Conversation, Part, Source, Speaker, Turn};
use crate::view::opens_like_an_error;
use serde_json::Value;

pub fn read(items: &[Value], first: usize, out: &mut Conversation) -> Result<(), CoreError> {
    for (i, item) in (first..).zip(items) {
        let o = obj(i, item, "an input item")?;
        let ty = string(o, "type").unwrap_or_else(|| "message".to_owned());
        let (speaker, part_or_parts): (Speaker, Vec<Part>) = match ty.as_str() {
            "message" => {
                let role = need(i, o, "role", "message")?;
                let speaker = match role.as_str() {
                    "system" => Speaker::System,
                    "developer" => Speaker::Developer,
                    "user" => Speaker::User,
                    "assistant" => Speaker::Assistant,
                    other => return Err(bad(i, format!("role '{other}' is not a message role"))),
                };
                (speaker, content(i, get(o, "content"), out)?)
            }
            "function_call" | "custom_tool_call" => (
                Speaker::Assistant,
                vec![Part::Call {
                    id: need(i, o, "call_id", &ty)?,
                    name: need(i, o, "name", &ty)?,
                    arguments: arguments(get(o, "arguments").or_else(|| get(o, "input"))),
                }],
            ),
            "function_call_output" | "custom_tool_call_output" => {
                let parts = content(i, get(o, "output"), out)?;
                let is_error =
                    matches!(parts.first(), Some(Part::Text(t)) if opens_like_an_error(t));
                (
                    Speaker::Tool,
                    vec![Part::Result {
                        id: need(i, o, "call_id", &ty)?,
                        content: parts,
                        is_error,
                    }],
                )
            }
            "reasoning" => {
                let texts: Vec<&str> = list(get(o, "summary"))
                    .iter()
                    .chain(list(get(o, "content")))
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                let text = (!texts.is_empty()).then(|| texts.join("\n\n"));
                let bound = get(o, "encrypted_content").map(|_| BoundKind::EncryptedReasoning);
                let part = match (text, bound) {
                    (None, Some(kind)) => Part::Bound(kind),
                    (text, bound) => Part::Reasoning { text, bound },
                };
                (Speaker::Assistant, vec![part])
            }
            "compaction" => {
                let texts: Vec<&str> = list(get(o, "summary"))
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect();
                let summary = (!texts.is_empty()).then(|| texts.join("\n\n"));
                (Speaker::User, vec![Part::Compaction { summary }])
            }
            "compaction_trigger" => {
                out.left_out.push((
                    i,
                    "compaction_trigger".to_owned(),
                    "a request to OpenAI's compaction, which no other provider has".to_owned(),
                ));
                continue;
            }
            other => {
                let speaker = if other.ends_with("_output") {
                    Speaker::User
                } else {
                    Speaker::Assistant
                };
                (
                    speaker,
                    vec![Part::Other {
                        what: format!("{other} item"),
                    }],
                )
            }
        };
        // An assistant's consecutive items are one turn, as one response wrote them.
        let joins = speaker == Speaker::Assistant
            && matches!(out.turns.last(), Some(t) if t.speaker == Speaker::Assistant);
        match out.turns.last_mut() {
            Some(last) if joins => last.parts.extend(part_or_parts),
            _ => out.turns.push(Turn {
                speaker,
                parts: part_or_parts,
                item: i,
            }),
        }
    }
    Ok(())
}

/// A message's `content` or an output's `output`: a string or input/output parts.
fn content(i: usize, v: Option<&Value>, out: &mut Conversation) -> Result<Vec<Part>, CoreError> {
    let mut parts = Vec::new();
    match v {
        None => {}
        Some(Value::String(s)) => push_text(&mut parts, s),
        Some(Value::Array(items)) => {
            for p in items {
                let p = obj(i, p, "a content part")?;
                let ty = string(p, "type").unwrap_or_default();
                match ty.as_str() {
                    "input_text" | "output_text" | "text" => {
                        if !list(get(p, "annotations")).is_empty() {
                            out.left_out.push((
                                i,
                                "annotations".to_owned(),
                                "OpenAI's annotations (citations) have no equivalent in the \
                                 other providers"
                                    .to_owned(),
                            ));
                        }
                        push_text(&mut parts, &need(i, p, "text", &ty)?)
                    }
                    "refusal" => push_text(&mut parts, &need(i, p, "refusal", &ty)?),
                    "input_image" => {
                        let source = match (string(p, "image_url"), string(p, "file_id")) {
                            (Some(url), _) => url_source(&url),
                            (None, Some(id)) => Source::FileId(id),
                            _ => return Err(bad(i, "an input_image needs image_url or file_id")),
                        };
                        parts.push(Part::Image(source));
                    }
                    "input_file" => {
                        let source = match (
                            string(p, "file_data"),
                            string(p, "file_url"),
                            string(p, "file_id"),
                        ) {
                            (Some(data), _, _) => match url_source(&data) {
                                Source::Url { .. } => Source::Base64 {
                                    mime: "application/pdf".to_owned(),
                                    data,
                                },
                                inline => inline,
                            },
                            (None, Some(url), _) => Source::Url { url, mime: None },
                            (None, None, Some(id)) => Source::FileId(id),
                            _ => {
                                return Err(bad(
                                    i,
                                    "an input_file needs file_data, file_url or file_id",
                                ))
                            }
                        };
                        parts.push(Part::Document {
                            source,
                            name: string(p, "filename"),
                        });
                    }
                    other => parts.push(Part::Other {
                        what: format!("{other} part"),
                    }),
                }
            }
        }
        Some(_) => return Err(bad(i, "content must be a string or a list of parts")),
    }
    Ok(parts)
}
