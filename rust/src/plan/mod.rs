//! The stage loop. Splits a counted request into a protected prefix, a middle and a protected
//! suffix, then runs the drop stages (cheapest loss first) over the middle only until the
//! request fits the budget. The result is a plan — which original messages to keep and what to
//! insert — never a rewritten request: the binding hands the caller back its own objects.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::count::chat::REPLY_PRIMING;
use crate::error::{BucketTokens, CoreError};
use crate::ledger::{self, LedgerEntry};
use crate::pairing;
use crate::request::Request;
use crate::rewrite::RewriteKind;
use crate::summary;
use crate::units::{units, units_glued, Unit, UnitKind};

use crate::view::{Message, Role};

mod cheap;
mod replay;
use cheap::CheapStages;
use replay::{replay, Replaying};

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
    /// Whole tool rings of the middle, except short error rings held back for later.
    DropRings,
    /// Plain middle turns, first in first out.
    DropPlainTurns,
    /// The short error rings held back by `DropRings`.
    DropErrorRings,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::DropRings => "drop_rings",
            Stage::DropPlainTurns => "drop_plain_turns",
            Stage::DropErrorRings => "drop_error_rings",
            Stage::DedupeSupersededReads => "dedupe_superseded_reads",
            Stage::TruncateOversizedResults => "truncate_oversized_results",
            Stage::DegradeMedia => "degrade_media",
        }
    }

    pub fn from_name(name: &str) -> Option<Stage> {
        Stage::DEFAULT_ORDER.into_iter().find(|s| s.name() == name)
    }

    /// Whether the stage rewrites messages rather than dropping units.
    pub fn rewrites(self) -> Option<RewriteKind> {
        match self {
            Stage::DedupeSupersededReads => Some(RewriteKind::Deduped),
            Stage::TruncateOversizedResults => Some(RewriteKind::Truncated),
            Stage::DegradeMedia => Some(RewriteKind::Media),
            _ => None,
        }
    }

    /// Cheapest loss first: a duplicate read loses nothing, a cut result keeps its ends and a
    /// way back, an image placeholder keeps the text; only then whole units go.
    pub const DEFAULT_ORDER: [Stage; 6] = [
        Stage::DedupeSupersededReads,
        Stage::TruncateOversizedResults,
        Stage::DegradeMedia,
        Stage::DropRings,
        Stage::DropPlainTurns,
        Stage::DropErrorRings,
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
    /// Middle tool results over this many tokens are cut by `TruncateOversizedResults`.
    pub max_tool_result_tokens: u64,
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
    /// Tokens of the request as given; an upper bound when `tokens_before_exact` is false
    /// (units certainly dropped are sized from their bytes, not tokenized).
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

/// Where a message of the working view comes from.
#[derive(Clone, Copy)]
enum Source {
    Original(usize),
    Synthesized,
}

/// The request with repairs applied: what the stages see. Tokens of original messages are
/// counted only when asked for; synthesized results are counted up front (they are few).
struct Work<'r, 'a> {
    req: &'r Request<'a>,
    msgs: Vec<&'r Message>,
    source: Vec<Source>,
    synthesized_tokens: Vec<u64>,
}

impl Work<'_, '_> {
    fn tokens(&self, w: usize) -> u64 {
        match self.source[w] {
            Source::Original(i) => u64::from(self.req.tokens(i)),
            Source::Synthesized => self.synthesized_tokens[w],
        }
    }

    /// `Some(tokens(w))` when it is at most `limit`, found without counting much past it.
    fn tokens_within(&self, w: usize, limit: u64) -> Option<u64> {
        match self.source[w] {
            Source::Original(i) => self.req.tokens_within(i, limit).map(u64::from),
            Source::Synthesized => Some(self.synthesized_tokens[w]).filter(|&t| t <= limit),
        }
    }

    /// Message `w` with every text.
    fn full(&self, w: usize) -> std::borrow::Cow<'_, Message> {
        match self.source[w] {
            Source::Original(i) => self.req.full(i),
            Source::Synthesized => std::borrow::Cow::Borrowed(self.msgs[w]),
        }
    }

    /// An upper bound of `tokens(w)` that tokenizes nothing.
    fn bound(&self, w: usize) -> u64 {
        match self.source[w] {
            Source::Original(i) => u64::from(self.req.bound(i)),
            Source::Synthesized => self.synthesized_tokens[w],
        }
    }
}

fn build_work<'r, 'a>(
    req: &'r Request<'a>,
    synthesized: &'r [Message],
    repairs: &[pairing::Repair],
) -> Work<'r, 'a> {
    let n = req.len();
    let cap = n + synthesized.len();
    let mut work = Work {
        req,
        msgs: Vec::with_capacity(cap),
        source: Vec::with_capacity(cap),
        synthesized_tokens: Vec::with_capacity(cap),
    };
    let mut next = 0;
    for i in 0..=n {
        while next < repairs.len() && repairs[next].at == i {
            work.msgs.push(&synthesized[next]);
            work.source.push(Source::Synthesized);
            work.synthesized_tokens
                .push(req.inserted_tokens(&synthesized[next]));
            next += 1;
        }
        if i < n {
            work.msgs.push(req.message(i));
            work.source.push(Source::Original(i));
            work.synthesized_tokens.push(0);
        }
    }
    work
}

/// Where one walk of the stages ended.
struct Outcome {
    dropped: Vec<bool>,
    /// Tokens of each unit now, after the rewrites of its messages.
    unit_now: Vec<u64>,
    /// Per message: the rewrite applied and the tokens it saved.
    rewritten: Vec<Option<(RewriteKind, u64)>>,
    ledger: LedgerState,
    messages_kept: u64,
    tools_tokens: u64,
    stages: Vec<StageReport>,
    /// The smallest total seen along the way.
    least: u64,
}

/// The ledger and its note while the loop runs.
#[derive(Clone)]
struct LedgerState {
    entries: Vec<LedgerEntry>,
    /// Entries already recorded. Call ids may recur in later turns (OpenAI pairs by
    /// adjacency), so an effect is identified by tool, id and arguments together.
    seen: HashSet<String>,
    added: Vec<LedgerEntry>,
    /// (tool, call id) of entries the execution layer recorded: it knows the effect better
    /// than a dropped ring does, so no second entry is derived for the same call.
    recorded: HashSet<(String, String)>,
    role: Role,
    tokens: u64,
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

/// Plans the request: validates pairing, then drops middle units until it fits `cfg.budget`.
pub fn plan(
    req: &Request,
    cfg: &PlanConfig,
    pinned: &[usize],
    layout: Option<&Layout>,
) -> Result<Plan, CoreError> {
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

    let messages = req.messages();
    let issues = pairing::validate(&messages);
    let repairs = if issues.is_empty() {
        Vec::new()
    } else if !cfg.synthesize_missing_results {
        return Err(CoreError::Pairing(issues));
    } else {
        pairing::repairs_for(&messages, &issues).ok_or(CoreError::Pairing(issues))?
    };
    let synthesized: Vec<Message> = repairs
        .iter()
        .map(|r| Message::tool_result(&r.call_id, SYNTHESIZED_RESULT_TEXT, true))
        .collect();
    let work = build_work(req, &synthesized, &repairs);
    let len = work.msgs.len();
    let mut original_to_work: HashMap<usize, usize> =
        HashMap::with_capacity_and_hasher(len, Default::default());
    original_to_work.extend(work.source.iter().enumerate().filter_map(|(w, s)| match s {
        Source::Original(i) => Some((*i, w)),
        Source::Synthesized => None,
    }));

    // Notes an earlier assembly wrote: their entries carry over, they stay where they are.
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
    let reserve = cfg.summary_reserve.unwrap_or(0);
    let is_note: Vec<bool> = {
        let mut v = vec![false; len];
        for &w in &notes {
            v[w] = true;
        }
        if cfg.summary_reserve.is_some() {
            for &w in &summaries {
                v[w] = true;
            }
        }
        v
    };

    // Protection.
    let prefix_end = work
        .msgs
        .iter()
        .position(|m| !m.role.is_instruction())
        .unwrap_or(len);
    let first_user = work.msgs.iter().position(|m| m.role == Role::User);
    let mut pin = vec![false; len];
    pin[..prefix_end].fill(true);
    for &w in notes.iter().chain(&summaries) {
        pin[w] = true;
    }
    if cfg.pin_first_user_message {
        if let Some(w) = first_user {
            pin[w] = true;
        }
    }
    if cfg.pin_security_system_prompt {
        for (w, m) in work.msgs.iter().enumerate() {
            if m.role.is_instruction() {
                pin[w] = true;
            }
        }
    }
    for &i in pinned {
        pin[original_to_work[&i]] = true;
    }
    // The latest user messages are pinned where they stand rather than opening the suffix:
    // in an agent loop the last user message may sit hundreds of rings back, and a suffix
    // starting there would leave nothing to trim.
    let users: Vec<usize> = (0..len)
        .filter(|&w| work.msgs[w].role == Role::User)
        .collect();
    for &w in &users[users.len().saturating_sub(cfg.recent_user_turns)..] {
        pin[w] = true;
    }

    let all_units = match layout {
        None => units(&work.msgs),
        Some(layout) => {
            // A synthesized result belongs to the native item of the message before it.
            let mut group = Vec::with_capacity(len);
            let mut binds = Vec::with_capacity(len);
            for w in 0..len {
                match work.source[w] {
                    Source::Original(i) => {
                        group.push(layout.groups[i]);
                        binds.push(layout.binds_next[i]);
                    }
                    Source::Synthesized => {
                        group.push(group.last().copied().unwrap_or(0));
                        binds.push(false);
                    }
                }
            }
            units_glued(&work.msgs, |w| binds[w] || group[w] == group[w + 1])
        }
    };
    let suffix_start = suffix_start(&all_units, cfg);
    let unit_tokens = |u: &Unit| -> u64 {
        (u.start..u.end)
            .filter(|&w| !is_note[w])
            .map(|w| work.tokens(w))
            .sum()
    };
    let unit_bound = |u: &Unit| -> u64 {
        (u.start..u.end)
            .filter(|&w| !is_note[w])
            .map(|w| work.bound(w))
            .sum()
    };
    let protected: Vec<bool> = all_units
        .iter()
        .map(|u| u.start >= suffix_start || (u.start..u.end).any(|w| pin[w]))
        .collect();

    // Candidates per stage, oldest first.
    let error_ring = |u: &Unit| -> bool {
        let results = || (u.start..u.end).filter(|&w| work.msgs[w].role == Role::Tool);
        u.kind == UnitKind::Ring
            && results().all(|w| work.msgs[w].is_error)
            && results().map(|w| work.tokens(w)).sum::<u64>() <= cfg.short_error_result_tokens
    };
    let middle: Vec<usize> = (0..all_units.len()).filter(|&k| !protected[k]).collect();
    let mut held: Vec<usize> = middle
        .iter()
        .copied()
        .filter(|&k| error_ring(&all_units[k]))
        .collect();
    held.drain(..held.len().saturating_sub(cfg.max_held_error_rings));
    let held_set: HashSet<usize> = held.iter().copied().collect();
    let candidates = |stage: Stage| -> Vec<usize> {
        match stage {
            Stage::DropRings => middle
                .iter()
                .copied()
                .filter(|k| all_units[*k].kind == UnitKind::Ring && !held_set.contains(k))
                .collect(),
            Stage::DropPlainTurns => middle
                .iter()
                .copied()
                .filter(|k| all_units[*k].kind == UnitKind::Plain)
                .collect(),
            Stage::DropErrorRings => held.clone(),
            _ => Vec::new(),
        }
    };

    let mut unit_of = vec![0usize; len];
    for (k, u) in all_units.iter().enumerate() {
        unit_of[u.start..u.end].fill(k);
    }
    let cheap = CheapStages::find(&work, cfg, &unit_of, &protected, &is_note);
    let planned = |kind: RewriteKind, w: usize| cheap.planned(kind, w, &work, cfg);
    // The fewest tokens unit `u` can keep after the cheap stages (a message one may rewrite
    // counts as its floor, or as itself when smaller), if at most `limit`: a unit that cannot
    // fit is found out after about `limit` tokens of counting, and a huge result that could be
    // cut is counted only up to the cut's size.
    let unit_least_within = |u: &Unit, limit: u64| -> Option<u64> {
        let mut sum = 0;
        for w in (u.start..u.end).filter(|&w| !is_note[w]) {
            let room = limit - sum;
            sum += match cheap.floor(w) {
                Some(0) => 0,
                // Its fewest is the floor or itself, whichever is smaller; past the room,
                // either way it cannot fit.
                Some(floor) => match work.tokens_within(w, floor.min(room)) {
                    Some(tokens) => tokens,
                    None if floor <= room => floor,
                    None => return None,
                },
                None => work.tokens_within(w, room)?,
            };
            if sum > limit {
                return None;
            }
        }
        Some(sum)
    };

    let framing = u64::from(REPLY_PRIMING);
    let total = |messages_kept: u64, ledger: &LedgerState, tools: u64| {
        messages_kept + ledger.tokens + framing + tools + reserve
    };

    // Tokens of each unit. Exact counts are needed only where the decision can fall: walking
    // the drop sequence back from its end, once the kept units alone overflow the budget,
    // every earlier unit of the sequence is certainly dropped, and its size bound (from bytes,
    // no tokenizing) serves. So the cost of counting grows with the budget, not the history.
    let sequence: Vec<usize> = {
        let mut seen = HashSet::default();
        cfg.stages
            .iter()
            .flat_map(|&stage| candidates(stage))
            .filter(|k| seen.insert(*k))
            .collect()
    };
    // A cheap stage may shrink a unit before the drops reach it, so the walk back sums what
    // each unit could shrink to (its messages that a cheap stage could rewrite taken at their
    // floor). Certainly dropped units are not worth rewriting either: `certain` marks them.
    let values = |lazy: bool| -> (Vec<u64>, Vec<bool>) {
        let in_sequence: HashSet<usize> = sequence.iter().copied().collect();
        let mut value = vec![0u64; all_units.len()];
        let mut is_certain = vec![false; all_units.len()];
        let mut fixed = framing + reserve;
        for (k, u) in all_units.iter().enumerate() {
            if !in_sequence.contains(&k) {
                value[k] = unit_tokens(u);
                fixed += value[k] - cheap.shrinkable(u, |w| work.tokens(w));
            }
        }
        let mut tail = 0u64;
        let mut certain = 0;
        for (j, &k) in sequence.iter().enumerate().rev() {
            let u = &all_units[k];
            if !lazy {
                value[k] = unit_tokens(u);
                continue;
            }
            // A unit that cannot fit the room left even at its fewest tokens is certainly
            // dropped (keeping it means keeping everything after it), and so is every unit
            // before it: their bounds serve.
            let room = cfg.budget.saturating_sub(fixed + tail);
            let Some(least) = unit_least_within(u, room) else {
                certain = j + 1;
                break;
            };
            value[k] = if cheap.shrinks(u) {
                unit_tokens(u)
            } else {
                least
            };
            tail += least;
        }
        for &k in &sequence[..certain] {
            value[k] = unit_bound(&all_units[k]);
            is_certain[k] = true;
        }
        (value, is_certain)
    };
    // A replay decides nothing: every kept unit is counted, the dropped ones are bounded.
    let (mut unit_value, mut certain) = match &cfg.replay {
        None => values(true),
        Some(r) => {
            let gone: HashSet<usize> = r.dropped.iter().copied().collect();
            let value = all_units
                .iter()
                .map(|u| {
                    let dropped = (u.start..u.end).any(
                        |w| matches!(work.source[w], Source::Original(i) if gone.contains(&i)),
                    );
                    if dropped {
                        unit_bound(u)
                    } else {
                        unit_tokens(u)
                    }
                })
                .collect();
            (value, vec![false; all_units.len()])
        }
    };
    let messages_total: u64 = unit_value.iter().sum();
    // As given: repairs are not part of the input, earlier ledger notes are.
    let synthesized_total: u64 = work.synthesized_tokens.iter().sum();
    let notes_total: u64 = (0..len)
        .filter(|&w| is_note[w])
        .map(|w| work.tokens(w))
        .sum();
    let tokens_before =
        messages_total - synthesized_total + notes_total + framing + req.tools_tokens;
    let tokens_before_exact = (0..len).all(|w| match work.source[w] {
        Source::Original(i) => req.is_counted(i),
        Source::Synthesized => true,
    });

    // The drop sequence is fixed; `run` walks it until the request fits `budget`. A ledger note
    // can grow by more than a small ring saves, so the total is not monotone along the
    // sequence: `least` remembers the smallest total seen, the budget that a failed run
    // reports as needed.
    let run = |budget: u64, unit_value: &[u64], certain: &[bool]| -> Outcome {
        let mut out = Outcome {
            dropped: vec![false; all_units.len()],
            unit_now: unit_value.to_vec(),
            rewritten: vec![None; len],
            ledger: ledger_state.clone(),
            messages_kept: unit_value.iter().sum(),
            tools_tokens: req.tools_tokens,
            stages: Vec::new(),
            least: 0,
        };
        let now = |o: &Outcome| total(o.messages_kept, &o.ledger, o.tools_tokens);
        out.least = now(&out);
        for &stage in &cfg.stages {
            if now(&out) <= budget {
                break;
            }
            let before = now(&out);
            let mut count = 0;
            // What rewrites had saved in units this stage then dropped: the stage's saving is
            // the units' full size, as if they had never been rewritten.
            let mut restored = 0;
            if let Some(kind) = stage.rewrites() {
                for &w in cheap.candidates(kind) {
                    if now(&out) <= budget {
                        break;
                    }
                    let k = unit_of[w];
                    if out.dropped[k] || certain[k] || out.rewritten[w].is_some() {
                        continue;
                    }
                    let Some(tokens) = planned(kind, w) else {
                        continue;
                    };
                    let saved = work.tokens(w) - tokens;
                    out.rewritten[w] = Some((kind, saved));
                    out.unit_now[k] -= saved;
                    out.messages_kept -= saved;
                    count += 1;
                    out.least = out.least.min(now(&out));
                }
            }
            for k in candidates(stage) {
                if now(&out) <= budget {
                    break;
                }
                if out.dropped[k] {
                    continue;
                }
                let u = &all_units[k];
                out.dropped[k] = true;
                count += 1;
                out.messages_kept -= out.unit_now[k];
                restored += unit_value[k] - out.unit_now[k];
                record_side_effects(u, &work, cfg, &users, &mut out.ledger);
                out.least = out.least.min(now(&out));
            }
            if count > 0 {
                out.stages.push(StageReport {
                    stage: stage.name(),
                    units: count,
                    tokens_saved: (before + restored).saturating_sub(now(&out)),
                });
            }
        }
        if now(&out) > budget && cfg.drop_tools_schema && out.tools_tokens > 0 {
            out.stages.push(StageReport {
                stage: "drop_tools_schema",
                units: 1,
                tokens_saved: out.tools_tokens,
            });
            out.tools_tokens = 0;
            out.least = out.least.min(now(&out));
        }
        out
    };

    let replayed = cfg.replay.as_ref().map(|r| {
        replay(
            r,
            &Replaying {
                work: &work,
                all_units: &all_units,
                protected: &protected,
                unit_of: &unit_of,
                unit_value: &unit_value,
                original_to_work: &original_to_work,
                users: &users,
                cheap: &cheap,
                cfg,
            },
            ledger_state.clone(),
            req,
        )
    });
    let mut outcome = match replayed {
        Some(outcome) => outcome?,
        None => run(cfg.budget, &unit_value, &certain),
    };
    let fits = cfg.replay.is_some()
        || total(outcome.messages_kept, &outcome.ledger, outcome.tools_tokens) <= cfg.budget;
    if !fits {
        // Describe the smallest request the policy allows, not wherever the sequence ended:
        // count everything exactly (a failure is rare) and walk again to that point.
        (unit_value, certain) = values(false);
        let least = run(cfg.budget, &unit_value, &certain).least;
        outcome = run(least, &unit_value, &certain);
    }
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
    // Rewrites of units dropped later count for the drop, not for the cheap stage. Kept ones
    // are made now, and a cut result's exact size (at most the planned limit) replaces the
    // plan's.
    let mut kept_rewrites: Vec<(usize, RewriteKind, u64)> = Vec::new();
    let mut rewrites: HashMap<usize, (RewriteKind, String)> = HashMap::default();
    for w in (0..len).filter(|&w| fits && !dropped[unit_of[w]]) {
        let Some((kind, saved)) = rewritten[w] else {
            continue;
        };
        let Some(done) = cheap.rewrite(kind, w, &work, cfg) else {
            return Err(CoreError::InvalidMessage {
                index: original_index(&work, w),
                reason: "a planned rewrite could not be made".into(),
            });
        };
        let slack = (work.tokens(w) - saved).saturating_sub(done.tokens);
        messages_kept -= slack;
        unit_now[unit_of[w]] -= slack;
        kept_rewrites.push((w, kind, saved + slack));
        rewrites.insert(w, (kind, done.text.clone()));
    }
    stage_reports.retain_mut(|report| {
        let Some(kind) = Stage::from_name(report.stage).and_then(Stage::rewrites) else {
            return true;
        };
        let mine = kept_rewrites.iter().filter(|r| r.1 == kind);
        report.units = mine.clone().count();
        report.tokens_saved = mine.map(|r| r.2).sum();
        report.units > 0
    });
    let tools_dropped = tools_tokens == 0 && req.tools_tokens > 0;
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
        insertions: ledger_state.tokens + reserve,
        framing,
        ..BucketTokens::default()
    };
    for (k, u) in all_units.iter().enumerate() {
        if dropped[k] {
            continue;
        }
        let t = unit_now[k];
        if u.start >= suffix_start {
            buckets.suffix += t;
        } else if protected[k] {
            buckets.prefix += t;
        } else {
            buckets.middle += t;
        }
    }
    let tokens_after = total(messages_kept, &ledger_state, tools_tokens);
    if !fits {
        return Err(CoreError::BudgetExceeded {
            tokens: tokens_after,
            budget: cfg.budget,
            buckets,
        });
    }

    let items = emit(
        &work,
        &all_units,
        &dropped,
        &Notes {
            ledger: &notes,
            skipped: &is_note,
            rewrites: &rewrites,
            summary: cfg.summary_reserve.is_some(),
        },
        &ledger_state,
        req,
        cfg,
        first_user,
        prefix_end,
    );
    let original = |w: usize| match work.source[w] {
        Source::Original(i) => i,
        Source::Synthesized => unreachable!("only the caller's messages are rewritten"),
    };
    let spans = |kind: UnitKind| -> Vec<Span> {
        all_units
            .iter()
            .zip(&dropped)
            .filter(|(u, &d)| d && u.kind == kind)
            .filter_map(|(u, _)| original_span(&work, u))
            .collect()
    };
    let plan = Plan {
        tokens_before,
        tokens_before_exact,
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
            .map(|&(w, kind, tokens_saved)| RewriteReport {
                index: original(w),
                kind,
                tokens_saved,
            })
            .collect(),
        summary_notes: summaries
            .iter()
            .filter_map(|&w| match work.source[w] {
                Source::Original(i) => Some(i),
                Source::Synthesized => None,
            })
            .collect(),
    };
    check_output(&plan, &synthesized, req)?;
    Ok(plan)
}

/// Start of the protected suffix: the earliest of the last `recent_tool_rings` rings and the
/// last unit (the current turn is never dropped).
fn suffix_start(all_units: &[Unit], cfg: &PlanConfig) -> usize {
    let last = all_units.last().map_or(0, |u| u.start);
    let rings: Vec<&Unit> = all_units
        .iter()
        .filter(|u| u.kind == UnitKind::Ring)
        .collect();
    if cfg.recent_tool_rings == 0 || rings.is_empty() {
        return last;
    }
    last.min(rings[rings.len().saturating_sub(cfg.recent_tool_rings)].start)
}

/// Adds the side-effecting calls of a dropped unit to the ledger, with the turn they were
/// made in (the user messages before them).
fn record_side_effects(
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
        .filter(|c| cfg.side_effect_tools.contains(&c.name))
        .map(|c| {
            let result = results
                .iter()
                .find(|r| r.tool_call_id.as_deref() == Some(c.id.as_str()));
            let status = match result {
                Some(r) if r.texts.first().map(String::as_str) == Some(SYNTHESIZED_RESULT_TEXT) => {
                    "not_completed"
                }
                Some(r) if r.is_error => "error",
                _ => "ok",
            };
            LedgerEntry::from_call(
                c,
                status,
                cfg.ledger_fields.get(&c.name).map(Vec::as_slice),
                turn,
            )
        })
        .collect()
}

fn original_index(work: &Work<'_, '_>, w: usize) -> Option<usize> {
    match work.source[w] {
        Source::Original(i) => Some(i),
        Source::Synthesized => None,
    }
}

fn original_span(work: &Work<'_, '_>, u: &Unit) -> Option<Span> {
    let originals: Vec<usize> = (u.start..u.end)
        .filter_map(|w| match work.source[w] {
            Source::Original(i) => Some(i),
            Source::Synthesized => None,
        })
        .collect();
    Some(Span {
        start: *originals.first()?,
        end: originals.last()? + 1,
    })
}

/// What `emit` places besides kept messages.
struct Notes<'n> {
    /// Ledger notes of the input (merged into one at the first one's place).
    ledger: &'n [usize],
    /// Messages the plan does not keep as such: ledger notes, replaced summary notes.
    skipped: &'n [bool],
    rewrites: &'n HashMap<usize, (RewriteKind, String)>,
    /// Whether a summary note follows the ledger note.
    summary: bool,
}

#[allow(clippy::too_many_arguments)]
fn emit(
    work: &Work<'_, '_>,
    all_units: &[Unit],
    dropped: &[bool],
    placed: &Notes<'_>,
    ledger_state: &LedgerState,
    req: &Request,
    cfg: &PlanConfig,
    first_user: Option<usize>,
    prefix_end: usize,
) -> Vec<Item> {
    let notes = placed.ledger;
    let text = ledger::render(&ledger_state.entries);
    // An unchanged note is the caller's own object again, byte for byte.
    let note_item = |w: Option<usize>| -> Option<Item> {
        let text = text.clone()?;
        if let (Some(w), true) = (w, notes.len() == 1) {
            if let Source::Original(i) = work.source[w] {
                if req.message(i).texts.first() == Some(&text) {
                    return Some(Item::Keep(i));
                }
            }
        }
        Some(Item::LedgerNote {
            text,
            role: ledger_state.role,
        })
    };
    let anchor = match (notes.first(), cfg.pin_first_user_message, first_user) {
        (Some(&w), _, _) => w,
        // After the pinned goal, unless the goal is the last message: the request must still
        // end with the turn the model answers.
        (None, true, Some(u)) if u + 1 < work.msgs.len() => u + 1,
        _ => prefix_end,
    };
    let summary = placed.summary.then_some(Item::Summary {
        role: ledger_state.role,
    });
    let mut items = Vec::with_capacity(work.msgs.len() + 2);
    for (k, u) in all_units.iter().enumerate() {
        for w in u.start..u.end {
            if w == anchor {
                items.extend(note_item(notes.first().copied()));
                items.extend(summary.clone());
            }
            if dropped[k] || placed.skipped[w] {
                continue;
            }
            items.push(match (work.source[w], placed.rewrites.get(&w)) {
                (Source::Original(index), Some((kind, text))) => Item::Rewrite {
                    index,
                    kind: *kind,
                    text: text.clone(),
                },
                (Source::Original(i), None) => Item::Keep(i),
                (Source::Synthesized, _) => Item::SynthesizedResult {
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

#[cfg(test)]
mod tests;
