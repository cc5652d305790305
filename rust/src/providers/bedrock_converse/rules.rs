//! Bedrock's pairing rules, quoting its ValidationException wording: the conversation opens
//! with a user message and roles alternate; every toolUse of an assistant message is answered by
//! a toolResult in the user message right after it, which holds nothing else; ids are unique
//! within a message; an error result has content. A result its previous turn did not call for
//! is classified by the shared stray classifier.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::OnceCell;
use std::sync::Arc;

use super::{
    BedrockMessage, ToolResult, ALTERNATE, DUPLICATE_RESULTS, DUPLICATE_USES, EMPTY_ERROR_RESULT,
    EXPECTED_RESULTS, MIXED_TURN, START_WITH_USER, TOO_MANY_RESULTS,
};
use crate::pairing::stray::{self, Stray};
use crate::pairing::{issue, IssueKind, PairingIssue};
use crate::view::Role;

fn fill(template: &str, n: usize, ids: &str) -> String {
    template
        .replace("{n}", &n.to_string())
        .replace("{ids}", ids)
}

fn role_name(role: Role) -> &'static str {
    if role == Role::User {
        "user"
    } else {
        "assistant"
    }
}

/// The messages that make each call, by call id.
fn call_sites(messages: &[Arc<BedrockMessage>]) -> HashMap<&str, Vec<usize>> {
    let mut callers: HashMap<&str, Vec<usize>> = HashMap::default();
    for (i, m) in messages.iter().enumerate() {
        for u in &m.uses {
            callers.entry(&*u.id).or_default().push(i);
        }
    }
    callers
}

/// Every pairing issue of the messages, in message order.
pub fn validate(messages: &[Arc<BedrockMessage>]) -> Vec<PairingIssue> {
    // Where each call is made, read only for a result its previous turn did not call for.
    let callers = OnceCell::new();
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if i == 0 && m.role != Role::User {
            out.push(issue(
                IssueKind::FirstMessageNotUser,
                None,
                0,
                format!("{START_WITH_USER} ringbound: messages[0] is an assistant message"),
            ));
        }
        if i > 0 && m.role == messages[i - 1].role {
            out.push(issue(
                IssueKind::RolesNotAlternating,
                None,
                i,
                format!(
                    "{ALTERNATE} ringbound: messages[{}] and messages[{i}] are both {} messages",
                    i - 1,
                    role_name(m.role)
                ),
            ));
        }
        if m.role == Role::Assistant {
            calls(messages, i, &mut out);
        } else {
            results(messages, i, &callers, &mut out);
        }
    }
    out
}

/// Duplicate ids, and calls the next message does not answer.
fn calls(messages: &[Arc<BedrockMessage>], i: usize, out: &mut Vec<PairingIssue>) {
    let mut seen: HashSet<&str> = HashSet::default();
    let mut unique = Vec::new();
    for u in &messages[i].uses {
        if seen.insert(&u.id) {
            unique.push(u);
        } else {
            out.push(issue(
                IssueKind::DuplicateId,
                Some(&u.id),
                i,
                format!(
                    "{} ringbound: messages[{i}] calls `{}` more than once",
                    fill(DUPLICATE_USES, i, &u.id),
                    u.id
                ),
            ));
        }
    }
    let following = messages.get(i + 1).filter(|m| m.role == Role::User);
    let answered: HashSet<&str> = following
        .map(|m| m.results.iter().map(|r| r.id.as_str()).collect())
        .unwrap_or_default();
    let missing: Vec<_> = unique
        .into_iter()
        .filter(|u| !answered.contains(&*u.id))
        .collect();
    let ids = missing
        .iter()
        .map(|u| &*u.id)
        .collect::<Vec<_>>()
        .join(", ");
    for u in &missing {
        let place = if following.is_some() {
            format!("messages[{}] has no toolResult for it", i + 1)
        } else if i + 1 == messages.len() {
            "no user message follows".to_owned()
        } else {
            format!("messages[{}] is not a user message", i + 1)
        };
        out.push(issue(
            IssueKind::MissingResult,
            Some(&u.id),
            i,
            format!(
                "{} ringbound: messages[{i}] calls `{}` ({}) and {place}",
                fill(EXPECTED_RESULTS, i + 1, &ids),
                u.id,
                u.name
            ),
        ));
    }
    if let (Some(first), Some(next)) = (missing.first(), following) {
        if next.results.is_empty() {
            // The results could only go into messages[i + 1], which holds other content: a
            // synthesized result cannot be sent there, so this is not a repairable gap.
            out.push(issue(
                IssueKind::UnrepairableMissingResult,
                Some(&first.id),
                i + 1,
                format!(
                    "{} ringbound: messages[{}] holds other content, and conversation blocks \
                     and tool result blocks cannot be provided in the same turn, so no result \
                     can be synthesized there; add a tool-result turn (and a reply) before it",
                    fill(EXPECTED_RESULTS, i + 1, &ids),
                    i + 1
                ),
            ));
        }
    }
}

/// Results mixed with other content, repeated, empty errors, and results the previous turn
/// did not call for.
fn results<'a>(
    messages: &'a [Arc<BedrockMessage>],
    i: usize,
    callers: &OnceCell<HashMap<&'a str, Vec<usize>>>,
    out: &mut Vec<PairingIssue>,
) {
    let m = &messages[i];
    if !m.results.is_empty() && m.conversation {
        out.push(issue(
            IssueKind::ResultsMixedWithContent,
            None,
            i,
            format!(
                "{} ringbound: messages[{i}] holds toolResult blocks and other content; send \
                 the other content in a later user turn",
                fill(MIXED_TURN, i, "")
            ),
        ));
    }
    let expected: Vec<&str> = i
        .checked_sub(1)
        .map(|p| &messages[p])
        .filter(|p| p.role == Role::Assistant)
        .map(|p| p.uses.iter().map(|u| &*u.id).collect())
        .unwrap_or_default();
    let too_many = m.results.len() > expected.len();
    let mut seen: HashSet<&str> = HashSet::default();
    for r in &m.results {
        if !seen.insert(&r.id) {
            out.push(issue(
                IssueKind::DuplicateId,
                Some(&r.id),
                i,
                format!(
                    "{} ringbound: messages[{i}] answers `{}` more than once",
                    fill(DUPLICATE_RESULTS, i, &r.id),
                    r.id
                ),
            ));
            continue;
        }
        if !expected.contains(&r.id.as_str()) {
            let callers = callers.get_or_init(|| call_sites(messages));
            out.push(stray_issue(m, i, r, &expected, too_many, callers));
        }
        if r.is_error && r.empty {
            out.push(issue(
                IssueKind::EmptyErrorResult,
                Some(&r.id),
                i,
                format!(
                    "{} ringbound: the error result for `{}` has no content",
                    EMPTY_ERROR_RESULT
                        .replace("{n}", &i.to_string())
                        .replace("{b}", &r.block.to_string()),
                    r.id
                ),
            ));
        }
    }
}

/// The issue of a result its previous turn did not call for. Bedrock reports the call it
/// belongs to as missing in any case, so a late result is late, never a duplicate.
fn stray_issue(
    m: &BedrockMessage,
    i: usize,
    r: &ToolResult,
    expected: &[&str],
    too_many: bool,
    callers: &HashMap<&str, Vec<usize>>,
) -> PairingIssue {
    let wording = if too_many {
        fill(TOO_MANY_RESULTS, i, "")
    } else {
        let answered: HashSet<&str> = m.results.iter().map(|r| r.id.as_str()).collect();
        let want: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|e| !answered.contains(e))
            .collect();
        let found: Vec<&str> = m
            .results
            .iter()
            .map(|r| r.id.as_str())
            .filter(|id| !expected.contains(id))
            .collect();
        format!(
            "{}, but found: {}",
            fill(EXPECTED_RESULTS, i, &want.join(", ")),
            found.join(", ")
        )
    };
    let made = callers.get(r.id.as_str()).map_or(&[][..], Vec::as_slice);
    let id = &r.id;
    let stray = stray::classify(i, made, |_| true);
    let detail = match stray {
        Stray::BeforeCall { call } => {
            format!("answers `{id}`, which is only called later, by messages[{call}]")
        }
        Stray::NotAdjacent { call } | Stray::Duplicate { call } => format!(
            "answers `{id}` of messages[{call}], but results belong in the user turn right \
             after the call"
        ),
        Stray::Orphan => format!("answers `{id}`, which no assistant message calls"),
    };
    issue(
        stray.kind(),
        Some(id),
        i,
        format!("{wording} ringbound: messages[{i}] {detail}"),
    )
}
