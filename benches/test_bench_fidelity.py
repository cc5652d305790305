"""Fidelity in the benchmark run: ``pytest benches --benchmark-only`` measures every session
of the corpus and the generated ones at 30/50/70% (``benches/fidelity.py``, several minutes)
and prints the tables; the default run (``--benchmark-disable``) measures one generated
session at 50%, as ``tests/test_fidelity.py`` smoke-tests the corpus."""

from __future__ import annotations

from typing import Any

import fidelity
import fidelity_strategies as fs
import pytest


@pytest.mark.benchmark(group="fidelity")
def test_fidelity(benchmark: Any) -> None:
    if benchmark.disabled:
        sessions, fractions = fidelity.generated_sessions(count=1, messages=50), (0.5,)
    else:
        sessions = fidelity.corpus_sessions() + fidelity.generated_sessions()
        fractions = fidelity.FRACTIONS
    results = benchmark.pedantic(
        fidelity.sweep, args=(sessions, fs.strategies(), fractions), rounds=1, iterations=1
    )
    benchmark.extra_info["tables"] = fidelity.report(results)
    if not benchmark.disabled:
        print("\n" + fidelity.report(results))
    for rows in results.values():
        by_name = {r.name: r.stats() for r in rows}
        default = by_name["ringbound default"]
        assert default["cuts"] > 0 and default["unsendable_or_over"] == 0
        assert by_name["mask every tool result"]["held_when_served"] < 1.0
        assert by_name["keep everything (no trimming)"]["held_when_served"] == 1.0
