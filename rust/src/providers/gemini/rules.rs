//! Gemini's pairing rules, quoting its 400 wording: a call turn (a model content with
//! functionCall parts) follows a user turn or a response turn, and the user content right after
//! it answers each of its calls (by id when the response has one, else by name, in order).
//! Responses anywhere else are strays, classified by the shared classifier. In a conversation
//! whose calls are signed, each call step of the current turn must still carry its signature.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use super::{
    Call, GeminiContent, Response, ALTERNATE, CALL_TURN_POSITION, COUNT_MISMATCH,
    MISSING_SIGNATURE, RESPONSE_TURN_POSITION,
};
use crate::pairing::stray::{self, Stray};
use crate::pairing::{issue, IssueKind, PairingIssue};
use crate::providers::pynames::repr_str;
use crate::view::Role;

/// Which call a response of a response turn answers: (content, index in its `calls`), by the
/// response's (content, index in its `responses`).
pub type Answer = HashMap<(usize, usize), (usize, usize)>;

/// A call the turn after it did not answer, and why.
struct Open {
    content: usize,
    call: usize,
    why: String,
}

/// Issues found out of order, sorted at the end by (content, rank) and then discovery.
#[derive(Default)]
struct Found {
    issues: Vec<(usize, usize, PairingIssue)>,
}

impl Found {
    fn add(&mut self, kind: IssueKind, id: Option<&str>, index: usize, rank: usize, text: String) {
        self.issues
            .push((index, rank, issue(kind, id, index, text)));
    }
}

fn describe(name: &str, pos: usize, id: Option<&str>) -> String {
    let ident = id.map_or(String::new(), |id| format!(", id {}", repr_str(id)));
    format!("`{name}` (parts[{pos}]{ident})")
}

/// Whether call `c` is one response `r` may answer: the same id when `r` has one, else the
/// same name.
fn same(c: &Call, r: &Response) -> bool {
    match &r.id {
        Some(id) => c.id.as_deref() == Some(id),
        None => *c.name == *r.name,
    }
}

/// The call of `calls` a response answers: the same id; else (no id on one side) the same name,
/// in order.
fn matching(calls: &[Call], used: &[bool], r: &Response) -> Option<usize> {
    let free = |m: &usize| !used[*m];
    let ids = (0..calls.len()).filter(free);
    if let Some(id) = &r.id {
        if let Some(m) = ids.clone().find(|&m| calls[m].id.as_deref() == Some(id)) {
            return Some(m);
        }
    }
    if let Some(m) = ids
        .clone()
        .find(|&m| calls[m].id.is_none() && *calls[m].name == *r.name)
    {
        return Some(m);
    }
    if r.id.is_none() {
        return ids.clone().find(|&m| *calls[m].name == *r.name);
    }
    None
}

/// Every pairing issue of the contents, in content order.
pub fn validate(contents: &[Arc<GeminiContent>]) -> Vec<PairingIssue> {
    pair(contents).0
}

/// Which call each response of a response turn answers.
pub fn answers(contents: &[Arc<GeminiContent>]) -> Answer {
    pair(contents).1
}

/// Every pairing issue of the contents, and which call each response answers.
pub fn pair(cs: &[Arc<GeminiContent>]) -> (Vec<PairingIssue>, Answer) {
    let mut found = Found::default();
    let mut answers = Answer::default();
    let mut open: Vec<Open> = Vec::new();
    let mut strays: Vec<(usize, usize)> = Vec::new();
    for (k, turn) in cs.iter().enumerate() {
        let prev = k.checked_sub(1).map(|p| &cs[p]);
        if turn.role == Role::Assistant {
            let calls = !turn.calls.is_empty();
            match prev {
                None if calls => found.add(
                    IssueKind::CallTurnMisplaced,
                    None,
                    k,
                    0,
                    format!(
                        "{CALL_TURN_POSITION} ringbound: contents[{k}] calls functions but \
                         opens the conversation"
                    ),
                ),
                None => found.add(
                    IssueKind::FirstTurnNotUser,
                    None,
                    k,
                    0,
                    format!(
                        "{ALTERNATE} ringbound: contents[{k}] is a model turn; the history must \
                         start with a user turn"
                    ),
                ),
                Some(p) if calls && p.role == Role::Assistant && p.calls.is_empty() => found.add(
                    IssueKind::CallTurnMisplaced,
                    None,
                    k,
                    0,
                    format!(
                        "{CALL_TURN_POSITION} ringbound: contents[{k}] calls functions right \
                         after the model turn contents[{}]",
                        k - 1
                    ),
                ),
                Some(_) => {}
            }
            let next = cs.get(k + 1);
            if calls && next.is_none_or(|n| n.role != Role::User) {
                let after = match next {
                    None => "the end of the conversation".to_owned(),
                    Some(_) => format!("the model turn contents[{}]", k + 1),
                };
                open.extend((0..turn.calls.len()).map(|m| Open {
                    content: k,
                    call: m,
                    why: format!("is followed by {after}"),
                }));
            }
            continue;
        }
        let Some(prev) = prev.filter(|p| p.role == Role::Assistant && !p.calls.is_empty()) else {
            strays.extend((0..turn.responses.len()).map(|r| (k, r)));
            continue;
        };
        let mut used = vec![false; prev.calls.len()];
        for (ri, r) in turn.responses.iter().enumerate() {
            if let Some(m) = matching(&prev.calls, &used, r) {
                used[m] = true;
                answers.insert((k, ri), (k - 1, m));
                continue;
            }
            let (kind, why) = if prev.calls.iter().any(|c| same(c, r)) {
                (IssueKind::DuplicateId, "a second response for")
            } else {
                (IssueKind::OrphanResult, "no call of")
            };
            found.add(
                kind,
                r.id.as_deref(),
                k,
                1 + r.pos,
                format!(
                    "{COUNT_MISMATCH} ringbound: contents[{k}] response {} is {why} the call \
                     turn contents[{}]",
                    describe(&r.name, r.pos, r.id.as_deref()),
                    k - 1
                ),
            );
        }
        let answered = used.iter().filter(|u| **u).count();
        for (m, _) in used.iter().enumerate().filter(|(_, u)| !**u) {
            open.push(Open {
                content: k - 1,
                call: m,
                why: format!(
                    "is not answered by the response turn contents[{k}] ({answered} of {} \
                     function call parts answered)",
                    prev.calls.len()
                ),
            });
        }
    }

    let mut claimed: HashSet<usize> = HashSet::default();
    for (k, ri) in strays {
        classify(cs, k, ri, &open, &mut claimed, &mut found);
    }
    for (n, o) in open.iter().enumerate() {
        if claimed.contains(&n) {
            continue;
        }
        let call = &cs[o.content].calls[o.call];
        found.add(
            IssueKind::MissingResult,
            call.id.as_deref(),
            o.content,
            1 + call.pos,
            format!(
                "{COUNT_MISMATCH} ringbound: call {} of contents[{}] has no function response: \
                 the call turn {}",
                describe(&call.name, call.pos, call.id.as_deref()),
                o.content,
                o.why
            ),
        );
    }
    signatures(cs, &mut found);
    found.issues.sort_by_key(|f| (f.0, f.1));
    (found.issues.into_iter().map(|f| f.2).collect(), answers)
}

/// A response outside a response turn: a late answer to an unanswered call (not adjacent), a
/// second answer (duplicate), an answer before its call, or an answer to nothing.
fn classify(
    cs: &[Arc<GeminiContent>],
    k: usize,
    ri: usize,
    open: &[Open],
    claimed: &mut HashSet<usize>,
    found: &mut Found,
) {
    let r = &cs[k].responses[ri];
    let calls: Vec<usize> = cs
        .iter()
        .enumerate()
        .flat_map(|(t, c)| c.calls.iter().filter(|c| same(c, r)).map(move |_| t))
        .filter(|&t| t != k)
        .collect();
    let stray = stray::classify(k, &calls, |t| {
        let Some(m) = cs[t].calls.iter().rposition(|c| same(c, r)) else {
            return false;
        };
        let unclaimed = open
            .iter()
            .enumerate()
            .find(|(n, o)| o.content == t && o.call == m && !claimed.contains(n));
        unclaimed.map(|(n, _)| claimed.insert(n)).is_some()
    });
    let head = format!(
        "{RESPONSE_TURN_POSITION} ringbound: contents[{k}] response {}",
        describe(&r.name, r.pos, r.id.as_deref())
    );
    let text = match stray {
        Stray::NotAdjacent { call } => {
            format!("{head} answers the call turn contents[{call}] but does not follow it")
        }
        Stray::Duplicate { call } => {
            format!("{head} answers a call of contents[{call}] that already has a response")
        }
        Stray::BeforeCall { call } => {
            format!("{head} answers a call made only later, by contents[{call}]")
        }
        Stray::Orphan => format!("{head} answers no call"),
    };
    found.add(stray.kind(), r.id.as_deref(), k, 1 + r.pos, text);
}

/// Gemini 3 validates the signatures of the current turn (the contents after the latest user
/// prompt): each call step must carry one on its first functionCall part. Only a conversation
/// whose model signs calls is held to it (Gemini 2.x and calls written by hand have none).
fn signatures(cs: &[Arc<GeminiContent>], found: &mut Found) {
    let signed = cs.iter().any(|c| c.calls.iter().any(|call| call.signed));
    if !signed {
        return;
    }
    let start = cs
        .iter()
        .rposition(|c| c.role == Role::User && c.prompt)
        .map_or(0, |k| k + 1);
    for (k, c) in cs.iter().enumerate().skip(start) {
        let Some(first) = c.calls.first() else {
            continue;
        };
        if first.signed {
            continue;
        }
        let detail = match c.calls.iter().find(|call| call.signed) {
            Some(later) => format!(
                "parts[{}] carries this step's signature, but with parallel calls only the \
                 first functionCall part carries it: the parts were separated or reordered",
                later.pos
            ),
            None => "no part of this call step carries the signature Gemini gave it, though \
                     other calls of the conversation are signed"
                .to_owned(),
        };
        found.add(
            IssueKind::MissingSignature,
            first.id.as_deref(),
            k,
            1 + first.pos,
            format!(
                "{} ringbound: contents[{k}] parts[{}]: {detail}",
                MISSING_SIGNATURE
                    .replace("{name}", &first.name)
                    .replace("{k}", &k.to_string()),
                first.pos
            ),
        );
    }
}
