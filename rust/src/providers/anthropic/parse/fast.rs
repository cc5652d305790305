//! The direct reading of the messages nearly every session is made of: text, `tool_use`,
//! `tool_result` with text content, thinking. Read into borrowed text, it skips building a
//! `Value` (a map and a copy of every string), most of what reading a request cost. Anything
//! else, or anything the general reading would refuse, gives `None` and is read the general
//! way, which names the error if there is one.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::super::{AnthropicMessage, Block, Parts};
use super::text;
use crate::view::{Role, Text};

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: &'a RawValue,
}

/// The keys the blocks read here have; other keys are skipped, as the general reading does.
#[derive(Deserialize)]
struct RawBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    cache_control: Option<&'a RawValue>,
}

/// The message the general reading makes of `raw`, when it has the shapes read here.
pub fn message(raw: &[u8]) -> Option<AnthropicMessage> {
    let msg: Message = serde_json::from_slice(raw).ok()?;
    let role = match msg.role.as_ref() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    let content = msg.content.get();
    let mut cache_markers = 0;
    let blocks = if content.starts_with('"') {
        vec![text(&serde_json::from_str::<Cow<str>>(content).ok()?)]
    } else {
        let raws: Vec<RawBlock> = serde_json::from_str(content).ok()?;
        raws.into_iter()
            .map(|b| {
                cache_markers += u32::from(b.cache_control.is_some_and(|c| c.get() != "null"));
                block(role, b)
            })
            .collect::<Option<_>>()?
    };
    Some(AnthropicMessage {
        role,
        blocks,
        cache_markers,
    })
}

fn block(role: Role, b: RawBlock) -> Option<Block> {
    Some(match (b.kind.as_ref(), role) {
        ("text", _) => text(&b.text?),
        ("tool_use", Role::Assistant) => {
            let id = b.id.filter(|id| !id.is_empty())?.into_owned();
            let input = b.input?.get();
            if !input.starts_with('{') {
                return None;
            }
            // Written as the general reading writes it (its maps sort their keys).
            let input = serde_json::from_str::<Value>(input).ok()?.to_string();
            Block::ToolUse {
                id: id.into(),
                name: Text::from(&*b.name?),
                input: input.into(),
            }
        }
        ("tool_result", Role::User) => Block::ToolResult {
            id: b.tool_use_id.filter(|id| !id.is_empty())?.into_owned(),
            parts: result_parts(b.content)?,
            is_error: b.is_error.unwrap_or(false),
        },
        ("thinking", Role::Assistant) => Block::Thinking {
            text: Text::from(&*b.thinking?),
        },
        ("redacted_thinking", Role::Assistant) => Block::Thinking {
            text: Text::from(&*b.data?),
        },
        _ => return None,
    })
}

/// A result's content when it is absent, a string, or text blocks only.
fn result_parts(content: Option<&RawValue>) -> Option<Parts> {
    let mut parts = Parts::default();
    let Some(content) = content.map(RawValue::get).filter(|c| *c != "null") else {
        return Some(parts);
    };
    if content.starts_with('"') {
        parts.texts.push(
            serde_json::from_str::<Cow<str>>(content)
                .ok()?
                .into_owned()
                .into(),
        );
        return Some(parts);
    }
    let blocks: Vec<RawBlock> = serde_json::from_str(content).ok()?;
    for b in blocks {
        if b.kind != "text" {
            return None;
        }
        parts.texts.push(Text::from(&*b.text?));
    }
    Some(parts)
}
