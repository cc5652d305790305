//! Units of trimming. A tool ring (an assistant message with tool calls plus every result
//! answering it) is kept or dropped whole, so trimming can never split a call from its result;
//! every other message is a plain unit of its own.

use std::borrow::Borrow;

use crate::view::{Message, Role};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    Ring,
    Plain,
}

/// A run of messages `start..end` trimmed as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    pub kind: UnitKind,
    pub start: usize,
    pub end: usize,
}

/// Splits a pairing-valid conversation into units, in order, covering every message once.
pub fn units<M: Borrow<Message>>(messages: &[M]) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let msg = messages[i].borrow();
        if msg.role == Role::Assistant && msg.has_tool_calls() {
            let mut end = i + 1;
            while end < messages.len() && messages[end].borrow().role == Role::Tool {
                end += 1;
            }
            out.push(Unit {
                kind: UnitKind::Ring,
                start: i,
                end,
            });
            i = end;
        } else {
            out.push(Unit {
                kind: UnitKind::Plain,
                start: i,
                end: i + 1,
            });
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "f".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn rings_take_their_whole_result_block() {
        let msgs = vec![
            Message::text(Role::System, "rules"),
            Message::text(Role::User, "goal"),
            Message::assistant_calls(vec![call("a"), call("b")]),
            Message::tool_result("b", "2", false),
            Message::tool_result("a", "1", false),
            Message::text(Role::Assistant, "done"),
            Message::assistant_calls(vec![call("c")]),
            Message::tool_result("c", "3", false),
        ];
        let got = units(&msgs);
        let kinds: Vec<_> = got.iter().map(|u| (u.kind, u.start, u.end)).collect();
        assert_eq!(
            kinds,
            vec![
                (UnitKind::Plain, 0, 1),
                (UnitKind::Plain, 1, 2),
                (UnitKind::Ring, 2, 5),
                (UnitKind::Plain, 5, 6),
                (UnitKind::Ring, 6, 8),
            ]
        );
    }
}
