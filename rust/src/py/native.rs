//! The binding of a native request: read once (parsed, checked, mapped to the canonical view
//! and looked up in the count cache) with the GIL released, then planned and counted as often
//! as the assembly needs without reading anything again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use xxhash_rust::xxh3::xxh3_128_with_seed;

use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use super::errors::issue_tuple;
use super::objects::{dump_walked, Walk};
use super::plan::Insertion;
use super::{chosen, guard, CoreConfig, JsonParts, PyCountCache};
use crate::cache::CountCache;
use crate::count::chat::REPLY_PRIMING;
use crate::error::CoreError;
use crate::json_array;
use crate::native::{self, Native};
use crate::native_body;
use crate::plan;
use crate::providers::{self, list_changed};
use crate::readings::{self, Context, Reading, SentMemo};
use crate::request::{check_count, check_size, load_canonical, Request};
use crate::request::{Limits, Scheme};
use crate::rewrite::RewriteKind;
use crate::view::Role;

/// A native request read by the core. Its canonical messages are built as dicts only when
/// asked for (`message`): an assembly reads a few (a note, the first user message), never all.
#[pyclass(frozen, module = "ringbound._core")]
pub struct NativeView {
    reading: Arc<Reading>,
}

/// Reads `provider`'s native items (`messages_json`: a JSON array, or a list of arrays whose
/// elements follow each other) behind system messages of `system` texts, and the tools schema
/// in OpenAI's shape; counts by `config`'s scheme, checked against its limits.
#[pyfunction]
#[pyo3(signature = (provider, messages_json, system, tools_json, config, cache=None, spans=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn read_native<'py>(
    py: Python<'py>,
    provider: &str,
    messages_json: Bound<'py, PyAny>,
    system: Vec<Vec<String>>,
    tools_json: Option<&[u8]>,
    config: &CoreConfig,
    cache: Option<&PyCountCache>,
    spans: Option<Vec<(usize, usize)>>,
) -> PyResult<NativeView> {
    guard(py, || {
        let cache = chosen(cache);
        let parts = JsonParts::new(&messages_json)?;
        let json = parts.slices();
        py.detach(|| {
            let reading = reading(
                provider,
                &json,
                spans.as_deref(),
                &system,
                tools_json,
                config,
                cache,
            )?;
            Ok::<_, CoreError>(NativeView { reading })
        })
        .map_err(PyErr::from)
    })
}

/// The reading of `provider`'s items in `json` (arrays whose elements follow each other;
/// `spans`, a hint, each element's bytes when `json` is one array) behind `system`, kept by
/// what it was read from: `read_native`'s, and the body path's, so that a body one of them
/// read is found by the other.
pub(super) fn reading(
    provider: &str,
    json: &[&[u8]],
    spans: Option<&[(usize, usize)]>,
    system: &[Vec<String>],
    tools_json: Option<&[u8]>,
    config: &CoreConfig,
    cache: &CountCache,
) -> Result<Arc<Reading>, CoreError> {
    let bytes = json.iter().map(|p| p.len()).sum::<usize>();
    check_size(bytes + system_bytes(system), tools_json, config.limits)?;
    let context = Context::new(provider, system, tools_json, config.scheme, cache);
    let limits = config.limits;
    // Items split already (a body's history) are hashed once: their item cache keys make the
    // reading's key too, rather than a second pass over the whole JSON.
    let split = spans.and_then(|s| json_array::at_spans(json, s));
    let keys: Option<Vec<u128>> = match (&split, native::item_seed(provider)?) {
        (Some(elements), Some(seed)) => Some(
            elements
                .iter()
                .map(|raw| xxh3_128_with_seed(raw, seed))
                .collect(),
        ),
        _ => None,
    };
    let key = match &keys {
        Some(keys) => {
            let bytes: Vec<[u8; 16]> = keys.iter().map(|k| k.to_le_bytes()).collect();
            context.key(b"items", bytes.iter().map(|b| &b[..]))
        }
        None => context.key(b"json", json.iter().copied()),
    };
    readings::kept_or_read(
        key,
        |kept| check_count(kept.native.items, limits),
        || {
            let elements = match split {
                Some(elements) => elements,
                None => json_array::split_all(json)?,
            };
            check_count(elements.len(), limits)?;
            let native = native::read_elements_keyed(provider, &elements, keys.as_deref(), system)?;
            let (native, request) = loaded(native, tools_json, config.scheme, limits, cache)?;
            Ok(Reading {
                native,
                request,
                bytes,
                sent: Mutex::default(),
            })
        },
    )
}

/// `read_native` of the caller's items themselves: JSON-native objects (dicts, lists, str,
/// numbers, bool, None) are walked for keys, the items met before come from the provider's
/// cache, and only the others are serialized. Other items (SDK objects) are serialized by
/// `dump(indices) -> list[bytes]` (JSON arrays of the items at those indices, in order) and
/// keyed by their JSON, as the chat path keys them. None when no item is JSON-native or the
/// provider keeps no items: then the caller serializes them all.
#[pyfunction]
#[pyo3(signature = (provider, messages, system, tools_json, config, cache=None, dump=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn read_native_objects<'py>(
    py: Python<'py>,
    provider: &str,
    messages: Bound<'py, PyList>,
    system: Vec<Vec<String>>,
    tools_json: Option<&[u8]>,
    config: &CoreConfig,
    cache: Option<&PyCountCache>,
    dump: Option<Bound<'py, PyAny>>,
) -> PyResult<Option<NativeView>> {
    guard(py, || {
        let cache = chosen(cache);
        let Some(seed) = native::item_seed(provider)? else {
            return Ok(None);
        };
        check_count(messages.len(), config.limits)?;
        let mut walk = Walk::new(&messages, true);
        let mut walked = walk.look_up().walked();
        let others = walked.unkeyed();
        if others.len() == messages.len() || (!others.is_empty() && dump.is_none()) {
            return Ok(None);
        }
        let serialized = match &dump {
            Some(dump) if !others.is_empty() => serialized_by(dump, &others)?,
            _ => Vec::new(),
        };
        let list = messages.clone().unbind();
        let system_bytes = system_bytes(&system);
        let read_bytes = AtomicUsize::new(0);
        let check = |bytes: usize| {
            read_bytes.store(bytes, Ordering::Relaxed);
            check_size(bytes + system_bytes, tools_json, config.limits)
        };
        let context = Context::new(provider, &system, tools_json, config.scheme, cache);
        // Keys, lookups and the reading in one spell: the items missed (a next turn's new
        // ones) are written from the walk, their JSON and keys of one snapshot, so the GIL is
        // taken back only for one the walk cannot write (a float JSON cannot carry).
        py.detach(|| {
            let mut keys: Vec<u128> = walked
                .keys(seed)
                .into_iter()
                .map(Option::unwrap_or_default)
                .collect();
            let mut by_json: HashMap<usize, &[u8]> = HashMap::new();
            for (&i, raw) in others.iter().zip(serialized.iter().map(Vec::as_slice)) {
                // The item cache's own key of this JSON: the reading by JSON finds it too.
                keys[i] = xxh3_128_with_seed(raw, seed);
                by_json.insert(i, raw);
            }
            let mut buffer = Vec::new();
            let mut dump = |missed: &[usize]| {
                missed
                    .iter()
                    .map(|&i| match by_json.get(&i) {
                        Some(raw) => Ok((keys[i], raw.to_vec())),
                        None => match walked.json_of(i, &mut buffer) {
                            Some(json) => Ok((keys[i], json)),
                            None => dump_items(&list, &[i], seed)?
                                .pop()
                                .ok_or_else(list_changed),
                        },
                    })
                    .collect()
            };
            let identity: Vec<u8> = keys.iter().flat_map(|k| k.to_le_bytes()).collect();
            let key = context.key(b"objects", std::iter::once(identity.as_slice()));
            let reading = readings::kept_or_read(
                key,
                |kept| check(kept.bytes),
                || {
                    let native = native::read_keyed(provider, &keys, &mut dump, &check, &system)?;
                    let (native, request) =
                        loaded(native, tools_json, config.scheme, config.limits, cache)?;
                    Ok(Reading {
                        native,
                        request,
                        bytes: read_bytes.load(Ordering::Relaxed),
                        sent: Mutex::default(),
                    })
                },
            )?;
            Ok::<_, CoreError>(Some(NativeView { reading }))
        })
        .map_err(PyErr::from)
    })
}

/// The plan items of a `Plan` as the core's, and the summary note's text where it places
/// one; None when an insertion is one the core does not write (a second summary).
fn plan_items(items: &Bound<'_, PyList>) -> PyResult<Option<PlanItems>> {
    let mut out = Vec::with_capacity(items.len());
    let mut summary = None;
    for item in items.iter() {
        if let Ok(k) = item.extract::<usize>() {
            out.push(plan::Item::Keep(k));
            continue;
        }
        let Ok(insertion) = item.cast::<Insertion>() else {
            return Err(PyTypeError::new_err(
                "a plan item is an int or an Insertion",
            ));
        };
        out.push(match insertion.get() {
            Insertion::Rewrite { index, kind, text } => plan::Item::Rewrite {
                index: *index,
                kind: RewriteKind::from_name(kind).ok_or_else(|| CoreError::Config {
                    key: "rewrites".to_owned(),
                    reason: format!("no rewrite kind {kind:?}"),
                })?,
                text: text.clone(),
            },
            Insertion::LedgerNote { text, role } => plan::Item::LedgerNote {
                text: text.clone(),
                role: match note_role(role) {
                    Some(role) => role,
                    None => return Ok(None),
                },
            },
            Insertion::Summary { text, role } if summary.is_none() => {
                summary = Some(text.clone());
                plan::Item::Summary {
                    role: match note_role(role) {
                        Some(role) => role,
                        None => return Ok(None),
                    },
                }
            }
            Insertion::Synthesized { call_id } => plan::Item::SynthesizedResult {
                call_id: call_id.clone(),
            },
            Insertion::Summary { .. } => return Ok(None),
        });
    }
    Ok(Some((out, summary)))
}

/// The core's items of a plan, and the summary note's text where the plan places one.
type PlanItems = (Vec<plan::Item>, Option<String>);

/// The role of a note a plan inserts, as the core names it.
fn note_role(role: &str) -> Option<Role> {
    match role {
        "system" => Some(Role::System),
        "developer" => Some(Role::Developer),
        "user" => Some(Role::User),
        _ => None,
    }
}

/// The JSON of the items at `indices`, each alone, as the caller's `dump` writes them.
fn serialized_by(dump: &Bound<'_, PyAny>, indices: &[usize]) -> PyResult<Vec<Vec<u8>>> {
    let arrays = JsonParts::new(&dump.call1((indices.to_vec(),))?)?;
    let mut out = Vec::with_capacity(indices.len());
    for array in arrays.slices() {
        let raws = json_array::split(array)?;
        out.extend(raws.into_iter().map(<[u8]>::to_vec));
    }
    if out.len() != indices.len() {
        return Err(list_changed().into());
    }
    Ok(out)
}

/// The JSON of the caller's items at `missed` with the key of each, walked again with the
/// GIL taken back: what is serialized is what is keyed, whatever the caller changed since.
fn dump_items(
    list: &Py<PyList>,
    missed: &[usize],
    seed: u64,
) -> Result<Vec<(u128, Vec<u8>)>, CoreError> {
    Python::attach(|py| {
        let list = list.bind(py);
        let items = missed
            .iter()
            .map(|&i| list.get_item(i).ok())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(list_changed)?;
        let sub = PyList::new(py, items).map_err(|_| list_changed())?;
        let (keys, json) = dump_walked(&sub, seed).ok_or_else(list_changed)?;
        let raws = json_array::split(json.as_bytes())?;
        Ok(keys
            .into_iter()
            .zip(raws.into_iter().map(<[u8]>::to_vec))
            .collect())
    })
}

#[pymethods]
impl NativeView {
    /// Pairing issues as `(kind, call_id, index, message)` tuples, in item order.
    #[getter]
    fn issues<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        guard(py, || {
            let out = PyList::empty(py);
            for i in &self.reading.native.issues {
                out.append(issue_tuple(py, i)?)?;
            }
            Ok(out)
        })
    }

    /// For each canonical message, the native items `(start, end)` it stands for; `(-1, -1)`
    /// for a system text.
    #[getter]
    fn spans(&self) -> Vec<(isize, isize)> {
        self.reading
            .native
            .spans
            .iter()
            .map(|s| match *s {
                Some((a, b)) => (a as isize, b as isize),
                None => (-1, -1),
            })
            .collect()
    }

    #[getter]
    fn binds_next(&self) -> Vec<bool> {
        self.reading.native.layout.binds_next.clone()
    }

    #[getter]
    fn groups(&self) -> Vec<usize> {
        self.reading.native.layout.groups.clone()
    }

    /// What rendering needs to know of each native item, read with it: `(roles, blank_text,
    /// cache_markers)`, one list each; a role is the provider's own word, or None.
    #[getter]
    fn facts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        guard(py, || {
            let facts = &self.reading.native.facts;
            let roles = PyList::new(py, facts.iter().map(|f| f.role))?;
            let blank = PyList::new(py, facts.iter().map(|f| f.blank_text))?;
            let markers = PyList::new(py, facts.iter().map(|f| f.cache_markers))?;
            PyTuple::new(py, [roles.into_any(), blank.into_any(), markers.into_any()])
        })
    }

    /// Canonical messages the provider's rules keep whatever the budget.
    #[getter]
    fn pinned(&self) -> Vec<usize> {
        self.reading.native.pinned.clone()
    }

    /// Canonical index spans `[start, end)` (units the plan dropped) as the spans of native
    /// items they stand for; a span of system texts alone stands for none and is left out.
    fn native_spans(&self, spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
        self.reading.native.native_spans(&spans)
    }

    fn __len__(&self) -> usize {
        self.reading.request.len()
    }

    /// The native items a plan's `items` keep (as they are or rewritten), in order, each once:
    /// what every rendering walks first, done here so no Python loop runs per item.
    fn kept_native(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
        guard(py, || {
            let mut canonical = Vec::new();
            for item in items.try_iter()? {
                let item = item?;
                if let Ok(k) = item.extract::<usize>() {
                    canonical.push(k);
                } else if let Ok(insertion) = item.cast::<Insertion>() {
                    if let Insertion::Rewrite { index, .. } = insertion.get() {
                        canonical.push(*index);
                    }
                } else {
                    return Err(PyTypeError::new_err(
                        "a plan item is an int or an Insertion",
                    ));
                }
            }
            let spans = self.reading.native.spans.len();
            if let Some(k) = canonical.iter().find(|&&k| k >= spans) {
                return Err(PyIndexError::new_err(format!(
                    "canonical message {k} of {spans}"
                )));
            }
            Ok(self.reading.native.kept(canonical)?)
        })
    }

    /// The request the plan `items` (the `Plan.items` of a plan of this reading) sends, as
    /// the core writes it for a list of the caller's objects: `(ops, fresh, system, merged,
    /// stripped, tokens)`. `ops` are the items in order, each an `int` (keep the caller's item
    /// at that index; given the caller's list `messages`, that item itself) or `(origins,
    /// json)`: a new item made of the caller's items `origins` (a tuple): one edited (a result
    /// cut or stubbed, images made text, blank text stripped), neighbours merged, or none for
    /// the ledger note; `fresh` lists the positions of the new items. `system` is the system to send as JSON where the note goes into
    /// it, else None; `merged` the items written as one of neighbours; `stripped` the caller's
    /// items written without their blank text; `tokens` the request's as sent where neighbours
    /// are merged (the plan's count otherwise: None). `system_json` is the caller's system as
    /// JSON (`null` for none; None for one the core cannot place a note in), asked for only
    /// when the plan brings the note (`system_json()`); `dump(indices)` JSON arrays of the
    /// caller's items at those indices (only the items written anew are asked for).
    /// `tools_dropped`: the plan dropped the tools, which the count as sent leaves out.
    ///
    /// A summary note is placed after the ledger note and the request counted as sent.
    /// Synthesized results go where the provider puts them (`Provider::results_placed`) and
    /// the request is counted as sent; a note replaces the one an earlier assembly left in
    /// the system. None for a plan the core does not write (a result it leaves to the caller,
    /// a note where it places none): the assembly refuses it.
    ///
    /// Errors: `PairingError` when the request as sent would not pair (the issues name its
    /// items).
    #[pyo3(signature = (provider, items, system_json, system_markers, tools_dropped, dump, config, cache=None, messages=None))]
    #[allow(clippy::too_many_arguments)]
    fn written<'py>(
        &self,
        py: Python<'py>,
        provider: &str,
        items: &Bound<'py, PyList>,
        system_json: Bound<'py, PyAny>,
        system_markers: u32,
        tools_dropped: bool,
        dump: Bound<'py, PyAny>,
        config: &CoreConfig,
        cache: Option<&PyCountCache>,
        messages: Option<Bound<'py, PyList>>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        guard(py, || {
            let Some((items, summary)) = plan_items(items)? else {
                return Ok(None);
            };
            let native = &self.reading.native;
            let request = &self.reading.request;
            let spans = native.spans.len();
            if let Some(k) = items.iter().find_map(|item| match item {
                plan::Item::Keep(k) | plan::Item::Rewrite { index: k, .. } if *k >= spans => {
                    Some(*k)
                }
                _ => None,
            }) {
                return Err(PyIndexError::new_err(format!(
                    "canonical message {k} of {spans}"
                )));
            }
            let Some(kept) = native_body::kept_of_items(
                provider,
                native,
                &items,
                summary.as_deref(),
                system_markers,
                |k| request.get(k),
            )?
            else {
                return Ok(None);
            };
            // Only the items written anew are serialized: a merge, a rewrite, a strip.
            let mut wanted: Vec<usize> = kept
                .merges
                .iter()
                .flat_map(|(run, _)| kept.items[run.clone()].iter().copied())
                .chain(
                    kept.rewrites
                        .iter()
                        .flat_map(|r| kept.items[r.at.clone()].iter().copied()),
                )
                .chain(kept.strips.iter().map(|&j| kept.items[j]))
                .chain(
                    kept.added
                        .iter()
                        .filter_map(native_body::Added::target)
                        .map(|j| kept.items[j]),
                )
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            let raws = if wanted.is_empty() {
                Vec::new()
            } else {
                serialized_by(&dump, &wanted)?
            };
            let by_item: HashMap<usize, &[u8]> = wanted
                .iter()
                .copied()
                .zip(raws.iter().map(Vec::as_slice))
                .collect();
            let memo = &self.reading.sent;
            let remembered = memo
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .filter(|m| {
                    m.items == items
                        && m.markers == system_markers
                        && !tools_dropped
                        && summary.is_none()
                })
                .map(|m| m.tokens);
            let tools_tokens = if tools_dropped {
                0
            } else {
                request.tools_tokens
            };
            let system: Option<String> = if !kept.notes.is_empty() {
                system_json.call0()?.extract()?
            } else {
                None
            };
            let written = py.detach(|| {
                let raw = |i: usize| by_item.get(&i).copied();
                let system = match &system {
                    Some(json) => Some(Some(json.as_str())),
                    None if !kept.notes.is_empty() => None,
                    None => Some(None),
                };
                let Some(history) = native_body::history(provider, &kept, system, &raw, false)?
                else {
                    return Ok(None);
                };
                // A plan of a reading with calls left unanswered is checked as sent even
                // where nothing is merged: the plan answered or dropped each one.
                if !kept.sent_differs(native) && summary.is_none() {
                    return Ok::<_, CoreError>(Some((history, None)));
                }
                if let Some(tokens) = remembered {
                    return Ok(Some((history, Some(tokens))));
                }
                // Merged neighbours cost otherwise than the plan counted them apart, a
                // summary otherwise than the room it reserved, and synthesized results
                // otherwise where they join a turn: the request is checked and counted as
                // sent, the notes placed in the system as its texts.
                // The notes an earlier assembly left go where the new ones replace them.
                let earlier = |texts: &&Vec<String>| {
                    kept.rebase && matches!(texts.as_slice(), [t] if providers::is_note(t))
                };
                let mut system: Vec<Vec<String>> = native
                    .system
                    .iter()
                    .filter(|t| !earlier(t))
                    .cloned()
                    .collect();
                system.extend(history.system_notes.iter().map(|t| vec![t.clone()]));
                let mut sent = native::sent(provider, native, &history.pieces, &system)?;
                if !sent.issues.is_empty() {
                    // What the plan would send does not pair: nothing goes out.
                    return Err(CoreError::Pairing(sent.issues));
                }
                let messages = std::mem::take(&mut sent.messages);
                let counted = load_canonical(messages, None, config.scheme, chosen(cache))?;
                Ok(Some((history, Some(total(&counted) + tools_tokens))))
            })?;
            let Some((history, tokens)) = written else {
                return Ok(None);
            };
            if let (Some(tokens), None, false, None) = (tokens, remembered, tools_dropped, &summary)
            {
                *memo.lock().unwrap_or_else(PoisonError::into_inner) = Some(SentMemo {
                    items: items.clone(),
                    markers: system_markers,
                    tokens,
                });
            }
            // Given the caller's list, each kept item is its object already: Python maps
            // only the new items (their positions listed), not one step per item.
            let ops = PyList::empty(py);
            let mut fresh = Vec::new();
            for piece in &history.pieces {
                match piece {
                    native_body::Piece::Keep(i) => match &messages {
                        Some(list) => ops.append(list.get_item(*i).map_err(|_| list_changed())?)?,
                        None => ops.append(*i)?,
                    },
                    native_body::Piece::New { origins, json } => {
                        fresh.push(ops.len());
                        let origins = PyTuple::new(py, origins)?;
                        ops.append((origins, PyBytes::new(py, json)))?;
                    }
                }
            }
            let system = history
                .system
                .as_deref()
                .map(|s| PyBytes::new(py, s.as_bytes()));
            let out = (ops, fresh, system, kept.merged(), history.stripped, tokens);
            Ok(Some(out.into_pyobject(py)?))
        })
    }

    /// Canonical message `k` as an OpenAI Chat dict: role, content (its texts), and its tool
    /// calls or the call it answers.
    fn message<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Bound<'py, PyDict>> {
        guard(py, || {
            let req = &self.reading.request;
            if k >= req.len() {
                return Err(PyIndexError::new_err(format!(
                    "canonical message {k} of {}",
                    req.len()
                )));
            }
            let m = req.full(k);
            let out = PyDict::new(py);
            out.set_item("role", m.role.as_str())?;
            out.set_item("content", m.texts.concat())?;
            if let Some(name) = &m.name {
                out.set_item("name", name)?;
            }
            if !m.tool_calls.is_empty() {
                let calls = PyList::empty(py);
                for c in &m.tool_calls {
                    let function = PyDict::new(py);
                    function.set_item("name", &*c.name)?;
                    function.set_item("arguments", &*c.arguments)?;
                    let call = PyDict::new(py);
                    call.set_item("id", &*c.id)?;
                    call.set_item("type", "function")?;
                    call.set_item("function", function)?;
                    calls.append(call)?;
                }
                out.set_item("tool_calls", calls)?;
            }
            if let Some(id) = &m.tool_call_id {
                out.set_item("tool_call_id", id)?;
            }
            Ok(out)
        })
    }

    /// Tokens of the request as the provider receives it: every canonical message, the reply
    /// priming and the tools schema.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        guard(py, || {
            let req = &self.reading.request;
            Ok(py.detach(|| total(req)))
        })
    }
}

impl NativeView {
    pub(super) fn request(&self) -> &Request<'static> {
        &self.reading.request
    }

    pub(super) fn layout(&self) -> &plan::Layout {
        &self.reading.native.layout
    }
}

/// Bytes of the system texts, counted with the items against `max_request_bytes`.
fn system_bytes(system: &[Vec<String>]) -> usize {
    system.iter().flatten().map(String::len).sum()
}

/// The native request read and its canonical view loaded: limits first, then parsing.
fn load(
    provider: &str,
    elements: &[&[u8]],
    system: &[Vec<String>],
    tools_json: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<(Native, Request<'static>), CoreError> {
    let bytes = elements.iter().map(|p| p.len()).sum::<usize>() + system_bytes(system);
    check_size(bytes, tools_json, limits)?;
    loaded(
        native::read_elements(provider, elements, system)?,
        tools_json,
        scheme,
        limits,
        cache,
    )
}

/// A native request read, its canonical view loaded.
fn loaded(
    mut native: Native,
    tools_json: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<(Native, Request<'static>), CoreError> {
    check_count(native.items, limits)?;
    let messages = std::mem::take(&mut native.messages);
    let mut request = load_canonical(messages, tools_json, scheme, cache)?;
    if request.tools_tokens > 0 {
        request.tools_tokens += u64::from(scheme.scale(native.tool_system_tokens));
    }
    Ok((native, request))
}

/// Tokens of a loaded request as the provider receives it.
pub(super) fn total(req: &Request<'_>) -> u64 {
    req.message_tokens() + u64::from(REPLY_PRIMING) + req.tools_tokens
}

/// Whether `provider`'s items (a JSON array, or arrays whose elements follow each other) pair
/// by the provider's rules, and their tokens behind `system` texts, as the provider receives
/// them (a request written from a plan is checked as it is sent).
pub(super) fn paired_count(
    provider: &str,
    json: &[&[u8]],
    system: &[Vec<String>],
    tools_json: Option<&[u8]>,
    scheme: Scheme,
    limits: Limits,
    cache: &CountCache,
) -> Result<(bool, u64), CoreError> {
    // Refused by size before anything is split; `load` checks the count.
    let bytes = json.iter().map(|p| p.len()).sum::<usize>() + system_bytes(system);
    check_size(bytes, tools_json, limits)?;
    let elements = json_array::split_all(json)?;
    let (native, request) = load(
        provider, &elements, system, tools_json, scheme, limits, cache,
    )?;
    Ok((native.issues.is_empty(), total(&request)))
}
