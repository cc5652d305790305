//! A canonical message read from its JSON. The canonical view is OpenAI Chat's message shape,
//! so this is that format's reader, strict about shape (a wrong type is a typed error naming
//! the message) and lenient only where the API itself is (`null` for absent). The core reads
//! cached and re-read messages with it, and the `openai_chat` provider reads its items with it.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::json_kind;
use crate::count::image::image_size_from_data_url;
use crate::error::CoreError;
use crate::view::{Detail, Image, Message, Role, Text, ToolCall};

/// A key that may be missing or `null` (several real SDKs write `null` for absent keys).
fn present<'v>(obj: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

fn optional_str<'v>(
    i: usize,
    obj: &'v Map<String, Value>,
    key: &str,
) -> Result<Option<&'v str>, CoreError> {
    match present(obj, key) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(CoreError::invalid(
            i,
            format!("`{key}` must be a string, got {}", json_kind(other)),
        )),
    }
}

fn parse_role(i: usize, obj: &Map<String, Value>) -> Result<Role, CoreError> {
    let role = match obj.get("role") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!("`role` must be a string, got {}", json_kind(other)),
            ))
        }
        None => return Err(CoreError::invalid(i, "missing `role`")),
    };
    match role_named(role) {
        Some(role) => Ok(role),
        None if role == "model" => Err(CoreError::invalid(
            i,
            "unknown role 'model' (expected one of system, developer, user, assistant, tool; \
             'model' is Gemini's: pass provider=\"gemini\")",
        )),
        None if role == "function" => Err(CoreError::invalid(
            i,
            "the legacy role 'function' is not supported: send calls as `tool_calls` and \
             results as role 'tool'",
        )),
        None => Err(CoreError::invalid(
            i,
            format!(
                "unknown role '{role}' (expected one of system, developer, user, assistant, tool)"
            ),
        )),
    }
}

/// The role a Chat Completions message names, if it is one ringbound reads.
fn role_named(name: &str) -> Option<Role> {
    Some(match name {
        "system" => Role::System,
        "developer" => Role::Developer,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => return None,
    })
}

/// Parts without a published token formula (audio, files) are counted as one token per
/// three bytes of their payload: the provider prices them by duration or pages, which the
/// request does not state. Not a bound on the payload's own tokens (random base64 tokenizes at
/// about 1.5 characters a token in o200k_base).
const BYTES_PER_TOKEN_OPAQUE: usize = 3;

fn parse_content(
    i: usize,
    role: Role,
    content: &Value,
    msg: &mut Message,
) -> Result<(), CoreError> {
    match content {
        Value::String(s) => msg.texts.push(s.as_str().into()),
        Value::Array(parts) => {
            for (p, part) in parts.iter().enumerate() {
                parse_part(i, p, role, part, msg)?;
            }
        }
        other => {
            return Err(CoreError::invalid(
                i,
                format!(
                    "`content` must be a string or a list of parts, got {}",
                    json_kind(other)
                ),
            ))
        }
    }
    Ok(())
}

fn parse_part(
    i: usize,
    p: usize,
    role: Role,
    part: &Value,
    msg: &mut Message,
) -> Result<(), CoreError> {
    let Value::Object(obj) = part else {
        return Err(CoreError::invalid(
            i,
            format!("content[{p}] must be an object, got {}", json_kind(part)),
        ));
    };
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(CoreError::invalid(
                i,
                format!("content[{p}] has no string `type`{}", untyped_hint(obj)),
            ))
        }
    };
    let field_str = |key: &str| -> Result<&str, CoreError> {
        match obj.get(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(CoreError::invalid(
                i,
                format!(
                    "content[{p}].{key} must be a string, got {}",
                    json_kind(other)
                ),
            )),
            None => Err(CoreError::invalid(
                i,
                format!("content[{p}] has no `{key}`"),
            )),
        }
    };
    match kind {
        "text" => msg.texts.push(field_str("text")?.into()),
        "refusal" => msg.texts.push(field_str("refusal")?.into()),
        "image_url" if role == Role::User => {
            let Some(Value::Object(image)) = obj.get("image_url") else {
                return Err(CoreError::invalid(
                    i,
                    format!("content[{p}].image_url must be an object with a `url`"),
                ));
            };
            let url = match image.get("url") {
                Some(Value::String(u)) => u.as_str(),
                _ => {
                    return Err(CoreError::invalid(
                        i,
                        format!("content[{p}].image_url.url must be a string"),
                    ))
                }
            };
            let detail = match present(image, "detail") {
                None => Detail::Auto,
                Some(Value::String(d)) if d == "auto" => Detail::Auto,
                Some(Value::String(d)) if d == "low" => Detail::Low,
                Some(Value::String(d)) if d == "high" => Detail::High,
                Some(other) => {
                    return Err(CoreError::invalid(
                        i,
                        format!(
                        "content[{p}].image_url.detail must be one of auto, low, high, got {other}"
                    ),
                    ))
                }
            };
            msg.images.push(Image {
                detail,
                size: image_size_from_data_url(url),
            });
        }
        "input_audio" | "file" if role == Role::User => {
            let payload = obj.get(kind).map(|v| v.to_string().len()).unwrap_or(0);
            let tokens = payload.div_ceil(BYTES_PER_TOKEN_OPAQUE);
            msg.other_part_tokens = msg
                .other_part_tokens
                .saturating_add(u32::try_from(tokens).unwrap_or(u32::MAX));
        }
        other => {
            return Err(CoreError::invalid(
                i,
                format!(
                    "content[{p}] has type '{other}', which role '{}' cannot carry{}",
                    role.as_str(),
                    part_hint(other)
                ),
            ))
        }
    }
    Ok(())
}

/// Which other provider a part type belongs to, said after the error: the usual cause of a
/// part OpenAI Chat cannot carry is a request in another provider's format.
fn part_hint(kind: &str) -> &'static str {
    match kind {
        "tool_use" | "tool_result" | "thinking" | "redacted_thinking" | "document"
        | "search_result" | "compaction" => {
            " (it looks like an Anthropic Messages block: pass provider=\"anthropic\")"
        }
        "input_text"
        | "output_text"
        | "input_image"
        | "input_file"
        | "function_call"
        | "function_call_output"
        | "reasoning" => {
            " (it looks like an OpenAI Responses item: pass provider=\"openai_responses\")"
        }
        _ => "",
    }
}

/// The same for a part without a `type`: Gemini parts and Bedrock Converse blocks have none.
fn untyped_hint(part: &Map<String, Value>) -> &'static str {
    if [
        "functionCall",
        "functionResponse",
        "inlineData",
        "thoughtSignature",
    ]
    .iter()
    .any(|k| part.contains_key(*k))
    {
        " (it looks like a Gemini part: pass provider=\"gemini\")"
    } else if ["toolUse", "toolResult", "reasoningContent"]
        .iter()
        .any(|k| part.contains_key(*k))
    {
        " (it looks like a Bedrock Converse block: pass provider=\"bedrock_converse\")"
    } else {
        ""
    }
}

fn parse_tool_call(i: usize, c: usize, call: &Value) -> Result<ToolCall, CoreError> {
    let Value::Object(obj) = call else {
        return Err(CoreError::invalid(
            i,
            format!("tool_calls[{c}] must be an object, got {}", json_kind(call)),
        ));
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => {
            return Err(CoreError::invalid(
                i,
                format!("tool_calls[{c}].id is empty"),
            ))
        }
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!(
                    "tool_calls[{c}].id must be a string, got {}",
                    json_kind(other)
                ),
            ))
        }
        None => {
            return Err(CoreError::invalid(
                i,
                format!("tool_calls[{c}] has no `id`"),
            ))
        }
    };
    let kind = match present(obj, "type") {
        None => "function",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!(
                    "tool_calls[{c}].type must be a string, got {}",
                    json_kind(other)
                ),
            ))
        }
    };
    // Chat Completions has two call shapes: `function` (JSON arguments) and `custom`
    // (free-form input); both pair with a `tool` result by id.
    let (body_key, args_key) = match kind {
        "function" => ("function", "arguments"),
        "custom" => ("custom", "input"),
        other => {
            return Err(CoreError::invalid(
                i,
                format!("tool_calls[{c}].type '{other}' is not one of function, custom"),
            ))
        }
    };
    let Some(Value::Object(body)) = obj.get(body_key) else {
        return Err(CoreError::invalid(
            i,
            format!("tool_calls[{c}].{body_key} must be an object"),
        ));
    };
    let name = match body.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(CoreError::invalid(
                i,
                format!("tool_calls[{c}].{body_key}.name must be a string"),
            ))
        }
    };
    let arguments = match body.get(args_key) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!(
                    "tool_calls[{c}].{body_key}.{args_key} must be a JSON-encoded string, got {}",
                    json_kind(other)
                ),
            ))
        }
        None => {
            return Err(CoreError::invalid(
                i,
                format!("tool_calls[{c}].{body_key} has no `{args_key}`"),
            ))
        }
    };
    Ok(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    })
}

/// Chat Completions has no error flag on tool results; these openings are how tool runtimes
/// (and the real sessions in the corpus) report failures.
fn looks_like_error(texts: &[Text]) -> bool {
    let Some(first) = texts.first() else {
        return false;
    };
    crate::view::opens_like_an_error(first)
}

/// Parses one message object.
pub fn parse_message(i: usize, value: &Value, bytes: usize) -> Result<Message, CoreError> {
    let Value::Object(obj) = value else {
        return Err(CoreError::invalid(
            i,
            format!("a message must be an object, got {}", json_kind(value)),
        ));
    };
    let role = parse_role(i, obj)?;
    let mut msg = Message::text(role, "");
    msg.texts.clear();
    msg.bytes = bytes;
    msg.name = optional_str(i, obj, "name")?.map(str::to_owned);
    if present(obj, "function_call").is_some() {
        return Err(CoreError::invalid(
            i,
            "the legacy `function_call` is not supported: send calls as `tool_calls`",
        ));
    }
    match present(obj, "content") {
        Some(content) => parse_content(i, role, content, &mut msg)?,
        None if role == Role::Assistant => {}
        None => return Err(CoreError::invalid(i, "missing `content`")),
    }
    if let Some(refusal) = optional_str(i, obj, "refusal")? {
        msg.texts.push(refusal.into());
    }
    match present(obj, "tool_calls") {
        None => {}
        Some(_) if role != Role::Assistant => {
            return Err(CoreError::invalid(
                i,
                format!("role '{}' cannot carry `tool_calls`", role.as_str()),
            ))
        }
        Some(Value::Array(calls)) if calls.is_empty() => {
            return Err(CoreError::invalid(
                i,
                "`tool_calls` is an empty list (OpenAI rejects an empty array; omit the key)",
            ))
        }
        Some(Value::Array(calls)) => {
            msg.tool_calls = calls
                .iter()
                .enumerate()
                .map(|(c, call)| parse_tool_call(i, c, call))
                .collect::<Result<_, _>>()?;
        }
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!("`tool_calls` must be a list, got {}", json_kind(other)),
            ))
        }
    }
    if role == Role::Tool {
        match obj.get("tool_call_id") {
            Some(Value::String(id)) if !id.is_empty() => msg.tool_call_id = Some(id.clone()),
            Some(Value::String(_)) => return Err(CoreError::invalid(i, "`tool_call_id` is empty")),
            Some(other) => {
                return Err(CoreError::invalid(
                    i,
                    format!("`tool_call_id` must be a string, got {}", json_kind(other)),
                ))
            }
            None => {
                return Err(CoreError::invalid(
                    i,
                    "a tool message needs `tool_call_id` naming the call it answers",
                ))
            }
        }
        msg.is_error = looks_like_error(&msg.texts);
    }
    Ok(msg)
}

/// A message of the plain shape nearly every agent history is made of: a role, string (or
/// absent) content, an optional name and refusal, function calls, the id a result answers,
/// nothing else. Read straight into borrowed text, it skips building a `Value` (a map and a
/// copy of every string), most of what parsing a cold history cost. Any other key sends the
/// message to `parse_message`, which ignores it but still parses it, within serde_json's
/// nesting limit: a value no key reads is refused all the same when it nests too deep.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Plain<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<PlainCall<'a>>>,
    #[serde(borrow, default)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
    /// Written as `null` by several SDKs; anything else is not read here (`parse_message`
    /// refuses it).
    #[serde(default)]
    #[allow(dead_code)]
    function_call: Option<()>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainCall<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    function: PlainFunction<'a>,
    /// The call's place in a streamed message, kept by SDKs that assemble the stream.
    #[serde(default)]
    #[allow(dead_code)]
    index: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlainFunction<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Cow<'a, str>,
}

/// The message `parse_message` makes of `raw` when it has the plain shape and is valid;
/// `None` for anything else (other keys, parts, a wrong type, anything `parse_message` would
/// refuse), which `parse_message` then reads, and names the error if there is one.
fn parse_plain(raw: &[u8]) -> Option<Message> {
    let plain: Plain = serde_json::from_slice(raw).ok()?;
    let role = role_named(&plain.role)?;
    let mut msg = Message::text(role, "");
    msg.texts.clear();
    msg.bytes = raw.len();
    msg.name = plain.name.map(Cow::into_owned);
    match plain.content {
        Some(text) => msg.texts.push(Text::from(&*text)),
        None if role == Role::Assistant => {}
        None => return None,
    }
    if let Some(refusal) = plain.refusal {
        msg.texts.push(Text::from(&*refusal));
    }
    if let Some(calls) = plain.tool_calls {
        if role != Role::Assistant || calls.is_empty() {
            return None;
        }
        for call in calls {
            if call.id.is_empty() || call.kind.as_deref().is_some_and(|k| k != "function") {
                return None;
            }
            msg.tool_calls.push(ToolCall {
                id: Text::from(&*call.id),
                name: Text::from(&*call.function.name),
                arguments: Text::from(&*call.function.arguments),
            });
        }
    }
    if role == Role::Tool {
        msg.tool_call_id = Some(plain.tool_call_id.filter(|id| !id.is_empty())?.into_owned());
        msg.is_error = looks_like_error(&msg.texts);
    }
    Some(msg)
}

/// Parses one serialized message (message `i` of its request).
pub fn parse_raw(i: usize, raw: &[u8]) -> Result<Message, CoreError> {
    if let Some(msg) = parse_plain(raw) {
        return Ok(msg);
    }
    let value: Value = serde_json::from_slice(raw)
        .map_err(|e| CoreError::invalid(i, format!("not valid JSON ({e})")))?;
    parse_message(i, &value, raw.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// What `parse_message` makes of the bytes (the reading `parse_raw` must equal).
    fn by_value(raw: &[u8]) -> Result<Message, String> {
        let value: Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
        parse_message(0, &value, raw.len()).map_err(|e| e.to_string())
    }

    /// Mostly one of `usual`, sometimes absent, sometimes one of `odd`: most messages drawn
    /// have the plain shape, and each key is sometimes what sends them the general way.
    fn field(usual: Vec<Value>, odd: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
        prop_oneof![
            6 => prop::sample::select(usual).prop_map(Some),
            1 => Just(None),
            1 => prop::sample::select(odd).prop_map(Some),
        ]
    }

    fn call() -> impl Strategy<Value = Value> {
        (
            field(vec![json!("c1"), json!("c\"2")], vec![json!(""), json!(5)]),
            field(vec![json!("function")], vec![json!("custom"), Value::Null]),
            prop_oneof![
                6 => Just(json!({"name": "read", "arguments": "{\"path\": \"a\\nb\"}"})),
                1 => Just(json!({"name": "read"})),
                1 => Just(json!({"name": "read", "arguments": "{}", "extra": 1})),
                1 => Just(json!({"name": "read", "input": "x"})),
                1 => Just(json!({"name": 3, "arguments": "{}"})),
            ],
            field(vec![json!(0), json!(3)], vec![json!([[0]]), json!("0")]),
        )
            .prop_map(|(id, kind, function, index)| {
                let mut obj = Map::new();
                for (k, v) in [("id", id), ("type", kind), ("index", index)] {
                    if let Some(v) = v {
                        obj.insert(k.into(), v);
                    }
                }
                obj.insert("function".into(), function);
                Value::Object(obj)
            })
    }

    fn message() -> impl Strategy<Value = Value> {
        let texts = vec![
            json!("plain"),
            json!("Error: escaped \"quotes\"\n\ttabs é ✓"),
            json!("  traceback (most recent call last): x"),
            json!(""),
        ];
        let roles = ["system", "developer", "user", "assistant", "tool"].map(|r| json!(r));
        (
            field(roles.to_vec(), vec![json!("function"), json!("bogus"), json!(5)]),
            field(
                texts,
                vec![Value::Null, json!([{"type": "text", "text": "part"}]), json!(7)],
            ),
            prop_oneof![4 => Just(None), 1 => field(vec![json!("bob")], vec![Value::Null, json!(3)])],
            prop_oneof![
                3 => Just(None),
                3 => prop::collection::vec(call(), 1..3).prop_map(|c| Some(Value::Array(c))),
                1 => prop::sample::select(vec![Value::Null, json!([]), json!("x")]).prop_map(Some),
            ],
            field(vec![json!("c1")], vec![json!(""), Value::Null, json!(9)]),
            prop_oneof![
                6 => Just(None),
                1 => prop::sample::select(vec![
                    json!({"refusal": "no"}),
                    json!({"function_call": {"name": "f", "arguments": "{}"}}),
                    json!({"function_call": null}),
                    json!({"refusal": 4}),
                    json!({"audio": null}),
                    json!({"annotations": [1, {"a": "b"}]}),
                ]).prop_map(Some),
            ],
        )
            .prop_map(|(role, content, name, calls, call_id, extra)| {
                let mut obj = Map::new();
                for (k, v) in [
                    ("role", role),
                    ("content", content),
                    ("name", name),
                    ("tool_calls", calls),
                    ("tool_call_id", call_id),
                ] {
                    if let Some(v) = v {
                        obj.insert(k.into(), v);
                    }
                }
                if let Some(Value::Object(extra)) = extra {
                    obj.extend(extra);
                }
                Value::Object(obj)
            })
    }

    #[test]
    fn another_providers_format_is_named_in_the_error() {
        let error = |raw: &str| parse_raw(3, raw.as_bytes()).unwrap_err().to_string();
        let anthropic = r#"{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}"#;
        assert_eq!(
            error(anthropic),
            "messages[3]: content[0] has type 'tool_use', which role 'assistant' cannot carry \
             (it looks like an Anthropic Messages block: pass provider=\"anthropic\")"
        );
        let responses = r#"{"role":"user","content":[{"type":"input_text","text":"hi"}]}"#;
        assert!(error(responses).ends_with("pass provider=\"openai_responses\")"));
        let bedrock = r#"{"role":"user","content":[{"toolResult":{"toolUseId":"t"}}]}"#;
        assert!(error(bedrock).ends_with("pass provider=\"bedrock_converse\")"));
        let gemini = r#"{"role":"model","content":"hi"}"#;
        assert!(error(gemini).ends_with("pass provider=\"gemini\")"));
        let odd = r#"{"role":"user","content":[{"type":"video","url":"x"}]}"#;
        assert!(error(odd).ends_with("which role 'user' cannot carry"));
    }

    proptest! {
        /// The plain-shape reading makes exactly the message (or the error) the general
        /// reading makes, whatever the keys, types and escapes.
        #[test]
        fn reading_plain_messages_directly_changes_nothing(msg in message()) {
            let raw = serde_json::to_vec(&msg).unwrap();
            prop_assert_eq!(parse_raw(0, &raw).map_err(|e| e.to_string()), by_value(&raw));
        }
    }

    #[test]
    fn plain_messages_take_the_direct_reading() {
        for raw in [
            r#"{"role":"user","content":"hi \"there\""}"#,
            r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}"#,
            r#"{"role":"tool","tool_call_id":"c1","content":"Error: no"}"#,
        ] {
            assert!(parse_plain(raw.as_bytes()).is_some(), "{raw}");
        }
        let deep = format!(
            r#"{{"role":"user","content":"x","meta":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(
            parse_raw(0, deep.as_bytes()).is_err(),
            "too deep, as serde_json has it"
        );
        let duplicate = br#"{"role":"user","content":"a","content":"b"}"#;
        assert!(parse_plain(duplicate).is_none());
        assert_eq!(
            crate::view::strs(&parse_raw(0, duplicate).unwrap().texts),
            ["b"]
        );
    }
}
