"""Two threads assembling different sessions against one thread assembling both in turn, cold
(every message tokenized, the Rust work runs with the GIL released) and warm (each session's
history cached, then the history plus a ring never seen before: the next request of a
gateway, where the Python share of the work is largest)."""

from __future__ import annotations

from typing import Any

import pytest
import workload
from measure import AssembleBatch, NextTurns, assemble_batch, in_threads

from ringbound import _core


@pytest.fixture(scope="module")
def two_sessions() -> list[list[Any]]:
    return [workload.reference_session(seed) for seed in (101, 102)]


@pytest.mark.benchmark(group="threads")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("state", ["cold", "warm"])
def test_assemble_in_threads(
    benchmark: Any, two_sessions: list[list[Any]], threads: int, state: str
) -> None:
    asm = workload.assembler()
    batches = [two_sessions] if threads == 1 else [[s] for s in two_sessions]
    jobs: list[AssembleBatch]
    if state == "cold":
        jobs = [assemble_batch(asm, b) for b in batches]
        setup = _core.cache_clear
    else:
        warm = [NextTurns(asm, b) for b in batches]
        jobs = list(warm)

        def setup() -> None:
            for job in warm:
                job.prepare()

    # in_threads re-raises a thread's failure; check() then checks what each job assembled
    # (and, warm, that each request ended with its new ring).
    benchmark.pedantic(in_threads, args=(jobs,), setup=setup, rounds=10)
    for job in jobs:
        job.check()
    assert sum(len(job.results) for job in jobs) == len(two_sessions)
