use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::native::validate_json;
use crate::pairing::IssueKind::{self, *};

fn read(messages: &[Value]) -> Vec<Arc<AnthropicMessage>> {
    let json = serde_json::to_vec(messages).unwrap();
    Anthropic.parse_all(&[&json]).unwrap()
}

fn issues(messages: &[Value]) -> Vec<PairingIssue> {
    Anthropic.validate(&read(messages))
}

fn kinds(messages: &[Value]) -> Vec<(IssueKind, usize, String)> {
    issues(messages)
        .into_iter()
        .map(|i| (i.kind, i.index, i.call_id.unwrap()))
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn said(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

fn uses(ids: &[&str]) -> Value {
    let blocks: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type": "tool_use", "id": id, "name": "f", "input": {}}))
        .collect();
    json!({"role": "assistant", "content": blocks})
}

fn result(id: &str) -> Value {
    json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
}

fn results(ids: &[&str]) -> Value {
    let blocks: Vec<Value> = ids.iter().map(|id| result(id)).collect();
    json!({"role": "user", "content": blocks})
}

#[test]
fn unanswered_call_quotes_anthropic() {
    let msgs = [
        user("go"),
        uses(&["toolu_a", "toolu_b"]),
        json!({"role": "user", "content": [result("toolu_b"), {"type": "text", "text": "a runs"}]}),
        said("ok"),
    ];
    assert_eq!(kinds(&msgs), [(MissingResult, 1, "toolu_a".into())]);
    assert!(issues(&msgs)[0].message.starts_with(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: \
         toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the \
         next message. (ringbound: call 'toolu_a' has no result in the next turn, \
         messages[2:3])"
    ));
}

#[test]
fn orphan_duplicate_and_misplaced_results_quote_anthropic() {
    let orphan = [
        user("go"),
        said("no call"),
        json!({"role": "user", "content": [result("toolu_ghost"), {"type": "text", "text": "hm"}]}),
    ];
    assert_eq!(kinds(&orphan), [(OrphanResult, 2, "toolu_ghost".into())]);
    assert!(issues(&orphan)[0].message.starts_with(
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: \
         toolu_ghost. Each `tool_result` block must have a corresponding `tool_use` block in \
         the previous message."
    ));

    let reused = [
        user("go"),
        uses(&["toolu_a"]),
        results(&["toolu_a"]),
        uses(&["toolu_a"]),
        results(&["toolu_a"]),
    ];
    assert_eq!(kinds(&reused), [(DuplicateId, 3, "toolu_a".into())]);
    assert!(issues(&reused)[0]
        .message
        .starts_with("messages.3.content.0: `tool_use` ids must be unique"));

    let twice = [
        user("go"),
        uses(&["toolu_a"]),
        results(&["toolu_a", "toolu_a"]),
    ];
    assert_eq!(kinds(&twice), [(DuplicateId, 2, "toolu_a".into())]);
    assert!(issues(&twice)[0].message.starts_with(
        "messages.2.content.1: each tool_use must have a single result. Found multiple \
         tool_result blocks with id: toolu_a"
    ));

    let text_first = [
        user("go"),
        uses(&["toolu_a"]),
        json!({"role": "user", "content": [{"type": "text", "text": "here:"}, result("toolu_a")]}),
    ];
    assert_eq!(
        kinds(&text_first),
        [(ResultNotAdjacent, 2, "toolu_a".into())]
    );
    assert!(issues(&text_first)[0].message.starts_with(
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message."
    ));

    let late_and_early = [
        results(&["toolu_b"]),
        uses(&["toolu_a"]),
        results(&["toolu_a"]),
        uses(&["toolu_b"]),
        user("skipped the result"),
        said("..."),
        results(&["toolu_a"]),
    ];
    assert_eq!(
        kinds(&late_and_early),
        [
            (ResultBeforeCall, 0, "toolu_b".into()),
            (MissingResult, 3, "toolu_b".into()),
            (ResultNotAdjacent, 6, "toolu_a".into()),
        ]
    );
}

#[test]
fn consecutive_same_role_messages_are_one_turn() {
    let msgs = [
        user("go"),
        uses(&["toolu_a"]),
        uses(&["toolu_b"]),
        results(&["toolu_a"]),
        results(&["toolu_b"]),
    ];
    assert_eq!(issues(&msgs), []);
    let canonical = Anthropic.canonical(&read(&msgs));
    let roles: Vec<Role> = canonical.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool, Role::Tool]);
    assert_eq!(canonical.layout.groups, [0, 1, 3, 3]);
    assert_eq!(canonical.messages[1].tool_calls.len(), 2);
}

#[test]
fn nothing_before_the_latest_compaction_is_checked_or_counted() {
    let compaction = |summary: &str| {
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "dropped by the API"},
            {"type": "compaction", "content": summary},
            {"type": "text", "text": "after"}
        ]})
    };
    let msgs = [
        user("go"),
        uses(&["toolu_lost"]),
        user("its result never came"),
        compaction("first summary"),
        user("more"),
        uses(&["toolu_lost"]),
        compaction("the summary"),
        user("next"),
        uses(&["toolu_a"]),
        results(&["toolu_a"]),
    ];
    let items = read(&msgs);
    assert_eq!(
        start(&items),
        Start {
            message: 6,
            block: 1
        }
    );
    assert_eq!(Anthropic.validate(&items), []);
    let canonical = Anthropic.canonical(&items);
    assert_eq!(canonical.first_counted, 6);
    assert_eq!(
        crate::view::strs(&canonical.messages[0].texts),
        ["the summary", "after"]
    );
    assert_eq!(canonical.layout.groups, [6, 7, 8, 9]);
    // The block's message is pinned: its summary is the only record of what came before.
    assert_eq!(Anthropic.pinned(&items), [6]);
    assert_eq!(
        Anthropic.pinned(&read(&[user("go"), said("hi")])),
        [] as [usize; 0]
    );

    // Pairing resumes at the compaction block: a result whose call it dropped is an orphan,
    // and block indices keep counting from the message's first block.
    let mut orphaned = msgs[..7].to_vec();
    orphaned[6] = json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_x", "name": "f", "input": {}},
        {"type": "compaction", "content": "s"},
        {"type": "tool_use", "id": "toolu_y", "name": "f", "input": {}}
    ]});
    orphaned.push(results(&["toolu_x", "toolu_y"]));
    assert_eq!(kinds(&orphaned), [(OrphanResult, 7, "toolu_x".into())]);
    orphaned[7] = user("none");
    assert!(issues(&orphaned)[0].message.starts_with("messages.6: "));
}

#[test]
fn whitespace_only_text_is_marked_and_never_counted() {
    let msgs = [
        user("go"),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "s"},
            {"type": "text", "text": "\n\n"},
            {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1}}
        ]}),
        json!({"role": "user", "content": [result("toolu_a"), {"type": "text", "text": " \t"}]}),
    ];
    let items = read(&msgs);
    assert_eq!(
        items[1].blocks[1],
        Block::Text {
            text: "\n\n".into(),
            blank: true
        }
    );
    assert_eq!(Anthropic.validate(&items), []);
    let canonical = Anthropic.canonical(&items);
    assert_eq!(crate::view::strs(&canonical.messages[1].texts), ["plan"]);
    assert_eq!(
        canonical.messages[1].tool_calls[0].arguments,
        r#"{"x":1}"#.into()
    );
    assert_eq!(
        canonical.messages.len(),
        3,
        "the blank text makes no user message"
    );
}

#[test]
fn media_is_priced_without_filler() {
    // A one-page PDF, a PNG of 2 x 3 pixels, and a remote image of unknown size.
    let pdf = base64_of(b"%PDF-1.4 1 0 obj << /Type /Page >> 2 0 obj << /Type /Pages >>");
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAYAAAC56t6B";
    let msgs = [json!({"role": "user", "content": [
        {"type": "document", "title": "spec", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    ]})];
    let canonical = Anthropic.canonical(&read(&msgs));
    let msg = &canonical.messages[0];
    assert_eq!(crate::view::strs(&msg.texts), ["spec"]);
    assert_eq!(msg.other_part_tokens, parse::PDF_PAGE_TOKENS);
    let sizes: Vec<_> = msg.images.iter().map(|i| i.size).collect();
    assert_eq!(sizes, [None, Some((2, 3)), None]);
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[test]
fn a_plain_turn_before_thinking_binds_to_the_turn_before_it() {
    let msgs = [
        user("go"),
        said("thinking next"),
        user("and?"),
        json!({"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "ok"}]}),
    ];
    let canonical = Anthropic.canonical(&read(&msgs));
    assert_eq!(canonical.layout.binds_next, [false, true, false, false]);
}

#[test]
fn bad_input_is_a_typed_error_naming_the_message() {
    let cases: &[(Value, &str)] = &[
        (json!("hello"), "a message must be an object, got str"),
        (
            json!({"role": "system", "content": "r"}),
            "role 'system' is not a message role",
        ),
        (json!({"role": "tool", "content": "x"}), "(got 'tool')"),
        (json!({"role": "user"}), "missing `content`"),
        (json!({"role": "user", "content": 3}), "got int"),
        (
            json!({"role": "user", "content": ["hi"]}),
            "content[0] must be an object",
        ),
        (
            json!({"role": "user", "content": [{"text": "hi"}]}),
            "has no string `type`",
        ),
        (
            json!({"role": "user", "content": [{"type": "text", "text": null}]}),
            "got null",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}),
            "content[0].id must be a string",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "[]"}]}),
            "content[0].input must be an object, got str",
        ),
        (
            json!({"role": "assistant", "content": [result("t")]}),
            "only a user message",
        ),
        (
            json!({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}),
            "only an assistant message",
        ),
        (
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "is_error": "yes"}]}),
            "is_error must be a boolean",
        ),
        (
            json!({"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png"}}]}),
            "content[0].source.data must be a string",
        ),
        (
            json!({"role": "user", "content": [{"type": "image", "source": {"type": "ftp"}}]}),
            "source.type must be one of base64, url, file, got 'ftp'",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "thinking"}]}),
            "thinking must be",
        ),
        (
            json!({"role": "assistant", "content": [{"type": "compaction", "content": 5}]}),
            "content[0].content must be a string, got int",
        ),
    ];
    for (message, reason) in cases {
        let json = serde_json::to_vec(&[user("x"), message.clone()]).unwrap();
        match validate_json("anthropic", &[&json]) {
            Err(CoreError::InvalidMessage {
                index: Some(1),
                reason: got,
            }) => assert!(got.contains(reason), "{got} lacks {reason}"),
            other => panic!("{message}: {other:?}"),
        }
    }
}

/// A valid conversation: rings of one to three calls (ids unique), plain exchanges, thinking,
/// blank text blocks and now and then a compaction block.
fn conversation() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec((1..=3usize, any::<bool>(), 0..8u8), 1..10).prop_map(|turns| {
        let mut msgs = vec![user("go")];
        for (t, (calls, think, extra)) in turns.into_iter().enumerate() {
            let ids: Vec<String> = (0..calls).map(|c| format!("toolu_{t}_{c}")).collect();
            let mut blocks = Vec::new();
            if think {
                blocks.push(json!({"type": "thinking", "thinking": "t", "signature": "s"}));
            }
            if extra == 0 {
                blocks.push(json!({"type": "compaction", "content": "summary"}));
            }
            if extra == 1 {
                blocks.push(json!({"type": "text", "text": "\n\n"}));
            }
            blocks.extend(
                ids.iter()
                    .map(|id| json!({"type": "tool_use", "id": id, "name": "f", "input": {}})),
            );
            msgs.push(json!({"role": "assistant", "content": blocks}));
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            msgs.push(results(&refs));
            if extra == 2 {
                msgs.push(said("done"));
                msgs.push(user("next"));
            }
        }
        msgs
    })
}

/// Messages of the shapes the direct reading takes, each now and then bent out of them.
fn bent_message() -> impl Strategy<Value = Value> {
    let block = prop::sample::select(vec![
        json!({"type": "text", "text": "hi \"there\"\n", "cache_control": {"type": "ephemeral"}}),
        json!({"type": "text", "text": "\n\n"}),
        json!({"type": "text", "text": null}),
        json!({"type": "text", "text": "a", "text": "b"}),
        json!({"type": "thinking", "thinking": "t", "signature": "s"}),
        json!({"type": "redacted_thinking", "data": "abc"}),
        json!({"type": "thinking"}),
        json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"b": [1, 2.5e3], "a": "é"}}),
        json!({"type": "tool_use", "id": "", "name": "f", "input": {}}),
        json!({"type": "tool_use", "id": "t", "name": "f", "input": [1]}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": true}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": null, "is_error": null}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a"}]}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "image", "source": {"type": "url", "url": "u"}}]}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "is_error": 1}),
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": 7}),
        json!({"type": "image", "source": {"type": "url", "url": "u"}}),
        json!({"type": "compaction", "content": "s"}),
        json!({"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}),
        json!("bare"),
        json!({"text": "untyped"}),
    ]);
    (
        prop::sample::select(vec![
            json!("user"),
            json!("assistant"),
            json!("system"),
            json!(3),
        ]),
        prop_oneof![
            4 => prop::collection::vec(block, 0..4).prop_map(Value::Array),
            1 => Just(json!("plain text")),
            1 => Just(Value::Null),
        ],
        any::<bool>(),
    )
        .prop_map(|(role, content, extra)| {
            let mut msg = json!({"role": role, "content": content});
            if extra {
                msg["id"] = json!("msg_1");
                msg["usage"] = json!({"input_tokens": 3});
            }
            msg
        })
}

proptest! {
    /// The direct reading makes exactly the message the general reading makes, whenever it
    /// reads one at all.
    #[test]
    fn the_direct_reading_changes_nothing(msg in bent_message()) {
        let raw = serde_json::to_vec(&msg).unwrap();
        if let Some(fast) = parse::fast::message(&raw) {
            prop_assert_eq!(Ok(fast), parse::general(0, &raw));
        }
    }

    #[test]
    fn generated_conversations_are_valid(msgs in conversation()) {
        prop_assert_eq!(issues(&msgs), vec![]);
        let items = read(&msgs);
        let canonical = Anthropic.canonical(&items);
        prop_assert!(canonical.layout.groups.windows(2).all(|w| w[0] <= w[1]));
        prop_assert!(canonical.layout.groups.iter().all(|&g| g >= canonical.first_counted));
        prop_assert!(canonical.messages.iter().flat_map(|m| &m.texts).all(|t| &**t != "\n\n"));
    }

    /// Deleting one result block after the latest compaction gives exactly one missing
    /// result, at its call.
    /// Every message of a generated conversation takes the direct reading.
    #[test]
    fn plain_conversations_take_the_direct_reading(msgs in conversation()) {
        for msg in &msgs {
            let raw = serde_json::to_vec(msg).unwrap();
            let Some(fast) = parse::fast::message(&raw) else {
                prop_assert!(msg.to_string().contains("compaction"), "{}", msg);
                continue;
            };
            prop_assert_eq!(Ok(fast), parse::general(0, &raw));
        }
    }

    #[test]
    fn a_deleted_result_is_missing(msgs in conversation(), pick in any::<prop::sample::Index>()) {
        let items = read(&msgs);
        let from = start(&items).message;
        let spots: Vec<(usize, usize)> = (from..msgs.len())
            .filter(|&i| msgs[i]["role"] == "user" && msgs[i]["content"].is_array())
            .flat_map(|i| (0..msgs[i]["content"].as_array().unwrap().len()).map(move |b| (i, b)))
            .collect();
        prop_assume!(!spots.is_empty());
        let (i, b) = *pick.get(&spots);
        let mut broken = msgs.clone();
        let gone = broken[i]["content"].as_array_mut().unwrap().remove(b);
        let id = gone["tool_use_id"].as_str().unwrap().to_owned();
        if broken[i]["content"].as_array().unwrap().is_empty() {
            broken[i] = user("nothing");
        }
        let found = kinds(&broken);
        prop_assert_eq!(found.len(), 1);
        prop_assert_eq!((found[0].0, found[0].2.as_str()), (MissingResult, id.as_str()));
        prop_assert_eq!(found[0].1, i - 1);
    }

    /// On any JSON at all: a typed error or issues, never a panic.
    #[test]
    fn junk_is_an_error_or_issues(msgs in prop::collection::vec(junk(), 0..6)) {
        let json = serde_json::to_vec(&msgs).unwrap();
        if let Ok(items) = Anthropic.parse_all(&[&json]) {
            let _ = Anthropic.validate(&items);
            let _ = Anthropic.canonical(&items);
        }
    }
}

fn junk() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        prop::sample::select(vec![
            "user",
            "assistant",
            "text",
            "tool_use",
            "tool_result",
            "compaction",
            "image",
            "document",
            "base64",
            "url",
            "toolu_a",
            " ",
            "id",
            "type",
            "content",
            "role",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "role",
                    "content",
                    "type",
                    "text",
                    "id",
                    "name",
                    "input",
                    "tool_use_id",
                    "is_error",
                    "source",
                    "data",
                    "media_type",
                    "url",
                    "thinking",
                ]),
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

fn facts_of(messages: &[Value]) -> Vec<ItemFacts> {
    read(messages).iter().map(|m| Anthropic.facts(m)).collect()
}

#[test]
fn neighbours_a_drop_brings_together_merge_and_those_sent_together_stay() {
    // 0 user | 1 assistant | 2 user, 3 user (one turn) | 4 assistant
    let facts = facts_of(&[user("a"), said("b"), user("c"), user("d"), said("e")]);
    let runs = |kept: &[usize]| Anthropic.merges(&facts, kept);
    assert_eq!(runs(&[0, 1, 2, 4]), Some(vec![]));
    assert_eq!(
        runs(&[0, 2, 3, 4]),
        Some(vec![Run {
            range: 0..3,
            merge: true
        }])
    );
    assert_eq!(
        runs(&[2, 3, 4]),
        Some(vec![Run {
            range: 0..2,
            merge: false
        }])
    );
    // Blank text is stripped first (`stripped`).
    let blank = facts_of(&[
        user("a"),
        json!({"role": "user", "content": [{"type": "text", "text": "\n\n"}]}),
    ]);
    assert_eq!(
        Anthropic.merges(&blank, &[0, 1]),
        Some(vec![Run {
            range: 0..2,
            merge: false
        }])
    );
}

#[test]
fn thinking_never_follows_a_neighbour_of_its_role() {
    let thinking = json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "x"}]});
    let facts = facts_of(&[user("a"), said("b"), user("c"), thinking]);
    assert!(facts[3].opens_with_thinking);
    // Whitespace-only text before it is stripped first, so thinking opens the message sent.
    let blank_first = json!({"role": "assistant", "content": [
        {"type": "text", "text": "

"}, {"type": "thinking", "thinking": "hm", "signature": "s"}]});
    assert!(facts_of(&[user("a"), blank_first])[1].opens_with_thinking);
    // Kept apart by a user turn of the provider's own, never merged.
    assert_eq!(Anthropic.merges(&facts, &[0, 1, 3]), Some(vec![]));
    let (at, item) = Anthropic.parted(&facts, &[0, 1, 3]);
    assert_eq!(at, vec![2]);
    assert_eq!(
        serde_json::from_str::<Value>(item).unwrap(),
        json!({"role": "user", "content": "[earlier turns omitted]"})
    );
    assert_eq!(Anthropic.merges(&facts, &[0, 3]), Some(vec![]));
    assert_eq!(Anthropic.parted(&facts, &[0, 3]).0, Vec::<usize>::new());
}

#[test]
fn merged_neighbours_are_one_message_of_their_blocks() {
    let merged = Anthropic
        .merged(
            "user",
            &[
                br#"{"role":"user","content":"a \"quoted\" text"}"#,
                br#"{"content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"role":"user"}"#,
            ],
        )
        .unwrap();
    let merged: Value = serde_json::from_slice(&merged).unwrap();
    assert_eq!(
        merged,
        json!({"role": "user", "content": [
            {"type": "text", "text": "a \"quoted\" text"},
            {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(
        Anthropic.merged("user", &[br#"{"role":"user","content":null}"#]),
        None
    );
    assert_eq!(Anthropic.merged("user", &[b"not json"]), None);
}

#[test]
fn whitespace_only_text_blocks_are_stripped_and_the_rest_kept_as_written() {
    let item = br#"{"role":"assistant", "content":[{"type":"text","text":"\n\n"},{"type":"text","text":"hi"},{"type":"text","text":"\u001c "}], "id":"m"}"#;
    let out = Anthropic.stripped(item).unwrap().unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"{"role":"assistant", "content":[{"type":"text","text":"hi"}], "id":"m"}"#
    );
    // Nothing blank, everything blank, or a string content: as it is.
    for same in [
        &br#"{"role":"user","content":[{"type":"text","text":"a"}]}"#[..],
        br#"{"role":"user","content":[{"type":"text","text":" "}]}"#,
        br#"{"role":"user","content":"  "}"#,
    ] {
        assert_eq!(Anthropic.stripped(same), Some(None));
    }
    assert_eq!(Anthropic.stripped(b"not json"), None);
    assert!(blank("\u{1c}\u{3000}\n") && !blank("\u{200b}"));
}

/// `item` with the result answering `call` rewritten to `text`, as JSON.
fn rewritten(item: Value, call: &str, text: &str) -> Option<Option<Value>> {
    let raw = serde_json::to_vec(&item).unwrap();
    let at = ResultAt {
        call_id: call,
        nth: Some(0),
    };
    Anthropic
        .result_rewritten(&raw, at, text)
        .map(|o| o.map(|b| serde_json::from_slice(&b).unwrap()))
}

#[test]
fn a_rewritten_result_holds_the_text_after_its_images_and_nothing_else_changes() {
    let image = json!({"type": "image", "source": {"type": "url", "url": "https://x/i.png"}});
    let message = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "long"}, image], "cache_control": {"type": "ephemeral"}},
        {"type": "tool_result", "tool_use_id": "b", "content": "other", "is_error": true},
        {"type": "text", "text": "go on"},
    ]});
    let got = rewritten(message.clone(), "a", "cut").unwrap().unwrap();
    let mut expected = message.clone();
    expected["content"][0]["content"] = json!([{"type": "text", "text": "cut"}, image]);
    assert_eq!(got, expected);
    let got = rewritten(message.clone(), "b", "stub").unwrap().unwrap();
    expected = message.clone();
    expected["content"][1]["content"] = json!("stub");
    assert_eq!(got, expected);
    // A result without content gets one; an item without the result, or a string, is as it is.
    let bare = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]});
    assert_eq!(
        rewritten(bare, "a", "x").unwrap().unwrap()["content"][0]["content"],
        json!("x")
    );
    assert_eq!(rewritten(message, "zz", "x"), Some(None));
    assert_eq!(
        rewritten(json!({"role": "user", "content": "hi"}), "a", "x"),
        Some(None)
    );
}

#[test]
fn images_made_text_keep_their_cache_marker_and_reach_into_results_and_documents() {
    let image = json!({"type": "image", "source": {"type": "url", "url": "https://x/i.png"}});
    let marked = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}, "cache_control": {"type": "ephemeral"}});
    let message = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "shot"}, image]},
        marked,
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "kept"}},
        {"type": "document", "source": {"type": "content", "content": [image, {"type": "text", "text": "t"}]}},
        {"type": "text", "text": "go on"},
    ]});
    let raw = serde_json::to_vec(&message).unwrap();
    let got: Value = serde_json::from_slice(
        &Anthropic
            .media_rewritten(&raw, false, "gone")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let text = json!({"type": "text", "text": "gone"});
    let mut expected = message.clone();
    expected["content"][0]["content"][1] = text.clone();
    expected["content"][1] =
        json!({"type": "text", "text": "gone", "cache_control": {"type": "ephemeral"}});
    expected["content"][3]["source"]["content"][0] = text;
    assert_eq!(got, expected);
    let plain = serde_json::to_vec(&json!({"role": "user", "content": "hi"})).unwrap();
    assert_eq!(Anthropic.media_rewritten(&plain, true, "gone"), Some(None));
}
