"""How the bars are measured outside pytest-benchmark: medians of interleaved timings,
throughput of threads assembling different sessions, and the peak RSS of one assembly in a
child process. Shared by ``compare.py`` and the smoke benchmarks."""

from __future__ import annotations

import ctypes
import itertools
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import ringbound as rb


def check_assembly(res: rb.AssemblyResult) -> None:
    """What every measured assembly must satisfy: it fits, and OpenAI would accept it."""
    assert res.report.tokens_after <= res.report.budget
    assert rb.validate(res.messages) == []


@dataclass(frozen=True)
class Case:
    """One thing to time: ``run()``, with ``setup()`` untimed before each run."""

    run: Callable[[], Any]
    setup: Callable[[], Any] | None = None
    #: At most this many runs (the slow baselines).
    max_runs: int | None = None


#: ``wall`` is what a caller waits; ``cpu`` is the calling thread's CPU time, which other jobs
#: on a shared machine do not inflate. The two agree on an idle machine for single-threaded
#: work (ringbound's core runs on the calling thread; so do tiktoken, LangChain and orjson).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def interleaved_medians(
    cases: dict[str, Case], repeat: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Median seconds of every case over ``repeat`` rounds. Each round runs every case once,
    so other jobs on the machine slow all cases alike instead of skewing one row's ratio."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, case in cases.items():
            if case.max_runs is not None and len(times[name]) >= case.max_runs:
                continue
            if case.setup is not None:
                case.setup()
            start = clock()
            case.run()
            times[name].append(clock() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def in_threads(jobs: list[Callable[[], Any]]) -> float:
    """Seconds for one thread per job, all started together; a job's failure is re-raised,
    so a thread that failed cannot look fast."""
    barrier = threading.Barrier(len(jobs) + 1)
    failures: list[BaseException] = []

    def work(job: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as e:  # re-raised in the caller below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if failures:
        raise failures[0]
    return elapsed


class AssembleBatch:
    """A job assembling each session of ``batch`` in turn, ``rounds`` times over, as a
    gateway's long-lived worker would. ``check()`` checks the results of the last run: outside
    the timing, since validating is the harness's work, not the assembly's (it would serialize
    every result again, holding the GIL)."""

    def __init__(self, asm: rb.Assembler, batch: list[list[Any]], rounds: int = 1) -> None:
        self.asm, self.batch, self.rounds = asm, batch, rounds
        self.results: list[rb.AssemblyResult] = []

    def __call__(self) -> None:
        for _ in range(self.rounds):
            self.results = [self.asm.assemble(messages) for messages in self.batch]

    def check(self) -> None:
        assert len(self.results) == len(self.batch), "the job has not run"
        for res in self.results:
            check_assembly(res)


def assemble_batch(asm: rb.Assembler, batch: list[list[Any]], rounds: int = 1) -> AssembleBatch:
    return AssembleBatch(asm, batch, rounds)


#: Turn numbers of the new rings: shared by every job, so no two requests get the same ring
#: (a ring another thread counted would be cached).
_TURNS = itertools.count()


class NextTurns(AssembleBatch):
    """A warm job: each of ``rounds`` runs assembles every session of ``batch`` plus one ring
    never seen before, on the histories the constructor assembled (cached). ``prepare()``
    makes the new rings, outside the timing; call it before every timed run, since a run
    caches the rings it assembled."""

    def __init__(self, asm: rb.Assembler, batch: list[list[Any]], rounds: int = 1) -> None:
        super().__init__(asm, batch, rounds)
        self.turns: list[list[list[Any]]] = []
        for messages in batch:
            asm.assemble(messages)

    def prepare(self) -> None:
        import workload  # here: the memory child runs this file and must not load it

        self.turns = [
            [m + workload.next_ring(m, next(_TURNS)) for m in self.batch]
            for _ in range(self.rounds)
        ]

    def __call__(self) -> None:
        assert self.turns, "prepare() makes the new rings before each run"
        for turn in self.turns:
            self.results = [self.asm.assemble(messages) for messages in turn]
        self.turns = []

    def check(self) -> None:
        super().check()
        for res, history in zip(self.results, self.batch, strict=True):
            # The last message kept is the new ring's result, which the history does not hold.
            assert res.messages[-1]["tool_call_id"] not in {m.get("tool_call_id") for m in history}


def thread_speedup(
    one: Callable[[], Any],
    halves: list[Callable[[], Any]],
    repeat: int,
    setup: Callable[[], Any] | None = None,
) -> tuple[float, float]:
    """Median seconds of ``one`` job in one thread and of its two ``halves`` in two threads.
    The two are interleaved, so a change of load on the machine hits both alike."""
    single, double = [], []
    for _ in range(repeat):
        for jobs, out in (([one], single), (halves, double)):
            if setup is not None:
                setup()
            out.append(in_threads(jobs))
    return statistics.median(single), statistics.median(double)


# Peak memory ---------------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def _give_back_freed() -> None:
    """Returns to the system what the process has freed but the allocator keeps (glibc)."""
    if platform.libc_ver()[0] == "glibc":
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _measure_child(path: str, budget: int) -> dict[str, int]:
    """In the child: RSS with the package and session loaded, after the tokenizer's tables
    are built (``rb.warmup`` waits for the fast ones, which a first count only starts on a
    thread of their own: measured after a count, their build ran into the assembly's peak),
    then the peak of one assembly above that. Writing 5 to clear_refs resets the high-water
    mark, so loading's own transient peak cannot hide the assembly's; and what loading and
    warming freed is given back first, so the assembly cannot hide its peak in it either
    (until 2e030be, warming left about 42 MB freed in the allocator, and an assembly that
    peaked at 3.7x its JSON measured 1.3x)."""
    messages = orjson.loads(Path(path).read_bytes())
    loaded = _status_kib("VmRSS")
    rb.warmup(["o200k_base"])
    tables = _status_kib("VmRSS")
    _give_back_freed()
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    cfg = rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0
    )
    res = rb.Assembler(cfg).assemble(messages)
    assert res.report.tokens_after <= budget
    peak = _status_kib("VmHWM")
    return {
        "loaded_kib": loaded,
        "tables_kib": tables - loaded,
        "assembly_peak_kib": peak - before,
    }


def assembly_peak_rss(path: Path, budget: int) -> dict[str, int]:
    """Runs ``_measure_child`` in a fresh interpreter (nothing else allocated in it)."""
    proc = subprocess.run(
        [sys.executable, __file__, str(path), str(budget)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return json.loads(proc.stdout)


if __name__ == "__main__":
    print(json.dumps(_measure_child(sys.argv[1], int(sys.argv[2]))))
