"""Pairing validation of the whole reference session, valid and with one result missing:
``cold`` parses every message (count cache cleared before each run), ``cached`` finds them in
the count cache, as a gateway validating a growing session mostly does."""

from __future__ import annotations

from typing import Any

import pytest

import ringbound as rb
from ringbound import _core

STATES = {"cold": _core.cache_clear, "cached": None}


@pytest.fixture
def broken(reference: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    last_tool = max(i for i, m in enumerate(reference) if m["role"] == "tool")
    return reference[:last_tool] + reference[last_tool + 1 :], reference[last_tool]["tool_call_id"]


@pytest.mark.benchmark(group="validate")
@pytest.mark.parametrize("state", list(STATES))
def test_validate_valid(benchmark: Any, reference: list[dict[str, Any]], state: str) -> None:
    rb.validate(reference)
    issues = benchmark.pedantic(rb.validate, args=(reference,), setup=STATES[state], rounds=10)
    assert issues == []


@pytest.mark.benchmark(group="validate")
@pytest.mark.parametrize("state", list(STATES))
def test_validate_missing_result(
    benchmark: Any, broken: tuple[list[dict[str, Any]], str], state: str
) -> None:
    messages, call_id = broken
    rb.validate(messages)
    issues = benchmark.pedantic(rb.validate, args=(messages,), setup=STATES[state], rounds=10)
    assert [i.kind for i in issues] == ["missing_result"]
    assert issues[0].call_id == call_id
