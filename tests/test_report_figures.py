"""The report's figures are exact, or estimates labelled as such and close (issue 36, finding
3): where the plan sizes the units it certainly drops from their bytes instead of counting
them, ``tokens_before`` and the stages' savings used to be those bounds, 3.6 times the real
count, and a saving could exceed the whole session."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path
from typing import Any

import ringbound as rb


def long_sessions(corpus: Path, n: int = 40, copies: int = 5) -> list[list[dict[str, Any]]]:
    """Tau-bench sessions replayed ``copies`` times each (ids kept unique): long enough that a
    budget of a few thousand tokens leaves most of the history certainly dropped."""
    sessions = json.loads((corpus / "tau-bench" / "gpt-4o-airline.json").read_text())
    out = []
    for s in sessions[:n]:
        msgs = [s["traj"][0]]
        for r in range(copies):
            for m in copy.deepcopy(s["traj"][1:]):
                for c in m.get("tool_calls") or []:
                    c["id"] = f"{c['id']}_{r}"
                if m.get("tool_call_id"):
                    m["tool_call_id"] = f"{m['tool_call_id']}_{r}"
                msgs.append(m)
        out.append(msgs)
    return out


def test_estimates_are_within_five_percent_on_the_corpus(corpus: Path) -> None:
    errors, savings = [], []
    for msgs in long_sessions(corpus):
        cfg = rb.AssemblyConfig(
            model_input_limit=9000, output_reserve_tokens=0, safety_margin_tokens=0
        )
        try:
            report = rb.Assembler(cfg, cache=rb.CountCache()).assemble(msgs).report
        except rb.BudgetExceededError:
            continue
        exact = rb.count_tokens(msgs)
        if report.tokens_before_exact:
            assert report.tokens_before == exact
        saved = sum(s.tokens_saved for s in report.stages)
        assert saved <= exact, "no stage saves more than the session holds"
        if not report.tokens_before_exact:
            errors.append(abs(report.tokens_before - exact) / exact)
            savings.append(abs(saved - (exact - report.tokens_after)) / exact)
    assert len(errors) >= 10, "the sessions exercise the estimate"
    assert max(errors) <= 0.05, sorted(errors)[-5:]
    assert max(savings) <= 0.05, sorted(savings)[-5:]
    assert statistics.median(errors) <= 0.01


def test_the_same_request_reports_the_same_figures(corpus: Path) -> None:
    """The estimate counts the same sampled messages on every plan, so assembling the same
    request again reports the same figures (the samples' counts are cached by then)."""
    msgs = long_sessions(corpus, n=1)[0]
    cfg = rb.AssemblyConfig(model_input_limit=9000, output_reserve_tokens=0, safety_margin_tokens=0)
    asm = rb.Assembler(cfg, cache=rb.CountCache())
    first = asm.assemble(msgs).report
    again = asm.assemble(msgs).report
    assert not first.tokens_before_exact
    assert (again.tokens_before, again.stages) == (first.tokens_before, first.stages)
    assert again.tokens_after == first.tokens_after
