use serde_json::{json, Value};

use super::*;
use crate::native::validate_json;
use crate::pairing::IssueKind::{self, *};

fn read(contents: &[Value]) -> Vec<Arc<GeminiContent>> {
    let json = serde_json::to_vec(contents).unwrap();
    Gemini.parse_all(&[&json]).unwrap()
}

fn issues(contents: &[Value]) -> Vec<PairingIssue> {
    Gemini.validate(&read(contents))
}

fn kinds(contents: &[Value]) -> Vec<(IssueKind, usize)> {
    issues(contents)
        .into_iter()
        .map(|i| (i.kind, i.index))
        .collect()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

fn model(text: &str) -> Value {
    json!({"role": "model", "parts": [{"text": text}]})
}

fn call(name: &str) -> Value {
    json!({"functionCall": {"name": name, "args": {"q": name}}})
}

fn signed(name: &str) -> Value {
    json!({"functionCall": {"name": name, "args": {}}, "thoughtSignature": "c2ln"})
}

fn calls(parts: &[Value]) -> Value {
    json!({"role": "model", "parts": parts})
}

fn response(name: &str) -> Value {
    json!({"functionResponse": {"name": name, "response": {"output": "ok"}}})
}

fn responses(names: &[&str]) -> Value {
    let parts: Vec<Value> = names.iter().map(|n| response(n)).collect();
    json!({"role": "user", "parts": parts})
}

#[test]
fn a_paired_conversation_has_no_issue() {
    let contents = [
        user("go"),
        calls(&[call("a"), call("b")]),
        responses(&["b", "a"]),
        model("done"),
    ];
    assert!(issues(&contents).is_empty());
}

#[test]
fn unanswered_calls_quote_gemini() {
    let partly = [
        user("go"),
        calls(&[call("a"), call("b")]),
        responses(&["a"]),
    ];
    assert_eq!(kinds(&partly), [(MissingResult, 1)]);
    assert_eq!(
        issues(&partly)[0].message,
        format!(
            "{COUNT_MISMATCH} ringbound: call `b` (parts[1]) of contents[1] has no function \
             response: the call turn is not answered by the response turn contents[2] (1 of 2 \
             function call parts answered)"
        )
    );
    let at_end = [user("go"), calls(&[call("a")])];
    assert!(issues(&at_end)[0]
        .message
        .ends_with("the call turn is followed by the end of the conversation"));
    let then_model = [user("go"), calls(&[call("a")]), model("hm")];
    assert!(issues(&then_model)[0]
        .message
        .ends_with("the call turn is followed by the model turn contents[2]"));
}

#[test]
fn turn_order_quotes_gemini() {
    let opening = [model("hi"), user("go")];
    assert_eq!(kinds(&opening), [(FirstTurnNotUser, 0)]);
    assert!(issues(&opening)[0].message.starts_with(ALTERNATE));
    let opening_call = [calls(&[call("a")]), responses(&["a"])];
    assert_eq!(kinds(&opening_call), [(CallTurnMisplaced, 0)]);
    let after_model = [
        user("go"),
        model("thinking"),
        calls(&[call("a")]),
        responses(&["a"]),
    ];
    assert_eq!(kinds(&after_model), [(CallTurnMisplaced, 2)]);
    assert!(issues(&after_model)[0]
        .message
        .starts_with(CALL_TURN_POSITION));
}

#[test]
fn extra_responses_in_a_response_turn_are_orphans_or_duplicates() {
    let contents = [user("go"), calls(&[call("a")]), responses(&["a", "a", "z"])];
    assert_eq!(kinds(&contents), [(DuplicateId, 2), (OrphanResult, 2)]);
    let all = issues(&contents);
    assert!(all[0]
        .message
        .contains("is a second response for the call turn contents[1]"));
    assert!(all[1].message.starts_with(COUNT_MISMATCH));
}

#[test]
fn stray_responses_are_classified_once() {
    // A late response answers the call left open; a second late one is a duplicate.
    let late = [
        user("go"),
        calls(&[call("a")]),
        user("wait"),
        responses(&["a"]),
        responses(&["a"]),
    ];
    assert_eq!(
        kinds(&late),
        [(ResultNotAdjacent, 3), (DuplicateId, 4)],
        "the call is not also reported missing"
    );
    assert!(issues(&late)[0].message.starts_with(RESPONSE_TURN_POSITION));
    let early = [
        user("go"),
        responses(&["a"]),
        calls(&[call("a")]),
        responses(&["a"]),
    ];
    assert_eq!(kinds(&early), [(ResultBeforeCall, 1)]);
    assert!(issues(&early)[0]
        .message
        .ends_with("answers a call made only later, by contents[2]"));
    let orphan = [user("go"), responses(&["x"])];
    assert_eq!(kinds(&orphan), [(OrphanResult, 1)]);
    assert!(issues(&orphan)[0]
        .message
        .ends_with("response `x` (parts[0]) answers no call"));
}

#[test]
fn ids_pair_before_names() {
    let contents = [
        user("go"),
        calls(&[
            json!({"functionCall": {"name": "f", "id": "c1"}}),
            json!({"functionCall": {"name": "f", "id": "c2"}}),
        ]),
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "f", "id": "c2", "response": {}}},
            {"functionResponse": {"name": "f", "id": "c9", "response": {}}},
        ]}),
    ];
    let found = issues(&contents);
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].kind, MissingResult);
    assert_eq!(found[0].call_id.as_deref(), Some("c1"));
    assert_eq!(found[1].kind, OrphanResult);
    assert!(found[1]
        .message
        .contains("response `f` (parts[1], id 'c9')"));
}

#[test]
fn parallel_calls_carry_one_signature_on_the_first_part() {
    let contents = [
        user("go"),
        calls(&[signed("a"), call("b"), call("c")]),
        responses(&["a", "b", "c"]),
        calls(&[signed("d")]),
        responses(&["d"]),
    ];
    assert!(issues(&contents).is_empty());
}

#[test]
fn a_step_of_the_current_turn_that_lost_its_signature_is_an_issue() {
    // The part that carried the signature was moved away from the first place.
    let moved = [
        user("go"),
        calls(&[call("b"), signed("a")]),
        responses(&["b", "a"]),
    ];
    assert_eq!(kinds(&moved), [(MissingSignature, 1)]);
    assert_eq!(
        issues(&moved)[0].message,
        "Function call `b` in the `1.` content block is missing a `thought_signature`. \
         ringbound: contents[1] parts[0]: parts[1] carries this step's signature, but with \
         parallel calls only the first functionCall part carries it: the parts were separated \
         or reordered"
    );
    // A later step lost it, in a conversation whose calls are signed.
    let stripped = [
        user("go"),
        calls(&[signed("a")]),
        responses(&["a"]),
        calls(&[call("b")]),
        responses(&["b"]),
    ];
    assert_eq!(kinds(&stripped), [(MissingSignature, 3)]);
    assert!(issues(&stripped)[0]
        .message
        .contains("no part of this call step"));
}

#[test]
fn signatures_are_checked_in_the_current_turn_of_signed_conversations_only() {
    let unsigned = [user("go"), calls(&[call("a")]), responses(&["a"])];
    assert!(
        issues(&unsigned).is_empty(),
        "Gemini 2.x and hand-made calls are unsigned"
    );
    let earlier_turn = [
        user("go"),
        calls(&[call("a")]),
        responses(&["a"]),
        model("done"),
        user("again"),
        calls(&[signed("b")]),
        responses(&["b"]),
    ];
    assert!(
        issues(&earlier_turn).is_empty(),
        "Gemini validates the current turn's signatures only"
    );
    let snake = [
        user("go"),
        json!({"role": "model", "parts": [
            {"function_call": {"name": "a"}, "thought_signature": "c2ln"},
            {"function_call": {"name": "b"}}
        ]}),
        json!({"role": "function", "parts": [
            {"function_response": {"name": "a", "response": {"output": 1}}},
            {"function_response": {"name": "b", "response": {"output": 2}}}
        ]}),
    ];
    assert!(
        issues(&snake).is_empty(),
        "SDK spelling and Vertex's 'function' role"
    );
}

#[test]
fn malformed_contents_name_their_index() {
    let bad = |content: Value| {
        let json = serde_json::to_vec(&[user("go"), content]).unwrap();
        match Gemini.parse_all(&[&json]) {
            Err(CoreError::InvalidMessage { index, reason }) => (index, reason),
            other => panic!("not refused: {other:?}"),
        }
    };
    assert_eq!(
        bad(json!({"role": "system", "parts": [{"text": "x"}]})),
        (
            Some(1),
            "role must be 'system' or 'model', got 'system' (Gemini: Please use a valid role: \
             user, model.)"
                .replace("'system' or", "'user' or")
        )
    );
    assert_eq!(
        bad(json!({"role": "user", "parts": []})).1,
        "parts must be a non-empty list (Gemini: contents.parts must not be empty.)"
    );
    assert_eq!(
        bad(json!({"role": "user", "parts": [{"inlineData": {}, "text": "a"}]})).1,
        "parts[0] holds inlineData and text; a part holds one of them"
    );
    assert_eq!(
        bad(json!({"role": "user", "parts": [call("a")]})).1,
        "parts[0]: a functionCall part belongs in a 'model' content"
    );
    assert_eq!(
        bad(calls(&[response("a")])).1,
        "parts[0]: a functionResponse part belongs in a 'user' content"
    );
    assert_eq!(
        bad(calls(&[json!({"functionCall": {"name": ""}})])).1,
        "parts[0].functionCall.name must be a non-empty string (Name cannot be empty.)"
    );
    assert_eq!(
        bad(calls(&[
            json!({"functionCall": {"name": "f", "args": [1]}})
        ]))
        .1,
        "parts[0].functionCall.args must be an object, got list"
    );
    assert_eq!(
        bad(json!({"role": "user", "parts": [{}]})).1,
        "parts[0] is empty"
    );
    assert_eq!(
        bad(json!({"parts": [{"inlineData": {"data": "AA=="}}]})).1,
        "parts[0].inlineData.mimeType must be a string, got nothing"
    );
}

#[test]
fn canonical_view_prices_media_and_pairs_by_id() {
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let audio = "A".repeat(3000);
    let contents = [
        json!({"role": "user", "parts": [
            {"text": "look"},
            {"inlineData": {"mimeType": "image/png", "data": png}},
            {"inlineData": {"mimeType": "audio/wav", "data": audio}},
        ]}),
        calls(&[signed("a"), call("b")]),
        responses(&["b", "a"]),
    ];
    let view = Gemini.canonical(&read(&contents));
    assert_eq!(view.layout.groups, [0, 1, 2, 2]);
    let first = &view.messages[0];
    assert_eq!(first.images[0].size, Some((1, 1)));
    assert_eq!(first.other_part_tokens, 1000, "3,000 base64 characters");
    let model = &view.messages[1];
    assert_eq!(
        model.tool_calls.len(),
        2,
        "parallel calls are one message, one unit"
    );
    assert_eq!(
        crate::view::strs(&model.texts),
        ["c2ln"],
        "the signature is counted with its step"
    );
    let ids: Vec<_> = view.messages[2..]
        .iter()
        .map(|m| m.tool_call_id.clone().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            model.tool_calls[1].id.to_string(),
            model.tool_calls[0].id.to_string()
        ]
    );
    assert!(crate::pairing::validate(&view.messages).is_empty());
}

#[test]
fn error_responses_read_as_errors() {
    let contents = [
        user("go"),
        calls(&[call("a")]),
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "a", "response": {"error": "disk full"}}}
        ]}),
    ];
    let view = Gemini.canonical(&read(&contents));
    let result = &view.messages[2];
    assert!(result.is_error);
    assert_eq!(crate::view::strs(&result.texts), ["Error: disk full"]);
}

#[test]
fn the_dispatch_reads_gemini() {
    let json = serde_json::to_vec(&[user("go"), calls(&[call("a")])]).unwrap();
    let found = validate_json("gemini", &[&json]).unwrap();
    assert_eq!(found[0].kind, MissingResult);
}

proptest::proptest! {
    /// A reading pairs the contents once for its issues and its view: what it gets is what
    /// `validate` and `canonical` give apart.
    #[test]
    fn one_pairing_reads_what_validate_and_canonical_read(
        picks in proptest::collection::vec(0usize..7, 0..12)
    ) {
        let pieces = [
            user("go"),
            model("thinking"),
            calls(&[call("a")]),
            calls(&[call("a"), call("b"), signed("c")]),
            responses(&["a"]),
            responses(&["b", "a"]),
            responses(&["c"]),
        ];
        let contents: Vec<Value> = picks.iter().map(|&k| pieces[k].clone()).collect();
        let items = read(&contents);
        let (issues, canonical) = Gemini.issues_and_canonical(&items);
        proptest::prop_assert_eq!(issues, Gemini.validate(&items));
        proptest::prop_assert_eq!(canonical, Gemini.canonical(&items));
    }
}

#[test]
fn a_call_without_an_id_is_named_by_its_digest_made_when_read() {
    use sha2::{Digest, Sha256};
    let contents = [
        user("go"),
        calls(&[call("a"), call("a")]),
        responses(&["a", "a"]),
    ];
    let items = read(&contents);
    let digest: String = Sha256::digest(b"a\0{\"q\":\"a\"}")[..5]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(items[1]
        .calls
        .iter()
        .all(|c| c.digest.as_ref() == Some(&digest)));
    let canonical = Gemini.canonical(&items);
    let ids: Vec<&str> = canonical.messages[1]
        .tool_calls
        .iter()
        .map(|c| &*c.id)
        .collect();
    assert_eq!(
        ids,
        [format!("gemini_{digest}_0"), format!("gemini_{digest}_1")]
    );
    let with_id = read(&[json!({"role": "model", "parts": [
        {"functionCall": {"name": "a", "args": {}, "id": "x"}}
    ]})]);
    assert_eq!(with_id[0].calls[0].digest, None);
}

#[test]
fn contents_a_drop_brings_together_merge_into_the_first() {
    let text = |role: &str, t: &str| json!({"role": role, "parts": [{"text": t}]});
    let facts: Vec<ItemFacts> = read(&[
        text("user", "a"),
        text("model", "b"),
        text("user", "c"),
        text("user", "d"),
    ])
    .iter()
    .map(|c| Gemini.facts(c))
    .collect();
    // Neighbours in the history stay; a chain that skips a dropped content merges.
    assert_eq!(Gemini.merges(&facts, &[0, 1, 2, 3]), Some(vec![]));
    assert_eq!(
        Gemini.merges(&facts, &[0, 2, 3]),
        Some(vec![Run {
            range: 0..2,
            merge: true
        }])
    );
    let merged = Gemini
        .merged(
            "user",
            &[
                br#"{"role":"user","parts":[{"text":"a"}],"x":1}"#,
                br#"{"parts":[{"text":"c"},{"text":"d"}],"role":"user"}"#,
            ],
        )
        .unwrap();
    assert_eq!(
        std::str::from_utf8(&merged).unwrap(),
        r#"{"role":"user","parts":[{"text":"a"},{"text":"c"},{"text":"d"}],"x":1}"#
    );
    assert_eq!(Gemini.merged("user", &[br#"{"role":"user"}"#]), None);
}

#[test]
fn a_rewritten_response_holds_the_text_under_its_one_key_else_output() {
    let content = json!({"role": "user", "parts": [
        {"functionResponse": {"name": "a", "response": {"result": {"rows": [1, 2]}}, "id": "1"}},
        {"text": "between"},
        {"function_response": {"name": "b", "response": {"error": "boom"}}},
        {"functionResponse": {"name": "c", "response": {"x": 1, "y": 2}}},
    ]});
    let raw = serde_json::to_vec(&content).unwrap();
    let write = |nth: Option<usize>| -> Option<Option<Value>> {
        let at = ResultAt {
            call_id: "ignored",
            nth,
        };
        Gemini
            .result_rewritten(&raw, at, "cut")
            .map(|o| o.map(|b| serde_json::from_slice(&b).unwrap()))
    };
    let mut expected = content.clone();
    expected["parts"][0]["functionResponse"]["response"] = json!({"result": "cut"});
    assert_eq!(write(Some(0)).unwrap().unwrap(), expected);
    expected = content.clone();
    expected["parts"][2]["function_response"]["response"] = json!({"error": "cut"});
    assert_eq!(write(Some(1)).unwrap().unwrap(), expected);
    expected = content.clone();
    expected["parts"][3]["functionResponse"]["response"] = json!({"output": "cut"});
    assert_eq!(write(Some(2)).unwrap().unwrap(), expected);
    // Another content of the result's span holds none of its parts; past the last one is the
    // adapter's to tell.
    assert_eq!(write(None), Some(None));
    assert_eq!(write(Some(3)), None);
}

#[test]
fn images_made_text_keep_their_signature_and_leave_responses_for_the_end() {
    let blob = json!({"inlineData": {"mimeType": "image/png", "data": "AAAA"}});
    let content = json!({"role": "user", "parts": [
        {"inlineData": {"mimeType": "image/png", "data": "AAAA"}, "thoughtSignature": "sig"},
        {"functionResponse": {"name": "shot", "parts": [blob, {"text": "kept"}], "response": {"ok": true}}},
        {"function_response": {"name": "only", "parts": [blob], "id": "7"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://x"}},
    ]});
    let raw = serde_json::to_vec(&content).unwrap();
    let got: Value =
        serde_json::from_slice(&Gemini.media_rewritten(&raw, true, "gone").unwrap().unwrap())
            .unwrap();
    let expected = json!({"role": "user", "parts": [
        {"text": "gone", "thoughtSignature": "sig"},
        {"functionResponse": {"name": "shot", "response": {"ok": true}, "parts": [{"text": "kept"}]}},
        {"function_response": {"name": "only", "id": "7"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://x"}},
        {"text": "gone"},
        {"text": "gone"},
    ]});
    assert_eq!(got, expected);
    assert_eq!(Gemini.media_rewritten(&raw, false, "gone"), Some(None));
}
