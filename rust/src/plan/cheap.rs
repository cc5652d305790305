//! Which middle messages the cheap stages may rewrite, and what each rewrite costs. Finding
//! candidates reads only what the cache keeps (roles, calls, sizes); a rewrite's text and
//! count are made the first time the stage loop reaches it, once per assembly.

use std::borrow::Cow;
use std::cell::OnceCell;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::{PlanConfig, Source, Work};
use crate::rewrite::{self, RewriteKind, MEDIA_PLACEHOLDER};
use crate::units::Unit;
use crate::view::{Folded, Role};

/// A rewrite of one message: its new content and the message's tokens after it.
pub(super) struct Action {
    pub text: String,
    pub tokens: u64,
}

const KINDS: [RewriteKind; 3] = [
    RewriteKind::Deduped,
    RewriteKind::Truncated,
    RewriteKind::Media,
];

fn slot(kind: RewriteKind) -> usize {
    KINDS.iter().position(|k| *k == kind).unwrap_or(0)
}

pub(super) struct CheapStages {
    /// Candidates per kind, oldest first.
    candidates: [Vec<usize>; 3],
    /// For each message some cheap stage may rewrite, the fewest tokens it can end with as
    /// the loop plans it: the limit for a cut result, nothing for the others.
    floor: Vec<Option<u64>>,
    /// For a superseded read: its tool's name.
    read_tool: HashMap<usize, String>,
    actions: Vec<[OnceCell<Option<Action>>; 3]>,
}

impl CheapStages {
    /// Candidates of the enabled cheap stages among the middle's own messages.
    pub fn find(
        work: &Work<'_, '_>,
        cfg: &PlanConfig,
        unit_of: &[usize],
        protected: &[bool],
        skipped: &[bool],
    ) -> CheapStages {
        let len = work.msgs.len();
        let enabled: HashSet<RewriteKind> =
            cfg.stages.iter().filter_map(|s| s.rewrites()).collect();
        let middle = |w: usize| {
            !protected[unit_of[w]] && !skipped[w] && matches!(work.source[w], Source::Original(_))
        };
        let mut candidates: [Vec<usize>; 3] = Default::default();
        let mut read_tool = HashMap::default();
        if enabled.contains(&RewriteKind::Deduped) {
            for (w, tool) in superseded_reads(work, cfg, unit_of, protected) {
                if middle(w) {
                    candidates[slot(RewriteKind::Deduped)].push(w);
                    read_tool.insert(w, tool);
                }
            }
        }
        for w in (0..len).filter(|&w| middle(w)) {
            let msg = work.msgs[w];
            if enabled.contains(&RewriteKind::Truncated)
                && msg.role == Role::Tool
                && work.bound(w) > cfg.max_tool_result_tokens
            {
                candidates[slot(RewriteKind::Truncated)].push(w);
            }
            if enabled.contains(&RewriteKind::Media) && !msg.images.is_empty() {
                candidates[slot(RewriteKind::Media)].push(w);
            }
        }
        let mut floor = vec![None; len];
        for (kind, list) in KINDS.iter().zip(&candidates) {
            let least = match kind {
                RewriteKind::Truncated => cfg.max_tool_result_tokens,
                _ => 0,
            };
            for &w in list {
                floor[w] = Some(floor[w].map_or(least, |f: u64| f.min(least)));
            }
        }
        CheapStages {
            candidates,
            floor,
            read_tool,
            actions: (0..len).map(|_| Default::default()).collect(),
        }
    }

    pub fn candidates(&self, kind: RewriteKind) -> &[usize] {
        &self.candidates[slot(kind)]
    }

    /// Whether a cheap stage could rewrite a message of unit `u`.
    pub fn shrinks(&self, u: &Unit) -> bool {
        (u.start..u.end).any(|w| self.floor[w].is_some())
    }

    /// The fewest tokens message `w` can end with after a cheap stage, if one may rewrite it.
    pub fn floor(&self, w: usize) -> Option<u64> {
        self.floor[w]
    }

    /// Tokens of unit `u` that cheap stages could remove.
    pub fn shrinkable(&self, u: &Unit, tokens: impl Fn(usize) -> u64) -> u64 {
        (u.start..u.end)
            .filter_map(|w| {
                let least = self.floor[w]?;
                Some(tokens(w).saturating_sub(least))
            })
            .sum()
    }

    /// Tokens message `w` has after a rewrite by `kind`, as the stage loop plans them, or None
    /// when the rewrite would not make it smaller. A cut result is planned at the limit, which
    /// it never exceeds: its text is made only if the plan keeps it (`rewrite`).
    pub fn planned(
        &self,
        kind: RewriteKind,
        w: usize,
        work: &Work<'_, '_>,
        cfg: &PlanConfig,
    ) -> Option<u64> {
        if kind == RewriteKind::Truncated {
            return planned_cut(work, w, cfg.max_tool_result_tokens);
        }
        self.rewrite(kind, w, work, cfg).map(|a| a.tokens)
    }

    /// The rewrite of message `w` by `kind`: its text and exact tokens.
    pub fn rewrite(
        &self,
        kind: RewriteKind,
        w: usize,
        work: &Work<'_, '_>,
        cfg: &PlanConfig,
    ) -> Option<&Action> {
        self.actions[w][slot(kind)]
            .get_or_init(|| {
                let req = work.req;
                let old = work.tokens(w);
                let (msg, text) = match kind {
                    RewriteKind::Deduped => {
                        let text = rewrite::dedupe_stub(self.read_tool.get(&w)?);
                        // The stub keeps the texts items folded into the result brought, which
                        // the working message (the cache's skeleton) may not hold: those need
                        // the message with every text. A result of its own alone needs none.
                        let msg = work.msgs[w];
                        let original = if msg.folded == Folded::default() {
                            Cow::Borrowed(msg)
                        } else {
                            work.full(w)
                        };
                        (rewrite::rewritten(&original, &text), text)
                    }
                    RewriteKind::Truncated => return cut(work, w, cfg.max_tool_result_tokens),
                    RewriteKind::Media => (
                        rewrite::without_media(&work.full(w)),
                        MEDIA_PLACEHOLDER.to_owned(),
                    ),
                };
                let tokens = req.inserted_tokens(&msg);
                (tokens < old).then_some(Action { text, tokens })
            })
            .as_ref()
    }
}

/// Tokens of tool result `w` cut to `cap` as the stage loop plans them (the cut never exceeds
/// its cap), or None when it is not over `cap`, `cap` leaves no room beside the anchor, or
/// the result stands for items folded into it too (a Responses item met while its ring was
/// open), which the cut leaves and the cap does not bound.
pub(super) fn planned_cut(work: &Work<'_, '_>, w: usize, cap: u64) -> Option<u64> {
    if work.msgs[w].folded != Folded::default() {
        return None;
    }
    let req = work.req;
    let room = || {
        let overhead = rewrite::truncation_overhead(work.msgs[w], |m| req.raw_tokens(m));
        req.raw_limit(cap) >= overhead + rewrite::MIN_KEPT_TOKENS
    };
    (work.tokens(w) > cap && room()).then_some(cap)
}

/// The smallest cap that leaves a cut of tool result `w` room for text beside its anchor.
pub(super) fn least_cap(work: &Work<'_, '_>, w: usize) -> u64 {
    let req = work.req;
    let overhead = rewrite::truncation_overhead(work.msgs[w], |m| req.raw_tokens(m));
    let need = overhead + rewrite::MIN_KEPT_TOKENS;
    // `raw_limit` scales by the provider's token ratio and grows with the cap: search it.
    let mut hi = need.max(1);
    while req.raw_limit(hi) < need {
        hi *= 2;
    }
    let mut lo = 1;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if req.raw_limit(mid) >= need {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// Tool result `w` cut head + tail to at most `cap` tokens, with its recovery anchor.
pub(super) fn cut(work: &Work<'_, '_>, w: usize, cap: u64) -> Option<Action> {
    let req = work.req;
    let full = work.full(w);
    // The result's own text is cut; what items folded into it brought stays beside it.
    let text = rewrite::truncated_text(
        &rewrite::own(&full),
        req.raw_limit(cap),
        req.counter(),
        |m| req.raw_tokens(m),
    )?;
    let tokens = req.inserted_tokens(&rewrite::rewritten(&full, &text));
    (tokens < work.tokens(w)).then_some(Action { text, tokens })
}

/// Results of reads that a later result of the same read supersedes: same tool, same
/// arguments (compared as JSON values), the tool not side-effecting (a second payment is not
/// a repeat of the first). The later result must say what the older one said: a real result
/// (not an error, not one synthesized for a call that never answered), in a protected unit,
/// so no later stage drops it and leaves only the stub. Yields (message, tool name), oldest
/// first.
fn superseded_reads(
    work: &Work<'_, '_>,
    cfg: &PlanConfig,
    unit_of: &[usize],
    protected: &[bool],
) -> Vec<(usize, String)> {
    let len = work.msgs.len();
    // The call each result answers, looked up within its own unit: (tool, key of the read).
    let mut calls: HashMap<(usize, &str), (&str, u64)> =
        HashMap::with_capacity_and_hasher(len / 2, Default::default());
    for (w, msg) in work.msgs.iter().enumerate() {
        if msg.tool_calls.is_empty() {
            continue;
        }
        let Source::Original(i) = work.source[w] else {
            continue;
        };
        for (c, &key) in msg.tool_calls.iter().zip(work.req.call_keys(i)) {
            calls.insert((unit_of[w], &*c.id), (&*c.name, key));
        }
    }
    let mut seen: HashSet<u64> = HashSet::with_capacity_and_hasher(len / 2, Default::default());
    let mut out = Vec::new();
    for w in (0..len).rev() {
        let msg = work.msgs[w];
        let Some(id) = msg.tool_call_id.as_deref() else {
            continue;
        };
        let Some(&(tool, key)) = calls.get(&(unit_of[w], id)) else {
            continue;
        };
        if cfg.side_effect_tools.contains(tool) {
            continue;
        }
        if seen.contains(&key) {
            out.push((w, tool.to_owned()));
        } else if protected[unit_of[w]]
            && !msg.is_error
            && matches!(work.source[w], Source::Original(_))
        {
            seen.insert(key);
        }
    }
    out.reverse();
    out
}
