//! Reading one Anthropic message from JSON: the checks and the wording of ringbound's Python
//! adapter, so a malformed message is the same typed error naming the same index.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use serde_json::{Map, Value};

pub(super) mod fast;

use super::{AnthropicMessage, Block, Parts};
use crate::count::image::image_size_from_base64;
use crate::error::CoreError;
use crate::providers::pynames::{repr, type_name};
use crate::view::{Detail, Image, Role};

/// Text tokens of one PDF page at most ("1,500-3,000 tokens per page", Anthropic PDF
/// support); each page is also billed as an image.
pub const PDF_PAGE_TOKENS: u32 = 3000;

type Obj = Map<String, Value>;

/// Reads a payload with or without its final padding.
pub(crate) const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

struct At {
    i: usize,
}

impl At {
    fn err(&self, reason: impl Into<String>) -> CoreError {
        CoreError::invalid(self.i, reason)
    }

    fn need_str<'v>(
        &self,
        d: &'v Obj,
        key: &str,
        place: &str,
        empty: bool,
    ) -> Result<&'v str, CoreError> {
        match d.get(key) {
            Some(Value::String(s)) if empty || !s.is_empty() => Ok(s),
            Some(Value::String(_)) => Err(self.err(format!("{place}.{key} is empty"))),
            other => Err(self.err(format!(
                "{place}.{key} must be a string, got {}",
                other.map_or("null", type_name)
            ))),
        }
    }

    fn object<'v>(&self, v: &'v Value, place: &str) -> Result<&'v Obj, CoreError> {
        match v {
            Value::Object(o) => Ok(o),
            other => Err(self.err(format!(
                "{place} must be an object, got {}",
                type_name(other)
            ))),
        }
    }

    fn kind<'v>(&self, block: &'v Obj, place: &str) -> Result<&'v str, CoreError> {
        match block.get("type") {
            Some(Value::String(s)) => Ok(s),
            _ => Err(self.err(format!("{place} has no string `type`"))),
        }
    }

    /// Checks a `source` and adds its cost to `parts`.
    fn source(
        &self,
        block: &Obj,
        place: &str,
        kinds: &[&str],
        document: bool,
        parts: &mut Parts,
    ) -> Result<(), CoreError> {
        let source = match block.get("source") {
            Some(Value::Object(o)) => o,
            other => {
                return Err(self.err(format!(
                    "{place}.source must be an object, got {}",
                    other.map_or("null", type_name)
                )))
            }
        };
        let kind = source.get("type");
        let kind = match kind {
            Some(Value::String(k)) if kinds.contains(&k.as_str()) => k.as_str(),
            other => {
                return Err(self.err(format!(
                    "{place}.source.type must be one of {}, got {}",
                    kinds.join(", "),
                    other.map_or("None".to_owned(), repr)
                )))
            }
        };
        let inner = format!("{place}.source");
        match kind {
            "base64" => {
                self.need_str(source, "media_type", &inner, true)?;
                let data = self.need_str(source, "data", &inner, true)?;
                if document {
                    pdf(parts, data);
                } else {
                    parts.images.push(Image {
                        detail: Detail::Auto,
                        size: image_size_from_base64(data),
                    });
                }
            }
            "url" | "file" => {
                let key = if kind == "url" { "url" } else { "file_id" };
                self.need_str(source, key, &inner, true)?;
                if document {
                    pages(parts, 1);
                } else {
                    parts.images.push(Image {
                        detail: Detail::Auto,
                        size: None,
                    });
                }
            }
            "text" => parts.texts.push(
                self.need_str(source, "data", &inner, true)?
                    .to_owned()
                    .into(),
            ),
            _ => match source.get("content") {
                Some(Value::String(s)) => parts.texts.push(s.as_str().into()),
                Some(Value::Array(blocks)) => {
                    for (k, sub) in blocks.iter().enumerate() {
                        self.nested(sub, &format!("{inner}.content[{k}]"), parts)?;
                    }
                }
                _ => {
                    return Err(self.err(format!(
                        "{inner}.content must be a string or a list of blocks"
                    )))
                }
            },
        }
        Ok(())
    }

    /// A block inside a tool result or a document (text, image, document, search result,
    /// anything else counted by its JSON).
    fn nested(&self, v: &Value, place: &str, parts: &mut Parts) -> Result<(), CoreError> {
        let block = self.object(v, place)?;
        match self.kind(block, place)? {
            "text" => parts
                .texts
                .push(self.need_str(block, "text", place, true)?.into()),
            kind => self.media(block, kind, place, parts)?,
        }
        Ok(())
    }

    /// An image, document, search result or other non-text block a user message carries.
    fn media(
        &self,
        block: &Obj,
        kind: &str,
        place: &str,
        parts: &mut Parts,
    ) -> Result<(), CoreError> {
        match kind {
            "image" => self.source(block, place, &["base64", "url", "file"], false, parts),
            "document" => {
                for key in ["title", "context"] {
                    if let Some(Value::String(s)) = block.get(key) {
                        parts.texts.push(s.as_str().into());
                    }
                }
                let kinds = ["base64", "text", "content", "url", "file"];
                self.source(block, place, &kinds, true, parts)
            }
            "search_result" => {
                for key in ["title", "source"] {
                    if let Some(Value::String(s)) = block.get(key) {
                        parts.texts.push(s.as_str().into());
                    }
                }
                if let Some(Value::Array(content)) = block.get("content") {
                    for sub in content {
                        if let Some(Value::String(s)) = sub.get("text") {
                            parts.texts.push(s.as_str().into());
                        }
                    }
                }
                Ok(())
            }
            _ => {
                parts.texts.push(json_without_cache_control(block).into());
                Ok(())
            }
        }
    }

    fn block(&self, b: usize, role: Role, v: &Value) -> Result<Block, CoreError> {
        let place = format!("content[{b}]");
        let block = self.object(v, &place)?;
        let kind = self.kind(block, &place)?;
        let only = |who: &str| {
            self.err(format!(
                "{place} is a `{kind}` block, which only {who} message carries"
            ))
        };
        match kind {
            "tool_use" | "thinking" | "redacted_thinking" if role != Role::Assistant => {
                return Err(only("an assistant"))
            }
            "tool_result" | "image" | "document" if role != Role::User => {
                return Err(only("a user"))
            }
            _ => {}
        }
        Ok(match kind {
            "text" => text(self.need_str(block, "text", &place, true)?),
            "tool_use" => {
                let id = self.need_str(block, "id", &place, false)?.to_owned();
                let name = self.need_str(block, "name", &place, true)?.to_owned();
                let input = match block.get("input") {
                    Some(input @ Value::Object(_)) => input.to_string(),
                    other => {
                        return Err(self.err(format!(
                            "{place}.input must be an object, got {}",
                            other.map_or("null", type_name)
                        )))
                    }
                };
                Block::ToolUse {
                    id: id.into(),
                    name: name.into(),
                    input: input.into(),
                }
            }
            "tool_result" => {
                let id = self
                    .need_str(block, "tool_use_id", &place, false)?
                    .to_owned();
                let mut parts = Parts::default();
                match block.get("content") {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => parts.texts.push(s.as_str().into()),
                    Some(Value::Array(blocks)) => {
                        for (k, sub) in blocks.iter().enumerate() {
                            self.nested(sub, &format!("{place}.content[{k}]"), &mut parts)?;
                        }
                    }
                    Some(other) => {
                        return Err(self.err(format!(
                            "{place}.content must be a string or a list of blocks, got {}",
                            type_name(other)
                        )))
                    }
                }
                let is_error = match block.get("is_error") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(flag)) => *flag,
                    Some(other) => {
                        return Err(self.err(format!(
                            "{place}.is_error must be a boolean, got {}",
                            type_name(other)
                        )))
                    }
                };
                Block::ToolResult {
                    id,
                    parts,
                    is_error,
                }
            }
            "thinking" => Block::Thinking {
                text: self
                    .need_str(block, "thinking", &place, true)?
                    .to_owned()
                    .into(),
            },
            // Encrypted: its size as text is an upper bound of what it stands for.
            "redacted_thinking" => Block::Thinking {
                text: self
                    .need_str(block, "data", &place, true)?
                    .to_owned()
                    .into(),
            },
            "compaction" => Block::Compaction {
                text: match block.get("content") {
                    None | Some(Value::Null) => String::new().into(),
                    Some(Value::String(s)) => s.as_str().into(),
                    Some(other) => {
                        return Err(self.err(format!(
                            "{place}.content must be a string, got {}",
                            type_name(other)
                        )))
                    }
                },
            },
            _ if role == Role::User => {
                let mut parts = Parts::default();
                self.media(block, kind, &place, &mut parts)?;
                Block::Media(parts)
            }
            _ => Block::Other {
                json: json_without_cache_control(block).into(),
            },
        })
    }
}

pub(super) fn text(s: &str) -> Block {
    Block::Text {
        text: s.into(),
        blank: super::blank(s),
    }
}

/// Adds `n` PDF pages: each a text layer and a page image.
pub(crate) fn pages(parts: &mut Parts, n: u32) {
    parts.other_tokens = parts
        .other_tokens
        .saturating_add(PDF_PAGE_TOKENS.saturating_mul(n));
    parts.images.extend((0..n).map(|_| Image {
        detail: Detail::Auto,
        size: None,
    }));
}

/// A base64 PDF priced by its pages when they can be counted; else (a PDF whose page objects
/// sit in compressed streams, or no PDF at all) by its payload, one token per 3 characters,
/// which never prices it below what it holds.
pub(crate) fn pdf(parts: &mut Parts, data: &str) {
    match pdf_pages(data) {
        0 => {
            let tokens = u32::try_from(data.len().div_ceil(3)).unwrap_or(u32::MAX);
            parts.other_tokens = parts.other_tokens.saturating_add(tokens);
        }
        n => pages(parts, n),
    }
}

/// Pages of a base64 PDF: its `/Type /Page` objects; 0 when none can be seen.
fn pdf_pages(data: &str) -> u32 {
    let Ok(raw) = BASE64.decode(data) else {
        return 0;
    };
    let mut n: u32 = 0;
    let mut rest = &raw[..];
    while let Some(at) = memchr::memmem::find(rest, b"/Type") {
        rest = &rest[at + 5..];
        let after = rest
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map_or(rest, |k| &rest[k..]);
        if after.starts_with(b"/Page") && !after.get(5).is_some_and(u8::is_ascii_alphabetic) {
            n = n.saturating_add(1);
        }
    }
    n
}

fn json_without_cache_control(block: &Obj) -> String {
    if !block.contains_key("cache_control") {
        return Value::Object(block.clone()).to_string();
    }
    let mut copy = block.clone();
    copy.remove("cache_control");
    Value::Object(copy).to_string()
}

/// Reads message `i` of a request.
pub fn message(i: usize, raw: &[u8]) -> Result<AnthropicMessage, CoreError> {
    match fast::message(raw) {
        Some(msg) => Ok(msg),
        None => general(i, raw),
    }
}

/// Reads any message, or names what is wrong with it.
pub(super) fn general(i: usize, raw: &[u8]) -> Result<AnthropicMessage, CoreError> {
    let at = At { i };
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| at.err(format!("not valid JSON ({e})")))?;
    let msg = match &value {
        Value::Object(o) => o,
        other => {
            return Err(at.err(format!(
                "a message must be an object, got {}",
                type_name(other)
            )))
        }
    };
    let role = match msg.get("role") {
        Some(Value::String(r)) if r == "user" => Role::User,
        Some(Value::String(r)) if r == "assistant" => Role::Assistant,
        Some(Value::String(r)) if r == "system" => {
            return Err(at.err(
                "role 'system' is not a message role in Anthropic's API: pass the system \
                 prompt as the top-level `system` parameter",
            ))
        }
        None => return Err(at.err("`role` must be 'user' or 'assistant' (missing `role`)")),
        Some(other) => {
            return Err(at.err(format!(
                "`role` must be 'user' or 'assistant' (got {})",
                repr(other)
            )))
        }
    };
    let cache_markers = match msg.get("content") {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| !matches!(b.get("cache_control"), None | Some(Value::Null)))
            .count() as u32,
        _ => 0,
    };
    let blocks = match msg.get("content") {
        None => return Err(at.err("missing `content`")),
        Some(Value::String(s)) => vec![text(s)],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(b, block)| at.block(b, role, block))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(at.err(format!(
                "`content` must be a string or a list of blocks, got {}",
                type_name(other)
            )))
        }
    };
    Ok(AnthropicMessage {
        role,
        blocks,
        cache_markers,
    })
}
