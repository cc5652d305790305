//! What each unit is worth in tokens, counted no more than the decision needs: walking the
//! drop sequence back from its end, once the kept units alone overflow the budget, every
//! earlier unit of the sequence is certainly dropped and its size bound (from bytes, no
//! tokenizing) serves. So the cost of counting grows with the budget, not the history.

use rustc_hash::FxHashSet as HashSet;

use super::{Planning, Replay, Source};
use crate::units::Unit;
use crate::view::Role;

/// Messages of certainly dropped units counted (per class) to estimate the others, and the
/// most tokens one may cost: a few small counts, made once and cached.
const SAMPLES: usize = 12;
const SAMPLE_TOKENS: u64 = 8192;

/// Tokens of each unit, and which units the drops certainly reach.
pub(super) struct Valuation {
    pub value: Vec<u64>,
    /// Units the drop sequence reaches whatever the cheap stages save: not worth rewriting,
    /// valued by their bound.
    pub certain: Vec<bool>,
    /// Per unit, how far its value is above an estimate of its tokens: a certain unit's bound
    /// (from bytes) overstates it several times, which the report must not pass on as
    /// tokens saved. Only the report reads it; every decision keeps the bound.
    pub overstated: Vec<u64>,
}

impl Valuation {
    /// What the values of the units `out` keeps overstate, all told.
    pub fn overstated_kept(&self, dropped: &[bool]) -> u64 {
        (0..self.value.len())
            .filter(|&k| !dropped[k])
            .map(|k| self.overstated[k])
            .sum()
    }
}

impl Planning<'_, '_, '_> {
    /// Tokens of unit `u` as it stands (notes the plan replaces left out).
    pub fn unit_tokens(&self, u: &Unit) -> u64 {
        (u.start..u.end)
            .filter(|&w| !self.notes.skipped[w])
            .map(|w| self.work.tokens(w))
            .sum()
    }

    /// An upper bound of `unit_tokens(u)` that tokenizes nothing.
    fn unit_bound(&self, u: &Unit) -> u64 {
        (u.start..u.end)
            .filter(|&w| !self.notes.skipped[w])
            .map(|w| self.work.bound(w))
            .sum()
    }

    /// The fewest tokens unit `u` can keep after the cheap stages (a message one may rewrite
    /// counts as its floor, or as itself when smaller), if at most `limit`: a unit that cannot
    /// fit is found out after about `limit` tokens of counting, and a huge result that could
    /// be cut is counted only up to the cut's size.
    fn unit_least_within(&self, u: &Unit, limit: u64) -> Option<u64> {
        let work = self.work;
        let mut sum = 0;
        for w in (u.start..u.end).filter(|&w| !self.notes.skipped[w]) {
            let room = limit - sum;
            sum += match self.cheap.floor(w) {
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
    }

    /// The units the drop stages reach, in the order they reach them.
    fn sequence(&self) -> Vec<usize> {
        let mut seen = HashSet::default();
        self.cfg
            .stages
            .iter()
            .flat_map(|&stage| self.buckets.candidates(stage))
            .filter(|k| seen.insert(*k))
            .collect()
    }

    /// Values every unit; `lazy` counts exactly only where the decision can fall. A cheap
    /// stage may shrink a unit before the drops reach it, so the walk back sums what each
    /// unit could shrink to (its messages that a cheap stage could rewrite taken at their
    /// floor).
    pub fn values(&self, lazy: bool) -> Valuation {
        let all_units = &self.buckets.all_units;
        let sequence = self.sequence();
        let in_sequence: HashSet<usize> = sequence.iter().copied().collect();
        let mut value = vec![0u64; all_units.len()];
        let mut is_certain = vec![false; all_units.len()];
        let mut fixed = self.framing + self.notes.reserve;
        for (k, u) in all_units.iter().enumerate() {
            if !in_sequence.contains(&k) {
                value[k] = self.unit_tokens(u);
                fixed += value[k] - self.cheap.shrinkable(u, |w| self.work.tokens(w));
            }
        }
        let mut tail = 0u64;
        let mut certain = 0;
        for (j, &k) in sequence.iter().enumerate().rev() {
            let u = &all_units[k];
            if !lazy {
                value[k] = self.unit_tokens(u);
                continue;
            }
            // A unit that cannot fit the room left even at its fewest tokens is certainly
            // dropped (keeping it means keeping everything after it), and so is every unit
            // before it: their bounds serve.
            let room = self.cfg.budget.saturating_sub(fixed + tail);
            let Some(least) = self.unit_least_within(u, room) else {
                certain = j + 1;
                break;
            };
            value[k] = if self.cheap.shrinks(u) {
                self.unit_tokens(u)
            } else {
                least
            };
            tail += least;
        }
        for &k in &sequence[..certain] {
            value[k] = self.unit_bound(&all_units[k]);
            is_certain[k] = true;
        }
        let overstated = self.overstatement(&sequence[..certain], &value);
        Valuation {
            value,
            certain: is_certain,
            overstated,
        }
    }

    /// Per unit, how far the values of `bounded` units are above an estimate of their
    /// tokens: a few messages of each class, spread over it, are counted, and the rest taken at
    /// the sampled ratio of tokens to byte bound. The samples are chosen by place, not by
    /// what the cache holds, so a request planned again reports the same figures.
    fn overstatement(&self, bounded: &[usize], value: &[u64]) -> Vec<u64> {
        let (work, units) = (self.work, &self.buckets.all_units);
        let mut out = vec![0u64; units.len()];
        let messages: Vec<usize> = bounded
            .iter()
            .flat_map(|&k| units[k].start..units[k].end)
            .filter(|&w| !self.notes.skipped[w] && work.original(w).is_some())
            .collect();
        // Tool results (often JSON or logs), calls (JSON arguments) and prose tokenize at
        // other rates: one ratio each. A drop order that keeps cited turns can leave mostly
        // calls, or mostly prose, among the units it certainly drops.
        let class = |w: usize| match &work.msgs[w] {
            m if m.role == Role::Tool => 1,
            m if !m.tool_calls.is_empty() => 2,
            _ => 0,
        };
        let mut sampled = rustc_hash::FxHashMap::default();
        let mut ratio = [(0u64, 0u64); 3];
        for (c, (tokens, bounds)) in ratio.iter_mut().enumerate() {
            // Spread over the class: a drop order that keeps cited units leaves no old run
            // of the history that stands for the rest (the oldest few did, dropped oldest
            // first). A count, once made, is cached, so a later turn pays only for the
            // samples that moved.
            let of_class: Vec<usize> = messages
                .iter()
                .copied()
                .filter(|&w| class(w) == c)
                .collect();
            let step = of_class.len().div_ceil(SAMPLES).max(1);
            for w in of_class.iter().copied().step_by(step) {
                let Some(i) = work.original(w) else {
                    continue;
                };
                let bound = work.req.byte_bound(i);
                if let Some(t) = work.req.tokens_within(i, SAMPLE_TOKENS) {
                    *tokens += u64::from(t);
                    *bounds += u64::from(bound);
                    sampled.insert(w, u64::from(t));
                }
            }
        }
        for &k in bounded {
            // Counted and sampled messages at their counts, the rest by their class's ratio
            // (or their bound, for a class no message of which could be sampled).
            let estimate: u64 = (units[k].start..units[k].end)
                .filter(|&w| !self.notes.skipped[w])
                .map(|w| {
                    let (tokens, bounds) = ratio[class(w)];
                    match (sampled.get(&w), work.original(w)) {
                        (Some(&t), _) => t,
                        (None, Some(i)) if bounds > 0 && !work.req.is_counted(i) => {
                            u64::from(work.req.byte_bound(i)) * tokens / bounds
                        }
                        _ => work.bound(w),
                    }
                })
                .sum();
            out[k] = value[k].saturating_sub(estimate);
        }
        out
    }

    /// A replay decides nothing: every kept unit is counted, the dropped ones are bounded.
    pub fn replay_values(&self, r: &Replay) -> Valuation {
        let work = self.work;
        let gone: HashSet<usize> = r.dropped.iter().copied().collect();
        let units = &self.buckets.all_units;
        let dropped: Vec<usize> = (0..units.len())
            .filter(|&k| {
                (units[k].start..units[k].end)
                    .any(|w| matches!(work.source[w], Source::Original(i) if gone.contains(&i)))
            })
            .collect();
        let value: Vec<u64> = (0..units.len())
            .map(|k| {
                if dropped.binary_search(&k).is_ok() {
                    self.unit_bound(&units[k])
                } else {
                    self.unit_tokens(&units[k])
                }
            })
            .collect();
        let certain = vec![false; value.len()];
        let overstated = self.overstatement(&dropped, &value);
        Valuation {
            value,
            certain,
            overstated,
        }
    }

    /// Tokens of the request as given (repairs are not part of the input, earlier ledger
    /// notes are), and whether that is exact rather than an estimate.
    pub fn tokens_before(&self, v: &Valuation) -> (u64, bool) {
        let work = self.work;
        let len = work.msgs.len();
        let messages_total: u64 = v.value.iter().sum::<u64>() - v.overstated.iter().sum::<u64>();
        let synthesized_total: u64 = work.synthesized_tokens.iter().sum();
        let notes_total: u64 = (0..len)
            .filter(|&w| self.notes.skipped[w])
            .map(|w| work.tokens(w))
            .sum();
        let before =
            messages_total - synthesized_total + notes_total + self.framing + work.req.tools_tokens;
        let exact = (0..len).all(|w| match work.source[w] {
            Source::Original(i) => work.req.is_counted(i),
            Source::Synthesized => true,
        });
        (before, exact)
    }
}
