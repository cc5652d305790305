//! Reading one Gemini content from JSON, REST camelCase or Python SDK snake_case, with the
//! checks and the wording of ringbound's Python adapter, so a malformed content is the same
//! typed error naming the same index.

use serde_json::{Map, Value};

use super::{Call, GeminiContent, Response};
use crate::count::image::image_size_from_base64;
use crate::error::CoreError;
use crate::providers::pynames::{repr, type_name};
use crate::view::{Detail, Framed, Image, Role, Text};
use std::sync::{Arc, LazyLock};

type Obj = Map<String, Value>;

/// The one-of data fields of a Part: (REST name, SDK name). The Python adapter reads this
/// table (`ringbound._core.GEMINI_DATA_FIELDS`).
pub(crate) const DATA_FIELDS: [(&str, &str); 7] = [
    ("text", "text"),
    ("inlineData", "inline_data"),
    ("fileData", "file_data"),
    ("functionCall", "function_call"),
    ("functionResponse", "function_response"),
    ("executableCode", "executable_code"),
    ("codeExecutionResult", "code_execution_result"),
];

/// Part fields that travel with the part they sign, whatever it becomes (a media part's
/// placeholder keeps them). The Python adapter reads this table
/// (`ringbound._core.GEMINI_SIGNATURE_FIELDS`).
pub(crate) const SIGNATURE_FIELDS: [&str; 3] = ["thought", "thoughtSignature", "thought_signature"];

/// Part fields that carry nothing the model reads as content (the signature is counted apart).
/// The Python adapter reads this table (`ringbound._core.GEMINI_META_FIELDS`).
pub(crate) const META_FIELDS: [&str; 9] = [
    "thought",
    "thoughtSignature",
    "thought_signature",
    "videoMetadata",
    "video_metadata",
    "mediaResolution",
    "media_resolution",
    "partMetadata",
    "part_metadata",
];

/// Base64 characters per token of media other than images (audio, video, PDF): their payload
/// size, as the core prices an opaque part (Gemini prices them by duration or page, which the
/// request does not state).
const BASE64_CHARS_PER_TOKEN: usize = 3;

/// Tokens of a stored non-image file (`fileData`), whose length the request does not state:
/// Gemini's documented price of one document page, the least such a file costs.
const STORED_FILE_TOKENS: u32 = 258;

pub(crate) use crate::view::error_text;

struct At {
    i: usize,
}

/// A value that is absent when null, as the adapter reads SDK dumps.
fn get<'v>(o: &'v Obj, key: &str) -> Option<&'v Value> {
    o.get(key).filter(|v| !v.is_null())
}

/// The REST spelling, else the SDK one.
fn either<'v>(o: &'v Obj, camel: &str, snake: &str) -> Option<&'v Value> {
    get(o, camel).or_else(|| get(o, snake))
}

impl At {
    fn err(&self, reason: impl Into<String>) -> CoreError {
        CoreError::invalid(self.i, reason)
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

    fn string<'v>(&self, v: Option<&'v Value>, place: &str) -> Result<&'v str, CoreError> {
        match v {
            Some(Value::String(s)) => Ok(s),
            other => Err(self.err(format!(
                "{place} must be a string, got {}",
                other.map_or("nothing", type_name)
            ))),
        }
    }

    fn name(&self, body: &Obj, place: &str) -> Result<String, CoreError> {
        match get(body, "name") {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(self.err(format!(
                "{place}.name must be a non-empty string (Name cannot be empty.)"
            ))),
        }
    }

    fn id(&self, body: &Obj, place: &str) -> Result<Option<String>, CoreError> {
        match get(body, "id") {
            None => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            v => Ok(Some(self.string(v, &format!("{place}.id"))?.to_owned())),
        }
    }

    /// An inlineData or fileData blob: an image priced by its pixel size, anything else by the
    /// size of its payload.
    fn blob(
        &self,
        v: &Value,
        inline: bool,
        place: &str,
        c: &mut GeminiContent,
    ) -> Result<(), CoreError> {
        let blob = self.object(v, place)?;
        let mime = self.string(
            either(blob, "mimeType", "mime_type"),
            &format!("{place}.mimeType"),
        )?;
        let image = mime.starts_with("image/");
        if inline {
            let data = self.string(get(blob, "data"), &format!("{place}.data"))?;
            if image {
                c.images.push(Image {
                    detail: Detail::Auto,
                    size: image_size(data),
                });
            } else {
                let tokens = data.len().div_ceil(BASE64_CHARS_PER_TOKEN);
                c.other_tokens = c
                    .other_tokens
                    .saturating_add(u32::try_from(tokens).unwrap_or(u32::MAX));
            }
        } else {
            let uri = self.string(
                either(blob, "fileUri", "file_uri"),
                &format!("{place}.fileUri"),
            )?;
            if image {
                c.images.push(Image {
                    detail: Detail::Auto,
                    size: None,
                });
            } else {
                // A stored file of unknown length: its reference is all the request shows, and
                // it costs at least what Gemini charges for one document page.
                c.texts.push(uri.into());
                c.other_tokens = c.other_tokens.saturating_add(STORED_FILE_TOKENS);
            }
        }
        Ok(())
    }

    fn part(&self, p: usize, v: &Value, c: &mut GeminiContent) -> Result<(), CoreError> {
        let place = format!("parts[{p}]");
        let part = self.object(v, &place)?;
        let present: Vec<&String> = part.keys().filter(|k| !part[*k].is_null()).collect();
        let data: Vec<&String> = present
            .iter()
            .copied()
            .filter(|k| {
                DATA_FIELDS
                    .iter()
                    .any(|(camel, snake)| k == camel || k == snake)
            })
            .collect();
        if data.len() > 1 {
            let names: Vec<&str> = data.iter().map(|k| k.as_str()).collect();
            return Err(self.err(format!(
                "{place} holds {}; a part holds one of them",
                names.join(" and ")
            )));
        }
        let signature = either(part, "thoughtSignature", "thought_signature");
        if signature.is_some() {
            // Opaque, but sent back with the part: counted as text, which over-counts safely.
            let s = self.string(signature, &format!("{place}.thoughtSignature"))?;
            c.texts.push(s.into());
            c.signatures += 1;
        }
        for key in &present {
            let known = DATA_FIELDS
                .iter()
                .any(|(camel, snake)| *key == camel || *key == snake)
                || META_FIELDS.contains(&key.as_str());
            if !known {
                // A field ringbound does not know may still reach the model: count it as text.
                c.texts.push(part[key.as_str()].to_string().into());
            }
        }
        let Some(key) = data.first() else {
            if signature.is_none() && present.is_empty() {
                return Err(self.err(format!("{place} is empty")));
            }
            c.prompt = true;
            return Ok(());
        };
        let camel = DATA_FIELDS
            .iter()
            .find(|(camel, snake)| *key == camel || *key == snake)
            .map_or("", |(camel, _)| *camel);
        c.snake |= key.as_str() != camel;
        let value = &part[key.as_str()];
        let inner = format!("{place}.{camel}");
        if camel != "functionResponse" {
            c.prompt = true;
        }
        match camel {
            "text" => c.texts.push(self.string(Some(value), &inner)?.into()),
            "inlineData" => self.blob(value, true, &inner, c)?,
            "fileData" => self.blob(value, false, &inner, c)?,
            "executableCode" | "codeExecutionResult" => {
                self.object(value, &inner)?;
                c.texts.push(value.to_string().into());
            }
            "functionCall" => {
                if c.role != Role::Assistant {
                    return Err(self.err(format!(
                        "{place}: a functionCall part belongs in a 'model' content"
                    )));
                }
                let body = self.object(value, &inner)?;
                let args = match get(body, "args") {
                    None => "{}".to_owned(),
                    Some(args @ Value::Object(_)) => args.to_string(),
                    Some(other) => {
                        return Err(self.err(format!(
                            "{inner}.args must be an object, got {}",
                            type_name(other)
                        )))
                    }
                };
                let name = self.name(body, &inner)?;
                let id = self.id(body, &inner)?;
                let digest = id.is_none().then(|| call_digest(&name, &args));
                c.calls.push(Call {
                    pos: p,
                    name: name.into(),
                    id,
                    args: args.into(),
                    digest,
                    signed: signature.is_some(),
                });
            }
            _ => {
                if c.role != Role::User {
                    return Err(self.err(format!(
                        "{place}: a functionResponse part belongs in a 'user' content"
                    )));
                }
                self.response(p, self.object(value, &inner)?, &inner, c)?;
            }
        }
        Ok(())
    }

    fn response(
        &self,
        p: usize,
        body: &Obj,
        place: &str,
        c: &mut GeminiContent,
    ) -> Result<(), CoreError> {
        let empty = Value::Object(Obj::new());
        let response = match get(body, "response") {
            None => &empty,
            Some(r @ Value::Object(_)) => r,
            Some(other) => {
                return Err(self.err(format!(
                    "{place}.response must be an object, got {}",
                    type_name(other)
                )))
            }
        };
        let (text, is_error) = match response {
            Value::Object(o) if o.len() == 1 && o.contains_key("error") => {
                let text = match &o["error"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (error_text(text), true)
            }
            other => (other.to_string(), false),
        };
        // As the adapter writes a rewritten response: under `error` for an error, else under
        // its one key, else `output`.
        static OUTPUT: LazyLock<Text> = LazyLock::new(|| Text::from("output"));
        let framed_as = match response {
            _ if is_error => Framed::Error,
            Value::Object(o) if o.len() == 1 => Framed::Object(
                o.keys()
                    .next()
                    .map_or_else(|| Arc::clone(&OUTPUT), |k| k.as_str().into()),
            ),
            _ => Framed::Object(Arc::clone(&OUTPUT)),
        };
        c.responses.push(Response {
            pos: p,
            name: self.name(body, place)?,
            id: self.id(body, place)?,
            text: text.into(),
            is_error,
            framed_as,
        });
        match get(body, "parts") {
            None => {}
            Some(Value::Array(media)) => {
                for (m, raw) in media.iter().enumerate() {
                    let at = format!("{place}.parts[{m}]");
                    let sub = self.object(raw, &at)?;
                    if let Some(inline) = either(sub, "inlineData", "inline_data") {
                        self.blob(inline, true, &at, c)?;
                    } else if let Some(stored) = either(sub, "fileData", "file_data") {
                        self.blob(stored, false, &at, c)?;
                    } else {
                        c.texts.push(raw.to_string().into());
                    }
                }
            }
            Some(_) => return Err(self.err(format!("{place}.parts must be a list"))),
        }
        Ok(())
    }
}

/// Pixel size of a base64 image, in the standard alphabet or the URL-safe one the Python SDK
/// writes.
fn image_size(data: &str) -> Option<(u32, u32)> {
    if data.contains(['-', '_']) {
        let head: String = data
            .chars()
            .take(96 * 1024)
            .map(|ch| match ch {
                '-' => '+',
                '_' => '/',
                ch => ch,
            })
            .collect();
        return image_size_from_base64(&head);
    }
    image_size_from_base64(data)
}

/// Reads content `i` of `contents`.
pub fn content(i: usize, raw: &[u8]) -> Result<GeminiContent, CoreError> {
    let at = At { i };
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| at.err(format!("not valid JSON ({e})")))?;
    let obj = at.object(&value, "a content")?;
    let role = match get(obj, "role") {
        None => Role::User,
        Some(Value::String(r)) if r == "user" || r == "function" => Role::User,
        Some(Value::String(r)) if r == "model" => Role::Assistant,
        Some(other) => {
            return Err(at.err(format!(
                "role must be 'user' or 'model', got {} (Gemini: Please use a valid role: \
                 user, model.)",
                repr(other)
            )))
        }
    };
    let parts = match get(obj, "parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        _ => {
            return Err(at
                .err("parts must be a non-empty list (Gemini: contents.parts must not be empty.)"))
        }
    };
    let mut c = GeminiContent {
        role,
        texts: Vec::new(),
        images: Vec::new(),
        other_tokens: 0,
        calls: Vec::new(),
        responses: Vec::new(),
        prompt: false,
        signatures: 0,
        snake: false,
    };
    for (p, part) in parts.iter().enumerate() {
        at.part(p, part, &mut c)?;
    }
    Ok(c)
}

/// The first ten hex digits of the SHA-256 of a call's name and arguments (compact JSON,
/// keys sorted): an id made from the call itself keeps its value when earlier contents are
/// trimmed away, which the ledger needs (it remembers calls by id).
fn call_digest(name: &str, args: &str) -> String {
    use sha2::{Digest, Sha256};
    let hash = Sha256::new()
        .chain_update(name.as_bytes())
        .chain_update([0])
        .chain_update(args.as_bytes())
        .finalize();
    hash[..5].iter().map(|b| format!("{b:02x}")).collect()
}
