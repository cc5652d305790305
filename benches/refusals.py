"""Refusals before and after issue 21's degrading stages, on the trims of the pairing table:
every corpus session and the reference workload at 25/50/75% of its tokens, under the strict
policy (``truncate_protected_results`` and ``shrink_recent`` left out: the protected suffix is
kept whole or the request refused) and under the defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

import workload

import ringbound as rb

DEGRADE = ("truncate_protected_results", "shrink_recent")
FRACTIONS = (0.25, 0.5, 0.75)


@dataclasses.dataclass
class Refusals:
    runs: int = 0
    refused: int = 0
    degraded: int = 0
    #: Per degrading stage, how many served requests it ran in.
    by_stage: dict[str, int] = dataclasses.field(default_factory=dict)


def sweep(sessions: list[list[Any]], strict: bool) -> Refusals:
    out = Refusals()
    for messages in sessions:
        tokens = rb.count_tokens(messages, encoding="cl100k_base")
        for fraction in FRACTIONS:
            budget = int(tokens * fraction)
            asm = workload.assembler(budget, encoding="cl100k_base")
            if strict:
                cfg = asm.config
                stages = tuple(s for s in cfg.stages if s not in DEGRADE)
                asm = rb.Assembler(dataclasses.replace(cfg, stages=stages))
            out.runs += 1
            try:
                res = asm.assemble(messages)
            except rb.BudgetExceededError:
                out.refused += 1
                continue
            ran = [s.stage for s in res.report.stages if s.stage in DEGRADE]
            out.degraded += bool(ran)
            for stage in ran:
                out.by_stage[stage] = out.by_stage.get(stage, 0) + 1
    return out


def refusals_section() -> str:
    sessions = [m for _, m, _ in workload.corpus_sessions(count=10_000)]
    sessions.append(workload.reference_session())
    before, after = sweep(sessions, strict=True), sweep(sessions, strict=False)
    rows = [
        ("strict (before: suffix kept whole)", before),
        ("defaults (after: suffix degrades first)", after),
    ]
    lines = [
        "| policy | refused (fails closed) | served with a degraded suffix | "
        "truncate_protected_results | shrink_recent |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {r.refused} / {r.runs} | {r.degraded} | "
            f"{r.by_stage.get(DEGRADE[0], 0)} | {r.by_stage.get(DEGRADE[1], 0)} |"
        )
    intro = (
        f"The trims of the pairing table ({len(sessions)} sessions at 25%, 50% and 75% of their "
        "tokens, cl100k_base, no side-effect tools), under the strict policy and the defaults. "
        "A request still refused is one whose minimal request (leading system, goal, last user "
        "turn, newest ring with results at `min_result_tokens`) does not fit: "
        "`tests/test_corpus_refusals.py` asserts that on every corpus run."
    )
    return intro + "\n\n" + "\n".join(lines)


if __name__ == "__main__":
    print(refusals_section())
