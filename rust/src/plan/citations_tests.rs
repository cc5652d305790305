//! The drop order that keeps what later turns build on (`citations`).

use super::tests::{cfg, kept, request, ring};
use super::*;
use crate::view::ToolCall;

/// rules, goal; r0 whose result holds ORD1234, which the plain turn at 6 repeats; r1 and r2
/// that nothing cites; a user turn and a reply citing nothing; the recent ring; a user turn.
fn session() -> Vec<Message> {
    let filler = "data ".repeat(40);
    let mut msgs = vec![
        Message::text(Role::System, "rules"),
        Message::text(Role::User, "goal"),
    ];
    msgs.extend(ring(
        "r0",
        "read",
        &format!("{filler} order ORD1234"),
        false,
    ));
    msgs.extend(ring(
        "r1",
        "read",
        &format!("{filler} order ORD5678"),
        false,
    ));
    msgs.push(Message::text(
        Role::Assistant,
        "Found ORD1234, checking it.",
    ));
    msgs.push(Message::text(Role::User, "ok, carry on"));
    msgs.extend(ring("r2", "read", &filler, false));
    msgs.push(Message::text(Role::Assistant, "nothing there"));
    msgs.extend(ring("r3", "read", &filler, false));
    msgs.push(Message::text(Role::User, "next"));
    msgs
}

/// For each budget from the whole request down to the least, the first (largest) budget at
/// which each message is dropped.
fn first_dropped(req: &Request, c: impl Fn(u64) -> PlanConfig) -> Vec<Option<u64>> {
    let full = plan(req, &c(1_000_000), &[], None).unwrap().tokens_after;
    let mut out = vec![None; req.len()];
    let mut before: Vec<usize> = (0..req.len()).collect();
    for budget in (0..=full).rev() {
        let Ok(p) = plan(req, &c(budget), &[], None) else {
            break;
        };
        let now = kept(&p);
        assert!(
            now.iter().all(|i| before.contains(i)),
            "monotone at {budget}"
        );
        for i in (0..req.len()).filter(|i| !now.contains(i)) {
            out[i].get_or_insert(budget);
        }
        before = now;
    }
    out
}

#[test]
fn unreferenced_rings_then_plain_turns_then_referenced_rings_then_citing_turns() {
    let req = request(session());
    let at = first_dropped(&req, cfg);
    // Larger budget first: r1 (4), r2 (8), the user turn (7), the reply (10), r0 (2), the
    // citing turn (6).
    let order = [4, 8, 7, 10, 2, 6];
    for pair in order.windows(2) {
        assert!(at[pair[0]] > at[pair[1]], "{pair:?}: {at:?}");
    }
    assert_eq!(at[3], at[2], "a ring goes whole");
    for i in [0, 1, 11, 12, 13] {
        assert_eq!(at[i], None, "{i} is protected");
    }
}

#[test]
fn without_the_two_stages_the_middle_goes_oldest_first() {
    let req = request(session());
    let fifo = |budget| {
        let mut c = cfg(budget);
        c.stages
            .retain(|s| !matches!(s, Stage::DropReferencedRings | Stage::DropCitingTurns));
        c
    };
    let at = first_dropped(&req, fifo);
    let order = [2, 4, 8, 6, 7, 10];
    for pair in order.windows(2) {
        assert!(at[pair[0]] > at[pair[1]], "{pair:?}: {at:?}");
    }
}

#[test]
fn each_stage_is_reported_with_what_it_took() {
    let req = request(session());
    let p = plan(&req, &cfg(0), &[], None);
    assert!(p.is_err(), "nothing fits nothing");
    let least = plan(&req, &cfg(1_000_000), &[], None).unwrap().tokens_after;
    let p = (0..least)
        .find_map(|b| plan(&req, &cfg(b), &[], None).ok())
        .unwrap();
    let stages: Vec<_> = p.stages.iter().map(|s| (s.stage, s.units)).collect();
    assert_eq!(
        stages,
        vec![
            ("drop_rings", 2),
            ("drop_plain_turns", 2),
            ("drop_referenced_rings", 1),
            ("drop_citing_turns", 1),
        ]
    );
}

#[test]
fn only_later_messages_that_are_not_results_cite() {
    let call = |id: &str, args: &str| {
        Message::assistant_calls(vec![ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: args.into(),
        }])
    };
    let msgs = vec![
        Message::text(Role::User, "goal: check src/app.py"),
        call("a", "{}"),
        Message::tool_result("a", "see src/app.py and lib/util.py", false),
        call("b", "{}"),
        Message::tool_result("b", "lib/util.py again, and HAT170", false),
        Message::text(Role::Assistant, "src/app.py is the one"),
        call("c", r#"{"flight": "HAT170"}"#),
        Message::tool_result("c", "ok", false),
    ];
    let req = request(msgs);
    let work = work::build_work(&req, &[], &[]);
    let units = crate::units::units(&work.msgs);
    let cited = citations::cited(&work, &units, &vec![false; work.msgs.len()]);
    // Units: goal, ring a, ring b, reply, ring c. Ring a: src/app.py, repeated by the reply
    // (lib/util.py only by a later result). Ring b: HAT170, in ring c's arguments. The reply
    // cites src/app.py, first held by ring a's result (the goal said it first: still a
    // result's). The goal cites nothing before it.
    assert_eq!(cited, vec![false, true, true, true, false]);
}

#[test]
fn a_ring_the_ledger_records_keeps_its_place() {
    // r0 calls `send` (side-effecting): cited later or not, it goes with the other rings in
    // order, so the ledger note lists effects as a replay of the cut writes them.
    let mut msgs = session();
    msgs[2].tool_calls[0].name = "send".into();
    let req = request(msgs);
    let at = first_dropped(&req, cfg);
    assert!(at[2] > at[4], "{at:?}");
}
