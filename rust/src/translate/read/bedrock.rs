//! Bedrock Converse messages read into turns: each `toolResult` a tool turn of its own, in
//! place; `reasoningContent` kept with its signature, or as redacted; `cachePoint` markers
//! left out and reported (they mark the source's prompt cache, which the target has not).

use super::{arguments, bad, get, list, need, obj, string};
use crate::error::CoreError;
use crate::translate::portable::{BoundKind, Conversation, Part, Source, Speaker, Turn};
use serde_json::Value;

pub fn read(items: &[Value], first: usize, out: &mut Conversation) -> Result<(), CoreError> {
    for (i, item) in (first..).zip(items) {
        let m = obj(i, item, "a message")?;
        let speaker = match need(i, m, "role", "message")?.as_str() {
            "user" => Speaker::User,
            "assistant" => Speaker::Assistant,
            other => return Err(bad(i, format!("role '{other}' is not user or assistant"))),
        };
        let mut parts = Vec::new();
        for b in list(get(m, "content")) {
            let b = obj(i, b, "a content block")?;
            if let Some(r) = get(b, "toolResult") {
                if !parts.is_empty() {
                    out.turns.push(Turn {
                        speaker,
                        parts: std::mem::take(&mut parts),
                        item: i,
                    });
                }
                let r = obj(i, r, "toolResult")?;
                let mut content = Vec::new();
                for c in list(get(r, "content")) {
                    let c = obj(i, c, "toolResult.content[]")?;
                    match get(c, "json") {
                        Some(json) => content.push(Part::Text(json.to_string())),
                        None => block(i, c, &mut content, out)?,
                    }
                }
                out.turns.push(Turn {
                    speaker: Speaker::Tool,
                    parts: vec![Part::Result {
                        id: need(i, r, "toolUseId", "toolResult")?,
                        content,
                        is_error: string(r, "status").as_deref() == Some("error"),
                    }],
                    item: i,
                });
                continue;
            }
            block(i, b, &mut parts, out)?;
        }
        if !parts.is_empty() {
            out.turns.push(Turn {
                speaker,
                parts,
                item: i,
            });
        }
    }
    Ok(())
}

fn block(
    i: usize,
    b: &super::Obj,
    parts: &mut Vec<Part>,
    out: &mut Conversation,
) -> Result<(), CoreError> {
    if let Some(text) = get(b, "text").and_then(Value::as_str) {
        super::push_text(parts, text);
    } else if let Some(image) = get(b, "image") {
        let image = obj(i, image, "image")?;
        let format = string(image, "format").unwrap_or_else(|| "png".to_owned());
        parts.push(Part::Image(source(i, image, &format!("image/{format}"))?));
    } else if let Some(doc) = get(b, "document") {
        let doc = obj(i, doc, "document")?;
        let format = string(doc, "format").unwrap_or_else(|| "pdf".to_owned());
        parts.push(Part::Document {
            source: source(i, doc, document_mime(&format))?,
            name: string(doc, "name"),
        });
    } else if let Some(call) = get(b, "toolUse") {
        let call = obj(i, call, "toolUse")?;
        parts.push(Part::Call {
            id: need(i, call, "toolUseId", "toolUse")?,
            name: need(i, call, "name", "toolUse")?,
            arguments: arguments(get(call, "input")),
        });
    } else if let Some(r) = get(b, "reasoningContent") {
        let r = obj(i, r, "reasoningContent")?;
        match get(r, "reasoningText").and_then(Value::as_object) {
            Some(t) => parts.push(Part::Reasoning {
                text: string(t, "text").filter(|t| !t.is_empty()),
                bound: get(t, "signature").map(|_| BoundKind::Signature),
            }),
            None => parts.push(Part::Bound(BoundKind::RedactedThinking)),
        }
    } else if get(b, "cachePoint").is_some() {
        out.left_out.push((
            i,
            "cachePoint".to_owned(),
            "a Bedrock prompt-cache marker; the target caches by its own rules".to_owned(),
        ));
    } else {
        let what = b.keys().next().map_or("empty", String::as_str);
        parts.push(Part::Other {
            what: format!("{what} block"),
        });
    }
    Ok(())
}

fn source(i: usize, o: &super::Obj, mime: &str) -> Result<Source, CoreError> {
    let s = get(o, "source")
        .and_then(Value::as_object)
        .ok_or_else(|| bad(i, "an image or document needs a `source` object"))?;
    if let Some(bytes) = string(s, "bytes") {
        return Ok(Source::Base64 {
            mime: mime.to_owned(),
            data: bytes,
        });
    }
    if let Some(loc) = get(s, "s3Location").and_then(Value::as_object) {
        return Ok(Source::S3 {
            uri: need(i, loc, "uri", "s3Location")?,
            mime: Some(mime.to_owned()),
        });
    }
    if let Some(text) = string(s, "text") {
        use base64::Engine;
        return Ok(Source::Base64 {
            mime: "text/plain".to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(text.as_bytes()),
        });
    }
    Err(bad(i, "a source needs `bytes` or `s3Location`"))
}

/// The media type of a Bedrock document format.
pub fn document_mime(format: &str) -> &'static str {
    match format {
        "pdf" => "application/pdf",
        "csv" => "text/csv",
        "doc" => "application/msword",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xls" => "application/vnd.ms-excel",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "html" => "text/html",
        "md" => "text/markdown",
        _ => "text/plain",
    }
}
