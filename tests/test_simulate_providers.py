"""``ringbound simulate --provider``: replays under Anthropic's, Bedrock's and OpenAI's caching
rules, and the issue's bar for the marked providers: a 300-turn cache-stable replay reads at
least 0.85 of each request from the cache after the first compaction, at a mean utilization of
at least 0.5."""

from __future__ import annotations

import io
import itertools
from importlib import resources
from typing import Any

import orjson
import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound.cli.cache_rules import WRITE_FACTOR, PromptCache
from ringbound.cli.session import Session
from ringbound.cli.simulate import (
    SIDE_EFFECT_TOOLS,
    STATEFUL,
    STATELESS,
    Simulation,
    agent_session,
    cli_main,
    simulate,
)

BUNDLED = resources.files("ringbound") / "data" / "tau_bench_airline_session.json"
EPHEMERAL = {"type": "ephemeral"}
RULES = {"anthropic": "anthropic", "bedrock_converse": "bedrock_converse"}


def config(budget: int, **extra: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **extra
    )


def count(messages: list[Any], tools: Any, system: Any) -> int:
    return rb.count_tokens(messages, "anthropic", tools=tools, system=system)


def text(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


# The rules -------------------------------------------------------------------------------------


def test_a_marked_prefix_is_read_only_when_identical_up_to_the_marker() -> None:
    cache = PromptCache("anthropic", "anthropic", count)
    goal = {"role": "user", "content": [{"type": "text", "text": text(1500)}]}
    marked = {
        "role": "user",
        "content": [{"type": "text", "text": text(1500), "cache_control": EPHEMERAL}],
    }
    answer = {"role": "assistant", "content": "ok"}
    first = [marked]
    read, written = cache.serve(first, None, None, 0)
    assert read == 0 and written == count(first, None, None) >= 1024
    # The same content, marked only further on: that longer prefix was never written.
    later = [
        goal,
        answer,
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": EPHEMERAL}]},
    ]
    read, written = cache.serve(later, None, None, 0)
    assert read == 0 and written == count(later, None, None)
    # Marked at both places: the longest written prefix ending at a marker is read.
    again = [marked, answer, later[2]]
    read, written = cache.serve(again, None, None, 0)
    assert read == count(again, None, None) and written == 0
    # One changed block before the marker: nothing read.
    edited = {
        "role": "user",
        "content": [{"type": "text", "text": text(1499), "cache_control": EPHEMERAL}],
    }
    assert cache.serve([edited], None, None, 0)[0] == 0


def test_short_prefixes_are_not_cached_and_openai_caches_from_1024() -> None:
    cache = PromptCache("anthropic", "anthropic", count)
    short = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    assert cache.serve(short, None, None, 0) == (0, 0)
    assert cache.serve(short, None, None, 0) == (0, 0)
    openai = PromptCache("openai", "openai_chat", count)
    assert openai.serve([], None, None, 1000) == (0, 0)
    assert openai.serve([], None, None, 1024) == (1024, 0)
    assert openai.serve([], None, None, 1300) == (1280, 0)
    assert openai.write_factor == 1.0 and cache.write_factor == WRITE_FACTOR


def test_writes_and_reads_are_priced() -> None:
    messages, system = from_canonical("anthropic", agent_session(30))
    session = Session(messages, None, bare=False, system=system)
    sim = simulate(session, config(8000), provider="anthropic", cache="anthropic", langchain=False)
    assert sim.write_factor == WRITE_FACTOR
    for way in (sim.way(STATEFUL), sim.way(STATELESS)):
        expected = sum(
            t.tokens
            - t.cached_tokens
            - t.written_tokens
            + 0.1 * t.cached_tokens
            + WRITE_FACTOR * t.written_tokens
            for t in way.turns
        )
        assert way.cost(0.1, WRITE_FACTOR) == pytest.approx(expected)
        assert any(t.written_tokens for t in way.turns)
    with pytest.raises(rb.ConfigError):
        simulate(session, config(8000), provider="anthropic", cache="bedrock_converse")


# The bar ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["anthropic", "bedrock_converse"])
def long_replay(request: pytest.FixtureRequest) -> Simulation:
    provider = request.param
    messages, system = from_canonical(provider, agent_session(turns=300))
    cfg = config(30_000, side_effect_tools=SIDE_EFFECT_TOOLS)
    return simulate(
        Session(messages, None, bare=False, system=system),
        cfg,
        provider=provider,
        cache=RULES[provider],
        name="agent_session(300)",
    )


def test_300_turn_replay_meets_the_bar_under_marked_caching(long_replay: Simulation) -> None:
    sim = long_replay
    assert sim.turns == 300
    stateful, stateless = sim.way(STATEFUL), sim.way(STATELESS)
    for way in (stateful, stateless):
        assert way.error is None and way.broken == 0 and way.reuse_breaks == 0
    assert stateful.compactions >= 5
    cached = stateful.cached_after_first_compaction
    assert cached is not None and cached >= 0.85
    assert stateful.utilization(sim.budget) >= 0.5
    assert stateful.utilization(sim.budget, after_first_compaction=True) >= 0.5
    assert stateless.cached_after_first_compaction is not None
    assert stateless.cached_after_first_compaction < cached
    w = sim.write_factor
    assert stateful.cost(sim.price_factor, w) < 0.5 * stateless.cost(sim.price_factor, w)
    # Every reused turn reads at least the whole previous request from the cache.
    for prev, t in zip(stateful.turns, stateful.turns[1:], strict=False):
        if t.state == "reused":
            assert t.cached_tokens >= prev.tokens - 64, (prev, t)


def test_without_the_stable_cut_marker_the_cache_misses() -> None:
    """Only the caller's markers (the replay then marks the system and the last message, as a
    caller would): a reused turn's prefix ends where no marker of this request is, so under
    the strict rules it is not read. The stable-cut marker is what makes the hits."""
    messages, system = from_canonical("anthropic", agent_session(60))
    session = Session(messages, None, bare=False, system=system)
    fractions = {}
    for mode in ("auto", "caller_only"):
        cfg = config(30_000, cache_markers=mode)
        sim = simulate(session, cfg, provider="anthropic", cache="anthropic", langchain=False)
        fractions[mode] = sim.way(STATEFUL).cached_after_first_compaction
    assert fractions["auto"] is not None and fractions["auto"] >= 0.85
    assert fractions["caller_only"] is not None and fractions["caller_only"] < 0.1


# The command -----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["anthropic", "bedrock_converse", "openai_chat"])
def test_the_command_replays_under_the_providers_rules(provider: str) -> None:
    out = io.StringIO()
    assert cli_main(str(BUNDLED), provider=provider, out=out) == 0
    text_ = out.getvalue()
    rules = "openai" if provider == "openai_chat" else provider
    assert f"{provider}, 27 turns" in text_ and f"under {rules}'s caching rules" in text_


@pytest.mark.parametrize("provider", ["anthropic", "bedrock_converse", "openai_responses"])
def test_a_chat_session_ending_in_an_open_call_converts_and_replays(
    provider: str, tmp_path: Any
) -> None:
    """A log cut off while a call ran: the writer takes pairing-valid sessions only, so the
    open call is left out of the conversion, and the replay says so as it does for a session
    already in the provider's format."""
    session = agent_session(turns=8)
    last_call = max(k for k, m in enumerate(session) if m.get("tool_calls"))
    path = tmp_path / "cut.json"
    path.write_bytes(orjson.dumps(session[: last_call + 1]))
    out = io.StringIO()
    assert cli_main(str(path), provider=provider, budget=3000, json_out=True, out=out) == 0
    body = orjson.loads(out.getvalue())
    assert body["unreplayed_messages"] == 1
    assert body["provider"] == provider


def test_the_command_refuses_a_conversion_it_cannot_make() -> None:
    with pytest.raises(rb.ConfigError) as e:
        cli_main(str(BUNDLED), provider="gemini", out=io.StringIO())
    assert e.value.key == "provider"


# Cache lifetime --------------------------------------------------------------------------------


def test_an_entry_lives_its_lifetime_from_its_last_use() -> None:
    """Anthropic: the cache "has a minimum 5-minute lifetime" and "is refreshed for no
    additional cost each time the cached content is used"; OpenAI's prefix is served only when
    the previous request came within its lifetime."""
    marked = [
        {
            "role": "user",
            "content": [{"type": "text", "text": text(1500), "cache_control": EPHEMERAL}],
        }
    ]
    tokens = count(marked, None, None)
    cache = PromptCache("anthropic", "anthropic", count, lifetime=300)
    assert cache.serve(marked, None, None, 0, now=0) == (0, tokens)
    # Each read within five minutes of the last use refreshes it: 20 minutes of hits.
    for now in (250, 500, 750, 1000, 1250):
        assert cache.serve(marked, None, None, 0, now=now) == (tokens, 0)
    # Five minutes without a use: gone, written again.
    assert cache.serve(marked, None, None, 0, now=1550) == (0, tokens)
    openai = PromptCache("openai", "openai_chat", count, lifetime=600)
    assert openai.serve([], None, None, 2048, now=0) == (2048, 0)
    assert openai.serve([], None, None, 2048, now=599) == (2048, 0)
    assert openai.serve([], None, None, 2048, now=1200) == (0, 0)


def test_the_models_minimum_prefix_applies() -> None:
    marked = [
        {
            "role": "user",
            "content": [{"type": "text", "text": text(500), "cache_control": EPHEMERAL}],
        }
    ]
    tokens = count(marked, None, None)
    assert 1024 < tokens < 4096
    haiku = PromptCache("anthropic", "anthropic", count, min_tokens=4096)
    assert haiku.serve(marked, None, None, 0) == (0, 0)
    assert haiku.serve(marked, None, None, 0) == (0, 0)
    sonnet = PromptCache("anthropic", "anthropic", count, min_tokens=1024)
    assert sonnet.serve(marked, None, None, 0) == (0, tokens)


def test_think_times_are_seeded_and_deterministic() -> None:
    from ringbound.cli.simulate import think_times

    times = think_times(50, 90.0, seed=3)
    assert times == think_times(50, 90.0, seed=3) != think_times(50, 90.0, seed=4)
    assert times[0] == 0 and all(b > a for a, b in itertools.pairwise(times))
    assert 40 < times[-1] / 49 < 200  # about the mean apart


def test_a_timed_replay_expires_the_cache_and_compacts_when_it_has() -> None:
    """A replay with think times: no way reads the cache after a pause longer than the
    lifetime; the timed way compacts on such a turn where the stateful way reused its cut,
    and costs less than it."""
    from ringbound.cli.simulate import TIMED

    msgs, system = from_canonical("anthropic", agent_session(80))
    session = Session(msgs, None, True, system=system)
    sim = simulate(
        session, config(6_000), provider="anthropic", cache="anthropic", think_time=240, seed=2
    )
    assert sim.lifetime == 300 and "cache lifetime 300 s" in sim.table()
    stateful, timed = sim.way(STATEFUL), sim.way(TIMED)
    for way in (stateful, timed, sim.way(STATELESS)):
        for prev, t in itertools.pairwise(way.turns):
            assert t.at is not None and prev.at is not None
            if t.at - prev.at >= 300:
                assert t.cached_tokens == 0
    early = [
        n
        for n, (s, t) in enumerate(zip(stateful.turns, timed.turns, strict=True))
        if s.state == "reused" and t.state == "compacted"
    ]
    assert early
    assert timed.cost(sim.price_factor, sim.write_factor) < stateful.cost(
        sim.price_factor, sim.write_factor
    )
    with pytest.raises(rb.ConfigError):
        simulate(session, config(6_000), provider="anthropic", think_time=0)


def test_the_command_takes_a_think_time() -> None:
    out = io.StringIO()
    path = str(BUNDLED)
    assert cli_main(path, provider="anthropic", think_time=60.0, seed=1, out=out) == 0
    assert "ringbound timed" in out.getvalue() and "seed 1" in out.getvalue()


def test_gpt_5_6_caches_at_breakpoints_and_prices_writes() -> None:
    """OpenAI, GPT-5.6 and later: "Exact matching at eligible cache breakpoints", "Cache write
    charges: 1.25x the uncached input token rate"; "implicit is the default. OpenAI places a
    cache breakpoint on the latest message and also uses any explicit breakpoints"."""

    def chat_count(messages: list[Any], tools: Any, system: Any) -> int:
        return rb.count_tokens(messages, tools=tools)

    stable = {
        "role": "user",
        "content": [
            {"type": "text", "text": text(700), "prompt_cache_breakpoint": {"mode": "explicit"}}
        ],
    }
    tail = {"role": "user", "content": "and now?"}
    explicit = PromptCache("openai_explicit", "openai_chat", chat_count, mode="explicit")
    assert explicit.write_factor == WRITE_FACTOR
    first = explicit.serve([stable, tail], None, None, 0)
    assert first == (0, chat_count([stable], None, None))
    assert (
        explicit.serve([stable, {"role": "user", "content": "else"}], None, None, 0)[0] == first[1]
    )
    # Implicit mode also writes at the latest message: the next request reads all of this one.
    implicit = PromptCache("openai_explicit", "openai_chat", chat_count, mode="implicit")
    request = [stable, tail]
    implicit.serve(request, None, None, 0)
    longer = [*request, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    assert implicit.serve(longer, None, None, 0)[0] == chat_count(request, None, None)
    assert explicit.serve(longer, None, None, 0)[0] == first[1]
    cfg = rb.AssemblyConfig(prompt_cache_mode="explicit")
    from ringbound.cli.cache_rules import rules_for

    assert rules_for("openai_chat", cfg) == "openai_explicit"
    assert rules_for("openai_chat") == "openai" and rules_for("anthropic", cfg) == "anthropic"


# Converting a chat session ----------------------------------------------------------------------

CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "status"}},
]


@pytest.mark.parametrize("provider", ["anthropic", "bedrock_converse", "openai_responses"])
def test_a_converted_session_carries_the_tools_the_core_writes(provider: str) -> None:
    """The tools of a chat session replayed as another provider are the core's translation of
    them (one writer of tools, ``rb.translate``), and the provider counts them as valid."""
    from ringbound.cli.simulate import _as_provider

    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    given = orjson.loads(orjson.dumps(CHAT_TOOLS))
    converted, cut = _as_provider(Session(chat, given, bare=False), provider)
    assert cut == 0 and given == CHAT_TOOLS
    written = rb.translate(chat, source="openai_chat", target=provider, tools=CHAT_TOOLS)
    assert converted.tools == written.tools
    assert converted.messages == written.messages
    assert rb.count_tokens(
        converted.messages, provider, tools=converted.tools, system=converted.system
    ) > rb.count_tokens(converted.messages, provider, system=converted.system)
    if provider == "bedrock_converse":
        # Bedrock refuses an empty description: a tool without one has no `description`.
        assert [t["toolSpec"].get("description") for t in converted.tools] == ["Read a file", None]
