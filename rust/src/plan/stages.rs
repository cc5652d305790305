//! The stage loop: the stages in the caller's order, each only while the request is over
//! budget, oldest unit first. The drop sequence is fixed; `run` walks it until the request
//! fits.

use super::{record_side_effects, LedgerState, Planning, StageReport, Valuation};
use crate::rewrite::RewriteKind;

/// Where one walk of the stages ended.
pub(super) struct Outcome {
    pub dropped: Vec<bool>,
    /// Tokens of each unit now, after the rewrites of its messages.
    pub unit_now: Vec<u64>,
    /// Per message: the rewrite applied and the tokens it saved.
    pub rewritten: Vec<Option<(RewriteKind, u64)>>,
    pub ledger: LedgerState,
    pub messages_kept: u64,
    pub tools_tokens: u64,
    pub stages: Vec<StageReport>,
    /// The smallest total seen along the way.
    pub least: u64,
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
        for &stage in &cfg.stages {
            if self.now(&out) <= budget {
                break;
            }
            let before = self.now(&out);
            let mut count = 0;
            // What rewrites had saved in units this stage then dropped: the stage's saving is
            // the units' full size, as if they had never been rewritten.
            let mut restored = 0;
            if let Some(kind) = stage.rewrites() {
                for &w in self.cheap.candidates(kind) {
                    if self.now(&out) <= budget {
                        break;
                    }
                    let k = b.unit_of[w];
                    if out.dropped[k] || v.certain[k] || out.rewritten[w].is_some() {
                        continue;
                    }
                    let Some(tokens) = self.cheap.planned(kind, w, work, cfg) else {
                        continue;
                    };
                    let saved = work.tokens(w) - tokens;
                    out.rewritten[w] = Some((kind, saved));
                    out.unit_now[k] -= saved;
                    out.messages_kept -= saved;
                    count += 1;
                    out.least = out.least.min(self.now(&out));
                }
            }
            for k in b.candidates(stage) {
                if self.now(&out) <= budget {
                    break;
                }
                if out.dropped[k] {
                    continue;
                }
                let u = &b.all_units[k];
                out.dropped[k] = true;
                count += 1;
                out.messages_kept -= out.unit_now[k];
                restored += v.value[k] - out.unit_now[k];
                record_side_effects(u, work, cfg, &b.users, &mut out.ledger);
                out.least = out.least.min(self.now(&out));
            }
            if count > 0 {
                out.stages.push(StageReport {
                    stage: stage.name(),
                    units: count,
                    tokens_saved: (before + restored).saturating_sub(self.now(&out)),
                });
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
}
