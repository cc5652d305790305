use serde_json::{json, Value};

use super::*;
use crate::native::validate_json;
use crate::pairing::IssueKind::{self, *};

fn read(messages: &[Value]) -> Vec<Arc<BedrockMessage>> {
    let json = serde_json::to_vec(messages).unwrap();
    BedrockConverse.parse_all(&[&json]).unwrap()
}

fn issues(messages: &[Value]) -> Vec<PairingIssue> {
    BedrockConverse.validate(&read(messages))
}

fn kinds(messages: &[Value]) -> Vec<(IssueKind, usize)> {
    issues(messages)
        .into_iter()
        .map(|i| (i.kind, i.index))
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"text": text}]})
}

fn said(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"text": text}]})
}

fn uses(ids: &[&str]) -> Value {
    let blocks: Vec<Value> = ids
        .iter()
        .map(|id| json!({"toolUse": {"toolUseId": id, "name": "f", "input": {"x": 1}}}))
        .collect();
    json!({"role": "assistant", "content": blocks})
}

fn result(id: &str) -> Value {
    json!({"toolResult": {"toolUseId": id, "content": [{"text": "ok"}]}})
}

fn results(ids: &[&str]) -> Value {
    let blocks: Vec<Value> = ids.iter().map(|id| result(id)).collect();
    json!({"role": "user", "content": blocks})
}

#[test]
fn a_paired_conversation_has_no_issue() {
    let msgs = [
        user("go"),
        uses(&["a", "b"]),
        results(&["b", "a"]),
        said("done"),
    ];
    assert!(issues(&msgs).is_empty());
}

#[test]
fn missing_results_quote_bedrock() {
    let msgs = [user("go"), uses(&["a", "b"]), results(&["a"])];
    assert_eq!(kinds(&msgs), [(MissingResult, 1)]);
    assert_eq!(
        issues(&msgs)[0].message,
        "Expected toolResult blocks at messages.2.content for the following Ids: b \
         ringbound: messages[1] calls `b` (f) and messages[2] has no toolResult for it"
    );
    let at_end = [user("go"), uses(&["a"])];
    assert!(issues(&at_end)[0]
        .message
        .ends_with("and no user message follows"));
    let text_after = [user("go"), uses(&["a"]), user("hm")];
    assert_eq!(
        kinds(&text_after),
        [(MissingResult, 1), (UnrepairableMissingResult, 2)]
    );
}

#[test]
fn turn_order_quotes_bedrock() {
    let msgs = [said("hi"), said("again"), user("go")];
    assert_eq!(
        kinds(&msgs),
        [(FirstMessageNotUser, 0), (RolesNotAlternating, 1)]
    );
    let all = issues(&msgs);
    assert!(all[0].message.starts_with(START_WITH_USER));
    assert!(all[1]
        .message
        .ends_with("messages[0] and messages[1] are both assistant messages"));
}

#[test]
fn result_turn_rules_quote_bedrock() {
    let mixed = [
        user("go"),
        uses(&["a"]),
        json!({"role": "user", "content": [result("a"), {"text": "and"}]}),
    ];
    assert_eq!(kinds(&mixed), [(ResultsMixedWithContent, 2)]);
    assert!(issues(&mixed)[0].message.starts_with(
        "messages.2.content: Conversation blocks and tool result blocks cannot be provided in \
         the same turn."
    ));
    let twice = [user("go"), uses(&["a"]), results(&["a", "a"])];
    assert_eq!(kinds(&twice), [(DuplicateId, 2)]);
    let dup_use = [user("go"), uses(&["a", "a"]), results(&["a"])];
    assert_eq!(kinds(&dup_use), [(DuplicateId, 1)]);
    let empty_error = [
        user("go"),
        uses(&["a"]),
        json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "a", "status": "error", "content": []}}
        ]}),
    ];
    assert_eq!(kinds(&empty_error), [(EmptyErrorResult, 2)]);
    assert!(issues(&empty_error)[0].message.starts_with(
        "The content field at messages.2.content.0.toolResult cannot be empty when status \
         value is error."
    ));
}

#[test]
fn stray_results_use_the_shared_classifier() {
    let orphan = [user("go"), uses(&["a"]), results(&["a", "z"])];
    assert_eq!(kinds(&orphan), [(OrphanResult, 2)]);
    assert!(issues(&orphan)[0].message.starts_with(
        "The number of toolResult blocks at messages.2.content exceeds the number of toolUse \
         blocks of previous turn."
    ));
    let late = [
        user("go"),
        uses(&["a"]),
        results(&["b"]),
        said("hm"),
        results(&["a"]),
    ];
    assert_eq!(
        kinds(&late),
        [
            (MissingResult, 1),
            (OrphanResult, 2),
            (ResultNotAdjacent, 4)
        ]
    );
    assert_eq!(
        issues(&late)[1].message,
        "Expected toolResult blocks at messages.2.content for the following Ids: a, but \
         found: b ringbound: messages[2] answers `b`, which no assistant message calls"
    );
    assert!(issues(&late)[2].message.ends_with(
        "answers `a` of messages[1], but results belong in the user turn right after the call"
    ));
    let early = [
        user("go"),
        said("x"),
        results(&["a"]),
        uses(&["a"]),
        results(&["a"]),
    ];
    assert_eq!(kinds(&early), [(ResultBeforeCall, 2)]);
}

#[test]
fn malformed_messages_name_their_index() {
    let bad = |msg: Value| {
        let json = serde_json::to_vec(&[user("go"), msg]).unwrap();
        match BedrockConverse.parse_all(&[&json]) {
            Err(CoreError::InvalidMessage { index, reason }) => {
                assert_eq!(index, Some(1));
                reason
            }
            other => panic!("not refused: {other:?}"),
        }
    };
    assert_eq!(
        bad(json!({"role": "system", "content": [{"text": "x"}]})),
        "`role` must be user or assistant, got 'system' (Bedrock takes the system prompt as \
         the top-level `system`, not as a message)"
    );
    assert_eq!(
        bad(json!({"role": "user", "content": []})),
        "The content field in the Message object at messages.1 is empty."
    );
    // An Anthropic-compacted history: Bedrock refuses the feature, in its own words.
    for block in [
        json!({"type": "compaction", "content": "summary", "signature": "sig"}),
        json!({"compaction": {"content": "summary"}}),
    ] {
        assert_eq!(
            bad(json!({"role": "assistant", "content": [{"text": "ok"}, block]})),
            "content[1] is a compaction block: The compact beta feature is not currently \
             supported on the Converse and ConverseStream APIs."
        );
    }
    assert_eq!(
        bad(json!({"role": "user", "content": [{"text": "a", "image": null, "video": {}}]})),
        "content[0] must set exactly one block type, got ['text', 'video']"
    );
    assert_eq!(
        bad(json!({"role": "assistant", "content": [result("a")]})),
        "content[0] has type toolResult, which a assistant message cannot carry"
    );
    assert_eq!(
        bad(
            json!({"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "f"}}]})
        ),
        "content[0].toolUse has no `input`"
    );
    assert_eq!(
        bad(json!({"role": "user", "content": [
            {"toolResult": {"toolUseId": "a", "status": "done", "content": []}}
        ]})),
        "content[0].toolResult.status must be success or error, got 'done'"
    );
    assert_eq!(
        bad(json!({"role": "user", "content": [{"image": {"format": "png", "source": {"x": 1}}}]})),
        "content[0].image.source must be bytes or s3Location, got x"
    );
}

#[test]
fn canonical_view_prices_documents_by_what_they_hold() {
    // A 1x1 PNG, a text document, a two-page PDF and a video.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let text = "aGVsbG8gd29ybGQ="; // "hello world"
    let pdf =
        "JVBERi0xLjQKMSAwIG9iaiA8PCAvVHlwZSAvUGFnZSA+PgoyIDAgb2JqIDw8IC9UeXBlIC9QYWdlID4+Cg==";
    let video = "A".repeat(400);
    let msgs = [
        json!({"role": "user", "content": [
            {"image": {"format": "png", "source": {"bytes": png}}},
            {"document": {"format": "txt", "name": "notes", "source": {"bytes": text}}},
            {"document": {"format": "pdf", "name": "paper", "source": {"bytes": pdf}}},
            {"video": {"format": "mp4", "source": {"bytes": video}}},
            {"cachePoint": {"type": "default"}},
        ]}),
        uses(&["a"]),
        json!({"role": "user", "content": [{"toolResult": {"toolUseId": "a", "status": "error",
            "content": [{"text": "boom"}, {"image": {"format": "png", "source": {"bytes": png}}}]}}]}),
    ];
    let view = BedrockConverse.canonical(&read(&msgs));
    assert_eq!(view.layout.groups, [0, 1, 2, 2]);
    let first = &view.messages[0];
    assert_eq!(
        crate::view::strs(&first.texts),
        ["notes", "hello world", "paper"]
    );
    assert_eq!(
        first.images.len(),
        3,
        "the image and the PDF's two page images"
    );
    assert_eq!(first.images[0].size, Some((1, 1)));
    assert_eq!(first.other_part_tokens, 2 * 3000 + 134);
    let result = &view.messages[2];
    assert!(result.is_error);
    assert_eq!(crate::view::strs(&result.texts), ["boom"]);
    assert_eq!(
        view.messages[3].images.len(),
        1,
        "the result's image is priced in the turn"
    );
    assert!(crate::pairing::validate(&view.messages).is_empty());
}

#[test]
fn the_dispatch_reads_bedrock() {
    let json = serde_json::to_vec(&[user("go"), uses(&["a"])]).unwrap();
    let found = validate_json("bedrock_converse", &[&json]).unwrap();
    assert_eq!(found[0].kind, MissingResult);
    assert!(validate_json("nope", &[&json]).is_err());
}

#[test]
fn kept_neighbours_of_one_role_go_out_as_one_message() {
    let facts: Vec<ItemFacts> = read(&[
        json!({"role": "user", "content": [{"text": "a"}]}),
        json!({"role": "assistant", "content": [{"text": "b"}]}),
        json!({"role": "user", "content": [{"text": "c"}]}),
    ])
    .iter()
    .map(|m| BedrockConverse.facts(m))
    .collect();
    assert_eq!(BedrockConverse.merges(&facts, &[0, 1, 2]), Some(vec![]));
    assert_eq!(
        BedrockConverse.merges(&facts, &[0, 2]),
        Some(vec![Run {
            range: 0..2,
            merge: true
        }])
    );
    let merged = BedrockConverse
        .merged(
            "user",
            &[
                br#"{"role":"user","content":[{"text":"a"}]}"#,
                br#"{"content":[{"text":"c","x":null}],"role":"user"}"#,
            ],
        )
        .unwrap();
    let merged: Value = serde_json::from_slice(&merged).unwrap();
    assert_eq!(
        merged,
        json!({"role": "user", "content": [{"text": "a"}, {"text": "c", "x": null}]})
    );
    // A turn of tool results takes nothing else: the adapter's path refuses it.
    let result = br#"{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"text":"ok"}]}}]}"#;
    assert_eq!(
        BedrockConverse.merged(
            "user",
            &[result, br#"{"role":"user","content":[{"text":"c"}]}"#]
        ),
        None
    );
    assert!(BedrockConverse.merged("user", &[result, result]).is_some());
}

#[test]
fn a_rewritten_result_holds_the_text_before_its_images_with_its_status() {
    let image = json!({"image": {"format": "png", "source": {"bytes": "AAAA"}}});
    let message = json!({"role": "user", "content": [
        {"toolResult": {"toolUseId": "a", "content": [{"text": "long"}, image, {"json": {"k": 1}}], "status": "error"}},
        {"toolResult": {"toolUseId": "b", "content": [{"text": "other"}]}},
    ]});
    let raw = serde_json::to_vec(&message).unwrap();
    let at = ResultAt {
        call_id: "a",
        nth: Some(0),
    };
    let got: Value = serde_json::from_slice(
        &BedrockConverse
            .result_rewritten(&raw, at, "cut")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let mut expected = message.clone();
    expected["content"][0]["toolResult"]["content"] = json!([{"text": "cut"}, image]);
    assert_eq!(got, expected);
    // Another call, or a message past the first of the canonical one's: as it is.
    for (call_id, nth) in [("zz", Some(0)), ("a", None)] {
        let at = ResultAt { call_id, nth };
        assert_eq!(BedrockConverse.result_rewritten(&raw, at, "x"), Some(None));
    }
}

#[test]
fn images_made_text_in_the_first_message_only() {
    let image = json!({"image": {"format": "png", "source": {"bytes": "AAAA"}}});
    let message = json!({"role": "user", "content": [
        {"toolResult": {"toolUseId": "a", "content": [{"text": "shot"}, image], "status": "success"}},
        {"guardContent": {"image": {"format": "png", "source": {"bytes": "AAAA"}}}},
        {"text": "go on"},
    ]});
    let raw = serde_json::to_vec(&message).unwrap();
    let got: Value = serde_json::from_slice(
        &BedrockConverse
            .media_rewritten(&raw, true, "gone")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let mut expected = message.clone();
    expected["content"][0]["toolResult"]["content"][1] = json!({"text": "gone"});
    expected["content"][1] = json!({"text": "gone"});
    assert_eq!(got, expected);
    assert_eq!(
        BedrockConverse.media_rewritten(&raw, false, "gone"),
        Some(None)
    );
}

#[test]
fn a_new_ledger_note_takes_the_place_of_the_earlier_one() {
    let ledger = |t: &str| format!("{}\n- {t}", crate::ledger::MARKER);
    let summary = format!("{} earlier turns", crate::summary::MARKER);
    let system = json!([{"text": "rules"}, {"text": ledger("old")}, {"text": summary},
                        {"text": "Answer in French."}, {"text": ledger("older")}])
    .to_string();
    // The summary goes; the ledger blocks stay for the new note to take the first's place.
    let base = BedrockConverse.without_notes(&system).unwrap();
    let NoteAt::System(out) = BedrockConverse.ledger_note(Some(&base), &ledger("new")) else {
        panic!("placed by the core");
    };
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!([{"text": "rules"}, {"text": ledger("new")}, {"text": "Answer in French."}])
    );
    // A summary note, and a ledger note where there was none, go after the caller's blocks.
    let NoteAt::System(out) = BedrockConverse.ledger_note(Some(&out), &summary) else {
        panic!("placed by the core");
    };
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()[3],
        json!({"text": summary})
    );
    let NoteAt::System(out) = BedrockConverse.ledger_note(Some(r#"[{"text":"a"}]"#), &ledger("n"))
    else {
        panic!("placed by the core");
    };
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!([{"text": "a"}, {"text": ledger("n")}])
    );
}
