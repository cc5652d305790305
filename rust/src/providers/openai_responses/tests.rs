use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::native::validate_json;
use crate::pairing::IssueKind::{self, *};

fn read(items: &[Value]) -> Vec<Arc<Item>> {
    let json = serde_json::to_vec(items).unwrap();
    OpenAIResponses.parse_all(&[&json]).unwrap()
}

fn refusal(items: &[Value]) -> (Option<usize>, String) {
    let json = serde_json::to_vec(items).unwrap();
    match OpenAIResponses.parse_all(&[&json]) {
        Err(CoreError::InvalidMessage { index, reason }) => (index, reason),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn issues(items: &[Value]) -> Vec<PairingIssue> {
    OpenAIResponses.validate(&read(items))
}

fn kinds(items: &[Value]) -> Vec<(IssueKind, usize, String)> {
    issues(items)
        .into_iter()
        .map(|i| (i.kind, i.index, i.call_id.unwrap_or_default()))
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn call(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"})
}

fn output(id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": "ok"})
}

/// A call of each built-in family and its output, keyed `id`.
fn pair(family: Family, id: &str) -> (Value, Value) {
    let call = match family {
        Family::Computer => json!({"type": "computer_call", "id": format!("cu_{id}"),
            "call_id": id, "action": {"type": "screenshot"}, "pending_safety_checks": [],
            "status": "completed"}),
        Family::Shell => json!({"type": "shell_call", "call_id": id,
            "action": {"commands": ["ls -la"], "timeout_ms": 1000}}),
        Family::LocalShell => json!({"type": "local_shell_call", "id": format!("ls_{id}"),
            "call_id": id, "action": {"type": "exec", "command": ["ls"], "env": {}},
            "status": "completed"}),
        Family::ApplyPatch => json!({"type": "apply_patch_call", "call_id": id,
            "operation": {"type": "update_file", "path": "a.py", "diff": "@@ -1 +1 @@"},
            "status": "completed"}),
        Family::Custom => json!({"type": "custom_tool_call", "call_id": id, "name": "g",
            "input": "x"}),
        Family::McpApproval => json!({"type": "mcp_approval_request", "id": id, "name": "g",
            "arguments": "{}", "server_label": "srv"}),
        Family::Function => call(id),
    };
    let out = match family {
        Family::Computer => json!({"type": "computer_call_output", "call_id": id,
            "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"}}),
        Family::Shell => json!({"type": "shell_call_output", "call_id": id,
            "output": [{"stdout": "a.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]}),
        Family::LocalShell => json!({"type": "local_shell_call_output", "call_id": id,
            "output": "{\"stdout\": \"a.txt\"}"}),
        Family::ApplyPatch => json!({"type": "apply_patch_call_output", "call_id": id,
            "status": "completed"}),
        Family::Custom => json!({"type": "custom_tool_call_output", "call_id": id, "output": "y"}),
        Family::McpApproval => json!({"type": "mcp_approval_response",
            "approval_request_id": id, "approve": true}),
        Family::Function => output(id),
    };
    (call, out)
}

#[test]
fn a_paired_session_has_no_issue() {
    let items = [
        user("go"),
        json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}),
        call("call_a"),
        output("call_a"),
        json!({"type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "done"}]}),
    ];
    assert_eq!(issues(&items), []);
}

#[test]
fn a_missing_output_quotes_openai() {
    let items = [user("go"), call("call_a"), user("and?")];
    assert_eq!(kinds(&items), [(MissingResult, 1, "call_a".into())]);
    assert!(issues(&items)[0]
        .message
        .starts_with("No tool output found for function call call_a."));
}

#[test]
fn each_stray_output_is_classified() {
    // Orphan, before its call, separated by a user message, answered twice.
    let items = [
        output("call_x"),
        output("call_b"),
        call("call_b"),
        output("call_b"),
        call("call_c"),
        user("wait"),
        output("call_c"),
        output("call_b"),
    ];
    assert_eq!(
        kinds(&items),
        [
            (OrphanResult, 0, "call_x".into()),
            (ResultBeforeCall, 1, "call_b".into()),
            (ResultNotAdjacent, 6, "call_c".into()),
            (DuplicateId, 7, "call_b".into()),
        ]
    );
    let said = issues(&items);
    assert!(said[0]
        .message
        .starts_with("No tool call found for function call output with call_id call_x."));
    assert!(said[1]
        .message
        .ends_with("the function_call comes later, at input[2]."));
    assert!(said[3]
        .message
        .starts_with("Duplicate function_call_output for call_id 'call_b'."));
}

#[test]
fn ids_are_unique_and_reasoning_precedes_its_item() {
    let items = [
        user("go"),
        call("call_a"),
        output("call_a"),
        call("call_a"),
        json!({"type": "reasoning", "id": "rs_1", "summary": []}),
        json!({"role": "user", "content": "x", "id": "msg_1"}),
        json!({"role": "user", "content": "y", "id": "msg_1"}),
    ];
    assert_eq!(
        kinds(&items),
        [
            (DuplicateId, 3, "call_a".into()),
            (ReasoningWithoutCall, 4, "rs_1".into()),
            (DuplicateId, 6, "msg_1".into()),
        ]
    );
    assert!(issues(&items)[2].message.starts_with(
        "Duplicate item found with id msg_1. Remove duplicate items from your input and try again."
    ));
}

#[test]
fn every_builtin_family_pairs_by_call_id() {
    for family in Family::ALL {
        let (c, o) = pair(family, "call_1");
        assert_eq!(
            issues(&[user("go"), c.clone(), o.clone()]),
            [],
            "{family:?}"
        );
        let missing = issues(&[user("go"), c.clone(), user("next")]);
        assert_eq!(missing.len(), 1, "{family:?}");
        assert_eq!(missing[0].kind, MissingResult);
        assert!(
            missing[0].message.contains(family.call()),
            "{}",
            missing[0].message
        );
        let orphan = issues(&[user("go"), o]);
        assert_eq!(orphan[0].kind, OrphanResult, "{family:?}");
        let canonical =
            OpenAIResponses.canonical(&read(&[user("go"), c.clone(), pair(family, "call_1").1]));
        assert_eq!(canonical.messages[1].tool_calls.len(), 1, "{family:?}");
        assert_eq!(
            canonical.messages[2].tool_call_id.as_deref(),
            Some("call_1"),
            "{family:?}"
        );
    }
    assert!(
        issues(&[user("go"), pair(Family::LocalShell, "call_9").0])[0]
            .message
            .starts_with("No tool output found for local shell call call_9.")
    );
}

#[test]
fn outputs_of_another_family_do_not_answer() {
    let (shell, _) = pair(Family::Shell, "call_1");
    let items = [user("go"), shell, output("call_1")];
    assert_eq!(
        kinds(&items),
        [
            (MissingResult, 1, "call_1".into()),
            (OrphanResult, 2, "call_1".into())
        ]
    );
}

#[test]
fn a_local_shell_output_may_name_its_call_by_id() {
    let (c, _) = pair(Family::LocalShell, "call_1");
    let out = json!({"type": "local_shell_call_output", "id": "call_1", "output": "{}"});
    assert_eq!(issues(&[user("go"), c, out]), []);
}

#[test]
fn outcomes_mark_failures() {
    let shell = json!({"type": "shell_call_output", "call_id": "c", "output": [
        {"stdout": "", "stderr": "boom", "outcome": {"type": "exit", "exit_code": 2}}]});
    let patch = json!({"type": "apply_patch_call_output", "call_id": "d", "status": "failed",
        "output": "no such file"});
    let timeout = json!({"type": "shell_call_output", "call_id": "e", "output": [
        {"stdout": "", "stderr": "", "outcome": {"type": "timeout"}}]});
    let items = read(&[shell, patch, timeout]);
    assert!(items.iter().all(|it| it.is_error));
    assert_eq!(crate::view::strs(&items[0].texts), ["boom"]);
    assert_eq!(crate::view::strs(&items[1].texts), ["no such file"]);
}

#[test]
fn sealed_content_is_counted_as_the_text_it_is_sent_as() {
    let sealed = "g".repeat(3000);
    let items = read(&[
        json!({"type": "compaction", "id": "cmp_1", "encrypted_content": sealed}),
        json!({"type": "reasoning", "summary": [], "encrypted_content": "x".repeat(301)}),
        json!({"role": "assistant", "content": "ok"}),
    ]);
    assert_eq!(items[0].kind, Kind::Compaction);
    assert_eq!(crate::view::strs(&items[0].texts), [sealed.as_str()]);
    assert_eq!(crate::view::strs(&items[1].texts), ["x".repeat(301)]);
    assert_eq!(
        items[0].cost.opaque_tokens, 0,
        "nothing is priced by size beside it"
    );
    let canonical = OpenAIResponses.canonical(&items);
    assert_eq!(
        canonical.messages.len(),
        2,
        "the compaction item is a unit of its own"
    );
    assert_eq!(crate::view::strs(&canonical.messages[0].texts), [sealed]);
    // The reasoning item and the message of its turn: one item's framing beside their texts.
    assert_eq!(
        canonical.messages[1].other_part_tokens,
        canonical::ITEM_FRAMING
    );
    assert_eq!(canonical.layout.groups, [0, 1]);
    assert_eq!(latest_compaction(&items), Some(0));
}

#[test]
fn images_are_priced_as_images() {
    let (c, o) = pair(Family::Computer, "call_1");
    let canonical = OpenAIResponses.canonical(&read(&[user("go"), c, o]));
    assert_eq!(canonical.messages[2].images.len(), 1);
    assert!(canonical.messages[2].texts.is_empty());
}

#[test]
fn a_compaction_trigger_is_final_and_goes_with_the_item_before() {
    let items = read(&[user("go"), json!({"type": "compaction_trigger"})]);
    let canonical = OpenAIResponses.canonical(&items);
    assert_eq!(canonical.messages.len(), 1);
    assert_eq!(
        canonical.messages[0].other_part_tokens,
        canonical::ITEM_FRAMING
    );
    let (index, reason) = refusal(&[json!({"type": "compaction_trigger"}), user("go")]);
    assert_eq!(index, Some(0));
    assert_eq!(
        reason,
        "The 'compaction_trigger' item must be the final input item."
    );
    let (index, reason) = refusal(&[
        user("go"),
        json!({"type": "compaction_trigger", "id": "ct_1"}),
    ]);
    assert_eq!(index, Some(1));
    assert!(reason.contains("may not carry an 'id'"), "{reason}");
}

#[test]
fn consecutive_compaction_items_are_pinned_as_one_group() {
    let sealed = |s: &str| json!({"type": "compaction", "encrypted_content": s});
    let items = read(&[
        user("go"),
        sealed("old"),
        user("more"),
        sealed("a"),
        sealed("b"),
        json!({"role": "assistant", "content": "ok"}),
    ]);
    assert_eq!(latest_compaction_group(&items), 3..5);
    assert_eq!(OpenAIResponses.pinned(&items), [3, 4]);
    assert_eq!(
        OpenAIResponses.pinned(&read(&[user("go")])),
        [] as [usize; 0]
    );
    assert_eq!(latest_compaction_group(&read(&[sealed("a")])), 0..1);
}

#[test]
fn unreadable_items_are_refused_by_type() {
    let (index, reason) = refusal(&[user("go"), json!({"type": "item_reference", "id": "msg_1"})]);
    assert_eq!(index, Some(1));
    assert!(reason.starts_with("item type 'item_reference' is not supported"));
    let (_, reason) = refusal(&[json!({"type": "tool_search_call", "arguments": {}})]);
    assert!(reason.starts_with("item type 'tool_search_call' is not supported (supported: "));
    assert!(reason.contains("compaction, compaction_trigger"));
    let (_, reason) = refusal(&[json!({"type": "compaction"})]);
    assert_eq!(reason, "missing `encrypted_content`");
    let (_, reason) =
        refusal(&[json!({"role": "assistant", "content": [{"type": "input_text", "text": "x"}]})]);
    assert_eq!(
        reason,
        "content[0] has type 'input_text', which role 'assistant' cannot carry"
    );
}

#[test]
fn the_dispatch_reads_responses() {
    let json = serde_json::to_vec(&[user("go"), call("call_a")]).unwrap();
    let found = validate_json("openai_responses", &[&json]).unwrap();
    assert_eq!(found[0].kind, MissingResult);
}

/// Sessions of calls, outputs, messages and reasoning, with their pairing shuffled around.
fn session() -> impl Strategy<Value = Vec<Value>> {
    let piece = prop_oneof![
        (0usize..4).prop_map(|k| call(&format!("c{k}"))),
        (0usize..4).prop_map(|k| output(&format!("c{k}"))),
        (0usize..4).prop_map(|k| pair(Family::Shell, &format!("c{k}")).0),
        (0usize..4).prop_map(|k| pair(Family::Shell, &format!("c{k}")).1),
        Just(user("u")),
        Just(json!({"role": "assistant", "content": "a"})),
        Just(json!({"type": "reasoning", "summary": []})),
        Just(json!({"type": "compaction", "encrypted_content": "opaque"})),
    ];
    prop::collection::vec(piece, 0..14)
}

proptest! {
    /// What the Responses rules accept, the canonical view pairs by Chat's adjacency rules:
    /// the core plans rings it can keep or drop whole.
    #[test]
    fn accepted_sessions_pair_in_the_canonical_view(items in session()) {
        let read = read(&items);
        let canonical = OpenAIResponses.canonical(&read);
        prop_assert!(canonical.layout.groups.windows(2).all(|w| w[0] <= w[1]));
        prop_assert_eq!(canonical.layout.groups.len(), canonical.messages.len());
        if OpenAIResponses.validate(&read).is_empty() {
            prop_assert_eq!(crate::pairing::validate(&canonical.messages), vec![]);
        }
    }

    /// A reading walks the items once for its issues and its view: what it gets is what
    /// `validate` and `canonical` give apart.
    #[test]
    fn one_walk_reads_what_validate_and_canonical_read(items in session()) {
        let read = read(&items);
        let (issues, canonical) = OpenAIResponses.issues_and_canonical(&read);
        prop_assert_eq!(issues, OpenAIResponses.validate(&read));
        prop_assert_eq!(canonical, OpenAIResponses.canonical(&read));
    }

    /// Every issue names an item of the request, in item order.
    #[test]
    fn issues_come_in_item_order(items in session()) {
        let found = issues(&items);
        prop_assert!(found.windows(2).all(|w| w[0].index <= w[1].index));
        prop_assert!(found.iter().all(|i| i.index < items.len()));
    }
}

/// A field that is usually well formed, sometimes absent, null or of another type.
fn field(usual: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    let odd = vec![
        Value::Null,
        json!(7),
        json!(["x"]),
        json!({"a": 1}),
        json!(""),
    ];
    prop_oneof![
        6 => prop::sample::select(usual).prop_map(Some),
        1 => prop::sample::select(odd).prop_map(Some),
        1 => Just(None),
    ]
}

/// Items of the shapes the direct reading takes, and near misses of them.
fn near_items() -> impl Strategy<Value = Value> {
    let kinds = vec![
        json!("message"),
        json!("function_call"),
        json!("function_call_output"),
        json!("reasoning"),
        json!("compaction"),
    ];
    let texts = vec![json!("hi"), json!("a \"quoted\" \\ line\n"), json!("")];
    let parts = vec![
        json!([{"type": "input_text", "text": "x"}]),
        json!([{"type": "output_text", "text": "y", "annotations": []}]),
        json!([{"type": "refusal", "refusal": "no"}]),
        json!([{"type": "input_image", "image_url": "u"}]),
        json!([{"type": "input_text"}]),
        json!([{"text": "x"}]),
        json!("plain"),
    ];
    let summaries = vec![
        json!([{"type": "summary_text", "text": "s"}]),
        json!([]),
        json!([{"type": "reasoning_text", "text": "s"}]),
    ];
    (
        field(kinds),
        field(vec![
            json!("user"),
            json!("assistant"),
            json!("system"),
            json!("developer"),
            json!("tool"),
        ]),
        field(parts),
        field(vec![json!("id_1"), json!("id_2")]),
        field(vec![json!("call_1"), json!("c\u{e9}")]),
        (
            field(texts.clone()),
            field(texts.clone()),
            field(texts),
            field(summaries),
        ),
        field(vec![json!("gAAAA"), json!("")]),
    )
        .prop_map(
            |(kind, role, content, id, call_id, (name, arguments, output, summary), sealed)| {
                let mut obj = serde_json::Map::new();
                for (key, value) in [
                    ("type", kind),
                    ("role", role),
                    ("content", content),
                    ("id", id),
                    ("call_id", call_id),
                    ("name", name),
                    ("arguments", arguments),
                    ("output", output),
                    ("summary", summary),
                    ("encrypted_content", sealed),
                ] {
                    if let Some(v) = value {
                        obj.insert(key.to_owned(), v);
                    }
                }
                Value::Object(obj)
            },
        )
}

proptest! {
    /// The direct reading takes an item only when it reads it exactly as the general one.
    #[test]
    fn the_direct_reading_agrees_with_the_general_one(value in near_items()) {
        let raw = serde_json::to_vec(&value).unwrap();
        if let Some(direct) = parse::fast::item(&raw) {
            prop_assert_eq!(Ok(direct), parse::general(0, &raw));
        }
    }
}

#[test]
fn common_items_take_the_direct_reading() {
    for value in [
        user("go"),
        json!({"type": "message", "role": "assistant", "id": "msg_1",
               "content": [{"type": "output_text", "text": "x", "annotations": []}]}),
        call("call_a"),
        output("call_a"),
        json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA",
               "summary": [{"type": "summary_text", "text": "s"}]}),
    ] {
        let raw = serde_json::to_vec(&value).unwrap();
        assert!(parse::fast::item(&raw).is_some(), "{value}");
    }
}

#[test]
fn a_rewritten_output_holds_the_text_and_what_only_the_adapter_writes_is_left_to_it() {
    let write = |item: Value, call: &str| -> Option<Option<Value>> {
        let raw = serde_json::to_vec(&item).unwrap();
        let at = ResultAt {
            call_id: call,
            nth: Some(0),
        };
        OpenAIResponses
            .result_rewritten(&raw, at, "cut")
            .map(|o| o.map(|b| serde_json::from_slice(&b).unwrap()))
    };
    let output =
        json!({"type": "function_call_output", "call_id": "c", "output": "long", "id": "fco_1"});
    let mut expected = output.clone();
    expected["output"] = json!("cut");
    assert_eq!(write(output.clone(), "c").unwrap().unwrap(), expected);
    assert_eq!(write(output, "other"), Some(None));
    let local = json!({"type": "local_shell_call_output", "id": "c", "output": "long"});
    assert_eq!(write(local, "c").unwrap().unwrap()["output"], json!("cut"));
    let approval =
        json!({"type": "mcp_approval_response", "approval_request_id": "c", "approve": false});
    assert_eq!(
        write(approval, "c").unwrap().unwrap()["reason"],
        json!("cut")
    );
    let screenshot = json!({"type": "computer_call_output", "call_id": "c", "output": {"type": "computer_screenshot"}});
    assert_eq!(write(screenshot, "c"), Some(None));
    let shell = json!({"type": "shell_call_output", "call_id": "c", "output": []});
    assert_eq!(write(shell, "c"), None);
}

#[test]
fn input_images_made_text_in_the_first_item_only() {
    let message = json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"},
    ]});
    let raw = serde_json::to_vec(&message).unwrap();
    let got: Value = serde_json::from_slice(
        &OpenAIResponses
            .media_rewritten(&raw, true, "gone")
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let mut expected = message.clone();
    expected["content"][1] = json!({"type": "input_text", "text": "gone"});
    assert_eq!(got, expected);
    assert_eq!(
        OpenAIResponses.media_rewritten(&raw, false, "gone"),
        Some(None)
    );
}
