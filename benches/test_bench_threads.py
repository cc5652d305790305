"""Two threads assembling different sessions against one thread assembling both in turn, cold
(every message tokenized, the Rust work runs with the GIL released) and warm (the next request
of a cached history, where the Python share of the work is largest)."""

from __future__ import annotations

from typing import Any

import pytest
import workload
from measure import assemble_batch, in_threads

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
    jobs = [assemble_batch(asm, b) for b in batches]
    if state == "warm":
        for s in two_sessions:
            asm.assemble(s)
    setup = _core.cache_clear if state == "cold" else None
    # in_threads re-raises a thread's failure; check() then checks what each job assembled.
    assert benchmark.pedantic(in_threads, args=(jobs,), setup=setup, rounds=10) > 0
    for job in jobs:
        job.check()
