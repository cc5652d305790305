//! The PyO3 binding: bytes (or, for a chat plan, the caller's message objects) in, plain
//! records out, the GIL released while the core works. Core errors become the matching
//! exceptions of `ringbound.errors`, never a bare `Exception`.

use std::collections::{HashMap, HashSet};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyModule, PyTuple};

use crate::cache::{self, CountCache};
use crate::count::image_price::ImageFormula;
use crate::count::{Backend, Encoding};
use crate::error::{BucketTokens, CoreError};
use crate::ledger::LedgerEntry;
use crate::pairing::{self, PairingIssue};
use crate::plan::{self, Item, Layout, PlanConfig, Replay, Stage};
use crate::request::{load_openai_chat, Limits, Scheme};
use crate::rewrite::RewriteKind;

mod body;
mod native;
mod objects;
mod panic;

use panic::guard;

/// `ringbound.providers.openai_chat`, which writes the insertions of a chat request.
static CHAT: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
/// `ringbound.errors`, looked up once: an error raised on every refused request should not
/// pay an import and five attribute reads each time.
static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Serialized messages as Python passes them: one JSON array (`bytes`), or a list of arrays
/// whose elements follow each other. Holds the objects so their bytes can be lent to the core.
struct JsonParts<'py>(Vec<Bound<'py, PyBytes>>);

impl<'py> JsonParts<'py> {
    fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(one) = obj.cast::<PyBytes>() {
            return Ok(JsonParts(vec![one.clone()]));
        }
        let parts = obj
            .cast::<PyList>()
            .map_err(|_| PyTypeError::new_err("messages_json must be bytes or a list of bytes"))?;
        parts
            .iter()
            .map(|part| {
                part.cast_into::<PyBytes>().map_err(|_| {
                    PyTypeError::new_err("messages_json must be bytes or a list of bytes")
                })
            })
            .collect::<PyResult<_>>()
            .map(JsonParts)
    }

    fn slices(&self) -> Vec<&[u8]> {
        self.0.iter().map(|b| b.as_bytes()).collect()
    }
}

fn bucket_dict<'py>(py: Python<'py>, b: &BucketTokens) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("prefix", b.prefix)?;
    d.set_item("middle", b.middle)?;
    d.set_item("suffix", b.suffix)?;
    d.set_item("tools", b.tools)?;
    d.set_item("insertions", b.insertions)?;
    d.set_item("framing", b.framing)?;
    Ok(d)
}

fn issue_tuple<'py>(py: Python<'py>, i: &PairingIssue) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        [
            i.kind.as_str().into_pyobject(py)?.into_any(),
            i.call_id.clone().into_pyobject(py)?.into_any(),
            i.index.into_pyobject(py)?.into_any(),
            i.message.clone().into_pyobject(py)?.into_any(),
        ],
    )
}

/// Raises the `ringbound.errors` exception for a core error.
fn to_py(py: Python<'_>, err: CoreError) -> PyErr {
    match raise(py, &err) {
        Ok(e) | Err(e) => e,
    }
}

fn raise(py: Python<'_>, err: &CoreError) -> PyResult<PyErr> {
    let errors = ERRORS
        .get_or_try_init(py, || py.import("ringbound.errors").map(Bound::unbind))?
        .bind(py);
    let text = err.to_string();
    let kwargs = PyDict::new(py);
    let class = match err {
        CoreError::InvalidMessage { index, reason } => {
            kwargs.set_item("index", *index)?;
            kwargs.set_item("reason", reason)?;
            "InvalidMessageError"
        }
        CoreError::Pairing(issues) => {
            let list = PyList::empty(py);
            for i in issues {
                list.append(issue_tuple(py, i)?)?;
            }
            kwargs.set_item("issues", list)?;
            "PairingError"
        }
        CoreError::BudgetExceeded {
            tokens,
            budget,
            buckets,
        } => {
            kwargs.set_item("tokens", tokens)?;
            kwargs.set_item("budget", budget)?;
            kwargs.set_item("bucket_tokens", bucket_dict(py, buckets)?)?;
            "BudgetExceededError"
        }
        CoreError::Config { key, reason } => {
            kwargs.set_item("key", key)?;
            kwargs.set_item("reason", reason)?;
            "ConfigError"
        }
        CoreError::StaleState { reason } => {
            kwargs.set_item("reason", reason)?;
            "StaleStateError"
        }
        CoreError::InvalidBody { reason } => {
            kwargs.set_item("reason", reason)?;
            "InvalidBodyError"
        }
    };
    let exc = errors.getattr(class)?.call((text,), Some(&kwargs))?;
    Ok(PyErr::from_value(exc))
}

fn scheme(
    encoding: &str,
    backend: Option<&str>,
    images: &str,
    token_ratio: f64,
) -> Result<Scheme, CoreError> {
    let encoding = Encoding::from_name(encoding).ok_or_else(|| CoreError::Config {
        key: "encoding".into(),
        reason: format!("'{encoding}' is not one of o200k_base, cl100k_base"),
    })?;
    let backend = match backend {
        None => crate::count::DEFAULT_BACKEND,
        Some(name) => Backend::from_name(name).ok_or_else(|| CoreError::Config {
            key: "tokenizer_backend".into(),
            reason: format!("'{name}' is not one of tiktoken, bpe_openai"),
        })?,
    };
    let images = ImageFormula::from_name(images).ok_or_else(|| CoreError::Config {
        key: "image_formula".into(),
        reason: format!("'{images}' is not one of openai, anthropic, gemini"),
    })?;
    if !(token_ratio.is_finite() && (0.1..=10.0).contains(&token_ratio)) {
        return Err(CoreError::Config {
            key: "token_ratio".into(),
            reason: format!("must be a number in [0.1, 10], got {token_ratio}"),
        });
    }
    Ok(Scheme {
        encoding,
        backend,
        images,
        ratio_milli: (token_ratio * 1000.0).round() as u32,
    })
}

/// How a count function counts and what it refuses, from its arguments: (encoding, backend,
/// image formula, token ratio) and (max messages, max request bytes).
fn counting(
    py: Python<'_>,
    (encoding, backend, images, ratio): (&str, Option<&str>, &str, f64),
    (max_messages, max_request_bytes): (usize, usize),
) -> PyResult<(Scheme, Limits)> {
    let scheme = scheme(encoding, backend, images, ratio).map_err(|e| to_py(py, e))?;
    let limits = Limits {
        max_messages,
        max_request_bytes,
    };
    Ok((scheme, limits))
}

/// A ledger entry the execution layer recorded: (tool, call id, arguments as JSON, status,
/// idempotency key, resource id, turn).
type RecordedEntry = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<u32>,
);

/// A plan to make again: (dropped message indices, [(index, rewrite kind)]).
type ReplayArg = (Vec<usize>, Vec<(usize, String)>);

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

/// The core half of an `AssemblyConfig`, built once per `Assembler`.
#[pyclass(frozen, module = "ringbound._core")]
pub struct CoreConfig {
    plan: PlanConfig,
    scheme: Scheme,
    limits: Limits,
}

#[pymethods]
impl CoreConfig {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (*, budget, recent_tool_rings, recent_user_turns, pin_first_user_message,
        pin_side_effect_ledger, pin_security_system_prompt, short_error_result_tokens,
        max_held_error_rings, side_effect_tools, ledger_fields, stages, drop_tools_schema,
        synthesize_missing_results, encoding, tokenizer_backend, max_messages, max_request_bytes,
        image_formula="openai", token_ratio=1.0, max_tool_result_tokens=4000,
        min_result_tokens=500, min_recent_tool_rings=1, min_recent_user_turns=1))]
    fn new(
        py: Python<'_>,
        budget: u64,
        recent_tool_rings: usize,
        recent_user_turns: usize,
        pin_first_user_message: bool,
        pin_side_effect_ledger: bool,
        pin_security_system_prompt: bool,
        short_error_result_tokens: u64,
        max_held_error_rings: usize,
        side_effect_tools: Vec<String>,
        ledger_fields: HashMap<String, Vec<String>>,
        stages: Vec<String>,
        drop_tools_schema: bool,
        synthesize_missing_results: bool,
        encoding: &str,
        tokenizer_backend: Option<&str>,
        max_messages: usize,
        max_request_bytes: usize,
        image_formula: &str,
        token_ratio: f64,
        max_tool_result_tokens: u64,
        min_result_tokens: u64,
        min_recent_tool_rings: usize,
        min_recent_user_turns: usize,
    ) -> PyResult<Self> {
        guard(py, || {
            let stages = stages
                .iter()
                .map(|name| {
                    Stage::from_name(name).ok_or_else(|| CoreError::Config {
                        key: "stages".into(),
                        reason: format!(
                            "'{name}' is not one of {}",
                            Stage::DEFAULT_ORDER.map(Stage::name).join(", ")
                        ),
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| to_py(py, e))?;
            Ok(CoreConfig {
                plan: PlanConfig {
                    budget,
                    recent_tool_rings,
                    recent_user_turns,
                    pin_first_user_message,
                    pin_side_effect_ledger,
                    pin_security_system_prompt,
                    short_error_result_tokens,
                    max_held_error_rings,
                    side_effect_tools: side_effect_tools.into_iter().collect::<HashSet<_>>(),
                    ledger_fields,
                    stages,
                    drop_tools_schema,
                    synthesize_missing_results,
                    max_tool_result_tokens,
                    min_result_tokens,
                    min_recent_tool_rings,
                    min_recent_user_turns,
                    summary_reserve: None,
                    recorded_ledger: Vec::new(),
                    replay: None,
                },
                scheme: scheme(encoding, tokenizer_backend, image_formula, token_ratio)
                    .map_err(|e| to_py(py, e))?,
                limits: Limits {
                    max_messages,
                    max_request_bytes,
                },
            })
        })
    }
}

/// A size given from Python: a `ConfigError` naming the argument for anything but an int in
/// `[0, 2**40]` (a bool, a float, a huge int), never a `TypeError` or `OverflowError`.
fn size_arg(
    py: Python<'_>,
    value: Option<&Bound<'_, PyAny>>,
    key: &str,
    default: usize,
) -> PyResult<usize> {
    let Some(value) = value else {
        return Ok(default);
    };
    let size = if value.is_instance_of::<pyo3::types::PyBool>() {
        None
    } else {
        value.extract::<u64>().ok().filter(|&n| n <= 1 << 40)
    };
    match size {
        Some(n) => Ok(n as usize),
        None => Err(to_py(
            py,
            CoreError::Config {
                key: key.into(),
                reason: format!("must be an integer in [0, 2**40], got {value}"),
            },
        )),
    }
}

/// A bounded cache of parsed, counted messages. Share one between assemblers, give each its
/// own, or pass a zero-sized one to disable caching.
#[pyclass(frozen, name = "CountCache", module = "ringbound._core")]
pub struct PyCountCache {
    inner: CountCache,
}

#[pymethods]
impl PyCountCache {
    #[new]
    #[pyo3(signature = (max_entries=None, max_bytes=None))]
    fn new(
        py: Python<'_>,
        max_entries: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let max_entries = size_arg(py, max_entries, "max_entries", cache::DEFAULT_MAX_ENTRIES)?;
        let max_bytes = size_arg(py, max_bytes, "max_bytes", cache::DEFAULT_MAX_BYTES)?;
        Ok(PyCountCache {
            inner: CountCache::new(max_entries, max_bytes),
        })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Approximate bytes held.
    #[getter]
    fn bytes(&self) -> usize {
        self.inner.bytes()
    }

    fn clear(&self, py: Python<'_>) -> PyResult<()> {
        guard(py, || {
            self.inner.clear();
            Ok(())
        })
    }
}

fn chosen(cache: Option<&PyCountCache>) -> &CountCache {
    match cache {
        Some(c) => &c.inner,
        None => cache::global(),
    }
}

/// Plans one OpenAI Chat request. Returns `(items, report)`: items are an `int` (keep the
/// caller's message at that index), `("synthesized", call_id)` or `("ledger", text, role)`;
/// given the caller's `messages`, the items are the request itself instead. With
/// `messages_json` None, `messages` (a list) is read directly: see `objects`.
#[pyfunction]
#[pyo3(signature = (messages_json, tools_json, config, pinned, cache=None, groups=None, binds_next=None, messages=None, summary_reserve=None, recorded=None, replay=None))]
#[allow(clippy::too_many_arguments)]
fn plan_openai_chat<'py>(
    py: Python<'py>,
    messages_json: Bound<'py, PyAny>,
    tools_json: Option<&[u8]>,
    config: &CoreConfig,
    pinned: Vec<usize>,
    cache: Option<&PyCountCache>,
    groups: Option<Vec<usize>>,
    binds_next: Option<Vec<bool>>,
    messages: Option<Bound<'py, PyAny>>,
    summary_reserve: Option<u64>,
    recorded: Option<Vec<RecordedEntry>>,
    replay: Option<ReplayArg>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    guard(py, || {
        let cache = chosen(cache);
        let plan_config =
            per_call(config, summary_reserve, recorded, replay).map_err(|e| to_py(py, e))?;
        let plan_config = plan_config.as_ref();
        let layout = groups.map(|groups| Layout {
            binds_next: binds_next.unwrap_or_else(|| vec![false; groups.len()]),
            groups,
        });
        let plan = if messages_json.is_none() {
            // The caller's objects, read without serializing what the cache holds.
            let list = messages
                .as_ref()
                .and_then(|m| m.cast::<PyList>().ok())
                .ok_or_else(|| {
                    PyTypeError::new_err("messages must be a list without messages_json")
                })?;
            objects::plan(
                py,
                list,
                tools_json,
                config.scheme,
                config.limits,
                cache,
                |req| plan::plan(req, plan_config, &pinned, layout.as_ref()),
            )?
        } else {
            let parts = JsonParts::new(&messages_json)?;
            let json = parts.slices();
            py.detach(|| {
                let req = load_openai_chat(&json, tools_json, config.scheme, config.limits, cache)?;
                plan::plan(&req, plan_config, &pinned, layout.as_ref())
            })
        };
        let plan = plan.map_err(|e| to_py(py, e))?;

        let items = PyList::empty(py);
        match &messages {
            // The request itself: the caller's own objects, and insertions written by the
            // provider module, built here so a gateway pays no Python loop per message.
            Some(messages) => {
                let chat = || {
                    CHAT.get_or_try_init(py, || {
                        py.import("ringbound.providers.openai_chat")
                            .map(Bound::unbind)
                    })
                    .map(|m| m.bind(py))
                };
                let list = messages.cast::<PyList>().ok();
                for item in &plan.items {
                    match item {
                        Item::Keep(i) => match list {
                            Some(list) => items.append(list.get_item(*i)?)?,
                            None => items.append(messages.get_item(*i)?)?,
                        },
                        Item::SynthesizedResult { call_id } => {
                            items.append(chat()?.call_method1("synthesized_result", (call_id,))?)?
                        }
                        Item::LedgerNote { text, role } => items
                            .append(chat()?.call_method1("ledger_note", (text, role.as_str()))?)?,
                        // The caller writes the summary into its place.
                        Item::Summary { role } => items.append(("summary", "", role.as_str()))?,
                        Item::Rewrite { index, kind, text } => {
                            let original = match list {
                                Some(list) => list.get_item(*index)?,
                                None => messages.get_item(*index)?,
                            };
                            // A plain dict whose content is replaced whole is copied here (the
                            // Python call cost as much as the rest of a warm turn's insertions);
                            // anything else is the provider module's to rewrite.
                            match original.cast_exact::<PyDict>() {
                                Ok(dict) if *kind != RewriteKind::Media => {
                                    let out = dict.copy()?;
                                    out.set_item("content", text)?;
                                    items.append(out)?
                                }
                                _ => items.append(
                                    chat()?
                                        .call_method1("rewritten", (original, kind.name(), text))?,
                                )?,
                            }
                        }
                    }
                }
            }
            None => tagged_items(&items, &plan)?,
        }
        let report = plan_report(py, &plan)?;
        Ok((items, report))
    })
}

/// The caller's policy for one plan: the config's, with this call's summary room, recorded
/// ledger and plan to make again.
pub(crate) fn per_call(
    config: &CoreConfig,
    summary_reserve: Option<u64>,
    recorded: Option<Vec<RecordedEntry>>,
    replay: Option<ReplayArg>,
) -> Result<std::borrow::Cow<'_, PlanConfig>, CoreError> {
    if summary_reserve.is_none() && recorded.is_none() && replay.is_none() {
        return Ok(std::borrow::Cow::Borrowed(&config.plan));
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
    Ok(std::borrow::Cow::Owned(cfg))
}

/// A plan's items as tagged records: an `int` keeps message k; `("synthesized", call_id)`,
/// `("ledger", text, role)`, `("summary", "", role)` and `("rewrite", k, kind, text)`.
fn tagged_items(out: &Bound<'_, PyList>, plan: &plan::Plan) -> PyResult<()> {
    for item in &plan.items {
        match item {
            Item::Keep(i) => out.append(i)?,
            Item::SynthesizedResult { call_id } => out.append(("synthesized", call_id))?,
            Item::LedgerNote { text, role } => out.append(("ledger", text, role.as_str()))?,
            Item::Summary { role } => out.append(("summary", "", role.as_str()))?,
            Item::Rewrite { index, kind, text } => {
                out.append(("rewrite", index, kind.name(), text))?
            }
        }
    }
    Ok(())
}

/// The raw report of a plan, as `assembler._report` reads it.
fn plan_report<'py>(py: Python<'py>, plan: &plan::Plan) -> PyResult<Bound<'py, PyDict>> {
    let report = PyDict::new(py);
    report.set_item("tokens_before", plan.tokens_before)?;
    report.set_item("tokens_before_exact", plan.tokens_before_exact)?;
    report.set_item("tokens_after", plan.tokens_after)?;
    report.set_item("budget", plan.budget)?;
    let spans = |spans: &[plan::Span]| -> Vec<(usize, usize)> {
        spans.iter().map(|s| (s.start, s.end)).collect()
    };
    report.set_item("dropped_rings", spans(&plan.dropped_rings))?;
    report.set_item("dropped_turns", spans(&plan.dropped_turns))?;
    let stages = PyList::empty(py);
    for s in &plan.stages {
        stages.append((s.stage, s.units, s.tokens_saved))?;
    }
    report.set_item("stages", stages)?;
    report.set_item("repairs", plan.repairs.clone())?;
    let added = PyList::empty(py);
    for e in &plan.ledger_added {
        added.append((
            &e.tool,
            &e.call_id,
            e.args.to_string(),
            &e.status,
            &e.idempotency_key,
            &e.resource_id,
            e.turn,
        ))?;
    }
    let rewrites = PyList::empty(py);
    for r in &plan.rewrites {
        rewrites.append((r.index, r.kind.name(), r.tokens_saved))?;
    }
    report.set_item("rewrites", rewrites)?;
    report.set_item("summary_notes", plan.summary_notes.clone())?;
    report.set_item("ledger_added", added)?;
    report.set_item("ledger_entries", plan.ledger_entries)?;
    report.set_item("bucket_tokens", bucket_dict(py, &plan.buckets)?)?;
    report.set_item("tools_dropped", plan.tools_dropped)?;
    Ok(report)
}

/// Tokens of an OpenAI Chat request: every message with its framing, the reply priming, and
/// the tools schema.
#[pyfunction]
#[pyo3(signature = (messages_json, tools_json, encoding, tokenizer_backend=None, max_messages=usize::MAX, max_request_bytes=usize::MAX, cache=None, image_formula="openai", token_ratio=1.0))]
#[allow(clippy::too_many_arguments)]
fn count_openai_chat(
    py: Python<'_>,
    messages_json: Bound<'_, PyAny>,
    tools_json: Option<&[u8]>,
    encoding: &str,
    tokenizer_backend: Option<&str>,
    max_messages: usize,
    max_request_bytes: usize,
    cache: Option<&PyCountCache>,
    image_formula: &str,
    token_ratio: f64,
) -> PyResult<u64> {
    guard(py, || {
        let cache = chosen(cache);
        let (scheme, limits) = counting(
            py,
            (encoding, tokenizer_backend, image_formula, token_ratio),
            (max_messages, max_request_bytes),
        )?;
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        py.detach(|| {
            load_openai_chat(&json, tools_json, scheme, limits, cache).map(|r| {
                r.message_tokens() + u64::from(crate::count::chat::REPLY_PRIMING) + r.tools_tokens
            })
        })
        .map_err(|e| to_py(py, e))
    })
}

/// Exact token count of one text.
#[pyfunction]
#[pyo3(signature = (text, encoding, tokenizer_backend=None))]
fn count_text(
    py: Python<'_>,
    text: &str,
    encoding: &str,
    tokenizer_backend: Option<&str>,
) -> PyResult<usize> {
    guard(py, || {
        let scheme =
            scheme(encoding, tokenizer_backend, "openai", 1.0).map_err(|e| to_py(py, e))?;
        Ok(py.detach(|| scheme.counter().count(text)))
    })
}

/// The longest prefix (or suffix) of `text` within `max_tokens`, cut on a char boundary.
#[pyfunction]
#[pyo3(signature = (text, max_tokens, encoding = "o200k_base", from_end = false))]
fn cut_text(
    py: Python<'_>,
    text: &str,
    max_tokens: usize,
    encoding: &str,
    from_end: bool,
) -> PyResult<String> {
    guard(py, || {
        let scheme = scheme(encoding, None, "openai", 1.0).map_err(|e| to_py(py, e))?;
        Ok(py.detach(|| {
            crate::rewrite::cut(text, max_tokens, scheme.counter(), from_end).to_owned()
        }))
    })
}

/// The id a recovery anchor gives a tool result's full text.
#[pyfunction]
fn content_id(py: Python<'_>, text: &str) -> PyResult<String> {
    guard(py, || Ok(crate::rewrite::content_id(text)))
}

/// Pairing issues of OpenAI Chat messages as `(kind, call_id, index, message)` tuples.
#[pyfunction]
fn validate_openai_chat<'py>(
    py: Python<'py>,
    messages_json: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    guard(py, || {
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        let issues = py
            .detach(|| {
                let scheme = Scheme::openai(Encoding::O200kBase, crate::count::DEFAULT_BACKEND);
                let limits = Limits {
                    max_messages: usize::MAX,
                    max_request_bytes: usize::MAX,
                };
                load_openai_chat(&json, None, scheme, limits, cache::global())
                    .map(|req| pairing::validate(&req.messages()))
            })
            .map_err(|e| to_py(py, e))?;
        let out = PyList::empty(py);
        for i in &issues {
            out.append(issue_tuple(py, i)?)?;
        }
        Ok(out)
    })
}

/// Pairing issues of a request in `provider`'s native format, by that provider's own rules, as
/// `(kind, call_id, index, message)` tuples.
#[pyfunction]
fn validate_native<'py>(
    py: Python<'py>,
    provider: &str,
    messages_json: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    guard(py, || {
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        let issues = py
            .detach(|| crate::providers::validate_json(provider, &json))
            .map_err(|e| to_py(py, e))?;
        let out = PyList::empty(py);
        for i in &issues {
            out.append(issue_tuple(py, i)?)?;
        }
        Ok(out)
    })
}

/// Number of counts in the process-wide cache.
#[pyfunction]
fn cache_len(py: Python<'_>) -> PyResult<usize> {
    guard(py, || Ok(cache::global().len()))
}

/// The cache key of a message object (`objects`), or None when it is keyed by its JSON.
#[pyfunction]
fn _object_key(py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<Option<u128>> {
    guard(py, || objects::object_key(message))
}

/// Empties the process-wide count cache, the parsed native items and the tokenizer's remembered
/// piece counts: what a cold benchmark needs, and nothing else needs (all only save time).
#[pyfunction]
fn cache_clear(py: Python<'_>) -> PyResult<()> {
    guard(py, || {
        cache::global().clear();
        crate::providers::clear_item_caches();
        crate::readings::clear();
        crate::count::forget_pieces();
        Ok(())
    })
}

/// Blocks until the `bpe_openai` tables of `encoding` are built (they are built on a thread of
/// their own from the first count, and `tiktoken` counts for that backend until then).
#[pyfunction]
fn wait_for_tables(py: Python<'_>, encoding: &str) -> PyResult<()> {
    guard(py, || {
        let scheme = scheme(encoding, None, "openai", 1.0).map_err(|e| to_py(py, e))?;
        py.detach(|| crate::count::wait_for_tables(scheme.encoding));
        Ok(())
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SYNTHESIZED_RESULT_TEXT", plan::SYNTHESIZED_RESULT_TEXT)?;
    m.add("LEDGER_MARKER", crate::ledger::MARKER)?;
    m.add("SUMMARY_MARKER", crate::summary::MARKER)?;
    m.add("MEDIA_PLACEHOLDER", crate::rewrite::MEDIA_PLACEHOLDER)?;
    m.add_class::<CoreConfig>()?;
    m.add_class::<PyCountCache>()?;
    m.add_function(wrap_pyfunction!(plan_openai_chat, m)?)?;
    m.add_function(wrap_pyfunction!(body::assemble_openai_chat_body, m)?)?;
    m.add_function(wrap_pyfunction!(body::body_head, m)?)?;
    m.add_function(wrap_pyfunction!(body::split_body, m)?)?;
    m.add_function(wrap_pyfunction!(count_openai_chat, m)?)?;
    m.add_function(wrap_pyfunction!(count_text, m)?)?;
    m.add_function(wrap_pyfunction!(cut_text, m)?)?;
    m.add_function(wrap_pyfunction!(content_id, m)?)?;
    m.add_function(wrap_pyfunction!(validate_openai_chat, m)?)?;
    m.add_function(wrap_pyfunction!(validate_native, m)?)?;
    m.add_function(wrap_pyfunction!(native::read_native, m)?)?;
    m.add_function(wrap_pyfunction!(native::read_native_objects, m)?)?;
    m.add_class::<native::NativeView>()?;
    m.add_function(wrap_pyfunction!(cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(_object_key, m)?)?;
    m.add_function(wrap_pyfunction!(panic::_panic, m)?)?;
    m.add_function(wrap_pyfunction!(wait_for_tables, m)?)?;
    Ok(())
}
