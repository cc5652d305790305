//! A panic stops at the binding: every function Python can call runs inside `guard`, which
//! turns a panic into `ringbound.errors.InternalError` (a `RingboundError`), so a gateway that
//! catches `RingboundError` never meets PyO3's `PanicException` (a `BaseException`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Runs `f`, and raises `InternalError` if it panics. The state a panic may leave half-done
/// (a cache shard, a thread's walk buffers) is only ever a cache: the next call starts over.
pub(crate) fn guard<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(internal_error(py, &*payload)),
    }
}

fn internal_error(py: Python<'_>, payload: &(dyn Any + Send)) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    let make = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        kwargs.set_item("reason", &what)?;
        let text = format!("internal error in ringbound's core (a bug, please report it): {what}");
        super::errors::exception(py, "InternalError", text, &kwargs)
    };
    match make() {
        Ok(e) | Err(e) => e,
    }
}

/// Panics with `message`: lets the test suite prove a panic arrives as `InternalError`.
#[pyfunction]
pub(crate) fn _panic(py: Python<'_>, message: &str) -> PyResult<()> {
    guard(py, || panic!("{message}"))
}
