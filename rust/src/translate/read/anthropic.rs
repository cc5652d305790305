//! Anthropic messages read into turns: each `tool_result` block a tool turn of its own, in
//! place; thinking with its signature, `redacted_thinking` and `compaction` blocks kept as
//! what they are, for the writer to carry, make text or report.

use super::{arguments, bad, get, need, obj, push_text, string};
use crate::error::CoreError;
use crate::translate::portable::{BoundKind, Conversation, Part, Source, Speaker, Turn};
use serde_json::Value;

pub fn read(items: &[Value], first: usize, out: &mut Conversation) -> Result<(), CoreError> {
    for (i, item) in (first..).zip(items) {
        let m = obj(i, item, "a message")?;
        let role = need(i, m, "role", "message")?;
        let speaker = match role.as_str() {
            "user" => Speaker::User,
            "assistant" => Speaker::Assistant,
            other => return Err(bad(i, format!("role '{other}' is not user or assistant"))),
        };
        let mut parts = Vec::new();
        let flush = |parts: &mut Vec<Part>, out: &mut Conversation, speaker| {
            if !parts.is_empty() {
                out.turns.push(Turn {
                    speaker,
                    parts: std::mem::take(parts),
                    item: i,
                });
            }
        };
        match get(m, "content") {
            Some(Value::String(s)) => push_text(&mut parts, s),
            Some(Value::Array(blocks)) => {
                for b in blocks {
                    let b = obj(i, b, "a content block")?;
                    annotations(i, b, out);
                    let ty = string(b, "type").unwrap_or_default();
                    match ty.as_str() {
                        "tool_result" => {
                            flush(&mut parts, out, speaker);
                            let content = blocks_of(i, get(b, "content"), out)?;
                            out.turns.push(Turn {
                                speaker: Speaker::Tool,
                                parts: vec![Part::Result {
                                    id: need(i, b, "tool_use_id", "tool_result")?,
                                    content,
                                    is_error: get(b, "is_error").and_then(Value::as_bool)
                                        == Some(true),
                                }],
                                item: i,
                            });
                        }
                        "compaction" => {
                            flush(&mut parts, out, speaker);
                            out.turns.push(Turn {
                                speaker: Speaker::User,
                                parts: vec![Part::Compaction {
                                    summary: string(b, "content"),
                                }],
                                item: i,
                            });
                        }
                        _ => block(i, b, &ty, &mut parts)?,
                    }
                }
            }
            _ => return Err(bad(i, "content must be a string or a list of blocks")),
        }
        flush(&mut parts, out, speaker);
    }
    Ok(())
}

/// Reports what a block carries beside its content that no other provider reads: its
/// prompt-cache marker and its citations.
fn annotations(i: usize, b: &super::Obj, out: &mut Conversation) {
    for (key, why) in [
        (
            "cache_control",
            "an Anthropic prompt-cache marker; the target caches by its own rules",
        ),
        (
            "citations",
            "Anthropic citations have no equivalent in the other providers",
        ),
    ] {
        if get(b, key).is_some_and(|v| v.as_array().is_none_or(|a| !a.is_empty())) {
            out.left_out.push((i, key.to_owned(), why.to_owned()));
        }
    }
}

/// A tool result's `content`: a string or text, image and document blocks.
fn blocks_of(i: usize, v: Option<&Value>, out: &mut Conversation) -> Result<Vec<Part>, CoreError> {
    let mut parts = Vec::new();
    match v {
        None => {}
        Some(Value::String(s)) => push_text(&mut parts, s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                let b = obj(i, b, "a content block")?;
                annotations(i, b, out);
                let ty = string(b, "type").unwrap_or_default();
                block(i, b, &ty, &mut parts)?;
            }
        }
        Some(_) => return Err(bad(i, "tool_result.content must be a string or a list")),
    }
    Ok(parts)
}

fn block(i: usize, b: &super::Obj, ty: &str, parts: &mut Vec<Part>) -> Result<(), CoreError> {
    match ty {
        "text" => push_text(parts, &need(i, b, "text", "text block")?),
        "image" => parts.push(Part::Image(source(i, b)?)),
        "document" => parts.push(Part::Document {
            source: source(i, b)?,
            name: string(b, "title"),
        }),
        "tool_use" => parts.push(Part::Call {
            id: need(i, b, "id", "tool_use")?,
            name: need(i, b, "name", "tool_use")?,
            arguments: arguments(get(b, "input")),
        }),
        "thinking" => {
            let text = string(b, "thinking").filter(|t| !t.is_empty());
            let bound = get(b, "signature").map(|_| BoundKind::Signature);
            parts.push(Part::Reasoning { text, bound });
        }
        "redacted_thinking" => parts.push(Part::Bound(BoundKind::RedactedThinking)),
        other => parts.push(Part::Other {
            what: format!("{other} block"),
        }),
    }
    Ok(())
}

fn source(i: usize, b: &super::Obj) -> Result<Source, CoreError> {
    let s = get(b, "source")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(i, "an image or document block needs a `source` object"))?;
    Ok(match string(s, "type").as_deref() {
        Some("base64") => Source::Base64 {
            mime: need(i, s, "media_type", "source")?,
            data: need(i, s, "data", "source")?,
        },
        // A plain-text document: its text, inline, as base64 would carry it.
        Some("text") => Source::Base64 {
            mime: string(s, "media_type").unwrap_or_else(|| "text/plain".to_owned()),
            data: base64_of(&need(i, s, "data", "source")?),
        },
        Some("url") => Source::Url {
            url: need(i, s, "url", "source")?,
            mime: None,
        },
        Some("file") => Source::FileId(need(i, s, "file_id", "source")?),
        other => {
            return Err(bad(
                i,
                format!("a source of type {other:?} has no equivalent elsewhere"),
            ))
        }
    })
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}
