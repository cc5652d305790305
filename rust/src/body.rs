//! The gateway path: a whole request body in, the body to send out. The top-level object is
//! split into its fields without building values; the history is planned by the core; the
//! output keeps every other field's bytes, copies kept messages as the input's own bytes and
//! renders only the insertions.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::cache::CountCache;
use crate::error::CoreError;
use crate::json_array;
use crate::plan::{self, Item, Plan, PlanConfig, SYNTHESIZED_RESULT_TEXT};
use crate::request::{check_count, load_given, Given, Limits, Scheme};
use crate::rewrite::RewriteKind;

/// The fields a body may give its output reserve in, by provider (the first present wins),
/// each step with its spellings: Gemini reads its proto field names
/// (`generation_config.max_output_tokens`) as well as their JSON names.
const RESERVE_KEYS: [&[&[&str]]; 5] = [
    &[&["max_completion_tokens"]],
    &[&["max_tokens"]],
    &[&["max_output_tokens"]],
    &[
        &["generationConfig", "generation_config"],
        &["maxOutputTokens", "max_output_tokens"],
    ],
    &[&["inferenceConfig"], &["maxTokens"]],
];

/// Fields an OpenAI Chat body sends only with its `tools`: dropped with them, since the
/// provider refuses a `tool_choice` without tools.
const WITH_TOOLS: [&str; 3] = ["tools", "tool_choice", "parallel_tool_calls"];

pub(crate) fn invalid(reason: impl Into<String>) -> CoreError {
    CoreError::InvalidBody {
        reason: reason.into(),
    }
}

pub use crate::json::fields::Fields;

/// The raw bytes of each element of a JSON array, in order.
pub type Elements<'a> = Vec<&'a [u8]>;

/// A body's history array split: its elements and the byte range of the whole array.
pub type History<'a> = (Elements<'a>, std::ops::Range<usize>);

/// A request body split into its top-level fields.
pub struct Body<'a> {
    fields: Fields<'a>,
}

impl<'a> Body<'a> {
    /// Splits `bytes`: InvalidBody when they exceed `max_request_bytes`, are not UTF-8, not
    /// JSON, or not an object.
    pub fn parse(bytes: &'a [u8], limits: Limits) -> Result<Body<'a>, CoreError> {
        let fields = Fields::parse(text(bytes, limits)?).map_err(not_an_object)?;
        Ok(Body { fields })
    }

    /// `parse` for an OpenAI Chat body, with its `messages` array split by `json_array` rather
    /// than read through by serde (on a cached call that read was a third of the time): the
    /// split proves the structure between the messages, and each message is proven when it is
    /// parsed on a cache miss, or was, byte for byte, when it was cached. Every other field is
    /// read by serde as `parse` reads it. Returns the messages when they were split so; with
    /// them, the body may still be malformed inside a message, and `malformed` must decide
    /// any error met later. Without them (a body the scan cannot read, or with no `messages`
    /// array, or two), the body was read by `parse`.
    pub fn parse_chat(
        bytes: &'a [u8],
        limits: Limits,
    ) -> Result<(Body<'a>, Option<Elements<'a>>), CoreError> {
        let (body, split) = Body::parse_with_history(bytes, "messages", limits)?;
        Ok((body, split.map(|(messages, _)| messages)))
    }

    /// `parse_chat` for the history array `key` of any provider's body: its elements and the
    /// byte range of the whole array, when the scan can split it.
    pub fn parse_with_history(
        bytes: &'a [u8],
        key: &str,
        limits: Limits,
    ) -> Result<(Body<'a>, Option<History<'a>>), CoreError> {
        let json = text(bytes, limits)?;
        Ok(match split_history(json, key) {
            Some((fields, elements, range)) => (Body { fields }, Some((elements, range))),
            None => (Body::parse(bytes, limits)?, None),
        })
    }

    /// The history array `key` of a body the scan can read (see `parse_chat`): its elements
    /// and the byte range of the whole array. None when the scan cannot tell (not an object,
    /// a stray byte between fields, no such array or two): the caller then reads the body
    /// some other way, which reports what is wrong.
    pub fn split_history(
        bytes: &'a [u8],
        key: &str,
        limits: Limits,
    ) -> Option<(Elements<'a>, std::ops::Range<usize>)> {
        let json = text(bytes, limits).ok()?;
        let (_, elements, range) = split_history(json, key)?;
        Some((elements, range))
    }

    /// InvalidBody when the body sets both of OpenAI's cache lifetimes, which OpenAI refuses:
    /// "`prompt_cache_options.ttl` supersedes `prompt_cache_retention`... Setting both on the
    /// same request is rejected by OpenAI".
    pub fn check_cache_lifetimes(&self) -> Result<(), CoreError> {
        let set = |v: &RawValue| v.get() != "null";
        if !self.fields.get("prompt_cache_retention").is_some_and(set) {
            return Ok(());
        }
        match self.nested(&[&["prompt_cache_options"], &["ttl"]])? {
            Some((_, ttl)) if set(ttl) => Err(invalid(
                "prompt_cache_options.ttl cannot be combined with prompt_cache_retention: set \
                 prompt_cache_options.ttl on GPT-5.6 and later, prompt_cache_retention on \
                 earlier models",
            )),
            _ => Ok(()),
        }
    }

    /// The value of the top-level field `key`.
    pub fn field(&self, key: &str) -> Option<&'a RawValue> {
        self.fields.get(key)
    }

    /// The body's `model`, when it is a string.
    pub fn model(&self) -> Option<String> {
        self.fields
            .get("model")
            .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
    }

    /// The output reserve the body asks for (`max_tokens` and each provider's spelling of
    /// it) with the field that gave it, as the body spells it; None when it names none.
    /// InvalidBody when the field is not a count, or a field on its path is given under two
    /// spellings.
    pub fn reserve(&self) -> Result<Option<(String, u64)>, CoreError> {
        for path in RESERVE_KEYS {
            let Some((field, value)) = self.nested(path)? else {
                continue;
            };
            if value.get() == "null" {
                continue;
            }
            return match serde_json::from_str::<u64>(value.get()) {
                Ok(n) => Ok(Some((field, n))),
                Err(_) => Err(invalid(format!(
                    "{field} must be a non-negative integer, got {}",
                    preview(value.get())
                ))),
            };
        }
        Ok(None)
    }

    /// The value at `path` (each step one of its spellings) and the path as spelled.
    fn nested(&self, path: &[&[&str]]) -> Result<Option<(String, &'a RawValue)>, CoreError> {
        let Some((first, mut value)) = one_of(&self.fields, path[0])? else {
            return Ok(None);
        };
        let mut names = vec![first];
        for spellings in &path[1..] {
            if !value.get().starts_with('{') {
                return Ok(None);
            }
            let inner = Fields::parse(value.get())
                .map_err(|e| invalid(format!("{} is not an object ({e})", names.join("."))))?;
            match one_of(&inner, spellings)? {
                Some((name, v)) => {
                    names.push(name);
                    value = v;
                }
                None => return Ok(None),
            }
        }
        Ok(Some((names.join("."), value)))
    }
}

/// The field of `fields` given under one of `spellings`, with the spelling used; InvalidBody
/// when two are given (which one the provider reads is not documented).
fn one_of<'a, 's>(
    fields: &Fields<'a>,
    spellings: &[&'s str],
) -> Result<Option<(&'s str, &'a RawValue)>, CoreError> {
    let mut found: Option<(&'s str, &'a RawValue)> = None;
    for &name in spellings {
        if let Some(value) = fields.get(name) {
            if let Some((first, _)) = found {
                return Err(invalid(format!(
                    "the body gives both {first} and {name}, two spellings of one field; \
                     send only one of them"
                )));
            }
            found = Some((name, value));
        }
    }
    Ok(found)
}

/// The body's text: InvalidBody when it exceeds `max_request_bytes` or is not UTF-8.
fn text(bytes: &[u8], limits: Limits) -> Result<&str, CoreError> {
    if bytes.len() > limits.max_request_bytes {
        return Err(invalid(format!(
            "the request body is {} bytes, over max_request_bytes = {}",
            bytes.len(),
            limits.max_request_bytes
        )));
    }
    std::str::from_utf8(bytes).map_err(|e| {
        invalid(format!(
            "the request body is not UTF-8 (invalid byte at {})",
            e.valid_up_to()
        ))
    })
}

fn not_an_object(e: serde_json::Error) -> CoreError {
    if e.classify() == serde_json::error::Category::Data {
        invalid("the request body must be a JSON object")
    } else {
        invalid(format!("the request body is not valid JSON ({e})"))
    }
}

/// The error `Body::parse` gives a body whose messages `Body::parse_chat` split unread, if it
/// gives one: `parse` reads the whole body first, so its error is the one to report.
fn malformed(bytes: &[u8]) -> Option<CoreError> {
    let json = std::str::from_utf8(bytes).ok()?;
    Fields::parse(json).err().map(not_an_object)
}

/// Stands for the history array among the fields `split_history` read: the value is never
/// read (`render` writes the messages from the split), so it needs no parse of the array.
const SPLIT_ARRAY: &RawValue = RawValue::NULL;

/// The top-level fields of `json` with the history array `key` split by `json_array` instead
/// of read by serde, every other key and value read by serde, and the array's byte range;
/// None when the scan cannot tell (not an object, a stray byte between fields, no such array
/// or two): serde then decides and reports.
pub(crate) fn split_history<'a>(
    json: &'a str,
    key: &str,
) -> Option<(Fields<'a>, Elements<'a>, std::ops::Range<usize>)> {
    let b = json.as_bytes();
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(b, i + 1);
    let mut fields = Vec::new();
    let mut messages = None;
    let mut range = 0..0;
    if b.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let raw_key = raw_value(json, i)?;
            let name: Cow<str> = serde_json::from_str(raw_key.get()).ok()?;
            i = skip_ws(b, i + raw_key.get().len());
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            let value = if name == key && b.get(i) == Some(&b'[') && messages.is_none() {
                let (parts, end) = json_array::split_prefix(&b[i..])?;
                messages = Some(parts);
                range = i..i + end;
                i += end;
                SPLIT_ARRAY
            } else {
                let value = raw_value(json, i)?;
                i += value.get().len();
                value
            };
            fields.push((name, value));
            i = skip_ws(b, i);
            match b.get(i) {
                Some(b',') => i = skip_ws(b, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    let once = fields.iter().filter(|(k, _)| k == key).count() == 1;
    if skip_ws(b, i) != b.len() || !once {
        return None;
    }
    Some((Fields(fields), messages?, range))
}

/// The JSON value starting at byte `i` of `json`, read by serde.
fn raw_value(json: &str, i: usize) -> Option<&RawValue> {
    let rest = json.get(i..)?;
    let value = <&RawValue>::deserialize(&mut serde_json::Deserializer::from_str(rest)).ok()?;
    // serde skips whitespace before a value; the caller skipped it already.
    (value.get().as_ptr() == rest.as_ptr()).then_some(value)
}

/// JSON's whitespace (not `u8::is_ascii_whitespace`, which takes a form feed).
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

/// The first characters of a JSON value, for an error message.
fn preview(json: &str) -> String {
    let mut out: String = json.chars().take(40).collect();
    if out.len() < json.len() {
        out.push('…');
    }
    out
}

/// How the budget follows the body's output reserve: `limit - reserve - margin`, of which an
/// assembly without state fills `fill` (`emergency_ratio`), as `AssemblyConfig.budget` does.
#[derive(Clone, Copy, Debug)]
pub struct BudgetRule {
    pub limit: u64,
    pub margin: u64,
    pub fill: f64,
    pub default_reserve: u64,
}

impl BudgetRule {
    /// The budget under the body's reserve (`field` and its count), or the config's.
    pub fn budget(&self, reserve: Option<(String, u64)>) -> Result<u64, CoreError> {
        let (field, reserve) =
            reserve.unwrap_or_else(|| ("output_reserve_tokens".into(), self.default_reserve));
        match self
            .limit
            .checked_sub(reserve)
            .and_then(|b| b.checked_sub(self.margin))
        {
            Some(b) if b > 0 => Ok((self.fill * b as f64).floor() as u64),
            _ => Err(no_budget(&field, reserve, self.limit, self.margin)),
        }
    }
}

/// The error for a body whose output reserve leaves no budget, worded as the dict path's
/// (`ringbound.body.no_budget`). It names `model_input_limit`: the body's own field takes the
/// place of `output_reserve_tokens`, so changing that key would change nothing.
pub fn no_budget(field: &str, reserve: u64, limit: u64, margin: u64) -> CoreError {
    let left = i128::from(limit) - i128::from(reserve) - i128::from(margin);
    CoreError::Config {
        key: "model_input_limit".into(),
        reason: format!(
            "{limit} leaves no budget for the body's {field} {reserve} (its output reserve, in \
             place of output_reserve_tokens) and safety_margin_tokens {margin}: {limit} - \
             {reserve} - {margin} = {left}; raise model_input_limit or send a smaller {field}"
        ),
    }
}

/// An assembled OpenAI Chat body and what the plan did.
pub struct Assembled {
    pub body: Vec<u8>,
    pub plan: Plan,
    pub messages_before: usize,
    pub messages_after: usize,
}

/// Assembles an OpenAI Chat Completions body: plans its `messages` (and `tools`) under the
/// budget its output reserve leaves, and writes the body to send.
pub fn assemble_openai_chat(
    bytes: &[u8],
    cfg: &PlanConfig,
    rule: BudgetRule,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<Assembled, CoreError> {
    let (body, split) = Body::parse_chat(bytes, limits)?;
    let unread = split.is_some();
    assemble_chat(&body, split, bytes.len(), cfg, rule, scheme, limits, cache).map_err(|e| {
        // A body whose messages were split unread may be malformed inside one that was not
        // parsed before the error: report what reading the whole body first reports.
        match unread.then(|| malformed(bytes)).flatten() {
            Some(first) => first,
            None => e,
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn assemble_chat(
    body: &Body,
    split: Option<Elements>,
    size: usize,
    cfg: &PlanConfig,
    rule: BudgetRule,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<Assembled, CoreError> {
    body.check_cache_lifetimes()?;
    let messages = body
        .fields
        .get("messages")
        .ok_or_else(|| invalid("an OpenAI Chat body needs `messages`"))?;
    if split.is_none() && !messages.get().starts_with('[') {
        return Err(invalid(format!(
            "messages must be a list, got {}",
            preview(messages.get())
        )));
    }
    let tools = match body.fields.get("tools") {
        None => None,
        Some(t) if t.get() == "null" => None,
        Some(t) if t.get().starts_with('[') => Some(t.get().as_bytes()),
        Some(t) => {
            return Err(invalid(format!(
                "tools must be a list, got {}",
                preview(t.get())
            )))
        }
    };
    let budget = rule.budget(body.reserve()?)?;
    let elements = match split {
        Some(elements) => elements,
        None => json_array::split(messages.get().as_bytes())?,
    };
    check_count(elements.len(), limits)?;
    let given = elements.iter().map(|raw| Given::Json(raw)).collect();
    let req = load_given(given, None, tools, scheme, cache)?;
    let per_call;
    let cfg = if cfg.budget == budget {
        cfg
    } else {
        per_call = PlanConfig {
            budget,
            ..cfg.clone()
        };
        &per_call
    };
    let plan = plan::plan(&req, cfg, &[], None)?;
    let out = render(&body.fields, &elements, &plan, size)?;
    Ok(Assembled {
        body: out,
        messages_before: elements.len(),
        messages_after: plan.items.len(),
        plan,
    })
}

/// The body to send: the input's fields in order, `messages` rewritten from the plan.
fn render(
    fields: &Fields,
    elements: &[&[u8]],
    plan: &Plan,
    size: usize,
) -> Result<Vec<u8>, CoreError> {
    let mut out = Vec::with_capacity(size);
    out.push(b'{');
    let mut first = true;
    for (key, value) in &fields.0 {
        if plan.tools_dropped && WITH_TOOLS.contains(&key.as_ref()) {
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_str(&mut out, key);
        out.push(b':');
        if key == "messages" {
            render_messages(&mut out, elements, plan)?;
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    Ok(out)
}

fn render_messages(out: &mut Vec<u8>, elements: &[&[u8]], plan: &Plan) -> Result<(), CoreError> {
    out.push(b'[');
    for (n, item) in plan.items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        match item {
            Item::Keep(i) => out.extend_from_slice(elements[*i]),
            Item::SynthesizedResult { call_id } => {
                out.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
                write_str(out, call_id);
                out.extend_from_slice(br#","content":"#);
                write_str(out, SYNTHESIZED_RESULT_TEXT);
                out.push(b'}');
            }
            Item::LedgerNote { text, role } => {
                out.extend_from_slice(br#"{"role":"#);
                write_str(out, role.as_str());
                out.extend_from_slice(br#","content":"#);
                write_str(out, text);
                out.push(b'}');
            }
            Item::Rewrite { index, kind, text } => rewrite(out, elements[*index], *kind, text)?,
            // The native path plans without a summary reserve, so the core asks for no
            // summary; a summarizer takes the dict path.
            Item::Summary { .. } => {
                return Err(invalid(
                    "a summary was planned on the body path, which runs no summarizer",
                ))
            }
        }
    }
    out.push(b']');
    Ok(())
}

/// A kept message with its content rewritten, every other field as the input's bytes.
fn rewrite(out: &mut Vec<u8>, raw: &[u8], kind: RewriteKind, text: &str) -> Result<(), CoreError> {
    let json = std::str::from_utf8(raw).map_err(|_| invalid("a message is not UTF-8"))?;
    let fields = Fields::parse(json)
        .map_err(|e| invalid(format!("a rewritten message is not an object ({e})")))?;
    out.push(b'{');
    for (n, (key, value)) in fields.0.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        if key != "content" {
            out.extend_from_slice(value.get().as_bytes());
            continue;
        }
        match kind {
            RewriteKind::Truncated | RewriteKind::Deduped => write_str(out, text),
            RewriteKind::Media => media(out, value, text),
        }
    }
    out.push(b'}');
    Ok(())
}

/// A content list with each image part replaced by the text part `text`.
fn media(out: &mut Vec<u8>, content: &RawValue, text: &str) {
    #[derive(Deserialize)]
    struct Part<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    let Ok(parts) = serde_json::from_str::<Vec<&RawValue>>(content.get()) else {
        out.extend_from_slice(content.get().as_bytes());
        return;
    };
    out.push(b'[');
    for (n, part) in parts.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let image = serde_json::from_str::<Part>(part.get())
            .is_ok_and(|p| p.kind.as_deref() == Some("image_url"));
        if image {
            out.extend_from_slice(br#"{"type":"text","text":"#);
            write_str(out, text);
            out.push(b'}');
        } else {
            out.extend_from_slice(part.get().as_bytes());
        }
    }
    out.push(b']');
}

pub(crate) use crate::json::write::write_str;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::count::{Encoding, DEFAULT_BACKEND};
    use crate::plan::Stage;
    use proptest::prelude::*;

    fn limits() -> Limits {
        Limits {
            max_messages: 1000,
            max_request_bytes: 1 << 20,
        }
    }

    #[test]
    fn fields_keep_order_and_bytes() {
        let body = Body::parse(br#"{"b": [1, 2], "a":{"x" :1}}"#, limits()).unwrap();
        let keys: Vec<_> = body
            .fields
            .0
            .iter()
            .map(|(k, v)| (k.as_ref(), v.get()))
            .collect();
        assert_eq!(keys, [("b", "[1, 2]"), ("a", r#"{"x" :1}"#)]);
    }

    #[test]
    fn malformed_bodies_are_invalid_body() {
        for bad in [&b"[1]"[..], b"{\"a\":", b"\xff", b"", b"{} x"] {
            assert!(matches!(
                Body::parse(bad, limits()),
                Err(CoreError::InvalidBody { .. })
            ));
        }
        let small = Limits {
            max_messages: 10,
            max_request_bytes: 4,
        };
        assert!(Body::parse(b"{\"a\":1}", small).is_err());
    }

    #[test]
    fn reserve_reads_each_spelling() {
        let read = |j: &str| Body::parse(j.as_bytes(), limits()).unwrap().reserve();
        let some = |f: &str, n| Some((f.to_string(), n));
        assert_eq!(read(r#"{"max_tokens":5}"#).unwrap(), some("max_tokens", 5));
        assert_eq!(
            read(r#"{"generationConfig":{"maxOutputTokens":7}}"#).unwrap(),
            some("generationConfig.maxOutputTokens", 7)
        );
        assert_eq!(
            read(r#"{"inferenceConfig":{"maxTokens":9}}"#).unwrap(),
            some("inferenceConfig.maxTokens", 9)
        );
        assert_eq!(
            read(r#"{"generation_config":{"max_output_tokens":8}}"#).unwrap(),
            some("generation_config.max_output_tokens", 8)
        );
        assert_eq!(
            read(r#"{"generationConfig":{"max_output_tokens":6}}"#).unwrap(),
            some("generationConfig.max_output_tokens", 6)
        );
        for both in [
            r#"{"generationConfig":{"maxOutputTokens":1},"generation_config":{}}"#,
            r#"{"generation_config":{"maxOutputTokens":1,"max_output_tokens":1}}"#,
        ] {
            let Err(CoreError::InvalidBody { reason }) = read(both) else {
                panic!("{both} is refused");
            };
            assert!(reason.starts_with("the body gives both "), "{reason}");
        }
        assert_eq!(read(r#"{"max_tokens":null}"#).unwrap(), None);
        let lifetimes = |json: &str| {
            Body::parse(json.as_bytes(), limits())
                .unwrap()
                .check_cache_lifetimes()
        };
        let both = r#"{"prompt_cache_retention":"24h","prompt_cache_options":{"ttl":"1h"}}"#;
        assert!(lifetimes(both)
            .unwrap_err()
            .to_string()
            .contains("cannot be combined"));
        for alone in [
            r#"{"prompt_cache_retention":"24h"}"#,
            r#"{"prompt_cache_options":{"ttl":"1h"}}"#,
            r#"{"prompt_cache_retention":null,"prompt_cache_options":{"ttl":"1h"}}"#,
            r#"{"prompt_cache_retention":"24h","prompt_cache_options":{"mode":"auto","ttl":null}}"#,
            r#"{"prompt_cache_retention":"24h","prompt_cache_options":"x"}"#,
        ] {
            assert!(lifetimes(alone).is_ok(), "{alone}");
        }
        assert!(read(r#"{"max_tokens":-1}"#).is_err());
        assert!(read(r#"{"max_tokens":"x"}"#).is_err());
    }

    #[test]
    fn strings_escape_as_json() {
        let mut out = Vec::new();
        write_str(&mut out, "a\"b\\\n\u{1}é");
        let back: String = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, "a\"b\\\n\u{1}é");
    }

    fn plan_config() -> PlanConfig {
        PlanConfig {
            budget: 0,
            recent_tool_rings: 1,
            recent_user_turns: 1,
            pin_first_user_message: true,
            pin_side_effect_ledger: true,
            pin_security_system_prompt: true,
            short_error_result_tokens: 50,
            max_held_error_rings: 2,
            side_effect_tools: Default::default(),
            ledger_fields: Default::default(),
            stages: Stage::DEFAULT_ORDER.to_vec(),
            drop_tools_schema: true,
            synthesize_missing_results: false,
            max_tool_result_tokens: 4000,
            min_result_tokens: 500,
            min_recent_tool_rings: 1,
            min_recent_user_turns: 1,
            summary_reserve: None,
            recorded_ledger: Vec::new(),
            replay: None,
        }
    }

    /// What each path makes of `bytes`: the body, or the error.
    type Outcome = Result<Vec<u8>, String>;

    fn run(bytes: &[u8], cache: &CountCache, whole_first: bool) -> Outcome {
        let rule = BudgetRule {
            limit: 400,
            margin: 0,
            fill: 1.0,
            default_reserve: 0,
        };
        let (cfg, scheme) = (
            plan_config(),
            Scheme::openai(Encoding::O200kBase, DEFAULT_BACKEND),
        );
        let out = if whole_first {
            // The path before the split: serde reads the whole body, then the rest runs.
            Body::parse(bytes, limits()).and_then(|body| {
                assemble_chat(
                    &body,
                    None,
                    bytes.len(),
                    &cfg,
                    rule,
                    scheme,
                    limits(),
                    cache,
                )
            })
        } else {
            assemble_openai_chat(bytes, &cfg, rule, scheme, limits(), cache)
        };
        out.map(|done| done.body).map_err(|e| format!("{e:?}"))
    }

    /// A chat body of `turns` tool rings with `text` in each, `tools` and a `model`.
    fn chat_body(turns: usize, text: &str, tools: bool) -> String {
        let mut messages = vec![serde_json::json!({"role": "user", "content": text})];
        for n in 0..turns {
            let id = format!("call_{n}");
            messages.push(serde_json::json!({"role": "assistant", "content": null,
                "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "grep", "arguments": "{}"}}]}));
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": id,
                "content": text.repeat(n + 1)}));
        }
        let tools = if tools {
            r#", "tools": [{"type":"function","function":{"name":"grep"}}], "tool_choice": "auto""#
        } else {
            ""
        };
        let messages = serde_json::to_string_pretty(&messages).unwrap();
        format!("{{ \"model\" : \"gpt-4o\", \"messages\": {messages}{tools}, \"n\": [1, {{}}]}}")
    }

    #[test]
    fn chat_bodies_split_their_messages_unread() {
        let body = chat_body(3, "hi", true);
        let (split, messages) = Body::parse_chat(body.as_bytes(), limits()).unwrap();
        let whole = Body::parse(body.as_bytes(), limits()).unwrap();
        assert_eq!(messages.unwrap().len(), 7);
        let keys =
            |b: &Body| -> Vec<String> { b.fields.0.iter().map(|(k, _)| k.to_string()).collect() };
        assert_eq!(keys(&split), keys(&whole));
        for key in ["model", "tools", "tool_choice", "n"] {
            assert_eq!(
                split.fields.get(key).unwrap().get(),
                whole.fields.get(key).unwrap().get()
            );
        }
        // What the scan cannot tell is left to serde: two `messages`, no array, no object.
        for body in [
            r#"{"messages": [], "messages": []}"#,
            r#"{"messages": "hi"}"#,
            r#"{"model": "x"}"#,
            r#"{"messages": [] "x": 1}"#,
            r#"[{"messages": []}]"#,
        ] {
            assert!(Body::parse_chat(body.as_bytes(), limits()).map_or(true, |(_, m)| m.is_none()));
        }
    }

    proptest! {
        /// Any string, written as JSON, reads back as itself, and escapes only what JSON
        /// must: the eight-byte steps skip no quote, backslash or control byte wherever it
        /// falls in a step.
        #[test]
        fn a_string_written_reads_back_as_itself(
            s in r#"[a-z"\\\u{0}-\u{1f}\u{7f}é€😀]{0,40}"#,
        ) {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            let back: String = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(&back, &s);
            let escapes = s.bytes().filter(|&b| b == b'"' || b == b'\\' || b < 0x20).count();
            prop_assert_eq!(out.iter().filter(|&&b| b == b'\\').count(), escapes + s.matches('\\').count());
        }

        /// Any chat body, whole or damaged (cut, a byte changed, added or taken out, a key
        /// repeated), with its messages cached or not: the split path gives the body or the
        /// error that reading the whole body first gives.
        #[test]
        fn the_split_path_answers_as_the_whole_read(
            turns in 0usize..5,
            text in r#"[a-z"\\\\{}\[\],:é\u{1}]{0,12}"#,
            tools in any::<bool>(),
            damage in 0u8..6,
            at in any::<prop::sample::Index>(),
            byte in prop_oneof![
                Just(b'"'), Just(b'\\'), Just(b','), Just(b'}'), Just(b']'), Just(b'['),
                Just(b' '), Just(0x0c), Just(0xff), any::<u8>()
            ],
            warm in any::<bool>(),
        ) {
            let body = chat_body(turns, &text, tools).into_bytes();
            let k = at.index(body.len());
            let mut bad = body.clone();
            match damage {
                0 => {}
                1 => bad.truncate(k),
                2 => bad[k] = byte,
                3 => bad.insert(k, byte),
                4 => { bad.remove(k); }
                _ => {
                    let end = bad.len() - 1;
                    bad.splice(end..end, br#", "messages": [{"role": "user", "content": "x"}]"#.iter().copied());
                }
            }
            let split_cache = CountCache::new(1000, 1 << 20);
            let whole_cache = CountCache::new(1000, 1 << 20);
            if warm {
                run(&body, &split_cache, false).unwrap();
                run(&body, &whole_cache, true).unwrap();
            }
            prop_assert_eq!(run(&bad, &split_cache, false), run(&bad, &whole_cache, true));
        }
    }
}
