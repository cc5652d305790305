"""The drop order that keeps what later turns build on (``rust/src/plan/citations.rs``,
``drop_referenced_rings``, ``drop_citing_turns``): examples through the public API, and the
property that the drops follow the sequence of the drop stages' candidates as the reference
splits them."""

from __future__ import annotations

import copy
import json
from typing import Any

import reference as ref
import strategies as gen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb

NEW = ("drop_referenced_rings", "drop_citing_turns")
#: The order before these stages: rings, then plain turns, oldest first.
BEFORE = tuple(s for s in rb.AssemblyConfig().stages if s not in NEW)
FILLER = "rows of unremarkable output " * 12


def ring(call_id: str, result: str, arguments: str = "{}") -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "read", "arguments": arguments}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def session() -> list[dict[str, Any]]:
    """r0 (2-3) read ORD1234, which the agent repeats at 6; r1 (4-5) read what nobody cites."""
    return [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Change my booking."},
        *ring("r0", FILLER + "reservation ORD1234"),
        *ring("r1", FILLER + "reservation ORD5678"),
        {"role": "assistant", "content": "Your booking is ORD1234; changing it."},
        {"role": "user", "content": "Thanks, go on."},
        *ring("r2", "ok", '{"reservation_id": "ORD1234"}'),
        {"role": "user", "content": "Anything else?"},
    ]


def assemble(msgs: list[dict[str, Any]], budget: int, **cfg: Any) -> rb.AssemblyResult:
    config = rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=1,
        **cfg,
    )
    return rb.Assembler(config).assemble(msgs)


def one_ring_less(msgs: list[dict[str, Any]]) -> int:
    """A budget that one of the two middle rings must leave to meet."""
    return rb.count_tokens(msgs) - rb.count_tokens(msgs[4:6]) + rb.count_tokens([])


def test_a_referenced_ring_outlives_an_older_ring_nobody_cites() -> None:
    msgs = session()
    res = assemble(msgs, one_ring_less(msgs))
    kept = [next(i for i, m in enumerate(msgs) if m is k) for k in res.messages]
    assert kept == [0, 1, 2, 3, 6, 7, 8, 9, 10]
    assert [(s.stage, s.units) for s in res.report.stages] == [("drop_rings", 1)]


def test_without_the_two_stages_the_oldest_ring_goes_first() -> None:
    msgs = session()
    res = assemble(msgs, one_ring_less(msgs), stages=BEFORE)
    assert msgs[2] not in res.messages and msgs[4] in res.messages
    from_yaml = rb.AssemblyConfig.from_dict({"stages": list(BEFORE)})
    assert from_yaml.stages == BEFORE


def test_referenced_rings_and_citing_turns_go_last_and_are_reported() -> None:
    msgs = session()
    original = copy.deepcopy(msgs)
    strict = {
        "recent_user_turns": 1,
        "stages": [s for s in rb.AssemblyConfig().stages if s not in ref.DEGRADE_STAGES],
    }
    least = None
    try:
        assemble(msgs, 1, **strict)
    except rb.BudgetExceededError as e:
        least = e.tokens
    assert least is not None
    res = assemble(msgs, least, **strict)
    assert [(s.stage, s.units) for s in res.report.stages] == [
        ("drop_rings", 1),
        ("drop_plain_turns", 1),
        ("drop_referenced_rings", 1),
        ("drop_citing_turns", 1),
    ]
    assert msgs == original


def span(lay: ref.Layout, u: ref.Unit) -> tuple[int, int] | None:
    """The caller's indices a unit covers, as the report gives a dropped one."""
    sources = [lay.work.source[w] for w in range(u.start, u.end)]
    kept = [i for i in sources if i is not None]
    return (kept[0], kept[-1] + 1) if kept else None


def sequence(lay: ref.Layout, cfg: rb.AssemblyConfig) -> list[int]:
    """The units the drop stages take, in the order they take them."""
    per_stage = ref.candidates(lay, cfg)
    return list(dict.fromkeys(k for s in ref.core_stages(cfg) for k in per_stage[s]))


@st.composite
def citing_cases(draw: st.DrawFn) -> gen.Case:
    """Sessions whose results each hold an id of their own (a path, an order, a date) that
    later turns and calls repeat now and then, under a policy of few protected units and a
    budget anywhere in 30-100%."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": "Goal."},
    ]
    seen: list[str] = []
    for n in range(draw(st.integers(4, 14))):
        kind = draw(st.sampled_from(("ring", "ring", "assistant", "user")))
        cite = draw(st.sampled_from(seen)) if seen and draw(st.booleans()) else None
        if kind == "ring":
            arguments = json.dumps({"id": cite}) if cite else "{}"
            made = draw(st.sampled_from((f"ORD{1000 + n}", f"src/m{n}.py", f"2024-05-{n:02}")))
            seen.append(made)
            result = FILLER[: draw(st.integers(20, len(FILLER)))] + " " + made
            msgs += ring(f"c{n}", result, arguments)
        else:
            msgs.append({"role": kind, "content": f"About {cite or 'nothing'}."})
    msgs.append({"role": "user", "content": "Next."})
    policy = {
        "recent_tool_rings": draw(st.integers(0, 1)),
        "recent_user_turns": draw(st.integers(0, 1)),
        "side_effect_tools": ("read",) if draw(st.integers(0, 3)) == 0 else (),
        "stages": tuple(
            s for s in rb.AssemblyConfig().stages if s not in NEW or draw(st.booleans())
        ),
        "output_reserve_tokens": 0,
        "safety_margin_tokens": 0,
    }
    full = rb.count_tokens(msgs)
    budget = max(1, full * draw(st.integers(30, 100)) // 100)
    return gen.Case(msgs, None, policy, budget, (), full)


properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@properties
@given(citing_cases())
def test_the_drops_are_a_prefix_of_the_drop_sequence(case: gen.Case) -> None:
    """Without the stages that degrade the suffix or summarize, what is dropped is the first
    units of the sequence: every unreferenced ring before any referenced one, every plain turn
    citing nothing before any citing one (each with its stage configured)."""
    drops_follow_the_sequence(case)


@properties
@given(gen.cases())
def test_the_drops_are_a_prefix_of_the_drop_sequence_in_any_session(case: gen.Case) -> None:
    """The same on the suite's generated sessions (images, errors, reads, notes)."""
    drops_follow_the_sequence(case)


def drops_follow_the_sequence(case: gen.Case) -> None:
    stages = tuple(s for s in case.policy["stages"] if s in ref.CORE_STAGES)
    stages = tuple(s for s in stages if s not in ref.DEGRADE_STAGES)
    cfg = case.config(stages=stages, on_pairing_error="synthesize_error_results")
    try:
        res = rb.Assembler(cfg).assemble(case.messages, case.tools, pinned=list(case.pinned))
    except rb.BudgetExceededError:
        return
    lay, _ = ref.prepare(case.messages, cfg, case.pinned)
    spans = {tuple(s) for s in (*res.report.dropped_rings, *res.report.dropped_turns)}
    dropped = {k for k, u in enumerate(lay.units) if span(lay, u) in spans}
    assert len(dropped) == len(spans)
    order = sequence(lay, cfg)
    assert dropped == set(order[: len(dropped)]), (order, dropped)
