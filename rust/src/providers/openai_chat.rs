//! OpenAI Chat Completions messages → canonical view. Strict about shape (a wrong type is a
//! typed error naming the message), lenient only where the API itself is (`null` for absent).

use serde_json::{Map, Value};

use crate::count::image::image_size_from_data_url;
use crate::error::CoreError;
use crate::view::{Detail, Image, Message, Role, ToolCall};

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

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
            format!("`{key}` must be a string, got {}", type_name(other)),
        )),
    }
}

fn parse_role(i: usize, obj: &Map<String, Value>) -> Result<Role, CoreError> {
    let role = match obj.get("role") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(CoreError::invalid(
                i,
                format!("`role` must be a string, got {}", type_name(other)),
            ))
        }
        None => return Err(CoreError::invalid(i, "missing `role`")),
    };
    match role {
        "system" => Ok(Role::System),
        "developer" => Ok(Role::Developer),
        "user" => Ok(Role::User),
        "assistant" => Ok(Role::Assistant),
        "tool" => Ok(Role::Tool),
        "function" => Err(CoreError::invalid(
            i,
            "the legacy role 'function' is not supported: send calls as `tool_calls` and \
             results as role 'tool'",
        )),
        other => Err(CoreError::invalid(
            i,
            format!(
                "unknown role '{other}' (expected one of system, developer, user, assistant, tool)"
            ),
        )),
    }
}

/// Parts without a published token formula (audio, files) are counted as one token per
/// three bytes of their payload: base64 never packs denser than that in either encoding, so
/// the estimate errs on the side of the budget.
const BYTES_PER_TOKEN_OPAQUE: usize = 3;

fn parse_content(
    i: usize,
    role: Role,
    content: &Value,
    msg: &mut Message,
) -> Result<(), CoreError> {
    match content {
        Value::String(s) => msg.texts.push(s.clone()),
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
                    type_name(other)
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
            format!("content[{p}] must be an object, got {}", type_name(part)),
        ));
    };
    let kind = match obj.get("type") {
        Some(Value::String(s)) => s.as_str(),
        _ => {
            return Err(CoreError::invalid(
                i,
                format!("content[{p}] has no string `type`"),
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
                    type_name(other)
                ),
            )),
            None => Err(CoreError::invalid(
                i,
                format!("content[{p}] has no `{key}`"),
            )),
        }
    };
    match kind {
        "text" => msg.texts.push(field_str("text")?.to_owned()),
        "refusal" => msg.texts.push(field_str("refusal")?.to_owned()),
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
                    "content[{p}] has type '{other}', which role '{}' cannot carry",
                    role.as_str()
                ),
            ))
        }
    }
    Ok(())
}

fn parse_tool_call(i: usize, c: usize, call: &Value) -> Result<ToolCall, CoreError> {
    let Value::Object(obj) = call else {
        return Err(CoreError::invalid(
            i,
            format!("tool_calls[{c}] must be an object, got {}", type_name(call)),
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
                    type_name(other)
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
                    type_name(other)
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
                    type_name(other)
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
        id,
        name,
        arguments,
    })
}

/// Chat Completions has no error flag on tool results; these openings are how tool runtimes
/// (and the real sessions in the corpus) report failures.
fn looks_like_error(texts: &[String]) -> bool {
    let Some(first) = texts.first() else {
        return false;
    };
    let head: String = first
        .trim_start()
        .chars()
        .take(40)
        .collect::<String>()
        .to_lowercase();
    head.starts_with("error")
        || head.starts_with("traceback (most recent call last)")
        || head.starts_with("exception")
}

/// Parses one message object.
pub fn parse_message(i: usize, value: &Value, bytes: usize) -> Result<Message, CoreError> {
    let Value::Object(obj) = value else {
        return Err(CoreError::invalid(
            i,
            format!("a message must be an object, got {}", type_name(value)),
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
        msg.texts.push(refusal.to_owned());
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
                format!("`tool_calls` must be a list, got {}", type_name(other)),
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
                    format!("`tool_call_id` must be a string, got {}", type_name(other)),
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
