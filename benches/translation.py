"""Translation of issue 34: ``translate_body`` of a 200-turn request body (about 520 KB) from
each provider to the next, against a warm ``assemble_body`` of the same body by the source's
assembler (the bar: at most 2x). Both are warm as a gateway's next turn is: the session
before its last ring was assembled (or translated) already, after the caches were emptied.
Run by ``compare.py``; alone:

    PYTHONPATH=python python benches/translation.py [--repeat N] [--clock cpu]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial

import orjson
import providers
import workload
from body_path import body, history_of
from measure import CLOCKS, Case, interleaved_medians

import ringbound as rb
from ringbound import _core
from ringbound.providers import PROVIDERS

#: Each source translated to the provider after it (the last to the first).
PAIRS = [(p, PROVIDERS[(k + 1) % len(PROVIDERS)]) for k, p in enumerate(PROVIDERS)]


def measure(repeat: int, clock: Callable[[], float]) -> tuple[dict[str, float], int]:
    chat = providers.chat_session()
    cases: dict[str, Case] = {}
    size = 0
    for source, target in PAIRS:
        data, before = body(source, chat), body(source, history_of(chat))
        size = max(size, len(data))
        asm = workload.assembler(workload.BUDGET, provider=source)
        out, _ = rb.translate_body(data, source=source, target=target)
        history = _core.history_field(target)
        parsed = orjson.loads(out)
        assert rb.validate(parsed[history], provider=target, system=_system(target, parsed)) == []

        def prime(a: rb.Assembler = asm, d: bytes = before) -> None:
            _core.cache_clear()
            a.assemble_body(d)

        def translated(d: bytes = before, s: str = source, t: str = target) -> None:
            _core.cache_clear()
            rb.translate_body(d, source=s, target=t)

        cases[f"{source} assemble_body warm"] = Case(partial(asm.assemble_body, data), prime)
        cases[f"{source} -> {target} translate_body"] = Case(
            partial(rb.translate_body, data, source=source, target=target), translated
        )
    return interleaved_medians(cases, repeat, clock), size


def _system(target: str, body: dict) -> object:
    key = {"anthropic": "system", "gemini": "systemInstruction", "bedrock_converse": "system"}
    return body.get(key[target]) if target in key else None


def section(repeat: int, clock: Callable[[], float]) -> str:
    t, size = measure(repeat, clock)
    lines = [
        f"A 200-turn session ({size // 1000} KB body), each source to the next provider.",
        "",
        "| source -> target | `assemble_body` warm, ms | `translate_body` warm, ms | ratio "
        "| bar ≤ 2x |",
        "| --- | --- | --- | --- | --- |",
    ]
    for source, target in PAIRS:
        a = t[f"{source} assemble_body warm"]
        b = t[f"{source} -> {target} translate_body"]
        verdict = "met" if b / a <= 2 else "NOT met"
        lines.append(
            f"| {source} -> {target} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.1f}x | {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    args = p.parse_args()
    _core.wait_for_tables("o200k_base")
    print(section(args.repeat, CLOCKS[args.clock]))


if __name__ == "__main__":
    main()
