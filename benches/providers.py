"""The provider table of issue 13: one generated 200-turn coding-agent session, converted into
each provider's native format, assembled cold and warm at a 32k budget, and validated alone,
all in one run. Markdown on stdout; ratios against openai_chat measured in the same rounds.

    PYTHONPATH=python python benches/providers.py [--repeat N]
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import workload
from measure import Case, interleaved_medians

import ringbound as rb
from ringbound import _core
from ringbound.providers import PROVIDERS, adapter

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
    return adapter(provider).from_canonical(chat)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=15, help="timings per median (15)")
    args = p.parse_args()
    chat = chat_session()
    cases: dict[str, Case] = {}
    for provider in PROVIDERS:
        messages, system = native(provider, chat)
        asm = workload.assembler(provider=provider)
        run = partial(asm.assemble, messages, system=system)
        run()
        cases[f"{provider} cold"] = Case(run, _core.cache_clear)
        cases[f"{provider} warm"] = Case(run)
        cases[f"{provider} validate"] = Case(
            partial(rb.validate, messages, provider=provider, system=system)
        )
    t = interleaved_medians(cases, args.repeat)
    anchor = {kind: t[f"openai_chat {kind}"] for kind in ("cold", "warm", "validate")}
    print(f"{len(chat)} chat messages, {TURNS} assistant turns, budget {workload.BUDGET}")
    print(f"medians of {args.repeat} runs\n")
    print("| provider | cold ms | warm ms | warm vs openai_chat | validate ms |")
    print("| --- | --- | --- | --- | --- |")
    for provider in PROVIDERS:
        cold, warm, val = (t[f"{provider} {k}"] for k in ("cold", "warm", "validate"))
        print(
            f"| {provider} | {cold * 1e3:.2f} | {warm * 1e3:.2f} | "
            f"{warm / anchor['warm']:.0f}x | {val * 1e3:.2f} |"
        )


if __name__ == "__main__":
    main()
