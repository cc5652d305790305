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

/// Whether message `i` must share a unit with the message after it, so that a tool-result turn
/// kept is always followed by an assistant turn, whatever else is dropped: Bedrock refuses
/// conversation blocks and tool result blocks in one turn, so results next to a user text
/// turn can be neither sent apart nor merged. A tool-result turn holds the plain reply after
/// it (a ring kept keeps its reply: the latest rings are protected where they stand), and
/// that reply holds the user turn after it (a ring dropped while an earlier one is kept, a
/// held error ring, takes its reply and that user turn with it).
fn holds_next(messages: &[Arc<BedrockMessage>], i: usize) -> bool {
    let m = &messages[i];
    let plain_reply = |k: usize| {
        messages
            .get(k)
            .is_some_and(|r| r.role == Role::Assistant && r.uses.is_empty())
    };
    let results = |k: usize| messages.get(k).is_some_and(|r| !r.results.is_empty());
    let reply_holds_user = plain_reply(i) && i > 0 && results(i - 1) && i + 1 < messages.len();
    (m.role == Role::User && results(i) && plain_reply(i + 1)) || reply_holds_user
}
