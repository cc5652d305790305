//! Anthropic turns as canonical messages, each part at its real cost: an assistant turn is one
//! assistant message; a user turn is one tool message per `tool_result` (first, as the
//! canonical view pairs by adjacency) and one user message with everything else. What the API
//! does not read is left out: blocks before the latest compaction, whitespace-only text.

use super::rules::{turns, Turn};
use super::{read_blocks, start, AnthropicMessage, Block, Parts};
use crate::providers::{empty, Canonical};
use crate::view::{Message, Role, ToolCall};
use std::sync::Arc;

/// The canonical view of the messages the API reads.
pub fn canonical(messages: &[Arc<AnthropicMessage>]) -> Canonical {
    let from = start(messages);
    let turns = turns(messages, from.message);
    let mut out = Canonical {
        first_counted: from.message,
        ..Canonical::default()
    };
    for (t, turn) in turns.iter().enumerate() {
        let blocks = (turn.start..turn.end).flat_map(|i| read_blocks(messages, from, i));
        let made = match turn.role {
            Role::Assistant => vec![assistant(blocks)],
            _ => user(blocks),
        };
        let n = made.len();
        out.messages.extend(made);
        out.layout.groups.extend(std::iter::repeat_n(turn.start, n));
        out.layout.binds_next.extend(std::iter::repeat_n(false, n));
        if guards_thinking(messages, &turns, t) {
            if let Some(last) = out.layout.binds_next.last_mut() {
                *last = true;
            }
        }
    }
    out
}

fn assistant<'a>(blocks: impl Iterator<Item = &'a Block>) -> Message {
    let mut msg = empty(Role::Assistant);
    for block in blocks {
        match block {
            Block::Text { blank: true, .. } => {}
            Block::Text { text, .. }
            | Block::Thinking { text }
            | Block::Compaction { text }
            | Block::Other { json: text } => msg.texts.push(text.clone()),
            Block::ToolUse { id, name, input } => msg.tool_calls.push(ToolCall {
                id: id.clone(),
                name: name.clone(),
                arguments: input.clone(),
            }),
            Block::ToolResult { parts, .. } | Block::Media(parts) => add(&mut msg, parts),
        }
    }
    msg
}

/// Tool messages for the results, then one user message with the rest (the results' images
/// too: a canonical tool message carries text only), when there is any rest or no result.
fn user<'a>(blocks: impl Iterator<Item = &'a Block>) -> Vec<Message> {
    let mut out = Vec::new();
    let mut rest = empty(Role::User);
    for block in blocks {
        match block {
            Block::ToolResult {
                id,
                parts,
                is_error,
            } => {
                let mut result = empty(Role::Tool);
                result.tool_call_id = Some(id.clone());
                result.is_error = *is_error;
                result.texts.clone_from(&parts.texts);
                rest.images.extend(parts.images.iter().cloned());
                rest.other_part_tokens = rest.other_part_tokens.saturating_add(parts.other_tokens);
                out.push(result);
            }
            Block::Text { blank: true, .. } => {}
            Block::Text { text, .. }
            | Block::Thinking { text }
            | Block::Compaction { text }
            | Block::Other { json: text } => rest.texts.push(text.clone()),
            Block::Media(parts) => add(&mut rest, parts),
            Block::ToolUse { name, input, .. } => {
                rest.texts.push(name.clone());
                rest.texts.push(input.clone());
            }
        }
    }
    let has_rest = !rest.texts.is_empty() || !rest.images.is_empty() || rest.other_part_tokens > 0;
    if has_rest || out.is_empty() {
        out.push(rest);
    }
    out
}

fn add(msg: &mut Message, parts: &Parts) {
    msg.texts.extend(parts.texts.iter().cloned());
    msg.images.extend(parts.images.iter().cloned());
    msg.other_part_tokens = msg.other_part_tokens.saturating_add(parts.other_tokens);
}

/// Whether assistant turn `t` must share a unit with the plain user turn after it: a message
/// holding thinking must open with it, and dropping that user turn alone would merge the
/// assistant turn before (text first) into the thinking turn after it.
fn guards_thinking(messages: &[Arc<AnthropicMessage>], turns: &[Turn], t: usize) -> bool {
    if t + 2 >= turns.len() || turns[t].role != Role::Assistant {
        return false;
    }
    let has = |turn: &Turn, what: fn(&Block) -> bool| {
        messages[turn.start..turn.end]
            .iter()
            .any(|m| m.blocks.iter().any(what))
    };
    !has(&turns[t], |b| matches!(b, Block::ToolUse { .. }))
        && !has(&turns[t + 1], |b| matches!(b, Block::ToolResult { .. }))
        && has(&turns[t + 2], Block::is_thinking)
}
