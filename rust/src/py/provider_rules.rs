//! Provider rules the Python adapters read from the core instead of keeping a copy: the
//! tables of fields and blocks each format allows, Gemini's error wordings, and the join of
//! the notes to a system string. One home each, so the two languages cannot drift apart.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyModule, PyString, PyTuple};

use super::panic::guard;
use crate::error::CoreError;
use crate::providers::system::{self, split_notes};
use crate::providers::tools;
use crate::providers::{bedrock_converse, gemini, openai_responses, system_with_notes};

/// Adds the tables (tuples, in the core's order) and `join_system_note` to `m`.
pub(super) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GEMINI_DATA_FIELDS", PyTuple::new(py, gemini::DATA_FIELDS)?)?;
    m.add("GEMINI_META_FIELDS", PyTuple::new(py, gemini::META_FIELDS)?)?;
    m.add(
        "GEMINI_SIGNATURE_FIELDS",
        PyTuple::new(py, gemini::SIGNATURE_FIELDS)?,
    )?;
    m.add(
        "RESPONSES_HOSTED",
        PyTuple::new(py, openai_responses::parse::HOSTED)?,
    )?;
    m.add(
        "RESPONSES_ITEM_TYPES",
        PyTuple::new(py, openai_responses::parse::supported())?,
    )?;
    m.add(
        "BEDROCK_USER_BLOCKS",
        PyTuple::new(py, bedrock_converse::USER_BLOCKS)?,
    )?;
    m.add(
        "BEDROCK_ASSISTANT_BLOCKS",
        PyTuple::new(py, bedrock_converse::ASSISTANT_BLOCKS)?,
    )?;
    m.add(
        "BEDROCK_RESULT_BLOCKS",
        PyTuple::new(py, bedrock_converse::RESULT_BLOCKS)?,
    )?;
    m.add(
        "ANTHROPIC_OMITTED_TURNS_TEXT",
        crate::providers::anthropic::OMITTED_TURNS_TEXT,
    )?;
    // Gemini's 400 wordings, which the core's issues quote and the façade names.
    for (name, wording) in [
        ("GEMINI_COUNT_MISMATCH", gemini::COUNT_MISMATCH),
        ("GEMINI_CALL_TURN_POSITION", gemini::CALL_TURN_POSITION),
        (
            "GEMINI_RESPONSE_TURN_POSITION",
            gemini::RESPONSE_TURN_POSITION,
        ),
        ("GEMINI_ALTERNATE", gemini::ALTERNATE),
    ] {
        m.add(name, wording)?;
    }
    m.add("NOTE_SEPARATOR", crate::providers::NOTE_SEPARATOR)?;
    m.add_function(wrap_pyfunction!(join_system_note, m)?)?;
    m.add_function(wrap_pyfunction!(split_system_note, m)?)?;
    m.add_function(wrap_pyfunction!(read_system, m)?)?;
    m.add_function(wrap_pyfunction!(tools_as_openai, m)?)?;
    Ok(())
}

/// One part of a system to join: a string the core can read (UTF-8), or None for an absent
/// note. Anything else (a lone surrogate, not a string) is the caller's system or an
/// assembly's note that cannot be sent, refused as an InvalidMessageError naming `what`.
fn part<'a>(value: Option<&'a Bound<'_, PyAny>>, what: &str) -> Result<Option<&'a str>, CoreError> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let refused = |why: &str| CoreError::InvalidMessage {
        index: None,
        reason: format!("the {what} {why}"),
    };
    let text = value
        .cast::<PyString>()
        .map_err(|_| refused("must be a string"))?;
    text.to_str()
        .map(Some)
        .map_err(|_| refused("holds a lone surrogate, which is not UTF-8"))
}

/// The system text `base` with the ledger `note` and the `summary` note joined to it, each
/// after a blank line, empty or absent parts left out: how every adapter writes a system
/// string with notes (`split_system_note` in `ringbound.providers.base` takes it apart).
#[pyfunction]
#[pyo3(signature = (base, note=None, summary=None))]
fn join_system_note(
    py: Python<'_>,
    base: &Bound<'_, PyAny>,
    note: Option<&Bound<'_, PyAny>>,
    summary: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    guard(py, || {
        let base = part(Some(base), "system")?.unwrap_or_default();
        let note = part(note, "ledger note")?;
        let summary = part(summary, "summary note")?;
        Ok(system_with_notes(base, note, summary))
    })
}

/// A system string taken apart where `join_system_note` joined the notes to it: `(base,
/// note, summary)`, each note None when absent (`providers::system::split_notes`).
#[pyfunction]
fn split_system_note<'a>(
    py: Python<'_>,
    text: &'a str,
) -> PyResult<(&'a str, Option<&'a str>, Option<&'a str>)> {
    guard(py, || Ok(split_notes(text)))
}

/// The top-level system of `provider`, given as JSON (`null` for none), as the core counts
/// it: its texts, the caller's and then each note an earlier assembly left in it, one group
/// each; and the `cache_control` markers it carries (`providers::system::read`).
#[pyfunction]
fn read_system(
    py: Python<'_>,
    provider: &str,
    system: &[u8],
) -> PyResult<(Vec<Vec<String>>, usize)> {
    guard(py, || {
        let read = system::read(provider, system)?;
        Ok((read.texts, read.markers))
    })
}

/// `tools`, the JSON of a provider's tool definitions, as the OpenAI Chat tools the core
/// counts, as JSON (`providers::tools::as_openai`).
#[pyfunction]
fn tools_as_openai<'py>(
    py: Python<'py>,
    provider: &str,
    tools: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    guard(py, || {
        Ok(PyBytes::new(py, &tools::as_openai(provider, tools)?))
    })
}
