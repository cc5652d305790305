//! The stage loop: the middle's stages in the caller's order, each only while the request is
//! over budget, oldest unit first; then, once the middle is exhausted and the request still
//! does not fit, the stages that degrade the protected suffix (`degrade.rs`), and last the
//! tools schema where the policy allows.

use std::borrow::Cow;

use super::{record_side_effects, LedgerState, Planning, Stage, StageReport, Valuation};
use crate::rewrite::RewriteKind;

/// A message a stage rewrote: which stage, how, and the tokens it saved.
#[derive(Clone, Copy)]
pub(super) struct Rewritten {
    pub stage: &'static str,
    pub kind: RewriteKind,
    pub saved: u64,
    /// For a cut result, the limit it is cut to.
    pub cap: u64,
}

/// Where one walk of the stages ended.
pub(super) struct Outcome {
    pub dropped: Vec<bool>,
    /// Tokens of each unit now, after the rewrites of its messages.
    pub unit_now: Vec<u64>,
    /// Per message: the rewrite applied.
    pub rewritten: Vec<Option<Rewritten>>,
    pub ledger: LedgerState,
    pub messages_kept: u64,
    pub tools_tokens: u64,
    pub stages: Vec<StageReport>,
    /// The smallest total seen along the way.
    pub least: u64,
}

/// Which units a middle stage works on.
#[derive(Clone, Copy)]
pub(super) enum Scope<'s> {
    /// The middle.
    Middle,
    /// Units a lower protection released (`ShrinkRecent`), oldest first.
    Released(&'s [usize]),
}

/// What one stage did: units rewritten or dropped, and what rewrites had saved in units it
/// then dropped (its saving is the units' full size, as if never rewritten).
#[derive(Default)]
pub(super) struct Tally {
    pub count: usize,
    pub restored: u64,
}

impl Planning<'_, '_, '_> {
    /// Tokens of the request an outcome describes.
    pub fn now(&self, o: &Outcome) -> u64 {
        self.total(o.messages_kept, &o.ledger, o.tools_tokens)
    }

    /// Walks the stages until the request fits `budget`. A ledger note can grow by more than
    /// a small ring saves, so the total is not monotone along the sequence: `least` remembers
    /// the smallest total seen, the budget that a failed run reports as needed.
    pub fn run(&self, budget: u64, v: &Valuation) -> Outcome {
        let (work, cfg, b) = (self.work, self.cfg, self.buckets);
        let mut out = Outcome {
            dropped: vec![false; b.all_units.len()],
            unit_now: v.value.clone(),
            rewritten: vec![None; work.msgs.len()],
            ledger: self.notes.ledger_state.clone(),
            messages_kept: v.value.iter().sum(),
            tools_tokens: work.req.tools_tokens,
            stages: Vec::new(),
            least: 0,
        };
        out.least = self.now(&out);
        // The middle first, whatever the order of the list: the protected part degrades only
        // once nothing else is left to take, and never to make room for a summary note (a
        // summary is worth less than the suffix it would cost).
        let middle = cfg.stages.iter().filter(|s| !s.degrades());
        let degrade = cfg
            .stages
            .iter()
            .filter(|s| s.degrades() && cfg.summary_reserve.is_none());
        let mut recent = self.recent();
        for &stage in middle.chain(degrade) {
            if self.now(&out) > budget {
                // Savings are reported from estimates where the values are bounds.
                let before = self.now(&out) - v.overstated_kept(&out.dropped);
                let tally = match stage {
                    Stage::TruncateProtectedResults => {
                        self.truncate_protected(budget, &recent, &mut out)
                    }
                    Stage::ShrinkRecent => self.shrink_recent(budget, v, &mut recent, &mut out),
                    _ => self.middle_stage(stage, Scope::Middle, budget, v, &mut out),
                };
                if tally.count > 0 {
                    out.stages.push(StageReport {
                        stage: stage.name(),
                        units: tally.count,
                        tokens_saved: (before + tally.restored)
                            .saturating_sub(self.now(&out) - v.overstated_kept(&out.dropped)),
                    });
                }
            }
        }
        if self.now(&out) > budget && cfg.drop_tools_schema && out.tools_tokens > 0 {
            out.stages.push(StageReport {
                stage: "drop_tools_schema",
                units: 1,
                tokens_saved: out.tools_tokens,
            });
            out.tools_tokens = 0;
            out.least = out.least.min(self.now(&out));
        }
        out
    }

    /// One middle stage over `scope` while over `budget`: a cheap stage rewrites its
    /// candidate messages, a drop stage drops its candidate units, oldest first.
    pub fn middle_stage(
        &self,
        stage: Stage,
        scope: Scope<'_>,
        budget: u64,
        v: &Valuation,
        out: &mut Outcome,
    ) -> Tally {
        let (work, cfg, b) = (self.work, self.cfg, self.buckets);
        let mut tally = Tally::default();
        let by = match scope {
            Scope::Middle => stage.name(),
            Scope::Released(_) => Stage::ShrinkRecent.name(),
        };
        if let Some(kind) = stage.rewrites() {
            let candidates = match scope {
                Scope::Middle => Cow::Borrowed(self.cheap.candidates(kind)),
                Scope::Released(units) => Cow::Owned(self.released_rewrites(kind, units)),
            };
            for &w in candidates.iter() {
                if self.now(out) <= budget {
                    break;
                }
                let k = b.unit_of[w];
                if out.dropped[k] || v.certain[k] || out.rewritten[w].is_some() {
                    continue;
                }
                let Some(tokens) = self.cheap.planned(kind, w, work, cfg) else {
                    continue;
                };
                self.rewrite(out, w, by, kind, tokens);
                tally.count += 1;
            }
        }
        let candidates = match scope {
            Scope::Middle => b.candidates(stage),
            Scope::Released(units) => b.released_candidates(stage, units, work, cfg),
        };
        for k in candidates {
            if self.now(out) <= budget {
                break;
            }
            if out.dropped[k] {
                continue;
            }
            out.dropped[k] = true;
            tally.count += 1;
            out.messages_kept -= out.unit_now[k];
            tally.restored += v.value[k] - out.unit_now[k];
            record_side_effects(&b.all_units[k], work, cfg, &b.users, &mut out.ledger);
            out.least = out.least.min(self.now(out));
        }
        tally
    }

    /// Records that message `w` is rewritten down to `tokens`.
    pub fn rewrite(
        &self,
        out: &mut Outcome,
        w: usize,
        stage: &'static str,
        kind: RewriteKind,
        tokens: u64,
    ) {
        let k = self.buckets.unit_of[w];
        let saved = self.work.tokens(w) - tokens;
        out.rewritten[w] = Some(Rewritten {
            stage,
            kind,
            saved,
            cap: tokens,
        });
        out.unit_now[k] -= saved;
        out.messages_kept -= saved;
        out.least = out.least.min(self.now(out));
    }
}
