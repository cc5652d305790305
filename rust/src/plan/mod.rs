//! The plan. Splits a counted request into a protected prefix, a middle and a protected suffix
//! (`buckets`), values the units (`valuation`), runs the stages cheapest loss first over the
//! middle until the request fits (`stages`, `cheap`), then, the middle exhausted, degrades the
//! suffix before refusing (`degrade`), and emits the result (`emit`). The result is a plan —
//! which original messages to keep and what to insert — never a rewritten request: the binding
//! hands the caller back its own objects.

use crate::count::chat::REPLY_PRIMING;
use crate::error::{BucketTokens, CoreError};
use crate::ledger::LedgerEntry;
use crate::pairing;
use crate::request::Request;
use crate::rewrite::RewriteKind;
use crate::view::{Message, Role};

mod buckets;
mod cheap;
mod citations;
mod degrade;
mod emit;
mod notes;
mod replay;
mod stages;
mod valuation;
mod work;
use buckets::Buckets;
use cheap::CheapStages;
use emit::Before;
use notes::{record_side_effects, LedgerState, Notes};
use replay::replay;
use stages::Outcome;
use valuation::Valuation;
use work::{build_work, Source, Work};

/// The fixed text of a result synthesized for a call that has none: it states the fact and
/// nothing else (no guess at what the tool would have said).
pub const SYNTHESIZED_RESULT_TEXT: &str = "Tool call was not completed (no result recorded).";

/// A stage. Each runs only while the request is over budget, oldest unit first. The first
/// three rewrite a middle message and keep it; the others drop whole units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// An older result of a read (same tool, same arguments) whose newer result is still in
    /// the view becomes a one-line stub.
    DedupeSupersededReads,
    /// A tool result over `max_tool_result_tokens` keeps its head and tail and an anchor to
    /// recover the rest.
    TruncateOversizedResults,
    /// Images become a placeholder text.
    DegradeMedia,
    /// Whole tool rings of the middle, except short error rings held back for later (and,
    /// while `DropReferencedRings` is a stage, referenced rings).
    DropRings,
    /// Plain middle turns, first in first out (while `DropCitingTurns` is a stage, those that
    /// cite no identifier of an earlier result).
    DropPlainTurns,
    /// Middle rings one of whose results holds an identifier a later message repeats
    /// (`citations`), left by `DropRings`.
    DropReferencedRings,
    /// Plain middle turns that repeat an identifier of an earlier result, left by
    /// `DropPlainTurns`.
    DropCitingTurns,
    /// The short error rings held back by `DropRings`.
    DropErrorRings,
    /// Once the middle is exhausted: oversized results of the protected suffix cut like the
    /// middle's, oldest ring first; the newest ring last, never below `min_result_tokens`.
    TruncateProtectedResults,
    /// Once the middle is exhausted: `recent_tool_rings` and `recent_user_turns` lowered one
    /// step at a time down to their floors; the units released go through the middle's
    /// stages.
    ShrinkRecent,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::DropRings => "drop_rings",
            Stage::DropPlainTurns => "drop_plain_turns",
            Stage::DropErrorRings => "drop_error_rings",
            Stage::DropReferencedRings => "drop_referenced_rings",
            Stage::DropCitingTurns => "drop_citing_turns",
            Stage::DedupeSupersededReads => "dedupe_superseded_reads",
            Stage::TruncateOversizedResults => "truncate_oversized_results",
            Stage::DegradeMedia => "degrade_media",
            Stage::TruncateProtectedResults => "truncate_protected_results",
            Stage::ShrinkRecent => "shrink_recent",
        }
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::DEFAULT_ORDER.into_iter().find(|s| s.name() == name)
    }

    /// Whether the stage degrades the protected part: it runs only once the middle's stages
    /// have all run, whatever its place in the list.
    pub fn degrades(self) -> bool {
        matches!(self, Stage::TruncateProtectedResults | Stage::ShrinkRecent)
    }

    /// Whether the stage rewrites middle messages rather than dropping units.
    pub fn rewrites(self) -> Option<RewriteKind> {
        match self {
            Stage::DedupeSupersededReads => Some(RewriteKind::Deduped),
            Stage::TruncateOversizedResults => Some(RewriteKind::Truncated),
            Stage::DegradeMedia => Some(RewriteKind::Media),
            _ => None,
        }
    }

    /// Cheapest loss first: a duplicate read loses nothing, a cut result keeps its ends and a
    /// way back, an image placeholder keeps the text; only then whole units go, those no
    /// later turn builds on before those it does. Only then, before refusing, the protected
    /// suffix degrades: cut results first, then fewer recent rings and turns.
    pub const DEFAULT_ORDER: [Stage; 10] = [
        Stage::DedupeSupersededReads,
        Stage::TruncateOversizedResults,
        Stage::DegradeMedia,
        Stage::DropRings,
        Stage::DropPlainTurns,
        Stage::DropReferencedRings,
        Stage::DropCitingTurns,
        Stage::DropErrorRings,
        Stage::TruncateProtectedResults,
        Stage::ShrinkRecent,
    ];
}

/// Everything the stage loop needs to know about the caller's policy.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    pub budget: u64,
    pub recent_tool_rings: usize,
    pub recent_user_turns: usize,
    pub pin_first_user_message: bool,
    pub pin_side_effect_ledger: bool,
    /// Pin every system/developer message wherever it stands, not only the leading ones.
    pub pin_security_system_prompt: bool,
    /// A ring whose results are all errors and together at most this many tokens is held back
    /// until `DropErrorRings`: short failures teach the model what not to retry.
    pub short_error_result_tokens: u64,
    /// At most this many such rings (the most recent) are held back.
    pub max_held_error_rings: usize,
    pub side_effect_tools: std::collections::HashSet<String>,
    /// Which arguments identify a side effect, per tool (all arguments otherwise).
    pub ledger_fields: std::collections::HashMap<String, Vec<String>>,
    pub stages: Vec<Stage>,
    /// When even the protected part does not fit, drop the tools schema before failing.
    pub drop_tools_schema: bool,
    /// Repair calls that have no result with a synthesized error result (never other issues).
    pub synthesize_missing_results: bool,
    /// Middle tool results over this many tokens are cut by `TruncateOversizedResults`, and
    /// protected ones by `TruncateProtectedResults`.
    pub max_tool_result_tokens: u64,
    /// `TruncateProtectedResults` never cuts a result of the newest ring below this.
    pub min_result_tokens: u64,
    /// `ShrinkRecent` lowers `recent_tool_rings` no further than this.
    pub min_recent_tool_rings: usize,
    /// `ShrinkRecent` lowers `recent_user_turns` no further than this.
    pub min_recent_user_turns: usize,
    /// Room to keep for a summary note the caller will write: earlier summary notes are then
    /// left out (the new one replaces them) and `Item::Summary` marks the place.
    pub summary_reserve: Option<u64>,
    /// Entries the execution layer recorded, rendered in the note whatever was dropped.
    pub recorded_ledger: Vec<LedgerEntry>,
    /// A previous plan's decisions to make again instead of running the stages.
    pub replay: Option<Replay>,
}

/// What an earlier plan decided about the messages it saw, to be decided the same way again
/// (cache-stable assembly): the caller's messages it dropped and those it rewrote. Messages
/// after them are kept. The budget is not checked: the caller compares the total with its
/// trigger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    pub dropped: Vec<usize>,
    pub rewrites: Vec<(usize, RewriteKind)>,
}

/// How canonical messages map onto a provider's native items, for providers whose items do not
/// map one to one: `groups[i]` is the native item of message `i` (non-decreasing), and
/// `binds_next[i]` keeps message `i` in the same unit as the next one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub groups: Vec<usize>,
    pub binds_next: Vec<bool>,
    /// Whether a tool result carries its call's name and an error result reads as
    /// `Error: text` (Gemini): a result synthesized for a call is counted so, as the provider
    /// reads back what the adapter writes.
    pub results_named: bool,
}

impl Layout {
    fn check(&self, n: usize) -> Result<(), CoreError> {
        let fail = |reason: &str| {
            Err(CoreError::InvalidMessage {
                index: None,
                reason: format!("layout: {reason}"),
            })
        };
        if self.groups.len() != n || self.binds_next.len() != n {
            return fail("groups and binds_next need one entry per message");
        }
        if self.groups.windows(2).any(|w| w[0] > w[1]) {
            return fail("groups must not decrease");
        }
        Ok(())
    }
}

/// One element of the planned request, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The caller's message at this index, unchanged.
    Keep(usize),
    /// A synthesized error result for `call_id` (text `SYNTHESIZED_RESULT_TEXT`).
    SynthesizedResult { call_id: String },
    /// The side-effect ledger note, as an instruction message of `role`.
    LedgerNote { text: String, role: Role },
    /// Where the summary note goes (its room is reserved: `PlanConfig::summary_reserve`).
    Summary { role: Role },
    /// The caller's message at this index with its content rewritten by a cheap stage.
    Rewrite {
        index: usize,
        kind: RewriteKind,
        text: String,
    },
}

/// A run of the caller's messages, `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// One message a cheap stage rewrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewriteReport {
    pub index: usize,
    pub kind: RewriteKind,
    pub tokens_saved: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageReport {
    pub stage: &'static str,
    pub units: usize,
    pub tokens_saved: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub items: Vec<Item>,
    /// Tokens of the request as given; an estimate when `tokens_before_exact` is false
    /// (units certainly dropped are sized from their bytes at a sampled rate, not tokenized).
    pub tokens_before: u64,
    pub tokens_before_exact: bool,
    pub tokens_after: u64,
    pub budget: u64,
    pub dropped_rings: Vec<Span>,
    pub dropped_turns: Vec<Span>,
    pub stages: Vec<StageReport>,
    /// Call ids that received a synthesized result.
    pub repairs: Vec<String>,
    /// Ledger entries this assembly added.
    pub ledger_added: Vec<LedgerEntry>,
    /// Entries in the ledger note of the planned request.
    pub ledger_entries: usize,
    pub buckets: BucketTokens,
    pub tools_dropped: bool,
    /// Messages kept with rewritten content, in order.
    pub rewrites: Vec<RewriteReport>,
    /// Indices of the summary notes earlier assemblies wrote.
    pub summary_notes: Vec<usize>,
}

/// What every step of the plan reads: the working view, the policy, the buckets, the notes
/// and the cheap stages' candidates.
struct Planning<'p, 'r, 'a> {
    work: &'p Work<'r, 'a>,
    cfg: &'p PlanConfig,
    buckets: &'p Buckets,
    notes: &'p Notes,
    cheap: &'p CheapStages,
    /// Reply priming, once per request.
    framing: u64,
}

impl Planning<'_, '_, '_> {
    /// Tokens of a request keeping `messages_kept` tokens of messages, with this ledger note
    /// and tools schema.
    fn total(&self, messages_kept: u64, ledger: &LedgerState, tools: u64) -> u64 {
        messages_kept + ledger.tokens + self.framing + tools + self.notes.reserve
    }
}

/// Plans the request: validates pairing, then drops middle units until it fits `cfg.budget`.
pub fn plan(
    req: &Request,
    cfg: &PlanConfig,
    pinned: &[usize],
    layout: Option<&Layout>,
) -> Result<Plan, CoreError> {
    check_input(req, pinned, layout)?;
    let repairs = repairs(req, cfg)?;
    let named = layout.is_some_and(|l| l.results_named);
    let synthesized: Vec<Message> = repairs.iter().map(|r| synthesized(req, r, named)).collect();
    let work = build_work(req, &synthesized, &repairs);
    let notes = Notes::read(&work, cfg);
    let buckets = Buckets::split(&work, cfg, pinned, layout, &notes);
    let cheap = CheapStages::find(
        &work,
        cfg,
        &buckets.unit_of,
        &buckets.protected,
        &notes.skipped,
    );
    let p = Planning {
        work: &work,
        cfg,
        buckets: &buckets,
        notes: &notes,
        cheap: &cheap,
        framing: u64::from(REPLY_PRIMING),
    };
    let valuation = match &cfg.replay {
        None => p.values(true),
        Some(r) => p.replay_values(r),
    };
    let (tokens, exact) = p.tokens_before(&valuation);
    let mut outcome = match &cfg.replay {
        Some(r) => replay(r, &p, &valuation)?,
        None => p.run(cfg.budget, &valuation),
    };
    let fits = cfg.replay.is_some() || p.now(&outcome) <= cfg.budget;
    if !fits {
        // Describe the smallest request the policy allows, not wherever the sequence ended:
        // count everything exactly (a failure is rare) and walk again to that point.
        let valuation = p.values(false);
        let least = p.run(cfg.budget, &valuation).least;
        outcome = p.run(least, &valuation);
    }
    p.finish(
        outcome,
        fits,
        Before { tokens, exact },
        &repairs,
        &synthesized,
    )
}

fn check_input(req: &Request, pinned: &[usize], layout: Option<&Layout>) -> Result<(), CoreError> {
    if let Some(layout) = layout {
        layout.check(req.len())?;
    }
    let n = req.len();
    if let Some(&bad) = pinned.iter().find(|&&i| i >= n) {
        return Err(CoreError::InvalidMessage {
            index: None,
            reason: format!("pinned index {bad} is out of range for {n} messages"),
        });
    }
    Ok(())
}

/// Whether a tool result's text is one synthesized for a call that had none, as written or as
/// a provider that reads errors as `Error: text` reads it back.
pub fn is_synthesized(text: &str) -> bool {
    text.strip_prefix("Error: ").unwrap_or(text) == SYNTHESIZED_RESULT_TEXT
}

/// The result synthesized for the call `repair` answers, as the provider reads back what its
/// adapter writes (`named`: under the call's name, the error read as `Error: text`).
fn synthesized(req: &Request, repair: &pairing::Repair, named: bool) -> Message {
    if !named {
        return Message::tool_result(&repair.call_id, SYNTHESIZED_RESULT_TEXT, true);
    }
    let name = (0..repair.at.min(req.len())).rev().find_map(|i| {
        req.message(i)
            .tool_calls
            .iter()
            .find(|c| *c.id == *repair.call_id)
            .map(|c| c.name.to_string())
    });
    let text = crate::view::error_text(SYNTHESIZED_RESULT_TEXT.to_owned());
    Message {
        name,
        framed_as: Some(crate::view::Framed::Error),
        ..Message::tool_result(&repair.call_id, &text, true)
    }
}

/// The synthesized results to insert, if the policy allows repairing what does not pair.
fn repairs(req: &Request, cfg: &PlanConfig) -> Result<Vec<pairing::Repair>, CoreError> {
    let messages = req.messages();
    let issues = pairing::validate(&messages);
    if issues.is_empty() {
        Ok(Vec::new())
    } else if !cfg.synthesize_missing_results {
        Err(CoreError::Pairing(issues))
    } else {
        pairing::repairs_for(&messages, &issues).ok_or(CoreError::Pairing(issues))
    }
}

#[cfg(test)]
mod citations_tests;
#[cfg(test)]
mod degrade_tests;
#[cfg(test)]
pub(crate) mod tests;
