"""Cache-stable assembly: the cut is made again while it fits under the trigger, so the request's
prefix stays byte-identical; over it, a compaction goes down to the low-water mark. States
round-trip through bytes, and a state that does not describe the history is caught."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound.cache_markers import unmarked
from ringbound.providers import adapter


def ring(i: int, name: str = "read_log") -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps({"day": i})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i}: " + "log line " * 40},
    ]


START = [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "Email Ana, then check every day's log."},
]


def config(**kw: Any) -> rb.AssemblyConfig:
    base: dict[str, Any] = {
        "model_input_limit": 6000,
        "output_reserve_tokens": 500,
        "safety_margin_tokens": 100,
        "cache_stable": True,
        "side_effect_tools": ("send_email",),
    }
    return rb.AssemblyConfig(**{**base, **kw})


def replay(asm: rb.Assembler, turns: int) -> list[rb.AssemblyResult]:
    history = list(START)
    state = None
    out = []
    for t in range(turns):
        history += ring(t, "send_email" if t == 0 else "read_log")
        res = asm.assemble(list(history), state=state)
        state = res.state
        out.append(res)
    return out


def is_prefix(earlier: list[Any], later: list[Any]) -> bool:
    return orjson.dumps(later[: len(earlier)]) == orjson.dumps(earlier)


@pytest.mark.parametrize("summarize", [False, True])
def test_the_prefix_stays_byte_identical_until_a_compaction(summarize: bool) -> None:
    summarizer = rb.summarizers.extractive() if summarize else None
    cfg = config()
    results = replay(rb.Assembler(cfg, summarizer=summarizer), 60)
    states = [r.report.state for r in results]
    assert states[0] == "new" and "compacted" in states and "reused" in states
    for prev, res in itertools.pairwise(results):
        r = res.report
        assert r.tokens_after <= r.budget == cfg.budget
        assert rb.validate(res.messages) == []
        assert rb.count_tokens(res.messages) == r.tokens_after
        if r.state == "reused":
            assert is_prefix(prev.messages, res.messages)
            assert r.tokens_after <= cfg.compact_trigger_ratio * cfg.budget
        else:
            assert r.state == "compacted"
            assert r.tokens_after <= cfg.compact_target_ratio * cfg.budget
    # The ledger survives every compaction.
    last = results[-1].messages
    assert any("send_email" in str(m.get("content")) for m in last)
    if summarize:
        assert any(str(m.get("content")).startswith("[ringbound:summary]") for m in last)
    assert results[-1].state.compactions == states.count("compacted")


def test_a_later_compaction_summarizes_only_what_is_new() -> None:
    seen: list[rb.SummaryRequest] = []

    def summarizer(request: rb.SummaryRequest) -> str:
        seen.append(request)
        return f"summary {len(seen)}"

    results = replay(rb.Assembler(config(), summarizer=summarizer), 60)
    assert len(seen) >= 2
    assert seen[0].previous_summary is None
    assert seen[1].previous_summary == "summary 1"
    first_days = {line for line in seen[0].text.splitlines() if "read_log" in line}
    again = {line for line in seen[1].text.splitlines() if "read_log" in line}
    assert first_days and again and not first_days & again
    assert "summary 2" in str(results[-1].messages)


def test_states_round_trip_and_corrupt_ones_are_refused() -> None:
    state = replay(rb.Assembler(config()), 45)[-1].state
    assert state is not None and state.dropped
    assert rb.AssemblyState.from_bytes(state.to_bytes()) == state
    bad = orjson.loads(state.to_bytes())
    for broken in (
        b"not json",
        b"[]",
        orjson.dumps({**bad, "format": "other"}),
        orjson.dumps({**bad, "version": 99}),
        orjson.dumps({**bad, "dropped": ["x"]}),
        orjson.dumps({**bad, "dropped": [10**6]}),
        orjson.dumps({k: v for k, v in bad.items() if k != "prefix"}),
    ):
        with pytest.raises(rb.StaleStateError):
            rb.AssemblyState.from_bytes(broken)


def test_a_state_from_another_session_is_an_error() -> None:
    state = replay(rb.Assembler(config()), 5)[-1].state
    other = [{"role": "system", "content": "Another agent."}, *START[1:], *ring(0)]
    with pytest.raises(rb.StaleStateError, match="another session"):
        rb.Assembler(config()).assemble(other, state=state)
    with pytest.raises(rb.StaleStateError, match="another provider"):
        native, system = adapter("anthropic").from_canonical([*START, *ring(0)])
        rb.Assembler(config(), provider="anthropic").assemble(native, system=system, state=state)


def test_an_edited_history_is_planned_afresh_and_said() -> None:
    asm = rb.Assembler(config())
    results = replay(asm, 45)
    state = results[-1].state
    history = [*START]
    for t in range(45):
        history += ring(t)
    history[3] = {**history[3], "content": "edited"}  # a result the cut dropped
    res = asm.assemble(history, state=state)
    assert res.report.state.startswith("stale: ")
    assert res.report.tokens_after <= res.report.budget
    assert rb.validate(res.messages) == []


def test_another_budget_makes_the_state_stale() -> None:
    state = replay(rb.Assembler(config()), 45)[-1].state
    history = [*START]
    for t in range(46):
        history += ring(t)
    res = rb.Assembler(config(model_input_limit=7000)).assemble(history, state=state)
    assert res.report.state.startswith("stale: it was made for a budget")


@pytest.mark.parametrize("provider", ["anthropic", "openai_responses"])
def test_providers_keep_the_prefix_too(provider: str) -> None:
    asm = rb.Assembler(config(), provider=provider)
    history = list(START)
    state, prev = None, None
    reused = 0
    for t in range(50):
        history += ring(t)
        native, system = adapter(provider).from_canonical(history)
        res = asm.assemble(native, system=system, state=state)
        assert res.report.tokens_after <= res.report.budget
        assert rb.validate(res.messages, provider=provider, system=res.system) == []
        if res.report.state == "reused":
            reused += 1
            # ringbound's cache markers move to the newest message each turn; the cached
            # prefix is the content without them.
            assert is_prefix(unmarked(prev.messages), unmarked(res.messages))
            assert unmarked(res.system) == unmarked(prev.system)
        state, prev = res.state, res
    assert reused > 30


def test_bad_state_arguments_are_config_errors() -> None:
    with pytest.raises(rb.ConfigError):
        rb.Assembler(config()).assemble([*START], state={"dropped": []})  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError):
        config(compact_trigger_ratio=0.4, compact_target_ratio=0.5)
    with pytest.raises(rb.ConfigError):
        config(emergency_ratio=0)


@settings(max_examples=25, deadline=None)
@given(turns=st.integers(1, 70), trigger=st.sampled_from([0.6, 0.75, 0.9]))
def test_stateful_replay_matches_a_reassembly_from_the_same_state(
    turns: int, trigger: float
) -> None:
    """Deterministic: the same history and state give the same request."""
    cfg = config(compact_trigger_ratio=trigger, compact_target_ratio=0.5)
    results = replay(rb.Assembler(cfg), turns)
    if turns < 2:
        return
    history = [*START]
    for t in range(turns):
        history += ring(t, "send_email" if t == 0 else "read_log")
    again = rb.Assembler(cfg).assemble(history, state=results[-2].state)
    assert orjson.dumps(again.messages) == orjson.dumps(results[-1].messages)


def test_a_gateway_fills_only_the_emergency_share() -> None:
    history = [*START]
    for t in range(40):
        history += ring(t)
    cfg = config(cache_stable=False, emergency_ratio=0.85)
    res = rb.Assembler(cfg).assemble(history)
    assert res.report.budget == int(0.85 * cfg.budget)
    assert res.report.tokens_after <= res.report.budget and res.state is None


def test_a_compaction_leaves_room_for_the_worst_tool_return() -> None:
    history = [*START]
    for t in range(60):
        history += ring(t)
    tools = [{"type": "function", "function": {"name": "read_log", "parameters": {}}}]
    plain = rb.Assembler(config(cache_stable=False)).assemble(history, tools)
    ledger = rb.TokenLedger(budget=5400)
    ledger.observe_tool_result("read_log", 1500)
    roomy = rb.Assembler(config(cache_stable=False)).assemble(history, tools, token_ledger=ledger)
    r = roomy.report
    assert r.budget == plain.report.budget and r.tokens_after <= r.budget - 1500
    assert plain.report.tokens_after > r.budget - 1500
    stateful = rb.Assembler(config()).assemble(history, tools, token_ledger=ledger)
    assert stateful.report.state == "new" and stateful.report.tokens_after <= 5400 - 1500
    # Nothing to compact, nothing reserved: a request that fits is left as it is.
    short = [*START, *ring(0)]
    assert rb.Assembler(config()).assemble(short, token_ledger=ledger).messages == short
    with pytest.raises(rb.ConfigError):
        rb.Assembler(config()).assemble(history, token_ledger=object())  # type: ignore[arg-type]
