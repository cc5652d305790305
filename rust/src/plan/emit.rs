//! From the stages' outcome to the plan: the kept rewrites made for real, the report (stages,
//! buckets, what was dropped), the items in order, and a last pairing check of the result.

use rustc_hash::FxHashMap as HashMap;

use super::cheap::cut;
use super::stages::Rewritten;
use super::{
    BucketTokens, CoreError, Item, LedgerState, Outcome, Plan, Planning, RewriteReport, Span,
    Stage, StageReport,
};
use crate::ledger;
use crate::pairing;
use crate::request::Request;
use crate::rewrite::RewriteKind;
use crate::units::UnitKind;
use crate::view::Message;

/// What the request was before the stages, for the report.
pub(super) struct Before {
    pub tokens: u64,
    pub exact: bool,
}

impl Planning<'_, '_, '_> {
    /// The plan an outcome describes, or `BudgetExceeded` with every bucket's tokens when it
    /// does not fit.
    pub fn finish(
        &self,
        outcome: Outcome,
        fits: bool,
        before: Before,
        repairs: &[pairing::Repair],
        synthesized: &[Message],
    ) -> Result<Plan, CoreError> {
        let (work, cfg, b) = (self.work, self.cfg, self.buckets);
        let Outcome {
            dropped,
            mut unit_now,
            rewritten,
            ledger: ledger_state,
            tools_tokens,
            stages: mut stage_reports,
            mut messages_kept,
            ..
        } = outcome;
        // Rewrites of units dropped later count for the drop, not for the cheap stage. Kept
        // ones are made now, and a cut result's exact size (at most the planned limit)
        // replaces the plan's.
        let mut kept_rewrites: Vec<(usize, Rewritten, u64)> = Vec::new();
        let mut rewrites: HashMap<usize, (RewriteKind, String)> = HashMap::default();
        for w in (0..work.msgs.len()).filter(|&w| fits && !dropped[b.unit_of[w]]) {
            let Some(mut done) = rewritten[w] else {
                continue;
            };
            let planned = work.tokens(w) - done.saved;
            let made = match done.kind {
                RewriteKind::Truncated => cut(work, w, done.cap).map(|a| (a.text, a.tokens)),
                kind => {
                    (self.cheap.rewrite(kind, w, work, cfg)).map(|a| (a.text.clone(), a.tokens))
                }
            };
            let Some((text, tokens)) = made else {
                return Err(CoreError::InvalidMessage {
                    index: work.original(w),
                    reason: "a planned rewrite could not be made".into(),
                });
            };
            let slack = planned.saturating_sub(tokens);
            messages_kept -= slack;
            unit_now[b.unit_of[w]] -= slack;
            done.saved += slack;
            kept_rewrites.push((w, done, slack));
            rewrites.insert(w, (done.kind, text));
        }
        // A stage that only rewrites reports the rewrites kept; `shrink_recent`, which also
        // drops, keeps its count, plus what its kept cuts saved beyond the plan.
        stage_reports.retain_mut(|report| {
            let mine = kept_rewrites.iter().filter(|r| r.1.stage == report.stage);
            let only_rewrites = Stage::from_name(report.stage)
                .is_some_and(|s| s.rewrites().is_some() || s == Stage::TruncateProtectedResults);
            if report.stage == Stage::ShrinkRecent.name() {
                report.tokens_saved += mine.map(|r| r.2).sum::<u64>();
                return true;
            }
            if !only_rewrites {
                return true;
            }
            report.units = mine.clone().count();
            report.tokens_saved = mine.map(|r| r.1.saved).sum();
            report.units > 0
        });
        let tools_dropped = tools_tokens == 0 && work.req.tools_tokens > 0;
        let notes = &self.notes.ledger;
        if notes.len() > 1 {
            // Several earlier notes become the one note at the first one's place: say so.
            let notes_tokens: u64 = notes.iter().map(|&w| work.tokens(w)).sum();
            stage_reports.insert(
                0,
                StageReport {
                    stage: "merge_ledger_notes",
                    units: notes.len() - 1,
                    tokens_saved: notes_tokens.saturating_sub(ledger_state.tokens),
                },
            );
        }

        let mut buckets = BucketTokens {
            tools: tools_tokens,
            insertions: ledger_state.tokens + self.notes.reserve,
            framing: self.framing,
            ..BucketTokens::default()
        };
        for k in 0..b.all_units.len() {
            if dropped[k] {
                continue;
            }
            let t = unit_now[k];
            if b.recent[k] {
                buckets.suffix += t;
            } else if b.protected[k] {
                buckets.prefix += t;
            } else {
                buckets.middle += t;
            }
        }
        let tokens_after = self.total(messages_kept, &ledger_state, tools_tokens);
        if !fits {
            return Err(CoreError::BudgetExceeded {
                tokens: tokens_after,
                budget: cfg.budget,
                buckets,
            });
        }

        let items = self.emit(&dropped, &rewrites, &ledger_state);
        let original = |w: usize| {
            work.original(w)
                .expect("only the caller's messages are rewritten")
        };
        let spans = |kind: UnitKind| -> Vec<Span> {
            b.all_units
                .iter()
                .zip(&dropped)
                .filter(|(u, &d)| d && u.kind == kind)
                .filter_map(|(u, _)| work.original_span(u))
                .collect()
        };
        let plan = Plan {
            tokens_before: before.tokens,
            tokens_before_exact: before.exact,
            tokens_after,
            budget: cfg.budget,
            dropped_rings: spans(UnitKind::Ring),
            dropped_turns: spans(UnitKind::Plain),
            stages: stage_reports,
            repairs: repairs.iter().map(|r| r.call_id.clone()).collect(),
            ledger_entries: ledger_state.entries.len(),
            ledger_added: ledger_state.added,
            buckets,
            tools_dropped,
            items,
            rewrites: kept_rewrites
                .iter()
                .map(|&(w, r, _)| RewriteReport {
                    index: original(w),
                    kind: r.kind,
                    tokens_saved: r.saved,
                })
                .collect(),
            summary_notes: self
                .notes
                .summaries
                .iter()
                .filter_map(|&w| work.original(w))
                .collect(),
        };
        check_output(&plan, synthesized, work.req)?;
        Ok(plan)
    }

    /// The items of the planned request, in order: kept and rewritten messages, synthesized
    /// results, the ledger note and the summary's place.
    fn emit(
        &self,
        dropped: &[bool],
        rewrites: &HashMap<usize, (RewriteKind, String)>,
        ledger_state: &LedgerState,
    ) -> Vec<Item> {
        let (work, cfg, b) = (self.work, self.cfg, self.buckets);
        let notes = &self.notes.ledger;
        let req = work.req;
        let text = ledger::render(&ledger_state.entries);
        // An unchanged note is the caller's own object again, byte for byte.
        let note_item = |w: Option<usize>| -> Option<Item> {
            let text = text.clone()?;
            if let (Some(i), true) = (w.and_then(|w| work.original(w)), notes.len() == 1) {
                if req.message(i).texts.first().map(|t| &**t) == Some(text.as_str()) {
                    return Some(Item::Keep(i));
                }
            }
            Some(Item::LedgerNote {
                text,
                role: ledger_state.role,
            })
        };
        let anchor = match (notes.first(), cfg.pin_first_user_message, b.first_user) {
            (Some(&w), _, _) => w,
            // After the pinned goal, unless the goal is the last message: the request must
            // still end with the turn the model answers.
            (None, true, Some(u)) if u + 1 < work.msgs.len() => u + 1,
            _ => b.prefix_end,
        };
        let summary = cfg.summary_reserve.is_some().then_some(Item::Summary {
            role: ledger_state.role,
        });
        let mut items = Vec::with_capacity(work.msgs.len() + 2);
        for (k, u) in b.all_units.iter().enumerate() {
            for w in u.start..u.end {
                if w == anchor {
                    items.extend(note_item(notes.first().copied()));
                    items.extend(summary.clone());
                }
                if dropped[k] || self.notes.skipped[w] {
                    continue;
                }
                items.push(match (work.original(w), rewrites.get(&w)) {
                    (Some(index), Some((kind, text))) => Item::Rewrite {
                        index,
                        kind: *kind,
                        text: text.clone(),
                    },
                    (Some(i), None) => Item::Keep(i),
                    (None, _) => Item::SynthesizedResult {
                        call_id: work.msgs[w].tool_call_id.clone().unwrap_or_default(),
                    },
                });
            }
        }
        if anchor >= work.msgs.len() {
            items.extend(note_item(None));
            items.extend(summary);
        }
        items
    }
}

/// Defense in depth: the planned request must pair, whatever the stages did.
fn check_output(plan: &Plan, synthesized: &[Message], req: &Request) -> Result<(), CoreError> {
    // Synthesized results for one id are identical, so any of them stands for the item.
    let by_call: HashMap<&str, &Message> = synthesized
        .iter()
        .filter_map(|m| Some((m.tool_call_id.as_deref()?, m)))
        .collect();
    let out: Vec<&Message> = plan
        .items
        .iter()
        .filter_map(|item| match item {
            Item::Keep(i) | Item::Rewrite { index: i, .. } => Some(req.message(*i)),
            Item::SynthesizedResult { call_id } => by_call.get(call_id.as_str()).copied(),
            Item::LedgerNote { .. } | Item::Summary { .. } => None,
        })
        .collect();
    let issues = pairing::validate(&out);
    if issues.is_empty() {
        Ok(())
    } else {
        Err(CoreError::Pairing(issues))
    }
}
