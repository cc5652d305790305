//! The binding of translation: JSON bytes in, the target's JSON bytes and the report's
//! changes as plain tuples out, the GIL released while the core works.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::guard;
use crate::error::CoreError;
use crate::translate::{self as core, Options, Reasoning, Report, Unsupported};

/// A change as Python builds its record of it: `(item, action, what, detail)`.
type ChangeTuple = (Option<usize>, &'static str, String, String);

fn options(
    reasoning: &str,
    unsupported: &str,
    summaries: Vec<(usize, String)>,
    gemini_sentinel: bool,
) -> Result<Options, CoreError> {
    let config = |key: &str, reason: String| CoreError::Config {
        key: key.into(),
        reason,
    };
    Ok(Options {
        reasoning: match reasoning {
            "drop" => Reasoning::Drop,
            "text" => Reasoning::Text,
            other => {
                return Err(config(
                    "reasoning",
                    format!("'{other}' is not one of drop, text"),
                ))
            }
        },
        unsupported: match unsupported {
            "refuse" => Unsupported::Refuse,
            "placeholder" => Unsupported::Placeholder,
            other => {
                return Err(config(
                    "unsupported",
                    format!("'{other}' is not one of refuse, placeholder"),
                ))
            }
        },
        summaries,
        gemini_sentinel,
    })
}

fn changes(report: Report) -> (Vec<ChangeTuple>, Vec<(String, String)>) {
    let changes = report
        .changes
        .into_iter()
        .map(|c| (c.item, c.action, c.what, c.detail))
        .collect();
    (changes, report.ids)
}

type Out<'py> = (
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Vec<ChangeTuple>,
    Vec<(String, String)>,
);

/// `source`'s items (`messages_json`), system and tools (JSON, each optional) in `target`'s
/// shape: `(messages, system, tools, changes, ids)`, each JSON as bytes.
#[pyfunction]
#[pyo3(signature = (source, target, messages_json, system_json=None, tools_json=None, reasoning="drop", unsupported="refuse", summaries=Vec::new(), gemini_sentinel=true))]
#[allow(clippy::too_many_arguments)]
pub(super) fn translate<'py>(
    py: Python<'py>,
    source: &str,
    target: &str,
    messages_json: &[u8],
    system_json: Option<&[u8]>,
    tools_json: Option<&[u8]>,
    reasoning: &str,
    unsupported: &str,
    summaries: Vec<(usize, String)>,
    gemini_sentinel: bool,
) -> PyResult<Out<'py>> {
    guard(py, || {
        let options = options(reasoning, unsupported, summaries, gemini_sentinel)?;
        let done = py.detach(|| {
            let out = core::translate_resumed(
                source,
                target,
                messages_json,
                system_json,
                tools_json,
                &options,
            )?;
            let json = |v: &serde_json::Value| serde_json::to_vec(v).unwrap_or_default();
            let messages = out.json;
            let system = out.system.as_ref().map(json);
            let tools = out.tools.as_ref().map(json);
            Ok::<_, CoreError>((messages, system, tools, out.report))
        })?;
        let (messages, system, tools, report) = done;
        let (changes, ids) = changes(report);
        Ok((
            PyBytes::new(py, &messages),
            system.map(|s| PyBytes::new(py, &s)),
            tools.map(|t| PyBytes::new(py, &t)),
            changes,
            ids,
        ))
    })
}

type BodyOut<'py> = (Bound<'py, PyBytes>, Vec<ChangeTuple>, Vec<(String, String)>);

/// A request body of `source` as one of `target`: `(body, changes, ids)`.
#[pyfunction]
#[pyo3(signature = (source, target, body, reasoning="drop", unsupported="refuse", summaries=Vec::new(), gemini_sentinel=true))]
#[allow(clippy::too_many_arguments)]
pub(super) fn translate_body<'py>(
    py: Python<'py>,
    source: &str,
    target: &str,
    body: &[u8],
    reasoning: &str,
    unsupported: &str,
    summaries: Vec<(usize, String)>,
    gemini_sentinel: bool,
) -> PyResult<BodyOut<'py>> {
    guard(py, || {
        let options = options(reasoning, unsupported, summaries, gemini_sentinel)?;
        let (out, report) =
            py.detach(|| core::body::translate_body(source, target, body, &options))?;
        let (changes, ids) = changes(report);
        Ok((PyBytes::new(py, &out), changes, ids))
    })
}

/// The source items that are opaque compactions a translation needs a summary of.
#[pyfunction]
pub(super) fn opaque_compactions(
    py: Python<'_>,
    source: &str,
    messages_json: &[u8],
) -> PyResult<Vec<usize>> {
    guard(py, || {
        Ok(py.detach(|| core::opaque_compactions(source, messages_json))?)
    })
}

/// Where a body of `source` keeps its history: the key (`messages`, `input`, `contents`).
#[pyfunction]
pub(super) fn history_field(py: Python<'_>, source: &str) -> PyResult<&'static str> {
    guard(py, || Ok(core::body::history_field(source)))
}
