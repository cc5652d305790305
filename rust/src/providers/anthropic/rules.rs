//! Anthropic's pairing rules, quoting its 400 wording: every `tool_use` answered by a
//! `tool_result` in the next turn, results opening that turn, ids unique across the request,
//! one result per call. Only what the API reads counts: blocks before the latest `compaction`
//! block are not checked (the API drops them).

use rustc_hash::FxHashMap as HashMap;
use std::cell::OnceCell;
use std::sync::Arc;

use super::{read_blocks, start, AnthropicMessage, Block, Start};
use crate::pairing::stray::{self, Stray};
use crate::pairing::{IssueKind, PairingIssue};
use crate::view::Role;

/// A run of consecutive same-role messages `[start, end)`: one turn to the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    pub role: Role,
    pub start: usize,
    pub end: usize,
}

/// The turns of the messages from `first` on.
pub fn turns(messages: &[Arc<AnthropicMessage>], first: usize) -> Vec<Turn> {
    let mut out: Vec<Turn> = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(first) {
        match out.last_mut() {
            Some(turn) if turn.role == m.role => turn.end = i + 1,
            _ => out.push(Turn {
                role: m.role,
                start: i,
                end: i + 1,
            }),
        }
    }
    out
}

/// The messages that make each call, by call id.
fn call_sites(messages: &[Arc<AnthropicMessage>], from: Start) -> HashMap<&str, Vec<usize>> {
    let mut uses: HashMap<&str, Vec<usize>> = HashMap::default();
    for i in from.message..messages.len() {
        for block in read_blocks(messages, from, i) {
            if let Block::ToolUse { id, .. } = block {
                let list = uses.entry(&**id).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
        }
    }
    uses
}

/// Issues found out of order, sorted at the end by (message, rank, discovery).
struct Found {
    issues: Vec<(usize, usize, usize, PairingIssue)>,
}

impl Found {
    fn add(&mut self, i: usize, rank: usize, kind: IssueKind, id: &str, message: String) {
        let n = self.issues.len();
        self.issues.push((
            i,
            rank,
            n,
            PairingIssue {
                kind,
                call_id: Some(id.to_owned()),
                index: i,
                message,
            },
        ));
    }
}

/// Every pairing issue of the messages, in message order.
pub fn validate(messages: &[Arc<AnthropicMessage>]) -> Vec<PairingIssue> {
    let from = start(messages);
    let turns = turns(messages, from.message);
    // Where each call is made, read only for a result that answers no call of its turn.
    let uses = OnceCell::new();
    let mut found = Found { issues: Vec::new() };
    let mut seen: HashMap<&str, usize> = HashMap::default();
    for t in 0..turns.len() {
        let rules = Rules {
            messages,
            from,
            turns: &turns,
        };
        if turns[t].role == Role::Assistant {
            rules.check_calls(t, &mut seen, &mut found);
        } else {
            rules.check_results(t, &uses, &mut found);
        }
    }
    found.issues.sort_by_key(|f| (f.0, f.1, f.2));
    found.issues.into_iter().map(|f| f.3).collect()
}

struct Rules<'a> {
    messages: &'a [Arc<AnthropicMessage>],
    from: Start,
    turns: &'a [Turn],
}

impl<'a> Rules<'a> {
    fn blocks(&self, i: usize) -> &'a [Block] {
        read_blocks(self.messages, self.from, i)
    }

    /// Duplicate ids, and calls the next turn does not answer.
    fn check_calls(&self, t: usize, seen: &mut HashMap<&'a str, usize>, found: &mut Found) {
        let turn = self.turns[t];
        let next = self.turns.get(t + 1);
        let answered: Vec<&str> = next.map_or_else(Vec::new, |n| {
            (n.start..n.end)
                .flat_map(|i| self.blocks(i))
                .filter_map(|b| match b {
                    Block::ToolResult { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect()
        });
        for i in turn.start..turn.end {
            let blocks = self.blocks(i);
            for (b, block) in blocks.iter().enumerate() {
                let Block::ToolUse { id, .. } = block else {
                    continue;
                };
                let b = b + self.offset(i);
                if let Some(&first) = seen.get(&**id) {
                    found.add(
                        i,
                        b,
                        IssueKind::DuplicateId,
                        id,
                        format!(
                            "messages.{i}.content.{b}: `tool_use` ids must be unique \
                             (ringbound: call '{id}' was already made in messages[{first}])"
                        ),
                    );
                    continue;
                }
                seen.insert(id, i);
                if !answered.contains(&&**id) {
                    let place = match next {
                        Some(n) => format!("messages[{}:{}]", n.start, n.end),
                        None => "no message after it".to_owned(),
                    };
                    found.add(
                        i,
                        self.messages[i].blocks.len() + b,
                        IssueKind::MissingResult,
                        id,
                        format!(
                            "messages.{i}: `tool_use` ids were found without `tool_result` \
                             blocks immediately after: {id}. Each `tool_use` block must have a \
                             corresponding `tool_result` block in the next message. \
                             (ringbound: call '{id}' has no result in the next turn, {place})"
                        ),
                    );
                }
            }
        }
    }

    /// Block indices in the API's error paths count from the message's first block, also in
    /// the message holding the compaction block.
    fn offset(&self, i: usize) -> usize {
        if i == self.from.message {
            self.from.block
        } else {
            0
        }
    }

    /// Results that answer no call of the previous turn, answer one twice, or do not open
    /// the turn.
    fn check_results(
        &self,
        t: usize,
        uses: &OnceCell<HashMap<&'a str, Vec<usize>>>,
        found: &mut Found,
    ) {
        let turn = self.turns[t];
        let mut calls: Vec<&str> = Vec::new();
        if let Some(prev) = t.checked_sub(1).map(|p| self.turns[p]) {
            for i in prev.start..prev.end {
                for block in self.blocks(i) {
                    if let Block::ToolUse { id, .. } = block {
                        calls.push(id);
                    }
                }
            }
        }
        let mut answered: HashMap<&str, usize> = HashMap::default();
        let mut leading = true;
        let mut late: Vec<(usize, usize, &str)> = Vec::new();
        for i in turn.start..turn.end {
            for (b, block) in self.blocks(i).iter().enumerate() {
                let Block::ToolResult { id, .. } = block else {
                    leading = false;
                    continue;
                };
                let b = b + self.offset(i);
                if calls.contains(&id.as_str()) {
                    if let Some(&first) = answered.get(id.as_str()) {
                        found.add(
                            i,
                            b,
                            IssueKind::DuplicateId,
                            id,
                            format!(
                                "messages.{i}.content.{b}: each tool_use must have a single \
                                 result. Found multiple tool_result blocks with id: {id} \
                                 (ringbound: call '{id}' was already answered in \
                                 messages[{first}])"
                            ),
                        );
                    } else {
                        answered.insert(id, i);
                        if !leading {
                            late.push((i, b, id));
                        }
                    }
                    continue;
                }
                // Anthropic reports the call as missing in any case, so a late result is
                // late whatever came before it.
                let made = uses
                    .get_or_init(|| call_sites(self.messages, self.from))
                    .get(id.as_str())
                    .map_or(&[][..], Vec::as_slice);
                let stray = stray::classify(i, made, |_| true);
                let detail = match stray {
                    Stray::Orphan => "no tool_use block has this id".to_owned(),
                    Stray::BeforeCall { call } => {
                        format!("its call is made later, in messages[{call}]")
                    }
                    Stray::NotAdjacent { call } | Stray::Duplicate { call } => {
                        format!("its call is in messages[{call}], not in the turn right before")
                    }
                };
                found.add(
                    i,
                    b,
                    stray.kind(),
                    id,
                    format!(
                        "messages.{i}.content.{b}: unexpected `tool_use_id` found in \
                         `tool_result` blocks: {id}. Each `tool_result` block must have a \
                         corresponding `tool_use` block in the previous message. (ringbound: \
                         result for '{id}': {detail})"
                    ),
                );
            }
        }
        let n = late.len();
        for (i, b, id) in late {
            found.add(
                i,
                b,
                IssueKind::ResultNotAdjacent,
                id,
                format!(
                    "messages.{}: Did not find {n} `tool_result` block(s) at the beginning of \
                     this message. Messages following `tool_use` blocks must begin with a \
                     matching number of `tool_result` blocks. (ringbound: the result for '{id}' \
                     comes after other content of the turn messages[{}:{}]; tool_result \
                     blocks must open it)",
                    turn.start, turn.start, turn.end
                ),
            );
        }
    }
}
