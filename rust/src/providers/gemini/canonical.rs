//! Gemini contents as canonical messages, each part at its real cost: a model content is one
//! assistant message (after a user message of its media, which an assistant message cannot
//! carry); a user content is one tool message per functionResponse (first, as the canonical
//! view pairs by adjacency) and one user message with everything else.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::rules::{answers, pair, Answer};
use super::GeminiContent;
use crate::pairing::PairingIssue;
use crate::providers::{empty, Canonical};
use crate::view::{Message, Role, ToolCall};

/// Canonical call ids: the native id (a repeat within one content gets `#k`), else one made
/// from the call itself and its occurrence, so responses pair with their calls by id.
fn call_ids(cs: &[Arc<GeminiContent>]) -> Vec<Vec<String>> {
    let mut seen: HashMap<&str, usize> = HashMap::default();
    cs.iter()
        .map(|c| {
            let mut in_content: HashMap<&str, usize> = HashMap::default();
            c.calls
                .iter()
                .map(|call| match &call.id {
                    Some(id) => {
                        let k = in_content.entry(id).or_default();
                        *k += 1;
                        if *k == 1 {
                            id.clone()
                        } else {
                            format!("{id}#{}", *k - 1)
                        }
                    }
                    None => {
                        // Every call read without an id has its digest (`parse`).
                        let digest = call.digest.as_deref().unwrap_or_default();
                        let k = seen.entry(digest).or_default();
                        *k += 1;
                        format!("gemini_{digest}_{}", *k - 1)
                    }
                })
                .collect()
        })
        .collect()
}

/// The canonical view of the contents.
pub fn canonical(cs: &[Arc<GeminiContent>]) -> Canonical {
    with_answers(cs, &answers(cs))
}

/// The pairing issues and the canonical view of the contents, paired once.
pub fn issues_and_canonical(cs: &[Arc<GeminiContent>]) -> (Vec<PairingIssue>, Canonical) {
    let (issues, answered) = pair(cs);
    (issues, with_answers(cs, &answered))
}

/// The canonical view of the contents whose responses answer the calls `answered` says.
fn with_answers(cs: &[Arc<GeminiContent>], answered: &Answer) -> Canonical {
    let ids = call_ids(cs);
    let mut out = Canonical::default();
    let push = |out: &mut Canonical, msg: Message, k: usize| {
        out.messages.push(msg);
        out.layout.groups.push(k);
        out.layout.binds_next.push(false);
    };
    for (k, c) in cs.iter().enumerate() {
        let mut rest = empty(Role::User);
        rest.texts.clone_from(&c.texts);
        rest.images.clone_from(&c.images);
        rest.other_part_tokens = c.other_tokens;
        if c.role == Role::Assistant {
            let mut msg = empty(Role::Assistant);
            msg.texts = std::mem::take(&mut rest.texts);
            msg.tool_calls = c
                .calls
                .iter()
                .zip(&ids[k])
                .map(|(call, id)| ToolCall {
                    id: id.as_str().into(),
                    name: call.name.clone(),
                    arguments: call.args.clone(),
                })
                .collect();
            if !rest.images.is_empty() || rest.other_part_tokens > 0 {
                push(&mut out, rest, k);
            }
            push(&mut out, msg, k);
            continue;
        }
        for (ri, r) in c.responses.iter().enumerate() {
            let id = match answered.get(&(k, ri)) {
                Some(&(t, m)) => ids[t][m].clone(),
                None => format!("gemini_orphan_{k}_{}", r.pos),
            };
            // The response's text is shared with the parsed content, not copied: it is most
            // of a long session's bytes.
            let result = Message {
                name: Some(r.name.clone()),
                texts: vec![Arc::clone(&r.text)],
                tool_call_id: Some(id),
                is_error: r.is_error,
                bytes: r.text.len(),
                framed_as: Some(r.framed_as.clone()),
                ..empty(Role::Tool)
            };
            push(&mut out, result, k);
        }
        let has_rest =
            !rest.texts.is_empty() || !rest.images.is_empty() || rest.other_part_tokens > 0;
        if has_rest || c.responses.is_empty() {
            push(&mut out, rest, k);
        }
    }
    out
}
