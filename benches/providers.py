"""The provider table of issue 13: one generated 200-turn coding-agent session, converted into
each provider's native format, assembled cold, warm and on the next turn at a 32k budget, and
validated alone, all in one run. Markdown on stdout; ratios against openai_chat measured in the
same rounds. ``compare.py`` prints it as one of its sections.

    PYTHONPATH=python python benches/providers.py [--repeat N] [--clock cpu]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import Any

import workload
from measure import CLOCKS, Case, interleaved_medians

import ringbound as rb
from ringbound import _core
from ringbound.providers import PROVIDERS

#: Assistant turns of the generated session.
TURNS = 200


def chat_session() -> list[dict[str, Any]]:
    """A session of ``TURNS`` assistant turns that ends with tool results."""
    writer = workload.SessionWriter(workload.SEED)
    while sum(m["role"] == "assistant" for m in writer.messages) < TURNS:
        writer.grow(len(writer.messages) + 1)
    return writer.messages


def native(provider: str, chat: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    """The session in ``provider``'s shape: ``(messages, system)``."""
    if provider == "openai_chat":
        return chat, None
    native = rb.translate(chat, source="openai_chat", target=provider)
    return native.messages, native.system


def _history_only(run: Callable[[], Any]) -> None:
    """The caches holding the history and not the ring the next turn adds."""
    _core.cache_clear()
    run()


def measure(repeat: int, clock: Callable[[], float]) -> dict[str, float]:
    """Median seconds per provider of a cold assembly, a warm one (every item seen before),
    the next turn (the history seen before, one ring new) and a validation."""
    chat = chat_session()
    turn = chat + workload.next_ring(chat, 0)
    cases: dict[str, Case] = {}
    for provider in PROVIDERS:
        messages, system = native(provider, chat)
        after, _ = native(provider, turn)
        asm = workload.assembler(provider=provider)
        run = partial(asm.assemble, messages, system=system)
        run()
        cases[f"{provider} cold"] = Case(run, _core.cache_clear)
        cases[f"{provider} warm"] = Case(run)
        cases[f"{provider} next turn"] = Case(
            partial(asm.assemble, after, system=system), partial(_history_only, run)
        )
        cases[f"{provider} validate"] = Case(
            partial(rb.validate, messages, provider=provider, system=system)
        )
    return interleaved_medians(cases, repeat, clock)


def section(repeat: int, clock: Callable[[], float]) -> str:
    """The markdown section: each provider's timings and its ratio to openai_chat, and the
    issue's bar (cold and warm within 2x of openai_chat) with its verdict."""
    t = measure(repeat, clock)
    kinds = ("cold", "warm", "next turn", "validate")
    anchor = {kind: t[f"openai_chat {kind}"] for kind in kinds}
    lines = [
        f"One generated session of {TURNS} assistant turns in each provider's shape, budget "
        f"{workload.BUDGET:,}; next turn: the history cached, one ring new. Ratios against "
        "openai_chat in the same rounds. Warm repeats the request: the core keeps the reading "
        "of a whole native request and plans it again; the next turn is what a growing "
        "session pays (its reading is new), and is not part of the bar.",
        "",
        "| provider | cold ms | warm ms | next turn ms | validate ms | cold / chat "
        "| warm / chat | next turn / chat | within 2x |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for provider in PROVIDERS:
        ms = [t[f"{provider} {kind}"] * 1e3 for kind in kinds]
        ratios = [t[f"{provider} {kind}"] / anchor[kind] for kind in kinds[:3]]
        met = "met" if all(r <= 2.0 for r in ratios[:2]) else "not met"
        lines.append(
            f"| {provider} | "
            + " | ".join(f"{v:.2f}" for v in ms)
            + " | "
            + " | ".join(f"{r:.1f}x" for r in ratios)
            + f" | {met} |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=15, help="timings per median (15)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall or cpu time")
    args = p.parse_args()
    print(section(args.repeat, CLOCKS[args.clock]))


if __name__ == "__main__":
    main()
