"""Assembling the reference workload at the reference budget. ``assemble_cold``: nothing cached,
next to the pure-Python reference and LangChain's ``trim_messages`` on the same messages.
``assemble_warm``: the next turn (the history cached, one new ring), next to its anchor,
``orjson.dumps`` of the same list. ``provider``: the same conversation in each provider's
native format (benches/native.py), cold and warm."""

from __future__ import annotations

import itertools
from typing import Any

import langchain_baseline as lc
import native
import orjson
import pure_python
import pytest
import workload
from measure import check_assembly

from ringbound import _core
from ringbound.providers import PROVIDERS


@pytest.mark.benchmark(group="assemble_cold")
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_ringbound_cold(benchmark: Any, reference: list[Any], encoding: str) -> None:
    asm = workload.assembler(encoding=encoding)
    res = benchmark.pedantic(asm.assemble, args=(reference,), setup=_core.cache_clear, rounds=10)
    check_assembly(res)
    assert res.report.tokens_before > 3 * workload.BUDGET  # it had to trim


@pytest.mark.benchmark(group="assemble_cold")
def test_pure_python_reference(benchmark: Any, reference: list[Any]) -> None:
    kept, tokens = benchmark(pure_python.assemble, reference, workload.BUDGET)
    res = workload.assembler(encoding="cl100k_base").assemble(reference)
    assert tokens == res.report.tokens_after
    assert len(kept) == len(res.messages)
    assert all(a is b for a, b in zip(kept, res.messages, strict=True))


@pytest.mark.benchmark(group="assemble_cold")
def test_langchain_trim_messages(benchmark: Any, reference: list[Any]) -> None:
    messages = lc.to_langchain(reference)
    trimmed = benchmark.pedantic(
        lc.trim, args=(messages, workload.BUDGET, lc.RECOMMENDED), rounds=3
    )
    assert 0 < lc.tiktoken_counter(trimmed) <= workload.BUDGET


@pytest.mark.benchmark(group="assemble_warm")
def test_ringbound_warm(benchmark: Any, reference: list[Any]) -> None:
    asm = workload.assembler()
    asm.assemble(reference)
    turns = itertools.count()

    def next_turn() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (reference + workload.next_ring(reference, next(turns)),), {}

    res = benchmark.pedantic(asm.assemble, setup=next_turn, rounds=50, warmup_rounds=1)
    check_assembly(res)
    assert res.messages[-1]["tool_call_id"] not in {m.get("tool_call_id") for m in reference}


@pytest.mark.benchmark(group="assemble_warm")
def test_orjson_dumps_anchor(benchmark: Any, reference: list[Any]) -> None:
    assert orjson.loads(benchmark(orjson.dumps, reference)) == reference


@pytest.mark.benchmark(group="provider")
@pytest.mark.parametrize("state", ["cold", "warm"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_provider(benchmark: Any, reference: list[Any], provider: str, state: str) -> None:
    system, items = native.CONVERTERS[provider](reference)
    kwargs = {} if system is None else {"system": system}
    asm = workload.assembler(provider=provider)
    if state == "warm":
        asm.assemble(items, **kwargs)
    setup = _core.cache_clear if state == "cold" else None
    res = benchmark.pedantic(asm.assemble, args=(items,), kwargs=kwargs, setup=setup, rounds=10)
    assert res.report.tokens_after <= res.report.budget
    assert len(res.messages) < len(items)
