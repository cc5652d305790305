//! Native items read into the portable form, one module per provider. The source was read by
//! its provider first (`native::validate_json`), so malformed items are refused there with
//! that provider's wording; these readers still refuse, never panic, on what they cannot map.

mod anthropic;
mod bedrock;
mod chat;
mod gemini;
mod responses;

use super::portable::{Conversation, Part, Source, Tool};
use crate::error::CoreError;
use serde_json::{Map, Value};

pub(super) type Obj = Map<String, Value>;

/// Reads `items` (the source's history from its item `first` on: a translation resumed
/// where an earlier one left off reads only the items after), its top-level `system` and its
/// `tools`.
pub fn read(
    source: &str,
    items: &[Value],
    first: usize,
    system: Option<&Value>,
    tools: Option<&Value>,
) -> Result<Conversation, CoreError> {
    let mut out = Conversation::default();
    match source {
        "openai_chat" => chat::read(items, first, &mut out)?,
        "openai_responses" => responses::read(items, first, &mut out)?,
        "anthropic" => anthropic::read(items, first, &mut out)?,
        "gemini" => gemini::read(items, first, &mut out)?,
        "bedrock_converse" => bedrock::read(items, first, &mut out)?,
        other => return Err(unknown(other)),
    }
    if let Some(system) = system.filter(|v| !v.is_null()) {
        out.system = system_texts(source, system)?;
    }
    if let Some(tools) = tools.filter(|v| !v.is_null()) {
        out.tools = read_tools(source, tools)?;
    }
    Ok(out)
}

pub(super) fn unknown(provider: &str) -> CoreError {
    CoreError::Config {
        key: "provider".into(),
        reason: format!(
            "no provider '{provider}' (have: openai_chat, anthropic, openai_responses, gemini, \
             bedrock_converse)"
        ),
    }
}

pub(super) fn bad(i: usize, reason: impl Into<String>) -> CoreError {
    CoreError::invalid(i, reason)
}

pub(crate) fn unknown_shape(reason: impl Into<String>) -> CoreError {
    bad_request(reason)
}

fn bad_request(reason: impl Into<String>) -> CoreError {
    CoreError::InvalidMessage {
        index: None,
        reason: reason.into(),
    }
}

pub(super) fn obj<'v>(i: usize, v: &'v Value, what: &str) -> Result<&'v Obj, CoreError> {
    v.as_object()
        .ok_or_else(|| bad(i, format!("{what} must be an object")))
}

/// A key's value, None when absent or null.
pub(super) fn get<'v>(o: &'v Obj, key: &str) -> Option<&'v Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// Gemini's fields come camelCase (REST) or snake_case (Python SDK).
pub(super) fn get2<'v>(o: &'v Obj, camel: &str, snake: &str) -> Option<&'v Value> {
    get(o, camel).or_else(|| get(o, snake))
}

pub(super) fn string(o: &Obj, key: &str) -> Option<String> {
    get(o, key).and_then(Value::as_str).map(str::to_owned)
}

pub(super) fn need(i: usize, o: &Obj, key: &str, what: &str) -> Result<String, CoreError> {
    string(o, key).ok_or_else(|| bad(i, format!("{what}.{key} must be a string")))
}

pub(super) fn list(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The JSON text of call arguments given as a value (an object) or as text already.
pub(super) fn arguments(v: Option<&Value>) -> String {
    match v {
        None => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// An image or file URL: inline when it is a base64 data URL.
pub(super) fn url_source(url: &str) -> Source {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((mime, data)) = rest.split_once(";base64,") {
            return Source::Base64 {
                mime: mime.to_owned(),
                data: data.to_owned(),
            };
        }
    }
    Source::Url {
        url: url.to_owned(),
        mime: None,
    }
}

/// Text of a string or of a list of text parts (`{"text": ...}` or `{"type": "text", ...}`).
fn texts_of(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_owned))
            .collect(),
        Value::Object(o) => o
            .get("parts")
            .map(texts_of)
            .or_else(|| {
                o.get("text")
                    .and_then(Value::as_str)
                    .map(|t| vec![t.to_owned()])
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn system_texts(source: &str, system: &Value) -> Result<Vec<String>, CoreError> {
    let ok = match (source, system) {
        ("openai_chat", _) => false,
        (_, Value::String(_)) => source != "bedrock_converse",
        ("gemini", Value::Object(_)) => true,
        ("anthropic" | "bedrock_converse", Value::Array(_)) => true,
        _ => false,
    };
    if !ok {
        return Err(bad_request(format!(
            "system: not a system {source} takes (a {})",
            match source {
                "openai_chat" => "system message in `messages`; openai_chat has no top-level one",
                "anthropic" => "string or a list of text blocks",
                "gemini" => "`{\"parts\": [...]}` content or a string",
                "bedrock_converse" => "list of `{\"text\": ...}` blocks",
                _ => "string",
            }
        )));
    }
    Ok(texts_of(system))
}

fn read_tools(source: &str, tools: &Value) -> Result<Vec<Tool>, CoreError> {
    let tool_error = |k: usize, what: &str| bad_request(format!("tools[{k}]: {what}"));
    let function = |name: Option<&Value>, description: Option<&Value>, schema: Option<&Value>| {
        Some(Tool::Function {
            name: name?.as_str()?.to_owned(),
            description: description.and_then(Value::as_str).map(str::to_owned),
            schema: schema.cloned().unwrap_or_else(empty_schema),
        })
    };
    let defined = match (source, tools) {
        ("bedrock_converse", Value::Object(config)) => list(get(config, "tools")),
        (_, Value::Array(items)) => items.as_slice(),
        _ => return Err(bad_request("tools must be a list of tool definitions")),
    };
    let mut out = Vec::new();
    for (k, t) in defined.iter().enumerate() {
        let o = t
            .as_object()
            .ok_or_else(|| tool_error(k, "must be an object"))?;
        let ty = get(o, "type").and_then(Value::as_str);
        let tool = match source {
            "openai_chat" => match (ty, get(o, "function").and_then(Value::as_object)) {
                (Some("function") | None, Some(f)) => {
                    function(get(f, "name"), get(f, "description"), get(f, "parameters"))
                }
                _ => Some(hosted(ty.unwrap_or("tool"))),
            },
            "openai_responses" => match ty {
                Some("function") => {
                    function(get(o, "name"), get(o, "description"), get(o, "parameters"))
                }
                other => Some(hosted(other.unwrap_or("tool"))),
            },
            "anthropic" => match ty {
                None | Some("custom") => function(
                    get(o, "name"),
                    get(o, "description"),
                    get(o, "input_schema"),
                ),
                Some(other) => Some(hosted(other)),
            },
            "gemini" => {
                let declarations = get2(o, "functionDeclarations", "function_declarations");
                if declarations.is_none() {
                    let what = o.keys().next().map_or("tool", String::as_str);
                    out.push(hosted(what));
                    continue;
                }
                for d in list(declarations) {
                    let d = d
                        .as_object()
                        .ok_or_else(|| tool_error(k, "a function declaration must be an object"))?;
                    let schema = get2(d, "parametersJsonSchema", "parameters_json_schema")
                        .or(get(d, "parameters"));
                    out.push(
                        function(get(d, "name"), get(d, "description"), schema)
                            .ok_or_else(|| tool_error(k, "a declaration needs a string `name`"))?,
                    );
                }
                continue;
            }
            "bedrock_converse" => match get(o, "toolSpec").and_then(Value::as_object) {
                Some(spec) => function(
                    get(spec, "name"),
                    get(spec, "description"),
                    get(spec, "inputSchema")
                        .and_then(Value::as_object)
                        .and_then(|s| get(s, "json")),
                ),
                None => Some(hosted(o.keys().next().map_or("tool", String::as_str))),
            },
            other => return Err(unknown(other)),
        };
        out.push(tool.ok_or_else(|| tool_error(k, "needs a string `name`"))?);
    }
    Ok(out)
}

fn hosted(what: &str) -> Tool {
    Tool::Hosted {
        what: what.to_owned(),
    }
}

pub(super) fn empty_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A text part, left out when empty (a provider's empty content carries nothing).
pub(super) fn push_text(parts: &mut Vec<Part>, text: &str) {
    if !text.is_empty() {
        parts.push(Part::Text(text.to_owned()));
    }
}
