"""A Rust panic reaches Python only as ``InternalError``, a ``RingboundError``: never as
PyO3's ``PanicException``, which derives from ``BaseException`` and slips past
``except Exception`` in a gateway."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ringbound as rb
from ringbound import _core

BINDING = Path(__file__).resolve().parent.parent / "rust" / "src" / "py.rs"


def test_a_panic_arrives_as_a_typed_ringbound_error() -> None:
    with pytest.raises(rb.InternalError) as info:
        _core._panic("the plan lost a unit")
    err = info.value
    assert isinstance(err, rb.RingboundError) and isinstance(err, Exception)
    assert err.reason == "the plan lost a unit"
    assert "a bug" in str(err) and "the plan lost a unit" in str(err)


def test_the_core_works_after_a_panic() -> None:
    for _ in range(3):
        with pytest.raises(rb.InternalError):
            _core._panic("again")
    assert rb.count_tokens([{"role": "user", "content": "hello world"}]) == 9


def test_every_function_of_the_binding_runs_inside_the_guard() -> None:
    """A new ``#[pyfunction]`` or method whose body is not ``guard(py, ...)`` fails here."""
    files = [BINDING, *sorted((BINDING.parent / "py").glob("*.rs"))]
    source = "\n".join(f.read_text(encoding="utf-8") for f in files)
    exposed = {}
    for marker in ("#[pyfunction]", "#[new]", "#[pymethods]"):
        for chunk in source.split(marker)[1:]:
            for name, body in re.findall(
                r"\n\s*(?:pub(?:\(\w+\))? )?fn (\w+)[^{;]*\{\n\s*(\S+)", chunk
            )[:1]:
                exposed[name] = body
    assert {"plan", "count", "validate", "count_text", "cache_clear"} <= set(exposed)
    assert {"assemble_openai_chat_body", "body_head", "_panic"} <= set(exposed)
    trivial = {"__len__", "bytes", "new"}  # a field read, or CountCache's constructor
    unguarded = [n for n, first in exposed.items() if n not in trivial and first != "guard(py,"]
    assert unguarded == []
