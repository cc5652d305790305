"""Issue 21's acceptance bar: on every real session of the shared corpus at 25%, 50% and 75% of
its own tokens, ringbound refuses a request only when the minimal request does not fit: the
messages protected at the floors (leading system messages, the goal, every pinned instruction,
the last ``min_recent_user_turns`` user messages, the suffix from the last
``min_recent_tool_rings`` rings), the newest ring's results cut to ``min_result_tokens``, the
side-effect ledger of everything else, and the tools schema.

The minimal request is computed here from the messages themselves (the ledger note rendered by
the pure-Python reference), not by the planner, so the planner cannot agree with itself by
construction. The same sweep under the strict policy (the degrading stages left out) must
refuse some of those requests, so the bar measures the new stages and not the corpus.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import reference as ref
from test_corpus import (
    AIRLINE_SIDE_EFFECT_TOOLS,
    FRACTIONS,
    SWE_AGENT_SIDE_EFFECTS,
    SWE_GYM_SIDE_EFFECTS,
    cut_after_last_user_or_tool,
    swe_agent,
    swe_agent_messages,
    swe_gym,
    tau_bench,
    without_null_parameters,
)

import ringbound as rb

DEGRADE = ("truncate_protected_results", "shrink_recent")


def minimal_tokens(messages: list[Any], tools: list[Any] | None, cfg: rb.AssemblyConfig) -> int:
    """Tokens of the smallest request the floors allow (see the module docstring): an upper
    bound of what the planner can reach, since a cut to a limit never exceeds it."""
    floors = dataclasses.replace(
        cfg,
        recent_tool_rings=min(cfg.recent_tool_rings, cfg.min_recent_tool_rings),
        recent_user_turns=min(cfg.recent_user_turns, cfg.min_recent_user_turns),
    )
    lay, _ = ref.prepare(messages, floors)
    kept = [
        w
        for k, u in enumerate(lay.units)
        if lay.protected[k]
        for w in range(u.start, u.end)
        if w not in lay.notes
    ]
    results = [
        w
        for w in kept
        if lay.recent[lay.unit_of(w)] and lay.work.msgs[w]["role"] == "tool" and w not in lay.pin
    ]
    newest = lay.unit_of(results[-1]) if results else None
    tokens = rb.count_tokens([lay.work.msgs[w] for w in kept], encoding=cfg.encoding, tools=tools)
    for w in results:
        cap = cfg.min_result_tokens if lay.unit_of(w) == newest else cfg.max_tool_result_tokens
        tokens -= max(0, lay.work.tokens[w] - cap)
    ledger = ref.Ledger(list(lay.ledger.entries), lay.ledger.role, cfg.encoding)
    for k, u in enumerate(lay.units):
        if not lay.protected[k] and u.kind == "ring":
            turn = sum(1 for x in lay.users if x < u.start)
            for entry in ref.side_effect_entries(lay.work, u, cfg, turn):
                ledger.add(entry)
    return tokens + ledger.tokens


@dataclasses.dataclass
class Sweep:
    """One corpus at 25/50/75%: how many requests each policy refused, and how many of those
    the minimal request would have fitted."""

    runs: int = 0
    minimal_fits: int = 0
    refused_strict: int = 0
    refused_strict_fitting: int = 0
    refused: int = 0
    refused_fitting: list[str] = dataclasses.field(default_factory=list)
    degraded: int = 0


def sweep_session(
    sweep: Sweep,
    name: str,
    messages: list[Any],
    tools: list[Any] | None,
    side_effects: tuple[str, ...],
    **config: Any,
) -> None:
    total = rb.count_tokens(messages, tools=tools)
    for fraction in FRACTIONS:
        budget = int(total * fraction)
        cfg = rb.AssemblyConfig(
            model_input_limit=budget,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            side_effect_tools=side_effects,
            **config,
        )
        strict = dataclasses.replace(cfg, stages=tuple(s for s in cfg.stages if s not in DEGRADE))
        fits = minimal_tokens(messages, tools, cfg) <= budget
        sweep.runs += 1
        sweep.minimal_fits += fits
        try:
            rb.Assembler(strict).assemble(messages, tools)
        except rb.BudgetExceededError:
            sweep.refused_strict += 1
            sweep.refused_strict_fitting += fits
        try:
            res = rb.Assembler(cfg).assemble(messages, tools)
        except rb.BudgetExceededError as e:
            sweep.refused += 1
            if fits:
                sweep.refused_fitting.append(f"{name} @ {fraction:.0%}: {e}")
        else:
            assert res.report.tokens_after <= budget
            assert not rb.validate(res.messages)
            sweep.degraded += any(s.stage in DEGRADE for s in res.report.stages)


@pytest.fixture(scope="module")
def sweeps(corpus: Path) -> dict[str, Sweep]:
    out = {name: Sweep() for name in ("tau-bench", "swe-gym repaired", "swe-gym cut", "swe-agent")}
    for s in tau_bench(corpus):
        name = f"tau-bench task {s['task_id']} trial {s['trial']}"
        sweep_session(out["tau-bench"], name, s["traj"], None, AIRLINE_SIDE_EFFECT_TOOLS)
    for s in swe_gym(corpus):
        tools = without_null_parameters(s["tools"])
        sweep_session(
            out["swe-gym repaired"],
            s["instance_id"],
            s["messages"],
            tools,
            SWE_GYM_SIDE_EFFECTS,
            on_pairing_error="synthesize_error_results",
        )
        sweep_session(
            out["swe-gym cut"],
            s["instance_id"],
            cut_after_last_user_or_tool(s["messages"]),
            tools,
            SWE_GYM_SIDE_EFFECTS,
        )
    for name, history in swe_agent(corpus).items():
        sweep_session(
            out["swe-agent"], name, swe_agent_messages(history), None, SWE_AGENT_SIDE_EFFECTS
        )
    return out


def test_refused_only_when_the_minimal_request_does_not_fit(sweeps: dict[str, Sweep]) -> None:
    print(
        f"\n{'corpus':<18} {'runs':>5} {'minimal fits':>12} {'refused before':>14} "
        f"{'(minimal fits)':>14} {'refused after':>13} {'degraded':>8}"
    )
    for name, s in sweeps.items():
        print(
            f"{name:<18} {s.runs:>5} {s.minimal_fits:>12} {s.refused_strict:>14} "
            f"{s.refused_strict_fitting:>14} {s.refused:>13} {s.degraded:>8}"
        )
    wrong = [line for s in sweeps.values() for line in s.refused_fitting]
    assert not wrong, f"{len(wrong)} refused although the minimal request fits:\n" + "\n".join(
        wrong[:20]
    )


def test_the_strict_policy_refuses_requests_the_minimal_one_fits(
    sweeps: dict[str, Sweep],
) -> None:
    """Without the degrading stages, today's strict protection refuses servable requests: the
    bar above is met by the new stages, not by the corpus being easy."""
    assert sum(s.refused_strict_fitting for s in sweeps.values()) > 0
    assert sum(s.degraded for s in sweeps.values()) > 0
