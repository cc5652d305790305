//! Reading one Responses input item from JSON: the checks and the wording of ringbound's
//! Python adapter, so a malformed item is the same typed error naming the same index.

use serde_json::{Map, Value};
use std::sync::Arc;

pub(super) mod fast;

use super::{Family, Item, Kind};
use crate::count::image::image_size_from_data_url;
use crate::error::CoreError;
use crate::providers::json_kind;
use crate::view::{Detail, Image, Role, ToolCall};

type Obj = Map<String, Value>;

/// Files cost a token per three bytes of their payload: the provider prices them by pages or
/// duration, which the request does not state. Not a bound on the payload's own tokens: random
/// base64 tokenizes at about 1.5 characters a token in o200k_base.
pub const BYTES_PER_TOKEN_OPAQUE: usize = 3;

/// Items the model produced that carry their own result (hosted tools).
pub const HOSTED: [&str; 6] = [
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
];

/// Every item type ringbound reads, in the order its refusals list them.
pub fn supported() -> Vec<&'static str> {
    let mut out = vec!["message", "reasoning"];
    out.extend(Family::ALL.iter().map(|f| f.call()));
    out.extend(Family::ALL.iter().map(|f| f.output()));
    out.extend(HOSTED);
    out.extend(["compaction", "compaction_trigger"]);
    out
}

/// Python's `repr` of a JSON value, as the adapter's messages say it.
fn repr(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        other => other.to_string(),
    }
}

/// A key, `None` when absent or null (SDKs write null for absent keys).
fn get<'v>(obj: &'v Obj, key: &str) -> Option<&'v Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// Tokens of an opaque payload of `bytes` bytes.
pub fn opaque_tokens(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(BYTES_PER_TOKEN_OPAQUE)).unwrap_or(u32::MAX)
}

struct At {
    i: usize,
}

impl At {
    fn err(&self, reason: impl Into<String>) -> CoreError {
        CoreError::invalid(self.i, reason)
    }

    fn string<'v>(&self, obj: &'v Obj, key: &str, place: &str) -> Result<&'v str, CoreError> {
        self.optional(obj, key, place)?
            .ok_or_else(|| self.err(format!("missing `{place}{key}`")))
    }

    fn optional<'v>(
        &self,
        obj: &'v Obj,
        key: &str,
        place: &str,
    ) -> Result<Option<&'v str>, CoreError> {
        match get(obj, key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.err(format!(
                "`{place}{key}` must be a string, got {}",
                json_kind(other)
            ))),
        }
    }

    fn key(&self, obj: &Obj, key: &str) -> Result<String, CoreError> {
        let value = self.string(obj, key, "")?;
        if value.is_empty() {
            return Err(self.err(format!("`{key}` is empty")));
        }
        Ok(value.to_owned())
    }

    /// An `input_image` part: the image, sized from a data URL when it is one.
    fn image(&self, p: usize, part: &Obj, place: &str) -> Result<Image, CoreError> {
        let at = format!("{place}[{p}].");
        let url = self.optional(part, "image_url", &at)?;
        let file = self.optional(part, "file_id", &at)?;
        if url.is_none() && file.is_none() {
            return Err(self.err(format!(
                "{place}[{p}] is an input_image with neither `image_url` nor `file_id`"
            )));
        }
        let detail = match get(part, "detail") {
            None => Detail::Auto,
            Some(Value::String(d)) if d == "auto" => Detail::Auto,
            Some(Value::String(d)) if d == "low" => Detail::Low,
            Some(Value::String(d)) if d == "high" => Detail::High,
            Some(other) => {
                return Err(self.err(format!(
                    "{place}[{p}].detail must be one of low, high, auto, got {}",
                    repr(other)
                )))
            }
        };
        Ok(Image {
            detail,
            size: url.and_then(image_size_from_data_url),
        })
    }

    fn message(&self, obj: &Obj) -> Result<Item, CoreError> {
        let role = match get(obj, "role") {
            Some(Value::String(r)) => r.as_str(),
            other => {
                return Err(self.err(format!(
                    "`role` must be a string, got {}",
                    other.map_or("null", json_kind)
                )))
            }
        };
        let (role, kind) = match role {
            "user" => (Role::User, Kind::User),
            "assistant" => (Role::Assistant, Kind::Model),
            "system" => (Role::System, Kind::Instruction),
            "developer" => (Role::Developer, Kind::Instruction),
            other => {
                return Err(self.err(format!(
                    "unknown role '{other}' (expected one of user, assistant, system, developer)"
                )))
            }
        };
        let mut item = Item::new("message", kind);
        item.role = Some(role);
        let parts = match get(obj, "content") {
            Some(Value::String(s)) => {
                item.texts.push(s.as_str().into());
                return Ok(item);
            }
            Some(Value::Array(parts)) => parts,
            other => {
                return Err(self.err(format!(
                    "`content` must be a string or a list of parts, got {}",
                    other.map_or("null", json_kind)
                )))
            }
        };
        for (p, part) in parts.iter().enumerate() {
            let Value::Object(part) = part else {
                return Err(self.err(format!(
                    "content[{p}] must be an object, got {}",
                    json_kind(part)
                )));
            };
            let Some(Value::String(ty)) = get(part, "type") else {
                return Err(self.err(format!("content[{p}] has no string `type`")));
            };
            let at = format!("content[{p}].");
            match (role, ty.as_str()) {
                (Role::Assistant, "output_text")
                | (Role::User | Role::System | Role::Developer, "input_text") => {
                    item.texts.push(self.string(part, "text", &at)?.into())
                }
                (Role::Assistant, "refusal") => {
                    item.texts.push(self.string(part, "refusal", &at)?.into())
                }
                (Role::User, "input_image") => {
                    let image = self.image(p, part, "content")?;
                    item.cost.images.push(image);
                }
                (Role::User, "input_file") => {
                    item.cost.opaque_tokens =
                        item.cost.opaque_tokens.saturating_add(file_tokens(part))
                }
                _ => {
                    return Err(self.err(format!(
                        "content[{p}] has type '{ty}', which role '{}' cannot carry",
                        role.as_str()
                    )))
                }
            }
        }
        Ok(item)
    }

    /// A tool output: a string, or input_text / input_image / input_file parts.
    fn output(&self, value: &Value, key: &str, item: &mut Item) -> Result<(), CoreError> {
        let parts = match value {
            Value::String(s) => {
                item.texts.push(s.as_str().into());
                return Ok(());
            }
            Value::Array(parts) => parts,
            other => {
                return Err(self.err(format!(
                    "`{key}` must be a string or a list of parts, got {}",
                    json_kind(other)
                )))
            }
        };
        for (p, part) in parts.iter().enumerate() {
            let Value::Object(part) = part else {
                return Err(self.err(format!(
                    "{key}[{p}] must be an object, got {}",
                    json_kind(part)
                )));
            };
            match get(part, "type") {
                Some(Value::String(t)) if t == "input_text" => item.texts.push(
                    self.string(part, "text", &format!("{key}[{p}]."))?
                        .to_owned()
                        .into(),
                ),
                Some(Value::String(t)) if t == "input_image" => {
                    let image = self.image(p, part, key)?;
                    item.cost.images.push(image);
                }
                Some(Value::String(t)) if t == "input_file" => {
                    item.cost.opaque_tokens =
                        item.cost.opaque_tokens.saturating_add(file_tokens(part))
                }
                other => {
                    return Err(self.err(format!(
                        "{key}[{p}] has type {}; expected input_text, input_image, input_file",
                        other.map_or("None".to_owned(), repr)
                    )))
                }
            }
        }
        Ok(())
    }

    fn reasoning(&self, obj: &Obj) -> Result<Item, CoreError> {
        let mut item = Item::new("reasoning", Kind::Model);
        for (key, part_type) in [("summary", "summary_text"), ("content", "reasoning_text")] {
            let Some(parts) = get(obj, key) else {
                continue;
            };
            let Value::Array(parts) = parts else {
                return Err(self.err(format!("`{key}` must be a list, got {}", json_kind(parts))));
            };
            for (p, part) in parts.iter().enumerate() {
                let part = match part {
                    Value::Object(o) if matches!(get(o, "type"), Some(Value::String(t)) if t == part_type) => {
                        o
                    }
                    _ => return Err(self.err(format!("{key}[{p}] must be a {part_type} part"))),
                };
                item.texts.push(
                    self.string(part, "text", &format!("{key}[{p}]."))?
                        .to_owned()
                        .into(),
                );
            }
        }
        // Sealed reasoning is counted as the text it is sent as: its base64 tokenizes at about
        // 1.5 characters a token, more than the reasoning it seals can cost.
        if let Some(sealed) = self.optional(obj, "encrypted_content", "")? {
            item.texts.push(sealed.into());
        }
        Ok(item)
    }

    fn call(&self, obj: &Obj, family: Family) -> Result<Item, CoreError> {
        let key = self.key(obj, family.call_key())?;
        let mut item = Item::new(family.call(), Kind::Model);
        let (name, arguments) = match family {
            Family::Function | Family::McpApproval => (
                self.string(obj, "name", "")?.to_owned(),
                self.string(obj, "arguments", "")?.to_owned(),
            ),
            Family::Custom => (
                self.string(obj, "name", "")?.to_owned(),
                self.string(obj, "input", "")?.to_owned(),
            ),
            // Built-in tools: the tool's name, and what it is asked to do as compact JSON.
            Family::Computer => (
                "computer".to_owned(),
                self.action(obj, &["action", "actions"])?,
            ),
            Family::Shell => ("shell".to_owned(), self.action(obj, &["action"])?),
            Family::LocalShell => ("local_shell".to_owned(), self.action(obj, &["action"])?),
            Family::ApplyPatch => ("apply_patch".to_owned(), self.action(obj, &["operation"])?),
        };
        if family == Family::McpApproval {
            item.texts
                .push(self.string(obj, "server_label", "")?.into());
        }
        item.call = Some(ToolCall {
            id: key.as_str().into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        item.key = Some(key);
        item.family = Some(family);
        Ok(item)
    }

    /// What a built-in tool is asked to do: the first of `keys` present, as compact JSON.
    fn action(&self, obj: &Obj, keys: &[&str]) -> Result<String, CoreError> {
        keys.iter()
            .find_map(|k| get(obj, k))
            .map(Value::to_string)
            .ok_or_else(|| self.err(format!("missing `{}`", keys[0])))
    }

    fn answer(&self, obj: &Obj, family: Family) -> Result<Item, CoreError> {
        // The local shell output's key is `call_id`, as the API reads it; the SDK's type
        // names it `id`, so that one stands in when `call_id` is absent.
        let key = if family == Family::LocalShell && get(obj, "call_id").is_none() {
            self.key(obj, "id")?
        } else {
            self.key(obj, family.output_key())?
        };
        let mut item = Item::new(family.output(), Kind::Output);
        match family {
            Family::McpApproval => {
                let approve = match get(obj, "approve") {
                    Some(Value::Bool(b)) => *b,
                    other => {
                        return Err(self.err(format!(
                            "`approve` must be a boolean, got {}",
                            other.map_or("null", json_kind)
                        )))
                    }
                };
                let reason = self.optional(obj, "reason", "")?.filter(|r| !r.is_empty());
                let decision = if approve { "approved" } else { "denied" };
                item.texts.push(reason.unwrap_or(decision).into());
            }
            Family::Computer => {
                let shot = match get(obj, "output") {
                    Some(Value::Object(o)) => o,
                    other => {
                        return Err(self.err(format!(
                            "`output` must be a computer_screenshot object, got {}",
                            other.map_or("null", json_kind)
                        )))
                    }
                };
                let image = self.image(0, shot, "output")?;
                item.cost.images.push(image);
                if let Some(checks) = get(obj, "acknowledged_safety_checks") {
                    item.texts.push(checks.to_string().into());
                }
            }
            Family::Shell => self.shell_output(obj, &mut item)?,
            Family::ApplyPatch => {
                let status = self.string(obj, "status", "")?;
                item.is_error = status == "failed";
                let text = self.optional(obj, "output", "")?.unwrap_or(status);
                item.texts.push(text.into());
            }
            Family::Function | Family::Custom | Family::LocalShell => {
                let output = get(obj, "output").ok_or_else(|| self.err("missing `output`"))?;
                self.output(output, "output", &mut item)?;
            }
        }
        item.key = Some(key);
        item.family = Some(family);
        Ok(item)
    }

    /// A shell call's output chunks: stdout and stderr read, a non-zero exit or a timeout
    /// a failure.
    fn shell_output(&self, obj: &Obj, item: &mut Item) -> Result<(), CoreError> {
        let chunks = match get(obj, "output") {
            Some(Value::Array(c)) => c,
            other => {
                return Err(self.err(format!(
                    "`output` must be a list of output chunks, got {}",
                    other.map_or("null", json_kind)
                )))
            }
        };
        for (c, chunk) in chunks.iter().enumerate() {
            let Value::Object(chunk) = chunk else {
                return Err(self.err(format!(
                    "output[{c}] must be an object, got {}",
                    json_kind(chunk)
                )));
            };
            for key in ["stdout", "stderr"] {
                let text = self.string(chunk, key, &format!("output[{c}]."))?;
                if !text.is_empty() {
                    item.texts.push(text.into());
                }
            }
            if let Some(Value::Object(outcome)) = get(chunk, "outcome") {
                let failed = match get(outcome, "type") {
                    Some(Value::String(t)) if t == "timeout" => true,
                    _ => {
                        get(outcome, "exit_code")
                            .and_then(Value::as_i64)
                            .unwrap_or(0)
                            != 0
                    }
                };
                item.is_error |= failed;
            }
        }
        Ok(())
    }

    fn hosted(&self, obj: &Obj, ty: &'static str) -> Result<Item, CoreError> {
        let mut item = Item::new(ty, Kind::Model);
        if ty == "mcp_call" {
            let key = self.string(obj, "id", "")?.to_owned();
            let name = self.string(obj, "name", "")?.to_owned();
            let arguments = self.string(obj, "arguments", "")?.to_owned();
            item.call = Some(ToolCall {
                id: key.as_str().into(),
                name: name.into(),
                arguments: arguments.into(),
            });
            item.key = Some(key);
            let error = get(obj, "error");
            let mut lines = Vec::new();
            // An error first, so the result reads as a failure.
            if let Some(e) = error {
                lines.push(format!("Error: {}", as_text(e)));
                item.is_error = true;
            }
            if let Some(o) = get(obj, "output") {
                lines.push(as_text(o));
            }
            item.result = Some(lines.join("\n"));
            if let Some(label) = get(obj, "server_label") {
                item.texts.push(as_text(label).into());
            }
            return Ok(item);
        }
        let mut body = obj.clone();
        body.retain(|k, v| !v.is_null() && k != "result");
        item.texts.push(Value::Object(body).to_string().into());
        if ty == "image_generation_call" && get(obj, "result").is_some() {
            // The generated image, as the model reads it back.
            item.cost.images.push(Image {
                detail: Detail::High,
                size: None,
            });
        }
        Ok(item)
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn file_tokens(part: &Obj) -> u32 {
    opaque_tokens(Value::Object(part.clone()).to_string().len())
}

/// Reads input item `i`.
pub fn item(i: usize, raw: &[u8]) -> Result<Item, CoreError> {
    match fast::item(raw) {
        Some(item) => Ok(item),
        None => general(i, raw),
    }
}

/// Reads any item, or names what is wrong with it.
pub(super) fn general(i: usize, raw: &[u8]) -> Result<Item, CoreError> {
    let at = At { i };
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| at.err(format!("not valid JSON ({e})")))?;
    let obj = match &value {
        Value::Object(o) => o,
        other => {
            return Err(at.err(format!(
                "an input item must be an object, got {}",
                json_kind(other)
            )))
        }
    };
    let ty = match get(obj, "type") {
        None if !obj.contains_key("role") => {
            return Err(at.err("missing `type` (and no `role`: not a message)"))
        }
        None => "message",
        Some(Value::String(t)) => t.as_str(),
        Some(other) => {
            return Err(at.err(format!("`type` must be a string, got {}", json_kind(other))))
        }
    };
    let mut item = match ty {
        "message" => at.message(obj)?,
        "reasoning" => at.reasoning(obj)?,
        "compaction" => {
            let sealed = at.string(obj, "encrypted_content", "")?;
            let mut item = Item::new("compaction", Kind::Compaction);
            item.texts.push(sealed.into());
            item
        }
        "compaction_trigger" => Item::new("compaction_trigger", Kind::Trigger),
        "item_reference" => {
            return Err(at.err(
                "item type 'item_reference' is not supported: it names a stored item whose \
                 content and pairing ringbound cannot see; send the item itself",
            ))
        }
        other => {
            if let Some(family) = Family::by_call(other) {
                at.call(obj, family)?
            } else if let Some(family) = Family::by_output(other) {
                at.answer(obj, family)?
            } else if let Some(&hosted) = HOSTED.iter().find(|h| **h == other) {
                at.hosted(obj, hosted)?
            } else {
                return Err(at.err(format!(
                    "item type '{other}' is not supported (supported: {}); ringbound cannot \
                     count or pair what it cannot read",
                    supported().join(", ")
                )));
            }
        }
    };
    // A local shell output named by `id` refers to its call, not to an item of its own.
    let own_id = !(item.ty == "local_shell_call_output" && get(obj, "call_id").is_none());
    if own_id {
        item.item_id = at.optional(obj, "id", "")?.map(str::to_owned);
    }
    Ok(item)
}

/// The API's refusal of a `compaction_trigger` anywhere but last, in its words.
pub const TRIGGER_NOT_LAST: &str = "The 'compaction_trigger' item must be the final input item.";
/// A trigger is a request, not an item the API stored: it takes no `id`.
pub const TRIGGER_WITH_ID: &str =
    "The 'compaction_trigger' item may not carry an 'id': it is not an item the API stored.";

/// The API compacts on a `compaction_trigger` only as the final input item, one without an `id`.
pub fn check_trigger_last(items: &[Arc<Item>]) -> Result<(), CoreError> {
    match items.iter().position(|it| it.kind == Kind::Trigger) {
        Some(i) if i + 1 != items.len() => Err(CoreError::invalid(i, TRIGGER_NOT_LAST)),
        Some(i) if items[i].item_id.is_some() => Err(CoreError::invalid(i, TRIGGER_WITH_ID)),
        _ => Ok(()),
    }
}
