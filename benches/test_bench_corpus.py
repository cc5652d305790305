"""The largest real sessions of the shared corpus, assembled cold at half their tokens."""

from __future__ import annotations

from typing import Any

import pytest
import workload
from measure import check_assembly

import ringbound as rb
from ringbound import _core


@pytest.mark.benchmark(group="corpus")
@pytest.mark.parametrize("rank", [0, 1, 2], ids=["largest", "second", "third"])
def test_corpus_session_cold(benchmark: Any, largest_corpus_sessions: list[Any], rank: int) -> None:
    name, messages, tools = largest_corpus_sessions[rank]
    benchmark.extra_info["session"] = name
    budget = rb.count_tokens(messages, tools=tools) // 2
    asm = workload.assembler(budget)
    res = benchmark.pedantic(
        asm.assemble, args=(messages, tools), setup=_core.cache_clear, rounds=10
    )
    check_assembly(res)
    assert res.report.dropped_rings or res.report.dropped_turns
