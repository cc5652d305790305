//! Gemini: the system as `systemInstruction`; user and model contents, same-role neighbours
//! merged, so a model turn's calls are answered by the one user content after it, response
//! for call; each response named as its call and carrying its id; a user turn first. Each
//! call step is signed with the sentinel Gemini documents for calls from elsewhere.

use super::{arguments_object, push_parts, State};
use crate::translate::portable::{Part, Source, Speaker, Turn};
use crate::translate::{Options, Report};
use serde_json::{json, Value};

/// The user turn put before a conversation that opens with the model.
pub const OPENING_TEXT: &str = "(The session starts here.)";
/// Gemini's documented value for a call whose signature is not Gemini's own.
pub const SENTINEL: &str = "skip_thought_signature_validator";

/// Writes one turn after those `st` holds.
pub fn turn(st: &mut State, turn: &Turn, report: &mut Report) {
    let (out, ids, names) = (&mut st.out, &mut st.ids, &mut st.names);
    {
        let model = turn.speaker == Speaker::Assistant;
        super::report_late_instruction(turn, "Gemini has one systemInstruction", report);
        let mut parts = Vec::new();
        for p in &turn.parts {
            match p {
                Part::Call {
                    id,
                    name,
                    arguments,
                } => {
                    let id = ids.call(id);
                    names.insert(id.clone(), name.clone());
                    parts.push(json!({"functionCall": {
                        "id": id,
                        "name": name,
                        "args": arguments_object(turn.item, arguments, report),
                    }}));
                }
                Part::Result {
                    id,
                    content,
                    is_error,
                } => {
                    let id = ids.result(id);
                    let text = content
                        .iter()
                        .filter_map(super::text_of)
                        .collect::<Vec<_>>()
                        .join("\n");
                    let key = if *is_error { "error" } else { "output" };
                    let mut r = json!({
                        "id": id,
                        "name": names.get(&id).cloned().unwrap_or_default(),
                        "response": {key: text},
                    });
                    let media: Vec<Value> = content.iter().filter_map(media).collect();
                    if !media.is_empty() {
                        r["parts"] = Value::Array(media);
                    }
                    parts.push(json!({ "functionResponse": r }));
                }
                Part::Text(t) if t.is_empty() => {}
                Part::Text(t) => parts.push(json!({ "text": t })),
                other => parts.extend(media(other)),
            }
        }
        if parts.is_empty() {
            return;
        }
        if out.is_empty() && model {
            report.add(
                Some(turn.item),
                "inserted",
                "opening_turn",
                format!("Gemini needs a user turn first: `{OPENING_TEXT}` put before"),
            );
            push_parts(out, "user", vec![json!({ "text": OPENING_TEXT })]);
        }
        push_parts(out, if model { "model" } else { "user" }, parts);
    }
}

/// Signs each call step of the contents `st` holds (not those closed before: signed already)
/// with the sentinel, when `options` ask, and reports how many steps of the whole history
/// were; gives the positions in `st.out` of those signed now.
pub fn sign(st: &mut State, options: &Options, report: &mut Report) -> Vec<usize> {
    let mut now = Vec::new();
    if options.gemini_sentinel {
        for (k, content) in st.out.iter_mut().enumerate() {
            if content["role"] != "model" {
                continue;
            }
            let first = content["parts"]
                .as_array_mut()
                .and_then(|ps| ps.iter_mut().find(|p| p.get("functionCall").is_some()));
            if let Some(part) = first {
                part["thoughtSignature"] = json!(SENTINEL);
                now.push(k);
            }
        }
    }
    let signed = st.signed + now.len();
    if signed > 0 {
        report.add(
            None,
            "inserted",
            "thought_signature",
            format!(
                "{signed} call step(s) signed with Gemini's `{SENTINEL}`, its documented value \
                 for calls that did not come from Gemini"
            ),
        );
    }
    now
}

/// The `systemInstruction` of `texts`.
pub fn system(texts: &[String]) -> Option<Value> {
    (!texts.is_empty())
        .then(|| json!({"parts": texts.iter().map(|t| json!({"text": t})).collect::<Vec<_>>()}))
}

fn media(p: &Part) -> Option<Value> {
    let (source, mime) = match p {
        Part::Image(s) | Part::Document { source: s, .. } => (s, s.mime()),
        _ => return None,
    };
    Some(match source {
        Source::Base64 { mime, data } => json!({"inlineData": {"mimeType": mime, "data": data}}),
        Source::Url { url, .. } | Source::S3 { uri: url, .. } | Source::FileId(url) => {
            json!({"fileData": {"mimeType": mime.unwrap_or("application/octet-stream"), "fileUri": url}})
        }
    })
}
