//! Which units later turns build on, by one rule: a ring is **referenced** when one of its
//! tool results holds an identifier (`crate::identifiers`) that a later message other than a
//! tool result repeats (the agent's text or call arguments, the user's words); a plain turn is
//! **citing** when it repeats an identifier an earlier tool result holds. `drop_rings` and
//! `drop_plain_turns` then leave these units to `drop_referenced_rings` and
//! `drop_citing_turns`, so what the next call is likely to use goes last.

use rustc_hash::FxHashMap as HashMap;

use super::Work;
use crate::units::{Unit, UnitKind};
use crate::view::Role;

/// Per unit: referenced (a ring) or citing (a plain turn). Notes the plan replaces and results
/// it synthesized cite nothing and hold nothing.
pub(super) fn cited(work: &Work<'_, '_>, units: &[Unit], skipped: &[bool]) -> Vec<bool> {
    let ids = |w: usize| -> &[u64] {
        match work.original(w) {
            Some(i) if !skipped[w] => work.req.identifiers(i),
            _ => &[],
        }
    };
    let is_result = |w: usize| work.msgs[w].role == Role::Tool;
    // What messages other than results say is small beside the results: index it (the last
    // place of each identifier), then only look the results' identifiers up in it.
    let mut said: HashMap<u64, usize> = HashMap::default();
    // And a bit per identifier said (of 2^16, by its hash): most of a result's identifiers
    // are said nowhere, and a bit in a table that stays in cache tells so cheaply.
    let mut bits = vec![0u64; 1 << 10];
    let slot = |id: u64| ((id >> 6) as usize & ((1 << 10) - 1), 1u64 << (id & 63));
    for w in (0..work.msgs.len()).filter(|&w| !is_result(w)) {
        for &id in ids(w) {
            said.insert(id, w);
            let (at, bit) = slot(id);
            bits[at] |= bit;
        }
    }
    let maybe_said = |id: u64| {
        let (at, bit) = slot(id);
        bits[at] & bit != 0
    };
    // Per identifier said somewhere, where a result first holds it.
    let mut first_result: HashMap<u64, usize> = HashMap::default();
    let mut out = vec![false; units.len()];
    for (k, u) in units.iter().enumerate() {
        let last = u.end - 1;
        for w in (u.start..u.end).filter(|&w| is_result(w)) {
            for id in ids(w).iter().filter(|&&id| maybe_said(id)) {
                if let Some(&last_said) = said.get(id) {
                    first_result.entry(*id).or_insert(w);
                    if u.kind == UnitKind::Ring && last_said > last {
                        out[k] = true;
                    }
                }
            }
        }
    }
    for (k, u) in units.iter().enumerate() {
        if u.kind == UnitKind::Plain {
            out[k] = (u.start..u.end)
                .filter(|&w| !is_result(w))
                .flat_map(&ids)
                .any(|id| first_result.get(id).is_some_and(|&r| r < u.start));
        }
    }
    out
}
