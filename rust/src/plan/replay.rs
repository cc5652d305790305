//! Making a previous plan's decisions again (cache-stable assembly): the same whole units
//! dropped, the same rewrites, no stage loop. The caller compares the total with its trigger;
//! a replay that no longer describes the request is refused, never bent to fit.

use rustc_hash::FxHashSet as HashSet;

use super::stages::Rewritten;
use super::{
    record_side_effects, Outcome, Planning, Replay, Source, Stage, StageReport, Valuation,
};

const REUSED: &str = "reuse_previous_cut";
use crate::error::CoreError;
use crate::rewrite::RewriteKind;
use crate::view::Role;

/// The outcome of making a previous plan's decisions again, or `StaleState` when they no
/// longer fit this request: a dropped message outside the middle or not a whole unit, a
/// rewrite that cannot be made. A unit `ShrinkRecent` released (protected as recent, not at
/// the floors, not pinned) may be dropped or rewritten again: a compaction that had to
/// degrade the suffix to fit is made again by the same history. A result of the newest
/// protected ring cut by `TruncateProtectedResults` is not: that cut goes as far as the budget
/// needed and no further than `min_result_tokens`, a depth the state does not record, and a
/// replay at `max_tool_result_tokens` would send another text (the caller plans afresh
/// instead, which makes the same cut). Side effects enter the ledger in the order the stage loop drops their
/// units, so the note reads as the cut first made it.
pub(super) fn replay(
    r: &Replay,
    p: &Planning<'_, '_, '_>,
    v: &Valuation,
) -> Result<Outcome, CoreError> {
    let stale = |reason: String| CoreError::StaleState { reason };
    let (work, b) = (p.work, p.buckets);
    let len = work.msgs.len();
    let gone: HashSet<usize> = r.dropped.iter().copied().collect();
    let mut out = Outcome {
        dropped: vec![false; b.all_units.len()],
        unit_now: v.value.clone(),
        rewritten: vec![None; len],
        ledger: p.notes.ledger_state.clone(),
        messages_kept: 0,
        tools_tokens: work.req.tools_tokens,
        stages: Vec::new(),
        least: 0,
    };
    let cfg = p.cfg;
    let floors = cfg.stages.contains(&Stage::ShrinkRecent).then(|| {
        b.protection(
            cfg.min_recent_tool_rings.min(cfg.recent_tool_rings),
            cfg.min_recent_user_turns.min(cfg.recent_user_turns),
        )
        .1
    });
    let released = |k: usize| floors.as_ref().is_some_and(|f| !f[k]);
    // The ring whose results `truncate_protected` cuts as far as needed: the newest one with a
    // result it may cut.
    let newest = cfg
        .stages
        .contains(&Stage::TruncateProtectedResults)
        .then(|| {
            (0..len).rev().find(|&w| {
                b.recent[b.unit_of[w]]
                    && work.msgs[w].role == Role::Tool
                    && work.original(w).is_some()
                    && !p.notes.skipped[w]
                    && !b.is_pinned(w)
            })
        })
        .flatten()
        .map(|w| b.unit_of[w]);
    for &i in &r.dropped {
        let w = *b
            .original_to_work
            .get(&i)
            .ok_or_else(|| stale(format!("message {i} it dropped is not in the request")))?;
        let k = b.unit_of[w];
        let u = &b.all_units[k];
        if b.protected[k] && !released(k) {
            return Err(stale(format!("message {i} it dropped is protected now")));
        }
        let whole = (u.start..u.end).all(|v| match work.source[v] {
            Source::Original(j) => gone.contains(&j),
            Source::Synthesized => true,
        });
        if !whole {
            return Err(stale(format!(
                "message {i} it dropped is part of a unit now"
            )));
        }
        out.dropped[k] = true;
    }
    // The stage loop's order: the middle's rings and turns, its held error rings, then the
    // units the suffix released.
    let mut order: Vec<usize> = (0..b.all_units.len()).filter(|&k| out.dropped[k]).collect();
    order.sort_by_key(|&k| (b.protected[k], b.is_held(k), k));
    for k in order {
        record_side_effects(&b.all_units[k], work, cfg, &b.users, &mut out.ledger);
    }
    for &(i, kind) in &r.rewrites {
        let w = *b
            .original_to_work
            .get(&i)
            .ok_or_else(|| stale(format!("message {i} it rewrote is not in the request")))?;
        let k = b.unit_of[w];
        if out.dropped[k] {
            continue;
        }
        if b.protected[k] && !released(k) {
            return Err(stale(format!("message {i} it rewrote is protected now")));
        }
        if kind == RewriteKind::Truncated && b.protected[k] && newest == Some(k) {
            return Err(stale(format!(
                "message {i} was cut to fit the budget, to a depth the state does not record"
            )));
        }
        let act = p
            .cheap
            .rewrite(kind, w, work, cfg)
            .ok_or_else(|| stale(format!("message {i} cannot be rewritten as before")))?;
        let saved = work.tokens(w) - act.tokens;
        out.rewritten[w] = Some(Rewritten {
            stage: REUSED,
            kind,
            saved,
            cap: cfg.max_tool_result_tokens,
        });
        out.unit_now[k] -= saved;
    }
    out.messages_kept = (0..b.all_units.len())
        .filter(|&k| !out.dropped[k])
        .map(|k| out.unit_now[k])
        .sum();
    let units = out.dropped.iter().filter(|&&d| d).count()
        + out.rewritten.iter().filter(|x| x.is_some()).count();
    if units > 0 {
        // Savings from estimates where the dropped units' values are bounds.
        let before = v.value.iter().sum::<u64>() - v.overstated.iter().sum::<u64>();
        out.stages.push(StageReport {
            stage: REUSED,
            units,
            tokens_saved: before.saturating_sub(out.messages_kept),
        });
    }
    Ok(out)
}
