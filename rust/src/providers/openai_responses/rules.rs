//! The Responses API's pairing rules, quoting its 400 wording: outputs pair with calls by
//! `call_id` anywhere later in the list, item ids are unique, a reasoning item is followed by
//! an item of its model turn. ringbound keeps a call and its outputs in one ring, so it also
//! refuses an output separated from its call by a user or instruction message.
//!
//! One walk builds the rings and finds the issues together, so what the validator accepts is
//! exactly what the canonical view pairs.

use rustc_hash::FxHashMap as HashMap;
use std::cell::OnceCell;
use std::sync::Arc;

use super::canonical::Built;
use super::{Family, Item, Kind};
use crate::pairing::stray::{self, Stray};
use crate::pairing::{IssueKind, PairingIssue};

fn duplicate_item(id: &str) -> String {
    format!(
        "Duplicate item found with id {id}. Remove duplicate items from your input and try again."
    )
}

fn duplicate_output(id: &str) -> String {
    format!(
        "Duplicate function_call_output for call_id '{id}'. Each function_call must have exactly \
         one matching function_call_output"
    )
}

fn reasoning_alone(id: &str) -> String {
    format!("Item '{id}' of type 'reasoning' was provided without its required following item.")
}

/// Every paired call item, by call id, ascending.
fn calls_of(items: &[Arc<Item>]) -> HashMap<&str, Vec<usize>> {
    let mut calls_of: HashMap<&str, Vec<usize>> = HashMap::default();
    for (i, it) in items.iter().enumerate() {
        if let (Some(_), Kind::Model, Some(key)) = (it.family, it.kind, &it.key) {
            calls_of.entry(key.as_str()).or_default().push(i);
        }
    }
    calls_of
}

/// One pass over the items: rings, canonical messages and pairing issues.
pub struct Walk<'a> {
    items: &'a [Arc<Item>],
    pub(super) built: Built,
    /// (item, rank, issue), sorted by item then rank at the end.
    found: Vec<(usize, usize, PairingIssue)>,
    /// Call id -> the call that registered it, and its family.
    called: HashMap<&'a str, (usize, Family)>,
    answered: HashMap<&'a str, usize>,
    /// Calls whose ring ended without their output, in the order they were first left open.
    unanswered: Vec<(&'a str, usize)>,
    /// Call id -> every paired call item with it, ascending; made only for an output that
    /// answers no open call.
    calls_of: OnceCell<HashMap<&'a str, Vec<usize>>>,
}

impl<'a> Walk<'a> {
    pub fn new(items: &'a [Arc<Item>]) -> Self {
        let mut walk = Walk {
            items,
            built: Built::default(),
            found: Vec::new(),
            called: HashMap::default(),
            answered: HashMap::default(),
            unanswered: Vec::new(),
            calls_of: OnceCell::new(),
        };
        walk.check_ids();
        walk.check_reasoning();
        let mut i = 0;
        while i < items.len() {
            i = walk.step(i);
        }
        for (key, at) in std::mem::take(&mut walk.unanswered) {
            let family = walk.called[key].1;
            let message = format!(
                "{} ringbound: input[{at}] ({}) has no {} after it.",
                family.no_output(key),
                family.call(),
                family.output()
            );
            walk.issue(IssueKind::MissingResult, Some(key), at, message, 1);
        }
        walk.found.sort_by_key(|f| (f.0, f.1));
        walk
    }

    pub fn issues(self) -> Vec<PairingIssue> {
        self.found.into_iter().map(|f| f.2).collect()
    }

    fn issue(
        &mut self,
        kind: IssueKind,
        key: Option<&str>,
        at: usize,
        message: String,
        rank: usize,
    ) {
        self.found.push((
            at,
            rank,
            PairingIssue {
                kind,
                call_id: key.map(str::to_owned),
                index: at,
                message,
            },
        ));
    }

    fn check_ids(&mut self) {
        let mut seen: HashMap<&str, usize> = HashMap::default();
        for (i, it) in self.items.iter().enumerate() {
            let Some(id) = &it.item_id else { continue };
            match seen.get(id.as_str()) {
                Some(&first) => {
                    let message = format!(
                        "{} ringbound: input[{first}] and input[{i}] share it.",
                        duplicate_item(id)
                    );
                    self.issue(IssueKind::DuplicateId, Some(id), i, message, 0);
                }
                None => {
                    seen.insert(id, i);
                }
            }
        }
    }

    fn check_reasoning(&mut self) {
        let items = self.items;
        for (i, it) in items.iter().enumerate() {
            if it.ty != "reasoning" {
                continue;
            }
            let mut j = i + 1;
            while j < items.len() && items[j].ty == "reasoning" {
                j += 1;
            }
            if j < items.len() && items[j].kind == Kind::Model {
                continue;
            }
            let after = match items.get(j) {
                None => "it is the last item".to_owned(),
                Some(next) => format!(
                    "input[{j}] ({}) follows it, not an item of its model turn",
                    next.ty
                ),
            };
            let id = it.item_id.as_deref();
            let message = format!(
                "{} ringbound: {after}; a reasoning item is kept or dropped with the item it \
                 precedes.",
                reasoning_alone(id.unwrap_or(""))
            );
            self.found.push((
                i,
                0,
                PairingIssue {
                    kind: IssueKind::ReasoningWithoutCall,
                    call_id: id.map(str::to_owned),
                    index: i,
                    message,
                },
            ));
        }
    }

    fn step(&mut self, i: usize) -> usize {
        let it = &self.items[i];
        match it.kind {
            Kind::User | Kind::Instruction | Kind::Compaction => {
                self.built.add_item(i, it);
                i + 1
            }
            Kind::Trigger => {
                self.built.fold_or_add(i, it);
                i + 1
            }
            Kind::Output => {
                self.output(i, &mut Vec::new());
                i + 1
            }
            Kind::Model => self.turn(i),
        }
    }

    /// A model turn from `i`, and the ring it opens when it makes calls.
    fn turn(&mut self, i: usize) -> usize {
        let items = self.items;
        let mut j = i;
        while j < items.len() && items[j].kind == Kind::Model {
            j += 1;
        }
        self.built.add_turn(i, &items[i..j]);
        let calls: Vec<usize> = (i..j).filter(|&k| items[k].call.is_some()).collect();
        if calls.is_empty() {
            return j;
        }
        let mut open: Vec<(&'a str, usize)> = Vec::new();
        for k in calls {
            self.call(k, &mut open, false);
        }
        let mut k = j;
        while !open.is_empty() && k < items.len() {
            match items[k].kind {
                Kind::Output => self.output(k, &mut open),
                Kind::Model if items[k].call.is_some() => self.call(k, &mut open, true),
                Kind::Model | Kind::Trigger => self.built.fold(&items[k]),
                _ => break,
            }
            k += 1;
        }
        // A call id is registered once, so it is left open at most once.
        self.unanswered.extend(open);
        k
    }

    /// A call joins the ring; `late` when it is met after the ring's model turn.
    fn call(&mut self, k: usize, open: &mut Vec<(&'a str, usize)>, late: bool) {
        let it = &self.items[k];
        let (Some(call), Some(key)) = (&it.call, &it.key) else {
            return;
        };
        self.built.add_call(call);
        let Some(family) = it.family else {
            // A hosted call carries its result: it goes where the ring stands.
            self.built.hosted_result(k, it, late);
            return;
        };
        if late {
            self.built.fold(it);
        }
        if let Some(&(first, _)) = self.called.get(key.as_str()) {
            // An approval request's key is its item id: reported as a duplicate item.
            if family != Family::McpApproval {
                let message = format!(
                    "ringbound: call id '{key}' of input[{k}] is already the id of \
                     input[{first}]; the Responses API pairs outputs by call id, so ids must be \
                     unique in a request."
                );
                self.issue(IssueKind::DuplicateId, Some(key), k, message, 0);
            }
            return;
        }
        self.called.insert(key, (k, family));
        open.push((key, k));
    }

    fn output(&mut self, i: usize, open: &mut Vec<(&'a str, usize)>) {
        let it = &self.items[i];
        let (Some(family), Some(key)) = (it.family, it.key.as_deref()) else {
            return;
        };
        self.built.add_output(i, it);
        let registered = self.called.get(key).copied();
        let same = registered.is_some_and(|(_, f)| f == family);
        if same {
            if let Some(p) = open.iter().position(|(k, _)| *k == key) {
                open.remove(p);
                self.answered.insert(key, i);
                return;
            }
        }
        // The calls this output could answer: the registered one of its family if it came
        // earlier, and every later call of its id.
        let mut calls: Vec<usize> = registered
            .filter(|&(at, _)| same && at < i)
            .map(|(at, _)| at)
            .into_iter()
            .collect();
        let items = self.items;
        if let Some(later) = self.calls_of.get_or_init(|| calls_of(items)).get(key) {
            calls.extend(later.iter().copied().filter(|&c| c > i));
        }
        let unanswered = &mut self.unanswered;
        let stray = stray::classify(i, &calls, |_| {
            match unanswered.iter().position(|(k, _)| *k == key) {
                Some(p) => {
                    unanswered.remove(p);
                    true
                }
                None => false,
            }
        });
        let message = match stray {
            Stray::Duplicate { .. } => format!(
                "{} ringbound: input[{}] already answers it.",
                duplicate_output(key),
                self.answered[key]
            ),
            Stray::NotAdjacent { call } => {
                self.answered.insert(key, i);
                format!(
                    "ringbound: input[{i}] answers {} input[{call}], but a user or instruction \
                     message stands between them; ringbound keeps a call and its output in one \
                     ring, so only model items and other outputs may come between.",
                    family.call()
                )
            }
            Stray::BeforeCall { call } => format!(
                "{} ringbound: the {} comes later, at input[{call}].",
                family.no_call(key),
                family.call()
            ),
            Stray::Orphan => format!(
                "{} ringbound: no {} before input[{i}] has this id.",
                family.no_call(key),
                family.call()
            ),
        };
        self.issue(stray.kind(), Some(key), i, message, 0);
    }
}
