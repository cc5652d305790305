//! Reading one Bedrock Converse message from JSON (media bytes as base64 text, as the REST API
//! and the SDKs' JSON carry them), with the checks and the wording of ringbound's Python
//! adapter, so a malformed message is the same typed error naming the same index.

use base64::Engine;
use serde_json::{Map, Value};

use super::{BedrockMessage, Parts, ToolResult, ToolUse, EMPTY_CONTENT};
use crate::count::image::image_size_from_base64;
use crate::error::CoreError;
use crate::providers::anthropic::parse::{pdf, BASE64};
use crate::providers::pynames::{repr, repr_str, type_name};
use crate::view::{Detail, Image, Role};

type Obj = Map<String, Value>;

/// Blocks a user message may carry (the Python adapter reads this table:
/// `ringbound._core.BEDROCK_USER_BLOCKS`).
pub(crate) const USER_BLOCKS: [&str; 9] = [
    "text",
    "image",
    "document",
    "video",
    "audio",
    "guardContent",
    "searchResult",
    "toolResult",
    "cachePoint",
];
/// Blocks an assistant message may carry (`ringbound._core.BEDROCK_ASSISTANT_BLOCKS`).
pub(crate) const ASSISTANT_BLOCKS: [&str; 5] = [
    "text",
    "reasoningContent",
    "toolUse",
    "citationsContent",
    "cachePoint",
];
/// Blocks a `toolResult` may carry (`ringbound._core.BEDROCK_RESULT_BLOCKS`).
pub(crate) const RESULT_BLOCKS: [&str; 6] =
    ["text", "json", "image", "document", "video", "searchResult"];
/// Bedrock's refusal of Anthropic's compaction, in its words: a history an Anthropic
/// compaction summarized cannot be sent to Converse as it is.
pub const NO_COMPACTION: &str =
    "The compact beta feature is not currently supported on the Converse and ConverseStream APIs.";

/// An Anthropic `compaction` block, in Anthropic's shape or as a Converse member.
fn is_compaction(block: &Value) -> bool {
    block.as_object().is_some_and(|o| {
        o.contains_key("compaction") || o.get("type").and_then(Value::as_str) == Some("compaction")
    })
}

/// Document formats whose bytes are text the model reads as such.
const TEXT_FORMATS: [&str; 4] = ["txt", "md", "csv", "html"];
/// Base64 characters per token of media with no published price here (video, audio, office
/// documents): the size of their payload, as the core prices an opaque part.
const BASE64_CHARS_PER_TOKEN: usize = 3;

/// Python's name for the type of a value (Python's adapter said `NoneType` for null).
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        other => type_name(other),
    }
}

struct At {
    i: usize,
}

impl At {
    fn err(&self, reason: impl Into<String>) -> CoreError {
        CoreError::invalid(self.i, reason)
    }

    fn obj<'v>(&self, v: Option<&'v Value>, place: &str) -> Result<&'v Obj, CoreError> {
        match v {
            Some(Value::Object(o)) => Ok(o),
            other => Err(self.err(format!(
                "{place} must be an object, got {}",
                other.map_or("NoneType", kind_of)
            ))),
        }
    }

    fn string<'v>(
        &self,
        v: Option<&'v Value>,
        place: &str,
        empty: bool,
    ) -> Result<&'v str, CoreError> {
        match v {
            Some(Value::String(s)) if empty || !s.is_empty() => Ok(s),
            Some(Value::String(_)) => Err(self.err(format!("{place} is empty"))),
            other => Err(self.err(format!(
                "{place} must be a string, got {}",
                other.map_or("NoneType", kind_of)
            ))),
        }
    }

    fn list<'v>(&self, v: Option<&'v Value>, place: &str) -> Result<&'v [Value], CoreError> {
        match v {
            Some(Value::Array(a)) => Ok(a),
            other => Err(self.err(format!(
                "{place} must be a list, got {}",
                other.map_or("NoneType", kind_of)
            ))),
        }
    }

    /// The one member a union block sets (members set to null count as absent).
    fn member<'v>(
        &self,
        v: Option<&'v Value>,
        place: &str,
    ) -> Result<(&'v str, &'v Value), CoreError> {
        let block = self.obj(v, place)?;
        let mut keys: Vec<&String> = block.keys().filter(|k| !block[*k].is_null()).collect();
        if keys.len() != 1 {
            keys.sort();
            let names: Vec<String> = keys.iter().map(|k| repr_str(k)).collect();
            return Err(self.err(format!(
                "{place} must set exactly one block type, got [{}]",
                names.join(", ")
            )));
        }
        Ok((keys[0].as_str(), &block[keys[0].as_str()]))
    }

    fn image(&self, v: &Value, place: &str, parts: &mut Parts) -> Result<(), CoreError> {
        let image = self.obj(Some(v), place)?;
        self.string(image.get("format"), &format!("{place}.format"), false)?;
        let (kind, source) = self.member(image.get("source"), &format!("{place}.source"))?;
        let size = match kind {
            "bytes" => image_size_from_base64(self.string(
                Some(source),
                &format!("{place}.source.bytes"),
                true,
            )?),
            "s3Location" => {
                let location = self.obj(Some(source), &format!("{place}.source.s3Location"))?;
                self.string(location.get("uri"), &format!("{place}.uri"), true)?;
                None
            }
            other => {
                return Err(self.err(format!(
                    "{place}.source must be bytes or s3Location, got {other}"
                )))
            }
        };
        parts.images.push(Image {
            detail: Detail::Auto,
            size,
        });
        Ok(())
    }

    /// A document, video or audio block: its name and inline texts as text; its bytes as the
    /// text they hold (text documents), as PDF pages, or by their size.
    fn opaque(
        &self,
        kind: &str,
        v: &Value,
        place: &str,
        parts: &mut Parts,
    ) -> Result<(), CoreError> {
        let block = self.obj(Some(v), place)?;
        for key in ["name", "context"] {
            if let Some(value) = block.get(key).filter(|v| !v.is_null()) {
                let text = self.string(Some(value), &format!("{place}.{key}"), true)?;
                parts.texts.push(text.into());
            }
        }
        let format = block.get("format").and_then(Value::as_str).unwrap_or("");
        let (source_kind, source) = self.member(block.get("source"), &format!("{place}.source"))?;
        match source_kind {
            "bytes" => {
                let data = self.string(Some(source), &format!("{place}.source.bytes"), true)?;
                let text = (kind == "document" && TEXT_FORMATS.contains(&format))
                    .then(|| BASE64.decode(data).ok())
                    .flatten()
                    .and_then(|raw| String::from_utf8(raw).ok());
                if let Some(text) = text {
                    parts.texts.push(text.into());
                } else if kind == "document" && format == "pdf" {
                    pdf(parts, data);
                } else {
                    let tokens = data.len().div_ceil(BASE64_CHARS_PER_TOKEN);
                    parts.other_tokens = parts
                        .other_tokens
                        .saturating_add(u32::try_from(tokens).unwrap_or(u32::MAX));
                }
            }
            "s3Location" => {
                let location = self.obj(Some(source), &format!("{place}.source.s3Location"))?;
                let uri = self.string(
                    location.get("uri"),
                    &format!("{place}.source.s3Location.uri"),
                    true,
                )?;
                parts.texts.push(uri.into());
            }
            "text" => {
                let text = self.string(Some(source), &format!("{place}.source.text"), true)?;
                parts.texts.push(text.into());
            }
            "content" => {
                let items = self.list(Some(source), &format!("{place}.source.content"))?;
                for (c, item) in items.iter().enumerate() {
                    let at = format!("{place}.source.content[{c}]");
                    let (k, text) = self.member(Some(item), &at)?;
                    if k != "text" {
                        return Err(self.err(format!("{at} must be a text block, got {k}")));
                    }
                    parts.texts.push(self.string(Some(text), &at, true)?.into());
                }
            }
            other => return Err(self.err(format!("{place}.source has unknown type {other}"))),
        }
        Ok(())
    }

    /// A user-side block other than a tool result, or a block inside one.
    fn media(
        &self,
        kind: &str,
        v: &Value,
        place: &str,
        parts: &mut Parts,
    ) -> Result<(), CoreError> {
        match kind {
            "text" => parts.texts.push(self.string(Some(v), place, true)?.into()),
            "image" => self.image(v, place, parts)?,
            "document" | "video" | "audio" => self.opaque(kind, v, place, parts)?,
            "guardContent" => match self.member(Some(v), place)? {
                ("text", inner) => {
                    let text = self.obj(Some(inner), &format!("{place}.text"))?.get("text");
                    let text = self.string(text, &format!("{place}.text.text"), true)?;
                    parts.texts.push(text.into());
                }
                ("image", inner) => self.image(inner, &format!("{place}.image"), parts)?,
                (other, _) => return Err(self.err(format!("{place} has unknown type {other}"))),
            },
            "searchResult" | "json" => parts.texts.push(v.to_string().into()),
            _ => {}
        }
        Ok(())
    }

    fn tool_result(&self, b: usize, v: &Value) -> Result<ToolResult, CoreError> {
        let place = format!("content[{b}].toolResult");
        let value = self.obj(Some(v), &place)?;
        let id = self.string(value.get("toolUseId"), &format!("{place}.toolUseId"), false)?;
        let is_error = match value.get("status") {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) if s == "success" => false,
            Some(Value::String(s)) if s == "error" => true,
            Some(other) => {
                return Err(self.err(format!(
                    "{place}.status must be success or error, got {}",
                    repr(other)
                )))
            }
        };
        let content = self.list(value.get("content"), &format!("{place}.content"))?;
        let mut result = ToolResult {
            id: id.to_owned(),
            is_error,
            block: b,
            empty: content.is_empty(),
            parts: Parts::default(),
        };
        for (c, block) in content.iter().enumerate() {
            let at = format!("{place}.content[{c}]");
            let (kind, item) = self.member(Some(block), &at)?;
            if !RESULT_BLOCKS.contains(&kind) {
                return Err(self.err(format!(
                    "{at} has type {kind}, which a toolResult cannot carry"
                )));
            }
            self.media(kind, item, &at, &mut result.parts)?;
        }
        Ok(result)
    }

    fn tool_use(&self, b: usize, v: &Value) -> Result<ToolUse, CoreError> {
        let place = format!("content[{b}].toolUse");
        let value = self.obj(Some(v), &place)?;
        let id = self.string(value.get("toolUseId"), &format!("{place}.toolUseId"), false)?;
        let name = self.string(value.get("name"), &format!("{place}.name"), false)?;
        let Some(input) = value.get("input") else {
            return Err(self.err(format!("{place} has no `input`")));
        };
        Ok(ToolUse {
            id: id.into(),
            name: name.into(),
            input: input.to_string().into(),
        })
    }

    /// Everything a reasoning block carries, as text: its thinking and signature, or the
    /// redacted (encrypted) content, counted as the model may read it.
    fn reasoning(&self, b: usize, v: &Value) -> Result<String, CoreError> {
        let place = format!("content[{b}].reasoningContent");
        match self.member(Some(v), &place)? {
            ("reasoningText", item) => {
                let item = self.obj(Some(item), &format!("{place}.reasoningText"))?;
                let mut text = self
                    .string(
                        item.get("text"),
                        &format!("{place}.reasoningText.text"),
                        true,
                    )?
                    .to_owned();
                if let Some(signature) = item.get("signature").filter(|v| !v.is_null()) {
                    text.push('\n');
                    text.push_str(self.string(
                        Some(signature),
                        &format!("{place}.reasoningText.signature"),
                        true,
                    )?);
                }
                Ok(text)
            }
            ("redactedContent", item) => Ok(self
                .string(Some(item), &format!("{place}.redactedContent"), true)?
                .to_owned()),
            (other, _) => Err(self.err(format!("{place} has unknown type {other}"))),
        }
    }
}

/// Reads message `i` of a request.
pub fn message(i: usize, raw: &[u8]) -> Result<BedrockMessage, CoreError> {
    let at = At { i };
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| at.err(format!("not valid JSON ({e})")))?;
    let Value::Object(message) = &value else {
        return Err(at.err(format!(
            "a message must be an object, got {}",
            kind_of(&value)
        )));
    };
    let role = match message.get("role") {
        Some(Value::String(r)) if r == "user" => Role::User,
        Some(Value::String(r)) if r == "assistant" => Role::Assistant,
        other => {
            let hint = if other.and_then(Value::as_str) == Some("system") {
                " (Bedrock takes the system prompt as the top-level `system`, not as a message)"
            } else {
                ""
            };
            return Err(at.err(format!(
                "`role` must be user or assistant, got {}{hint}",
                other.map_or("None".to_owned(), repr)
            )));
        }
    };
    let content = match message.get("content") {
        None | Some(Value::Null) => return Err(at.err("missing `content`")),
        v => at.list(v, "`content`")?,
    };
    if content.is_empty() {
        return Err(at.err(EMPTY_CONTENT.replace("{n}", &i.to_string())));
    }
    let (allowed, who): (&[&str], &str) = match role {
        Role::User => (&USER_BLOCKS, "user"),
        _ => (&ASSISTANT_BLOCKS, "assistant"),
    };
    let mut out = BedrockMessage {
        role,
        parts: Parts::default(),
        uses: Vec::new(),
        results: Vec::new(),
        conversation: false,
    };
    for (b, block) in content.iter().enumerate() {
        if is_compaction(block) {
            return Err(at.err(format!(
                "content[{b}] is a compaction block: {NO_COMPACTION}"
            )));
        }
        let (kind, value) = at.member(Some(block), &format!("content[{b}]"))?;
        if !allowed.contains(&kind) {
            return Err(at.err(format!(
                "content[{b}] has type {kind}, which a {who} message cannot carry"
            )));
        }
        match kind {
            "cachePoint" => {}
            "toolResult" => out.results.push(at.tool_result(b, value)?),
            "toolUse" => out.uses.push(at.tool_use(b, value)?),
            "reasoningContent" => out.parts.texts.push(at.reasoning(b, value)?.into()),
            "citationsContent" => out.parts.texts.push(value.to_string().into()),
            _ => {
                out.conversation = true;
                at.media(kind, value, &format!("content[{b}].{kind}"), &mut out.parts)?;
            }
        }
    }
    Ok(out)
}
