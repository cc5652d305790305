"""Counting a whole request: cold (nothing cached, every message tokenized) and warm (every
count from the cache), and the shape of the reference workload itself."""

from __future__ import annotations

from typing import Any

import pure_python
import pytest
import workload

import ringbound as rb
from ringbound import _core


def cold_args(messages: list[Any], **kwargs: Any) -> Any:
    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        _core.cache_clear()
        return (messages,), kwargs

    return setup


def test_reference_session_shape(reference: list[dict[str, Any]]) -> None:
    """The workload is what the issue describes: ~500 messages, ~120k o200k tokens, parallel
    calls, code, pytest logs, JSON, base64, and pairing that OpenAI accepts."""
    assert 480 <= len(reference) <= 520
    assert 110_000 <= rb.count_tokens(reference) <= 130_000
    results = [m["content"] for m in reference if m["role"] == "tool"]
    assert max(len(m.get("tool_calls") or ()) for m in reference) >= 3
    for marker in ("def ", "test session starts", '"items"', ";base64,", "Error: "):
        assert any(marker in r for r in results), marker
    assert rb.validate(reference) == []
    assert workload.reference_session() == reference  # seeded: every run measures the same


@pytest.mark.benchmark(group="count")
def test_count_cold_o200k(benchmark: Any, reference: list[dict[str, Any]]) -> None:
    tokens = benchmark.pedantic(rb.count_tokens, setup=cold_args(reference), rounds=10)
    assert tokens == rb.count_tokens(reference)


@pytest.mark.benchmark(group="count")
def test_count_cold_cl100k_matches_tiktoken(
    benchmark: Any, reference: list[dict[str, Any]]
) -> None:
    setup = cold_args(reference, encoding="cl100k_base")
    tokens = benchmark.pedantic(rb.count_tokens, setup=setup, rounds=10)
    expected = sum(map(pure_python.message_tokens, reference)) + pure_python.REPLY_PRIMING
    assert tokens == expected


@pytest.mark.benchmark(group="count")
def test_count_warm(benchmark: Any, reference: list[dict[str, Any]]) -> None:
    expected = rb.count_tokens(reference)
    assert benchmark(rb.count_tokens, reference) == expected


@pytest.mark.benchmark(group="count")
def test_count_pure_python_tiktoken(benchmark: Any, reference: list[dict[str, Any]]) -> None:
    """The anchor: Python tiktoken over the same messages, same framing."""
    tokens = benchmark(lambda: sum(map(pure_python.message_tokens, reference)))
    assert tokens + pure_python.REPLY_PRIMING == rb.count_tokens(reference, encoding="cl100k_base")
