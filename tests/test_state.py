"""Cache-stable assembly: the cut is made again while it fits under the trigger, so the request's
prefix stays byte-identical; over it, a compaction goes down to the low-water mark. States
round-trip through bytes, and a state that does not describe the history is caught."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from canonical_writers import from_canonical
from hypothesis import given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound.cache_markers import unmarked


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
        native, system = from_canonical("anthropic", [*START, *ring(0)])
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
        native, system = from_canonical(provider, history)
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


# Cache lifetime ------------------------------------------------------------------------------


def timed(
    asm: rb.Assembler, turns: int, gaps: dict[int, float], start: float = 1_000.0
) -> list[rb.AssemblyResult]:
    """One ring per turn, 30 seconds apart unless ``gaps`` names another pause before a
    turn."""
    history, state, now, out = list(START), None, start, []
    for t in range(turns):
        history += ring(t, "send_email" if t == 0 else "read_log")
        now += gaps.get(t, 30.0)
        msgs, system = history, None
        if asm.provider != "openai_chat":
            msgs, system = from_canonical(asm.provider, history)
        res = asm.assemble(msgs, system=system, state=state, now=now)
        state = res.state
        out.append(res)
    return out


def test_the_state_records_when_it_was_assembled() -> None:
    asm = rb.Assembler(config())
    res = asm.assemble([*START, *ring(0)], now=1_234.5)
    assert res.state is not None and res.state.assembled_at == 1_234.5
    back = rb.AssemblyState.from_bytes(res.state.to_bytes())
    assert back.assembled_at == 1_234.5 and back.tokens == res.report.tokens_after
    # The wall clock when no time is given; a state written before it was recorded has none.
    import time

    before = time.time()
    wall = asm.assemble([*START, *ring(0)]).state
    assert wall is not None and wall.assembled_at is not None
    assert before <= wall.assembled_at <= time.time()
    old = orjson.loads(res.state.to_bytes())
    del old["assembled_at"], old["tokens"]
    assert rb.AssemblyState.from_bytes(orjson.dumps(old)).assembled_at is None


@pytest.mark.parametrize(
    "now", [True, "1000", float("nan"), float("inf"), -1, 2**80, 1e300, [1.0], object()]
)
def test_a_bad_now_is_a_config_error(now: Any) -> None:
    asm = rb.Assembler(config())
    msgs = [*START, *ring(0)]
    with pytest.raises(rb.ConfigError) as e:
        asm.assemble(msgs, now=now)
    assert e.value.key == "now"
    body = orjson.dumps({"model": "gpt-4o", "messages": msgs})
    with pytest.raises(rb.ConfigError):
        asm.assemble_body(body, now=now)
    import asyncio

    with pytest.raises(rb.ConfigError):
        asyncio.run(asm.assemble_async(msgs, now=now))


@pytest.mark.parametrize("value", ['"noon"', "-5", "1e300", "true"])
def test_a_corrupt_assembled_at_is_a_stale_state_error(value: str) -> None:
    state = rb.Assembler(config()).assemble([*START, *ring(0)], now=10.0).state
    assert state is not None
    blob = state.to_bytes().replace(b'"assembled_at":10.0', f'"assembled_at":{value}'.encode())
    with pytest.raises(rb.StaleStateError):
        rb.AssemblyState.from_bytes(blob)


def test_a_due_compaction_runs_once_the_cache_has_expired() -> None:
    """Anthropic: "The cache has a minimum 5-minute lifetime" and is "refreshed for no
    additional cost each time the cached content is used": a turn after more than five
    minutes writes the whole prefix again, so a compaction due anyway costs nothing extra
    then. The same turns without the key, or within the lifetime, reuse the cut."""
    cfg = config(compact_on_cache_expiry=True, model_input_limit=3_000)
    asm = rb.Assembler(cfg, provider="anthropic")
    target = int(cfg.compact_target_ratio * cfg.budget)
    runs = timed(asm, 14, {})
    plain = [r.report.state for r in runs]
    # A reused turn above the low-water mark: a compaction is due there anyway, later.
    k = next(
        t for t in range(1, 14) if plain[t] == "reused" and runs[t].report.tokens_after > target
    )
    expired = timed(asm, 14, {k: 301.0})
    assert [r.report.state for r in expired[:k]] == plain[:k]
    assert expired[k].report.state == "compacted" and expired[k].report.tokens_after <= target
    assert expired[k].state is not None and expired[k].state.compactions == (
        runs[k].state.compactions + 1
    )
    # Within the lifetime, or without the key, the cut is reused as before.
    assert timed(asm, 14, {k: 299.0})[k].report.state == plain[k] == "reused"
    off = rb.Assembler(config(model_input_limit=3_000), provider="anthropic")
    assert timed(off, 14, {k: 301.0})[k].report.state == "reused"


def test_a_request_below_the_low_water_mark_is_not_compacted_early() -> None:
    asm = rb.Assembler(config(compact_on_cache_expiry=True), provider="anthropic")
    # Every turn an hour apart: the cache is always expired, but the first turns are small.
    runs = timed(asm, 3, {t: 3_600.0 for t in range(3)})
    assert [r.report.state for r in runs] == ["new", "reused", "reused"]


def test_each_provider_has_its_lifetime() -> None:
    """OpenAI's in-memory retention keeps a prefix "5 to 10 minutes of inactivity", explicit
    caching's ``ttl`` "defaults to 30m": six minutes are no expiry there; the config's
    ``cache_lifetime_seconds`` overrides the provider's."""
    from ringbound.cache_lifetime import lifetime

    assert lifetime("anthropic", config()) == 300
    assert lifetime("openai_chat", config()) == 600
    assert lifetime("openai_responses", config(prompt_cache_mode="explicit")) == 1800
    assert lifetime("gemini", config()) is None
    assert lifetime("anthropic", config(cache_lifetime_seconds=3600)) == 3600
    with pytest.raises(rb.ConfigError):
        config(cache_lifetime_seconds=0)
    with pytest.raises(rb.ConfigError):
        config(compact_on_cache_expiry="yes")


def test_an_early_compaction_that_frees_little_room_is_not_made() -> None:
    """Above the low-water mark but with the protected part most of the request, a
    compaction would free almost nothing: the expired cut is reused (no summary spent)."""
    from ringbound.cli.simulate import agent_session, turn_ends

    session = agent_session(40)
    cfg = rb.AssemblyConfig(
        model_input_limit=8_000,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        cache_stable=True,
        compact_on_cache_expiry=True,
    )
    asm = rb.Assembler(cfg)
    ends, _ = turn_ends(session)
    state = asm.assemble(session[: ends[0]], now=1_000.0).state
    state = asm.assemble(session[: ends[1]], state=state, now=1_030.0).state
    late = asm.assemble(session[: ends[2]], state=state, now=2_000.0)
    assert late.report.tokens_after > cfg.compact_target_ratio * cfg.budget
    assert late.report.state == "reused" and late.state is not None
    assert late.state.compactions == state.compactions == 0


def test_every_entry_point_takes_now() -> None:
    import asyncio

    asm = rb.Assembler(config())
    msgs = [*START, *ring(0)]
    got = asyncio.run(asm.assemble_async(msgs, now=5.0)).state
    assert got is not None and got.assembled_at == 5.0
    body = orjson.dumps({"model": "gpt-4o", "messages": msgs})
    out = asm.assemble_body(body, now=6.0).state
    assert out is not None and out.assembled_at == 6.0
    out = asyncio.run(asm.assemble_body_async(body, state=out, now=7.5)).state
    assert out is not None and out.assembled_at == 7.5
