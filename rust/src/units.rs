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
    units_glued(messages, |_| false)
}

/// Like [`units`], but message `i` and `i + 1` always share a unit when `glued(i)`: providers
/// whose native items become several canonical messages (an Anthropic user turn holding tool
/// results and text) or must travel with the next item (a Responses reasoning item) glue them,
/// so a native item is never split.
pub fn units_glued<M: Borrow<Message>>(messages: &[M], glued: impl Fn(usize) -> bool) -> Vec<Unit> {
    let n = messages.len();
    let makes_calls = |i: usize| {
        let m = messages[i].borrow();
        m.role == Role::Assistant && m.has_tool_calls()
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let mut kind = if makes_calls(i) {
            UnitKind::Ring
        } else {
            UnitKind::Plain
        };
        let mut end = i + 1;
        loop {
            let before = end;
            if kind == UnitKind::Ring {
                while end < n && messages[end].borrow().role == Role::Tool {
                    end += 1;
                }
            }
            while end < n && glued(end - 1) {
                if makes_calls(end) {
                    kind = UnitKind::Ring;
                }
                end += 1;
            }
            if end == before {
                break;
            }
        }
        out.push(Unit {
            kind,
            start: i,
            end,
        });
        i = end;
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

    #[test]
    fn glued_messages_share_a_unit() {
        // A reasoning item glued to its call; a native result turn carrying text after the
        // results, glued to them.
        let msgs = vec![
            Message::text(Role::User, "goal"),
            Message::text(Role::Assistant, "reasoning"),
            Message::assistant_calls(vec![call("a")]),
            Message::tool_result("a", "1", false),
            Message::text(Role::User, "text after the result"),
            Message::text(Role::User, "next"),
        ];
        let got = units_glued(&msgs, |i| i == 1 || i == 3);
        let spans: Vec<_> = got.iter().map(|u| (u.kind, u.start, u.end)).collect();
        assert_eq!(
            spans,
            vec![
                (UnitKind::Plain, 0, 1),
                (UnitKind::Ring, 1, 5),
                (UnitKind::Plain, 5, 6),
            ]
        );
    }
}
