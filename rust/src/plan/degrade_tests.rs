//! The stages that degrade the protected suffix before refusing.

use super::tests::{cfg, kept, request, ring};
use super::*;
use proptest::prelude::*;

/// system, goal, `n` rings with results of `size` words (the first one side-effecting), a
/// user turn.
fn heavy(n: usize, size: usize) -> Vec<Message> {
    let mut msgs = vec![
        Message::text(Role::System, "rules"),
        Message::text(Role::User, "goal"),
    ];
    for k in 0..n {
        let tool = if k == 0 { "send" } else { "read" };
        let text = format!("row {k} ").repeat(size);
        msgs.extend(ring(&format!("c{k}"), tool, &text, false));
    }
    msgs.push(Message::text(Role::User, "next"));
    msgs
}

fn strict(budget: u64) -> PlanConfig {
    let mut c = cfg(budget);
    c.stages.retain(|s| !s.degrades());
    c
}

fn degrading(budget: u64) -> PlanConfig {
    let mut c = cfg(budget);
    c.recent_tool_rings = 3;
    c.recent_user_turns = 2;
    c.max_tool_result_tokens = 300;
    c.min_result_tokens = 100;
    c
}

fn stage_names(p: &Plan) -> Vec<&'static str> {
    p.stages.iter().map(|s| s.stage).collect()
}

#[test]
fn a_huge_newest_result_is_cut_instead_of_refused() {
    // One ring, so nothing is middle: the result alone overflows the budget.
    let req = request(heavy(1, 2000));
    assert!(matches!(
        plan(&req, &strict(1500), &[], None),
        Err(CoreError::BudgetExceeded { .. })
    ));
    let p = plan(&req, &degrading(1500), &[], None).unwrap();
    assert!(p.tokens_after <= 1500);
    // Over `max_tool_result_tokens`, it is cut to that, like the middle's results.
    assert!(p.tokens_after < 400);
    let mut c = degrading(1500);
    c.max_tool_result_tokens = 10_000;
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(stage_names(&p), vec!["truncate_protected_results"]);
    assert_eq!(p.rewrites.len(), 1);
    assert_eq!(p.rewrites[0].kind, RewriteKind::Truncated);
    assert_eq!(p.rewrites[0].index, 3);
    // Cut only as far as the budget needs: what it saved is what the request was over, give
    // or take the cut's rounding.
    let over = p.tokens_before - 1500;
    assert!(p.stages[0].tokens_saved >= over && p.stages[0].tokens_saved < over + 20);
}

#[test]
fn older_protected_results_are_cut_first_and_the_newest_never_below_its_floor() {
    let req = request(heavy(3, 600));
    let full = plan(&req, &cfg(1_000_000), &[], None).unwrap().tokens_after;
    // Cutting the two older results to 300 tokens is enough: the newest stays whole.
    let p = plan(&req, &degrading(full - 2500), &[], None).unwrap();
    let cut: Vec<usize> = p.rewrites.iter().map(|r| r.index).collect();
    assert_eq!(cut, vec![3, 5]);
    // A budget only the newest result's floor allows: everything cut, newest at 100 tokens.
    let mut c = degrading(0);
    c.stages.retain(|s| *s != Stage::ShrinkRecent);
    let floor_total = {
        c.budget = 1;
        match plan(&req, &c, &[], None) {
            Err(CoreError::BudgetExceeded { tokens, .. }) => tokens,
            other => panic!("expected BudgetExceeded, got {other:?}"),
        }
    };
    c.budget = floor_total;
    let p = plan(&req, &c, &[], None).unwrap();
    let newest = p.items.iter().find_map(|i| match i {
        Item::Rewrite { index: 7, text, .. } => Some(text.clone()),
        _ => None,
    });
    let newest = newest.expect("the newest result is cut");
    let tokens = req.inserted_tokens(&Message::tool_result("c2", &newest, false));
    assert!((90..=100).contains(&tokens), "{tokens}");
    assert!(plan(
        &req,
        &{
            let mut c = c.clone();
            c.budget = floor_total - 1;
            c
        },
        &[],
        None
    )
    .is_err());
}

#[test]
fn shrink_recent_releases_rings_to_the_middle_stages() {
    let req = request(heavy(3, 600));
    let mut c = degrading(0);
    c.stages.retain(|s| *s != Stage::TruncateProtectedResults);
    c.max_tool_result_tokens = 4000;
    let full = plan(&req, &cfg(1_000_000), &[], None).unwrap().tokens_after;
    c.budget = full - 100;
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(stage_names(&p), vec!["shrink_recent"]);
    // The oldest ring (the send) is released first and dropped whole, into the ledger.
    assert_eq!(p.dropped_rings, vec![Span { start: 2, end: 4 }]);
    assert_eq!(p.ledger_added.len(), 1);
    assert!(p.tokens_after <= full - 100);
    // Floors equal to the configured values keep today's strict protection.
    c.min_recent_tool_rings = 3;
    c.min_recent_user_turns = 2;
    assert!(matches!(
        plan(&req, &c, &[], None),
        Err(CoreError::BudgetExceeded { .. })
    ));
}

#[test]
fn the_protected_part_degrades_only_once_the_middle_is_exhausted() {
    // Five rings, three recent: the two middle rings go before any protected result is cut,
    // whatever the order of the stage list.
    let req = request(heavy(5, 600));
    let full = plan(&req, &cfg(1_000_000), &[], None).unwrap().tokens_after;
    let mut c = degrading(full - 4000);
    c.stages.reverse();
    let p = plan(&req, &c, &[], None).unwrap();
    let names = stage_names(&p);
    assert_eq!(names[0], "drop_rings");
    assert_eq!(p.stages[0].units, 2);
    assert!(names[1..]
        .iter()
        .all(|s| ["truncate_protected_results", "shrink_recent"].contains(s)));
}

proptest! {
    #[test]
    fn invariants_hold_when_the_suffix_degrades(
        n in 1usize..6,
        size in 50usize..800,
        budget in 10u64..6_000,
        rings in 1usize..4,
        turns in 0usize..3,
    ) {
        let req = request(heavy(n, size));
        let mut c = degrading(budget);
        c.recent_tool_rings = rings;
        c.recent_user_turns = turns;
        match plan(&req, &c, &[], None) {
            Ok(p) => {
                prop_assert!(p.tokens_after <= budget);
                let k: Vec<usize> = p.items.iter().filter_map(|i| match i {
                    Item::Keep(k) | Item::Rewrite { index: k, .. } => Some(*k),
                    _ => None,
                }).collect();
                prop_assert!(k.windows(2).all(|w| w[0] < w[1]), "order kept");
                prop_assert!(k.contains(&0) && k.contains(&1), "prefix kept");
                prop_assert!(k.contains(&(req.len() - 1)), "last turn kept");
                // The newest ring is kept, its result at least at its floor or whole.
                prop_assert!(k.contains(&(req.len() - 2)));
                if !k.contains(&2) {
                    prop_assert_eq!(p.ledger_entries, 1, "the dropped send is in the ledger");
                }
                // Deterministic, and a larger budget keeps a superset.
                prop_assert_eq!(&plan(&req, &c, &[], None).unwrap(), &p);
                let mut more = c.clone();
                more.budget = budget + 300;
                let k2 = kept(&plan(&req, &more, &[], None).unwrap());
                let k2: Vec<usize> = k2.into_iter().chain(
                    plan(&req, &more, &[], None).unwrap().rewrites.iter().map(|r| r.index)
                ).collect();
                prop_assert!(k.iter().all(|i| k2.contains(i)), "{k:?} {k2:?}");
            }
            Err(CoreError::BudgetExceeded { tokens, .. }) => {
                prop_assert!(tokens > budget);
                // Refused only when the floor request does not fit either: the same request
                // with no protection left to shrink fails as well.
                let mut floor = c.clone();
                floor.recent_tool_rings = 1;
                floor.recent_user_turns = 1;
                prop_assert!(plan(&req, &floor, &[], None).is_err());
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }
}

#[test]
fn a_newest_result_cut_to_fit_is_not_replayed() {
    // Two rings, both protected but released by floors of 0; the budget needs the newest
    // result cut below `max_tool_result_tokens`, a depth a replay cannot know.
    let req = request(heavy(2, 2000));
    let mut c = degrading(600);
    c.recent_user_turns = 1;
    c.min_recent_tool_rings = 0;
    c.min_recent_user_turns = 0;
    let p = plan(&req, &c, &[], None).unwrap();
    assert_eq!(stage_names(&p), vec!["truncate_protected_results"]);
    let cut: Vec<(usize, u64)> = p
        .rewrites
        .iter()
        .map(|r| (r.index, r.tokens_saved))
        .collect();
    assert_eq!(cut.iter().map(|c| c.0).collect::<Vec<_>>(), vec![3, 5]);
    assert!(
        cut[1].1 > cut[0].1,
        "the newest result is cut deeper than the older one"
    );
    let replay = |rewrites: Vec<(usize, RewriteKind)>| {
        let mut r = c.clone();
        r.replay = Some(Replay {
            dropped: Vec::new(),
            rewrites,
        });
        plan(&req, &r, &[], None)
    };
    match replay(vec![
        (3, RewriteKind::Truncated),
        (5, RewriteKind::Truncated),
    ]) {
        Err(CoreError::StaleState { reason }) => {
            assert!(
                reason.starts_with("message 5 was cut to fit the budget"),
                "{reason}"
            )
        }
        other => panic!("the newest cut was replayed: {other:?}"),
    }
    // The older result's cut, at `max_tool_result_tokens`, is replayed as it was made.
    let again = replay(vec![(3, RewriteKind::Truncated)]).unwrap();
    assert_eq!(again.rewrites.len(), 1);
    assert_eq!(again.rewrites[0].tokens_saved, cut[0].1);
}
