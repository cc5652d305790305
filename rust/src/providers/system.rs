//! Each provider's top-level system as the core counts it: the caller's texts, then each note
//! an earlier assembly left in it, one system message each; and the `cache_control` markers it
//! carries. The one reader of a system, so that what the façade checks, what the core counts
//! and what its writers replace (`Provider::without_notes`) are one rule.

use serde_json::{Map, Value};

use crate::error::CoreError;
use crate::json::json_kind as kind;
use crate::ledger::MARKER as LEDGER;
use crate::summary::MARKER as SUMMARY;

use super::NOTE_SEPARATOR;

/// A system read: `texts[0]` the caller's own texts where the provider always counts a system
/// message (its first turn holds on to it), then one group per note.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct System {
    pub texts: Vec<Vec<String>>,
    /// Anthropic's `cache_control` blocks, which count against the request's four.
    pub markers: usize,
}

/// The system `system` (its JSON; `null` for none) of `provider`.
pub fn read(provider: &str, system: &[u8]) -> Result<System, CoreError> {
    let value: Value = serde_json::from_slice(system)
        .map_err(|e| refused(format!("system: cannot be read as JSON ({e})")))?;
    match provider {
        "anthropic" => anthropic(&value),
        "gemini" => gemini(&value).map_err(|why| refused(format!("system_instruction: {why}"))),
        "bedrock_converse" => bedrock(&value),
        "openai_responses" => match value {
            Value::Null => Ok(System::default()),
            Value::String(s) => Ok(texts(vec![vec![s]])),
            other => Err(refused(format!(
                "instructions must be a string, got {}",
                kind(&other)
            ))),
        },
        _ => Err(refused(format!("{provider} has no top-level system"))),
    }
}

/// A system string taken apart where an assembly joined its notes to it: the caller's text,
/// the ledger note, the summary note (the inverse of `system_with_notes`).
pub fn split_notes(text: &str) -> (&str, Option<&str>, Option<&str>) {
    let joined = |marker: &str| text.find(&format!("{NOTE_SEPARATOR}{marker}"));
    let (text, summary) = match joined(SUMMARY) {
        Some(at) => (&text[..at], Some(&text[at + NOTE_SEPARATOR.len()..])),
        None if text.starts_with(SUMMARY) => return ("", None, Some(text)),
        None => (text, None),
    };
    match text.find(&format!("{NOTE_SEPARATOR}{LEDGER}")) {
        Some(at) => (
            &text[..at],
            Some(&text[at + NOTE_SEPARATOR.len()..]),
            summary,
        ),
        None if text.starts_with(LEDGER) => ("", Some(text), summary),
        None => (text, None, summary),
    }
}

fn refused(reason: String) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason,
    }
}

fn texts(texts: Vec<Vec<String>>) -> System {
    System { texts, markers: 0 }
}

/// The caller's texts and the notes among `all`, the latest of each kind (the writers replace
/// them all).
fn with_notes(all: Vec<String>) -> (Vec<String>, Vec<Vec<String>>) {
    let (notes, own): (Vec<String>, Vec<String>) = all.into_iter().partition(|t| super::is_note(t));
    let (ledger, summary): (Vec<String>, Vec<String>) =
        notes.into_iter().partition(|t| t.starts_with(LEDGER));
    let latest = [ledger.into_iter().last(), summary.into_iter().last()];
    (own, latest.into_iter().flatten().map(|t| vec![t]).collect())
}

/// A string's notes, joined to it by an earlier assembly, as groups of their own.
fn string_groups(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let (base, note, summary) = split_notes(text);
    let own = if base.is_empty() {
        Vec::new()
    } else {
        vec![base.to_owned()]
    };
    let notes = [note, summary]
        .into_iter()
        .flatten()
        .map(|t| vec![t.to_owned()])
        .collect();
    (own, notes)
}

/// A string, or a list of `{"type": "text", "text": ...}` blocks; the caller's texts count
/// only when there are some.
fn anthropic(system: &Value) -> Result<System, CoreError> {
    let (own, notes, markers) = match system {
        Value::Null => return Ok(System::default()),
        Value::String(s) => {
            let (own, notes) = string_groups(s);
            (own, notes, 0)
        }
        Value::Array(blocks) => {
            let mut all = Vec::with_capacity(blocks.len());
            let mut markers = 0;
            for (k, block) in blocks.iter().enumerate() {
                let text = block
                    .as_object()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .and_then(|b| {
                        markers +=
                            usize::from(b.get("cache_control").is_some_and(|c| !c.is_null()));
                        b.get("text")?.as_str()
                    })
                    .ok_or_else(|| {
                        refused(format!(
                            "system[{k}] must be a text block {{type: text, text: str}}"
                        ))
                    })?;
                all.push(text.to_owned());
            }
            let (own, notes) = with_notes(all);
            (own, notes, markers)
        }
        other => {
            return Err(refused(format!(
                "system must be a string or a list of text blocks, got {}",
                kind(other)
            )))
        }
    };
    let mut texts = if own.is_empty() {
        Vec::new()
    } else {
        vec![own]
    };
    texts.extend(notes);
    Ok(System { texts, markers })
}

/// A string or a content of text parts; the caller's texts always count (an empty message when
/// there are none). The error is worded after `system_instruction: `.
fn gemini(system: &Value) -> Result<System, String> {
    let (own, notes) = match system {
        Value::Null => (Vec::new(), Vec::new()),
        Value::String(s) => string_groups(s),
        Value::Object(content) => with_notes(gemini_parts(content)?),
        other => {
            return Err(format!(
                "the system instruction must be an object, got {}",
                kind(other)
            ))
        }
    };
    let mut groups = vec![own];
    groups.extend(notes);
    Ok(texts(groups))
}

fn gemini_parts(content: &Map<String, Value>) -> Result<Vec<String>, String> {
    let parts = content.get("parts").filter(|p| !p.is_null());
    if parts.is_none() && content.get("text").is_some_and(|t| !t.is_null()) {
        // A part alone would be read as a content with no parts: its text neither counted
        // nor kept beside a note.
        return Err(
            "the system instruction must be a content ({'parts': [{'text': ...}]}) \
                    or a string, got a part"
                .into(),
        );
    }
    let one;
    let parts: &[Value] = match parts {
        None => &[],
        Some(p @ (Value::Object(_) | Value::String(_))) => {
            one = [p.clone()];
            &one
        }
        Some(Value::Array(parts)) => parts,
        Some(_) => return Err("parts must be a list".into()),
    };
    parts
        .iter()
        .enumerate()
        .map(|(p, part)| match part {
            Value::String(text) => Ok(text.clone()),
            Value::Object(part) => part
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("parts[{p}] must be a text part")),
            other => Err(format!("parts[{p}] must be an object, got {}", kind(other))),
        })
        .collect()
}

/// A list of union blocks: `text`, `guardContent` text, `cachePoint`; the caller's texts
/// always count, and each note block is a group of its own.
fn bedrock(system: &Value) -> Result<System, CoreError> {
    let blocks = match system {
        Value::Null => return Ok(texts(vec![Vec::new()])),
        Value::Array(blocks) => blocks,
        other => {
            return Err(refused(format!(
                "system must be a list, got {}",
                kind(other)
            )))
        }
    };
    let (mut own, mut notes, mut summaries) = (Vec::new(), Vec::new(), Vec::new());
    for (b, block) in blocks.iter().enumerate() {
        let at = format!("system[{b}]");
        match member(block, &at)? {
            ("text", value) => {
                let text = string(value, &format!("{at}.text"))?;
                match () {
                    () if text.starts_with(LEDGER) => notes.push(vec![text]),
                    () if text.starts_with(SUMMARY) => summaries.push(vec![text]),
                    () => own.push(text),
                }
            }
            // Guarded text is the caller's own, never a note.
            ("guardContent", value) => own.push(guarded_text(value, &at)?),
            ("cachePoint", _) => {}
            (other, _) => {
                return Err(refused(format!(
                    "{at} has type {other}; system takes text blocks"
                )))
            }
        }
    }
    let mut groups = vec![own];
    groups.extend(notes);
    groups.extend(summaries);
    Ok(texts(groups))
}

fn guarded_text(value: &Value, at: &str) -> Result<String, CoreError> {
    match member(value, at)? {
        ("text", inner) => {
            let inner = inner.as_object().ok_or_else(|| {
                refused(format!("{at}.text must be an object, got {}", kind(inner)))
            })?;
            string(
                inner.get("text").unwrap_or(&Value::Null),
                &format!("{at}.text.text"),
            )
        }
        ("image", _) => Err(refused(format!(
            "{at} is a guarded image; system takes text"
        ))),
        (other, _) => Err(refused(format!("{at} has unknown type {other}"))),
    }
}

/// The one member a Bedrock union block sets (members set to null count as absent).
fn member<'v>(block: &'v Value, at: &str) -> Result<(&'v str, &'v Value), CoreError> {
    let object = block
        .as_object()
        .ok_or_else(|| refused(format!("{at} must be an object, got {}", kind(block))))?;
    let set: Vec<(&String, &Value)> = object.iter().filter(|(_, v)| !v.is_null()).collect();
    match set.as_slice() {
        [(key, value)] => Ok((key.as_str(), value)),
        _ => {
            let mut keys: Vec<&str> = set.iter().map(|(k, _)| k.as_str()).collect();
            keys.sort_unstable();
            let keys: Vec<String> = keys.iter().map(|k| super::pynames::repr_str(k)).collect();
            Err(refused(format!(
                "{at} must set exactly one block type, got [{}]",
                keys.join(", ")
            )))
        }
    }
}

fn string(value: &Value, at: &str) -> Result<String, CoreError> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| refused(format!("{at} must be a string, got {}", kind(value))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(provider: &str, system: &str) -> Vec<Vec<String>> {
        read(provider, system.as_bytes()).unwrap().texts
    }

    fn refusal(provider: &str, system: &str) -> String {
        match read(provider, system.as_bytes()) {
            Err(CoreError::InvalidMessage {
                index: None,
                reason,
            }) => reason,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_string_is_taken_apart_where_the_notes_were_joined() {
        let joined = format!("Be brief.{NOTE_SEPARATOR}{LEDGER} sent{NOTE_SEPARATOR}{SUMMARY} s");
        let json = serde_json::to_string(&joined).unwrap();
        let expected = [
            vec!["Be brief.".to_owned()],
            vec![format!("{LEDGER} sent")],
            vec![format!("{SUMMARY} s")],
        ];
        assert_eq!(groups("anthropic", &json), expected);
        assert_eq!(groups("gemini", &json), expected);
        // The Responses API's instructions hold no notes: they are input items of their own.
        assert_eq!(groups("openai_responses", &json), [vec![joined.clone()]]);
        assert_eq!(split_notes(&joined).0, "Be brief.");
    }

    #[test]
    fn the_callers_texts_count_where_the_provider_always_has_a_system() {
        assert!(groups("anthropic", "null").is_empty());
        assert!(groups("openai_responses", "null").is_empty());
        assert_eq!(groups("gemini", "null"), [Vec::<String>::new()]);
        assert_eq!(groups("bedrock_converse", "null"), [Vec::<String>::new()]);
        assert_eq!(groups("gemini", r#"{"parts": []}"#), [Vec::<String>::new()]);
    }

    #[test]
    fn blocks_keep_the_latest_note_of_each_kind_and_count_markers() {
        let system = format!(
            r#"[{{"type":"text","text":"{LEDGER} old"}},{{"type":"text","text":"rules","cache_control":{{"type":"ephemeral"}}}},{{"type":"text","text":"{LEDGER} new"}}]"#
        );
        let read = read("anthropic", system.as_bytes()).unwrap();
        assert_eq!(
            read.texts,
            [vec!["rules".to_owned()], vec![format!("{LEDGER} new")]]
        );
        assert_eq!(read.markers, 1);
    }

    #[test]
    fn bedrock_keeps_every_note_block_and_guarded_text_is_the_callers() {
        let system = format!(
            r#"[{{"text":"{LEDGER} a"}},{{"cachePoint":{{"type":"default"}}}},{{"guardContent":{{"text":{{"text":"{LEDGER} mine"}}}}}},{{"text":"{LEDGER} b"}}]"#
        );
        assert_eq!(
            groups("bedrock_converse", &system),
            [
                vec![format!("{LEDGER} mine")],
                vec![format!("{LEDGER} a")],
                vec![format!("{LEDGER} b")],
            ]
        );
    }

    #[test]
    fn what_a_provider_does_not_take_is_refused_in_its_words() {
        assert_eq!(
            refusal("anthropic", "3"),
            "system must be a string or a list of text blocks, got a number"
        );
        assert_eq!(
            refusal("anthropic", r#"[{"type":"image"}]"#),
            "system[0] must be a text block {type: text, text: str}"
        );
        assert_eq!(
            refusal("gemini", r#"{"text":"a part"}"#),
            "system_instruction: the system instruction must be a content \
             ({'parts': [{'text': ...}]}) or a string, got a part"
        );
        assert_eq!(
            refusal("gemini", r#"{"parts":[1]}"#),
            "system_instruction: parts[0] must be an object, got a number"
        );
        assert_eq!(
            refusal("bedrock_converse", r#"[{"text":"a","cachePoint":{}}]"#),
            "system[0] must set exactly one block type, got ['cachePoint', 'text']"
        );
        assert_eq!(
            refusal("bedrock_converse", r#"[{"guardContent":{"image":{}}}]"#),
            "system[0] is a guarded image; system takes text"
        );
        assert_eq!(
            refusal("openai_responses", "[]"),
            "instructions must be a string, got a list"
        );
        assert!(refusal("anthropic", "{").starts_with("system: cannot be read as JSON"));
    }
}
