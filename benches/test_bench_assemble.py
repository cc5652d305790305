"""Assembling the reference workload at the reference budget. ``assemble_cold``: nothing cached,
next to the pure-Python reference and LangChain's ``trim_messages`` on the same messages.
``assemble_warm``: the next turn (the history cached, one new ring), next to its anchor,
``orjson.dumps`` of the same list. ``provider``: the same conversation in each provider's
native format (benches/native.py), cold and warm (the history cached plus a new ring)."""

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

import ringbound as rb
from ringbound import _core
from ringbound.providers import PROVIDERS

#: The stages that keep cited units for last; the pure-Python anchor has none.
CITATION_STAGES = ("drop_referenced_rings", "drop_citing_turns")


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
    # The pure-Python anchor drops the middle oldest first; ringbound does so without the
    # stages that set cited units apart (docs/drop-order.md), which it runs on top by default.
    oldest_first = [s for s in rb.AssemblyConfig().stages if s not in CITATION_STAGES]
    cfg = rb.AssemblyConfig(
        model_input_limit=workload.BUDGET,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        encoding="cl100k_base",
        stages=oldest_first,
    )
    res = rb.Assembler(cfg).assemble(reference)
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
    """Cold: the reference workload with nothing cached. Warm: its history cached, then the
    history plus a ring never seen before, as in ``assemble_warm``."""
    convert = native.CONVERTERS[provider]
    system, items = convert(reference)
    kwargs = {} if system is None else {"system": system}
    asm = workload.assembler(provider=provider)
    turns = itertools.count()
    seen: list[int] = []

    def next_turn() -> tuple[tuple[Any, ...], dict[str, Any]]:
        _, request = convert(reference + workload.next_ring(reference, next(turns)))
        seen.append(len(request))
        return (request,), kwargs

    if state == "warm":
        asm.assemble(items, **kwargs)
        res = benchmark.pedantic(asm.assemble, setup=next_turn, rounds=10, warmup_rounds=1)
        assert all(n > len(items) for n in seen)  # every timed request had a new ring
    else:
        res = benchmark.pedantic(
            asm.assemble, args=(items,), kwargs=kwargs, setup=_core.cache_clear, rounds=10
        )
    assert res.report.tokens_after <= res.report.budget
    assert res.report.dropped_rings and len(res.messages) < len(items)
