"""Pairing validation of the whole reference session: valid, and with one result missing."""

from __future__ import annotations

from typing import Any

import pytest

import ringbound as rb


@pytest.mark.benchmark(group="validate")
def test_validate_valid(benchmark: Any, reference: list[dict[str, Any]]) -> None:
    assert benchmark(rb.validate, reference) == []


@pytest.mark.benchmark(group="validate")
def test_validate_missing_result(benchmark: Any, reference: list[dict[str, Any]]) -> None:
    last_tool = max(i for i, m in enumerate(reference) if m["role"] == "tool")
    broken = reference[:last_tool] + reference[last_tool + 1 :]
    issues = benchmark(rb.validate, broken)
    assert [i.kind for i in issues] == ["missing_result"]
    assert issues[0].call_id == reference[last_tool]["tool_call_id"]
