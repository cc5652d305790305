"""Assembles every real session of the shared corpus at 25%, 50% and 75% of its own tokens and
prints one row per corpus: sessions, assemblies, how many failed closed because the protected
part alone did not fit (those are re-run at the smallest budget the error names), how many
outputs were wrong, and the median tokens_after / budget of the assemblies that fit.

An output is wrong when ringbound's validator or mistral_common's V13 validator in serving mode
(when installed) rejects it, when it is over budget, or when an exact recount differs from the
report. Usage: ``python examples/corpus_report.py [CORPUS_DIR]`` (default: ``$RINGBOUND_CORPUS``
or ``../shared/corpus`` next to the repository).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ringbound as rb
from ringbound.cli.demo import AIRLINE_SIDE_EFFECT_TOOLS

try:
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.validator import (
        MistralRequestValidatorV13,
        ValidationMode,
    )

    SERVING: Any = MistralRequestValidatorV13(mode=ValidationMode.serving)
except ImportError:
    SERVING = None

FRACTIONS = (0.25, 0.5, 0.75)
OPENHANDS = ("execute_bash", "str_replace_editor")
SWE_AGENT = ("bash", "create", "edit", "insert", "submit")
SWE_AGENT_EXTRA_KEYS = ("thought", "action", "agent", "message_type")


def swe_agent_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SWE-agent history → OpenAI messages: ``tool_call_ids: [id]`` → ``tool_call_id: id``,
    its bookkeeping keys (thought, action, agent, message_type) dropped."""
    out = []
    for message in history:
        m = {k: v for k, v in message.items() if k not in SWE_AGENT_EXTRA_KEYS}
        if "tool_call_ids" in m:
            (m["tool_call_id"],) = m.pop("tool_call_ids")
        out.append(m)
    return out


def cut(messages: list[Any]) -> list[Any]:
    """Up to the last user/tool message: the request before the unanswered call."""
    last = max(i for i, m in enumerate(messages) if m["role"] in ("user", "tool"))
    return messages[: last + 1]


def without_null_parameters(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """swe-gym's ``finish`` tool says ``parameters: null``; dropping the key means the same."""
    tools = copy.deepcopy(tools)
    for tool in tools:
        if tool["function"].get("parameters", {}) is None:
            del tool["function"]["parameters"]
    return tools


#: One session: messages, tools, side-effecting tools, extra config.
Run = tuple[list[Any], Any, tuple[str, ...], dict[str, Any]]


def sessions(corpus: Path) -> dict[str, list[Run]]:
    """Corpus name → its sessions, ready to assemble."""
    tau = json.loads((corpus / "tau-bench" / "gpt-4o-airline.json").read_bytes())
    gym = json.loads((corpus / "swe-gym" / "sample_raw.json").read_bytes())
    trajs = sorted((corpus / "swe-agent").glob("*.traj"))
    agent = [json.loads(p.read_bytes())["history"] for p in trajs]
    repair = {"on_pairing_error": "synthesize_error_results"}
    return {
        "tau-bench": [(s["traj"], None, AIRLINE_SIDE_EFFECT_TOOLS, {}) for s in tau],
        "swe-gym repaired": [
            (s["messages"], without_null_parameters(s["tools"]), OPENHANDS, repair) for s in gym
        ],
        "swe-gym cut": [
            (cut(s["messages"]), without_null_parameters(s["tools"]), OPENHANDS, {}) for s in gym
        ],
        "swe-agent": [(swe_agent_messages(h), None, SWE_AGENT, {}) for h in agent],
    }


def wrong(res: rb.AssemblyResult, budget: int) -> bool:
    if rb.validate(res.messages) or res.report.tokens_after > budget:
        return True
    if rb.count_tokens(res.messages, tools=res.tools) != res.report.tokens_after:
        return True
    if SERVING is not None:
        try:
            SERVING.validate_request(
                ChatCompletionRequest.from_openai(copy.deepcopy(res.messages), model="any")
            )
        except Exception:
            return True
    return False


def assemble(
    messages: list[Any],
    tools: Any,
    side_effects: tuple[str, ...],
    extra: dict[str, Any],
    budget: int,
) -> rb.AssemblyResult:
    cfg = rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=side_effects,
        **extra,
    )
    return rb.Assembler(cfg).assemble(messages, tools)


#: Milder budgets, where the cheap stages may be all a request needs.
CHEAP_FRACTIONS = (0.95, 0.9, 0.75)
#: The stages that rewrite a message instead of dropping a unit.
CHEAP = ("dedupe_superseded_reads", "truncate_oversized_results", "degrade_media")


@dataclass
class Savings:
    """What the cheap stages did over one corpus's runs."""

    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHEAP, 0))
    messages: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHEAP, 0))
    #: Runs that needed some stage, and those the cheap stages alone made fit.
    needed: int = 0
    cheap_only: int = 0

    def add(self, report: rb.AssemblyReport) -> None:
        if not report.stages:
            return
        self.needed += 1
        for s in report.stages:
            if s.stage in CHEAP:
                self.tokens[s.stage] += s.tokens_saved
                self.messages[s.stage] += s.units
        if all(s.stage in CHEAP for s in report.stages):
            self.cheap_only += 1


def row(runs: list[Run], ratios: list[float], savings: Savings) -> tuple[int, int, int, int]:
    """Assembles one corpus; appends the ratios of the assemblies that fit to ``ratios`` and
    what the cheap stages saved to ``savings``."""
    infeasible = violations = 0
    for run in runs:
        total = rb.count_tokens(run[0], tools=run[1])
        for fraction in FRACTIONS:
            budget = int(total * fraction)
            try:
                res = assemble(*run, budget)
                ratios.append(res.report.tokens_after / budget)
            except rb.BudgetExceededError as e:
                infeasible += 1
                budget = e.tokens
                res = assemble(*run, budget)
            violations += wrong(res, budget)
        for fraction in CHEAP_FRACTIONS:
            try:
                savings.add(assemble(*run, int(total * fraction)).report)
            except rb.BudgetExceededError:
                pass
    return len(runs), len(runs) * len(FRACTIONS), infeasible, violations


def median(ratios: list[float]) -> float:
    return statistics.median(ratios) if ratios else float("nan")


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    corpus = Path(argv[1] if len(argv) > 1 else os.environ.get("RINGBOUND_CORPUS", default))
    print(
        f"budgets {', '.join(f'{f:.0%}' for f in FRACTIONS)} of each session's own tokens; "
        f"mistral_common check {'on' if SERVING else 'off (not installed)'}"
    )
    print(
        f"{'corpus':<18} {'sessions':>8} {'runs':>5} {'infeasible':>10} {'violations':>10} "
        f"{'median after/budget':>19}"
    )
    totals = [0, 0, 0, 0]
    all_ratios: list[float] = []
    saved: dict[str, Savings] = {}
    for name, runs in sessions(corpus).items():
        ratios: list[float] = []
        saved[name] = Savings()
        counts = row(runs, ratios, saved[name])
        all_ratios += ratios
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        print(f"{name:<18} {_cells(counts)} {median(ratios):>19.3f}")
    print(f"{'total':<18} {_cells(totals)} {median(all_ratios):>19.3f}")
    print()
    print(
        "cheap stages at budgets of "
        + ", ".join(f"{f:.0%}" for f in CHEAP_FRACTIONS)
        + ": tokens (messages) saved in kept messages, summed; runs they alone made fit"
    )
    print(f"{'corpus':<18} " + " ".join(f"{s:>28}" for s in CHEAP) + f" {'fit by cheap alone':>19}")
    for name, s in saved.items():
        cells = " ".join(f"{f'{s.tokens[k]} ({s.messages[k]})':>28}" for k in CHEAP)
        print(f"{name:<18} {cells} {f'{s.cheap_only} of {s.needed}':>19}")
    return 1 if totals[3] else 0


def _cells(counts: Any) -> str:
    n, r, inf, bad = counts
    return f"{n:>8} {r:>5} {inf:>10} {bad:>10}"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
