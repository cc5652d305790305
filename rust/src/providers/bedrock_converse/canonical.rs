//! Bedrock messages as canonical messages, each part at its real cost: an assistant message is
//! one assistant message; a user message is one tool message per toolResult (an error status
//! reads as an error) and one user message with everything else, the results' media included
//! (a canonical tool message carries text only).

use super::{BedrockMessage, Parts};
use crate::providers::{empty, Canonical};
use crate::view::{Message, Role, ToolCall};
use std::sync::Arc;

fn add(msg: &mut Message, parts: &Parts, texts: bool) {
    if texts {
        msg.texts.extend(parts.texts.iter().cloned());
    }
    msg.images.extend(parts.images.iter().cloned());
    msg.other_part_tokens = msg.other_part_tokens.saturating_add(parts.other_tokens);
}

/// The canonical view of the messages.
pub fn canonical(messages: &[Arc<BedrockMessage>]) -> Canonical {
    let mut out = Canonical::default();
    for (i, m) in messages.iter().enumerate() {
        let start = out.messages.len();
        if m.role == Role::Assistant {
            let mut msg = empty(Role::Assistant);
            add(&mut msg, &m.parts, true);
            msg.tool_calls = m
                .uses
                .iter()
                .map(|u| ToolCall {
                    id: u.id.clone(),
                    name: u.name.clone(),
                    arguments: u.input.clone(),
                })
                .collect();
            out.messages.push(msg);
        } else {
            let mut rest = empty(Role::User);
            add(&mut rest, &m.parts, true);
            for r in &m.results {
                let mut result = empty(Role::Tool);
                result.tool_call_id = Some(r.id.clone());
                result.is_error = r.is_error;
                result.texts.clone_from(&r.parts.texts);
                add(&mut rest, &r.parts, false);
                out.messages.push(result);
            }
            let has_rest =
                !rest.texts.is_empty() || !rest.images.is_empty() || rest.other_part_tokens > 0;
            if has_rest || m.results.is_empty() {
                out.messages.push(rest);
            }
        }
        let n = out.messages.len() - start;
        out.layout.groups.extend(std::iter::repeat_n(i, n));
        out.layout.binds_next.extend(std::iter::repeat_n(false, n));
        if holds_next(messages, i) {
            if let Some(last) = out.layout.binds_next.last_mut() {
                *last = true;
            }
        }
    }
    out
}

/// Whether assistant message `i`, a plain reply right after a tool-result turn, must share a
/// unit with the user turn after it: dropped alone, it would leave the tool results next to a
/// user text turn, and Bedrock refuses conversation blocks and tool result blocks in one turn,
/// so the two could not be merged.
fn holds_next(messages: &[Arc<BedrockMessage>], i: usize) -> bool {
    let m = &messages[i];
    m.role == Role::Assistant
        && m.uses.is_empty()
        && i > 0
        && !messages[i - 1].results.is_empty()
        && i + 1 < messages.len()
}
