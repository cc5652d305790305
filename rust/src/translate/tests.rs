//! Translation over all 20 ordered pairs: a session with parallel calls, an error result, an
//! image and reasoning, read back by the target's rules (inside `translate`), its texts and
//! results all present, its provider-bound items reported and never sent, and the same
//! translation every time.

use super::*;
use proptest::prelude::*;
use serde_json::json;

pub(crate) const PROVIDERS: [&str; 5] = [
    "openai_chat",
    "openai_responses",
    "anthropic",
    "gemini",
    "bedrock_converse",
];

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn chat_session(n: usize) -> Vec<Value> {
    let mut out = vec![json!({"role": "system", "content": "be brief"})];
    for k in 0..n {
        out.push(json!({"role": "user", "content": [
            {"type": "text", "text": format!("question {k}")},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
        ]}));
        out.push(
            json!({"role": "assistant", "content": format!("looking {k}"), "tool_calls": [
                {"id": format!("call.{k}:a"), "type": "function",
                 "function": {"name": "read", "arguments": format!("{{\"path\": \"f{k}\"}}")}},
                {"id": format!("call.{k}:b"), "type": "function",
                 "function": {"name": "grep", "arguments": "{\"q\": \"x\"}"}},
            ]}),
        );
        out.push(json!({"role": "tool", "tool_call_id": format!("call.{k}:a"), "content": format!("contents {k}")}));
        out.push(json!({"role": "tool", "tool_call_id": format!("call.{k}:b"), "content": format!("Error: no match {k}")}));
        out.push(json!({"role": "assistant", "content": format!("answer {k}")}));
    }
    out
}

fn run(source: &str, target: &str, items: &[Value], options: &Options) -> Translated {
    let raw = serde_json::to_vec(items).unwrap();
    translate(source, target, &raw, None, None, options)
        .unwrap_or_else(|e| panic!("{source} -> {target}: {e}"))
}

/// The texts of a history in any of the five shapes, in order (tool outputs included).
pub(crate) fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                match (k.as_str(), x) {
                    ("text" | "output" | "error" | "refusal", Value::String(s)) => {
                        out.push(s.clone())
                    }
                    ("content", Value::String(s)) => out.push(s.clone()),
                    (
                        "thinking" | "signature" | "data" | "encrypted_content"
                        | "thoughtSignature",
                        _,
                    ) => {}
                    _ => texts(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        _ => {}
    }
}

#[test]
fn every_pair_translates_validly_with_every_text() {
    let options = Options::new();
    let chat = chat_session(3);
    let mut want = Vec::new();
    texts(&Value::Array(chat.clone()), &mut want);
    for source in PROVIDERS {
        let from = if source == "openai_chat" {
            chat.clone()
        } else {
            run("openai_chat", source, &chat, &options).messages
        };
        let from_system = (source != "openai_chat").then_some("be brief");
        for target in PROVIDERS {
            if source == target {
                continue;
            }
            let raw = serde_json::to_vec(&from).unwrap();
            let system = from_system.map(|s| match source {
                "gemini" => json!({"parts": [{"text": s}]}).to_string(),
                "bedrock_converse" => json!([{"text": s}]).to_string(),
                _ => json!(s).to_string(),
            });
            let out = translate(
                source,
                target,
                &raw,
                system.as_deref().map(str::as_bytes),
                None,
                &options,
            )
            .unwrap_or_else(|e| panic!("{source} -> {target}: {e}"));
            let mut got = Vec::new();
            texts(&Value::Array(out.messages.clone()), &mut got);
            if let Some(s) = &out.system {
                texts(&json!({"system": s}), &mut got);
                if let Value::String(s) = s {
                    got.push(s.clone());
                }
            }
            let joined = got.join("\u{1}");
            for t in &want {
                assert!(
                    joined.contains(t.as_str()),
                    "{source} -> {target}: {t:?} missing in {joined:?}"
                );
            }
            let again = translate(
                source,
                target,
                &raw,
                system.as_deref().map(str::as_bytes),
                None,
                &options,
            )
            .unwrap();
            assert_eq!(again, out, "{source} -> {target} is not deterministic");
        }
    }
}

#[test]
fn provider_bound_items_never_cross_and_each_drop_is_reported() {
    let anthropic = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "let me think", "signature": "SIG-secret"},
            {"type": "redacted_thinking", "data": "REDACTED-secret"},
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
    ]);
    let raw = serde_json::to_vec(&anthropic).unwrap();
    for target in PROVIDERS.iter().filter(|t| **t != "anthropic") {
        for reasoning in [Reasoning::Drop, Reasoning::Text] {
            let options = Options {
                reasoning,
                ..Options::new()
            };
            let out = translate("anthropic", target, &raw, None, None, &options).unwrap();
            let text = serde_json::to_string(&out.messages).unwrap();
            assert!(!text.contains("secret"), "{target}: {text}");
            assert_eq!(
                text.contains("let me think"),
                reasoning == Reasoning::Text,
                "{target}"
            );
            let drops: Vec<&str> = out
                .report
                .changes
                .iter()
                .filter(|c| c.is_drop())
                .map(|c| c.what.as_str())
                .collect();
            assert!(
                drops.contains(&"signature") && drops.contains(&"redacted_thinking"),
                "{drops:?}"
            );
        }
    }
}

#[test]
fn an_opaque_compaction_is_refused_unless_summarized() {
    let items = json!([
        {"role": "user", "content": "old"},
        {"type": "compaction", "encrypted_content": "opaque"},
        {"role": "user", "content": "new"},
    ]);
    let raw = serde_json::to_vec(&items).unwrap();
    let err = translate(
        "openai_responses",
        "anthropic",
        &raw,
        None,
        None,
        &Options::new(),
    )
    .unwrap_err();
    assert!(
        matches!(err, CoreError::InvalidMessage { index: Some(1), .. }),
        "{err}"
    );
    let options = Options {
        summaries: vec![(1, "we talked".into())],
        ..Options::new()
    };
    let out = translate("openai_responses", "anthropic", &raw, None, None, &options).unwrap();
    let text = serde_json::to_string(&out.messages).unwrap();
    assert!(
        text.contains("we talked") && text.contains("new") && !text.contains("old"),
        "{text}"
    );
    assert!(out
        .report
        .changes
        .iter()
        .any(|c| c.what == "before_compaction" && c.is_drop()));
}

#[test]
fn a_foreign_id_is_rewritten_the_same_way_every_time() {
    let chat = chat_session(1);
    let a = run("openai_chat", "anthropic", &chat, &Options::new());
    let b = run("openai_chat", "anthropic", &chat, &Options::new());
    assert_eq!(a.report.ids, b.report.ids);
    assert_eq!(a.report.ids.len(), 2);
    assert!(a
        .report
        .ids
        .iter()
        .all(|(from, to)| from.starts_with("call.") && !to.contains('.')));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn round_trips_keep_texts_and_calls(n in 1usize..4, a in 0usize..5, b in 0usize..5) {
        prop_assume!(a != b);
        let (a, b) = (PROVIDERS[a], PROVIDERS[b]);
        let options = Options { gemini_sentinel: false, ..Options::new() };
        let chat = chat_session(n);
        let start = if a == "openai_chat" { chat } else { run("openai_chat", a, &chat, &options).messages };
        let there = run(a, b, &start, &options);
        let back = run(b, a, &there.messages, &options);
        let calls = |items: &[Value]| {
            let text = serde_json::to_string(items).unwrap();
            (text.matches("\"read\"").count(), text.matches("\"grep\"").count())
        };
        prop_assert_eq!(calls(&start), calls(&back.messages));
        let (mut want, mut got) = (Vec::new(), Vec::new());
        texts(&Value::Array(start.clone()), &mut want);
        texts(&Value::Array(back.messages.clone()), &mut got);
        if let Some(s) = &back.system { texts(&json!({"s": s}), &mut got); if let Value::String(s) = s { got.push(s.clone()); } }
        let joined = got.join("\u{1}");
        for t in want.iter().filter(|t| t.as_str() != "be brief") {
            prop_assert!(joined.contains(t.as_str()), "{} -> {} -> {}: {:?}", a, b, a, t);
        }
    }
}

/// A pairing-valid portable conversation: instructions, user turns (some with an image),
/// replies, and rings of parallel calls answered in any order, some failed.
fn conversation() -> impl Strategy<Value = portable::Conversation> {
    use portable::{Part, Source, Speaker, Turn};
    let unit = prop_oneof![
        ("[a-z ]{0,12}", any::<bool>()).prop_map(|(t, image)| {
            let mut parts = vec![Part::Text(t)];
            if image {
                parts.push(Part::Image(Source::Base64 {
                    mime: "image/png".into(),
                    data: PNG.into(),
                }));
            }
            vec![(Speaker::User, parts)]
        }),
        "[a-z ]{1,12}".prop_map(|t| vec![(Speaker::Assistant, vec![Part::Text(t)])]),
        "[a-z]{1,8}".prop_map(|t| vec![(Speaker::Developer, vec![Part::Text(t)])]),
        (
            proptest::collection::vec(("[a-z.:]{1,50}", any::<bool>()), 1..4),
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|(calls, say, seed)| {
                let mut parts: Vec<Part> = Vec::new();
                if say {
                    parts.push(Part::Text("on it".into()));
                }
                let ids: Vec<String> = calls
                    .iter()
                    .enumerate()
                    .map(|(k, (id, _))| format!("{id}{k}"))
                    .collect();
                for id in &ids {
                    parts.push(Part::Call {
                        id: id.clone(),
                        name: "read".into(),
                        arguments: "{\"p\": 1}".into(),
                    });
                }
                let mut unit = vec![(Speaker::Assistant, parts)];
                let mut order: Vec<usize> = (0..ids.len()).collect();
                order.rotate_left((seed as usize) % ids.len());
                for k in order {
                    unit.push((
                        Speaker::Tool,
                        vec![Part::Result {
                            id: ids[k].clone(),
                            content: vec![Part::Text(format!("result {k}"))],
                            is_error: calls[k].1,
                        }],
                    ));
                }
                unit
            }),
    ];
    (
        proptest::collection::vec(unit, 0..8),
        proptest::collection::vec("[a-z]{1,8}", 0..2),
    )
        .prop_map(|(units, system)| portable::Conversation {
            system,
            turns: units
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(item, (speaker, parts))| Turn {
                    speaker,
                    parts,
                    item,
                })
                .collect(),
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn every_writer_keeps_its_targets_rules(c in conversation()) {
        let options = Options::new();
        for target in PROVIDERS {
            let mut report = Report::default();
            let out = write::write(target, &c, &options, &mut report).unwrap();
            let raw = serde_json::to_vec(&out.messages).unwrap();
            let issues = native::validate_json(target, &[&raw]).unwrap();
            prop_assert!(issues.is_empty(), "{target}: {issues:?}\n{}", String::from_utf8_lossy(&raw));
            let again = write::write(target, &c, &options, &mut Report::default()).unwrap();
            prop_assert_eq!(&again.messages, &out.messages);
            let text = String::from_utf8_lossy(&raw);
            let calls = c.turns.iter().flat_map(|t| &t.parts).filter(|p| matches!(p, portable::Part::Call { .. })).count();
            prop_assert_eq!(text.matches("\"read\"").count() >= calls, true);
        }
    }
}

#[test]
fn an_assistant_turn_of_reasoning_alone_leaves_nothing_chat_refuses() {
    let items = json!([
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]},
        {"role": "user", "content": "again"},
    ]);
    let raw = serde_json::to_vec(&items).unwrap();
    let out = translate(
        "anthropic",
        "openai_chat",
        &raw,
        None,
        None,
        &Options::new(),
    )
    .unwrap();
    assert_eq!(
        out.messages,
        [
            json!({"role": "user", "content": "go"}),
            json!({"role": "user", "content": "again"})
        ]
    );
}

/// `source`'s native form of `chat_session(n)`, with its top-level system.
fn native_session(source: &str, n: usize) -> (Vec<Value>, Option<Value>) {
    let chat = chat_session(n);
    if source == "openai_chat" {
        return (chat, None);
    }
    let t = run("openai_chat", source, &chat, &Options::new());
    (t.messages, t.system)
}

/// A request body of `source` holding `items` and `system`.
fn body_of(source: &str, items: &[Value], system: Option<&Value>) -> Vec<u8> {
    let mut b = json!({"model": "m", "temperature": 0.2, "stop": ["END"]});
    b[body::history_field(source)] = Value::Array(items.to_vec());
    if let Some(system) = system {
        let key = match source {
            "openai_responses" => "instructions",
            "gemini" => "systemInstruction",
            _ => "system",
        };
        b[key] = system.clone();
    }
    serde_json::to_vec(&b).unwrap()
}

/// Translates each of `bodies` in turn (a session growing) from scratch and resumed from
/// `checkpoints`, and asserts the two give the same bytes and report, or the same error.
fn same_resumed(
    source: &str,
    target: &str,
    bodies: &[Vec<u8>],
    options: &Options,
    checkpoints: &resume::Checkpoints,
) -> Result<(), TestCaseError> {
    for (k, b) in bodies.iter().enumerate() {
        let cold = body::translate_body_with(source, target, b, options, None);
        let warm = body::translate_body_with(source, target, b, options, Some(checkpoints));
        match (cold, warm) {
            (Ok(cold), Ok(warm)) => {
                prop_assert!(
                    cold.0 == warm.0,
                    "{source} -> {target}, body {k}:\n{}\n{}",
                    String::from_utf8_lossy(&cold.0),
                    String::from_utf8_lossy(&warm.0)
                );
                prop_assert_eq!(cold.1, warm.1, "{} -> {}, body {}", source, target, k);
            }
            (Err(cold), Err(warm)) => prop_assert_eq!(cold.to_string(), warm.to_string()),
            (cold, warm) => prop_assert!(
                false,
                "{source} -> {target}, body {k}: {:?} vs {:?}",
                cold.err(),
                warm.err()
            ),
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    /// A session translated turn after turn, resumed from where the last turn left off, is
    /// the translation from scratch byte for byte, report included, over all 20 pairs; prefix
    /// lengths that break pairing fail the same way. (That it resumes at all is
    /// `every_turn_of_a_session_resumes_to_the_same_bytes`'s to show.)
    #[test]
    fn resumed_is_byte_identical(
        n in 1usize..4,
        steps in proptest::collection::vec(1usize..5, 1..5),
        as_text in any::<bool>(),
    ) {
        let options = Options {
            reasoning: if as_text { Reasoning::Text } else { Reasoning::Drop },
            ..Options::new()
        };
        for source in PROVIDERS {
            let (items, system) = native_session(source, n);
            let mut bodies = Vec::new();
            let mut k = 0;
            for step in steps.iter().cycle() {
                k = (k + step).min(items.len());
                bodies.push(body_of(source, &items[..k], system.as_ref()));
                if k == items.len() {
                    break;
                }
            }
            for target in PROVIDERS {
                let checkpoints = resume::Checkpoints::new(64, 64 << 20);
                same_resumed(source, target, &bodies, &options, &checkpoints)?;
            }
        }
    }
}

#[test]
fn every_turn_of_a_session_resumes_to_the_same_bytes() {
    // Each item added in turn: every cut each source's reader allows is met.
    for source in PROVIDERS {
        let (items, system) = native_session(source, 3);
        let bodies: Vec<Vec<u8>> = (1..=items.len())
            .map(|k| body_of(source, &items[..k], system.as_ref()))
            .collect();
        for target in PROVIDERS {
            let checkpoints = resume::Checkpoints::new(64, 64 << 20);
            same_resumed(source, target, &bodies, &Options::new(), &checkpoints).unwrap();
            if source != target {
                assert!(checkpoints.hits() > 2, "{source} -> {target}");
            }
        }
    }
}

#[test]
fn a_compaction_in_the_new_items_translates_from_scratch_to_the_same_bytes() {
    let (mut items, system) = native_session("openai_responses", 3);
    // Before the last user message, with a ring after it.
    let at = items.iter().rposition(|i| i["role"] == "user").unwrap();
    items.insert(
        at,
        json!({"type": "compaction", "encrypted_content": "opaque",
               "summary": [{"type": "summary_text", "text": "so far"}]}),
    );
    let bodies: Vec<Vec<u8>> = (1..=items.len())
        .map(|k| body_of("openai_responses", &items[..k], system.as_ref()))
        .collect();
    for target in PROVIDERS {
        let checkpoints = resume::Checkpoints::new(64, 64 << 20);
        same_resumed(
            "openai_responses",
            target,
            &bodies,
            &Options::new(),
            &checkpoints,
        )
        .unwrap();
        if target == "openai_responses" {
            continue; // the history as given: nothing is translated
        }
        let (out, report) = body::translate_body_with(
            "openai_responses",
            target,
            bodies.last().unwrap(),
            &Options::new(),
            Some(&checkpoints),
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("so far") && !text.contains("question 0"),
            "{text}"
        );
        assert!(report.changes.iter().any(|c| c.what == "before_compaction"));
    }
}

#[test]
fn checkpoints_stay_bounded_over_many_sessions() {
    let checkpoints = resume::Checkpoints::new(8, 256 << 10);
    for s in 0..40 {
        let items: Vec<Value> = chat_session(2)
            .into_iter()
            .map(|mut m| {
                if let Some(Value::String(c)) = m.get_mut("content") {
                    c.push_str(&format!(" session {s}"));
                }
                m
            })
            .collect();
        for k in [items.len() - 1, items.len()] {
            let b = body_of("openai_chat", &items[..k], None);
            body::translate_body_with(
                "openai_chat",
                "anthropic",
                &b,
                &Options::new(),
                Some(&checkpoints),
            )
            .unwrap();
            assert!(checkpoints.len() <= 8 && checkpoints.bytes() <= 256 << 10);
        }
    }
    assert!(
        checkpoints.hits() >= 39,
        "each session's second turn resumed"
    );
}

#[test]
fn a_body_read_by_the_scan_fails_as_serde_would_have_failed_it() {
    let deep = format!(
        r#"{{"messages":[{{"role":"user","content":"hi"}},{{"role":"user","content":[{}{}]}}]}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let bad_escape = r#"{"messages":[{"role":"user","content":"x\q"}]}"#;
    let trailing = r#"{"messages":[{"role":"user","content":"hi"}]} x"#;
    for body in [deep.as_str(), bad_escape, trailing] {
        let checkpoints = resume::Checkpoints::new(8, 1 << 20);
        let err = body::translate_body_with(
            "openai_chat",
            "anthropic",
            body.as_bytes(),
            &Options::new(),
            Some(&checkpoints),
        )
        .unwrap_err();
        assert!(
            matches!(err, CoreError::InvalidBody { .. }),
            "{body:.40}: {err}"
        );
    }
}
