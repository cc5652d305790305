//! The PyO3 binding: bytes (or, for a chat plan, the caller's message objects) in, typed
//! frozen records out (`plan::Plan`), the GIL released while the core works. Core errors become
//! the matching exceptions of `ringbound.errors` (`errors`), never a bare `Exception`; the
//! binding imports nothing from the package around it (`hooks`).

use std::collections::{HashMap, HashSet};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyModule};

use crate::cache::{self, CountCache};
use crate::count::image_price::ImageFormula;
use crate::count::{Backend, Encoding};
use crate::error::CoreError;
use crate::pairing;
use crate::plan::{PlanConfig, Stage, SYNTHESIZED_RESULT_TEXT};
use crate::providers::openai_chat::OpenAIChat;
use crate::providers::Provider;
use crate::request::{load_openai_chat, Limits, Scheme};

mod body;
mod errors;
mod hooks;
mod native;
mod objects;
mod panic;
mod plan;
mod provider_rules;
mod translate;

use errors::issue_tuple;
use panic::guard;

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
    (encoding, backend, images, ratio): (&str, Option<&str>, &str, f64),
    (max_messages, max_request_bytes): (usize, usize),
) -> PyResult<(Scheme, Limits)> {
    let scheme = scheme(encoding, backend, images, ratio)?;
    let limits = Limits {
        max_messages,
        max_request_bytes,
    };
    Ok((scheme, limits))
}

/// A ledger entry the execution layer recorded: (tool, call id, arguments as JSON, status,
/// idempotency key, resource id, turn).
pub(crate) type RecordedEntry = (
    String,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<u32>,
);

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
                .collect::<Result<Vec<_>, _>>()?;
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
                scheme: scheme(encoding, tokenizer_backend, image_formula, token_ratio)?,
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
fn size_arg(value: Option<&Bound<'_, PyAny>>, key: &str, default: usize) -> PyResult<usize> {
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
        None => Err(CoreError::Config {
            key: key.into(),
            reason: format!("must be an integer in [0, 2**40], got {value}"),
        }
        .into()),
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
        max_entries: Option<&Bound<'_, PyAny>>,
        max_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let max_entries = size_arg(max_entries, "max_entries", cache::DEFAULT_MAX_ENTRIES)?;
        let max_bytes = size_arg(max_bytes, "max_bytes", cache::DEFAULT_MAX_BYTES)?;
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

/// Tokens of a request in `provider`'s native format as the provider receives it: every
/// message with its framing, the reply priming, and the tools schema (in OpenAI's shape).
/// `system`: the top-level system texts, as the adapter gives them (`system_texts`), of a
/// provider that keeps its system apart; OpenAI Chat has none (its system is a message).
#[pyfunction]
#[pyo3(signature = (provider, messages_json, tools_json, encoding, tokenizer_backend=None, max_messages=usize::MAX, max_request_bytes=usize::MAX, cache=None, image_formula="openai", token_ratio=1.0, system=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn count(
    py: Python<'_>,
    provider: &str,
    messages_json: Bound<'_, PyAny>,
    tools_json: Option<&[u8]>,
    encoding: &str,
    tokenizer_backend: Option<&str>,
    max_messages: usize,
    max_request_bytes: usize,
    cache: Option<&PyCountCache>,
    image_formula: &str,
    token_ratio: f64,
    system: Vec<Vec<String>>,
) -> PyResult<u64> {
    guard(py, || {
        let cache = chosen(cache);
        if provider == OpenAIChat::KEY && !system.is_empty() {
            return Err(CoreError::Config {
                key: "system".into(),
                reason: "openai_chat keeps its system in the messages; pass none".into(),
            }
            .into());
        }
        let (scheme, limits) = counting(
            (encoding, tokenizer_backend, image_formula, token_ratio),
            (max_messages, max_request_bytes),
        )?;
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        Ok(py.detach(|| {
            if provider == OpenAIChat::KEY {
                load_openai_chat(&json, tools_json, scheme, limits, cache)
                    .map(|r| native::total(&r))
            } else {
                native::paired_count(provider, &json, &system, tools_json, scheme, limits, cache)
                    .map(|(_, tokens)| tokens)
            }
        })?)
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
        let scheme = scheme(encoding, tokenizer_backend, "openai", 1.0)?;
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
        let scheme = scheme(encoding, None, "openai", 1.0)?;
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

/// Pairing issues of a request in `provider`'s native format, by that provider's own rules, as
/// `(kind, call_id, index, message)` tuples. Chat messages are read as the planner reads them,
/// so a malformed one is the same `InvalidMessageError` there as here.
#[pyfunction]
fn validate<'py>(
    py: Python<'py>,
    provider: &str,
    messages_json: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    guard(py, || {
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        let issues = py.detach(|| {
            if provider != OpenAIChat::KEY {
                return crate::native::validate_json(provider, &json);
            }
            let scheme = Scheme::openai(Encoding::O200kBase, crate::count::DEFAULT_BACKEND);
            let limits = Limits {
                max_messages: usize::MAX,
                max_request_bytes: usize::MAX,
            };
            load_openai_chat(&json, None, scheme, limits, cache::global())
                .map(|req| pairing::validate(&req.messages()))
        })?;
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

/// The JSON a message object's walk writes of it when the cache misses it, or None when it
/// is serialized by the serializer instead (`objects`).
#[pyfunction]
fn _walked_json<'py>(
    py: Python<'py>,
    message: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    guard(py, || {
        Ok(objects::walked_json(message)?.map(|json| PyBytes::new(py, &json)))
    })
}

/// Empties the process-wide count cache, the parsed native items, the tokenizer's remembered
/// piece counts and the translations' checkpoints: what a cold benchmark needs, and nothing
/// else needs (all only save time).
#[pyfunction]
fn cache_clear(py: Python<'_>) -> PyResult<()> {
    guard(py, || {
        cache::global().clear();
        crate::providers::clear_item_caches();
        crate::readings::clear();
        crate::rewrite::forget_cuts();
        crate::count::forget_pieces();
        crate::translate::resume::global().clear();
        crate::native::clear_validated();
        Ok(())
    })
}

/// Blocks until the `bpe_openai` tables of `encoding` are built (they are built on a thread of
/// their own from the first count, and `tiktoken` counts for that backend until then).
#[pyfunction]
fn wait_for_tables(py: Python<'_>, encoding: &str) -> PyResult<()> {
    guard(py, || {
        let scheme = scheme(encoding, None, "openai", 1.0)?;
        py.detach(|| crate::count::wait_for_tables(scheme.encoding));
        Ok(())
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SYNTHESIZED_RESULT_TEXT", SYNTHESIZED_RESULT_TEXT)?;
    m.add("LEDGER_MARKER", crate::ledger::MARKER)?;
    m.add("SUMMARY_MARKER", crate::summary::MARKER)?;
    m.add("MEDIA_PLACEHOLDER", crate::rewrite::MEDIA_PLACEHOLDER)?;
    use crate::providers::openai_responses::parse::{TRIGGER_NOT_LAST, TRIGGER_WITH_ID};
    m.add("TRIGGER_NOT_LAST", TRIGGER_NOT_LAST)?;
    m.add("TRIGGER_WITH_ID", TRIGGER_WITH_ID)?;
    provider_rules::add(m)?;
    m.add_class::<CoreConfig>()?;
    m.add_class::<PyCountCache>()?;
    m.add_function(wrap_pyfunction!(hooks::_bind, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan, m)?)?;
    m.add_class::<plan::Plan>()?;
    m.add_class::<plan::PlanReport>()?;
    m.add_class::<plan::Insertion>()?;
    m.add_function(wrap_pyfunction!(body::assemble_openai_chat_body, m)?)?;
    m.add_function(wrap_pyfunction!(body::assemble_items_body, m)?)?;
    m.add_function(wrap_pyfunction!(body::body_head, m)?)?;
    m.add_function(wrap_pyfunction!(body::split_body, m)?)?;
    m.add_function(wrap_pyfunction!(body::split_body_at, m)?)?;
    m.add_class::<body::SplitBody>()?;
    m.add_function(wrap_pyfunction!(count, m)?)?;
    m.add_function(wrap_pyfunction!(count_text, m)?)?;
    m.add_function(wrap_pyfunction!(cut_text, m)?)?;
    m.add_function(wrap_pyfunction!(content_id, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(translate::translate, m)?)?;
    m.add_function(wrap_pyfunction!(translate::translate_body, m)?)?;
    m.add_function(wrap_pyfunction!(translate::opaque_compactions, m)?)?;
    m.add_function(wrap_pyfunction!(translate::history_field, m)?)?;
    m.add_function(wrap_pyfunction!(native::read_native, m)?)?;
    m.add_function(wrap_pyfunction!(native::read_native_objects, m)?)?;
    m.add_class::<native::NativeView>()?;
    m.add_function(wrap_pyfunction!(cache_len, m)?)?;
    m.add_function(wrap_pyfunction!(cache_clear, m)?)?;
    m.add_function(wrap_pyfunction!(_object_key, m)?)?;
    m.add_function(wrap_pyfunction!(_walked_json, m)?)?;
    m.add_function(wrap_pyfunction!(panic::_panic, m)?)?;
    m.add_function(wrap_pyfunction!(wait_for_tables, m)?)?;
    Ok(())
}
