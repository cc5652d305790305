use super::*;
use crate::count::{Encoding, DEFAULT_BACKEND};
use crate::request::Scheme;
use crate::rewrite;
use crate::summary;
use crate::view::ToolCall;
use proptest::prelude::*;

pub(super) fn request(messages: Vec<Message>) -> Request<'static> {
    Request::from_messages(
        messages,
        Scheme::openai(Encoding::O200kBase, DEFAULT_BACKEND),
    )
}

pub(crate) fn cfg(budget: u64) -> PlanConfig {
    PlanConfig {
        budget,
        recent_tool_rings: 1,
        recent_user_turns: 1,
        pin_first_user_message: true,
        pin_side_effect_ledger: true,
        pin_security_system_prompt: true,
        short_error_result_tokens: 50,
        max_held_error_rings: 2,
        side_effect_tools: ["send".to_owned()].into_iter().collect(),
        ledger_fields: std::collections::HashMap::new(),
        stages: Stage::DEFAULT_ORDER.to_vec(),
        drop_tools_schema: false,
        synthesize_missing_results: false,
        max_tool_result_tokens: 4000,
        min_result_tokens: 500,
        min_recent_tool_rings: 1,
        min_recent_user_turns: 1,
        summary_reserve: None,
        recorded_ledger: Vec::new(),
        replay: None,
    }
}

pub(super) fn ring(id: &str, tool: &str, result: &str, error: bool) -> Vec<Message> {
    vec![
        Message::assistant_calls(vec![ToolCall {
            id: id.into(),
            name: tool.into(),
            arguments: format!(r#"{{"x":"{id}"}}"#).into(),
        }]),
        Message::tool_result(id, result, error),
    ]
}

/// system, goal, then rings r0..r{n-1} with long results, a plain reply, a user turn.
fn session(n: usize) -> Vec<Message> {
    let mut msgs = vec![
        Message::text(Role::System, "rules"),
        Message::text(Role::User, "goal"),
    ];
    for k in 0..n {
        let tool = if k == 0 { "send" } else { "read" };
        msgs.extend(ring(&format!("c{k}"), tool, &"data ".repeat(50), false));
    }
    msgs.push(Message::text(Role::Assistant, "done"));
    msgs.push(Message::text(Role::User, "thanks"));
    msgs
}

pub(super) fn kept(plan: &Plan) -> Vec<usize> {
    plan.items
        .iter()
        .filter_map(|i| match i {
            Item::Keep(k) => Some(*k),
            _ => None,
        })
        .collect()
}

#[test]
fn fits_untouched() {
    let req = request(session(3));
    let p = plan(&req, &cfg(100_000), &[], None).unwrap();
    assert_eq!(kept(&p), (0..req.len()).collect::<Vec<_>>());
    assert_eq!(p.tokens_before, p.tokens_after);
    assert!(p.stages.is_empty());
}

#[test]
fn drops_oldest_rings_first_and_records_side_effects() {
    let req = request(session(4));
    let full = plan(&req, &cfg(100_000), &[], None).unwrap().tokens_after;
    let p = plan(&req, &cfg(full - 100), &[], None).unwrap();
    // Ring c0 (the side-effecting send) goes first and lands in the ledger note, placed
    // right after the pinned goal.
    assert_eq!(p.dropped_rings[0], Span { start: 2, end: 4 });
    assert_eq!(p.ledger_added.len(), 1);
    assert!(matches!(&p.items[2], Item::LedgerNote { text, .. } if text.contains("send")));
    assert!(p.tokens_after <= full - 100);
}

#[test]
fn protected_part_that_does_not_fit_fails_closed() {
    let req = request(session(4));
    match plan(&req, &cfg(20), &[], None) {
        Err(CoreError::BudgetExceeded {
            tokens,
            budget,
            buckets,
        }) => {
            assert_eq!(budget, 20);
            assert!(tokens > 20);
            assert_eq!(buckets.total(), tokens);
            assert_eq!(buckets.middle, 0);
        }
        other => panic!("expected BudgetExceeded, got {other:?}"),
    }
}

#[test]
fn the_latest_ring_is_protected_where_it_stands_not_the_chat_after_it() {
    // system, goal, one early ring, then a long plain chat: the chat is the middle.
    let mut msgs = session(1);
    msgs.truncate(4);
    for k in 0..20 {
        msgs.push(Message::text(Role::User, &format!("question {k}")));
        msgs.push(Message::text(Role::Assistant, &"a long answer ".repeat(30)));
    }
    let req = request(msgs);
    let full = plan(&req, &cfg(100_000), &[], None).unwrap().tokens_after;
    let p = plan(&req, &cfg(full / 3), &[], None).unwrap();
    let kept = kept(&p);
    let last = req.len() - 1;
    assert!([0, 1, 2, 3, last - 1, last]
        .iter()
        .all(|w| kept.contains(w)));
    assert!(!p.dropped_turns.is_empty());
    assert!(p.dropped_rings.is_empty());
}

#[test]
fn a_recent_count_far_above_the_session_degrades_in_one_step() {
    let req = request(session(3));
    let mut c = cfg(60);
    c.recent_tool_rings = 1 << 40;
    c.recent_user_turns = 1 << 40;
    c.min_recent_tool_rings = 0;
    c.min_recent_user_turns = 0;
    let started = std::time::Instant::now();
    let _ = plan(&req, &c, &[], None);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn short_error_rings_are_dropped_last() {
    let mut msgs = vec![
        Message::text(Role::System, "rules"),
        Message::text(Role::User, "goal"),
    ];
    msgs.extend(ring("e0", "read", "Error: no such file", true));
    msgs.extend(ring("c1", "read", &"data ".repeat(50), false));
    msgs.push(Message::text(Role::Assistant, "plain reply"));
    msgs.extend(ring("c2", "read", &"data ".repeat(50), false));
    msgs.push(Message::text(Role::User, "next"));
    let req = request(msgs);
    let full = plan(&req, &cfg(100_000), &[], None).unwrap().tokens_after;
    let c1 = u64::from(req.tokens(4) + req.tokens(5));
    let p = plan(&req, &cfg(full - c1), &[], None).unwrap();
    assert_eq!(p.dropped_rings, vec![Span { start: 4, end: 6 }]);
    let p = plan(&req, &cfg(full - c1 - 1), &[], None).unwrap();
    let stages: Vec<_> = p.stages.iter().map(|s| s.stage).collect();
    assert_eq!(stages, vec!["drop_rings", "drop_plain_turns"]);
    assert!(
        kept(&p).contains(&2),
        "the error ring outlives the plain turn"
    );
}

#[test]
fn caller_pins_keep_the_whole_ring() {
    let req = request(session(4));
    let full = plan(&req, &cfg(100_000), &[], None).unwrap().tokens_after;
    // Pinning the first ring's result keeps its call too, and the next ring goes instead.
    let p = plan(&req, &cfg(full - 10), &[3], None).unwrap();
    let k = kept(&p);
    assert!(k.contains(&2) && k.contains(&3));
    assert_eq!(p.dropped_rings, vec![Span { start: 4, end: 6 }]);
}

#[test]
fn missing_result_fails_closed_or_is_synthesized() {
    let mut msgs = session(2);
    msgs.push(Message::assistant_calls(vec![ToolCall {
        id: "late".into(),
        name: "send".into(),
        arguments: "{}".into(),
    }]));
    let req = request(msgs);
    assert!(matches!(
        plan(&req, &cfg(100_000), &[], None),
        Err(CoreError::Pairing(_))
    ));
    let mut repair = cfg(100_000);
    repair.synthesize_missing_results = true;
    let p = plan(&req, &repair, &[], None).unwrap();
    assert_eq!(p.repairs, vec!["late".to_owned()]);
    assert_eq!(
        p.items.last(),
        Some(&Item::SynthesizedResult {
            call_id: "late".into()
        })
    );
}

fn read(id: &str, args: &str, result: &str) -> Vec<Message> {
    vec![
        Message::assistant_calls(vec![ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: args.into(),
        }]),
        Message::tool_result(id, result, false),
    ]
}

fn framed(middle: Vec<Vec<Message>>) -> Vec<Message> {
    let mut msgs = vec![
        Message::text(Role::System, "rules"),
        Message::text(Role::User, "goal"),
    ];
    msgs.extend(middle.into_iter().flatten());
    msgs.extend(ring("last", "read", "recent", false));
    msgs.push(Message::text(Role::User, "next"));
    msgs
}

fn rewrites(plan: &Plan) -> Vec<(usize, RewriteKind)> {
    plan.items
        .iter()
        .filter_map(|i| match i {
            Item::Rewrite { index, kind, .. } => Some((*index, *kind)),
            _ => None,
        })
        .collect()
}

#[test]
fn superseded_read_becomes_a_stub_before_anything_is_dropped() {
    let body = "file contents ".repeat(100);
    let req = request(framed(vec![
        read("r1", r#"{"path":"a.py"}"#, &body),
        read("r2", r#"{"path":"b.py"}"#, &body),
        read("r3", r#"{ "path": "a.py" }"#, &body),
    ]));
    // r3 is one of the two protected recent rings: it stays, so r1 can go to a stub.
    let recent = |budget| PlanConfig {
        recent_tool_rings: 2,
        ..cfg(budget)
    };
    let full = plan(&req, &recent(100_000), &[], None)
        .unwrap()
        .tokens_after;
    let p = plan(&req, &recent(full - 10), &[], None).unwrap();
    assert_eq!(rewrites(&p), vec![(3, RewriteKind::Deduped)]);
    assert!(p.dropped_rings.is_empty());
    assert_eq!(p.stages[0].stage, "dedupe_superseded_reads");
    assert_eq!(p.rewrites[0].tokens_saved, p.stages[0].tokens_saved);
    assert_eq!(p.tokens_after + p.stages[0].tokens_saved, full);
    // With only the last ring protected, r3 may be dropped itself: r1 is left whole.
    let p = plan(&req, &cfg(full - 10), &[], None).unwrap();
    assert!(rewrites(&p).is_empty());
}

/// A superseded read whose result stands for a model item folded into it too (a Responses
/// assistant message met while its ring was open) keeps that item beside the stub: the plan
/// counts the stub with the folded text, as the adapter writes it, also when the request was
/// read through the cache, whose messages hold no texts until a stage asks for them.
#[test]
fn a_stub_of_a_result_with_folded_items_counts_what_they_brought() {
    let body = "file contents ".repeat(100);
    let mut msgs = framed(vec![
        read("r1", r#"{"path":"a.py"}"#, &body),
        read("r2", r#"{ "path": "a.py" }"#, &body),
    ]);
    // r1's result, as the Responses view folds an assistant message after it: the item's
    // text, and its framing as the other parts' tokens.
    let folded = crate::view::Folded {
        texts: 1,
        images: 0,
        other_part_tokens: 4,
    };
    let r1 = &mut msgs[3];
    r1.texts.push("a reply the model wrote mid-ring".into());
    r1.bytes += "a reply the model wrote mid-ring".len();
    r1.other_part_tokens += folded.other_part_tokens;
    r1.folded = folded;
    let full_r1 = msgs[3].clone();
    let recent = |budget| PlanConfig {
        recent_tool_rings: 2,
        ..cfg(budget)
    };
    let stub = rewrite::rewritten(&full_r1, &rewrite::dedupe_stub("read"));
    let in_memory = request(msgs.clone());
    let full = plan(&in_memory, &recent(100_000), &[], None)
        .unwrap()
        .tokens_after;
    let saved = u64::from(in_memory.tokens(3)) - in_memory.inserted_tokens(&stub);
    let cache = crate::cache::CountCache::new(1000, 1 << 20);
    let scheme = Scheme::openai(Encoding::O200kBase, DEFAULT_BACKEND);
    let read_through_cache = crate::request::load_canonical(msgs, None, scheme, &cache).unwrap();
    for req in [&in_memory, &read_through_cache] {
        let p = plan(req, &recent(full - 10), &[], None).unwrap();
        assert_eq!(rewrites(&p), vec![(3, RewriteKind::Deduped)]);
        assert_eq!(p.rewrites[0].tokens_saved, saved);
        assert_eq!(p.tokens_after, full - saved);
    }
}

#[test]
fn oversized_result_is_cut_with_an_anchor() {
    let big = (0..2000).map(|i| format!("row {i}\n")).collect::<String>();
    let req = request(framed(vec![
        read("r1", r#"{"p":1}"#, &big),
        read("r2", r#"{"p":2}"#, "small"),
    ]));
    let mut c = cfg(100_000);
    let full = plan(&req, &c, &[], None).unwrap().tokens_after;
    c.budget = full - 100;
    c.max_tool_result_tokens = 300;
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(rewrites(&p), vec![(3, RewriteKind::Truncated)]);
    let Some(Item::Rewrite { text, .. }) =
        p.items.iter().find(|i| matches!(i, Item::Rewrite { .. }))
    else {
        unreachable!()
    };
    assert!(text.starts_with("row 0\n") && text.contains("expand_message"));
    assert!(text.contains(&rewrite::content_id(&big)));
    assert!(p.dropped_rings.is_empty());
}

#[test]
fn a_rewritten_unit_that_is_dropped_reports_the_drop_only() {
    let body = "file contents ".repeat(100);
    let req = request(framed(vec![
        read("r1", r#"{"path":"a.py"}"#, &body),
        read("r2", r#"{"path":"a.py"}"#, &body),
    ]));
    let p = plan(&req, &cfg(60), &[], None).unwrap();
    assert!(rewrites(&p).is_empty());
    let stages: Vec<_> = p.stages.iter().map(|s| s.stage).collect();
    assert_eq!(stages, vec!["drop_rings"]);
    assert_eq!(p.tokens_after + p.stages[0].tokens_saved, p.tokens_before);
}

#[test]
fn summary_room_is_reserved_and_earlier_summaries_are_replaced() {
    let mut msgs = session(4);
    msgs.insert(
        2,
        Message::text(Role::System, &format!("{}\nearlier", summary::MARKER)),
    );
    let req = request(msgs);
    let mut c = cfg(100_000);
    let kept_all = plan(&req, &c, &[], None).unwrap();
    assert_eq!(kept_all.summary_notes, vec![2]);
    assert!(
        kept(&kept_all).contains(&2),
        "kept while nothing replaces it"
    );
    c.summary_reserve = Some(50);
    let p = plan(&req, &c, &[], None).unwrap();
    assert!(!kept(&p).contains(&2));
    assert_eq!(p.items[2], Item::Summary { role: Role::System });
    assert_eq!(p.buckets.insertions, 50);
}

#[test]
fn recorded_entries_are_rendered_and_not_derived_twice() {
    let req = request(session(4));
    let mut c = cfg(100_000);
    let recorded = LedgerEntry {
        tool: "send".into(),
        call_id: "c0".into(),
        args: serde_json::json!({}),
        status: "ok".into(),
        idempotency_key: Some("k1".into()),
        resource_id: Some("msg-9".into()),
        turn: Some(1),
    };
    c.recorded_ledger = vec![recorded.clone()];
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(p.ledger_entries, 1, "rendered though nothing was dropped");
    let full = p.tokens_after;
    c.budget = full - 100;
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(p.dropped_rings[0], Span { start: 2, end: 4 });
    assert!(
        p.ledger_added.is_empty(),
        "the recorded entry stands for ring c0"
    );
    assert_eq!(p.ledger_entries, 1);
}

#[test]
fn a_replayed_plan_keeps_its_decisions_as_the_history_grows() {
    let req = request(session(6));
    let full = plan(&req, &cfg(100_000), &[], None).unwrap().tokens_after;
    let first = plan(&req, &cfg(full / 2), &[], None).unwrap();
    let dropped: Vec<usize> = first
        .dropped_rings
        .iter()
        .flat_map(|s| s.start..s.end)
        .collect();
    // Two more rings appended: the replay drops the same, keeps the rest, whatever the budget.
    let mut longer = session(6);
    let tail = longer.split_off(longer.len() - 2);
    longer.extend(ring("n1", "read", &"data ".repeat(50), false));
    longer.extend(ring("n2", "read", &"data ".repeat(50), false));
    longer.extend(tail);
    let req2 = request(longer);
    let mut c = cfg(10);
    c.replay = Some(Replay {
        dropped: dropped.clone(),
        rewrites: Vec::new(),
    });
    let p = plan(&req2, &c, &[], None).unwrap();
    let k = kept(&p);
    assert!(dropped.iter().all(|i| !k.contains(i)));
    assert_eq!(k.len() + dropped.len(), req2.len());
    assert_eq!(p.ledger_entries, first.ledger_entries);
    // A dropped message that is protected now makes the replay stale.
    c.replay = Some(Replay {
        dropped: vec![1],
        rewrites: Vec::new(),
    });
    assert!(matches!(
        plan(&req2, &c, &[], None),
        Err(CoreError::StaleState { .. })
    ));
}

proptest! {
    #[test]
    fn invariants_hold_on_random_budgets(n in 1usize..12, budget in 10u64..3_000) {
        let req = request(session(n));
        match plan(&req, &cfg(budget), &[], None) {
            Ok(p) => {
                prop_assert!(p.tokens_after <= budget);
                let k = kept(&p);
                prop_assert!(k.windows(2).all(|w| w[0] < w[1]), "order kept");
                prop_assert!(k.contains(&0) && k.contains(&1), "prefix kept");
                prop_assert!(k.contains(&(req.len() - 1)), "last turn kept");
                // A larger budget keeps a superset.
                let more = plan(&req, &cfg(budget + 200), &[], None).unwrap();
                let k2 = kept(&more);
                prop_assert!(k.iter().all(|i| k2.contains(i)));
                // Dropped side-effecting ring c0 is always in the ledger.
                if !k.contains(&2) {
                    prop_assert_eq!(p.ledger_entries, 1);
                }
            }
            Err(CoreError::BudgetExceeded { tokens, .. }) => prop_assert!(tokens > budget),
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }
}

#[test]
fn a_result_too_big_to_fit_is_not_counted_to_its_end() {
    // The plan keeps the last ring and finds, walking back, that the huge result before it
    // overflows what is left, even cut to `max_tool_result_tokens`: it is dropped with only a
    // budget's (or a cut's) worth of it counted.
    let huge = "lorem ipsum dolor sit amet ".repeat(40_000); // about 1 MB, ~200k tokens
    let drops_only = vec![
        Stage::DropRings,
        Stage::DropPlainTurns,
        Stage::DropErrorRings,
    ];
    for stages in [drops_only, Stage::DEFAULT_ORDER.to_vec()] {
        let mut msgs = session(1);
        let last = msgs.len() - 2;
        msgs.splice(last..last, ring("big", "read", &huge, false));
        msgs.splice(last + 2..last + 2, ring("small", "read", "ok", false));
        let req = request(msgs);
        let big = (0..req.len())
            .find(|&i| req.message(i).tool_call_id.as_deref() == Some("big"))
            .unwrap();
        let mut config = cfg(400);
        config.stages = stages;
        config.max_tool_result_tokens = 1000;
        let p = plan(&req, &config, &[], None).unwrap();
        assert!(!kept(&p).contains(&big));
        assert!(!req.is_counted(big), "the huge result was counted in full");
        assert!(!p.tokens_before_exact);
        assert!(p.tokens_after <= 400);
    }
}

#[test]
fn counting_until_a_limit_agrees_with_counting() {
    let c = Scheme::openai(Encoding::O200kBase, DEFAULT_BACKEND).counter();
    for text in ["", "hello world", &"data ".repeat(500), "naïve 中文 😀 x"] {
        let n = c.count(text);
        for limit in [0, n.saturating_sub(1), n, n + 1, usize::MAX] {
            assert_eq!(
                c.count_until(text, limit),
                (n <= limit).then_some(n),
                "{text:?} {limit}"
            );
        }
    }
    let msg = Message::tool_result("c1", &"data ".repeat(300), false);
    let n = crate::count::chat::message_tokens(&msg, c);
    for limit in [0, n - 1, n, n + 1] {
        assert_eq!(
            crate::count::chat::message_tokens_until(
                &msg,
                c,
                crate::count::image_price::ImageFormula::OpenAi,
                limit
            ),
            (n <= limit).then_some(n)
        );
    }
}
