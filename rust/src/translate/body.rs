//! A whole request body translated: its history, system and tools through `translate`, and
//! the body's other fields (token limit, sampling, stop sequences, tool choice, streaming)
//! mapped to where the target keeps them; a field the target has no place for is reported.

use super::portable::Choice;
use super::{translate_history, History, Options, Report};
use crate::error::CoreError;
use crate::native;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

/// Anthropic requires `max_tokens`: the value put in when the source had none (reported).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The fields of a body that are not its history, in portable form.
#[derive(Clone, Debug, Default, PartialEq)]
struct Settings {
    model: Option<Value>,
    max_tokens: Option<Value>,
    temperature: Option<Value>,
    top_p: Option<Value>,
    top_k: Option<Value>,
    stop: Vec<Value>,
    choice: Option<Choice>,
    stream: Option<Value>,
}

fn invalid(reason: impl Into<String>) -> CoreError {
    CoreError::InvalidBody {
        reason: reason.into(),
    }
}

/// Where a provider's body holds its history, system and tools.
fn fields(provider: &str) -> (&'static str, &'static [&'static str], &'static str) {
    match provider {
        "openai_chat" => ("messages", &[], "tools"),
        "openai_responses" => ("input", &["instructions"], "tools"),
        "anthropic" => ("messages", &["system"], "tools"),
        "gemini" => (
            "contents",
            &["systemInstruction", "system_instruction"],
            "tools",
        ),
        _ => ("messages", &["system"], "toolConfig"),
    }
}

/// The field of a `provider` body that holds its history.
pub fn history_field(provider: &str) -> &'static str {
    fields(provider).0
}

/// Translates the request body `body` (JSON) of `source` into one of `target`.
///
/// Errors: those of `translate`; `InvalidBody` for a body that is not a JSON object holding
/// its history where `source` keeps it.
pub fn translate_body(
    source: &str,
    target: &str,
    body: &[u8],
    options: &Options,
) -> Result<(Vec<u8>, Report), CoreError> {
    translate_body_with(source, target, body, options, Some(super::resume::global()))
}

/// `translate_body` resuming from, and leaving checkpoints in, `checkpoints` (None: every
/// translation from scratch).
pub(crate) fn translate_body_with(
    source: &str,
    target: &str,
    body: &[u8],
    options: &Options,
    checkpoints: Option<&super::resume::Checkpoints>,
) -> Result<(Vec<u8>, Report), CoreError> {
    for p in [source, target] {
        native::item_seed(p)?;
    }
    let history_key = history_field(source);
    // The history found by the scan the gateway path uses (`body::split_history`): its items
    // split, not read by serde, so a session's items met before are only hashed (serde's
    // reading of the whole body was a third of a resumed translation). The scan proves only
    // the structure between items: on any error, the body read by serde decides.
    let split = std::str::from_utf8(body)
        .ok()
        .and_then(|text| crate::body::split_history(text, history_key).map(|s| (text, s)));
    let fast = split.is_some();
    let result = match split {
        Some((text, (top, elements, range))) => {
            let others = top.0.into_iter().filter(|(k, _)| k != history_key);
            let others = others.map(|(k, v)| (k.into_owned(), v)).collect();
            translate_fields(
                source,
                target,
                others,
                Some(Given::Split(text[range].as_bytes(), elements)),
                options,
                checkpoints,
            )
        }
        None => {
            let (others, history) = read_fields(body, history_key)?;
            let history = history.map(Given::Raw);
            translate_fields(source, target, others, history, options, checkpoints)
        }
    };
    match result {
        Err(e) if fast => Err(read_fields(body, history_key).err().unwrap_or(e)),
        result => result,
    }
}

/// A body's top-level fields other than its history, each value as its JSON.
type Others<'a> = Vec<(String, &'a RawValue)>;

/// The top-level fields of `body` read by serde, the history (at `history_key`) apart.
fn read_fields<'a>(
    body: &'a [u8],
    history_key: &str,
) -> Result<(Others<'a>, Option<&'a RawValue>), CoreError> {
    let raw: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_slice(body).map_err(|e| match e.classify() {
            serde_json::error::Category::Data => invalid("the body must be a JSON object"),
            _ => invalid(format!("the body is not valid JSON ({e})")),
        })?;
    let mut history = None;
    let mut others = Vec::new();
    for (key, value) in raw {
        if key == history_key {
            history = Some(value);
        } else {
            others.push((key, value));
        }
    }
    Ok((others, history))
}

/// The history's JSON array: as given, or the one user message of a Responses `input` string.
fn history_bytes(source: &str, history_key: &str, raw: &RawValue) -> Result<Vec<u8>, CoreError> {
    match raw.get() {
        a if a.starts_with('[') => Ok(a.as_bytes().to_vec()),
        s if source == "openai_responses" && s.starts_with('"') => {
            let text: String = serde_json::from_str(s).map_err(|e| invalid(e.to_string()))?;
            let items = vec![json!({"role": "user", "content": text})];
            serde_json::to_vec(&items).map_err(|e| invalid(e.to_string()))
        }
        _ => Err(invalid(format!("`{history_key}` must be a list"))),
    }
}

/// A body's history as read.
enum Given<'a> {
    /// The JSON array and its items, split.
    Split(&'a [u8], Vec<&'a [u8]>),
    /// The value, read by serde.
    Raw(&'a RawValue),
}

/// `translate_body` of a body read: its fields but the history (`others`), and the history
/// (None: the body has none).
fn translate_fields(
    source: &str,
    target: &str,
    others: Others<'_>,
    history: Option<Given<'_>>,
    options: &Options,
    checkpoints: Option<&super::resume::Checkpoints>,
) -> Result<(Vec<u8>, Report), CoreError> {
    let (history_key, system_keys, tools_key) = fields(source);
    let mut rest = Map::new();
    for (key, value) in others {
        let value: Value = serde_json::from_str(value.get())
            .map_err(|e| invalid(format!("`{key}` could not be read ({e})")))?;
        rest.insert(key, value);
    }
    let bytes;
    let (history, elements) = match history {
        Some(Given::Split(array, elements)) => (array, Some(elements)),
        Some(Given::Raw(raw)) => {
            bytes = history_bytes(source, history_key, raw)?;
            (bytes.as_slice(), None)
        }
        None => return Err(invalid(format!("the body has no `{history_key}`"))),
    };
    let mut body = rest;
    let system = system_keys.iter().find_map(|k| body.remove(*k));
    let mut tools = body.remove(tools_key);
    let mut settings = Settings::default();
    let mut left = Vec::new();
    read_settings(source, &mut body, &mut tools, &mut settings, &mut left);
    if source == "bedrock_converse" {
        tools = tools.filter(|t| t.get("tools").is_some());
    }
    let History {
        json: messages,
        system,
        tools,
        mut report,
    } = translate_history(
        source,
        target,
        history,
        elements,
        system.as_ref(),
        tools.as_ref(),
        options,
        checkpoints,
    )
    .map_err(|e| {
        // A history serde cannot read into values (nested past its depth limit) is an invalid
        // body, as when the whole history was read so before anything else: only the error
        // path pays for that reading now.
        match serde_json::from_slice::<Vec<Value>>(history) {
            Err(read) => invalid(read.to_string()),
            Ok(_) => e,
        }
    })?;
    for key in left {
        report.add(
            None,
            "dropped",
            format!("field:{key}"),
            format!("{target} has no place for this field of a {source} body"),
        );
    }
    let mut out = Map::new();
    let (history_key, system_keys, _) = fields(target);
    write_settings(target, settings, tools, &mut out, &mut report);
    // Chat has no top-level system: `translate` wrote it as leading system messages.
    if let Some(system) = system {
        out.insert(
            system_keys.first().copied().unwrap_or("system").into(),
            system,
        );
    }
    // The history goes in as the bytes the target's validator read, written once.
    let mut head = serde_json::to_vec(&Value::Object(out)).map_err(|e| invalid(e.to_string()))?;
    head.pop();
    if head.len() > 1 {
        head.push(b',');
    }
    crate::json::write::write_str(&mut head, history_key);
    head.push(b':');
    // The head goes before the history in the history's own buffer (written with room for
    // it): one move of its bytes, not a copy into a buffer of the body's size.
    let mut bytes = messages;
    bytes.reserve(head.len() + 1);
    bytes.splice(0..0, head);
    bytes.push(b'}');
    Ok((bytes, report))
}

fn read_settings(
    source: &str,
    body: &mut Map<String, Value>,
    tools: &mut Option<Value>,
    s: &mut Settings,
    left: &mut Vec<String>,
) {
    let stop = |v: Option<Value>| match v {
        Some(Value::Array(items)) => items,
        Some(Value::Null) | None => Vec::new(),
        Some(one) => vec![one],
    };
    match source {
        "gemini" => {
            let mut config = match body
                .remove("generationConfig")
                .or_else(|| body.remove("generation_config"))
            {
                Some(Value::Object(c)) => c,
                _ => Map::new(),
            };
            s.max_tokens = config.remove("maxOutputTokens");
            s.temperature = config.remove("temperature");
            s.top_p = config.remove("topP");
            s.top_k = config.remove("topK");
            s.stop = stop(config.remove("stopSequences"));
            left.extend(config.keys().map(|k| format!("generationConfig.{k}")));
            if let Some(Value::Object(mut tc)) = body
                .remove("toolConfig")
                .or_else(|| body.remove("tool_config"))
            {
                if let Some(Value::Object(f)) = tc.remove("functionCallingConfig") {
                    let names = f.get("allowedFunctionNames").and_then(Value::as_array);
                    s.choice = match f.get("mode").and_then(Value::as_str) {
                        Some("NONE") => Some(Choice::None),
                        Some("ANY") => Some(match names.map(Vec::as_slice) {
                            Some([Value::String(one)]) => Choice::Named(one.clone()),
                            _ => Choice::Any,
                        }),
                        Some(_) => Some(Choice::Auto),
                        None => None,
                    };
                }
                left.extend(tc.keys().map(|k| format!("toolConfig.{k}")));
            }
        }
        "bedrock_converse" => {
            let mut config = match body.remove("inferenceConfig") {
                Some(Value::Object(c)) => c,
                _ => Map::new(),
            };
            s.max_tokens = config.remove("maxTokens");
            s.temperature = config.remove("temperature");
            s.top_p = config.remove("topP");
            s.stop = stop(config.remove("stopSequences"));
            left.extend(config.keys().map(|k| format!("inferenceConfig.{k}")));
            if let Some(Value::Object(tc)) = tools.as_mut() {
                s.choice = match tc.remove("toolChoice") {
                    Some(Value::Object(c)) if c.contains_key("any") => Some(Choice::Any),
                    Some(Value::Object(c)) if c.contains_key("tool") => c["tool"]
                        .get("name")
                        .and_then(Value::as_str)
                        .map(|n| Choice::Named(n.to_owned())),
                    Some(_) => Some(Choice::Auto),
                    None => None,
                };
            }
        }
        _ => {
            s.model = body.remove("model");
            s.max_tokens = ["max_completion_tokens", "max_tokens", "max_output_tokens"]
                .iter()
                .find_map(|k| body.remove(*k));
            s.temperature = body.remove("temperature");
            s.top_p = body.remove("top_p");
            s.top_k = body.remove("top_k");
            s.stop = stop(
                body.remove("stop")
                    .or_else(|| body.remove("stop_sequences")),
            );
            s.stream = body.remove("stream");
            s.choice = body.remove("tool_choice").and_then(|c| choice(&c));
        }
    }
    left.extend(body.keys().cloned());
}

/// A tool choice in OpenAI's or Anthropic's spelling.
fn choice(c: &Value) -> Option<Choice> {
    if let Some(word) = c.as_str() {
        return Some(match word {
            "none" => Choice::None,
            "required" | "any" => Choice::Any,
            _ => Choice::Auto,
        });
    }
    let name = c
        .get("name")
        .or_else(|| c.get("function").and_then(|f| f.get("name")))
        .and_then(Value::as_str);
    Some(match (c.get("type").and_then(Value::as_str), name) {
        (Some("none"), _) => Choice::None,
        (Some("any"), _) => Choice::Any,
        (Some("tool" | "function"), Some(n)) => Choice::Named(n.to_owned()),
        _ => Choice::Auto,
    })
}

fn write_settings(
    target: &str,
    s: Settings,
    tools: Option<Value>,
    out: &mut Map<String, Value>,
    report: &mut Report,
) {
    let mut lost_fields: Vec<&str> = Vec::new();
    let mut lost = |what: &'static str| lost_fields.push(what);
    let stop = (!s.stop.is_empty()).then(|| Value::Array(s.stop.clone()));
    let mut inserted_max = false;
    match target {
        "gemini" | "bedrock_converse" => {
            let gemini = target == "gemini";
            if s.model.is_some() {
                lost("model");
            }
            if s.stream.is_some() {
                lost("stream");
            }
            let mut config = Map::new();
            let keys = if gemini {
                ["maxOutputTokens", "temperature", "topP", "stopSequences"]
            } else {
                ["maxTokens", "temperature", "topP", "stopSequences"]
            };
            for (key, value) in keys
                .iter()
                .zip([s.max_tokens, s.temperature, s.top_p, stop])
            {
                if let Some(v) = value {
                    config.insert((*key).into(), v);
                }
            }
            if let Some(k) = s.top_k {
                if gemini {
                    config.insert("topK".into(), k);
                } else {
                    lost("top_k");
                }
            }
            if !config.is_empty() {
                let key = if gemini {
                    "generationConfig"
                } else {
                    "inferenceConfig"
                };
                out.insert(key.into(), Value::Object(config));
            }
            if gemini {
                if let Some(t) = tools {
                    out.insert("tools".into(), t);
                }
                if let Some(c) = s.choice {
                    let config = match c {
                        Choice::Auto => json!({"mode": "AUTO"}),
                        Choice::None => json!({"mode": "NONE"}),
                        Choice::Any => json!({"mode": "ANY"}),
                        Choice::Named(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
                    };
                    out.insert(
                        "toolConfig".into(),
                        json!({ "functionCallingConfig": config }),
                    );
                }
            } else if let Some(t) = tools {
                let mut config = json!({ "tools": t });
                match s.choice {
                    Some(Choice::Auto) => config["toolChoice"] = json!({"auto": {}}),
                    Some(Choice::Any) => config["toolChoice"] = json!({"any": {}}),
                    Some(Choice::Named(n)) => config["toolChoice"] = json!({"tool": {"name": n}}),
                    Some(Choice::None) => lost("tool_choice:none"),
                    None => {}
                }
                out.insert("toolConfig".into(), config);
            }
        }
        _ => {
            if let Some(m) = s.model {
                out.insert("model".into(), m);
            }
            let max_key = match target {
                "openai_chat" => "max_completion_tokens",
                "openai_responses" => "max_output_tokens",
                _ => "max_tokens",
            };
            match s.max_tokens {
                Some(v) => {
                    out.insert(max_key.into(), v);
                }
                None if target == "anthropic" => {
                    out.insert(max_key.into(), json!(DEFAULT_MAX_TOKENS));
                    inserted_max = true;
                }
                None => {}
            }
            for (key, value) in [("temperature", s.temperature), ("top_p", s.top_p)] {
                if let Some(v) = value {
                    out.insert(key.into(), v);
                }
            }
            match (s.top_k, target) {
                (Some(k), "anthropic") => {
                    out.insert("top_k".into(), k);
                }
                (Some(_), _) => lost("top_k"),
                _ => {}
            }
            match (stop, target) {
                (Some(v), "anthropic") => {
                    out.insert("stop_sequences".into(), v);
                }
                (Some(v), "openai_chat") => {
                    out.insert("stop".into(), v);
                }
                (Some(_), _) => lost("stop"),
                _ => {}
            }
            if let Some(v) = s.stream {
                out.insert("stream".into(), v);
            }
            if let Some(t) = tools {
                out.insert("tools".into(), t);
            }
            if let Some(c) = s.choice {
                let value = match (target, c) {
                    ("anthropic", Choice::Auto) => json!({"type": "auto"}),
                    ("anthropic", Choice::None) => json!({"type": "none"}),
                    ("anthropic", Choice::Any) => json!({"type": "any"}),
                    ("anthropic", Choice::Named(n)) => json!({"type": "tool", "name": n}),
                    (_, Choice::Auto) => json!("auto"),
                    (_, Choice::None) => json!("none"),
                    (_, Choice::Any) => json!("required"),
                    ("openai_chat", Choice::Named(n)) => {
                        json!({"type": "function", "function": {"name": n}})
                    }
                    (_, Choice::Named(n)) => json!({"type": "function", "name": n}),
                };
                out.insert("tool_choice".into(), value);
            }
        }
    }
    for what in lost_fields {
        report.add(
            None,
            "dropped",
            format!("field:{what}"),
            format!("{target} has no such field"),
        );
    }
    if inserted_max {
        report.add(
            None,
            "inserted",
            "field:max_tokens",
            format!("Anthropic requires max_tokens: {DEFAULT_MAX_TOKENS} put in"),
        );
    }
}
