//! Responses items as canonical messages, each part at its real cost: a model turn is one
//! assistant message, each output a tool message, each user, instruction or compaction item a
//! message of its own. Items folded into one message (a model turn, a reasoning item met inside
//! a ring) each keep their framing, so folding never lowers the count.

use super::rules::Walk;
use super::{Item, Kind};
use crate::pairing::PairingIssue;
use crate::plan::Layout;
use crate::providers::{empty, Canonical};
use crate::view::{Message, Role, ToolCall};
use std::sync::Arc;

/// Tokens every item costs beyond its texts: Chat framing (3) plus the role's one token.
pub const ITEM_FRAMING: u32 = 4;

/// The canonical messages a walk builds, with the items each stands for.
#[derive(Default)]
pub struct Built {
    messages: Vec<Message>,
    /// The first item of each message (its group) and how many items it folds.
    starts: Vec<usize>,
    folded: Vec<u32>,
    /// The assistant message of the ring being built.
    ring: usize,
}

fn add_parts(msg: &mut Message, it: &Item) {
    msg.texts.extend(it.texts.iter().cloned());
    msg.bytes += it.texts.iter().map(|t| t.len()).sum::<usize>();
    msg.images.extend(it.cost.images.iter().cloned());
    msg.other_part_tokens = msg.other_part_tokens.saturating_add(it.cost.opaque_tokens);
}

impl Built {
    fn push(&mut self, msg: Message, start: usize) {
        self.messages.push(msg);
        self.starts.push(start);
        self.folded.push(1);
    }

    /// A user, instruction or compaction item: a message of its own.
    pub fn add_item(&mut self, i: usize, it: &Item) {
        let role = match it.kind {
            Kind::Compaction => Role::Assistant,
            _ => it.role.unwrap_or(Role::User),
        };
        let mut msg = empty(role);
        add_parts(&mut msg, it);
        self.push(msg, i);
    }

    /// A model turn: one assistant message with every item's texts and costs.
    pub fn add_turn(&mut self, i: usize, turn: &[Arc<Item>]) {
        let mut msg = empty(Role::Assistant);
        for it in turn {
            add_parts(&mut msg, it);
        }
        self.push(msg, i);
        self.ring = self.messages.len() - 1;
        if let Some(n) = self.folded.last_mut() {
            *n = u32::try_from(turn.len()).unwrap_or(u32::MAX);
        }
    }

    pub fn add_call(&mut self, call: &ToolCall) {
        self.messages[self.ring].tool_calls.push(call.clone());
    }

    /// A hosted call's own result, as the tool message answering it; a call met late in the
    /// ring brings its texts along.
    pub fn hosted_result(&mut self, k: usize, it: &Item, late: bool) {
        let mut msg = empty(Role::Tool);
        msg.tool_call_id.clone_from(&it.key);
        msg.is_error = it.is_error;
        msg.texts.push(it.result.clone().unwrap_or_default().into());
        if late {
            add_parts(&mut msg, it);
        }
        self.push(msg, k);
    }

    pub fn add_output(&mut self, i: usize, it: &Item) {
        let mut msg = empty(Role::Tool);
        msg.tool_call_id.clone_from(&it.key);
        msg.is_error = it.is_error;
        add_parts(&mut msg, it);
        self.push(msg, i);
    }

    /// An item into the last message, which then stands for it too (a tool result keeps
    /// what it folded apart, as a rewrite of it leaves those items).
    pub fn fold(&mut self, it: &Item) {
        if let Some(msg) = self.messages.last_mut() {
            if msg.role == Role::Tool {
                msg.folded.texts += it.texts.len();
                msg.folded.images += it.cost.images.len();
                msg.folded.other_part_tokens = msg
                    .folded
                    .other_part_tokens
                    .saturating_add(it.cost.opaque_tokens);
            }
            add_parts(msg, it);
            if let Some(n) = self.folded.last_mut() {
                *n += 1;
            }
        }
    }

    /// A `compaction_trigger` goes with the message before it; alone, it is a message.
    pub fn fold_or_add(&mut self, i: usize, it: &Item) {
        if self.messages.is_empty() {
            let mut msg = empty(Role::User);
            add_parts(&mut msg, it);
            self.push(msg, i);
        } else {
            self.fold(it);
        }
    }

    fn finish(mut self) -> Canonical {
        for (msg, &n) in self.messages.iter_mut().zip(&self.folded) {
            let extra = ITEM_FRAMING.saturating_mul(n.saturating_sub(1));
            msg.other_part_tokens = msg.other_part_tokens.saturating_add(extra);
            if msg.role == Role::Tool {
                msg.folded.other_part_tokens = msg.folded.other_part_tokens.saturating_add(extra);
            }
        }
        let n = self.messages.len();
        Canonical {
            messages: self.messages,
            layout: Layout {
                groups: self.starts,
                binds_next: vec![false; n],
                results_named: false,
            },
            first_counted: 0,
        }
    }
}

/// The canonical view of the items.
pub fn canonical(items: &[Arc<Item>]) -> Canonical {
    Walk::new(items).built.finish()
}

/// The pairing issues and the canonical view of the items, from one walk.
pub fn issues_and_canonical(items: &[Arc<Item>]) -> (Vec<PairingIssue>, Canonical) {
    let mut walk = Walk::new(items);
    let built = std::mem::take(&mut walk.built);
    (walk.issues(), built.finish())
}
