//! The side-effect ledger: which side-effecting tool calls have already run, kept as one pinned
//! note so a trimmed or summarized history never invites the model to repeat them. The note's
//! wording is fixed and its entries are canonical JSON, so the same entries always render to the
//! same bytes (prompt caches keep hitting) and a later assembly can read them back.

use serde_json::{Map, Value};

use crate::view::{Message, ToolCall};

/// First line of every ledger note; how an assembly recognizes the note it wrote before.
pub const MARKER: &str = "[ringbound:side-effect-ledger]";
const HEADER: &str = "Tools already executed in this conversation. Do not repeat any of them \
                      without new user intent:";
/// Longest argument string kept in an entry; the ledger identifies an effect, it does not
/// replay it.
const MAX_ARG_CHARS: usize = 120;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerEntry {
    pub tool: String,
    pub call_id: String,
    /// The arguments that identify the effect, as canonical JSON (sorted keys).
    pub args: Value,
    /// `ok`, `error`, or `not_completed` for a call whose result was synthesized.
    pub status: String,
    /// The key the execution layer deduplicates the effect by, when there is one.
    pub idempotency_key: Option<String>,
    /// What the effect created or changed (an order id, a message id), when known.
    pub resource_id: Option<String>,
    /// The conversation turn (1 = the first user message) the call was made in.
    pub turn: Option<u32>,
}

/// Argument names read as the call's idempotency key.
const IDEMPOTENCY_ARGS: [&str; 2] = ["idempotency_key", "idempotencyKey"];

impl LedgerEntry {
    /// The entry for a dropped call, from its arguments and how it ended. `fields` limits the
    /// arguments recorded (config `ledger_fields`); otherwise every argument is kept, cut short.
    pub fn from_call(
        call: &ToolCall,
        status: &str,
        fields: Option<&[String]>,
        turn: Option<u32>,
    ) -> Self {
        let parsed = serde_json::from_str::<Value>(&call.arguments);
        let idempotency_key = parsed.as_ref().ok().and_then(|v| {
            IDEMPOTENCY_ARGS
                .iter()
                .find_map(|k| v.get(k)?.as_str().map(str::to_owned))
        });
        let args = match parsed {
            Ok(Value::Object(obj)) => Value::Object(
                obj.into_iter()
                    .filter(|(k, _)| fields.is_none_or(|f| f.iter().any(|name| name == k)))
                    .map(|(k, v)| (k, shorten(v)))
                    .collect::<Map<_, _>>(),
            ),
            Ok(other) => shorten(other),
            Err(_) => shorten(Value::String(call.arguments.to_string())),
        };
        LedgerEntry {
            tool: call.name.to_string(),
            call_id: call.id.to_string(),
            args,
            status: status.to_owned(),
            idempotency_key,
            resource_id: None,
            turn,
        }
    }

    /// What tells two entries apart: everything they say. Call ids recur across turns, so
    /// two calls under one id are two entries unless they agree in every field.
    pub fn identity(&self) -> String {
        self.to_line()
    }

    /// `- send_email [ok] call_id="call_1" args={"to":"a@b.c"}`: the tool first, for the
    /// model; every value that could hold a space or a quote is JSON, so the line parses back.
    fn to_line(&self) -> String {
        let bare = !self.tool.is_empty()
            && self
                .tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
        let tool = if bare {
            self.tool.clone()
        } else {
            Value::String(self.tool.clone()).to_string()
        };
        let status = if self
            .status
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            self.status.clone()
        } else {
            "unknown".to_owned()
        };
        let mut line = format!(
            "- {tool} [{status}] call_id={} args={}",
            Value::String(self.call_id.clone()),
            self.args
        );
        for (name, value) in [
            ("idempotency_key", &self.idempotency_key),
            ("resource_id", &self.resource_id),
        ] {
            if let Some(v) = value {
                line.push_str(&format!(" {name}={}", Value::String(v.clone())));
            }
        }
        if let Some(turn) = self.turn {
            line.push_str(&format!(" turn={turn}"));
        }
        line
    }

    fn from_line(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("- ")?;
        let (tool, rest) = if rest.starts_with('"') {
            let (value, rest) = next_json(rest)?;
            (value.as_str()?.to_owned(), rest)
        } else {
            let (tool, rest) = rest.split_once(' ')?;
            (tool.to_owned(), rest)
        };
        let rest = rest.trim_start().strip_prefix('[')?;
        let (status, rest) = rest.split_once("] call_id=")?;
        let (call_id, rest) = next_json(rest)?;
        let (args, mut rest) = next_json(rest.strip_prefix(" args=")?)?;
        let mut optional = |name: &str| -> Option<Option<String>> {
            match rest.strip_prefix(&format!(" {name}=")) {
                None => Some(None),
                Some(after) => {
                    let (value, after) = next_json(after)?;
                    rest = after;
                    Some(Some(value.as_str()?.to_owned()))
                }
            }
        };
        let idempotency_key = optional("idempotency_key")?;
        let resource_id = optional("resource_id")?;
        let turn = match rest.strip_prefix(" turn=") {
            None => None,
            Some(n) => {
                rest = "";
                Some(n.parse().ok()?)
            }
        };
        if !rest.is_empty() {
            return None;
        }
        Some(LedgerEntry {
            tool,
            call_id: call_id.as_str()?.to_owned(),
            args,
            status: status.to_owned(),
            idempotency_key,
            resource_id,
            turn,
        })
    }
}

/// The JSON value at the start of `text` and what follows it.
fn next_json(text: &str) -> Option<(Value, &str)> {
    let mut values = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = values.next()?.ok()?;
    Some((value, &text[values.byte_offset()..]))
}

fn shorten(v: Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > MAX_ARG_CHARS => {
            let mut cut: String = s.chars().take(MAX_ARG_CHARS).collect();
            cut.push('…');
            Value::String(cut)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(shorten).collect()),
        Value::Object(obj) => {
            Value::Object(obj.into_iter().map(|(k, v)| (k, shorten(v))).collect())
        }
        other => other,
    }
}

/// Renders entries into the note's text. Empty ledgers render nothing (no note is inserted).
pub fn render(entries: &[LedgerEntry]) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    let mut text = format!("{MARKER}\n{HEADER}");
    for entry in entries {
        text.push('\n');
        text.push_str(&entry.to_line());
    }
    Some(text)
}

/// Entries of a note this crate rendered earlier, or None when the message is not such a note.
pub fn parse(msg: &Message) -> Option<Vec<LedgerEntry>> {
    if !msg.role.is_instruction() || msg.texts.len() != 1 {
        return None;
    }
    let mut lines = msg.texts[0].lines();
    if lines.next()? != MARKER || lines.next()? != HEADER {
        return None;
    }
    lines.map(LedgerEntry::from_line).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Role;

    fn call(name: &str, id: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn render_then_parse_round_trips() {
        let entries = vec![
            LedgerEntry::from_call(
                &call("send_email", "call_1", r#"{"to":"a@b.c","body":"hi"}"#),
                "ok",
                None,
                Some(2),
            ),
            LedgerEntry::from_call(&call("refund", "call_2", "not json"), "error", None, None),
            LedgerEntry::from_call(
                &call("odd name \"q\"", "id] x=\"", "[1, 2]"),
                "ok",
                None,
                Some(7),
            ),
        ];
        let text = render(&entries).unwrap();
        assert!(text.contains(
            r#"- send_email [ok] call_id="call_1" args={"body":"hi","to":"a@b.c"} turn=2"#
        ));
        let msg = Message::text(Role::System, &text);
        assert_eq!(parse(&msg).unwrap(), entries);
    }

    #[test]
    fn rendering_is_canonical() {
        let a = LedgerEntry::from_call(&call("t", "c", r#"{"b":1,"a":2}"#), "ok", None, None);
        let b = LedgerEntry::from_call(&call("t", "c", r#"{"a":2,"b":1}"#), "ok", None, None);
        assert_eq!(render(&[a]), render(&[b]));
    }

    #[test]
    fn fields_select_and_long_values_are_cut() {
        let long = "x".repeat(500);
        let args = format!(r#"{{"to":"a@b.c","body":"{long}","cc":"d"}}"#);
        let only_to =
            LedgerEntry::from_call(&call("send", "c", &args), "ok", Some(&["to".into()]), None);
        assert_eq!(only_to.args, serde_json::json!({"to": "a@b.c"}));
        let all = LedgerEntry::from_call(&call("send", "c", &args), "ok", None, None);
        let body = all.args["body"].as_str().unwrap();
        assert_eq!(body.chars().count(), MAX_ARG_CHARS + 1);
    }

    #[test]
    fn idempotency_key_and_resource_round_trip() {
        let mut e = LedgerEntry::from_call(
            &call("pay", "c9", r#"{"amount":5,"idempotency_key":"k-1 \"x\""}"#),
            "ok",
            None,
            Some(3),
        );
        assert_eq!(e.idempotency_key.as_deref(), Some("k-1 \"x\""));
        e.resource_id = Some("order 42".into());
        let msg = Message::text(Role::Developer, &render(std::slice::from_ref(&e)).unwrap());
        assert_eq!(parse(&msg).unwrap(), vec![e]);
    }

    #[test]
    fn other_messages_are_not_notes() {
        assert!(parse(&Message::text(Role::System, "You are helpful.")).is_none());
        assert!(parse(&Message::text(Role::User, &render(&[]).unwrap_or_default())).is_none());
        let forged = format!("{MARKER}\n{HEADER}\n- not json");
        assert!(parse(&Message::text(Role::System, &forged)).is_none());
    }
}
