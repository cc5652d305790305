//! Core errors as the exceptions of `ringbound.errors`, with the fields a caller acts on; the
//! classes come from the façade's hooks, looked up on the error path only.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::hooks::hooks;
use crate::error::{BucketTokens, CoreError};
use crate::pairing::PairingIssue;

impl From<CoreError> for PyErr {
    fn from(err: CoreError) -> PyErr {
        Python::attach(|py| to_py(py, err))
    }
}

/// Raises the `ringbound.errors` exception for a core error.
pub(crate) fn to_py(py: Python<'_>, err: CoreError) -> PyErr {
    match raise(py, &err) {
        Ok(e) | Err(e) => e,
    }
}

/// `ringbound.errors.<class>(text, **kwargs)` as a raised error.
pub(crate) fn exception(
    py: Python<'_>,
    class: &str,
    text: String,
    kwargs: &Bound<'_, PyDict>,
) -> PyResult<PyErr> {
    let errors = hooks(py)?.errors.bind(py);
    let exc = errors.getattr(class)?.call((text,), Some(kwargs))?;
    Ok(PyErr::from_value(exc))
}

fn raise(py: Python<'_>, err: &CoreError) -> PyResult<PyErr> {
    let kwargs = PyDict::new(py);
    let class = match err {
        CoreError::InvalidMessage { index, reason } => {
            kwargs.set_item("index", *index)?;
            kwargs.set_item("reason", reason)?;
            "InvalidMessageError"
        }
        CoreError::Pairing(issues) | CoreError::Unrepairable { issues, .. } => {
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
    exception(py, class, err.to_string(), &kwargs)
}

pub(crate) fn bucket_dict<'py>(py: Python<'py>, b: &BucketTokens) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("prefix", b.prefix)?;
    d.set_item("middle", b.middle)?;
    d.set_item("suffix", b.suffix)?;
    d.set_item("tools", b.tools)?;
    d.set_item("insertions", b.insertions)?;
    d.set_item("framing", b.framing)?;
    Ok(d)
}

/// A pairing issue as `(kind, call_id, index, message)`, the fields of `PairingIssue`.
pub(crate) fn issue_tuple<'py>(py: Python<'py>, i: &PairingIssue) -> PyResult<Bound<'py, PyTuple>> {
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
