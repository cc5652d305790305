//! OpenAI Chat messages read into turns: content strings and parts, `tool_calls`, one turn per
//! `tool` message. A `refusal` is text; audio and other parts are named for the writer.

use super::{arguments, bad, get, list, need, obj, push_text, string, url_source, Obj};
use crate::translate::portable::{Conversation, Part, Source, Speaker, Turn};
use crate::view::opens_like_an_error;
use serde_json::Value;

pub fn read(items: &[Value], first: usize, out: &mut Conversation) -> Result<(), CoreError> {
    for (i, item) in (first..).zip(items) {
        let m = obj(i, item, "a message")?;
        let role = need(i, m, "role", "message")?;
        let speaker = match role.as_str() {
            "system" => Speaker::System,
            "developer" => Speaker::Developer,
            "user" => Speaker::User,
            "assistant" => Speaker::Assistant,
            "tool" => Speaker::Tool,
            other => {
                return Err(bad(
                    i,
                    format!("role '{other}' has no equivalent elsewhere"),
                ))
            }
        };
        if get(m, "function_call").is_some() {
            return Err(bad(
                i,
                "the legacy `function_call` has no equivalent elsewhere: send it as `tool_calls`",
            ));
        }
        if get(m, "audio").is_some() {
            out.left_out.push((
                i,
                "audio".to_owned(),
                "a reference to audio OpenAI keeps; no other provider can read it".to_owned(),
            ));
        }
        if get(m, "name").is_some() {
            out.left_out.push((
                i,
                "name".to_owned(),
                "a message's participant `name` has no equivalent in the other providers"
                    .to_owned(),
            ));
        }
        let mut parts = content(i, get(m, "content"))?;
        if let Some(refusal) = string(m, "refusal") {
            push_text(&mut parts, &refusal);
        }
        if speaker == Speaker::Tool {
            let id = need(i, m, "tool_call_id", "message")?;
            let is_error = parts
                .iter()
                .find_map(|p| match p {
                    Part::Text(t) => Some(opens_like_an_error(t)),
                    _ => None,
                })
                .unwrap_or(false);
            parts = vec![Part::Result {
                id,
                content: parts,
                is_error,
            }];
        }
        for call in list(get(m, "tool_calls")) {
            parts.push(tool_call(i, call)?);
        }
        out.turns.push(Turn {
            speaker,
            parts,
            item: i,
        });
    }
    Ok(())
}

fn tool_call(i: usize, call: &Value) -> Result<Part, CoreError> {
    let c = obj(i, call, "a tool call")?;
    let id = need(i, c, "id", "tool_calls[]")?;
    let kind = string(c, "type").unwrap_or_else(|| "function".to_owned());
    let body: &Obj = get(c, &kind)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(i, format!("tool call '{id}' has no `{kind}` object")))?;
    Ok(Part::Call {
        id,
        name: need(i, body, "name", &kind)?,
        arguments: arguments(get(body, "arguments").or_else(|| get(body, "input"))),
    })
}

/// A Chat `content`: a string, or text, image, file, audio and refusal parts.
pub(super) fn content(i: usize, v: Option<&Value>) -> Result<Vec<Part>, CoreError> {
    let mut parts = Vec::new();
    match v {
        None => {}
        Some(Value::String(s)) => push_text(&mut parts, s),
        Some(Value::Array(items)) => {
            for p in items {
                let p = obj(i, p, "a content part")?;
                let ty = string(p, "type").unwrap_or_default();
                match ty.as_str() {
                    "text" | "refusal" => push_text(&mut parts, &need(i, p, &ty, "part")?),
                    "image_url" => {
                        let url = match get(p, "image_url") {
                            Some(Value::String(s)) => s.clone(),
                            Some(Value::Object(o)) => need(i, o, "url", "image_url")?,
                            _ => return Err(bad(i, "an image_url part needs a url")),
                        };
                        parts.push(Part::Image(url_source(&url)));
                    }
                    "file" => {
                        let f = get(p, "file")
                            .and_then(Value::as_object)
                            .ok_or_else(|| bad(i, "a file part needs a `file` object"))?;
                        let source = match (string(f, "file_data"), string(f, "file_id")) {
                            (Some(data), _) => match url_source(&data) {
                                Source::Url { .. } => Source::Base64 {
                                    mime: "application/pdf".to_owned(),
                                    data,
                                },
                                inline => inline,
                            },
                            (None, Some(id)) => Source::FileId(id),
                            (None, None) => {
                                return Err(bad(i, "a file part needs file_data or file_id"))
                            }
                        };
                        parts.push(Part::Document {
                            source,
                            name: string(f, "filename"),
                        });
                    }
                    other => parts.push(Part::Other {
                        what: format!("{other} part"),
                    }),
                }
            }
        }
        Some(_) => {
            return Err(bad(
                i,
                "`content` must be a string, a list of parts or null",
            ))
        }
    }
    Ok(parts)
}

use crate::error::CoreError;
