"""The gateway path of issue 14: ``assemble_body`` on 200-turn request bodies (about 540 KB)
against ``orjson.loads`` of the same body, the dict path (``orjson.loads`` + ``assemble`` +
``orjson.dumps``), itself in two threads, LangChain's ``trim_messages`` cold, and every
provider's body path against the chat one. Run by ``compare.py``; alone:

    PYTHONPATH=python python benches/body_path.py [--repeat N] [--clock cpu]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import langchain_baseline as lc
import orjson
import providers
import workload
from measure import CLOCKS, Case, interleaved_medians, thread_speedup

import ringbound as rb
from ringbound import _core
from ringbound.providers import PROVIDERS

#: Fields a gateway sends next to the history, kept through assembly.
EXTRA = {"temperature": 0.2, "stream": True, "metadata": {"user": "u-1"}}
#: Where each provider's body holds its history and system.
KEYS = {
    "openai_chat": ("messages", None),
    "openai_responses": ("input", "instructions"),
    "anthropic": ("messages", "system"),
    "gemini": ("contents", "systemInstruction"),
    "bedrock_converse": ("messages", "system"),
}
#: Warm rounds per thread: a warm body takes about a millisecond, so one round would time
#: starting threads rather than running them.
THREAD_ROUNDS = 20
#: The cut case's limit on a tool result: about 40 of the session's results go over it, so
#: every plan cuts them (the cheap stage a long agent session meets first).
CUT_TOKENS = 300


def body(provider: str, chat: list[dict[str, Any]]) -> bytes:
    """The session as ``provider``'s request body, with the fields a gateway sends."""
    messages, system = providers.native(provider, chat)
    history, system_key = KEYS[provider]
    out: dict[str, Any] = {"model": "gpt-4o", history: messages, **EXTRA}
    if system_key is not None:
        out[system_key] = system
    return orjson.dumps(out)


def history_of(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session before its last ring: what an earlier turn cached."""
    last = max(i for i, m in enumerate(chat) if m.get("tool_calls"))
    return chat[:last]


def dict_path(asm: rb.Assembler, provider: str, data: bytes) -> bytes:
    """What a gateway does without ``assemble_body``: parse, assemble, serialize."""
    parsed = orjson.loads(data)
    history, system_key = KEYS[provider]
    system = parsed.get(system_key) if system_key else None
    res = asm.assemble(parsed[history], system=system)
    parsed[history] = res.messages
    if system_key is not None:
        parsed[system_key] = res.system
    return orjson.dumps(parsed)


def checked(res: rb.BodyResult, provider: str) -> rb.BodyResult:
    history, _ = KEYS[provider]
    assert res.report.tokens_after <= res.report.budget
    assert orjson.loads(res.body)["temperature"] == EXTRA["temperature"]
    if provider == "openai_chat":
        assert rb.validate(orjson.loads(res.body)[history]) == []
    return res


def measure(repeat: int, clock: Callable[[], float]) -> dict[str, Any]:
    """Three groups of interleaved rounds, each case's predecessor in a round being work of
    its own group: the chat body against its anchors (``orjson.loads``, the dict path), the
    five formats' warm bodies against each other, and LangChain's trim alone. Its 100 ms of
    Python, or the anchors' Python objects, leave the caches cold for whichever case comes
    next (0.1-0.2 ms more for that one case), so the formats' ratios are taken within their
    own rounds."""
    chat = providers.chat_session()
    budget = workload.BUDGET
    anchors: dict[str, Case] = {}
    formats: dict[str, Case] = {}
    sizes: dict[str, int] = {}
    paths: dict[str, str] = {}
    for provider in PROVIDERS:
        asm = workload.assembler(budget, provider=provider)
        cutting = rb.Assembler(
            dataclasses.replace(
                asm.config, max_tool_result_tokens=CUT_TOKENS, min_result_tokens=20
            ),
            provider=provider,
        )
        data, before = body(provider, chat), body(provider, history_of(chat))
        sizes[provider] = len(data)
        paths[provider] = checked(asm.assemble_body(data), provider).path
        cut = checked(cutting.assemble_body(data), provider)
        assert cut.report.truncated_results, provider
        paths[f"{provider} cut"] = cut.path

        def prime(a: rb.Assembler = asm, d: bytes = before) -> None:
            _core.cache_clear()
            a.assemble_body(d)

        formats[f"{provider} body warm"] = Case(partial(asm.assemble_body, data), prime)
        formats[f"{provider} body warm, cut"] = Case(
            partial(cutting.assemble_body, data), partial(prime, cutting)
        )
        if provider == "openai_chat":
            anchors["chat body warm"] = Case(partial(asm.assemble_body, data), prime)
            anchors["chat body cached"] = Case(partial(asm.assemble_body, data))
            anchors["chat body cold"] = Case(partial(asm.assemble_body, data), _core.cache_clear)
            anchors["chat dict warm"] = Case(partial(dict_path, asm, provider, data), prime)
            anchors["chat orjson.loads"] = Case(partial(orjson.loads, data))
    t = interleaved_medians(anchors, repeat, clock)
    t |= interleaved_medians(formats, repeat, clock)
    trim = Case(partial(lc.trim, lc.to_langchain(chat), budget, lc.RECOMMENDED), max_runs=5)
    t |= interleaved_medians({"langchain trim_messages": trim}, repeat, clock)
    rounds = max(3, repeat // 2)
    blob = os.urandom(16_000_000)

    def sha(times: int) -> Callable[[], None]:
        return lambda: [hashlib.sha256(blob).digest() for _ in range(times)]

    control = thread_speedup(sha(2), [sha(1), sha(1)], rounds)
    return {
        "t": t,
        "sizes": sizes,
        "paths": paths,
        "threads": threads(chat, budget, rounds),
        "control": control,
    }


def threads(chat: list[dict[str, Any]], budget: int, repeat: int) -> tuple[float, float]:
    """Four different warm chat bodies, ``THREAD_ROUNDS`` times each: one thread against two
    threads of two bodies each (timed by the wall clock)."""
    asm = workload.assembler(budget)
    sessions = [workload.reference_session(seed) for seed in (101, 102, 103, 104)]
    bodies = [body("openai_chat", s) for s in sessions]
    for b in bodies:
        checked(asm.assemble_body(b), "openai_chat")

    def job(part: list[bytes]) -> Callable[[], None]:
        return lambda: [asm.assemble_body(b) for _ in range(THREAD_ROUNDS) for b in part]

    return thread_speedup(job(bodies), [job(bodies[:2]), job(bodies[2:])], repeat)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def section(repeat: int, clock: Callable[[], float]) -> str:
    """The markdown section: timings, then the issue's bars with verdicts."""
    m = measure(repeat, clock)
    t, sizes = m["t"], m["sizes"]
    one, two = m["threads"]
    sha_one, sha_two = m["control"]
    warm = t["chat body warm"]
    rows = [
        f"| chat body, 200 turns ({sizes['openai_chat'] // 1000} KB) | `assemble_body` warm "
        f"(history cached, next ring new) | {ms(warm)} |",
        f"| | `assemble_body`, every message cached | {ms(t['chat body cached'])} |",
        f"| | `orjson.loads` of the body | {ms(t['chat orjson.loads'])} |",
        f"| | dict path warm (loads + `assemble` + dumps) | {ms(t['chat dict warm'])} |",
        f"| | `assemble_body` cold | {ms(t['chat body cold'])} |",
        f"| | LangChain `trim_messages` | {ms(t['langchain trim_messages'])} |",
    ]
    for provider in PROVIDERS:
        path = m["paths"][provider]
        rows.append(
            f"| {provider} body ({sizes[provider] // 1000} KB, {path} path) | `assemble_body` "
            f"warm, in the formats' rounds | {ms(t[f'{provider} body warm'])} |"
        )
        rows.append(
            f"| | results over {CUT_TOKENS} tokens cut ({m['paths'][f'{provider} cut']} path) "
            f"| {ms(t[f'{provider} body warm, cut'])} |"
        )
    bars = [
        ("warm `assemble_body` ≤ 1.0x `orjson.loads`", warm / t["chat orjson.loads"], 1.0, "≤"),
        ("warm `assemble_body` ≤ 0.5x the dict path", warm / t["chat dict warm"], 0.5, "≤"),
        (
            "cached `assemble_body` ≤ 1.0x `orjson.loads`",
            t["chat body cached"] / t["chat orjson.loads"],
            1.0,
            "≤",
        ),
        ("two threads ≥ 1.8x one (cached)", one / two, 1.8, "≥"),
        ("control: sha256 of 16 MB, two threads against one", sha_one / sha_two, 1.8, "≥"),
        (
            "cold `assemble_body` ≥ 30x faster than `trim_messages`",
            t["langchain trim_messages"] / t["chat body cold"],
            30,
            "≥",
        ),
    ]
    for provider in PROVIDERS:
        if provider != "openai_chat":
            ratio = t[f"{provider} body warm"] / t["openai_chat body warm"]
            bars.append((f"{provider} body path within 2x of chat's", ratio, 2.0, "≤"))
            ratio = t[f"{provider} body warm, cut"] / t["openai_chat body warm, cut"]
            bars.append(
                (f"{provider} body path, results cut, within 2x of chat's", ratio, 2.0, "≤")
            )
    verdict = {True: "met", False: "NOT met"}
    lines = [
        "| body | case | median ms |",
        "| --- | --- | --- |",
        *rows,
        "",
        "| bar | measured | verdict |",
        "| --- | --- | --- |",
    ]
    for name, value, bound, op in bars:
        ok = value <= bound if op == "≤" else value >= bound
        lines.append(f"| {name} | {value:.2f}x | {verdict[ok]} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=15, help="timings per median (15)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = p.parse_args()
    _core.wait_for_tables("o200k_base")
    print(f"## Gateway path\n\n{section(args.repeat, CLOCKS[args.clock])}\n")
    print(f"Load average at the end: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores.")


if __name__ == "__main__":
    main()
