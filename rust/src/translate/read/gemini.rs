//! Gemini contents read into turns. A part's `thoughtSignature` and a thought part are kept as
//! provider-bound; calls without an `id` get one from their place, and responses without one
//! answer the first unanswered call of the model turn before them with their name (else in
//! order), as Gemini pairs them.

use super::{bad, get, get2, list, obj, string};
use crate::error::CoreError;
use crate::translate::portable::{BoundKind, Conversation, Part, Source, Speaker, Turn};
use serde_json::Value;

pub fn read(items: &[Value], first: usize, out: &mut Conversation) -> Result<(), CoreError> {
    // The calls of the latest model turn: (id, name, answered).
    let mut open: Vec<(String, String, bool)> = Vec::new();
    for (k, item) in (first..).zip(items) {
        let c = obj(k, item, "a content")?;
        let model = match string(c, "role").as_deref() {
            Some("model") => true,
            Some("user") | Some("function") | None => false,
            Some(other) => return Err(bad(k, format!("role '{other}' is not user or model"))),
        };
        let speaker = if model {
            Speaker::Assistant
        } else {
            Speaker::User
        };
        if model {
            open.clear();
        }
        let mut parts = Vec::new();
        let flush = |parts: &mut Vec<Part>, out: &mut Conversation| {
            if !parts.is_empty() {
                out.turns.push(Turn {
                    speaker,
                    parts: std::mem::take(parts),
                    item: k,
                });
            }
        };
        for (p, part) in list(get(c, "parts")).iter().enumerate() {
            let part = obj(k, part, "a part")?;
            let signed = get2(part, "thoughtSignature", "thought_signature").is_some();
            let thought = get(part, "thought").and_then(Value::as_bool) == Some(true);
            if let Some(text) = get(part, "text").and_then(Value::as_str) {
                if thought {
                    parts.push(Part::Reasoning {
                        text: (!text.is_empty()).then(|| text.to_owned()),
                        bound: signed.then_some(BoundKind::ThoughtSignature),
                    });
                    continue;
                }
                super::push_text(&mut parts, text);
            } else if let Some(blob) = get2(part, "inlineData", "inline_data") {
                parts.push(media(k, blob, true)?);
            } else if let Some(file) = get2(part, "fileData", "file_data") {
                parts.push(media(k, file, false)?);
            } else if let Some(call) = get2(part, "functionCall", "function_call") {
                let call = obj(k, call, "functionCall")?;
                let name = string(call, "name").ok_or_else(|| bad(k, "functionCall.name"))?;
                let id = string(call, "id").unwrap_or_else(|| format!("call_{k}_{p}"));
                open.push((id.clone(), name.clone(), false));
                parts.push(Part::Call {
                    id,
                    name,
                    arguments: super::arguments(get(call, "args")),
                });
            } else if let Some(response) = get2(part, "functionResponse", "function_response") {
                flush(&mut parts, out);
                let result = answer(k, obj(k, response, "functionResponse")?, &mut open)?;
                out.turns.push(Turn {
                    speaker: Speaker::Tool,
                    parts: vec![result],
                    item: k,
                });
            } else if !signed {
                let what = part.keys().next().map_or("empty", String::as_str);
                parts.push(Part::Other {
                    what: format!("{what} part"),
                });
            }
            if signed {
                parts.push(Part::Bound(BoundKind::ThoughtSignature));
            }
        }
        flush(&mut parts, out);
    }
    Ok(())
}

/// A `functionResponse` as a result: the call it answers, and its text.
fn answer(
    k: usize,
    r: &super::Obj,
    open: &mut [(String, String, bool)],
) -> Result<Part, CoreError> {
    let name = string(r, "name").unwrap_or_default();
    let id = match string(r, "id") {
        Some(id) => {
            if let Some(call) = open.iter_mut().find(|c| c.0 == id) {
                call.2 = true;
            }
            id
        }
        None => {
            let at = open
                .iter()
                .position(|c| !c.2 && c.1 == name)
                .or_else(|| open.iter().position(|c| !c.2))
                .ok_or_else(|| bad(k, format!("functionResponse '{name}' answers no call")))?;
            open[at].2 = true;
            open[at].0.clone()
        }
    };
    let response = get(r, "response");
    let (text, is_error) = match response.and_then(Value::as_object) {
        Some(o) if o.len() == 1 && o.contains_key("output") => (text_of(&o["output"]), false),
        Some(o) if o.len() == 1 && o.contains_key("error") => (text_of(&o["error"]), true),
        Some(o) if o.contains_key("error") => (Value::Object(o.clone()).to_string(), true),
        Some(o) => (Value::Object(o.clone()).to_string(), false),
        None => (response.map(Value::to_string).unwrap_or_default(), false),
    };
    let mut content = Vec::new();
    super::push_text(&mut content, &text);
    for part in list(get(r, "parts")) {
        let part = obj(k, part, "functionResponse.parts[]")?;
        if let Some(blob) = get2(part, "inlineData", "inline_data") {
            content.push(media(k, blob, true)?);
        } else if let Some(file) = get2(part, "fileData", "file_data") {
            content.push(media(k, file, false)?);
        }
    }
    Ok(Part::Result {
        id,
        content,
        is_error,
    })
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn media(k: usize, v: &Value, inline: bool) -> Result<Part, CoreError> {
    let o = obj(k, v, "a blob")?;
    let mime = string(o, "mimeType").or_else(|| string(o, "mime_type"));
    let source = if inline {
        Source::Base64 {
            mime: mime
                .clone()
                .unwrap_or_else(|| "application/octet-stream".to_owned()),
            data: string(o, "data").ok_or_else(|| bad(k, "inlineData.data must be a string"))?,
        }
    } else {
        Source::Url {
            url: string(o, "fileUri")
                .or_else(|| string(o, "file_uri"))
                .ok_or_else(|| bad(k, "fileData.fileUri must be a string"))?,
            mime: mime.clone(),
        }
    };
    Ok(
        if mime.as_deref().is_some_and(|m| m.starts_with("image/")) {
            Part::Image(source)
        } else {
            Part::Document { source, name: None }
        },
    )
}
