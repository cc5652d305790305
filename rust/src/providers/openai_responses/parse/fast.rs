//! The direct reading of the items nearly every session is made of: messages of text,
//! `function_call`, `function_call_output` with a string output, `reasoning` with a summary.
//! Read into borrowed text, it skips building a `Value` (a map and a copy of every string),
//! most of what reading a request cost. Anything else, or anything the general reading would
//! refuse, gives `None` and is read the general way, which names the error if there is one.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::super::{Family, Item, Kind};
use crate::view::{Role, Text, ToolCall};

/// The keys the items read here have; other keys are skipped, as the general reading does.
#[derive(Deserialize)]
struct RawItem<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
    #[serde(borrow, default)]
    summary: Option<Vec<Part<'a>>>,
    #[serde(borrow, default)]
    encrypted_content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    refusal: Option<Cow<'a, str>>,
}

fn is_null(raw: Option<&RawValue>) -> bool {
    raw.is_none_or(|r| r.get() == "null")
}

/// A JSON string's text, when `raw` is one.
fn string(raw: &RawValue) -> Option<String> {
    let text = raw.get();
    if !text.starts_with('"') {
        return None;
    }
    serde_json::from_str::<Cow<str>>(text)
        .ok()
        .map(Cow::into_owned)
}

/// The item the general reading makes of `raw`, when it has the shapes read here.
pub fn item(raw: &[u8]) -> Option<Item> {
    let it: RawItem = serde_json::from_slice(raw).ok()?;
    let kind = match (it.kind.as_deref(), &it.role) {
        (None, Some(_)) => "message",
        (Some(k), _) => k,
        (None, None) => return None,
    };
    let mut item = match kind {
        "message" => message(&it)?,
        "function_call" => {
            let key = it.call_id.as_deref().filter(|k| !k.is_empty())?.to_owned();
            let mut item = Item::new("function_call", Kind::Model);
            item.call = Some(ToolCall {
                id: key.as_str().into(),
                name: it.name.as_deref()?.into(),
                arguments: it.arguments.as_deref()?.into(),
            });
            item.key = Some(key);
            item.family = Some(Family::Function);
            item
        }
        "function_call_output" => {
            let key = it.call_id.as_deref().filter(|k| !k.is_empty())?.to_owned();
            let mut item = Item::new("function_call_output", Kind::Output);
            item.texts.push(string(it.output?)?.into());
            item.key = Some(key);
            item.family = Some(Family::Function);
            item
        }
        "reasoning" if is_null(it.content) => {
            let mut item = Item::new("reasoning", Kind::Model);
            for part in it.summary.unwrap_or_default() {
                if part.kind != "summary_text" {
                    return None;
                }
                item.texts.push(Text::from(&*part.text?));
            }
            if let Some(sealed) = &it.encrypted_content {
                item.texts.push(Text::from(&**sealed));
            }
            item
        }
        _ => return None,
    };
    item.item_id = it.id.map(Cow::into_owned);
    Some(item)
}

fn message(it: &RawItem) -> Option<Item> {
    let (role, kind) = match it.role.as_deref()? {
        "user" => (Role::User, Kind::User),
        "assistant" => (Role::Assistant, Kind::Model),
        "system" => (Role::System, Kind::Instruction),
        "developer" => (Role::Developer, Kind::Instruction),
        _ => return None,
    };
    let mut item = Item::new("message", kind);
    item.role = Some(role);
    let content = it.content?;
    if let Some(text) = string(content) {
        item.texts.push(text.into());
        return Some(item);
    }
    let parts: Vec<Part> = serde_json::from_str(content.get()).ok()?;
    for part in parts {
        let text = match (role, part.kind.as_ref()) {
            (Role::Assistant, "output_text")
            | (Role::User | Role::System | Role::Developer, "input_text") => part.text?,
            (Role::Assistant, "refusal") => part.refusal?,
            _ => return None,
        };
        item.texts.push(Text::from(&*text));
    }
    Some(item)
}
