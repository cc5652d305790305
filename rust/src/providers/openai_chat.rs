//! OpenAI Chat Completions: the canonical view's own format, one message per native item,
//! read by the canonical message reader (`json::message`).

use std::sync::Arc;

use super::{Canonical, Provider};
use crate::error::CoreError;
use crate::json::message::parse_raw;
use crate::pairing::{self, PairingIssue};
use crate::plan::Layout;
use crate::view::Message;

/// OpenAI Chat Completions: the canonical view's own format, one message per native item.
pub struct OpenAIChat;

impl Provider for OpenAIChat {
    const KEY: &'static str = "openai_chat";
    type Item = Message;

    fn parse(&self, i: usize, raw: &[u8]) -> Result<Message, CoreError> {
        parse_raw(i, raw)
    }

    fn validate(&self, items: &[Arc<Message>]) -> Vec<PairingIssue> {
        pairing::validate(items)
    }

    fn canonical(&self, items: &[Arc<Message>]) -> Canonical {
        Canonical {
            messages: items.iter().map(|m| Message::clone(m)).collect(),
            layout: Layout {
                groups: (0..items.len()).collect(),
                binds_next: vec![false; items.len()],
                results_named: false,
            },
            first_counted: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_provider_reads_and_pairs_as_the_chat_path_does() {
        let json = br#"[{"role":"user","content":"go"},
            {"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"user","content":"wait"},{"role":"tool","tool_call_id":"c1","content":"ok"}]"#;
        let items = OpenAIChat.parse_all(&[json]).unwrap();
        let issues = OpenAIChat.validate(&items);
        assert_eq!(issues, pairing::validate(&items));
        assert_eq!(issues.len(), 1);
        assert_eq!(
            crate::native::validate_json("openai_chat", &[json]).unwrap(),
            issues
        );
        let canonical = OpenAIChat.canonical(&items);
        assert!(canonical.messages.iter().eq(items.iter().map(|m| &**m)));
        assert_eq!(canonical.layout.groups, [0, 1, 2, 3]);
        assert!(matches!(
            crate::native::validate_json("cohere", &[json]),
            Err(CoreError::Config { .. })
        ));
    }
}
