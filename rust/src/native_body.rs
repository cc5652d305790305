//! What the core writes of a plan of a native provider (Responses, Anthropic, Gemini, Bedrock
//! Converse), for a request body and for a list of the caller's objects alike (`history`):
//! the plans most requests get, ones that drop whole items, cut oversized tool results (or
//! stub superseded reads), make older images text, and may bring the side-effect ledger note.
//! The kept items go out as the input's own (its bytes in a body, its objects in a list), a
//! rewritten one edited where it lies (`Provider::result_rewritten`, `media_rewritten`), the
//! note where the provider places it, and every other field as it was, so such a request
//! never reaches an adapter. Where the provider merges the neighbours a drop brought together
//! (Anthropic, Bedrock Converse, Gemini), the core writes the merged item and counts the
//! request as sent; Anthropic's whitespace-only text is stripped, a thinking turn is kept
//! apart from the assistant turn before it by a user turn of the provider's own (`parted`),
//! and a request over its cache marker limit is refused in its words (`marker_limit`), the
//! check run on what is written. Results a plan synthesizes
//! for unanswered calls go where the provider puts them (`ResultsAt`), that request counted
//! as sent too. For a body, any other plan (a summary, the tools dropped) takes the items
//! path; for the caller's objects the core also writes the summary note after the ledger
//! note, where the provider places notes, and a plan it does not write is refused.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::value::RawValue;

use crate::error::CoreError;
use crate::native::{with_provider, ForProvider, Native};
use crate::pairing::IssueKind;
use crate::plan::{Item, Plan};
use crate::providers::{
    json_string, within, ItemFacts, MarkerLimit, NoteAt, Provider, ResultAt, ResultsAt,
};
use crate::rewrite::RewriteKind;
use crate::view::{Message, Role, ToolCall};

/// What a plan the core writes sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept<'p> {
    /// The native items kept, in order.
    pub items: Vec<usize>,
    /// The notes, in order (the side-effect ledger note, then the summary note): each one's
    /// text, its role, and how many kept items go before it.
    pub notes: Vec<(&'p str, Role, usize)>,
    /// Runs of `items` (positions in it) that go out as one item, and their role: neighbours
    /// the drop brought together, merged as the adapter merges them. The request sent then
    /// differs from the one planned, and is counted again (`merges` empty: it is the same).
    pub merges: Vec<(Range<usize>, &'static str)>,
    /// Positions in `items` of the items holding text the provider strips (`stripped`).
    pub strips: Vec<usize>,
    /// Positions in `items` before which the provider sends an item of its own, parting
    /// neighbours it may neither merge nor send side by side (`Provider::parted`), and that
    /// item's JSON.
    pub parted: (Vec<usize>, &'static str),
    /// Where the kept items and the system may carry more prompt cache markers than the
    /// provider allows: each kept item's and the system's, to check on the request as
    /// written (`history`).
    pub markers: Option<(Vec<u32>, u32)>,
    /// The messages the plan rewrote (results cut or stubbed, images made text).
    pub rewrites: Vec<Rewritten<'p>>,
    /// The error results the plan synthesizes, where the provider puts them.
    pub added: Vec<Added>,
    /// The system holds notes an earlier assembly left, which `notes` replace: it is
    /// written anew from the caller's part (`Provider::without_notes`).
    pub rebase: bool,
}

impl Kept<'_> {
    /// Whether the request sent differs from the one planned in what it costs, so that it is
    /// counted again as sent: neighbours merged, or results synthesized (given a reading
    /// with calls left unanswered, the plan answered or dropped each one: checked there).
    pub fn sent_differs(&self, native: &Native) -> bool {
        !self.merges.is_empty()
            || !self.added.is_empty()
            || !self.parted.0.is_empty()
            || !native.issues.is_empty()
    }

    /// The new items, but for results and notes of their own, as the adapters count them
    /// (`merged`): each merged run, each item results join outside one, each parting item.
    pub fn merged(&self) -> usize {
        let joined = self
            .added
            .iter()
            .filter_map(|a| a.target())
            .filter(|&j| !self.merges.iter().any(|(run, _)| run.contains(&j)))
            .count();
        self.merges.len() + joined + self.parted.0.len()
    }
}

/// Error results a plan synthesizes for calls that lost theirs, written into a kept item or
/// as a new one after it (`ResultsAt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Added {
    /// Position in `items` of the item they go into, or after.
    pub at: usize,
    /// Into that item (`Provider::with_results`), else a new item (`results_item`).
    pub into: bool,
    /// A new item that goes out merged with the kept user item after it, as the provider
    /// merges neighbours of one role (Anthropic, Bedrock): its results before that item's blocks.
    pub joined: bool,
    /// The results, in order, each as the provider writes it (`synthesized_result`).
    pub results: Vec<String>,
    /// A new item the plan places after the notes that go before the kept item after it:
    /// written after them, where it would otherwise go before them.
    pub after_notes: bool,
}

impl Added {
    /// The kept item the results go into, or are merged with; None for an item of their own.
    pub fn target(&self) -> Option<usize> {
        match (self.into, self.joined) {
            (true, _) => Some(self.at),
            (false, true) => Some(self.at + 1),
            (false, false) => None,
        }
    }
}

/// A message a cheap stage rewrote, in kept items: a tool result cut or stubbed, or the
/// images of a message made text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten<'p> {
    /// Positions in `items` of the items the canonical message stands for.
    pub at: Range<usize>,
    /// The call the result answers; None for images made text.
    pub call_id: Option<String>,
    /// Its position among the results of the first of those items (`ResultAt::nth`).
    pub nth: usize,
    /// Its new text.
    pub text: &'p str,
}

/// What `plan` keeps, when it only keeps items, rewrites them (results cut or stubbed, images
/// made text) and may bring the ledger note, and `provider` sends the kept items as the
/// caller gave them (but for the rewrites) behind a system that holds `system_markers` prompt
/// cache markers; None when the plan needs an adapter's rendering. `message` gives the
/// canonical message at an index (the reading's, which its request holds).
///
/// Errors: `Config` for an unknown provider; `InvalidMessage` for a plan of another reading.
pub fn kept_as_given<'p, 'm: 'p>(
    provider: &str,
    native: &Native,
    plan: &'p Plan,
    system_markers: u32,
    message: impl Fn(usize) -> Option<&'m Message>,
) -> Result<Option<Kept<'p>>, CoreError> {
    if plan.tools_dropped {
        return Ok(None);
    }
    kept_of_items(provider, native, &plan.items, None, system_markers, message)
}

/// What the plan items `items` keep (`kept_as_given`, whether the plan dropped the tools or
/// not: the objects path hands the tools back apart from the items), `summary` the text of
/// the summary note where the plan places one (None: a plan with a summary is the
/// adapter's). A plan that synthesizes results is of a reading whose only issues are calls
/// without results; its request must be checked as sent.
///
/// Errors: as `kept_as_given`.
pub fn kept_of_items<'p, 'm: 'p>(
    provider: &str,
    native: &Native,
    items: &'p [Item],
    summary: Option<&'p str>,
    system_markers: u32,
    message: impl Fn(usize) -> Option<&'m Message>,
) -> Result<Option<Kept<'p>>, CoreError> {
    if native
        .issues
        .iter()
        .any(|issue| issue.kind != IssueKind::MissingResult)
    {
        return Ok(None);
    }
    // Notes an earlier assembly left in the system: where this plan brings a note of its
    // own, the system is written anew from the caller's part with the notes it keeps, the
    // new one in the place of the old (`Provider::without_notes`).
    // Looked for only when the plan brings a note: most plans bring none.
    let fresh = items
        .iter()
        .any(|item| matches!(item, Item::LedgerNote { .. } | Item::Summary { .. }));
    let earlier: Vec<usize> = if fresh {
        (0..native.spans.len())
            .filter(|&k| native.spans[k].is_none() && system_note(&message, k).is_some())
            .collect()
    } else {
        Vec::new()
    };
    let rebase = !earlier.is_empty();
    let mut canonical = Vec::with_capacity(items.len());
    let mut ledger: Option<(&'p str, Role, usize)> = None;
    let mut summary_note: Option<(&'p str, Role, usize)> = None;
    let (mut new_ledger, mut new_summary) = (false, false);
    let mut rewrites = Vec::new();
    // Each synthesized result's call id, how many kept canonical messages go before it, and
    // whether the plan placed a note sent as an item before it.
    let mut synthesized: Vec<(&str, usize, bool)> = Vec::new();
    for item in items {
        match item {
            Item::Keep(k) if rebase && earlier.contains(k) => {
                let Some(text) = system_note(&message, *k) else {
                    return Ok(None);
                };
                let slot = if text.starts_with(crate::summary::MARKER) {
                    &mut summary_note
                } else {
                    &mut ledger
                };
                slot.get_or_insert((text, Role::System, canonical.len()));
            }
            Item::Keep(k) => canonical.push(*k),
            Item::SynthesizedResult { call_id } => {
                // A note sent as an item that the plan placed already goes before it.
                let noted = [ledger, summary_note]
                    .iter()
                    .flatten()
                    .any(|&(_, role, _)| role != Role::System);
                synthesized.push((call_id.as_str(), canonical.len(), noted));
            }
            // The ledger note comes before the summary note (the adapters' order).
            Item::LedgerNote { text, role } if !new_ledger && !new_summary => {
                new_ledger = true;
                ledger = Some((text.as_str(), *role, canonical.len()));
            }
            Item::Summary { role } if !new_summary => match summary {
                Some(text) if !text.is_empty() => {
                    new_summary = true;
                    summary_note = Some((text, *role, canonical.len()));
                }
                _ => return Ok(None),
            },
            Item::Rewrite { index, kind, text } => {
                canonical.push(*index);
                rewrites.push((*index, *kind, text.as_str()));
            }
            _ => return Ok(None),
        }
    }
    if ledger.is_some() && ledger.map(|n| n.0) == summary_note.map(|n| n.0) {
        return Ok(None);
    }
    let notes = ledger.into_iter().chain(summary_note).collect();
    let left_out = if rebase { earlier.len() } else { 0 };
    let Some(mut kept) = kept_of(
        provider,
        native,
        &canonical,
        notes,
        system_markers,
        left_out,
    )?
    else {
        return Ok(None);
    };
    kept.rebase = rebase;
    if !synthesized.is_empty() {
        let Some(added) = added(provider, native, &kept, &canonical, &synthesized, &message)?
        else {
            return Ok(None);
        };
        kept.added = added;
        if split_runs(provider, native, &mut kept)?.is_none() {
            return Ok(None);
        }
        joined_runs(&mut kept, &native.facts);
        // A new results item already parts the neighbours it goes between.
        let added = &kept.added;
        kept.parted
            .0
            .retain(|&j| !added.iter().any(|a| !a.into && !a.joined && a.at + 1 == j));
    }
    Ok(with_rewrites(native, kept, &rewrites, message))
}

/// Runs of neighbours to merge that a new results item of its own now parts, cut where it
/// stands: each part of more than one item merged as the provider merges those items alone
/// (the adapters place the results before they merge). None where the core does not merge
/// a part.
fn split_runs(
    provider: &str,
    native: &Native,
    kept: &mut Kept<'_>,
) -> Result<Option<()>, CoreError> {
    let cuts: Vec<usize> = kept
        .added
        .iter()
        .filter(|a| !a.into && !a.joined)
        .map(|a| a.at + 1)
        .collect();
    let cut = |run: &Range<usize>| cuts.iter().any(|&j| run.start < j && j < run.end);
    if !kept.merges.iter().any(|(run, _)| cut(run)) {
        return Ok(Some(()));
    }
    let mut merges = Vec::with_capacity(kept.merges.len() + 1);
    for (run, role) in std::mem::take(&mut kept.merges) {
        if !cut(&run) {
            merges.push((run, role));
            continue;
        }
        let mut bounds: Vec<usize> = cuts
            .iter()
            .copied()
            .filter(|&j| run.start < j && j < run.end)
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        bounds.insert(0, run.start);
        bounds.push(run.end);
        for part in bounds.windows(2).map(|w| w[0]..w[1]) {
            let sends = Sends {
                facts: &native.facts,
                kept: &kept.items[part.clone()],
            };
            let Some((runs, _)) = with_provider(provider, sends)? else {
                return Ok(None);
            };
            let at = part.start;
            merges.extend(runs.into_iter().map(|r| (r.start + at..r.end + at, role)));
        }
    }
    kept.merges = merges;
    Ok(Some(()))
}

/// A results item joined to the kept user item after it is merged with every kept user item
/// that follows that one too, as the adapter merges a run of one role holding items of more
/// than one turn: where they are not merged already, they become a run of their own.
fn joined_runs(kept: &mut Kept<'_>, facts: &[ItemFacts]) {
    for start in kept.added.iter().filter(|a| a.joined).map(|a| a.at + 1) {
        if kept.merges.iter().any(|(run, _)| run.contains(&start)) {
            continue;
        }
        let end = (start..kept.items.len())
            .find(|&j| facts[kept.items[j]].role != Some("user"))
            .unwrap_or(kept.items.len());
        if end - start > 1 {
            let at = kept.merges.partition_point(|(run, _)| run.start < start);
            kept.merges.insert(at, (start..end, "user"));
        }
    }
}

/// The text of canonical message `k` when it is a note an earlier assembly left in the
/// system (a system text that opens with a note's marker).
fn system_note<'m>(message: &impl Fn(usize) -> Option<&'m Message>, k: usize) -> Option<&'m str> {
    let m = message(k)?;
    match m.texts.as_slice() {
        [text] if crate::providers::is_note(text) => Some(text),
        _ => None,
    }
}

/// Where the error results `synthesized` (each call's id, how many of the kept canonical
/// messages `canonical` go before it, and whether a note sent as an item goes before it) go
/// among `kept`'s items, as the provider places them; None where the core does not write
/// them (a new turn at a note's place where results are grouped in turns).
fn added<'m>(
    provider: &str,
    native: &Native,
    kept: &Kept<'_>,
    canonical: &[usize],
    synthesized: &[(&str, usize, bool)],
    message: &impl Fn(usize) -> Option<&'m Message>,
) -> Result<Option<Vec<Added>>, CoreError> {
    let how = with_provider(provider, Placed)?;
    let facts = &native.facts;
    let position = |i: usize| kept.items.binary_search(&i).ok();
    let mut out: Vec<Added> = Vec::new();
    for &(call_id, before, after_notes) in synthesized {
        let before = &canonical[..before.min(canonical.len())];
        // The call's message, the latest kept before the result that makes it.
        let call = before.iter().rev().find_map(|&k| {
            let m = message(k)?;
            let nth = m.tool_calls.iter().position(|c| &*c.id == call_id)?;
            Some((k, &m.tool_calls[nth], nth))
        });
        let Some((k, call, nth)) = call else {
            return Ok(None);
        };
        let Some((item, _)) = native.spans.get(k).copied().flatten() else {
            return Ok(None);
        };
        let (at, into) = match how {
            ResultsAt::Adapter => return Ok(None),
            ResultsAt::NextTurn => {
                // The first item of the turn after the call's (a turn: neighbours of a role).
                let next = (item + 1..facts.len())
                    .find(|&i| facts[i].role != facts[item].role)
                    .unwrap_or(facts.len());
                match position(next) {
                    Some(j) => (j, true),
                    None => match position(next - 1) {
                        Some(j) => (j, false),
                        None => return Ok(None),
                    },
                }
            }
            ResultsAt::NextItem => {
                let Some(j) = position(item) else {
                    return Ok(None);
                };
                let user = |j: usize| {
                    kept.items
                        .get(j)
                        .is_some_and(|&i| facts[i].role == Some("user"))
                };
                if user(j + 1) {
                    (j + 1, true)
                } else {
                    (j, false)
                }
            }
            ResultsAt::InPlace => {
                // After the last item of the kept messages before it.
                let end = before
                    .iter()
                    .filter_map(|&k| native.spans.get(k).copied().flatten())
                    .map(|(_, end)| end)
                    .max();
                let Some(j) = end.and_then(|end| position(end - 1)) else {
                    return Ok(None);
                };
                (j, false)
            }
            ResultsAt::Behind => {
                // The item of the last kept message before it.
                let behind = before
                    .iter()
                    .rev()
                    .find_map(|&k| native.spans.get(k).copied().flatten());
                let Some(j) = behind.and_then(|(start, _)| position(start)) else {
                    return Ok(None);
                };
                (j, facts[kept.items[j]].role == Some("user"))
            }
        };
        let written = Synthesize {
            native,
            item,
            nth,
            call,
        };
        let Some(result) = with_provider(provider, written)?? else {
            return Ok(None);
        };
        // Where each result is an item of its own, each is one.
        let grouped = how != ResultsAt::InPlace;
        match out
            .iter_mut()
            .find(|a| grouped && a.at == at && a.into == into)
        {
            Some(a) => a.results.push(result),
            None => out.push(Added {
                at,
                into,
                joined: false,
                results: vec![result],
                // Beside a note only where each result is an item of its own (below).
                after_notes: after_notes && how == ResultsAt::InPlace,
            }),
        }
    }
    // A new item at a note's place goes where the plan put it, before or after the note,
    // where each result is an item of its own (elsewhere: not written). A new user item
    // before a kept user item is merged with it, its results first (Anthropic and Bedrock
    // merge neighbours of one role; Bedrock's `merged` does not write a turn that would mix
    // results with other content, which Bedrock refuses). One between neighbours the drop
    // left to be merged parts them (`split_runs`).
    for a in out.iter_mut().filter(|a| !a.into) {
        if how == ResultsAt::InPlace {
            continue;
        }
        if kept.notes.iter().any(|&(_, _, before)| before == a.at + 1) {
            return Ok(None);
        }
        // (`NextItem` puts results into a user item after the call: never a new one before it.)
        a.joined = kept
            .items
            .get(a.at + 1)
            .is_some_and(|&i| facts[i].role == Some("user"));
    }
    Ok(Some(out))
}

/// Where the provider puts synthesized results.
struct Placed;

impl ForProvider for Placed {
    type Out = ResultsAt;
    fn run<P: Provider>(self, p: P) -> ResultsAt {
        p.results_placed()
    }
}

/// A synthesized result for call `nth` of native item `item`, written by the provider from
/// its own reading of the items.
struct Synthesize<'a> {
    native: &'a Native,
    item: usize,
    nth: usize,
    call: &'a ToolCall,
}

impl ForProvider for Synthesize<'_> {
    type Out = Result<Option<String>, CoreError>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        let Some(items) = self.native.parsed.of::<P>() else {
            return Ok(None);
        };
        p.synthesized_result(items, self.item, self.nth, self.call)
    }
}

/// `kept` with the messages `rewrites` (canonical index, kind, new text) rewritten in its
/// items; None when one is not kept whole, or a result rewrite is of no tool result.
/// `message` gives the canonical message at an index.
pub fn with_rewrites<'p, 'm>(
    native: &Native,
    mut kept: Kept<'p>,
    rewrites: &[(usize, RewriteKind, &'p str)],
    message: impl Fn(usize) -> Option<&'m Message>,
) -> Option<Kept<'p>> {
    for &(k, kind, text) in rewrites {
        let rewritten = rewritten(native, &message, &kept.items, k, kind, text)?;
        kept.rewrites.push(rewritten);
    }
    Some(kept)
}

/// Where canonical message `k` of `native`, rewritten by `kind` to `text`, lies among the
/// kept `items`; None when it is not kept whole, or a result rewrite is of no tool result.
fn rewritten<'p, 'm>(
    native: &Native,
    message: &impl Fn(usize) -> Option<&'m Message>,
    items: &[usize],
    k: usize,
    kind: RewriteKind,
    text: &'p str,
) -> Option<Rewritten<'p>> {
    let call_id = match kind {
        RewriteKind::Media => None,
        _ => Some(message(k)?.tool_call_id.clone()?),
    };
    let (start, end) = (*native.spans.get(k)?)?;
    let first = items.binary_search(&start).ok()?;
    let at = first..first + (end - start);
    if !items.get(at.clone())?.iter().copied().eq(start..end) {
        return None;
    }
    // The results of the first item before this one (a provider that finds them by place).
    let nth = (0..k)
        .filter(|&j| {
            native.spans[j].is_some_and(|(s, _)| s == start)
                && message(j).is_some_and(|m| m.role == Role::Tool)
        })
        .count();
    Some(Rewritten {
        at,
        call_id,
        nth,
        text,
    })
}

/// What keeping the canonical messages `canonical` of `native` sends (`kept_as_given` of a
/// plan that keeps them), `notes` the ledger and summary notes, each one's position counted
/// in `canonical`; `left_out` the system texts the plan leaves out (earlier notes its own
/// replace).
///
/// Errors: as `kept_as_given`.
pub fn kept_of<'p>(
    provider: &str,
    native: &Native,
    canonical: &[usize],
    notes: Vec<(&'p str, Role, usize)>,
    system_markers: u32,
    left_out: usize,
) -> Result<Option<Kept<'p>>, CoreError> {
    // The system is written as the caller gave it (or with the note) only while every
    // system text stays, but the `left_out` earlier notes a new one replaces.
    let system = native.spans.iter().filter(|s| s.is_none()).count();
    if canonical
        .iter()
        .filter(|&&k| native.spans.get(k) == Some(&None))
        .count()
        + left_out
        != system
    {
        return Ok(None);
    }
    let notes = notes
        .into_iter()
        .map(|(text, role, at)| {
            let before = native.kept(canonical[..at.min(canonical.len())].iter().copied())?;
            Ok::<_, CoreError>((text, role, before.len()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let items = native.kept(canonical.iter().copied())?;
    let sends = Sends {
        facts: &native.facts,
        kept: &items,
    };
    let Some((runs, parted)) = with_provider(provider, sends)? else {
        return Ok(None);
    };
    let merges = runs
        .into_iter()
        .map(|run| {
            let role = native.facts[items[run.start]].role.unwrap_or("user");
            (run, role)
        })
        .collect();
    let markers = over_marker_limit(provider, native, &items, system_markers)?;
    let strips = (0..items.len())
        .filter(|&j| native.facts[items[j]].blank_text)
        .collect();
    Ok(Some(Kept {
        items,
        notes,
        merges,
        strips,
        parted,
        markers,
        rewrites: Vec::new(),
        added: Vec::new(),
        rebase: false,
    }))
}

/// The kept items as sent, and the input's items written stripped.
type AsSent<'a> = (Vec<Cow<'a, [u8]>>, Vec<usize>);

/// Each kept item of `kept` as `provider` sends it, `raw` giving the caller's JSON of an
/// item (by its index among the input's): the caller's bytes, its rewritten results edited
/// in, without the text the provider strips. Only the positions `wanted` are written (all
/// when None); None when the core does not write one. Also the input's items written
/// stripped, in order.
fn as_sent<'a>(
    provider: &str,
    kept: &Kept<'_>,
    raw: &dyn Fn(usize) -> Option<&'a [u8]>,
    wanted: Option<&[bool]>,
) -> Result<Option<AsSent<'a>>, CoreError> {
    let mut sent: Vec<Cow<'a, [u8]>> = Vec::with_capacity(kept.items.len());
    for (j, &i) in kept.items.iter().enumerate() {
        let bytes = match wanted {
            Some(w) if !w[j] => &[][..],
            _ => raw(i).ok_or_else(|| CoreError::InvalidMessage {
                index: Some(i),
                reason: "the item's JSON is missing".to_owned(),
            })?,
        };
        sent.push(bytes.into());
    }
    for rewrite in &kept.rewrites {
        let written = |j: &usize| wanted.is_none_or(|w| w[*j]);
        if !rewrite.at.clone().any(|j| written(&j)) {
            continue;
        }
        let mut changed = false;
        for j in rewrite.at.clone().filter(written) {
            let first = j == rewrite.at.start;
            let edit = match &rewrite.call_id {
                Some(call_id) => Rewrite::Result(ResultAt {
                    call_id,
                    nth: first.then_some(rewrite.nth),
                }),
                None => Rewrite::Media(first),
            };
            match with_provider(provider, (&*sent[j], edit, rewrite.text))? {
                None => return Ok(None),
                Some(None) => {}
                Some(Some(item)) => {
                    sent[j] = item.into();
                    changed = true;
                }
            }
        }
        if !changed {
            // The plan counted a rewrite the items do not show: the adapter's to tell.
            return Ok(None);
        }
    }
    let mut stripped = Vec::new();
    for &j in &kept.strips {
        if wanted.is_some_and(|w| !w[j]) {
            continue;
        }
        match with_provider(provider, Stripped(&sent[j]))? {
            None => return Ok(None),
            Some(None) => {}
            Some(Some(item)) => {
                sent[j] = item.into();
                stripped.push(kept.items[j]);
            }
        }
    }
    Ok(Some((sent, stripped)))
}

/// One item of a history the core writes from a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// The caller's item at this index (among the input's), as it is.
    Keep(usize),
    /// A new item, as JSON, made of the caller's items `origins`: one edited (a result cut or
    /// stubbed, images made text, blank text stripped), or neighbours merged; none for the
    /// ledger note.
    New { origins: Vec<usize>, json: Vec<u8> },
}

/// The history a plan the core writes sends, and the system beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// The items, in order.
    pub pieces: Vec<Piece>,
    /// The system to send, as JSON, when a note goes into it; None when the system stays as
    /// the caller gave it.
    pub system: Option<String>,
    /// The notes placed in the system, in order: each a system text of the request sent.
    pub system_notes: Vec<String>,
    /// The input's items written without the text the provider strips, in order.
    pub stripped: Vec<usize>,
}

/// The history `kept` sends, as `provider` writes it: each kept item as the caller gave it
/// unless a rewrite or a strip edits it, each run `kept` merges as one item, the ledger note
/// where `provider` places it. `system` is the system's JSON (`Some(None)`: there is none;
/// None: a system whose JSON the core was not given, where it places no note);
/// `raw` gives the caller's JSON of an item by its index among the input's, asked only for the
/// items written anew unless `every` (the body path, which writes every item's bytes). None
/// when the core does not write a piece of it.
///
/// Errors: `Config` for an unknown provider; `InvalidMessage` for an item `raw` lacks.
pub fn history<'a>(
    provider: &str,
    kept: &Kept<'_>,
    system: Option<Option<&str>>,
    raw: &dyn Fn(usize) -> Option<&'a [u8]>,
    every: bool,
) -> Result<Option<History>, CoreError> {
    let mut note_items: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut system_out: Option<String> = None;
    let mut system_notes = Vec::new();
    if !kept.notes.is_empty() {
        struct Place<'a>(Option<&'a str>, &'a str);
        impl ForProvider for Place<'_> {
            type Out = NoteAt;
            fn run<P: Provider>(self, p: P) -> NoteAt {
                p.ledger_note(self.0, self.1)
            }
        }
        let Some(system) = system else {
            return Ok(None);
        };
        let system = system.filter(|s| *s != "null");
        let base;
        let system = match (kept.rebase, system) {
            (false, system) => system,
            (true, Some(json)) => {
                base = with_provider(provider, WithoutNotes(json))?;
                match &base {
                    Some(base) => Some(base.as_str()),
                    None => return Ok(None),
                }
            }
            (true, None) => return Ok(None),
        };
        for &(text, role, before) in &kept.notes {
            // Each note after the one before it: the summary follows the ledger note.
            let current = system_out.as_deref().or(system);
            match with_provider(provider, Place(current, text))? {
                NoteAt::Items => {
                    let item = format!(
                        r#"{{"type":"message","role":{},"content":{}}}"#,
                        json_string(role.as_str()),
                        json_string(text)
                    );
                    note_items.push((before, item.into_bytes()));
                }
                NoteAt::System(value) => {
                    system_out = Some(value);
                    system_notes.push(text.to_owned());
                }
                NoteAt::Adapter => return Ok(None),
            }
        }
    }
    let mut wanted = vec![every; kept.items.len()];
    for (run, _) in &kept.merges {
        wanted[run.clone()].iter_mut().for_each(|w| *w = true);
    }
    for rewrite in &kept.rewrites {
        wanted[rewrite.at.clone()]
            .iter_mut()
            .for_each(|w| *w = true);
    }
    for &j in &kept.strips {
        wanted[j] = true;
    }
    for j in kept.added.iter().filter_map(Added::target) {
        wanted[j] = true;
    }
    let Some((mut sent, stripped)) = as_sent(provider, kept, raw, Some(&wanted))? else {
        return Ok(None);
    };
    for added in kept.added.iter().filter(|a| a.into) {
        let edit = Results(Some(&sent[added.at]), &added.results);
        let Some(item) = with_provider(provider, edit)? else {
            return Ok(None);
        };
        sent[added.at] = item.into();
    }
    let mut pieces = Vec::with_capacity(kept.items.len() + 1);
    let mut merges = kept.merges.iter().peekable();
    let mut j = 0;
    let mut notes = note_items.into_iter().peekable();
    // New results items that go out merged with the item written next (`Added::joined`).
    let mut joining: Vec<Vec<u8>> = Vec::new();
    while j < kept.items.len() {
        while let Some((_, item)) = notes.next_if(|(before, _)| *before == j) {
            pieces.push(Piece::New {
                origins: Vec::new(),
                json: item,
            });
        }
        if kept.parted.0.contains(&j) {
            pieces.push(Piece::New {
                origins: Vec::new(),
                json: kept.parted.1.as_bytes().to_vec(),
            });
        }
        match merges.next_if(|(run, _)| run.start == j) {
            Some((run, role)) => {
                let run_items: Vec<&[u8]> = (joining.iter().map(Vec::as_slice))
                    .chain(sent[run.clone()].iter().map(|b| &b[..]))
                    .collect();
                let Some(item) = with_provider(provider, Merged(role, &run_items))? else {
                    return Ok(None);
                };
                pieces.push(Piece::New {
                    origins: kept.items[run.clone()].to_vec(),
                    json: item,
                });
                j = run.end;
            }
            None if !joining.is_empty() => {
                let i = kept.items[j];
                let items: Vec<&[u8]> = (joining.iter().map(Vec::as_slice))
                    .chain([&sent[j][..]])
                    .collect();
                let Some(item) = with_provider(provider, Merged("user", &items))? else {
                    return Ok(None);
                };
                pieces.push(Piece::New {
                    origins: vec![i],
                    json: item,
                });
                j += 1;
            }
            None => {
                let i = kept.items[j];
                match std::mem::take(&mut sent[j]) {
                    Cow::Owned(json) => pieces.push(Piece::New {
                        origins: vec![i],
                        json,
                    }),
                    Cow::Borrowed(_) => pieces.push(Piece::Keep(i)),
                }
                j += 1;
            }
        }
        joining.clear();
        // New result items after the last item written: a merged run's never parts it.
        for added in kept.added.iter().filter(|a| !a.into && a.at + 1 == j) {
            if added.after_notes {
                while let Some((_, item)) = notes.next_if(|(before, _)| *before == j) {
                    pieces.push(Piece::New {
                        origins: Vec::new(),
                        json: item,
                    });
                }
            }
            let Some(json) = with_provider(provider, Results(None, &added.results))? else {
                return Ok(None);
            };
            if added.joined {
                joining.push(json);
                continue;
            }
            pieces.push(Piece::New {
                origins: Vec::new(),
                json,
            });
        }
    }
    // The notes after every kept item.
    for (_, item) in notes {
        pieces.push(Piece::New {
            origins: Vec::new(),
            json: item,
        });
    }
    if let Some((markers, system)) = &kept.markers {
        within_marker_limit(provider, kept, &pieces, markers, *system)?;
    }
    Ok(Some(History {
        pieces,
        system: system_out,
        system_notes,
        stripped,
    }))
}

/// Each kept item's prompt cache markers and the system's, where together they are more than
/// `provider` allows (None: within its limit, or it sets none).
fn over_marker_limit(
    provider: &str,
    native: &Native,
    items: &[usize],
    system: u32,
) -> Result<Option<(Vec<u32>, u32)>, CoreError> {
    let Some(limit) = with_provider(provider, Limit)? else {
        return Ok(None);
    };
    let markers: Vec<u32> = items
        .iter()
        .map(|&i| native.facts[i].cache_markers)
        .collect();
    let total = markers.iter().fold(system, |n, &m| n.saturating_add(m));
    Ok((total > limit.most).then_some((markers, system)))
}

/// Refuses, in the provider's words, a request whose items as written (`pieces`) and system
/// carry more prompt cache markers than it allows, naming the caller's item where the count
/// first goes over (the first one that stands for one item of the caller's: the adapter's
/// choice). Kept items count as `markers` says, items written anew as they read.
fn within_marker_limit(
    provider: &str,
    kept: &Kept<'_>,
    pieces: &[Piece],
    markers: &[u32],
    system: u32,
) -> Result<(), CoreError> {
    let Some(limit) = with_provider(provider, Limit)? else {
        return Ok(());
    };
    let mut n = system;
    let mut first_over = None;
    for piece in pieces {
        let (origin, m) = match piece {
            Piece::Keep(i) => {
                let m = kept.items.binary_search(i).map_or(0, |j| markers[j]);
                (Some(*i), m)
            }
            Piece::New { origins, json } => match origins.as_slice() {
                [i] => (Some(*i), (limit.count)(json)),
                _ => (None, (limit.count)(json)),
            },
        };
        n = n.saturating_add(m);
        if n > limit.most && first_over.is_none() {
            first_over = origin;
        }
    }
    if n <= limit.most {
        return Ok(());
    }
    Err(CoreError::InvalidMessage {
        index: first_over,
        reason: (limit.refusal)(n),
    })
}

/// The provider's limit on prompt cache markers.
struct Limit;

impl ForProvider for Limit {
    type Out = Option<MarkerLimit>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        p.marker_limit()
    }
}

struct Sends<'a> {
    facts: &'a [ItemFacts],
    kept: &'a [usize],
}

impl ForProvider for Sends<'_> {
    /// The runs of kept items to merge and where items of the provider's own part kept ones
    /// (none of either: sent as given), or None for the adapter's.
    type Out = Option<(Vec<Range<usize>>, (Vec<usize>, &'static str))>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        if p.sends_as_given(self.facts, self.kept) {
            return Some((Vec::new(), (Vec::new(), "")));
        }
        let runs = p.merges(self.facts, self.kept)?;
        let runs = runs
            .into_iter()
            .filter(|run| run.merge)
            .map(|run| run.range)
            .collect();
        Some((runs, p.parted(self.facts, self.kept)))
    }
}

/// One item without the text the provider strips, written by the provider.
struct Stripped<'a>(&'a [u8]);

impl ForProvider for Stripped<'_> {
    type Out = Option<Option<Vec<u8>>>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        p.stripped(self.0)
    }
}

/// What a rewrite changes in an item: a result, or the images (in the first item of the
/// canonical message's span or another).
enum Rewrite<'a> {
    Result(ResultAt<'a>),
    Media(bool),
}

/// One item rewritten to a text, written by the provider.
impl ForProvider for (&[u8], Rewrite<'_>, &str) {
    type Out = Option<Option<Vec<u8>>>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        let (item, rewrite, text) = self;
        match rewrite {
            Rewrite::Result(at) => p.result_rewritten(item, at, text),
            Rewrite::Media(first) => p.media_rewritten(item, first, text),
        }
    }
}

/// A system without the notes an earlier assembly left in it, written by the provider.
struct WithoutNotes<'a>(&'a str);

impl ForProvider for WithoutNotes<'_> {
    type Out = Option<String>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        p.without_notes(self.0)
    }
}

/// Synthesized results written by the provider: into a kept item, or as a new one.
struct Results<'a>(Option<&'a [u8]>, &'a [String]);

impl ForProvider for Results<'_> {
    type Out = Option<Vec<u8>>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        match self.0 {
            Some(item) => p.with_results(item, self.1),
            None => p.results_item(self.1),
        }
    }
}

/// One merged item, written by the provider.
struct Merged<'a>(&'a str, &'a [&'a [u8]]);

impl ForProvider for Merged<'_> {
    type Out = Option<Vec<u8>>;
    fn run<P: Provider>(self, p: P) -> Self::Out {
        p.merged(self.0, self.1)
    }
}

/// The head's system field: its key (None for a provider without one) and its value.
#[derive(Clone, Copy, Debug, Default)]
pub struct System<'h> {
    pub key: Option<&'h str>,
    pub value: Option<&'h RawValue>,
}

/// The body to send and the items of its history: `head`, a body whose history array is the
/// `[]` at `at`, with the history written as the `items` `kept` keeps (`history`), and the
/// ledger note where `provider` writes it; None when the core does not write the note there
/// (a system of a shape the core does not rewrite, or a body without a system field where the
/// note goes in one) or a run. Every other byte of `head` is kept.
///
/// Errors: `Config` for an unknown provider.
pub fn write(
    provider: &str,
    head: &[u8],
    at: Range<usize>,
    system: System<'_>,
    items: &[&[u8]],
    kept: &Kept<'_>,
) -> Result<Option<Written>, CoreError> {
    let raw = |i: usize| items.get(i).copied();
    let Some(written) = history(
        provider,
        kept,
        Some(system.value.map(RawValue::get)),
        &raw,
        true,
    )?
    else {
        return Ok(None);
    };
    let mut edits = Vec::with_capacity(2);
    if let Some(value) = written.system {
        let Some(key) = system.key else {
            return Ok(None);
        };
        edits.push(match system.value {
            Some(old) => match within(head, old) {
                Some(range) => (range, value.into_bytes()),
                None => return Ok(None),
            },
            None => {
                // A new last field, as the adapter's path appends it.
                let end = head.iter().rposition(|&b| b == b'}').unwrap_or(head.len());
                let field = format!(",{}:{value}", json_string(key));
                (end..end, field.into_bytes())
            }
        });
    }
    let size = written
        .pieces
        .iter()
        .map(|p| match p {
            Piece::Keep(i) => items[*i].len() + 1,
            Piece::New { json, .. } => json.len() + 1,
        })
        .sum::<usize>();
    let mut out_history = Vec::with_capacity(size + 2);
    out_history.push(b'[');
    for (n, piece) in written.pieces.iter().enumerate() {
        if n > 0 {
            out_history.push(b',');
        }
        out_history.extend_from_slice(match piece {
            Piece::Keep(i) => items[*i],
            Piece::New { json, .. } => json,
        });
    }
    out_history.push(b']');
    let history_at = at.start;
    edits.push((at, out_history));
    edits.sort_by_key(|(range, _)| range.start);
    let size = edits.iter().map(|(_, b)| b.len()).sum::<usize>();
    let mut out = Vec::with_capacity(head.len() + size);
    let mut from = 0;
    let mut history_range = 0..0;
    for (range, bytes) in edits {
        out.extend_from_slice(&head[from..range.start]);
        if range.start == history_at {
            history_range = out.len()..out.len() + bytes.len();
        }
        out.extend_from_slice(&bytes);
        from = range.end;
    }
    out.extend_from_slice(&head[from..]);
    Ok(Some(Written {
        body: out,
        items: written.pieces.len(),
        history: history_range,
        stripped: written.stripped,
        system_notes: written.system_notes,
    }))
}

/// A body `write` wrote.
pub struct Written {
    pub body: Vec<u8>,
    /// Items of its history.
    pub items: usize,
    /// Where its history's array lies in `body`.
    pub history: Range<usize>,
    /// The input's items written without the text the provider strips, in order.
    pub stripped: Vec<usize>,
    /// The notes placed in the system, in order (`History::system_notes`).
    pub system_notes: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::Body;
    use crate::cache::CountCache;
    use crate::count::chat::REPLY_PRIMING;
    use crate::count::{Backend, Encoding};
    use crate::json_array;
    use crate::native::read_elements;
    use crate::pairing::PairingIssue;
    use crate::plan::{plan, tests::cfg, PlanConfig};
    use crate::request::{load_canonical, Limits, Scheme};

    /// The providers whose bodies the core writes.
    const NATIVE: [&str; 4] = [
        "anthropic",
        "bedrock_converse",
        "gemini",
        "openai_responses",
    ];

    const LIMITS: Limits = Limits {
        max_messages: 1 << 20,
        max_request_bytes: 1 << 30,
    };

    /// A ring of `provider`'s own format, its bytes as a client writes them.
    fn ring(provider: &str, n: usize, pad: &str) -> String {
        match provider {
            "anthropic" => format!(
                r#"{{"role":"assistant","content":[{{"type":"tool_use","id":"t{n}","name":"read","input":{{"p":"{n}"}}}}]}},
                   {{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t{n}","content":"{pad}"}}]}}"#
            ),
            "bedrock_converse" => format!(
                r#"{{"role":"assistant","content":[{{"toolUse":{{"toolUseId":"t{n}","name":"read","input":{{"p":"{n}"}}}}}}]}},
                   {{"role":"user","content":[{{"toolResult":{{"toolUseId":"t{n}","content":[{{"text":"{pad}"}}]}}}}]}}"#
            ),
            "gemini" => format!(
                r#"{{"role":"model","parts":[{{"functionCall":{{"name":"read","args":{{"p":"{n}"}}}}}}]}},
                   {{"role":"user","parts":[{{"functionResponse":{{"name":"read","response":{{"r":"{pad}"}}}}}}]}}"#
            ),
            _ => format!(
                r#"{{"type":"function_call","call_id":"t{n}","name":"read","arguments":"{n}"}},
                   {{"type":"function_call_output","call_id":"t{n}","output":"{pad}"}}"#
            ),
        }
    }

    fn session(provider: &str, rings: usize) -> String {
        let user = match provider {
            "gemini" => r#"{"role":"user","parts":[{"text":"fix the bug"}]}"#,
            "bedrock_converse" => r#"{"role":"user","content":[{"text":"fix the bug"}]}"#,
            _ => r#"{"role":"user","content":"fix the bug"}"#,
        };
        let pad = "word ".repeat(200);
        let mut items = vec![user.to_owned()];
        items.extend((0..rings).map(|n| ring(provider, n, &pad)));
        format!("[{}]", items.join(",\n"))
    }

    /// The history's items, read, and planned to `budget`.
    fn planned<'h>(provider: &str, history: &'h str, budget: u64) -> (Vec<&'h [u8]>, Native, Plan) {
        let items = json_array::split(history.as_bytes()).unwrap();
        let native = read_elements(provider, &items, &[]).unwrap();
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1 << 16, 1 << 28);
        let request = load_canonical(native.messages.clone(), None, scheme, &cache).unwrap();
        let planned = plan(&request, &cfg(budget), &native.pinned, Some(&native.layout)).unwrap();
        (items, native, planned)
    }

    /// The body of `history` planned to `budget`, written when the plan keeps items only.
    fn assembled(provider: &str, history: &str, budget: u64) -> Option<(Vec<u8>, Vec<usize>)> {
        let head = r#"{"model": "m", "history": [], "temperature": 0.5}"#;
        let (_, split) = Body::parse_with_history(head.as_bytes(), "history", LIMITS).unwrap();
        let (_, at) = split.unwrap();
        let (items, native, planned) = planned(provider, history, budget);
        let kept =
            kept_as_given(provider, &native, &planned, 0, |k| native.messages.get(k)).unwrap()?;
        let out = write(
            provider,
            head.as_bytes(),
            at,
            System::default(),
            &items,
            &kept,
        );
        Some((out.unwrap()?.body, kept.items))
    }

    #[test]
    fn a_trimmed_body_is_the_head_with_the_kept_items_as_given() {
        for provider in NATIVE {
            let history = session(provider, 30);
            let items = json_array::split(history.as_bytes()).unwrap();
            let (body, kept) = assembled(provider, &history, 4_000).expect(provider);
            assert!(
                kept.len() < items.len(),
                "{provider}: the plan dropped rings"
            );
            assert_eq!(kept[0], 0, "{provider}: the user's goal stays");
            let text = String::from_utf8(body).unwrap();
            let kept_json: Vec<&str> = kept
                .iter()
                .map(|&i| std::str::from_utf8(items[i]).unwrap())
                .collect();
            let expected = format!(
                r#"{{"model": "m", "history": [{}], "temperature": 0.5}}"#,
                kept_json.join(",")
            );
            assert_eq!(text, expected, "{provider}");
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(value["history"].as_array().unwrap().len(), kept.len());
        }
    }

    #[test]
    fn gemini_contents_a_drop_brings_together_go_out_as_one() {
        // Two user contents meet once the ring between them is dropped: one content, the
        // first one's fields and both one's parts, as the adapter merges them; neighbours of
        // one role in the history stay.
        let pad = "word ".repeat(400);
        let history = format!(
            r#"[{{"role":"user","parts":[{{"text":"first"}}]}},
                {},
                {{"role":"user","parts":[{{"text":"second"}}]}},
                {}]"#,
            ring("gemini", 0, &pad),
            ring("gemini", 1, &pad)
        );
        let (body, kept) = assembled("gemini", &history, 600).unwrap();
        assert_eq!(kept, [0, 3, 4, 5]);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value["history"][0],
            serde_json::json!({"role": "user", "parts": [{"text": "first"}, {"text": "second"}]})
        );
        assert_eq!(value["history"].as_array().unwrap().len(), 3);
        let (_, kept) = assembled("gemini", &history, 100_000).unwrap();
        assert_eq!(kept, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn anthropic_neighbours_a_drop_brings_together_go_out_as_one_message() {
        // Neighbours of one role in the history go out as they are (the tool result and the
        // user text after it); those a drop brings together, as its adapter merges them.
        let pad = "word ".repeat(400);
        let history = format!(
            r#"[{{"role":"user","content":"first"}}, {},
                {{"role":"user","content":"and then"}},
                {{"role":"assistant","content":"{pad}"}},
                {{"role":"user","content":"second"}}, {}]"#,
            ring("anthropic", 0, "r"),
            ring("anthropic", 1, "r")
        );
        let (body, kept) = assembled("anthropic", &history, 100_000).unwrap();
        assert_eq!(kept, [0, 1, 2, 3, 4, 5, 6, 7]);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["history"].as_array().unwrap().len(), 8);
        let (body, kept) = assembled("anthropic", &history, 300).unwrap();
        assert_eq!(kept, [0, 5, 6, 7]);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["history"].as_array().unwrap().len(), 3);
        assert_eq!(
            value["history"][0],
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "first"}, {"type": "text", "text": "second"}]})
        );
    }

    #[test]
    fn whitespace_text_is_stripped_and_too_many_cache_markers_are_refused() {
        let blank = r#"[{"role":"user","content":[{"type":"text","text":"go"},{"type":"text","text":"\n\n"}]},
                        {"role":"assistant","content":"ok"}]"#;
        let (body, _) = assembled("anthropic", blank, 100_000).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value["history"][0]["content"],
            serde_json::json!([{"type": "text", "text": "go"}])
        );
        let marked = r#"[{"role":"user","content":[{"type":"text","text":"go","cache_control":{"type":"ephemeral"}}]},
                         {"role":"assistant","content":"ok"}]"#;
        assert!(assembled("anthropic", marked, 100_000).is_some());
        let items = json_array::split(marked.as_bytes()).unwrap();
        let native = read_elements("anthropic", &items, &[]).unwrap();
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1 << 16, 1 << 28);
        let request = load_canonical(native.messages.clone(), None, scheme, &cache).unwrap();
        let plan = plan(&request, &cfg(100_000), &[], Some(&native.layout)).unwrap();
        assert!(
            kept_as_given("anthropic", &native, &plan, 3, |k| native.messages.get(k))
                .unwrap()
                .is_some()
        );
        // Over the limit: refused in the API's words, naming the item that goes over it.
        let kept = kept_as_given("anthropic", &native, &plan, 4, |k| native.messages.get(k))
            .unwrap()
            .expect("written by the core");
        let items = json_array::split(marked.as_bytes()).unwrap();
        let raw = |i: usize| items.get(i).copied();
        match history("anthropic", &kept, Some(None), &raw, true) {
            Err(CoreError::InvalidMessage {
                index: Some(0),
                reason,
            }) => assert!(
                reason.starts_with(
                    "A maximum of 4 blocks with cache_control may be provided. Found 5."
                ),
                "{reason}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cut_results_are_written_where_they_lie_and_sent_as_planned() {
        // Rings whose results a small limit cuts and a budget just under the whole session:
        // the plan keeps every item and cuts results, and the core writes it; the history
        // sent reads back paired, at the tokens planned, every other item the caller's bytes.
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1 << 16, 1 << 28);
        let head = r#"{"history": [], "n": 1}"#;
        for provider in NATIVE {
            let history = session(provider, 8);
            let items = json_array::split(history.as_bytes()).unwrap();
            let native = read_elements(provider, &items, &[]).unwrap();
            let request = load_canonical(native.messages.clone(), None, scheme, &cache).unwrap();
            let full = request.message_tokens() + u64::from(REPLY_PRIMING);
            let config = PlanConfig {
                max_tool_result_tokens: 120,
                min_result_tokens: 20,
                ..cfg(full - 300)
            };
            let planned = plan(&request, &config, &native.pinned, Some(&native.layout)).unwrap();
            assert!(
                !planned.rewrites.is_empty() && planned.dropped_rings.is_empty(),
                "{provider}: {:?} {:?} of {full}",
                planned.rewrites,
                planned.dropped_rings
            );
            let kept = kept_as_given(provider, &native, &planned, 0, |k| native.messages.get(k))
                .unwrap()
                .expect(provider);
            assert_eq!(kept.rewrites.len(), planned.rewrites.len(), "{provider}");
            let (_, split) = Body::parse_with_history(head.as_bytes(), "history", LIMITS).unwrap();
            let (_, at) = split.unwrap();
            let out = write(
                provider,
                head.as_bytes(),
                at,
                System::default(),
                &items,
                &kept,
            )
            .unwrap()
            .expect(provider);
            let sent = json_array::split(&out.body[out.history.clone()]).unwrap();
            let again = read_elements(provider, &sent, &[]).unwrap();
            assert!(again.issues.is_empty(), "{provider}");
            let counted = load_canonical(again.messages, None, scheme, &cache).unwrap();
            assert_eq!(
                counted.message_tokens() + u64::from(REPLY_PRIMING),
                planned.tokens_after,
                "{provider}"
            );
            let cut: Vec<usize> = kept.rewrites.iter().map(|r| r.at.start).collect();
            for (j, &i) in kept.items.iter().enumerate() {
                assert_eq!(
                    sent[j] == items[i],
                    !cut.contains(&j),
                    "{provider} item {i}"
                );
            }
            for rewrite in &kept.rewrites {
                let text = json_string(rewrite.text);
                let item = std::str::from_utf8(sent[rewrite.at.start]).unwrap();
                assert!(item.contains(&text), "{provider}: {item}");
            }
        }
    }

    #[test]
    fn a_gemini_result_synthesized_is_counted_as_the_adapter_writes_it() {
        // A call without a response: the plan synthesizes one, counted as Gemini reads what
        // the adapter writes (`{"name": ..., "response": {"error": text}}`), so the request
        // with that response in place counts what the plan did.
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1 << 16, 1 << 28);
        let call = r#"{"role":"model","parts":[{"functionCall":{"name":"lookup_order","args":{"id":7}}}]}"#;
        let after = r#"{"role":"user","parts":[{"text":"go on"}]}"#;
        let response = format!(
            r#"{{"role":"user","parts":[{{"functionResponse":{{"name":"lookup_order","response":{{"error":{}}}}}}}]}}"#,
            json_string(crate::plan::SYNTHESIZED_RESULT_TEXT)
        );
        let user = r#"{"role":"user","parts":[{"text":"find it"}]}"#;
        let count = |items: &[&str], synthesize: bool| {
            let history = format!("[{}]", items.join(","));
            let raws = json_array::split(history.as_bytes()).unwrap();
            let native = read_elements("gemini", &raws, &[]).unwrap();
            let request = load_canonical(native.messages.clone(), None, scheme, &cache).unwrap();
            let config = PlanConfig {
                synthesize_missing_results: synthesize,
                ..cfg(1 << 20)
            };
            let planned = plan(&request, &config, &native.pinned, Some(&native.layout)).unwrap();
            (planned.tokens_after, planned.repairs)
        };
        let (synthesized, repairs) = count(&[user, call, after], true);
        assert_eq!(repairs.len(), 1);
        let (sent, none) = count(&[user, call, &response, after], false);
        assert!(none.is_empty());
        assert_eq!(synthesized, sent);
    }

    #[test]
    fn synthesized_results_go_where_the_provider_puts_them() {
        // A call that lost its result, repaired: the core writes the error result where
        // each adapter does, the kept items around it as given.
        let scheme = Scheme::openai(Encoding::O200kBase, Backend::BpeOpenai);
        let cache = CountCache::new(1 << 16, 1 << 28);
        let text = json_string(crate::plan::SYNTHESIZED_RESULT_TEXT);
        let gemini_call = r#"{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]}"#;
        let gemini_response =
            format!(r#"{{"functionResponse":{{"name":"f","response":{{"error":{text}}}}}}}"#);
        let anthropic_call = r#"{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]}"#;
        let anthropic_result = format!(
            r#"{{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":{text}}}"#
        );
        let responses_call =
            r#"{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}"#;
        // Each case: the provider, its items, and the one new item written last.
        let cases: [(&str, Vec<&str>, String); 4] = [
            (
                "gemini",
                vec![
                    r#"{"role":"user","parts":[{"text":"go"}]}"#,
                    gemini_call,
                    r#"{"role":"user","parts":[{"text":"on"}]}"#,
                ],
                format!(r#"{{"role":"user","parts":[{gemini_response},{{"text":"on"}}]}}"#),
            ),
            (
                "gemini",
                vec![r#"{"role":"user","parts":[{"text":"go"}]}"#, gemini_call],
                format!(r#"{{"role":"user","parts":[{gemini_response}]}}"#),
            ),
            (
                "anthropic",
                vec![
                    r#"{"role":"user","content":"go"}"#,
                    anthropic_call,
                    r#"{"role":"user","content":"on"}"#,
                ],
                format!(
                    r#"{{"role":"user","content":[{anthropic_result},{{"type":"text","text":"on"}}]}}"#
                ),
            ),
            (
                "openai_responses",
                vec![r#"{"role":"user","content":"go"}"#, responses_call],
                format!(r#"{{"type":"function_call_output","call_id":"c1","output":{text}}}"#),
            ),
        ];
        for (provider, items, expected) in cases {
            let array = format!("[{}]", items.join(","));
            let raws = json_array::split(array.as_bytes()).unwrap();
            let native = read_elements(provider, &raws, &[]).unwrap();
            let request = load_canonical(native.messages.clone(), None, scheme, &cache).unwrap();
            let config = PlanConfig {
                synthesize_missing_results: true,
                ..cfg(1 << 20)
            };
            let planned = plan(&request, &config, &native.pinned, Some(&native.layout)).unwrap();
            assert_eq!(planned.repairs.len(), 1, "{provider}");
            let message = |k| native.messages.get(k);
            let kept = kept_of_items(provider, &native, &planned.items, None, 0, message)
                .unwrap()
                .unwrap();
            let raw = |i: usize| raws.get(i).copied();
            let written = history(provider, &kept, Some(None), &raw, false)
                .unwrap()
                .unwrap();
            let n = written.pieces.len();
            assert_eq!(n, 3, "{provider}");
            assert_eq!(written.pieces[..2], [Piece::Keep(0), Piece::Keep(1)]);
            let Some(Piece::New { json, .. }) = written.pieces.last() else {
                panic!("{provider}: no new item");
            };
            let got: serde_json::Value = serde_json::from_slice(json).unwrap();
            let want: serde_json::Value = serde_json::from_str(&expected).unwrap();
            assert_eq!(got, want, "{provider}");
            // What goes out pairs.
            let sent = crate::native::sent(provider, &native, &written.pieces, &[]).unwrap();
            assert!(sent.issues.is_empty(), "{provider}: {:?}", sent.issues);
        }
    }

    /// The items the core writes for the hand-made plan `items` of `provider`'s `raws`
    /// (calls left unanswered), and the pairing issues of that request as sent.
    fn written_plan(
        provider: &str,
        raws: &[&[u8]],
        items: &[Item],
    ) -> (Vec<serde_json::Value>, Vec<PairingIssue>) {
        let native = read_elements(provider, raws, &[]).unwrap();
        let message = |k| native.messages.get(k);
        let kept = kept_of_items(provider, &native, items, None, 0, message)
            .unwrap()
            .expect(provider);
        let raw = |i: usize| raws.get(i).copied();
        let written = history(provider, &kept, Some(None), &raw, true)
            .unwrap()
            .expect(provider);
        let sent = crate::native::sent(provider, &native, &written.pieces, &[]).unwrap();
        let out = written
            .pieces
            .iter()
            .map(|piece| match piece {
                Piece::Keep(i) => serde_json::from_slice(raws[*i]).unwrap(),
                Piece::New { json, .. } => serde_json::from_slice(json).unwrap(),
            })
            .collect();
        (out, sent.issues)
    }

    #[test]
    fn a_synthesized_output_keeps_its_place_beside_a_note() {
        // Responses: the output item and the ledger note sent as an item go in the plan's
        // order, as the adapter renders them. A note between a call and its output parts
        // them: the request as sent says so, and is never counted as sent.
        let array = r#"[{"role":"user","content":"go"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]"#;
        let raws = json_array::split(array.as_bytes()).unwrap();
        let note = Item::LedgerNote {
            text: format!("{} sent", crate::ledger::MARKER),
            role: Role::Developer,
        };
        let output = Item::SynthesizedResult {
            call_id: "c1".into(),
        };
        for note_first in [true, false] {
            let mut items = vec![Item::Keep(0), Item::Keep(1)];
            if note_first {
                items.extend([note.clone(), output.clone()]);
            } else {
                items.extend([output.clone(), note.clone()]);
            }
            let (out, issues) = written_plan("openai_responses", &raws, &items);
            let types: Vec<&str> = out[2..]
                .iter()
                .map(|v| v["type"].as_str().unwrap())
                .collect();
            let want = if note_first {
                ["message", "function_call_output"]
            } else {
                ["function_call_output", "message"]
            };
            assert_eq!(types, want, "note first: {note_first}");
            let kinds: Vec<IssueKind> = issues.iter().map(|i| i.kind).collect();
            let parted: &[IssueKind] = if note_first {
                &[IssueKind::ResultNotAdjacent]
            } else {
                &[]
            };
            assert_eq!(kinds, parted, "note first: {note_first}");
        }
    }

    #[test]
    fn bedrock_results_of_their_own_join_the_results_turn_after_them() {
        // A plan that puts the error result behind the call's turn, before the results turn
        // the call's other result holds: one user turn, the synthesized result first, as the
        // adapter merges the two.
        let array = r#"[{"role":"user","content":[{"text":"go"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"a","name":"f","input":{}}},{"toolUse":{"toolUseId":"b","name":"f","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"b","content":[{"text":"ok"}]}}]}]"#;
        let raws = json_array::split(array.as_bytes()).unwrap();
        let items = [
            Item::Keep(0),
            Item::Keep(1),
            Item::SynthesizedResult {
                call_id: "a".into(),
            },
            Item::Keep(2),
        ];
        let (out, issues) = written_plan("bedrock_converse", &raws, &items);
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(out.len(), 3);
        let ids: Vec<&str> = out[2]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["toolResult"]["toolUseId"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
    }

    /// A session whose dropped rings ran the side-effect tool `send`, as `provider`'s body
    /// with `system`, planned to half its size and written.
    fn with_note(provider: &str, system: Option<&str>) -> serde_json::Value {
        let history = session(provider, 12).replace("\"read\"", "\"send\"");
        let head = match system {
            Some(s) => format!(r#"{{"history": [], "sys": {s}, "n": 1}}"#),
            None => r#"{"history": [], "n": 1}"#.to_owned(),
        };
        let (body, split) = Body::parse_with_history(head.as_bytes(), "history", LIMITS).unwrap();
        let (_, at) = split.unwrap();
        let (items, native, planned) = planned(provider, &history, 1_500);
        let kept = kept_as_given(provider, &native, &planned, 0, |k| native.messages.get(k))
            .unwrap()
            .unwrap();
        assert!(
            !kept.notes.is_empty(),
            "{provider}: the dropped sends leave a note"
        );
        let system = System {
            key: Some("sys"),
            value: body.field("sys"),
        };
        let out = write(provider, head.as_bytes(), at, system, &items, &kept).unwrap();
        serde_json::from_slice(&out.expect(provider).body).unwrap()
    }

    #[test]
    fn the_ledger_note_goes_where_each_adapter_writes_it() {
        let marker = crate::ledger::MARKER;
        let out = with_note("anthropic", Some(r#""Be brief.""#));
        let text = out["sys"].as_str().unwrap();
        assert!(text.starts_with("Be brief.\n\n") && text[11..].starts_with(marker));
        let out = with_note("anthropic", Some(r#"[{"type":"text","text":"rules"}]"#));
        assert_eq!(out["sys"][1]["type"], "text");
        let out = with_note("bedrock_converse", None);
        assert!(out["sys"][0]["text"].as_str().unwrap().starts_with(marker));
        assert_eq!(out["n"], 1);
        let out = with_note(
            "gemini",
            Some(r#"{"role":"user","parts":[{"text":"rules"}]}"#),
        );
        assert_eq!(out["sys"]["role"], "user");
        assert!(out["sys"]["parts"][1]["text"]
            .as_str()
            .unwrap()
            .starts_with(marker));
        let out = with_note("openai_responses", None);
        let note = out["history"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["type"] == "message");
        assert!(note.unwrap()["content"]
            .as_str()
            .unwrap()
            .starts_with(marker));
        assert!(out.get("sys").is_none());
    }
}
