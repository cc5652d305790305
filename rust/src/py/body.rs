//! The gateway path's binding: a request body's bytes in, the body to send out, the GIL
//! released from the first byte read to the last byte written.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::native::{paired_count, reading};
use super::plan::PlanReport;
use super::{chosen, guard, CoreConfig, PyCountCache};
use crate::body::{self, Body, BudgetRule};
use crate::error::CoreError;
use crate::json_array;
use crate::native_body;
use crate::pairing::IssueKind;
use crate::plan::{self, PlanConfig};

/// How a body's budget follows its output reserve, as the caller gives it: `(limit, margin,
/// fill, default_reserve)`. The budget is `limit - reserve - margin` filled to `fill`, where
/// the reserve is the body's own (`max_tokens` and each provider's spelling) or
/// `default_reserve`.
type Rule = (u64, u64, f64, u64);

fn budget_rule((limit, margin, fill, default_reserve): Rule) -> BudgetRule {
    BudgetRule {
        limit,
        margin,
        fill,
        default_reserve,
    }
}

/// Assembles an OpenAI Chat Completions body, its budget by `rule`. Returns `(body, report,
/// messages_before, messages_after)`.
#[pyfunction]
#[pyo3(signature = (body, config, rule, cache=None))]
pub(super) fn assemble_openai_chat_body<'py>(
    py: Python<'py>,
    body: &[u8],
    config: &CoreConfig,
    rule: Rule,
    cache: Option<&PyCountCache>,
) -> PyResult<Assembled<'py>> {
    guard(py, || {
        let cache = chosen(cache);
        let rule = budget_rule(rule);
        let done = py.detach(|| {
            body::assemble_openai_chat(
                body,
                &config.plan,
                rule,
                config.scheme,
                config.limits,
                cache,
            )
        })?;
        Ok((
            PyBytes::new(py, &done.body),
            PlanReport::of(&done.plan),
            done.messages_before,
            done.messages_after,
        ))
    })
}

/// An assembled body: `(body, report, items_before, items_after)`.
type Assembled<'py> = (Bound<'py, PyBytes>, PlanReport, usize, usize);
/// An assembled body, and how many of its items are neighbours merged.
type ItemsAssembled<'py> = (Bound<'py, PyBytes>, PlanReport, usize, usize, usize);

/// Assembles a body of a native provider (`provider`, its history the array `key`, its system
/// the field `system_key`) when the plan only drops whole items, and may bring the ledger
/// note, and the provider sends the rest as given: `split` is the body as `split_body_at`
/// split it, `system` the texts the adapter reads from the body's system, which holds
/// `system_markers` prompt cache markers, and `tools_json` its tools in OpenAI's shape; the
/// budget by `rule`.
/// Returns `(body, report, items_before, items_after, merged)`, the report's spans in item
/// indices, `merged` the items written as one of neighbours a drop brought together (the
/// report then counts the request as sent);
/// None when the body path does not write the plan, or the request is refused (the items
/// path, reading the same kept reading, then writes it or raises in its own words).
#[pyfunction]
#[pyo3(signature = (
    provider, key, system_key, split, system, tools_json, system_markers, config, rule,
    cache=None
))]
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble_items_body<'py>(
    py: Python<'py>,
    provider: &str,
    key: &str,
    system_key: Option<&str>,
    split: &SplitBody,
    system: Vec<Vec<String>>,
    tools_json: Option<&[u8]>,
    system_markers: u32,
    config: &CoreConfig,
    rule: Rule,
    cache: Option<&PyCountCache>,
) -> PyResult<Option<ItemsAssembled<'py>>> {
    guard(py, || {
        let cache = chosen(cache);
        let rule = budget_rule(rule);
        let head = split.head.bind(py).as_bytes();
        let array = split.history(py);
        let spans = &split.spans;
        let done = py.detach(|| -> Result<_, CoreError> {
            let (body, split) = Body::parse_with_history(head, key, config.limits)?;
            let Some((_, at)) = split else {
                return Ok(None);
            };
            let budget = rule.budget(body.reserve()?)?;
            let json = [array];
            let texts = &system;
            let reading = reading(
                provider,
                &json,
                Some(spans),
                texts,
                tools_json,
                config,
                cache,
            )?;
            let native = &reading.native;
            // Calls left without results are the plan's to answer where the caller asked it
            // to; any other issue is the items path's to refuse in its words.
            let repaired = config.plan.synthesize_missing_results
                && native
                    .issues
                    .iter()
                    .all(|issue| issue.kind == IssueKind::MissingResult);
            if !native.issues.is_empty() && !repaired {
                return Ok(None);
            }
            let cfg = PlanConfig {
                budget,
                ..config.plan.clone()
            };
            let mut pinned = native.pinned.clone();
            pinned.sort_unstable();
            let plan = plan::plan(&reading.request, &cfg, &pinned, Some(&native.layout))?;
            let Some(kept) =
                native_body::kept_as_given(provider, native, &plan, system_markers, |k| {
                    reading.request.get(k)
                })?
            else {
                return Ok(None);
            };
            let items = json_array::at_spans(&json, spans)
                .ok_or_else(|| body::invalid("the history's item spans do not fit it"))?;
            let system = native_body::System {
                key: system_key,
                value: system_key.and_then(|k| body.field(k)),
            };
            if kept.rebase {
                // A body whose system holds an earlier note is the items path's (`inputs`).
                return Ok(None);
            }
            let Some(out) = native_body::write(provider, head, at, system, &items, &kept)? else {
                return Ok(None);
            };
            let mut report = PlanReport::of_native(&plan, native).with_stripped(&out.stripped);
            if kept.sent_differs(native) {
                // Merged neighbours cost less than the plan counted them apart, and results
                // joined to a turn otherwise: the request is checked and counted as sent
                // (the notes in the system as its texts), as the objects path counts it.
                let mut texts = texts.clone();
                texts.extend(out.system_notes.iter().map(|t| vec![t.clone()]));
                let (paired, sent) = paired_count(
                    provider,
                    &[&out.body[out.history.clone()]],
                    &texts,
                    tools_json,
                    config.scheme,
                    config.limits,
                    cache,
                )?;
                if !paired || sent > cfg.budget {
                    return Ok(None); // the items path refuses it, or plans again tighter
                }
                report = report.sent(sent);
            }
            Ok(Some((out, report, native.items, kept.merged())))
        });
        // Whatever the core refuses here, the items path refuses in its own words.
        let Ok(Some((out, report, before, merged))) = done else {
            return Ok(None);
        };
        let body = PyBytes::new(py, &out.body);
        Ok(Some((body, report, before, out.items, merged)))
    })
}

/// `body_head`'s answer: the model, and the output reserve with the field that named it.
type Head = (Option<String>, Option<(String, u64)>);

/// The body's `model` (None unless a string) and output reserve as `(field, count)` (None
/// unless given), read without building the body's values; `InvalidBodyError` for what is
/// not a JSON object.
#[pyfunction]
pub(super) fn body_head(py: Python<'_>, body: &[u8], max_request_bytes: usize) -> PyResult<Head> {
    guard(py, || {
        let limits = crate::request::Limits {
            max_messages: usize::MAX,
            max_request_bytes,
        };
        py.detach(|| {
            let body = Body::parse(body, limits)?;
            Ok((body.model(), body.reserve()?))
        })
    })
}

/// A body split for a format the core does not write out whatever the plan: the body with its
/// history array emptied to `[]` (`head`, the few fields Python reads) and each item's byte
/// span in the history, found without reading the items. The history itself stays in the
/// body: `array` copies it only for the `items` path, and `assemble_items_body` reads it where
/// it is.
#[pyclass(frozen, module = "ringbound._core")]
pub struct SplitBody {
    body: Py<PyBytes>,
    /// The history array's byte range in `body`.
    array: (usize, usize),
    /// Each item's byte span in the history array.
    spans: Vec<(usize, usize)>,
    #[pyo3(get)]
    head: Py<PyBytes>,
}

#[pymethods]
impl SplitBody {
    /// The history array's bytes, a copy.
    fn array<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        guard(py, || Ok(PyBytes::new(py, self.history(py))))
    }

    /// Each item's byte span in the history array.
    #[getter]
    fn spans(&self) -> Vec<(usize, usize)> {
        self.spans.clone()
    }
}

impl SplitBody {
    fn history<'a>(&'a self, py: Python<'a>) -> &'a [u8] {
        &self.body.bind(py).as_bytes()[self.array.0..self.array.1]
    }
}

/// `split_body_at` of `body`: None when the scan cannot split the body so (the caller parses it
/// whole, which says what is wrong).
#[pyfunction]
pub(super) fn split_body_at(
    py: Python<'_>,
    body: Bound<'_, PyBytes>,
    key: &str,
    max_request_bytes: usize,
) -> PyResult<Option<SplitBody>> {
    guard(py, || {
        let bytes = body.as_bytes();
        let Some((head, array, spans)) = py.detach(|| split(bytes, key, max_request_bytes)) else {
            return Ok(None);
        };
        Ok(Some(SplitBody {
            body: body.clone().unbind(),
            array: (array.start, array.end),
            spans,
            head: PyBytes::new(py, &head).unbind(),
        }))
    })
}

/// `split_body`'s answer: the body with its history emptied, the history, each item's span.
type Split<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<(usize, usize)>,
);

/// `split_body_at`, its history copied out: `(head, history, spans)`.
#[pyfunction]
pub(super) fn split_body<'py>(
    py: Python<'py>,
    body: &[u8],
    key: &str,
    max_request_bytes: usize,
) -> PyResult<Option<Split<'py>>> {
    guard(py, || {
        let Some((head, array, spans)) = py.detach(|| split(body, key, max_request_bytes)) else {
            return Ok(None);
        };
        Ok(Some((
            PyBytes::new(py, &head),
            PyBytes::new(py, &body[array]),
            spans,
        )))
    })
}

/// `split`'s answer: the head, the history array's byte range, each item's span in it.
type Cut = (Vec<u8>, std::ops::Range<usize>, Vec<(usize, usize)>);

/// The body with its history array `key` emptied to `[]`, the array's byte range, and each
/// item's span in the array.
fn split(body: &[u8], key: &str, max_request_bytes: usize) -> Option<Cut> {
    let limits = crate::request::Limits {
        max_messages: usize::MAX,
        max_request_bytes,
    };
    let (elements, range) = Body::split_history(body, key, limits)?;
    let base = body.as_ptr() as usize + range.start;
    let spans = elements
        .iter()
        .map(|e| {
            let start = e.as_ptr() as usize - base;
            (start, start + e.len())
        })
        .collect();
    let mut head = Vec::with_capacity(body.len() - range.len() + 2);
    head.extend_from_slice(&body[..range.start]);
    head.extend_from_slice(b"[]");
    head.extend_from_slice(&body[range.end..]);
    Some((head, range, spans))
}
