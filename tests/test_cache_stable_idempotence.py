"""Cache-stable assembly is idempotent, also with a summarizer: assembling the same history
again with the state an assembly returned makes the same request, and a compaction leaves the
request at the low-water mark (summary included) or with nothing left in the middle to drop,
so the next call does not compact again. One test per root cause the properties of
``tests/test_invariants.py`` found (issue 18)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any

import pytest

import ringbound as rb
from ringbound import summarizers


def read(i: int, words: int = 60, name: str = "read_file", result: str | None = None) -> list[Any]:
    args = f'{{"page": {i}}}'  # distinct, so no older read is a duplicate to stub
    call = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
    text = result if result is not None else f"page {i}: " + "lorem " * words
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": text},
    ]


def history(rings: int, words: int = 60) -> list[Any]:
    msgs: list[Any] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Read all pages and report."},
    ]
    for i in range(rings):
        msgs += read(i, words)
    return msgs


def config(budget: int, **kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        cache_stable=True,
        **kw,
    )


def kept(msgs: list[Any], res: rb.AssemblyResult) -> set[int]:
    """Indices of the caller's messages the request sends as themselves."""
    mine = {id(m): i for i, m in enumerate(msgs)}
    return {mine[id(m)] for m in res.messages if id(m) in mine}


def assemble_twice(
    cfg: rb.AssemblyConfig, msgs: list[Any], summarizer: Any = None, tools: Any = None
) -> tuple[rb.AssemblyResult, rb.AssemblyResult]:
    asm = rb.Assembler(cfg, summarizer=summarizer)
    first = asm.assemble(msgs, tools)
    return first, asm.assemble(msgs, tools, state=first.state)


SUMMARIZERS = [
    pytest.param(None, id="no summarizer"),
    pytest.param(summarizers.extractive(), id="extractive"),
]


@pytest.mark.parametrize("summarizer", SUMMARIZERS)
def test_finding_compaction_degraded_the_suffix_to_reach_the_low_water_mark(
    summarizer: Any,
) -> None:
    """The three recent rings alone are above the low-water mark (half the budget) but fit the
    budget. The compaction planned at the mark with every stage, so shrink_recent dropped
    recent rings to get there: protected content lost for an optional mark, and a cut the
    next call refused to replay ("message N it dropped is protected now"), so the same
    history compacted afresh every time. It now drops the middle only."""
    msgs = history(10)
    recent = rb.count_tokens(msgs[-6:])
    cfg = config(round(recent * 1.5), recent_tool_rings=3, min_recent_tool_rings=0)
    assert recent > cfg.compact_target_ratio * cfg.budget
    first, again = assemble_twice(cfg, msgs, summarizer)
    stages = {s.stage for s in first.report.stages}
    assert not stages & {"shrink_recent", "truncate_protected_results"}
    assert all(any(m is k for k in first.messages) for m in msgs[-6:])
    assert again.report.state == "reused"
    assert again.messages == first.messages and again.state == first.state


def test_finding_summary_room_planned_at_the_full_budget_lands_above_the_trigger() -> None:
    """When the room for the summary did not fit at the low-water mark, the plan fell back to
    the full budget: the request with its summary landed near the budget (96% in the
    campaign), above the compaction trigger, dropping fewer units than it could. It now goes
    as low as the middle allows: at the mark, or with nothing left in the middle (here 308
    tokens of 500, where it was 484)."""
    msgs = history(14)
    protected = rb.count_tokens(msgs[:2] + msgs[-4:])
    cfg = config(round(protected * 2.5), recent_tool_rings=2, summary_max_tokens=256)
    first, again = assemble_twice(cfg, msgs, summarizers.extractive())
    assert first.report.summarized
    target = math.floor(cfg.compact_target_ratio * cfg.budget)
    assert first.report.tokens_after <= target or first.report.bucket_tokens["middle"] == 0
    assert first.report.tokens_after <= cfg.compact_trigger_ratio * cfg.budget
    assert again.report.state == "reused" and again.messages == first.messages


@pytest.mark.parametrize("summarizer", SUMMARIZERS)
def test_finding_replay_refused_the_units_shrink_recent_released(summarizer: Any) -> None:
    """The protected part alone is over the budget, so the compaction must shrink the recent
    rings to fit at all. The replay refused those drops as "protected now": the same history
    never reused its cut. Units released above the floors are replayed."""
    msgs = history(8)
    recent = rb.count_tokens(msgs[-8:])
    cfg = config(round(recent * 0.8), recent_tool_rings=4, min_recent_tool_rings=1)
    first, again = assemble_twice(cfg, msgs, summarizer)
    assert "shrink_recent" in {s.stage for s in first.report.stages}
    assert again.report.state == "reused"
    assert again.messages == first.messages and again.state == first.state


def test_finding_replay_wrote_the_ledger_in_another_order() -> None:
    """A short error ring is held back until drop_error_rings, so the stage loop records its
    side effect after a newer ring's; the replay recorded them in history order, and the
    ledger note of the same history read differently. The replay records them in the stage
    loop's order."""
    msgs = history(0)
    msgs += read(0, name="send_email", result="Error: mailbox full")
    msgs += read(1, name="send_email", result="sent " * 40)
    for i in range(2, 8):
        msgs += read(i)
    protected = rb.count_tokens(msgs[:2] + msgs[-2:])
    cfg = config(
        round(protected * 2),
        recent_tool_rings=1,
        side_effect_tools=("send_email",),
        short_error_result_tokens=50,
        max_held_error_rings=2,
    )
    first, again = assemble_twice(cfg, msgs)
    note = next(m["content"] for m in first.messages if "side-effect-ledger" in str(m["content"]))
    assert note.index('call_id="c1"') < note.index('call_id="c0"')
    assert again.report.state == "reused"
    assert again.messages == first.messages


def test_finding_a_fresh_cut_of_the_summarized_units_lost_the_summary() -> None:
    """With the tools schema dropped to fit, the replay cannot make the cut again (it keeps
    the tools) and the assembly plans afresh: it dropped the same units, all of them in the
    state's summary, so nothing was left to summarize and the request went out without the
    summary note. That note is now sent again as it was."""
    msgs = history(12)
    tools = [
        {
            "type": "function",
            "function": {
                "name": f"tool_{k}",
                "description": "reads a page of the report " * 20,
                "parameters": {"type": "object", "properties": {}},
            },
        }
        for k in range(3)
    ]
    protected = rb.count_tokens(msgs[:2] + msgs[-4:], tools=tools)
    cfg = config(
        round(protected * 0.7),
        recent_tool_rings=2,
        on_still_over_budget="drop_tools_schema_then_fail",
    )
    first, again = assemble_twice(cfg, msgs, summarizers.extractive(), tools)
    assert first.report.tools_dropped and first.report.summarized
    assert (
        sum(1 for m in first.messages if str(m["content"]).startswith("[ringbound:summary]")) == 1
    )
    assert again.messages == first.messages and again.tools is None
    assert dataclasses.replace(again.state, compactions=0) == dataclasses.replace(
        first.state, compactions=0
    )


def newest_result_cut(slack: int, **kw: Any) -> tuple[list[Any], rb.AssemblyConfig]:
    """A history whose newest ring, released by the floors, has a result too large for the
    budget, and a user turn after it; the budget is ``slack`` tokens above the rest of the
    protected part."""
    msgs = history(6)
    msgs[-1] = {**msgs[-1], "content": "page 5: " + "lorem " * 2000}
    msgs.append({"role": "user", "content": "Go on."})
    rest = rb.count_tokens(msgs[:2] + msgs[-3:-2] + msgs[-1:])
    cfg = config(
        rest + slack,
        recent_tool_rings=1,
        min_recent_tool_rings=0,
        recent_user_turns=0,
        min_recent_user_turns=0,
        **kw,
    )
    return msgs, cfg


@pytest.mark.parametrize(
    "slack, limits",
    [
        pytest.param(100, {"max_tool_result_tokens": 120, "min_result_tokens": 16}, id="deeper"),
        pytest.param(400, {"max_tool_result_tokens": 64, "min_result_tokens": 300}, id="shallower"),
    ],
)
def test_finding_the_replay_cut_the_newest_result_to_another_depth(
    slack: int, limits: dict[str, int]
) -> None:
    """truncate_protected_results cuts the newest ring's results only as far as the budget
    needs, and never below min_result_tokens: deeper or shallower than max_tool_result_tokens.
    The state records the cut's kind, not its depth, and the replay cut at
    max_tool_result_tokens: over the budget (then planned again at a tightened budget, here
    shrink_recent dropping the ring, and reported "reused"), or under it with another text.
    That cut is not replayed: the compaction is planned afresh and makes it again."""
    msgs, cfg = newest_result_cut(slack, **limits)
    first, again = assemble_twice(cfg, msgs, summarizers.extractive())
    assert [r.kind for r in first.report.rewrites] == ["truncated"]
    assert "truncate_protected_results" in {s.stage for s in first.report.stages}
    assert again.report.state.startswith("stale: message 13 was cut to fit the budget")
    assert again.messages == first.messages
    assert dataclasses.replace(again.state, compactions=0) == dataclasses.replace(
        first.state, compactions=0
    )


def test_finding_a_replay_over_the_budget_was_tightened_into_a_new_cut_called_reused() -> None:
    """The history grew past the budget since its compaction. The replay's rendering (its
    ledger note made it a recount) was over the budget, so it was planned again at a tightened
    budget with every stage: a new cut without the summary, reported as the state "reused".
    A rendering that is not the replay's own is now a new compaction."""
    msgs = history(0) + read(0, name="send_email")
    for i in range(1, 6):
        msgs += read(i)
    msgs[-1] = {**msgs[-1], "content": "page 5: " + "lorem " * 300}
    cfg = config(
        rb.count_tokens(msgs[:2] + msgs[-2:]) + 60,
        recent_tool_rings=1,
        side_effect_tools=("send_email",),
    )
    asm = rb.Assembler(cfg, summarizer=summarizers.extractive())
    first = asm.assemble(msgs)
    again = asm.assemble(msgs + read(6, words=20), state=first.state)
    assert first.report.ledger_entries == 1
    assert again.report.state == "compacted"
    assert again.report.summarized
    assert "reuse_previous_cut" not in {s.stage for s in again.report.stages}


def test_finding_the_summary_note_appears_above_a_budget_in_place_of_kept_messages() -> None:
    """Monotonicity, narrowed (thorough profile, 1 case in about 6,000): one token below the
    least budget with room for the summary note, the compaction drops units without a note
    (reason no_room) and keeps the plain turns that fit; at that budget the note is
    inserted and its room made by dropping those turns too. The larger budget keeps fewer
    of the caller's messages, each of them in the span the note summarizes: the property
    counts a summarized message as kept."""
    msgs = history(0)
    for i in range(6):
        msgs += read(i, words=300)
    for k in range(4):
        msgs += [
            {"role": "user", "content": f"and page {k}?"},
            {"role": "assistant", "content": "ok"},
        ]
    msgs += read(6, words=20)
    results = []
    for budget in range(150, 400):
        cfg = config(budget, recent_tool_rings=1, recent_user_turns=0, min_recent_user_turns=0)
        with contextlib.suppress(rb.BudgetExceededError):
            results.append(rb.Assembler(cfg, summarizer=summarizers.extractive()).assemble(msgs))
        if results and results[-1].report.summarized:
            break
    lo, hi = results[-2:]
    assert hi.report.budget == lo.report.budget + 1
    assert lo.report.summary is not None and lo.report.summary.reason == "no_room"
    assert hi.report.summarized and hi.report.summary is not None
    lost = kept(msgs, lo) - kept(msgs, hi)
    assert lost
    assert lost <= set(range(*hi.report.summary.span))
