//! The Gemini API (`generateContent`): `contents` of user and model turns whose parts carry
//! text, media, `functionCall` and `functionResponse`, read from REST (camelCase) or Python SDK
//! (snake_case) JSON (`parse`), paired by Gemini's turn rules in its 400 wording (`rules`), and
//! mapped onto the canonical view with real costs (`canonical`).
//!
//! Gemini 3 signs function calls: the first `functionCall` part of each model step carries a
//! `thoughtSignature` (with parallel calls only the first one does), and a request whose current
//! turn lacks one is refused. A model content is one native item, so its parallel calls are
//! kept or dropped together; a step whose signature went missing is a pairing issue (sources in
//! docs/providers/gemini.md).

mod canonical;
mod parse;
// Read by the binding only (`py::provider_rules`).
#[cfg(feature = "python")]
pub(crate) use parse::{DATA_FIELDS, META_FIELDS, SIGNATURE_FIELDS};
mod rules;

pub use rules::{answers, Answer};

use super::item_cache::ItemCache;
use super::{appended, edit, json_string, note_in_string, push_array, NoteAt, ResultAt, ResultsAt};
use super::{cached_items, runs, with_array, within, Canonical, ItemFacts, Provider, Run};
use crate::error::CoreError;
use crate::pairing::PairingIssue;
use crate::view::{Framed, Image, Role, Text, ToolCall};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::Arc;

/// Gemini's 400 when a response turn does not answer every call of the call turn before it
/// (google-gemini/gemini-cli#4217, microsoft/vscode#299295).
pub const COUNT_MISMATCH: &str = "Please ensure that the number of function response parts is \
     equal to the number of function call parts of the function call turn.";
/// Gemini's 400 for a call turn that follows neither a user turn nor a response turn
/// (google-gemini/gemini-cli#11814, continuedev/continue#11164).
pub const CALL_TURN_POSITION: &str = "Please ensure that function call turn comes immediately \
     after a user turn or after a function response turn.";
/// Gemini's 400 for function responses that do not follow their call turn
/// (langchain-ai/langchain#27799, GoogleCloudPlatform/generative-ai#368).
pub const RESPONSE_TURN_POSITION: &str =
    "Please ensure that function response turn comes immediately after a function call turn.";
/// Gemini's 400 for a history that opens with a model turn (NousResearch/hermes-agent#55427).
pub const ALTERNATE: &str =
    "Please ensure that multiturn requests alternate between user and model.";
/// Gemini 3's 400 for a call step of the current turn sent back without its signature (Vertex
/// AI's wording; the Gemini API says "Function call is missing a thought_signature in
/// functionCall parts"). `{name}` and `{k}` are filled in.
pub const MISSING_SIGNATURE: &str =
    "Function call `{name}` in the `{k}.` content block is missing a `thought_signature`.";

/// One `functionCall` part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// Position of the part in its content.
    pub pos: usize,
    pub name: Text,
    /// The native id, when the call has a non-empty one.
    pub id: Option<String>,
    /// The arguments as compact JSON.
    pub args: Text,
    /// For a call without a native id, the digest of its name and arguments its canonical id
    /// is made from: made when the call is read, so a warm reading takes it from the item
    /// cache instead of hashing every call again.
    pub digest: Option<String>,
    /// Whether this part carries a `thoughtSignature`.
    pub signed: bool,
}

/// One `functionResponse` part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub pos: usize,
    pub name: String,
    pub id: Option<String>,
    /// What the model reads of the response: its JSON, or the error text of `{"error": ...}`.
    pub text: Text,
    /// A response that is `{"error": ...}` alone (Gemini: "use 'output' for the function output
    /// and 'error' for error details").
    pub is_error: bool,
    /// How the adapter writes a rewritten text of this response.
    pub framed_as: Framed,
}

/// One content of `contents`, as much of it as pairing and counting need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeminiContent {
    /// `User` for 'user' (and Vertex AI's 'function') contents, `Assistant` for 'model'.
    pub role: Role,
    /// Texts the model reads: text parts, code, code results, signatures, unknown fields.
    pub texts: Vec<Text>,
    pub images: Vec<Image>,
    /// Tokens of media other than images, by their payload size.
    pub other_tokens: u32,
    pub calls: Vec<Call>,
    pub responses: Vec<Response>,
    /// Whether a part other than a `functionResponse` opens or continues this content: a user
    /// content with one is a new prompt, which starts a new turn.
    pub prompt: bool,
    /// Parts carrying a `thoughtSignature`.
    pub signatures: usize,
    /// A part's field is spelled in snake_case (the Python SDK's dicts): parts written for
    /// it are spelled so too.
    pub snake: bool,
}

/// The system instruction object `system` with `part` after its parts, every other field as
/// it was and in its place; None for what is not an object with a list of parts (or none),
/// which the adapter writes.
fn with_part(system: &str, part: &str) -> Option<String> {
    let fields = crate::json::fields::Fields::parse(system).ok()?;
    let mut out = Vec::new();
    let mut placed = false;
    for (key, value) in fields.iter() {
        if key == "parts" {
            if placed {
                return None; // a repeated key: which one the adapter reads is its to say
            }
            placed = true;
            let parts = match value.get() {
                "null" => format!("[{part}]"),
                list => appended(list, part)?,
            };
            out.push(format!("{}:{parts}", json_string(key)));
        } else {
            out.push(format!("{}:{}", json_string(key), value.get()));
        }
    }
    if !placed {
        out.push(format!(r#""parts":[{part}]"#));
    }
    Some(format!("{{{}}}", out.join(",")))
}

/// The Gemini API.
pub struct Gemini;

impl Provider for Gemini {
    const KEY: &'static str = "gemini";
    const SYSTEM_HOLDS_FIRST_TURN: bool = true;
    /// A functionResponse names its function, and an error response reads as `Error: text`.
    const RESULTS_NAMED: bool = true;
    type Item = GeminiContent;

    fn item_cache(&self) -> Option<&'static ItemCache<GeminiContent>> {
        cached_items!(GeminiContent, 3)
    }

    fn facts(&self, c: &GeminiContent) -> ItemFacts {
        ItemFacts::of_role(c.role, "model")
    }

    fn parse(&self, i: usize, raw: &[u8]) -> Result<GeminiContent, CoreError> {
        parse::content(i, raw)
    }

    /// The note goes in the system instruction, a part of its own after the caller's.
    fn ledger_note(&self, system: Option<&str>, note: &str) -> NoteAt {
        let part = format!(r#"{{"text":{}}}"#, json_string(note));
        match system {
            None | Some("null") => NoteAt::System(format!(r#"{{"parts":[{part}]}}"#)),
            Some(s) if s.starts_with('"') => note_in_string(s, note),
            Some(s) => with_part(s, &part).map_or(NoteAt::Adapter, NoteAt::System),
        }
    }

    /// Contents of one role that dropping what stood between them made neighbours are merged
    /// when the request is rendered; neighbours in the history already stay as they are.
    fn sends_as_given(&self, facts: &[ItemFacts], kept: &[usize]) -> bool {
        !kept
            .windows(2)
            .any(|w| facts[w[0]].role == facts[w[1]].role && w[1] != w[0] + 1)
    }

    /// Each chain of kept contents of one role, none a neighbour of the next in the history,
    /// goes out as one content, as the adapter merges them.
    fn merges(&self, facts: &[ItemFacts], kept: &[usize]) -> Option<Vec<Run>> {
        let joins =
            |j: usize| facts[kept[j]].role == facts[kept[j - 1]].role && kept[j] != kept[j - 1] + 1;
        Some(runs(kept.len(), joins, |_| true))
    }

    /// The first content with the parts of them all, in order, every other field of it as it
    /// was (the adapter's `{**first, "parts": parts}`).
    fn merged(&self, _role: &str, items: &[&[u8]]) -> Option<Vec<u8>> {
        #[derive(serde::Deserialize)]
        struct Parts<'a> {
            #[serde(borrow)]
            parts: &'a RawValue,
        }
        let mut parts: Vec<&RawValue> = Vec::new();
        let mut first = None;
        for raw in items {
            let value = serde_json::from_slice::<Parts<'_>>(raw).ok()?.parts;
            first.get_or_insert(value);
            parts.extend(serde_json::from_str::<Vec<&RawValue>>(value.get()).ok()?);
        }
        with_array(
            items.first()?,
            first?,
            parts.iter().map(|p| p.get().as_bytes()),
        )
    }

    /// A string without the notes joined to it; an instruction object without its note parts,
    /// every other field as it was (the adapter's `_system_with_notes`).
    fn without_notes(&self, system: &str) -> Option<String> {
        if system.starts_with('"') {
            return super::string_without_notes(system);
        }
        let object: &RawValue = serde_json::from_str(system).ok()?;
        let parts = edit::field(object, "parts")?;
        let kept = super::array_without_notes(parts.get())?;
        let at = within(system.as_bytes(), parts)?;
        Some(format!(
            "{}{kept}{}",
            &system[..at.start],
            &system[at.end..]
        ))
    }

    /// A synthesized response goes into the user content after its call's, after that
    /// content's own responses, or opens a user content.
    fn results_placed(&self) -> ResultsAt {
        ResultsAt::NextItem
    }

    /// `{"functionResponse": {"name", "response": {"error": text}, "id"}}`: the call's name,
    /// its native id where it has one, spelled as its content spells its parts.
    fn synthesized_result(
        &self,
        items: &[Arc<GeminiContent>],
        item: usize,
        nth: usize,
        call: &ToolCall,
    ) -> Result<Option<String>, CoreError> {
        let Some(native) = items
            .get(item)
            .and_then(|c| c.calls.get(nth).map(|n| (c, n)))
        else {
            return Ok(None);
        };
        let (content, native) = native;
        if *native.name != *call.name {
            return Ok(None);
        }
        let key = if content.snake {
            "function_response"
        } else {
            "functionResponse"
        };
        let id = native
            .id
            .as_deref()
            .map(|id| format!(r#","id":{}"#, json_string(id)))
            .unwrap_or_default();
        Ok(Some(format!(
            r#"{{"{key}":{{"name":{},"response":{{"error":{}}}{id}}}}}"#,
            json_string(&native.name),
            json_string(crate::plan::SYNTHESIZED_RESULT_TEXT)
        )))
    }

    /// The content with the responses after its last functionResponse part (first when it
    /// has none), every other field as it was.
    fn with_results(&self, item: &[u8], results: &[String]) -> Option<Vec<u8>> {
        let object: &RawValue = serde_json::from_slice(item).ok()?;
        let parts = edit::field(object, "parts")?;
        let list = edit::elements(parts)?;
        let is_response = |p: &RawValue| {
            ["functionResponse", "function_response"]
                .iter()
                .any(|k| edit::field(p, k).is_some_and(|v| v.get() != "null"))
        };
        let after = list
            .iter()
            .rposition(|p| is_response(p))
            .map_or(0, |at| at + 1);
        let elements = list[..after]
            .iter()
            .map(|p| p.get())
            .chain(results.iter().map(String::as_str))
            .chain(list[after..].iter().map(|p| p.get()));
        with_array(item, parts, elements.map(str::as_bytes))
    }

    fn results_item(&self, results: &[String]) -> Option<Vec<u8>> {
        let mut out = br#"{"role":"user","parts":"#.to_vec();
        push_array(&mut out, results.iter().map(String::as_bytes));
        out.push(b'}');
        Some(out)
    }

    /// The content's `nth` functionResponse part holds the text as its response, under the
    /// response's one key, else `output` (`error` for an error response, its one key), the
    /// rest of the part as it was. A result stands for a part of the first content of its
    /// span only.
    fn result_rewritten(
        &self,
        item: &[u8],
        at: ResultAt<'_>,
        text: &str,
    ) -> Option<Option<Vec<u8>>> {
        let Some(nth) = at.nth else {
            return Some(None);
        };
        let content: &RawValue = serde_json::from_slice(item).ok()?;
        let parts = edit::field(content, "parts").and_then(edit::elements)?;
        let mut responses = parts.iter().filter_map(|part| {
            let fields = edit::fields(part)?;
            // The SDK's spelling when given, else the REST one, as the adapter reads it.
            edit::last(&fields, "function_response")
                .or_else(|| edit::last(&fields, "functionResponse"))
        });
        let body = responses.nth(nth)?;
        let fields = edit::fields(body)?;
        let keys: Vec<Cow<'_, str>> = match edit::last(&fields, "response") {
            Some(response) => {
                let mut keys: Vec<Cow<'_, str>> = edit::fields(response)?
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect();
                keys.sort_unstable();
                keys.dedup();
                keys
            }
            None => Vec::new(),
        };
        let key = match keys.as_slice() {
            [only] => only.as_ref(),
            _ => "output",
        };
        let value = format!("{{{}:{}}}", json_string(key), json_string(text));
        let edit = edit::set_field(item, body, "response", value.into_bytes())?;
        edit::spliced(item, vec![edit]).map(Some)
    }

    /// Each image part becomes a text part (its thought signature kept); images inside a
    /// functionResponse leave it, and their texts close the content. The first content of
    /// the canonical message's span only.
    fn media_rewritten(&self, item: &[u8], first: bool, text: &str) -> Option<Option<Vec<u8>>> {
        if !first {
            return Some(None);
        }
        let content: &RawValue = serde_json::from_slice(item).ok()?;
        let parts_value = edit::field(content, "parts")?;
        let parts = edit::elements(parts_value)?;
        let mut edits = Vec::new();
        let mut moved = 0;
        for part in &parts {
            // Not an object: the parser refused it already.
            let fields = edit::fields(part)?;
            if image_blob(&fields) {
                let mut out = format!(r#"{{"text":{}"#, json_string(text));
                for key in parse::SIGNATURE_FIELDS {
                    if let Some(value) = edit::last(&fields, key) {
                        out.push_str(&format!(",{}:{}", json_string(key), value.get()));
                    }
                }
                out.push('}');
                edits.push((within(item, part)?, out.into_bytes()));
                continue;
            }
            if let Some((key, body)) = without_images(&fields, &mut moved)? {
                edits.push(edit::set_field(item, part, key, body)?);
            }
        }
        if moved > 0 {
            let end = within(item, parts_value)?.end - 1;
            let placeholder = format!(r#"{{"text":{}}}"#, json_string(text));
            let texts = vec![placeholder; moved].join(",");
            let comma = if parts.is_empty() { "" } else { "," };
            edits.push((end..end, format!("{comma}{texts}").into_bytes()));
        }
        edit::applied(item, edits)
    }

    fn validate(&self, items: &[Arc<GeminiContent>]) -> Vec<PairingIssue> {
        rules::validate(items)
    }

    fn canonical(&self, items: &[Arc<GeminiContent>]) -> Canonical {
        canonical::canonical(items)
    }

    fn issues_and_canonical(&self, items: &[Arc<GeminiContent>]) -> (Vec<PairingIssue>, Canonical) {
        canonical::issues_and_canonical(items)
    }
}

/// A part's functionResponse without the images among its parts (`moved` counts them), as
/// the adapter writes it: its fields but `parts`, then the parts left, if any. The field's
/// name and the new body; None (in the option) when it holds no image, None when a part is
/// not an object.
fn without_images<'a>(
    part: &[(Cow<'a, str>, &'a RawValue)],
    moved: &mut usize,
) -> Option<Option<(&'static str, Vec<u8>)>> {
    // The SDK's spelling when given, as the adapter reads it.
    let key = if edit::last(part, "function_response").is_some() {
        "function_response"
    } else {
        "functionResponse"
    };
    let Some(body) = edit::last(part, key) else {
        return Some(None);
    };
    let fields = edit::fields(body)?;
    let inner = edit::last(&fields, "parts")
        .and_then(edit::elements)
        .unwrap_or_default();
    let mut kept = Vec::with_capacity(inner.len());
    for p in &inner {
        if image_blob(&edit::fields(p)?) {
            *moved += 1;
        } else {
            kept.push(p.get().as_bytes());
        }
    }
    if kept.len() == inner.len() {
        return Some(None);
    }
    let mut out = vec![b'{'];
    let mut n = 0;
    for (k, v) in fields.iter().filter(|(k, _)| k != "parts") {
        if n > 0 {
            out.push(b',');
        }
        n += 1;
        out.extend_from_slice(json_string(k).as_bytes());
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
    }
    if !kept.is_empty() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#""parts":"#);
        super::push_array(&mut out, kept);
    }
    out.push(b'}');
    Some(Some((key, out)))
}

/// Whether a part holds an image blob, inline or by file, as the adapter tells them.
fn image_blob(part: &[(Cow<'_, str>, &RawValue)]) -> bool {
    let get =
        |camel: &str, snake: &str| edit::last(part, camel).or_else(|| edit::last(part, snake));
    let Some(blob) = get("inlineData", "inline_data").or_else(|| get("fileData", "file_data"))
    else {
        return false;
    };
    let Some(fields) = edit::fields(blob) else {
        return false;
    };
    let mime = edit::last(&fields, "mimeType")
        .or_else(|| edit::last(&fields, "mime_type"))
        .and_then(edit::string);
    mime.is_some_and(|m| m.starts_with("image/"))
}

#[cfg(test)]
mod tests;
