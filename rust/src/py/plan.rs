//! `_core.plan`, the one call that plans a request of any provider, and the `Plan` it returns:
//! a frozen record with typed items and a typed report, read by attribute, never by key.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::errors::bucket_dict;
use super::hooks::hooks;
use super::native::NativeView;
use super::{chosen, guard, objects, CoreConfig, JsonParts, PyCountCache, RecordedEntry};
use crate::error::{BucketTokens, CoreError};
use crate::ledger::LedgerEntry;
use crate::plan::{self as core_plan, Item, Layout, PlanConfig, Replay};
use crate::request::load_openai_chat;
use crate::rewrite::RewriteKind;

/// A plan to make again: (dropped message indices, [(index, rewrite kind)]).
pub(crate) type ReplayArg = (Vec<usize>, Vec<(usize, String)>);

/// What a plan puts into the request besides the caller's messages kept as they are (those
/// are `int` indices, or the caller's own objects when the plan was given them).
#[pyclass(frozen, eq, skip_from_py_object, module = "ringbound._core")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Insertion {
    /// A synthesized error result for the call `call_id`, which lost its own.
    Synthesized { call_id: String },
    /// The side-effect ledger note, an instruction message of `role`.
    LedgerNote { text: String, role: String },
    /// The summary note of `role`; `text` is empty where the plan only reserves its place.
    Summary { text: String, role: String },
    /// The caller's message `index` with its content rewritten (`kind`: which cheap stage).
    Rewrite {
        index: usize,
        kind: String,
        text: String,
    },
}

#[pymethods]
impl Insertion {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || Ok(self.repr()))
    }
}

impl Insertion {
    fn repr(&self) -> String {
        let short = |text: &str| {
            let cut: String = text.chars().take(40).collect();
            if cut.len() < text.len() {
                format!("{cut:?}...")
            } else {
                format!("{cut:?}")
            }
        };
        match self {
            Insertion::Synthesized { call_id } => format!("Insertion.Synthesized({call_id:?})"),
            Insertion::LedgerNote { text, role } => {
                format!("Insertion.LedgerNote({}, role={role:?})", short(text))
            }
            Insertion::Summary { text, role } => {
                format!("Insertion.Summary({}, role={role:?})", short(text))
            }
            Insertion::Rewrite { index, kind, text } => {
                format!("Insertion.Rewrite({index}, {kind:?}, {})", short(text))
            }
        }
    }
}

/// A plan's figures: tokens, what was dropped and rewritten, per bucket and per stage.
/// Spans and rewrites are in the indices of the caller's items; `canonical_*` keep them in
/// the canonical view's (the same for OpenAI Chat).
#[pyclass(frozen, eq, skip_from_py_object, module = "ringbound._core")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanReport {
    #[pyo3(get)]
    tokens_before: u64,
    #[pyo3(get)]
    tokens_before_exact: bool,
    #[pyo3(get)]
    tokens_after: u64,
    #[pyo3(get)]
    budget: u64,
    #[pyo3(get)]
    dropped_rings: Vec<(usize, usize)>,
    #[pyo3(get)]
    dropped_turns: Vec<(usize, usize)>,
    /// Every dropped span, in order, in canonical indices.
    #[pyo3(get)]
    canonical_dropped: Vec<(usize, usize)>,
    /// `(stage, units, tokens_saved)` per stage that ran.
    #[pyo3(get)]
    stages: Vec<(&'static str, usize, u64)>,
    /// Call ids given a synthesized result.
    #[pyo3(get)]
    repairs: Vec<String>,
    /// `(index, kind, tokens_saved)` per rewritten message.
    #[pyo3(get)]
    rewrites: Vec<(usize, String, u64)>,
    /// `(index, kind)` per rewritten message, in canonical indices.
    #[pyo3(get)]
    canonical_rewrites: Vec<(usize, String)>,
    /// Canonical indices of the summary notes earlier assemblies wrote.
    #[pyo3(get)]
    summary_notes: Vec<usize>,
    /// Ledger entries this assembly added, as `LedgerEntry` fields.
    #[pyo3(get)]
    ledger_added: Vec<RecordedEntry>,
    /// Entries in the planned request's ledger note.
    #[pyo3(get)]
    ledger_entries: usize,
    #[pyo3(get)]
    tools_dropped: bool,
    buckets: BucketTokens,
}

impl PlanReport {
    /// `of` a plan of a native reading, its dropped spans in the caller's item indices.
    /// This report for a request sent at `tokens_after`, not the plan's count: what the
    /// rendering cost beyond the plan (merged neighbours, a note smaller than its room) is
    /// booked to the insertions.
    pub(crate) fn sent(self, tokens_after: u64) -> Self {
        let mut buckets = self.buckets.clone();
        buckets.insertions = (buckets.insertions + tokens_after).saturating_sub(self.tokens_after);
        PlanReport {
            tokens_after,
            buckets,
            ..self
        }
    }

    /// This report with the input's items `stripped` of text the provider refuses, each a
    /// `blank_text` rewrite that saves nothing (that text is never counted).
    pub(crate) fn with_stripped(mut self, stripped: &[usize]) -> Self {
        self.rewrites
            .extend(stripped.iter().map(|&i| (i, "blank_text".to_owned(), 0)));
        self
    }

    pub(crate) fn of_native(plan: &core_plan::Plan, native: &crate::native::Native) -> Self {
        let report = PlanReport::of(plan);
        // A rewrite is of the first item its canonical message stands for.
        let item_of = |k: usize| native.spans.get(k).copied().flatten().map_or(k, |(s, _)| s);
        PlanReport {
            dropped_rings: native.native_spans(&report.dropped_rings),
            dropped_turns: native.native_spans(&report.dropped_turns),
            rewrites: report
                .rewrites
                .iter()
                .map(|(k, kind, saved)| (item_of(*k), kind.clone(), *saved))
                .collect(),
            ..report
        }
    }

    pub(crate) fn of(plan: &core_plan::Plan) -> Self {
        let spans = |spans: &[core_plan::Span]| -> Vec<(usize, usize)> {
            spans.iter().map(|s| (s.start, s.end)).collect()
        };
        let dropped_rings = spans(&plan.dropped_rings);
        let dropped_turns = spans(&plan.dropped_turns);
        let mut canonical_dropped = [dropped_rings.as_slice(), &dropped_turns].concat();
        canonical_dropped.sort_unstable();
        PlanReport {
            tokens_before: plan.tokens_before,
            tokens_before_exact: plan.tokens_before_exact,
            tokens_after: plan.tokens_after,
            budget: plan.budget,
            dropped_rings,
            dropped_turns,
            canonical_dropped,
            stages: plan
                .stages
                .iter()
                .map(|s| (s.stage, s.units, s.tokens_saved))
                .collect(),
            repairs: plan.repairs.clone(),
            rewrites: plan
                .rewrites
                .iter()
                .map(|r| (r.index, r.kind.name().to_owned(), r.tokens_saved))
                .collect(),
            canonical_rewrites: plan
                .rewrites
                .iter()
                .map(|r| (r.index, r.kind.name().to_owned()))
                .collect(),
            summary_notes: plan.summary_notes.clone(),
            ledger_added: plan.ledger_added.iter().map(entry_fields).collect(),
            ledger_entries: plan.ledger_entries,
            tools_dropped: plan.tools_dropped,
            buckets: plan.buckets.clone(),
        }
    }

    fn for_budget(&self, budget: u64) -> PlanReport {
        PlanReport {
            budget,
            ..self.clone()
        }
    }

    fn repr(&self) -> String {
        format!(
            "PlanReport(tokens_before={}, tokens_after={}, budget={}, dropped_rings={}, \
             dropped_turns={}, rewrites={})",
            self.tokens_before,
            self.tokens_after,
            self.budget,
            self.dropped_rings.len(),
            self.dropped_turns.len(),
            self.rewrites.len()
        )
    }
}

fn entry_fields(e: &LedgerEntry) -> RecordedEntry {
    (
        e.tool.clone(),
        e.call_id.clone(),
        e.args.to_string(),
        e.status.clone(),
        e.idempotency_key.clone(),
        e.resource_id.clone(),
        e.turn,
    )
}

#[pymethods]
impl PlanReport {
    /// Tokens per bucket: prefix, middle, suffix, tools, insertions, framing (a new dict).
    #[getter]
    fn bucket_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || bucket_dict(py, &self.buckets))
    }

    /// This report for the caller's `budget` (a plan made under a tighter one).
    fn with_budget(&self, py: Python<'_>, budget: u64) -> PyResult<PlanReport> {
        guard(py, || Ok(self.for_budget(budget)))
    }

    /// This report of a canonical plan as the request was rendered: `tokens_after` as
    /// counted, what the rendering cost beyond the plan booked to the insertions, and spans
    /// and rewrites in the caller's item indices. The canonical ones are kept as they were.
    fn rendered(
        &self,
        py: Python<'_>,
        budget: u64,
        tokens_after: u64,
        dropped_rings: Vec<(usize, usize)>,
        dropped_turns: Vec<(usize, usize)>,
        rewrites: Vec<(usize, String, u64)>,
    ) -> PyResult<PlanReport> {
        guard(py, || {
            Ok(PlanReport {
                budget,
                dropped_rings,
                dropped_turns,
                rewrites,
                ..self.clone().sent(tokens_after)
            })
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || Ok(self.repr()))
    }
}

/// A planned request: `items` in order, and the `report`.
#[pyclass(frozen, module = "ringbound._core")]
pub struct Plan {
    /// Each item: an `int` (keep the caller's item at that index) or an `Insertion`; the
    /// caller's own objects in place of indices when the plan was given them. A new list made
    /// for this plan, which the caller may keep as the request's (no copy on the hot path).
    #[pyo3(get)]
    items: Py<PyList>,
    #[pyo3(get)]
    report: Py<PlanReport>,
}

#[pymethods]
impl Plan {
    /// This plan, its report for the caller's `budget` (a plan made under a tighter one).
    fn with_budget(&self, py: Python<'_>, budget: u64) -> PyResult<Plan> {
        guard(py, || {
            Ok(Plan {
                items: self.items.clone_ref(py),
                report: Py::new(py, self.report.get().for_budget(budget))?,
            })
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        guard(py, || {
            Ok(format!(
                "Plan({} items, {})",
                self.items.bind(py).len(),
                self.report.get().repr()
            ))
        })
    }
}

/// Plans one request. `request` is a `NativeView` (any provider, read by `read_native`),
/// OpenAI Chat messages as JSON (`bytes`, or a list of arrays whose elements follow each
/// other), or None to read `messages`, a list of OpenAI Chat message objects, directly (see
/// `objects`). Given `messages`, the plan's items are the request itself: the caller's
/// objects, and chat insertions written by the façade. `groups` and `binds_next` lay out chat
/// messages that stand for fewer native items.
#[pyfunction]
#[pyo3(signature = (request, config, pinned, *, tools_json=None, cache=None, groups=None,
    binds_next=None, messages=None, summary_reserve=None, recorded=None, replay=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan<'py>(
    py: Python<'py>,
    request: Bound<'py, PyAny>,
    config: &CoreConfig,
    pinned: Vec<usize>,
    tools_json: Option<&[u8]>,
    cache: Option<&PyCountCache>,
    groups: Option<Vec<usize>>,
    binds_next: Option<Vec<bool>>,
    messages: Option<Bound<'py, PyList>>,
    summary_reserve: Option<u64>,
    recorded: Option<Vec<RecordedEntry>>,
    replay: Option<ReplayArg>,
) -> PyResult<Plan> {
    guard(py, || {
        let cache = chosen(cache);
        let cfg = per_call(config, summary_reserve, recorded, replay)?;
        let cfg = cfg.as_ref();
        let planned = if let Ok(view) = request.cast::<NativeView>() {
            let view = view.get();
            let layout = view.layout();
            py.detach(|| core_plan::plan(view.request(), cfg, &pinned, Some(layout)))?
        } else {
            let layout = groups.map(|groups| Layout {
                binds_next: binds_next.unwrap_or_else(|| vec![false; groups.len()]),
                groups,
                results_named: false,
            });
            let layout = layout.as_ref();
            if request.is_none() {
                // The caller's objects, read without serializing what the cache holds.
                let list = messages.as_ref().ok_or_else(|| {
                    PyTypeError::new_err("plan needs messages when request is None")
                })?;
                objects::plan(
                    py,
                    list,
                    tools_json,
                    config.scheme,
                    config.limits,
                    cache,
                    |req| core_plan::plan(req, cfg, &pinned, layout),
                )??
            } else {
                let parts = JsonParts::new(&request)?;
                let json = parts.slices();
                py.detach(|| {
                    let req =
                        load_openai_chat(&json, tools_json, config.scheme, config.limits, cache)?;
                    core_plan::plan(&req, cfg, &pinned, layout)
                })?
            }
        };
        let items = match &messages {
            Some(list) => request_items(py, list, &planned)?,
            None => indexed_items(py, &planned)?,
        };
        Ok(Plan {
            items: items.unbind(),
            report: Py::new(py, PlanReport::of(&planned))?,
        })
    })
}

/// The caller's policy for one plan: the config's, with this call's summary room, recorded
/// ledger and plan to make again.
pub(crate) fn per_call(
    config: &CoreConfig,
    summary_reserve: Option<u64>,
    recorded: Option<Vec<RecordedEntry>>,
    replay: Option<ReplayArg>,
) -> Result<Cow<'_, PlanConfig>, CoreError> {
    if summary_reserve.is_none() && recorded.is_none() && replay.is_none() {
        return Ok(Cow::Borrowed(&config.plan));
    }
    let mut cfg = config.plan.clone();
    cfg.summary_reserve = summary_reserve;
    cfg.recorded_ledger = recorded
        .unwrap_or_default()
        .into_iter()
        .map(recorded_entry)
        .collect::<Result<_, _>>()?;
    cfg.replay = replay
        .map(|(dropped, rewrites)| {
            let rewrites = rewrites
                .into_iter()
                .map(|(i, kind)| {
                    RewriteKind::from_name(&kind)
                        .map(|k| (i, k))
                        .ok_or_else(|| CoreError::StaleState {
                            reason: format!("unknown rewrite kind {kind:?}"),
                        })
                })
                .collect::<Result<_, _>>()?;
            Ok::<_, CoreError>(Replay { dropped, rewrites })
        })
        .transpose()?;
    Ok(Cow::Owned(cfg))
}

fn recorded_entry(entry: RecordedEntry) -> Result<LedgerEntry, CoreError> {
    let (tool, call_id, args, status, idempotency_key, resource_id, turn) = entry;
    let args = serde_json::from_str(&args).map_err(|e| CoreError::Config {
        key: "ledger".into(),
        reason: format!("arguments of {tool} ({call_id}) are not JSON: {e}"),
    })?;
    Ok(LedgerEntry {
        tool,
        call_id,
        args,
        status,
        idempotency_key,
        resource_id,
        turn,
    })
}

/// An insertion of the plan as its typed record.
fn insertion(item: &Item) -> Option<Insertion> {
    Some(match item {
        Item::Keep(_) => return None,
        Item::SynthesizedResult { call_id } => Insertion::Synthesized {
            call_id: call_id.clone(),
        },
        Item::LedgerNote { text, role } => Insertion::LedgerNote {
            text: text.clone(),
            role: role.as_str().to_owned(),
        },
        Item::Summary { role } => Insertion::Summary {
            text: String::new(),
            role: role.as_str().to_owned(),
        },
        Item::Rewrite { index, kind, text } => Insertion::Rewrite {
            index: *index,
            kind: kind.name().to_owned(),
            text: text.clone(),
        },
    })
}

/// The plan's items as indices and insertions.
fn indexed_items<'py>(py: Python<'py>, plan: &core_plan::Plan) -> PyResult<Bound<'py, PyList>> {
    let items = plan
        .items
        .iter()
        .map(|item| match (item, insertion(item)) {
            (Item::Keep(i), _) => Ok(i.into_pyobject(py)?.into_any()),
            (_, Some(ins)) => Ok(ins.into_pyobject(py)?.into_any()),
            (_, None) => unreachable!("only Keep has no insertion"),
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// The request itself: the caller's own objects, and insertions written by the façade's chat
/// writer, built here so a gateway pays no Python loop per message. The summary's place stays
/// an `Insertion.Summary` for the caller to write.
fn request_items<'py>(
    py: Python<'py>,
    list: &Bound<'py, PyList>,
    plan: &core_plan::Plan,
) -> PyResult<Bound<'py, PyList>> {
    let chat = hooks(py)?.chat.bind(py);
    let mut items = Vec::with_capacity(plan.items.len());
    for item in &plan.items {
        items.push(match item {
            Item::Keep(i) => list.get_item(*i)?,
            Item::SynthesizedResult { call_id } => {
                chat.call_method1("synthesized_result", (call_id,))?
            }
            Item::LedgerNote { text, role } => {
                chat.call_method1("ledger_note", (text, role.as_str()))?
            }
            Item::Summary { .. } => insertion(item)
                .expect("a summary is an insertion")
                .into_pyobject(py)?
                .into_any(),
            Item::Rewrite { index, kind, text } => {
                let original = list.get_item(*index)?;
                // A plain dict whose content is replaced whole is copied here (the Python call
                // cost as much as the rest of a warm turn's insertions); anything else is the
                // chat writer's to rewrite.
                match original.cast_exact::<PyDict>() {
                    Ok(dict) if *kind != RewriteKind::Media => {
                        let out = dict.copy()?;
                        out.set_item("content", text)?;
                        out.into_any()
                    }
                    _ => chat.call_method1("rewritten", (original, kind.name(), text))?,
                }
            }
        });
    }
    PyList::new(py, items)
}
