//! What the façade hands the binding once, at `import ringbound`: its exception classes, the
//! serializer of SDK message objects and the writer of chat insertions. The binding imports
//! nothing from the package around it, so the core's Python surface depends on no module
//! layout, and no call pays an import.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use super::guard;

/// The façade's pieces the binding calls.
pub(crate) struct Hooks {
    /// `ringbound.errors`: the exception classes core errors become.
    pub errors: Py<PyAny>,
    /// `dump_messages(messages, indices) -> list[bytes]`: JSON arrays of SDK message objects.
    pub dump_messages: Py<PyAny>,
    /// The OpenAI Chat insertion writer: `synthesized_result(call_id)`, `ledger_note(text,
    /// role)`, `rewritten(message, kind, text)`.
    pub chat: Py<PyAny>,
}

static HOOKS: PyOnceLock<Hooks> = PyOnceLock::new();

/// The hooks, or a `RuntimeError` saying the core was reached around the package (only a
/// caller importing `ringbound._core` by file path, never `ringbound`, can meet it).
pub(crate) fn hooks(py: Python<'_>) -> PyResult<&Hooks> {
    HOOKS.get(py).ok_or_else(|| {
        PyRuntimeError::new_err("ringbound._core was loaded without ringbound: import ringbound")
    })
}

/// Binds the façade's pieces. The first binding stays: a module reloaded in a test keeps the
/// classes the running code already raises and catches.
#[pyfunction]
#[pyo3(signature = (*, errors, dump_messages, chat))]
pub(crate) fn _bind(
    py: Python<'_>,
    errors: Py<PyAny>,
    dump_messages: Py<PyAny>,
    chat: Py<PyAny>,
) -> PyResult<()> {
    guard(py, || {
        let _ = HOOKS.set(
            py,
            Hooks {
                errors,
                dump_messages,
                chat,
            },
        );
        Ok(())
    })
}
