"""``ringbound simulate``: the turn-by-turn replay that compares cache-stable assembly with
stateless assembly and LangChain's ``trim_messages``, on a generated 300-turn session (the
issue's bar) and on real sessions (sane numbers, every request within budget and valid)."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import orjson
import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound.cli.session import Session, load_session
from ringbound.cli.simulate import (
    SIDE_EFFECT_TOOLS,
    STATEFUL,
    STATELESS,
    TRIM,
    Simulation,
    agent_session,
    cli_main,
    simulate,
    turn_ends,
)

BUNDLED = resources.files("ringbound") / "data" / "tau_bench_airline_session.json"
#: The swe-gym session with the most rings (28 turns); it ends with an unanswered call.
SWE_GYM = "Project-MONAI__MONAI-3715_4"


def call(i: int, name: str = "read_file") -> dict[str, object]:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}


def config(budget: int, **extra: object) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **extra
    )


def check_sane(sim: Simulation) -> None:
    """Fractions in [0, 1], every request within budget and valid, no way stopped, and no
    ``reused`` turn that changed the prefix."""
    for way in sim.ways:
        if way.skipped is not None:
            continue
        assert way.error is None, way.error
        assert len(way.turns) == sim.turns
        for t in way.turns:
            assert 0 <= t.cached_fraction <= 1
            assert 0 <= t.cached_tokens <= t.tokens <= sim.budget, (way.name, t)
            assert t.valid, (way.name, t)
        assert way.broken == 0 and way.reuse_breaks == 0
    for row in sim.summary():
        for key in ("cached_after_first_compaction", "utilization"):
            assert row[key] is None or 0 <= row[key] <= 1


# Turns ----------------------------------------------------------------------------------------


def test_a_turn_ends_after_each_complete_ring_plain_messages_going_with_the_next() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call(1), call(2)]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
        {"role": "assistant", "content": "so"},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": None, "tool_calls": [call(3)]},
        {"role": "tool", "tool_call_id": "c3", "content": "c"},
        {"role": "assistant", "content": "done"},
    ]
    assert turn_ends(messages) == ([5, 9, 10], 0)
    assert turn_ends(messages[:9]) == ([5, 9], 0)


def test_a_trailing_call_without_results_is_not_replayed() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call(1)]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [call(2), call(3)]},
        {"role": "tool", "tool_call_id": "c2", "content": "b"},
    ]
    assert turn_ends(messages) == ([3], 2)


@pytest.mark.parametrize(
    "provider", ["anthropic", "gemini", "bedrock_converse", "openai_responses"]
)
def test_other_providers_replay_the_same_turns(provider: str) -> None:
    messages = agent_session(turns=30)
    native, system = from_canonical(provider, messages)
    ends, unreplayed = turn_ends(native, provider, system=system)
    assert len(ends) == len(turn_ends(messages)[0]) == 30
    assert unreplayed == 0 and ends[-1] == len(native)
    total = rb.count_tokens(native, provider, system=system)
    sim = simulate(
        Session(native, None, bare=False, system=system), config(total // 3), provider=provider
    )
    check_sane(sim)
    assert sim.way(STATEFUL).compactions > 0
    assert "OpenAI Chat" in (sim.way(TRIM).skipped or "")


# Measuring ------------------------------------------------------------------------------------


def test_an_appended_turn_is_cached_up_to_the_previous_request() -> None:
    messages = agent_session(turns=4)
    ends, _ = turn_ends(messages)
    sim = simulate(Session(messages, None, bare=True), config(100_000), langchain=False)
    for way in (sim.way(STATEFUL), sim.way(STATELESS)):
        first, *rest = way.turns
        assert first.cached_tokens == 0 and not first.compacted
        for t, end in zip(rest, ends, strict=False):
            # Nothing is cut: the previous request is the history up to the previous turn.
            assert t.kept_previous and not t.compacted
            assert t.cached_tokens == rb.count_tokens(messages[:end])
            assert t.tokens == rb.count_tokens(messages[: t.history])
        assert way.first_compaction is None and way.cached_after_first_compaction is None
    assert sim.way(STATEFUL).turns[0].state == "new"
    assert {t.state for t in sim.way(STATEFUL).turns[1:]} == {"reused"}


def test_effective_cost_prices_cached_tokens_at_the_factor() -> None:
    messages = agent_session(turns=20)
    session = Session(messages, None, bare=True)
    cheap = simulate(session, config(8000), price_factor=0.0, langchain=False)
    full = simulate(session, config(8000), price_factor=1.0, langchain=False)
    for name in (STATEFUL, STATELESS):
        turns = full.way(name).turns
        assert full.way(name).cost(1.0) == sum(t.tokens for t in turns)
        assert cheap.way(name).cost(0.0) == sum(t.tokens - t.cached_tokens for t in turns)
    with pytest.raises(rb.ConfigError):
        simulate(session, config(8000), price_factor=1.5)


# The bar --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_replay() -> Simulation:
    """The generated 300-turn session (about 190k tokens) at a 30k budget: the stateful way
    compacts about every 15 turns."""
    messages = agent_session(turns=300)
    cfg = config(30_000, side_effect_tools=SIDE_EFFECT_TOOLS)
    return simulate(Session(messages, None, bare=True), cfg, name="agent_session(300)")


def test_300_turn_replay_meets_the_bar(long_replay: Simulation) -> None:
    sim = long_replay
    assert sim.turns == 300
    check_sane(sim)
    stateful, stateless = sim.way(STATEFUL), sim.way(STATELESS)
    assert stateful.compactions >= 5
    cached = stateful.cached_after_first_compaction
    assert cached is not None and cached >= 0.85
    assert stateful.utilization(sim.budget) >= 0.5
    assert stateful.utilization(sim.budget, after_first_compaction=True) >= 0.5
    assert stateless.cached_after_first_compaction is not None
    assert stateless.cached_after_first_compaction < cached
    assert stateful.cost(sim.price_factor) < stateless.cost(sim.price_factor)
    # Between compactions the stateful request only grows.
    states = [t.state for t in stateful.turns]
    assert states.count("reused") + stateful.compactions + 1 == sim.turns
    assert all(t.kept_previous for t in stateful.turns if t.state == "reused")


def test_300_turn_replay_shows_trim_messages_beside_it(long_replay: Simulation) -> None:
    pytest.importorskip("langchain_core")
    trim = long_replay.way(TRIM)
    assert trim.skipped is None and len(trim.turns) == 300
    assert trim.cached_after_first_compaction is not None
    rows = {r["way"]: r for r in long_replay.summary()}
    assert set(rows) == {STATEFUL, STATELESS, TRIM}
    assert rows[STATELESS]["cost_vs_stateless"] == 1.0
    table = long_replay.table()
    for name in (STATEFUL, STATELESS, TRIM):
        assert name in table


def test_the_summarizer_runs_once_per_compaction_when_stateful() -> None:
    messages = agent_session(turns=60)
    cfg = config(10_000, side_effect_tools=SIDE_EFFECT_TOOLS)
    sim = simulate(
        Session(messages, None, bare=True),
        cfg,
        summarizer=rb.summarizers.extractive(),
        langchain=False,
    )
    check_sane(sim)
    stateful, stateless = sim.way(STATEFUL), sim.way(STATELESS)
    assert 0 < stateful.summarizer_calls <= stateful.compactions
    assert stateless.summarizer_calls > stateful.summarizer_calls


# Real sessions --------------------------------------------------------------------------------


def swe_gym_session(corpus: Path, tmp_path: Path) -> Path:
    """The swe-gym session as a session file: its messages and tools as recorded."""
    (s,) = [
        s
        for s in json.loads((corpus / "swe-gym" / "sample_raw.json").read_bytes())
        if s["instance_id"] == SWE_GYM
    ]
    path = tmp_path / f"{SWE_GYM}.json"
    path.write_bytes(orjson.dumps({"messages": s["messages"], "tools": s["tools"]}))
    return path


def test_bundled_tau_bench_session(capsys: pytest.CaptureFixture[str]) -> None:
    with resources.as_file(BUNDLED) as path:
        assert cli_main(path, json_out=True, per_turn=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["turns"] == 27 and out["unreplayed_messages"] == 0
    assert out["budget"] == out["session_tokens"] // 2
    check_json(out)


def test_swe_gym_session(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = swe_gym_session(corpus, tmp_path)
    assert cli_main(path, json_out=True, per_turn=True, summarize=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["turns"] == 28 and out["unreplayed_messages"] == 1
    check_json(out)


def check_json(out: dict[str, object]) -> None:
    budget = out["budget"]
    assert isinstance(budget, int)
    rows = out["ways"]
    assert isinstance(rows, list)
    for row in rows:
        assert row["error"] is None and row["broken"] == 0 and row["reuse_breaks"] == 0
        assert 0 <= row["cached_after_first_compaction"] <= 1
        assert 0 < row["utilization"] <= 1
    per_turn = out["per_turn"]
    assert isinstance(per_turn, dict)
    for turns in per_turn.values():
        for t in turns:
            assert 0 <= t["cached_tokens"] <= t["tokens"] <= budget and t["valid"]
    assert per_turn[STATEFUL][-1]["state"] in ("reused", "compacted")


def test_real_sessions_assembled_requests_recount_and_validate(
    corpus: Path, tmp_path: Path
) -> None:
    """The meter's numbers are the requests' own: each stateful request of the swe-gym replay,
    assembled again the same way, is valid and counts what the replay says."""
    session = load_session(swe_gym_session(corpus, tmp_path))
    ends, _ = turn_ends(session.messages)
    budget = 10_000
    sim = simulate(session, config(budget), langchain=False)
    check_sane(sim)
    asm = rb.Assembler(config(budget, cache_stable=True))
    state = None
    for end, t in zip(ends, sim.way(STATEFUL).turns, strict=True):
        res = asm.assemble(session.messages[:end], session.tools, state=state)
        state = res.state
        assert not rb.validate(res.messages)
        assert rb.count_tokens(res.messages, tools=res.tools) == res.report.tokens_after
        assert res.report.tokens_after == t.tokens and res.report.state == t.state


# The command ----------------------------------------------------------------------------------


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    path = tmp_path / "session.json"
    path.write_bytes(orjson.dumps(agent_session(turns=40)))
    return path


def test_cli_prints_the_table_and_the_turns(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(session_file, budget=8000, per_turn=True, price_factor=0.25) == 0
    out = capsys.readouterr().out
    assert "budget 8,000, cached tokens at 0.25x" in out
    assert out.count("\n") > 40
    for name in (STATEFUL, STATELESS):
        assert name in out


def test_cli_limit_applies_the_reserve_and_margin(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(session_file, limit=20_000, json_out=True) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["budget"] == rb.AssemblyConfig(model_input_limit=20_000).budget
    assert "per_turn" not in out


def test_cli_refuses_budget_and_limit_together(session_file: Path) -> None:
    with pytest.raises(rb.ConfigError):
        cli_main(session_file, budget=8000, limit=20_000)


def test_cli_reports_a_way_stopped_by_an_error(
    session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The system prompt and the last rings alone are over 1,000 tokens.
    assert cli_main(session_file, budget=1000) == 2
    out = capsys.readouterr().out
    assert "stopped at turn 1: BudgetExceededError" in out


def test_without_langchain_the_trim_row_is_skipped(
    session_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.messages", None)
    assert cli_main(session_file, budget=8000) == 0
    assert "trim_messages: skipped (langchain-core is not installed)" in capsys.readouterr().out
