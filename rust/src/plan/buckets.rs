//! The split into buckets: units (tool rings and plain turns), which of them are protected
//! (the prefix, pinned messages, the recent suffix) and which form the middle, the only part
//! the drop stages touch, with each drop stage's candidates oldest first.

use rustc_hash::FxHashMap as HashMap;

use super::notes::records_side_effects;
use super::{citations, Layout, Notes, PlanConfig, Source, Stage, Work};
use crate::count::chat::REPLY_PRIMING;
use crate::units::{units, units_glued, Unit, UnitKind};
use crate::view::Role;

pub(super) struct Buckets {
    pub all_units: Vec<Unit>,
    /// The unit of each working message.
    pub unit_of: Vec<usize>,
    /// Per unit: kept whatever the budget (prefix, pinned, recent suffix).
    pub protected: Vec<bool>,
    /// Working index of the first message after the leading instructions.
    pub prefix_end: usize,
    pub first_user: Option<usize>,
    /// Per unit: in the protected suffix (one of the latest rings, or the current turn).
    pub recent: Vec<bool>,
    /// Positions of the user messages (a ledger entry's turn).
    pub users: Vec<usize>,
    /// The working index of each of the caller's messages.
    pub original_to_work: HashMap<usize, usize>,
    /// Per message: pinned otherwise than as one of the latest user turns.
    pinned: Vec<bool>,
    /// Unprotected units, oldest first.
    middle: Vec<usize>,
    /// Short error rings of the middle held back until `DropErrorRings`.
    held: Vec<usize>,
    /// Per unit: a referenced ring or a citing plain turn (`citations`), found only when a
    /// stage sets them apart.
    cited: Vec<bool>,
    /// `DropReferencedRings` is a stage: `DropRings` leaves referenced rings to it.
    defer_referenced: bool,
    /// `DropCitingTurns` is a stage: `DropPlainTurns` leaves citing turns to it.
    defer_citing: bool,
}

impl Buckets {
    pub fn split(
        work: &Work<'_, '_>,
        cfg: &PlanConfig,
        pinned: &[usize],
        layout: Option<&Layout>,
        notes: &Notes,
    ) -> Buckets {
        let len = work.msgs.len();
        let mut original_to_work: HashMap<usize, usize> =
            HashMap::with_capacity_and_hasher(len, Default::default());
        original_to_work.extend((0..len).filter_map(|w| Some((work.original(w)?, w))));
        let prefix_end = work
            .msgs
            .iter()
            .position(|m| !m.role.is_instruction())
            .unwrap_or(len);
        let first_user = work.msgs.iter().position(|m| m.role == Role::User);
        let mut pin = vec![false; len];
        pin[..prefix_end].fill(true);
        for &w in notes.ledger.iter().chain(&notes.summaries) {
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
        // The latest user messages are pinned where they stand rather than opening the
        // suffix: in an agent loop the last user message may sit hundreds of rings back, and
        // a suffix starting there would leave nothing to trim.
        let users: Vec<usize> = (0..len)
            .filter(|&w| work.msgs[w].role == Role::User)
            .collect();
        let all_units = unit_split(work, layout);
        let mut b = Buckets {
            all_units,
            unit_of: vec![0usize; len],
            protected: Vec::new(),
            prefix_end,
            first_user,
            recent: Vec::new(),
            users,
            original_to_work,
            pinned: pin,
            middle: Vec::new(),
            held: Vec::new(),
            cited: Vec::new(),
            defer_referenced: cfg.stages.contains(&Stage::DropReferencedRings),
            defer_citing: cfg.stages.contains(&Stage::DropCitingTurns),
        };
        // A replay decides nothing, and a request that fits even at its bounds loses
        // nothing: neither needs citations.
        let at_most = (0..len).map(|w| work.bound(w)).sum::<u64>()
            + work.req.tools_tokens
            + notes.ledger_state.tokens
            + notes.reserve
            + u64::from(REPLY_PRIMING);
        let decides = cfg.replay.is_none() && at_most > cfg.budget;
        if (b.defer_referenced || b.defer_citing) && decides {
            b.cited = citations::cited(work, &b.all_units, &notes.skipped);
            // A ring the ledger records keeps its place among the rings: the note lists
            // effects in the order their rings go, and a replay, which does not look for
            // citations (later turns may add some), must write the same note.
            for (k, u) in b.all_units.iter().enumerate() {
                if records_side_effects(u, work, cfg) {
                    b.cited[k] = false;
                }
            }
        }
        for (k, u) in b.all_units.iter().enumerate() {
            b.unit_of[u.start..u.end].fill(k);
        }
        (b.recent, b.protected) = b.protection(cfg.recent_tool_rings, cfg.recent_user_turns);
        let all_units = &b.all_units;
        let protected = &b.protected;
        let middle: Vec<usize> = (0..all_units.len()).filter(|&k| !protected[k]).collect();
        let mut held: Vec<usize> = middle
            .iter()
            .copied()
            .filter(|&k| short_error_ring(&all_units[k], work, cfg))
            .collect();
        held.drain(..held.len().saturating_sub(cfg.max_held_error_rings));
        b.middle = middle;
        b.held = held;
        b
    }

    /// Whether message `w` is pinned otherwise than as one of the latest user turns.
    pub fn is_pinned(&self, w: usize) -> bool {
        self.pinned[w]
    }

    /// Whether unit `k` is a short error ring of the middle held back until `DropErrorRings`.
    pub fn is_held(&self, k: usize) -> bool {
        self.held.contains(&k)
    }

    /// The protection with `rings` recent tool rings and `turns` recent user turns: per unit,
    /// whether it is in the protected suffix, and whether it is protected at all.
    pub fn protection(&self, rings: usize, turns: usize) -> (Vec<bool>, Vec<bool>) {
        let recent = recent_units(&self.all_units, rings);
        let mut latest = vec![false; self.unit_of.len()];
        for &w in &self.users[self.users.len().saturating_sub(turns)..] {
            latest[w] = true;
        }
        let protected = self
            .all_units
            .iter()
            .zip(&recent)
            .map(|(u, &r)| r || (u.start..u.end).any(|w| self.pinned[w] || latest[w]))
            .collect();
        (recent, protected)
    }

    /// Units `stage` may drop, oldest first (none for the cheap stages).
    pub fn candidates(&self, stage: Stage) -> Vec<usize> {
        self.pick(stage, &self.middle, &self.held)
    }

    /// Whether unit `k` is referenced or citing (`citations`).
    fn is_cited(&self, k: usize) -> bool {
        self.cited.get(k).copied().unwrap_or(false)
    }

    /// What `stage` drops of `units` (oldest first), `held` waiting for `DropErrorRings`.
    fn pick(&self, stage: Stage, units: &[usize], held: &[usize]) -> Vec<usize> {
        let kind = |k: usize| self.all_units[k].kind;
        let ring = |k: usize| kind(k) == UnitKind::Ring && !held.contains(&k);
        let plain = |k: usize| kind(k) == UnitKind::Plain;
        let keep = |f: &dyn Fn(usize) -> bool| units.iter().copied().filter(|&k| f(k)).collect();
        match stage {
            Stage::DropRings => keep(&|k| ring(k) && !(self.defer_referenced && self.is_cited(k))),
            Stage::DropPlainTurns => {
                keep(&|k| plain(k) && !(self.defer_citing && self.is_cited(k)))
            }
            Stage::DropReferencedRings => keep(&|k| ring(k) && self.is_cited(k)),
            Stage::DropCitingTurns => keep(&|k| plain(k) && self.is_cited(k)),
            Stage::DropErrorRings => held.to_vec(),
            _ => Vec::new(),
        }
    }
}

impl Buckets {
    /// Units `stage` may drop among `released` (oldest first), as it would in the middle:
    /// the latest short error rings wait for `DropErrorRings`.
    pub fn released_candidates(
        &self,
        stage: Stage,
        released: &[usize],
        work: &Work<'_, '_>,
        cfg: &PlanConfig,
    ) -> Vec<usize> {
        let mut held: Vec<usize> = released
            .iter()
            .copied()
            .filter(|&k| short_error_ring(&self.all_units[k], work, cfg))
            .collect();
        held.drain(..held.len().saturating_sub(cfg.max_held_error_rings));
        self.pick(stage, released, &held)
    }
}

/// The units of the working view, with a provider's layout gluing what one native item holds.
fn unit_split(work: &Work<'_, '_>, layout: Option<&Layout>) -> Vec<Unit> {
    let Some(layout) = layout else {
        return units(&work.msgs);
    };
    let len = work.msgs.len();
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

/// A ring whose results are all errors and together at most `short_error_result_tokens`.
fn short_error_ring(u: &Unit, work: &Work<'_, '_>, cfg: &PlanConfig) -> bool {
    let results = || (u.start..u.end).filter(|&w| work.msgs[w].role == Role::Tool);
    u.kind == UnitKind::Ring
        && results().all(|w| work.msgs[w].is_error)
        && results().map(|w| work.tokens(w)).sum::<u64>() <= cfg.short_error_result_tokens
}

/// The protected suffix, per unit: the last `recent_tool_rings` rings where they stand and the
/// last unit (the current turn is never dropped). The plain turns between those rings are not
/// part of it: one early ring would otherwise protect every later turn of a long chat, and a
/// session of one ring and many plain turns could not be trimmed at all. The latest user turns
/// are protected where they stand too (`recent_user_turns`).
fn recent_units(all_units: &[Unit], recent_tool_rings: usize) -> Vec<bool> {
    let mut recent = vec![false; all_units.len()];
    if let Some(last) = recent.last_mut() {
        *last = true;
    }
    let rings = (0..all_units.len())
        .rev()
        .filter(|&k| all_units[k].kind == UnitKind::Ring)
        .take(recent_tool_rings);
    for k in rings {
        recent[k] = true;
    }
    recent
}
