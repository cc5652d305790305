"""Counting 5 MB texts that tokenizers find hard (random base64, one character repeated) next
to 5 MB of prose, the bar's anchor; and 1 MB of the slow band that docs/token-accounting.md
names for ``bpe_openai`` (``x`` plus 491 dashes, repeated), for the record."""

from __future__ import annotations

import functools
from typing import Any

import pure_python
import pytest
import workload

import ringbound as rb
from ringbound import _core

SIZE = 5 * workload.MB
#: Input, size, and the range of tokens per byte a correct count falls in.
CASES = {
    "prose": (workload.prose_text, SIZE, (0.15, 0.3)),
    "base64": (workload.base64_text, SIZE, (0.3, 0.9)),
    "one_char": (workload.one_char_text, SIZE, (0.0, 0.2)),
    "padded_log": (workload.padded_log_text, workload.MB, (0.0, 0.2)),
}


@functools.cache
def text(kind: str) -> str:
    make, size, _ = CASES[kind]
    return make(size)


@pytest.mark.benchmark(group="adversarial")
@pytest.mark.parametrize("kind", list(CASES))
def test_count_text(benchmark: Any, kind: str) -> None:
    body = text(kind)
    # The piece tables cleared before each round: otherwise every round after the first
    # finds the text's pieces remembered, and prose (whose pieces recur) looks faster.
    tokens = benchmark.pedantic(rb.count_text, args=(body,), setup=_core.cache_clear, rounds=3)
    low, high = CASES[kind][2]
    assert low * len(body) <= tokens <= high * len(body)
    # The exact count, checked on a slice Python tiktoken counts quickly (cl100k_base).
    head = body[:50_000]
    assert rb.count_text(head, "cl100k_base") == pure_python.text_tokens(head)
