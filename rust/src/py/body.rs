//! The gateway path's binding: a request body's bytes in, the body to send out, the GIL
//! released from the first byte read to the last byte written.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::plan::PlanReport;
use super::{chosen, guard, CoreConfig, PyCountCache};
use crate::body::{self, Body, BudgetRule};

/// Assembles an OpenAI Chat Completions body. The budget is `limit - reserve - margin`
/// filled to `fill`, where the reserve is the body's own (`max_completion_tokens`,
/// `max_tokens`) or `default_reserve`. Returns `(body, report, messages_before,
/// messages_after)`.
#[pyfunction]
#[pyo3(signature = (body, config, limit, margin, fill, default_reserve, cache=None))]
#[allow(clippy::too_many_arguments)]
pub(super) fn assemble_openai_chat_body<'py>(
    py: Python<'py>,
    body: &[u8],
    config: &CoreConfig,
    limit: u64,
    margin: u64,
    fill: f64,
    default_reserve: u64,
    cache: Option<&PyCountCache>,
) -> PyResult<(Bound<'py, PyBytes>, PlanReport, usize, usize)> {
    guard(py, || {
        let cache = chosen(cache);
        let rule = BudgetRule {
            limit,
            margin,
            fill,
            default_reserve,
        };
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

/// `split_body`'s answer: the body with its history emptied, the history, each item's span.
type Split<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Vec<(usize, usize)>,
);

/// A body split for a format the core does not write out: the body with its history array
/// `key` emptied to `[]` (the few fields Python reads), the history array's own bytes, and
/// each item's byte span in it, found without reading the items. None when the scan cannot
/// split the body so (the caller parses it whole, which says what is wrong).
#[pyfunction]
pub(super) fn split_body<'py>(
    py: Python<'py>,
    body: &[u8],
    key: &str,
    max_request_bytes: usize,
) -> PyResult<Option<Split<'py>>> {
    guard(py, || {
        let limits = crate::request::Limits {
            max_messages: usize::MAX,
            max_request_bytes,
        };
        let Some((elements, range)) = py.detach(|| Body::split_history(body, key, limits)) else {
            return Ok(None);
        };
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
        Ok(Some((
            PyBytes::new(py, &head),
            PyBytes::new(py, &body[range]),
            spans,
        )))
    })
}
