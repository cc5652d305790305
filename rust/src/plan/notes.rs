//! Notes in and out of the plan: the ledger notes and summary notes earlier assemblies wrote,
//! and the side-effect ledger while the stages run (a dropped ring's side-effecting calls
//! become entries of the one ledger note).

use rustc_hash::FxHashSet as HashSet;

use super::{PlanConfig, Work};
use crate::ledger::{self, LedgerEntry};
use crate::request::Request;
use crate::summary;
use crate::units::{Unit, UnitKind};
use crate::view::{Message, Role};

/// The ledger and its note while the loop runs.
#[derive(Clone)]
pub(super) struct LedgerState {
    pub entries: Vec<LedgerEntry>,
    /// Entries already recorded. Call ids may recur in later turns (OpenAI pairs by
    /// adjacency), so an effect is identified by tool, id and arguments together.
    pub seen: HashSet<String>,
    pub added: Vec<LedgerEntry>,
    /// (tool, call id) of entries the execution layer recorded: it knows the effect better
    /// than a dropped ring does, so no second entry is derived for the same call.
    pub recorded: HashSet<(String, String)>,
    pub role: Role,
    pub tokens: u64,
}

impl LedgerState {
    fn note_tokens(entries: &[LedgerEntry], role: Role, req: &Request) -> u64 {
        ledger::render(entries).map_or(0, |text| req.inserted_tokens(&Message::text(role, &text)))
    }

    fn add(&mut self, entry: LedgerEntry, req: &Request) {
        if self
            .recorded
            .contains(&(entry.tool.clone(), entry.call_id.clone()))
        {
            return;
        }
        if self.seen.insert(entry.identity()) {
            self.entries.push(entry.clone());
            self.added.push(entry);
            self.tokens = Self::note_tokens(&self.entries, self.role, req);
        }
    }
}

/// The notes earlier assemblies wrote into the request, and the ledger they start.
pub(super) struct Notes {
    /// Ledger notes: their entries carry over, they stay where they are (merged into one at
    /// the first one's place).
    pub ledger: Vec<usize>,
    /// Summary notes.
    pub summaries: Vec<usize>,
    /// Messages the plan does not keep as such: ledger notes, and summary notes a new summary
    /// replaces.
    pub skipped: Vec<bool>,
    /// The ledger before any drop: earlier notes' entries and the recorded ones.
    pub ledger_state: LedgerState,
    /// Room kept for the summary note the caller will write.
    pub reserve: u64,
}

impl Notes {
    pub fn read(work: &Work<'_, '_>, cfg: &PlanConfig) -> Notes {
        let len = work.msgs.len();
        let req = work.req;
        let mut notes: Vec<usize> = Vec::new();
        let mut ledger_state = LedgerState {
            entries: Vec::new(),
            seen: HashSet::default(),
            added: Vec::new(),
            recorded: HashSet::default(),
            role: work
                .msgs
                .iter()
                .find(|m| m.role.is_instruction())
                .map_or(Role::System, |m| m.role),
            tokens: 0,
        };
        if cfg.pin_side_effect_ledger {
            for (w, msg) in work.msgs.iter().enumerate() {
                if let Some(entries) = ledger::parse(msg) {
                    notes.push(w);
                    for e in entries {
                        if ledger_state.seen.insert(e.identity()) {
                            ledger_state.entries.push(e);
                        }
                    }
                }
            }
            if let Some(&first) = notes.first() {
                ledger_state.role = work.msgs[first].role;
            }
            for e in &cfg.recorded_ledger {
                ledger_state
                    .recorded
                    .insert((e.tool.clone(), e.call_id.clone()));
                if ledger_state.seen.insert(e.identity()) {
                    ledger_state.entries.push(e.clone());
                }
            }
            ledger_state.tokens =
                LedgerState::note_tokens(&ledger_state.entries, ledger_state.role, req);
        }
        // Summary notes an earlier assembly wrote stay where they are, unless a new summary
        // replaces them: then they leave the count, and the reserve stands in for them.
        let summaries: Vec<usize> = (0..len)
            .filter(|&w| !notes.contains(&w) && summary::is_note(work.msgs[w]))
            .collect();
        let mut skipped = vec![false; len];
        for &w in &notes {
            skipped[w] = true;
        }
        if cfg.summary_reserve.is_some() {
            for &w in &summaries {
                skipped[w] = true;
            }
        }
        Notes {
            ledger: notes,
            summaries,
            skipped,
            ledger_state,
            reserve: cfg.summary_reserve.unwrap_or(0),
        }
    }
}

/// Adds the side-effecting calls of a dropped unit to the ledger, with the turn they were
/// made in (the user messages before them).
pub(super) fn record_side_effects(
    u: &Unit,
    work: &Work<'_, '_>,
    cfg: &PlanConfig,
    users: &[usize],
    ledger: &mut LedgerState,
) {
    if u.kind != UnitKind::Ring || !cfg.pin_side_effect_ledger {
        return;
    }
    let turn = u32::try_from(users.partition_point(|&w| w < u.start)).ok();
    for entry in side_effects(&work.msgs[u.start..u.end], cfg, turn) {
        ledger.add(entry, work.req);
    }
}

/// Whether dropping unit `u` can add to the ledger: a ring calling a side-effecting tool,
/// with the ledger on.
pub(super) fn records_side_effects(u: &Unit, work: &Work<'_, '_>, cfg: &PlanConfig) -> bool {
    u.kind == UnitKind::Ring
        && cfg.pin_side_effect_ledger
        && work.msgs[u.start..u.end]
            .iter()
            .flat_map(|m| &m.tool_calls)
            .any(|c| cfg.side_effect_tools.contains(&*c.name))
}

/// Ledger entries for the side-effecting calls of a dropped ring.
fn side_effects(ring: &[&Message], cfg: &PlanConfig, turn: Option<u32>) -> Vec<LedgerEntry> {
    // A ring may carry glued messages around its call (a reasoning item, text after the
    // results), so the calls and results are found by role, not by position.
    let results: Vec<&Message> = ring
        .iter()
        .copied()
        .filter(|m| m.role == Role::Tool)
        .collect();
    ring.iter()
        .flat_map(|m| &m.tool_calls)
        .filter(|c| cfg.side_effect_tools.contains(&*c.name))
        .map(|c| {
            let result = results
                .iter()
                .find(|r| r.tool_call_id.as_deref() == Some(&*c.id));
            let status = match result {
                Some(r) if r.texts.first().is_some_and(|t| super::is_synthesized(t)) => {
                    "not_completed"
                }
                Some(r) if r.is_error => "error",
                _ => "ok",
            };
            LedgerEntry::from_call(
                c,
                status,
                cfg.ledger_fields.get(&*c.name).map(Vec::as_slice),
                turn,
            )
        })
        .collect()
}
