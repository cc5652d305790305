"""The protected suffix is the latest rings where they stand and the current turn, not
everything after the earliest of those rings (issue 36, findings 1 and 2)."""

from __future__ import annotations

import time
from typing import Any

import pytest

import ringbound as rb


def call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def early_ring_then_chat(turns: int = 30) -> list[dict[str, Any]]:
    """The finding's session: system, goal, one ring, then a long plain chat."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Help me plan the trip."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "flight AF123 on 2026-12-24"},
    ]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"And what about day {i}?"},
            {"role": "assistant", "content": f"On day {i} " + "we could walk around. " * 30},
        ]
    return msgs


def cfg(budget: int, **kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **kw
    )


def test_an_early_ring_does_not_protect_the_chat_after_it() -> None:
    msgs = early_ring_then_chat()
    budget = rb.count_tokens(msgs) * 3 // 10
    res = rb.Assembler(cfg(budget)).assemble(msgs)
    assert res.report.tokens_after <= budget
    kept = {id(m) for m in res.messages}
    assert id(msgs[2]) in kept and id(msgs[3]) in kept, "the ring is protected where it stands"
    assert id(msgs[-1]) in kept and id(msgs[-2]) in kept, "so are the current turn and user"
    assert res.report.dropped_turns, "the plain turns between them are the middle"
    assert rb.validate(res.messages) == []


def test_the_same_chat_trims_alike_with_or_without_the_early_ring() -> None:
    with_ring = early_ring_then_chat()
    without = with_ring[:2] + with_ring[4:]
    budget = rb.count_tokens(with_ring) // 2
    a = rb.Assembler(cfg(budget)).assemble(with_ring).messages
    b = rb.Assembler(cfg(budget)).assemble(without).messages
    # The chat part kept is the same: the ring costs its own tokens, nothing more.
    tail = [m for m in a if m not in with_ring[2:4]]
    assert tail[-len(b) + 4 :] == b[-len(b) + 4 :]


def test_recent_rings_and_the_turns_between_them() -> None:
    """Plain turns between two recent rings are middle: they go before the rings do."""
    msgs = early_ring_then_chat(6)
    msgs += [
        {"role": "assistant", "content": None, "tool_calls": [call("c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "hotel Bellevue, 3 nights"},
        {"role": "assistant", "content": "Booked. " * 5},
    ]
    budget = rb.count_tokens(msgs) // 3
    res = rb.Assembler(cfg(budget, recent_tool_rings=2)).assemble(msgs)
    kept = {id(m) for m in res.messages}
    assert all(id(m) in kept for m in (msgs[2], msgs[3], msgs[-3], msgs[-2], msgs[-1]))
    assert res.report.bucket_tokens["suffix"] == rb.count_tokens(
        [msgs[2], msgs[3], msgs[-3], msgs[-2], msgs[-1]]
    ) - rb.count_tokens([])


@pytest.mark.parametrize("value", [10**6, 10**12, 2**40])
def test_a_huge_recent_count_costs_no_more_than_the_session(value: int) -> None:
    """A count far above the session's rings used to make `shrink_recent` step down one at a
    time: 10^12 ran for more than ten minutes."""
    msgs = early_ring_then_chat(40)
    budget = rb.count_tokens(msgs) // 25
    config = cfg(budget, recent_tool_rings=value, recent_user_turns=value)
    start = time.perf_counter()
    res = rb.Assembler(config).assemble(msgs)
    assert time.perf_counter() - start < 2.0
    assert res.report.tokens_after <= budget
    assert any(s.stage == "shrink_recent" for s in res.report.stages)
