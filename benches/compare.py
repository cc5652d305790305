"""One run, one report: ringbound cold and warm against the pure-Python reference, LangChain's
``trim_messages`` and ``orjson.dumps`` on the reference workload and the largest corpus
sessions; how often ``trim_messages`` breaks tool pairing; the adversarial inputs, two threads,
peak memory; every provider against openai_chat; the gateway path; and every bar of the
performance issue with its verdict. Markdown on stdout.

    pip install -e . && python benches/compare.py [--repeat N]

Medians of ``--repeat`` perf_counter timings (LangChain: at most 5, it is slow), the cases
compared in one table timed in turn within each round."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import platform
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import body_path
import langchain_baseline as lc
import orjson
import providers
import pure_python
import refusals
import translation
import workload
from langchain_core.messages import convert_to_openai_messages
from measure import (
    CLOCKS,
    AssembleBatch,
    Case,
    NextTurns,
    assemble_batch,
    assembly_peak_rss,
    check_assembly,
    interleaved_medians,
    thread_speedup,
)

import ringbound as rb
from ringbound import _core

#: LangChain's trim_messages is slow: at most this many runs per median.
LC_RUNS = 5
#: Rounds of its sessions each thread assembles in the warm threads row.
WARM_ROUNDS = 5
#: The threads row that measures the machine rather than ringbound.
CONTROL = "control: sha256, 2 x 16 MB"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def times(a: float, b: float) -> str:
    return f"{a / b:.1f}x"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def corpus_turn(messages: list[Any]) -> tuple[list[Any], list[Any]]:
    """A corpus session as the next turn: everything before its last ring is the cached
    history, the whole session is the request."""
    last = max(i for i, m in enumerate(messages) if m.get("tool_calls"))
    return messages[:last], messages


@dataclass
class Timings:
    """Every timing of one session at one budget, in seconds."""

    messages: list[Any]
    budget: int
    cold: dict[str, float]
    warm: dict[str, float]
    pure_python: float
    langchain: dict[str, float]
    orjson: float


def time_session(
    messages: list[Any],
    budget: int,
    repeat: int,
    history: list[Any],
    turn: list[Any],
    clock: Callable[[], float],
) -> Timings:
    """Cold and the baselines on ``messages``; warm: ``history`` cached, then ``turn`` (the
    history plus a new ring) assembled, next to its anchor ``orjson.dumps(turn)``."""
    cases: dict[str, Case] = {}
    for encoding in ("o200k_base", "cl100k_base"):
        asm = workload.assembler(budget, encoding=encoding)
        check_assembly(asm.assemble(messages))
        check_assembly(asm.assemble(turn))

        def prime(a: rb.Assembler = asm) -> None:
            _core.cache_clear()
            a.assemble(history)

        cases[f"cold {encoding}"] = Case(partial(asm.assemble, messages), _core.cache_clear)
        cases[f"warm {encoding}"] = Case(partial(asm.assemble, turn), prime)
    cases["pure_python"] = Case(partial(pure_python.assemble, messages, budget))
    lc_messages = lc.to_langchain(messages)
    for name, settings in (("recommended", lc.RECOMMENDED), ("without", lc.WITHOUT_START_ON)):
        cases[name] = Case(partial(lc.trim, lc_messages, budget, settings), max_runs=LC_RUNS)
    cases["orjson"] = Case(partial(orjson.dumps, turn))
    t = interleaved_medians(cases, repeat, clock)
    encodings = ("o200k_base", "cl100k_base")
    return Timings(
        messages=messages,
        budget=budget,
        cold={e: t[f"cold {e}"] for e in encodings},
        warm={e: t[f"warm {e}"] for e in encodings},
        pure_python=t["pure_python"],
        langchain={k: t[k] for k in ("recommended", "without")},
        orjson=t["orjson"],
    )


def reference_section(t: Timings) -> str:
    cold, warm = t.cold["cl100k_base"], t.warm["o200k_base"]
    rows: list[tuple[str, float]] = [
        ("ringbound cold, o200k_base (default)", t.cold["o200k_base"]),
        ("ringbound cold, cl100k_base", t.cold["cl100k_base"]),
        ("ringbound warm, o200k_base (default)", t.warm["o200k_base"]),
        ("ringbound warm, cl100k_base", t.warm["cl100k_base"]),
        ("pure-Python reference, tiktoken cl100k_base", t.pure_python),
        ("LangChain trim_messages, recommended settings", t.langchain["recommended"]),
        ("LangChain trim_messages, without start_on", t.langchain["without"]),
        ("orjson.dumps of the warm request", t.orjson),
    ]
    return table(
        ["run", "median µs", "÷ ringbound cold (cl100k)", "÷ ringbound warm (o200k)"],
        [[name, us(s), times(s, cold), times(s, warm)] for name, s in rows],
    )


def corpus_section(sessions: list[Timings], names: list[str]) -> str:
    rows = []
    for name, t in zip(names, sessions, strict=True):
        cold = t.cold["cl100k_base"]
        rows.append(
            [
                name,
                str(len(t.messages)),
                f"{rb.count_tokens(t.messages):,}",
                f"{t.budget:,}",
                us(t.cold["o200k_base"]),
                us(cold),
                us(t.warm["o200k_base"]),
                f"{us(t.pure_python)} ({times(t.pure_python, cold)})",
                f"{us(t.langchain['recommended'])} ({times(t.langchain['recommended'], cold)})",
                f"{us(t.orjson)} (warm {times(t.warm['o200k_base'], t.orjson)})",
            ]
        )
    header = [
        "session",
        "messages",
        "tokens",
        "budget",
        "cold µs o200k",
        "cold µs cl100k",
        "warm µs",
        "pure-Python µs (÷ cold cl100k)",
        "LangChain µs (÷ cold cl100k)",
        "orjson µs",
    ]
    return table(header, rows)


@dataclass
class Tally:
    """What one assembler did over the pairing sweep."""

    runs: int = 0
    broken: int = 0
    over_budget: int = 0
    goal_lost: int = 0
    refused: int = 0
    kept_share: float = 0.0

    def add(self, messages: list[Any], tokens: int, budget: int, goal: Any) -> None:
        self.runs += 1
        self.broken += bool(rb.validate(messages))
        self.over_budget += tokens > budget
        self.goal_lost += not any(m["role"] == "user" and m["content"] == goal for m in messages)
        self.kept_share += min(tokens, budget) / budget

    def row(self, label: str) -> list[str]:
        """Every judgment over the requests returned; the refusals apart, over all attempts,
        since a refused request is sent nowhere and so cannot break anything."""
        of = f" / {self.runs}"
        share = f"{self.kept_share / self.runs:.0%}" if self.runs else "—"
        counts = (self.broken, self.over_budget, self.goal_lost)
        refused = f"{self.refused} / {self.runs + self.refused}"
        return [label, str(self.runs), *(f"{n}{of}" for n in counts), share, refused]


def pairing_section() -> str:
    """Every corpus session plus the reference workload at 25/50/75% of its tokens, through
    ringbound and both LangChain settings; each output judged as OpenAI would see it."""
    sessions = [m for _, m, _ in workload.corpus_sessions(count=10_000)]
    sessions.append(workload.reference_session())
    settings = {
        "LangChain trim_messages, recommended settings": lc.RECOMMENDED,
        "LangChain trim_messages, without start_on": lc.WITHOUT_START_ON,
    }
    tallies = {name: Tally() for name in ["ringbound (cl100k_base)", *settings]}
    for messages in sessions:
        lc_messages = lc.to_langchain(messages)
        tokens = lc.tiktoken_counter(lc_messages)
        goal = next(m for m in messages if m["role"] == "user")["content"]
        for fraction in (0.25, 0.5, 0.75):
            budget = int(tokens * fraction)
            try:
                res = workload.assembler(budget, encoding="cl100k_base").assemble(messages)
            except rb.BudgetExceededError:
                tallies["ringbound (cl100k_base)"].refused += 1
            else:
                tallies["ringbound (cl100k_base)"].add(
                    res.messages, res.report.tokens_after, budget, goal
                )
            for name, s in settings.items():
                out = lc.trim(lc_messages, budget, s)
                tallies[name].add(
                    convert_to_openai_messages(out), lc.tiktoken_counter(out), budget, goal
                )
    header = [
        "assembler",
        "requests returned",
        "breaks pairing",
        "over budget",
        "first user message lost",
        "mean tokens kept / budget",
        "refused (fails closed), of all",
    ]
    intro = (
        f"{len(sessions)} sessions (every corpus session and the reference workload) at 25%, "
        "50% and 75% of their tokens, cl100k_base (LangChain's counts differ by under 1%: it "
        "re-serializes call arguments); pairing judged by `rb.validate` on the messages sent. "
        "Every column but the last is over the requests the assembler returned; ringbound "
        "refuses (`BudgetExceededError`) only when the protected part, degraded to its floors "
        "(docs/degrading.md), is still over the budget."
    )
    return intro + "\n\n" + table(header, [t.row(name) for name, t in tallies.items()])


def adversarial_rates(repeat: int, clock: Callable[[], float]) -> dict[str, float]:
    """Seconds per byte to count each adversarial text (5 MB; the padded log 1 MB), from
    empty piece tables."""
    texts = {
        "prose": workload.prose_text(5 * workload.MB),
        "base64": workload.base64_text(5 * workload.MB),
        "one_char": workload.one_char_text(5 * workload.MB),
        "padded_log": workload.padded_log_text(workload.MB),
    }
    # Each timing starts with the piece tables empty: the pieces of the previous round's text
    # would otherwise be remembered, and prose (whose pieces recur) would look faster.
    seconds = interleaved_medians(
        {k: Case(partial(rb.count_text, body), _core.cache_clear) for k, body in texts.items()},
        min(repeat, 5),
        clock,
    )
    return {k: seconds[k] / len(texts[k]) for k in texts}


def thread_rows(
    asm: rb.Assembler, sessions: list[list[Any]], repeat: int
) -> dict[str, tuple[float, float]]:
    """One thread doing all the work against two threads doing half each."""
    half = len(sessions) // 2

    def jobs(rounds: int) -> tuple[AssembleBatch, list[AssembleBatch]]:
        return assemble_batch(asm, sessions, rounds), [
            assemble_batch(asm, sessions[:half], rounds),
            assemble_batch(asm, sessions[half:], rounds),
        ]

    def checked(row: tuple[float, float], *ran: AssembleBatch) -> tuple[float, float]:
        for job in ran:
            job.check()
        return row

    blob = os.urandom(16 * workload.MB)

    def sha(times: int) -> Callable[[], None]:
        return lambda: [hashlib.sha256(blob).digest() for _ in range(times)]

    one, halves = jobs(1)
    rows = {
        f"assemble {len(sessions)} sessions, cold": checked(
            thread_speedup(one, halves, repeat, _core.cache_clear), one, *halves
        ),
    }
    rows[f"assemble {len(sessions)} sessions, warm"] = warm_thread_row(asm, sessions, repeat)
    rows[CONTROL] = thread_speedup(sha(2), [sha(1), sha(1)], repeat)
    return rows


def warm_thread_row(
    asm: rb.Assembler, sessions: list[list[Any]], repeat: int
) -> tuple[float, float]:
    """One thread against two on the next turns: every session's history cached, then each
    request is its history plus a ring never seen before (``NextTurns``). A warm assembly
    takes about a millisecond: several rounds per thread measure the throughput of running
    threads rather than the cost of starting them."""
    half = len(sessions) // 2
    one = NextTurns(asm, sessions, WARM_ROUNDS)
    halves = [
        NextTurns(asm, sessions[:half], WARM_ROUNDS),
        NextTurns(asm, sessions[half:], WARM_ROUNDS),
    ]
    jobs = [one, *halves]

    def prepare() -> None:
        for job in jobs:
            job.prepare()

    row = thread_speedup(one, halves, repeat, prepare)
    for job in jobs:
        job.check()
    return row


def memory(budget: int) -> tuple[int, dict[str, int]]:
    body = orjson.dumps(workload.session_of_size(10 * workload.MB))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.json"
        path.write_bytes(body)
        return len(body), assembly_peak_rss(path, budget)


def verdict(ok: bool | None) -> str:
    if ok is None:
        return "**not measured**: the control did not get a second core (load on the machine)"
    return "**met**" if ok else "**not met**"


def header(reference: list[Any], repeat: int, clock: str) -> str:
    versions = ", ".join(
        f"{pkg} {importlib.metadata.version(pkg)}"
        for pkg in ("ringbound", "tiktoken", "langchain-core", "orjson")
    )
    return (
        "# ringbound compare\n\n"
        f"- machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
        f"Python {platform.python_version()}; {versions}\n"
        f"- reference workload: {len(reference)} messages, {rb.count_tokens(reference):,} tokens "
        f"o200k_base ({rb.count_tokens(reference, encoding='cl100k_base'):,} cl100k_base), "
        f"{len(orjson.dumps(reference)) / 1e3:,.0f} KB of JSON; budget {workload.BUDGET:,}\n"
        f"- medians of {repeat} runs (LangChain: {min(repeat, LC_RUNS)}), {clock} clock; "
        "times in µs\n"
    )


def adversarial_section(rates: dict[str, float]) -> str:
    return (
        table(
            ["input", "MB/s", "÷ prose"],
            [[k, f"{1e-6 / s:.1f}", times(s, rates["prose"])] for k, s in rates.items()],
        )
        + "\n\n5 MB each (`padded_log`, `x` plus 491 dashes repeated: 1 MB); `rb.count_text`, "
        "o200k_base, the piece tables cleared before every run (a text's own repeats are still "
        "remembered within the run); prose is Python's documentation (`pydoc_data.topics`).\n"
    )


def threads_section(threads: dict[str, tuple[float, float]]) -> str:
    return (
        table(
            ["work", "1 thread µs", "2 threads µs (half each)", "throughput x"],
            [[k, us(a), us(b), f"{a / b:.2f}x"] for k, (a, b) in threads.items()],
        )
        + "\n\nThe control, sha256 of 16 MB twice (it releases the GIL), shows how much of a "
        "second core this machine gave the run.\n"
    )


def memory_section(size: int, rss: dict[str, int]) -> str:
    peak = rss["assembly_peak_kib"] * 1024
    row = [
        f"{size / 1e6:.1f} MB",
        f"{rss['loaded_kib'] / 1e3:.1f} MB",
        f"{rss['tables_kib'] / 1e3:.1f} MB",
        f"{peak / 1e6:.1f} MB ({peak / size:.2f}x the JSON)",
    ]
    return (
        table(
            ["session JSON", "package + session loaded", "tokenizer tables", "assembly peak"], [row]
        )
        + "\n\nThe peak is the child process's high-water mark above its RSS just before "
        "assembling (reset through /proc/self/clear_refs), so it is the assembly's own.\n"
    )


def bars_section(
    ref: Timings,
    corpus: list[Timings],
    rates: dict[str, float],
    threads: dict[str, tuple[float, float]],
    size: int,
    rss: dict[str, int],
) -> str:
    def cold_ratio(t: Timings, baseline: float) -> float:
        return baseline / t.cold["cl100k_base"]

    def warm_ratio(t: Timings) -> float:
        return t.warm["o200k_base"] / t.orjson

    rows: list[tuple[str, float, bool | None]] = []
    for name, sessions in (
        ("reference workload", [ref]),
        ("3 largest corpus sessions, worst", corpus),
    ):
        for setting in ("recommended", "without"):
            worst = min(cold_ratio(t, t.langchain[setting]) for t in sessions)
            label = "recommended settings" if setting == "recommended" else "without start_on"
            rows.append(
                (f"{name}: cold ≥ 20x faster than trim_messages, {label}", worst, worst >= 20)
            )
        worst = min(cold_ratio(t, t.pure_python) for t in sessions)
        rows.append((f"{name}: cold faster than the pure-Python reference", worst, worst > 1))
        worst = max(warm_ratio(t) for t in sessions)
        rows.append((f"{name}: warm ≤ 3x orjson.dumps", worst, worst <= 3))
    for kind in ("base64", "one_char"):
        ratio = rates[kind] / rates["prose"]
        rows.append((f"5 MB {kind} ≤ 3x 5 MB prose", ratio, ratio <= 3))
    control = threads[CONTROL][0] / threads[CONTROL][1]
    for work, (a, b) in threads.items():
        if work != CONTROL:
            # Without a second core for the control, the machine set the number, not ringbound.
            ok = a / b >= 1.6 if control >= 1.8 else None
            rows.append((f"2 threads ≥ 1.6x one: {work}", a / b, ok))
    peak = rss["assembly_peak_kib"] * 1024 / size
    rows.append(("10 MB session: assembly peak < 3x its JSON (+ tokenizer tables)", peak, peak < 3))
    return table(
        ["bar", "measured", "verdict"],
        [[bar, f"{value:.2f}x", verdict(ok)] for bar, value, ok in rows],
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=15, help="timings per median (15)")
    p.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: perf_counter; cpu: the thread's CPU time, for a shared machine (threads "
        "are always timed by the wall clock)",
    )
    args = p.parse_args()
    repeat, clock = args.repeat, CLOCKS[args.clock]
    for encoding in ("o200k_base", "cl100k_base"):
        _core.wait_for_tables(encoding)  # built once per process, not part of any case

    def section(title: str, body: str) -> None:
        print(f"## {title}\n\n{body.rstrip()}\n", flush=True)

    reference = workload.reference_session()
    print(header(reference, repeat, args.clock), flush=True)
    turn = reference + workload.next_ring(reference, 0)
    ref = time_session(reference, workload.BUDGET, repeat, reference, turn, clock)
    section("Reference workload", reference_section(ref))

    corpus = workload.corpus_sessions()
    corpus_timings = [
        time_session(m, rb.count_tokens(m) // 2, repeat, corpus_turn(m)[0], m, clock)
        for _, m, _ in corpus
    ]
    section(
        "Largest corpus sessions",
        "Messages only (no tools), budget half of each session's tokens; warm: the session "
        "minus its last ring cached, then the whole session.\n\n"
        + corpus_section(corpus_timings, [n for n, _, _ in corpus]),
    )
    section("Tool pairing after trimming", pairing_section())
    section("Refusals before and after degrading the suffix", refusals.refusals_section())
    rates = adversarial_rates(repeat, clock)
    section("Adversarial counting", adversarial_section(rates))
    sessions = [workload.reference_session(seed) for seed in (101, 102, 103, 104)]
    threads = thread_rows(workload.assembler(), sessions, min(repeat, 7))
    section("Threads", threads_section(threads))
    size, rss = memory(workload.BUDGET)
    section("Peak memory", memory_section(size, rss))
    section("Providers (issue 13)", providers.section(repeat, clock))
    section("Gateway path (`assemble_body`, issue 14)", body_path.section(repeat, clock))
    section("Translation (`translate_body`, issue 34)", translation.section(repeat, clock))
    section("Bars", bars_section(ref, corpus_timings, rates, threads, size, rss))
    print(f"Load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
