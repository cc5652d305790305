//! Tool-call pairing: the issue every provider reports, the one stray classifier their rules
//! share (`stray`), and the rules of the canonical view itself, OpenAI Chat Completions:
//! pairing by adjacency, so a call id may recur in a later assistant turn; issues quote
//! OpenAI's own 400 wording so callers recognise them.

pub mod stray;

use std::borrow::Borrow;

use rustc_hash::FxHashMap as HashMap;

use crate::view::{Message, Role};
use stray::Stray;

/// OpenAI's 400 when a call has no result in the tool messages right after its assistant
/// message; OpenAI appends the unanswered ids.
pub const MISSING_RESPONSES: &str = "An assistant message with 'tool_calls' must be followed by \
     tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have \
     response messages: ";

/// OpenAI's 400 when a tool message does not directly follow an assistant message with calls
/// (or that message's other results). The misspelling is OpenAI's.
pub const TOOL_WITHOUT_CALL: &str = "Invalid parameter: messages with role 'tool' must be a \
     response to a preceeding message with 'tool_calls'.";

/// OpenAI's 400 for two results of one call; OpenAI goes on with
/// ` of '<id>', in messages[<a>] and messages[<b>].borrow().`
pub const DUPLICATE_ID: &str = "Invalid parameter: Duplicate value for 'tool_call_id'";

/// What is wrong with one call or result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IssueKind {
    /// The same id twice in one assistant message, or a second result for one call.
    DuplicateId,
    /// A call with no result.
    MissingResult,
    /// A result that answers no call.
    OrphanResult,
    /// A result that comes before the call it answers.
    ResultBeforeCall,
    /// A result separated from its call by another message.
    ResultNotAdjacent,
    /// A reasoning item not followed by an item of its model turn (OpenAI Responses).
    ReasoningWithoutCall,
    /// Gemini: a model turn with calls that follows neither a user turn nor a response turn.
    CallTurnMisplaced,
    /// Gemini: the history opens with a model turn.
    FirstTurnNotUser,
    /// Gemini 3: a call step of the current turn without the `thoughtSignature` it was given.
    MissingSignature,
    /// Bedrock: the conversation opens with an assistant message.
    FirstMessageNotUser,
    /// Bedrock: two messages of one role in a row.
    RolesNotAlternating,
    /// Bedrock: a call whose result could only go into a user turn holding other content.
    UnrepairableMissingResult,
    /// Bedrock: tool results and other content in one user turn.
    ResultsMixedWithContent,
    /// Bedrock: an error result without content.
    EmptyErrorResult,
}

impl IssueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueKind::DuplicateId => "duplicate_id",
            IssueKind::MissingResult => "missing_result",
            IssueKind::OrphanResult => "orphan_result",
            IssueKind::ResultBeforeCall => "result_before_call",
            IssueKind::ResultNotAdjacent => "result_not_adjacent",
            IssueKind::ReasoningWithoutCall => "reasoning_without_call",
            IssueKind::CallTurnMisplaced => "call_turn_misplaced",
            IssueKind::FirstTurnNotUser => "first_turn_not_user",
            IssueKind::MissingSignature => "missing_signature",
            IssueKind::FirstMessageNotUser => "first_message_not_user",
            IssueKind::RolesNotAlternating => "roles_not_alternating",
            IssueKind::UnrepairableMissingResult => "unrepairable_missing_result",
            IssueKind::ResultsMixedWithContent => "results_mixed_with_content",
            IssueKind::EmptyErrorResult => "empty_error_result",
        }
    }
}

/// One pairing problem, located at a message index, with a message in the provider's words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairingIssue {
    pub kind: IssueKind,
    pub call_id: Option<String>,
    pub index: usize,
    pub message: String,
}

/// A synthesized result to insert when the caller asked to repair missing results.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repair {
    /// Index in the original list before which the result goes: the end of the call's result
    /// block. Several repairs with the same `at` are listed, and go, in call order.
    pub at: usize,
    pub call_id: String,
}

/// One call of the assistant message whose result block is being read.
struct OpenCall<'a> {
    id: &'a str,
    /// Position in the assistant's `tool_calls`.
    pos: usize,
    /// The tool message that answered it, once one has.
    answered_by: Option<usize>,
}

/// A call whose result block did not answer it. It may still be answered later, out of place.
struct Unanswered<'a> {
    assistant: usize,
    pos: usize,
    id: &'a str,
    /// The first message after the result block (`messages.len()` when the list ends there).
    block_end: usize,
}

/// Every pairing problem of an OpenAI-Chat-shaped conversation, in message order
/// (deterministic). Only assistant messages make calls; `tool_calls` on other roles are
/// ignored. Issues at one message come in call order, duplicates before missing results.
pub fn validate<M: Borrow<Message>>(messages: &[M]) -> Vec<PairingIssue> {
    // (rank within the message, issue): issues are found out of order and sorted at the end.
    let mut found: Vec<(usize, PairingIssue)> = Vec::new();
    let mut unanswered: Vec<Unanswered> = Vec::new();
    let mut strays: Vec<usize> = Vec::new();
    // Reused for every block, and sorted by id instead of hashed: blocks are a few calls, so
    // a binary search beats hashing and no block allocates.
    let mut calls: Vec<OpenCall> = Vec::new();

    let mut i = 0;
    while i < messages.len() {
        let message = messages[i].borrow();
        if message.role != Role::Assistant || !message.has_tool_calls() {
            if message.role == Role::Tool {
                strays.push(i);
            }
            i += 1;
            continue;
        }

        calls.clear();
        calls.extend(
            message
                .tool_calls
                .iter()
                .enumerate()
                .map(|(pos, call)| OpenCall {
                    id: &call.id,
                    pos,
                    answered_by: None,
                }),
        );
        calls.sort_unstable_by(|a, b| a.id.cmp(b.id).then(a.pos.cmp(&b.pos)));
        for pair in calls.windows(2) {
            if pair[0].id == pair[1].id {
                found.push((
                    pair[1].pos,
                    duplicate_call(i, pair[0].id, pair[0].pos, pair[1].pos),
                ));
            }
        }

        let mut j = i + 1;
        while j < messages.len() && messages[j].borrow().role == Role::Tool {
            match messages[j]
                .borrow()
                .tool_call_id
                .as_deref()
                .and_then(|id| first_call(&mut calls, id))
            {
                Some(call) => match call.answered_by {
                    Some(first) => found.push((0, duplicate_result(call.id, i, first, j))),
                    None => call.answered_by = Some(j),
                },
                None => strays.push(j),
            }
            j += 1;
        }

        for (k, call) in calls.iter().enumerate() {
            let first_of_id = k == 0 || calls[k - 1].id != call.id;
            if first_of_id && call.answered_by.is_none() {
                unanswered.push(Unanswered {
                    assistant: i,
                    pos: call.pos,
                    id: call.id,
                    block_end: j,
                });
            }
        }
        i = j;
    }

    // Results outside their call's block are rare: only then index every call by id.
    let mut claimed_by: Vec<Option<usize>> = vec![None; unanswered.len()];
    if !strays.is_empty() {
        let callers = callers_by_id(messages);
        let open: HashMap<(usize, &str), usize> = unanswered
            .iter()
            .enumerate()
            .map(|(k, call)| ((call.assistant, call.id), k))
            .collect();
        for &j in &strays {
            let issue = classify_stray(messages, j, &callers, &open, &unanswered, &mut claimed_by);
            found.push((0, issue));
        }
    }

    for (call, claim) in unanswered.iter().zip(&claimed_by) {
        if claim.is_none() {
            let rank = messages[call.assistant].borrow().tool_calls.len() + call.pos;
            found.push((rank, missing_result(messages, call)));
        }
    }

    found.sort_by_key(|(rank, issue)| (issue.index, *rank));
    found.into_iter().map(|(_, issue)| issue).collect()
}

/// Repairs for the issues if and only if every issue is `MissingResult`; `None` otherwise, so
/// orphans, duplicates and misplaced results stay fail-closed. `issues` must be what
/// [`validate`] returned for `messages`; an issue that does not point at its call gives `None`.
pub fn repairs_for<M: Borrow<Message>>(
    messages: &[M],
    issues: &[PairingIssue],
) -> Option<Vec<Repair>> {
    let mut repairs: Vec<(usize, usize, &str)> = Vec::with_capacity(issues.len());
    for issue in issues {
        if issue.kind != IssueKind::MissingResult {
            return None;
        }
        let id = issue.call_id.as_deref()?;
        let assistant = messages.get(issue.index)?.borrow();
        if assistant.role != Role::Assistant {
            return None;
        }
        let pos = assistant
            .tool_calls
            .iter()
            .position(|call| call.id == id.into())?;
        repairs.push((result_block_end(messages, issue.index), pos, id));
    }
    repairs.sort_by_key(|&(at, pos, _)| (at, pos));
    Some(
        repairs
            .into_iter()
            .map(|(at, _, id)| Repair {
                at,
                call_id: id.to_owned(),
            })
            .collect(),
    )
}

/// The first call of the open block with this id (the one a result answers when an assistant
/// repeats an id).
fn first_call<'c, 'a>(calls: &'c mut [OpenCall<'a>], id: &str) -> Option<&'c mut OpenCall<'a>> {
    let k = calls.partition_point(|call| call.id < id);
    calls.get_mut(k).filter(|call| call.id == id)
}

/// The first message after the result block of the assistant message at `assistant`.
fn result_block_end<M: Borrow<Message>>(messages: &[M], assistant: usize) -> usize {
    messages[assistant + 1..]
        .iter()
        .position(|m| m.borrow().role != Role::Tool)
        .map_or(messages.len(), |k| assistant + 1 + k)
}

/// For each call id, the assistant messages that call it, in order.
fn callers_by_id<M: Borrow<Message>>(messages: &[M]) -> HashMap<&str, Vec<usize>> {
    // Sized for about one call per message: grown from empty it rehashed several times per
    // assembly of a long history.
    let mut callers: HashMap<&str, Vec<usize>> =
        HashMap::with_capacity_and_hasher(messages.len() / 2, Default::default());
    for (i, message) in messages.iter().enumerate() {
        let message = message.borrow();
        if message.role != Role::Assistant {
            continue;
        }
        for call in &message.tool_calls {
            let list = callers.entry(&*call.id).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    callers
}

/// What is wrong with the tool message at `j`, which does not answer the block it sits in
/// (classified by [`stray::classify`]). A call that was never answered takes it as a late
/// result (and is then not missing); a call already answered gets it as a duplicate.
fn classify_stray<M: Borrow<Message>>(
    messages: &[M],
    j: usize,
    callers: &HashMap<&str, Vec<usize>>,
    open: &HashMap<(usize, &str), usize>,
    unanswered: &[Unanswered],
    claimed_by: &mut [Option<usize>],
) -> PairingIssue {
    let Some(id) = messages[j].borrow().tool_call_id.as_deref() else {
        return issue(
            IssueKind::OrphanResult,
            None,
            j,
            format!("{TOOL_WITHOUT_CALL} ringbound: messages[{j}] has no tool_call_id"),
        );
    };
    let list = callers.get(id).map_or(&[][..], Vec::as_slice);
    let mut late_for = None;
    let stray = stray::classify(j, list, |caller| match open.get(&(caller, id)) {
        Some(&k) if claimed_by[k].is_none() => {
            claimed_by[k] = Some(j);
            late_for = Some(k);
            true
        }
        _ => false,
    });
    let kind = stray.kind();
    match stray {
        Stray::Orphan => issue(
            kind,
            Some(id),
            j,
            format!(
                "{TOOL_WITHOUT_CALL} ringbound: messages[{j}] answers `{id}`, which no \
                 assistant message calls"
            ),
        ),
        Stray::BeforeCall { call } => issue(
            kind,
            Some(id),
            j,
            format!(
                "{TOOL_WITHOUT_CALL} ringbound: messages[{j}] answers `{id}`, which is only \
                 called later, by messages[{call}]"
            ),
        ),
        Stray::NotAdjacent { call } => {
            let end = late_for.map_or(call + 1, |k| unanswered[k].block_end);
            issue(
                kind,
                Some(id),
                j,
                format!(
                    "{TOOL_WITHOUT_CALL} ringbound: messages[{j}] answers `{id}` of \
                     messages[{call}], but messages[{end}] ({}) comes between them",
                    messages[end].borrow().role.as_str()
                ),
            )
        }
        Stray::Duplicate { call } => {
            let first = match open.get(&(call, id)).and_then(|&k| claimed_by[k]) {
                Some(first) => first,
                None => messages[call + 1..j]
                    .iter()
                    .map(Borrow::borrow)
                    .position(|m: &Message| {
                        m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id)
                    })
                    .map_or(call, |k| call + 1 + k),
            };
            duplicate_result(id, call, first, j)
        }
    }
}

/// An issue of `kind` about call `id` at message `index`.
pub(crate) fn issue(
    kind: IssueKind,
    id: Option<&str>,
    index: usize,
    message: String,
) -> PairingIssue {
    PairingIssue {
        kind,
        call_id: id.map(str::to_owned),
        index,
        message,
    }
}

fn duplicate_call(assistant: usize, id: &str, first: usize, second: usize) -> PairingIssue {
    issue(
        IssueKind::DuplicateId,
        Some(id),
        assistant,
        format!(
            "{DUPLICATE_ID} of '{id}'. ringbound: messages[{assistant}] makes call `{id}` twice \
             (tool_calls[{first}] and tool_calls[{second}])"
        ),
    )
}

fn duplicate_result(id: &str, caller: usize, first: usize, second: usize) -> PairingIssue {
    issue(
        IssueKind::DuplicateId,
        Some(id),
        second,
        format!(
            "{DUPLICATE_ID} of '{id}', in messages[{first}] and messages[{second}]. ringbound: \
             call `{id}` of messages[{caller}] already has its result"
        ),
    )
}

fn missing_result<M: Borrow<Message>>(messages: &[M], call: &Unanswered) -> PairingIssue {
    let id = call.id;
    let end = match messages.get(call.block_end) {
        Some(m) => format!(
            "messages[{}] ({})",
            call.block_end,
            m.borrow().role.as_str()
        ),
        None => "the end of the conversation".to_owned(),
    };
    issue(
        IssueKind::MissingResult,
        Some(id),
        call.assistant,
        format!(
            "{MISSING_RESPONSES}{id}. ringbound: no tool message answers call `{id}` of \
             messages[{}] before {end}",
            call.assistant
        ),
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::sample::{subsequence, Index};

    use super::*;
    use crate::view::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "lookup".into(),
            arguments: "{}".into(),
        }
    }

    fn asst(ids: &[&str]) -> Message {
        Message::assistant_calls(ids.iter().map(|id| call(id)).collect())
    }

    fn tool(id: &str) -> Message {
        Message::tool_result(id, "ok", false)
    }

    fn user() -> Message {
        Message::text(Role::User, "hi")
    }

    fn system() -> Message {
        Message::text(Role::System, "rules")
    }

    fn said() -> Message {
        Message::text(Role::Assistant, "done")
    }

    fn summary(issues: &[PairingIssue]) -> Vec<(IssueKind, usize, Option<&str>)> {
        issues
            .iter()
            .map(|issue| (issue.kind, issue.index, issue.call_id.as_deref()))
            .collect()
    }

    /// Inserts a synthesized result for each repair, as a caller applying them would.
    fn apply(messages: &[Message], repairs: &[Repair]) -> Vec<Message> {
        let mut out = messages.to_vec();
        for repair in repairs.iter().rev() {
            out.insert(repair.at, Message::tool_result(&repair.call_id, "", true));
        }
        out
    }

    use IssueKind::*;

    #[test]
    fn table() {
        type Case = (
            &'static str,
            Vec<Message>,
            Vec<(IssueKind, usize, Option<&'static str>)>,
        );
        let cases: Vec<Case> = vec![
            ("empty", vec![], vec![]),
            (
                "plain chat",
                vec![system(), user(), said(), user(), said()],
                vec![],
            ),
            (
                "parallel calls answered out of order",
                vec![
                    user(),
                    asst(&["a", "b", "c"]),
                    tool("c"),
                    tool("a"),
                    tool("b"),
                    said(),
                ],
                vec![],
            ),
            (
                "id reused in a later turn",
                vec![
                    user(),
                    asst(&["a"]),
                    tool("a"),
                    said(),
                    user(),
                    asst(&["a", "b"]),
                    tool("b"),
                    tool("a"),
                ],
                vec![],
            ),
            (
                "result after an intervening user message",
                vec![user(), asst(&["a"]), user(), tool("a")],
                vec![(ResultNotAdjacent, 3, Some("a"))],
            ),
            (
                "result after the next assistant turn",
                vec![user(), asst(&["a"]), asst(&["b"]), tool("b"), tool("a")],
                vec![(ResultNotAdjacent, 4, Some("a"))],
            ),
            (
                "trailing call with no result",
                vec![user(), asst(&["a"])],
                vec![(MissingResult, 1, Some("a"))],
            ),
            (
                "one of two parallel results missing",
                vec![user(), asst(&["a", "b"]), tool("b"), said()],
                vec![(MissingResult, 1, Some("a"))],
            ),
            (
                "missing results listed in call order",
                vec![user(), asst(&["z", "y", "x"]), user()],
                vec![
                    (MissingResult, 1, Some("z")),
                    (MissingResult, 1, Some("y")),
                    (MissingResult, 1, Some("x")),
                ],
            ),
            (
                "a reused id answered only after its second call",
                vec![user(), asst(&["a"]), user(), asst(&["a"]), tool("a")],
                vec![(MissingResult, 1, Some("a"))],
            ),
            (
                "orphan at index 0",
                vec![tool("a"), user()],
                vec![(OrphanResult, 0, Some("a"))],
            ),
            (
                "orphan right after a user message",
                vec![system(), user(), tool("a")],
                vec![(OrphanResult, 2, Some("a"))],
            ),
            (
                "orphan inside a block",
                vec![user(), asst(&["a"]), tool("a"), tool("q")],
                vec![(OrphanResult, 3, Some("q"))],
            ),
            (
                "result without an id",
                vec![
                    user(),
                    Message {
                        tool_call_id: None,
                        ..tool("a")
                    },
                ],
                vec![(OrphanResult, 1, None)],
            ),
            (
                "result before call",
                vec![user(), tool("a"), asst(&["a"]), tool("a")],
                vec![(ResultBeforeCall, 1, Some("a"))],
            ),
            (
                "duplicate id in one assistant message",
                vec![user(), asst(&["a", "b", "a"]), tool("a"), tool("b")],
                vec![(DuplicateId, 1, Some("a"))],
            ),
            (
                "duplicate result",
                vec![user(), asst(&["a", "b"]), tool("a"), tool("b"), tool("a")],
                vec![(DuplicateId, 4, Some("a"))],
            ),
            (
                "second result after the block",
                vec![user(), asst(&["a"]), tool("a"), user(), tool("a")],
                vec![(DuplicateId, 4, Some("a"))],
            ),
            (
                "two late results for one call",
                vec![user(), asst(&["a"]), user(), tool("a"), tool("a")],
                vec![
                    (ResultNotAdjacent, 3, Some("a")),
                    (DuplicateId, 4, Some("a")),
                ],
            ),
            (
                "text-only assistant message makes no calls",
                vec![user(), said(), tool("a")],
                vec![(OrphanResult, 2, Some("a"))],
            ),
            (
                "mixed issues in message order",
                vec![
                    tool("x"),
                    user(),
                    asst(&["b", "a", "a"]),
                    tool("a"),
                    user(),
                    asst(&["c"]),
                ],
                vec![
                    (OrphanResult, 0, Some("x")),
                    (DuplicateId, 2, Some("a")),
                    (MissingResult, 2, Some("b")),
                    (MissingResult, 5, Some("c")),
                ],
            ),
        ];
        for (name, messages, expected) in cases {
            let issues = validate(&messages);
            assert_eq!(summary(&issues), expected, "{name}");
            assert_eq!(
                issues.is_empty(),
                oracle_valid(&messages),
                "oracle on {name}"
            );
        }
    }

    #[test]
    fn trailing_call_is_repaired_at_the_end() {
        let messages = vec![user(), asst(&["a", "b"])];
        let repairs = repairs_for(&messages, &validate(&messages)).unwrap();
        let expected = vec![
            Repair {
                at: 2,
                call_id: "a".to_owned(),
            },
            Repair {
                at: 2,
                call_id: "b".to_owned(),
            },
        ];
        assert_eq!(repairs, expected);
        assert!(validate(&apply(&messages, &repairs)).is_empty());
    }

    #[test]
    fn missing_parallel_result_is_repaired_after_the_existing_one() {
        let messages = vec![user(), asst(&["a", "b"]), tool("b"), said()];
        let repairs = repairs_for(&messages, &validate(&messages)).unwrap();
        assert_eq!(
            repairs,
            vec![Repair {
                at: 3,
                call_id: "a".to_owned()
            }]
        );
        let repaired = apply(&messages, &repairs);
        assert_eq!(repaired[3].tool_call_id.as_deref(), Some("a"));
        assert!(validate(&repaired).is_empty());
    }

    #[test]
    fn repairs_keep_call_order_whatever_the_issue_order() {
        let messages = vec![user(), asst(&["z", "y"]), user(), asst(&["x"])];
        let mut issues = validate(&messages);
        issues.reverse();
        let repairs = repairs_for(&messages, &issues).unwrap();
        let order: Vec<(usize, &str)> =
            repairs.iter().map(|r| (r.at, r.call_id.as_str())).collect();
        assert_eq!(order, vec![(2, "z"), (2, "y"), (4, "x")]);
    }

    #[test]
    fn repairs_refuse_anything_but_missing_results() {
        let mixed = vec![user(), asst(&["a", "b"]), tool("a"), tool("q")];
        let issues = validate(&mixed);
        let expected = vec![(MissingResult, 1, Some("b")), (OrphanResult, 3, Some("q"))];
        assert_eq!(summary(&issues), expected);
        assert_eq!(repairs_for(&mixed, &issues), None);
        let late = vec![user(), asst(&["a"]), user(), tool("a")];
        assert_eq!(repairs_for(&late, &validate(&late)), None);
        let dup = vec![user(), asst(&["a", "a"]), tool("a")];
        assert_eq!(repairs_for(&dup, &validate(&dup)), None);
    }

    #[test]
    fn repairs_refuse_issues_that_do_not_point_at_their_call() {
        let messages = vec![user(), asst(&["a"])];
        let mut issues = validate(&messages);
        issues[0].index = 0;
        assert_eq!(repairs_for(&messages, &issues), None);
        issues[0].index = 9;
        assert_eq!(repairs_for(&messages, &issues), None);
        issues[0].index = 1;
        issues[0].call_id = Some("b".to_owned());
        assert_eq!(repairs_for(&messages, &issues), None);
        assert_eq!(repairs_for(&messages, &[]), Some(vec![]));
    }

    #[test]
    fn messages_quote_openai_then_say_where() {
        let check = |messages: Vec<Message>, openai: &str, ours: &[&str]| {
            let issues = validate(&messages);
            assert_eq!(issues.len(), 1, "{issues:?}");
            let text = &issues[0].message;
            assert!(text.starts_with(openai), "{text}");
            for part in ours {
                assert!(text.contains(part), "{text} lacks {part}");
            }
        };
        check(
            vec![user(), asst(&["call_9"]), user()],
            MISSING_RESPONSES,
            &[
                "did not have response messages: call_9.",
                "messages[1]",
                "messages[2] (user)",
            ],
        );
        check(
            vec![user(), asst(&["call_9"])],
            MISSING_RESPONSES,
            &["the end of the conversation"],
        );
        check(
            vec![tool("call_9")],
            TOOL_WITHOUT_CALL,
            &["preceeding", "messages[0]", "`call_9`"],
        );
        check(
            vec![user(), asst(&["call_9"]), user(), tool("call_9")],
            TOOL_WITHOUT_CALL,
            &["messages[3]", "messages[1]", "messages[2] (user)"],
        );
        check(
            vec![tool("call_9"), asst(&["call_9"]), tool("call_9")],
            TOOL_WITHOUT_CALL,
            &["later, by messages[1]"],
        );
        check(
            vec![user(), asst(&["call_9"]), tool("call_9"), tool("call_9")],
            DUPLICATE_ID,
            &[
                "of 'call_9', in messages[2] and messages[3]. ringbound:",
                "messages[1]",
            ],
        );
        check(
            vec![user(), asst(&["call_9", "call_9"]), tool("call_9")],
            DUPLICATE_ID,
            &["'call_9'", "tool_calls[0] and tool_calls[1]"],
        );
    }

    /// Obviously-correct reference: every call answered exactly once in the tool messages right
    /// after its assistant message, and every tool message in such a run answering one of them.
    fn oracle_valid(messages: &[Message]) -> bool {
        for (i, m) in messages.iter().enumerate() {
            if m.role == Role::Tool {
                let mut k = i;
                while k > 0 && messages[k - 1].role == Role::Tool {
                    k -= 1;
                }
                if k == 0 || messages[k - 1].role != Role::Assistant {
                    return false;
                }
                let owner = &messages[k - 1];
                let answers = |c: &ToolCall| m.tool_call_id.as_deref() == Some(&*c.id);
                if !owner.tool_calls.iter().any(answers) {
                    return false;
                }
            }
            if m.role == Role::Assistant {
                for (p, c) in m.tool_calls.iter().enumerate() {
                    if m.tool_calls[..p].iter().any(|d| d.id == c.id) {
                        return false;
                    }
                    let block = messages[i + 1..]
                        .iter()
                        .take_while(|r| r.role == Role::Tool);
                    let n = block
                        .filter(|r| r.tool_call_id.as_deref() == Some(&c.id))
                        .count();
                    if n != 1 {
                        return false;
                    }
                }
            }
        }
        true
    }

    #[derive(Clone, Debug)]
    enum Turn {
        User,
        Said,
        /// Call ids in call order, and the order their results come back in.
        Ring(Vec<&'static str>, Vec<usize>),
    }

    /// A small pool, so rings often reuse ids of earlier turns.
    const POOL: [&str; 6] = ["call_a", "call_b", "call_c", "call_d", "call_e", "call_f"];

    fn ring() -> impl Strategy<Value = Turn> {
        (1..=4usize).prop_flat_map(|n| {
            (
                subsequence(POOL.to_vec(), n).prop_shuffle(),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            )
                .prop_map(|(ids, order)| Turn::Ring(ids, order))
        })
    }

    fn turn() -> impl Strategy<Value = Turn> {
        prop_oneof![Just(Turn::User), Just(Turn::Said), ring(), ring()]
    }

    /// Where a ring landed: its assistant message and its result block.
    #[derive(Clone, Debug)]
    struct Placed {
        assistant: usize,
        results: std::ops::Range<usize>,
    }

    /// A valid conversation with at least one ring.
    fn conversation() -> impl Strategy<Value = (Vec<Message>, Vec<Placed>)> {
        (
            any::<bool>(),
            prop::collection::vec(turn(), 0..8),
            ring(),
            prop::collection::vec(turn(), 0..8),
        )
            .prop_map(|(has_system, head, middle, tail)| {
                let mut messages = Vec::new();
                if has_system {
                    messages.push(system());
                }
                messages.push(user());
                let mut rings = Vec::new();
                for t in head.into_iter().chain([middle]).chain(tail) {
                    match t {
                        Turn::User => messages.push(user()),
                        Turn::Said => messages.push(said()),
                        Turn::Ring(ids, order) => {
                            let assistant = messages.len();
                            messages.push(asst(&ids));
                            messages.extend(order.iter().map(|&k| tool(ids[k])));
                            rings.push(Placed {
                                assistant,
                                results: assistant + 1..messages.len(),
                            });
                        }
                    }
                }
                (messages, rings)
            })
    }

    fn arbitrary_message() -> impl Strategy<Value = Message> {
        let role = prop_oneof![
            Just(Role::System),
            Just(Role::Developer),
            Just(Role::User),
            Just(Role::Assistant),
            Just(Role::Tool),
        ];
        let id = prop::sample::select(vec!["a", "b", "c", ""]);
        (
            role,
            prop::collection::vec(id.clone(), 0..4),
            prop::option::weighted(0.9, id),
        )
            .prop_map(|(role, calls, answers)| Message {
                role,
                tool_calls: calls.into_iter().map(call).collect(),
                tool_call_id: answers.map(str::to_owned),
                ..Message::text(role, "")
            })
    }

    #[derive(Clone, Debug)]
    enum Edit {
        Delete(Index),
        Swap(Index, Index),
        Insert(Index, Message),
        Retarget(Index, &'static str),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            any::<Index>().prop_map(Edit::Delete),
            (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::Swap(a, b)),
            (any::<Index>(), arbitrary_message()).prop_map(|(a, m)| Edit::Insert(a, m)),
            (any::<Index>(), prop::sample::select(POOL.to_vec()))
                .prop_map(|(a, id)| Edit::Retarget(a, id)),
        ]
    }

    fn edited(mut messages: Vec<Message>, edits: Vec<Edit>) -> Vec<Message> {
        for e in edits {
            if messages.is_empty() {
                break;
            }
            let n = messages.len();
            match e {
                Edit::Delete(a) => {
                    messages.remove(a.index(n));
                }
                Edit::Swap(a, b) => messages.swap(a.index(n), b.index(n)),
                Edit::Insert(a, m) => messages.insert(a.index(n + 1), m),
                Edit::Retarget(a, id) => messages[a.index(n)].tool_call_id = Some(id.to_owned()),
            }
        }
        messages
    }

    fn calls_of(messages: &[Message], id: &str, range: std::ops::Range<usize>) -> bool {
        messages[range]
            .iter()
            .any(|m| m.role == Role::Assistant && m.tool_calls.iter().any(|c| c.id == id.into()))
    }

    proptest! {
        #[test]
        fn generated_conversations_are_valid((messages, _) in conversation()) {
            prop_assert!(oracle_valid(&messages));
            prop_assert_eq!(validate(&messages), vec![]);
            prop_assert_eq!(repairs_for(&messages, &[]), Some(vec![]));
        }

        /// Deleting one result gives exactly one MissingResult at its call, and the repair
        /// puts a result back at the end of that block.
        #[test]
        fn deleted_result_is_missing_and_repairable(
            (messages, rings) in conversation(), r in any::<Index>(), k in any::<Index>()
        ) {
            let ring = r.get(&rings);
            let gone = ring.results.start + k.index(ring.results.len());
            let id = messages[gone].tool_call_id.clone().unwrap();
            let mut broken = messages.clone();
            broken.remove(gone);
            let issues = validate(&broken);
            prop_assert_eq!(summary(&issues), vec![(MissingResult, ring.assistant, Some(id.as_str()))]);
            let repairs = repairs_for(&broken, &issues).unwrap();
            prop_assert_eq!(repairs, vec![Repair { at: ring.results.end - 1, call_id: id.clone() }]);
            prop_assert!(validate(&apply(&broken, &repairs_for(&broken, &issues).unwrap())).is_empty());
        }

        /// Deleting an assistant message but keeping its results leaves one issue per result:
        /// DuplicateId when an earlier turn already called (and was answered for) the id,
        /// ResultBeforeCall when only a later turn calls it, OrphanResult when none does.
        #[test]
        fn deleted_call_leaves_orphans((messages, rings) in conversation(), r in any::<Index>()) {
            let ring = r.get(&rings);
            let mut broken = messages.clone();
            broken.remove(ring.assistant);
            let results = ring.results.start - 1..ring.results.end - 1;
            let expected: Vec<_> = results
                .clone()
                .map(|j| {
                    let id = broken[j].tool_call_id.as_deref().unwrap();
                    let kind = if calls_of(&broken, id, 0..j) {
                        DuplicateId
                    } else if calls_of(&broken, id, j..broken.len()) {
                        ResultBeforeCall
                    } else {
                        OrphanResult
                    };
                    (kind, j, Some(id))
                })
                .collect();
            let issues = validate(&broken);
            prop_assert_eq!(summary(&issues), expected);
            prop_assert!(repairs_for(&broken, &issues).is_none());
        }

        /// A user message inside a result block makes every result after it ResultNotAdjacent,
        /// and nothing else: those calls are not also missing.
        #[test]
        fn user_inside_block_is_not_adjacent(
            (messages, rings) in conversation(), r in any::<Index>(), k in any::<Index>()
        ) {
            let ring = r.get(&rings);
            let at = ring.results.start + k.index(ring.results.len());
            let mut broken = messages.clone();
            broken.insert(at, user());
            let expected: Vec<_> = (at + 1..ring.results.end + 1)
                .map(|j| (ResultNotAdjacent, j, broken[j].tool_call_id.as_deref()))
                .collect();
            let issues = validate(&broken);
            prop_assert_eq!(summary(&issues), expected);
            prop_assert!(repairs_for(&broken, &issues).is_none());
        }

        /// A copy of a result at the end of its block is exactly one DuplicateId, at the copy.
        #[test]
        fn duplicated_result_is_duplicate_id(
            (messages, rings) in conversation(), r in any::<Index>(), k in any::<Index>()
        ) {
            let ring = r.get(&rings);
            let copy = messages[ring.results.start + k.index(ring.results.len())].clone();
            let id = copy.tool_call_id.clone();
            let mut broken = messages.clone();
            broken.insert(ring.results.end, copy);
            let issues = validate(&broken);
            prop_assert_eq!(summary(&issues), vec![(DuplicateId, ring.results.end, id.as_deref())]);
            prop_assert!(repairs_for(&broken, &issues).is_none());
        }

        /// Near-valid conversations, where the oracle comparison bites hardest.
        #[test]
        fn edited_conversations_agree_with_the_oracle(
            (messages, _) in conversation(), edits in prop::collection::vec(edit(), 1..4)
        ) {
            let messages = edited(messages, edits);
            let issues = validate(&messages);
            prop_assert_eq!(issues.is_empty(), oracle_valid(&messages));
            if let Some(repairs) = repairs_for(&messages, &issues) {
                prop_assert!(oracle_valid(&apply(&messages, &repairs)));
            }
        }

        /// On anything at all: no panic, same answer twice, agreement with the oracle, issues
        /// in message order and in range, and repairs (when offered) that make it valid.
        #[test]
        fn arbitrary_sequences_agree_with_the_oracle(
            messages in prop::collection::vec(arbitrary_message(), 0..14)
        ) {
            let issues = validate(&messages);
            prop_assert_eq!(&issues, &validate(&messages));
            prop_assert_eq!(issues.is_empty(), oracle_valid(&messages));
            prop_assert!(issues.windows(2).all(|w| w[0].index <= w[1].index));
            prop_assert!(issues.iter().all(|issue| issue.index < messages.len()));
            let all_missing = issues.iter().all(|issue| issue.kind == MissingResult);
            match repairs_for(&messages, &issues) {
                Some(repairs) => {
                    prop_assert!(all_missing);
                    prop_assert!(oracle_valid(&apply(&messages, &repairs)));
                }
                None => prop_assert!(!all_missing),
            }
        }
    }
}
