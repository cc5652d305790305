//! The stages that degrade the protected suffix, run only once the middle is exhausted and
//! the request still does not fit: a gateway that refuses a request it could have served
//! safely fails its caller. The invariants still hold: results are cut (the message stays, so
//! pairing holds), units released from the suffix are handled exactly like middle units.

use super::cheap::{least_cap, planned_cut};
use super::stages::{Outcome, Scope, Tally};
use super::{Planning, Stage, Valuation};
use crate::rewrite::RewriteKind;
use crate::units::UnitKind;
use crate::view::Role;

/// The protection in force while the stages run.
pub(super) struct Recent {
    rings: usize,
    turns: usize,
    /// Per unit: in the protected suffix.
    suffix: Vec<bool>,
    protected: Vec<bool>,
}

impl Planning<'_, '_, '_> {
    /// The protection the caller configured, its counts capped at the rings and user turns
    /// the request has: a count above them protects nothing more, and `shrink_recent` steps
    /// down one at a time, so an uncapped count of 10^12 would step for hours.
    pub fn recent(&self) -> Recent {
        let b = self.buckets;
        let rings = b
            .all_units
            .iter()
            .filter(|u| u.kind == UnitKind::Ring)
            .count();
        Recent {
            rings: self.cfg.recent_tool_rings.min(rings),
            turns: self.cfg.recent_user_turns.min(b.users.len()),
            suffix: b.recent.clone(),
            protected: b.protected.clone(),
        }
    }

    /// `TruncateProtectedResults`: tool results of the protected suffix over
    /// `max_tool_result_tokens` are cut to it, oldest ring first; the newest ring's results
    /// come last and are cut only as far as the budget needs, never below
    /// `min_result_tokens`. A result the caller pinned is kept as it is.
    pub fn truncate_protected(&self, budget: u64, recent: &Recent, out: &mut Outcome) -> Tally {
        let (work, cfg, b) = (self.work, self.cfg, self.buckets);
        let results: Vec<usize> = (0..work.msgs.len())
            .filter(|&w| {
                recent.suffix[b.unit_of[w]]
                    && work.msgs[w].role == Role::Tool
                    && work.original(w).is_some()
                    && !self.notes.skipped[w]
                    && !b.is_pinned(w)
                    && !out.dropped[b.unit_of[w]]
                    && out.rewritten[w].is_none()
            })
            .collect();
        let newest = results.last().map(|&w| b.unit_of[w]);
        let (older, last): (Vec<usize>, Vec<usize>) = results
            .into_iter()
            .partition(|&w| Some(b.unit_of[w]) != newest);
        let mut tally = Tally::default();
        let name = Stage::TruncateProtectedResults.name();
        for w in older {
            if self.now(out) <= budget {
                return tally;
            }
            if let Some(tokens) = planned_cut(work, w, cfg.max_tool_result_tokens) {
                self.rewrite(out, w, name, RewriteKind::Truncated, tokens);
                tally.count += 1;
            }
        }
        for w in last {
            let now = self.now(out);
            if now <= budget {
                break;
            }
            let need = work.tokens(w).saturating_sub(now - budget);
            // As far as needed, not below the floor, nor below what leaves the cut some text
            // beside its anchor (a cut too deep to make is made as deep as it can be).
            let cap = cfg
                .min_result_tokens
                .max(cfg.max_tool_result_tokens.min(need))
                .max(least_cap(work, w));
            if let Some(tokens) = planned_cut(work, w, cap) {
                self.rewrite(out, w, name, RewriteKind::Truncated, tokens);
                tally.count += 1;
            }
        }
        tally
    }

    /// `ShrinkRecent`: lowers the recent rings or turns by one, whichever is further above
    /// its floor (rings on a tie), and runs the middle's stages over the units this releases,
    /// step after step while over `budget`.
    pub fn shrink_recent(
        &self,
        budget: u64,
        v: &Valuation,
        recent: &mut Recent,
        out: &mut Outcome,
    ) -> Tally {
        let cfg = self.cfg;
        let ring_floor = cfg.min_recent_tool_rings.min(recent.rings);
        let turn_floor = cfg.min_recent_user_turns.min(recent.turns);
        let mut tally = Tally::default();
        while self.now(out) > budget {
            let above = (recent.rings - ring_floor, recent.turns - turn_floor);
            match above {
                (0, 0) => break,
                (r, t) if r >= t => recent.rings -= 1,
                _ => recent.turns -= 1,
            }
            let (suffix, protected) = self.buckets.protection(recent.rings, recent.turns);
            let released: Vec<usize> = (0..protected.len())
                .filter(|&k| recent.protected[k] && !protected[k] && !out.dropped[k])
                .collect();
            recent.suffix = suffix;
            recent.protected = protected;
            for &stage in cfg.stages.iter().filter(|s| !s.degrades()) {
                if self.now(out) <= budget {
                    break;
                }
                let step = self.middle_stage(stage, Scope::Released(&released), budget, v, out);
                tally.count += step.count;
                tally.restored += step.restored;
            }
        }
        tally
    }

    /// Messages of `released` units a cheap stage of `kind` may rewrite, oldest first. A
    /// superseded read is not stubbed here: the newer read that makes the stub safe may
    /// itself be released and dropped by a later step.
    pub fn released_rewrites(&self, kind: RewriteKind, released: &[usize]) -> Vec<usize> {
        let (work, b) = (self.work, self.buckets);
        released
            .iter()
            .flat_map(|&k| b.all_units[k].start..b.all_units[k].end)
            .filter(|&w| work.original(w).is_some() && !self.notes.skipped[w])
            .filter(|&w| match kind {
                RewriteKind::Truncated => work.msgs[w].role == Role::Tool,
                RewriteKind::Media => !work.msgs[w].images.is_empty(),
                RewriteKind::Deduped => false,
            })
            .collect()
    }
}
