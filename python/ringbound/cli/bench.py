"""``ringbound bench``: assembly latency and throughput on the caller's own sessions, to size a
gateway. Each session is assembled once cold (count cache cleared: what the first request of
a session costs), then ``repeat`` times warm, in one thread: the session without its last turn
assembled untimed (its counts cached, as the previous request left them), then the whole
session timed, so the last turn's messages are new (what every later turn costs)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import _core
from ..assembler import Assembler
from ..counting import count_text, count_tokens
from ..errors import RingboundError
from .session import load_session
from .simulate import turn_ends

__all__ = ["Progress", "SessionBench", "bench_sessions", "format_table", "percentile"]

#: In ``auto`` mode a run that has lasted this long gets a progress bar even when stdout is
#: not a terminal: the user is waiting, short runs should not flash one.
LONG_RUN_S = 1.0
#: Redraw at most this often, so a bar written to a log file stays small.
REDRAW_S = 0.2
BAR_WIDTH = 30


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: a value that was measured, never an interpolation; with fewer
    than 100 runs p99 is the slowest run."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class SessionBench:
    """The measurements of one session."""

    session: str
    messages: int
    tokens: int
    tokens_after: int
    budget: int
    cold_s: float
    p50_s: float
    p99_s: float
    runs: int

    @property
    def cold_tokens_per_s(self) -> float:
        return self.tokens / self.cold_s

    @property
    def warm_tokens_per_s(self) -> float:
        return self.tokens / self.p50_s

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "cold_tokens_per_s": self.cold_tokens_per_s,
            "warm_tokens_per_s": self.warm_tokens_per_s,
        }


class Progress:
    """A one-line bar on ``stream``, redrawn in place. ``auto`` shows it when stdout is a
    terminal or once the run has lasted LONG_RUN_S; ``always`` and ``never`` force it."""

    def __init__(self, total: int, mode: str, stream: TextIO, stdout: TextIO) -> None:
        self.total, self.done, self.mode, self.stream = total, 0, mode, stream
        self.start = time.perf_counter()
        self.shown = mode == "always" or (mode == "auto" and stdout.isatty())
        self.drawn_at = -math.inf

    def advance(self, label: str, steps: int = 1) -> None:
        self.done += steps
        now = time.perf_counter()
        if self.mode == "auto" and now - self.start >= LONG_RUN_S:
            self.shown = True
        if self.shown and (now - self.drawn_at >= REDRAW_S or self.done == self.total):
            filled = BAR_WIDTH * self.done // self.total
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total} {label}\x1b[K")
            self.stream.flush()
            self.drawn_at = now

    def close(self) -> None:
        if self.shown and self.done:
            self.stream.write("\n")
            self.stream.flush()


def _history_end(asm: Assembler, session: Any) -> int:
    """Where the history before the session's last turn ends (its last complete tool ring,
    with the plain messages before it, is the new turn); 0 for a session of one turn."""
    ends, _ = turn_ends(session.messages, asm.provider, system=session.system)
    return ends[-2] if len(ends) > 1 else 0


def _bench_one(asm: Assembler, path: str, repeat: int, progress: Progress) -> SessionBench:
    session = load_session(path)
    label = Path(path).name
    _core.cache_clear()
    res = asm.assemble(session.messages, session.tools, system=session.system)
    cold = res.report.elapsed_s
    progress.advance(label)
    history = session.messages[: _history_end(asm, session)]
    warm = []
    for _ in range(repeat):
        _core.cache_clear()
        if history:
            try:
                asm.assemble(history, session.tools, system=session.system)
            except RingboundError:
                pass  # its messages were read and counted before the plan refused them
        timed = asm.assemble(session.messages, session.tools, system=session.system)
        warm.append(timed.report.elapsed_s)
        progress.advance(label)
    # Counted apart: the report's tokens_before may be an upper bound (lazy counting).
    tokens = count_tokens(
        session.messages,
        asm.provider,
        asm.config.encoding,
        session.tools,
        tokenizer_backend=asm.config.tokenizer_backend,
    )
    return SessionBench(
        session=path,
        messages=len(session.messages),
        tokens=tokens,
        tokens_after=res.report.tokens_after,
        budget=res.report.budget,
        cold_s=cold,
        p50_s=percentile(warm, 50),
        p99_s=percentile(warm, 99),
        runs=repeat,
    )


def bench_sessions(
    asm: Assembler,
    paths: Sequence[str],
    repeat: int,
    progress: str = "auto",
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> tuple[list[SessionBench], list[str]]:
    """Benchmarks every session; a session that cannot be assembled is reported in the
    second list (``path: error``) and the others still run."""
    # The tokenizer's tables are built from the first count of the process (bpe_openai's on a
    # thread of their own): not part of any session.
    count_text("warm up", asm.config.encoding, tokenizer_backend=asm.config.tokenizer_backend)
    if asm.config.tokenizer_backend in (None, "bpe_openai"):
        _core.wait_for_tables(asm.config.encoding)
    bar = Progress(len(paths) * (repeat + 1), progress, stderr, stdout)
    results, failures = [], []
    try:
        for i, path in enumerate(paths):
            try:
                results.append(_bench_one(asm, path, repeat, bar))
            except (RingboundError, OSError) as e:
                # A file that cannot be read is named by its path and its reason, as the
                # command line names it.
                why = e.strerror if isinstance(e, OSError) else e
                failures.append(f"{path}: {type(e).__name__}: {why}")
                bar.advance(Path(path).name, (i + 1) * (repeat + 1) - bar.done)
    finally:
        bar.close()
    return results, failures


def _human(rate: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.1f}{unit}"
    return f"{rate:.0f}"


def format_table(results: Sequence[SessionBench]) -> str:
    """The table ``ringbound bench`` prints: one row per session."""
    header = (
        f"{'session':<28} {'messages':>8} {'tokens':>9} {'kept':>9} {'cold ms':>8} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'cold tok/s':>10} {'warm tok/s':>10}"
    )
    rows = [header, "-" * len(header)]
    for r in results:
        name = Path(r.session).name
        name = name if len(name) <= 28 else "…" + name[-27:]
        rows.append(
            f"{name:<28} {r.messages:>8} {r.tokens:>9,} {r.tokens_after:>9,} "
            f"{r.cold_s * 1e3:>8.2f} {r.p50_s * 1e3:>8.2f} {r.p99_s * 1e3:>8.2f} "
            f"{_human(r.cold_tokens_per_s):>10} {_human(r.warm_tokens_per_s):>10}"
        )
    if results:
        r = results[0]
        rows.append(
            f"\nbudget {r.budget:,}; one thread; cold: the first assembly, count cache cleared;\n"
            f"p50/p99: {r.runs} warm runs (all but the last turn cached, the last turn new);\n"
            "tokens/s: session tokens / time"
        )
    return "\n".join(rows)
