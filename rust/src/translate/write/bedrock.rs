//! Bedrock Converse: the system as text blocks; user and assistant turns alternating with
//! neighbours merged; a user turn of `toolResult` blocks holds nothing else, so text after
//! results goes behind a short assistant turn; images and documents by format, inline.

use super::{arguments_object, blank, push_merged, State};
use crate::translate::portable::{Part, Source, Speaker, Turn};
use crate::translate::Report;
use serde_json::{json, Value};

/// The user turn put before a conversation that opens with the assistant.
pub const OPENING_TEXT: &str = "(session start)";
/// The assistant turn put between tool results and user content after them.
pub const BRIDGE_TEXT: &str = "(tool results received)";

/// Writes one turn after those `st` holds.
pub fn turn(st: &mut State, turn: &Turn, report: &mut Report) {
    let (out, ids) = (&mut st.out, &mut st.ids);
    {
        let role = if turn.speaker == Speaker::Assistant {
            "assistant"
        } else {
            "user"
        };
        super::report_late_instruction(turn, "Bedrock has one top-level system", report);
        let mut blocks = Vec::new();
        for p in &turn.parts {
            match p {
                Part::Result {
                    id,
                    content,
                    is_error,
                } => blocks.push(json!({"toolResult": {
                    "toolUseId": ids.result(id),
                    "content": blocks_of(turn.item, content, report),
                    "status": if *is_error { "error" } else { "success" },
                }})),
                Part::Call {
                    id,
                    name,
                    arguments,
                } => blocks.push(json!({"toolUse": {
                    "toolUseId": ids.call(id),
                    "name": name,
                    "input": arguments_object(turn.item, arguments, report),
                }})),
                other => blocks.extend(blocks_of(turn.item, std::slice::from_ref(other), report)),
            }
        }
        if blocks.is_empty() {
            return;
        }
        if out.is_empty() && role == "assistant" {
            report.add(
                Some(turn.item),
                "inserted",
                "opening_turn",
                format!("Bedrock needs a user turn first: `{OPENING_TEXT}` put before"),
            );
            push_merged(out, "user", vec![json!({"text": OPENING_TEXT})]);
        }
        let results = |v: &Value| v.get("toolResult").is_some();
        if role == "user" {
            if let Some(last) = out.last() {
                let held: &[Value] = last["content"].as_array().map_or(&[], Vec::as_slice);
                let same = last["role"] == "user";
                if same && held.iter().any(results) != blocks.iter().any(results) {
                    report.add(
                        Some(turn.item),
                        "inserted",
                        "bridge_turn",
                        format!(
                            "Bedrock takes no other content beside toolResult blocks: \
                             `{BRIDGE_TEXT}` from the assistant put between"
                        ),
                    );
                    push_merged(out, "assistant", vec![json!({"text": BRIDGE_TEXT})]);
                }
            }
        }
        push_merged(out, role, blocks);
    }
}

/// The top-level system of `texts`.
pub fn system(texts: &[String]) -> Option<Value> {
    (!texts.is_empty()).then(|| Value::Array(texts.iter().map(|t| json!({"text": t})).collect()))
}

fn blocks_of(item: usize, parts: &[Part], report: &mut Report) -> Vec<Value> {
    let mut out = Vec::new();
    let mut documents = 0;
    for p in parts {
        match p {
            Part::Text(t) if blank(t) => report.add(
                Some(item),
                "dropped",
                "blank_text",
                "a text of only whitespace, which Bedrock refuses",
            ),
            Part::Text(t) => out.push(json!({"text": t})),
            Part::Image(s) => {
                let format = s.mime().and_then(image_format).unwrap_or("png");
                out.push(json!({"image": {"format": format, "source": source(s)}}));
            }
            Part::Document { source: s, name } => {
                documents += 1;
                let format = s.mime().and_then(document_format).unwrap_or("pdf");
                out.push(json!({"document": {
                    "format": format,
                    "name": document_name(name.as_deref(), item, documents),
                    "source": source(s),
                }}));
            }
            _ => {}
        }
    }
    out
}

fn source(s: &Source) -> Value {
    match s {
        Source::Base64 { data, .. } => json!({"bytes": data}),
        Source::S3 { uri, .. } => json!({"s3Location": {"uri": uri}}),
        Source::Url { url, .. } | Source::FileId(url) => json!({"s3Location": {"uri": url}}),
    }
}

/// A document name as Bedrock takes it: letters, digits, single spaces, hyphens, parentheses
/// and square brackets.
fn document_name(name: Option<&str>, item: usize, n: usize) -> String {
    let cleaned: String = name
        .unwrap_or("")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-()[]".contains(c) {
                c
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if cleaned.is_empty() {
        format!("document-{item}-{n}")
    } else {
        cleaned.chars().take(200).collect()
    }
}

/// Bedrock's image format for a media type.
pub fn image_format(mime: &str) -> Option<&'static str> {
    match mime {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// Bedrock's document format for a media type.
pub fn document_format(mime: &str) -> Option<&'static str> {
    Some(match mime {
        "application/pdf" => "pdf",
        "text/csv" => "csv",
        "application/msword" => "doc",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => "docx",
        "application/vnd.ms-excel" => "xls",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => "xlsx",
        "text/html" => "html",
        "text/plain" => "txt",
        "text/markdown" => "md",
        _ => return None,
    })
}
