"""Cache-stable assembly places each provider's prompt-cache markers: Anthropic
``cache_control``, Bedrock ``cachePoint`` (within four per request, the caller's kept), and
OpenAI's ``prompt_cache_key`` as ``res.cache_key``."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
from typing import Any

import botocore.session
import botocore.validate
import httpx2
import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound.cache_markers import CacheMarker, unmarked
from ringbound.cli.simulate import agent_session, turn_ends

EPHEMERAL = {"type": "ephemeral"}


def config(**kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        **{
            "model_input_limit": 8_000,
            "output_reserve_tokens": 0,
            "safety_margin_tokens": 0,
            "cache_stable": True,
            # Placement is what these tests look at: the minimum prefix has its own tests.
            "min_cache_tokens": 0,
            **kw,
        }
    )


def native(provider: str, turns: int = 40) -> tuple[list[Any], Any]:
    if provider == "openai_chat":
        return agent_session(turns), None
    return from_canonical(provider, agent_session(turns))


def replay(provider: str, cfg: rb.AssemblyConfig, turns: int = 12) -> list[rb.AssemblyResult]:
    msgs, system = native(provider)
    asm = rb.Assembler(cfg, provider=provider)
    ends, _ = turn_ends(msgs, provider, system=system)
    state, out = None, []
    for end in ends[:turns]:
        res = asm.assemble(msgs[:end], system=system, state=state)
        state = res.state
        out.append(res)
    return out


def markers(provider: str, res: rb.AssemblyResult) -> int:
    blocks = list(res.system) if isinstance(res.system, list) else []
    for m in res.messages:
        if isinstance(m.get("content"), list):
            blocks += m["content"]
    if provider == "bedrock_converse":
        return sum("cachePoint" in b for b in blocks)
    return sum(b.get("cache_control") is not None for b in blocks)


@pytest.mark.parametrize("provider", ["anthropic", "bedrock_converse"])
def test_markers_go_on_the_system_the_stable_cut_and_the_last_message(provider: str) -> None:
    results = replay(provider, config())
    kinds = set()
    for prev, res in itertools.pairwise(results):
        placed = res.report.cache_markers
        assert all(isinstance(m, CacheMarker) for m in placed)
        assert markers(provider, res) == len(placed) <= 4
        last = [m for m in placed if m.why == "last"]
        assert last == [CacheMarker("message", len(res.messages) - 1, "last")]
        assert any(m.where == "system" and m.why == "prefix" for m in placed)
        if res.report.state == "reused":
            # The previous request ended where this one's stable cut is marked.
            assert CacheMarker("message", len(prev.messages) - 1, "stable_cut") in placed
            assert res.state is not None and res.state.sent == len(res.messages)
            assert unmarked(res.messages[: len(prev.messages)]) == unmarked(prev.messages)
        kinds |= {m.why for m in placed}
        assert rb.validate(res.messages, provider=provider, system=res.system) == []
    assert kinds == {"prefix", "stable_cut", "last"}


@pytest.mark.parametrize("provider", ["anthropic", "bedrock_converse"])
def test_markers_cost_nothing_and_copy_only_what_they_mark(provider: str) -> None:
    msgs, system = native(provider)
    before = copy.deepcopy((msgs, system))
    marked = rb.Assembler(config(), provider=provider).assemble(msgs, system=system)
    plain = rb.Assembler(config(cache_markers="caller_only"), provider=provider).assemble(
        msgs, system=system
    )
    assert (msgs, system) == before
    assert marked.report.tokens_after == plain.report.tokens_after
    assert rb.count_tokens(marked.messages, provider, system=marked.system) == rb.count_tokens(
        plain.messages, provider, system=plain.system
    )
    assert markers(provider, plain) == 0 and plain.report.cache_markers == []
    at = {m.index for m in marked.report.cache_markers if m.where == "message"}
    for i, (a, b) in enumerate(zip(marked.messages, plain.messages, strict=True)):
        assert (a is b) == (i not in at)
    assert unmarked(marked.messages) == unmarked(plain.messages)


def test_the_callers_markers_are_kept_and_count_against_four() -> None:
    msgs, system = native("anthropic")
    system = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    msgs = list(msgs)
    first = msgs[0]["content"]
    msgs[0] = {**msgs[0], "content": [*first[:-1], {**first[-1], "cache_control": EPHEMERAL}]}
    res = rb.Assembler(config(), provider="anthropic").assemble(msgs, system=system)
    # Two of the caller's: room for two of ringbound's, the newest first (the system is taken).
    assert res.system[0]["cache_control"] == EPHEMERAL
    assert res.messages[0] is msgs[0]
    assert [m.why for m in res.report.cache_markers] == ["last"]
    assert markers("anthropic", res) == 3
    tools = [
        {"name": f"t{k}", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}
        for k in range(2)
    ]
    res = rb.Assembler(config(), provider="anthropic").assemble(
        native("anthropic")[0], tools, system=system
    )
    # One in the system, two on tools: one left, for the newest message.
    assert [m.why for m in res.report.cache_markers] == ["last"]


def test_thinking_blocks_are_not_marked() -> None:
    msgs = [
        {"role": "user", "content": "Plan the release."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Here is the plan."},
                {"type": "thinking", "thinking": "steps", "signature": "sig"},
            ],
        },
    ]
    res = rb.Assembler(config(), provider="anthropic").assemble(msgs, system="Be brief.")
    blocks = res.messages[-1]["content"]
    assert blocks[0]["cache_control"] == EPHEMERAL and "cache_control" not in blocks[1]
    assert res.system == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert "cache_control" not in msgs[1]["content"][0]


def test_off_and_caller_only_place_nothing() -> None:
    for mode in ("off", "caller_only"):
        res = replay("anthropic", config(cache_markers=mode), turns=3)[-1]
        assert res.report.cache_markers == [] and markers("anthropic", res) == 0
        assert replay("openai_chat", config(cache_markers=mode), turns=2)[-1].cache_key is None
    with pytest.raises(rb.ConfigError) as e:
        config(cache_markers="always")
    assert e.value.key == "cache_markers"


def test_without_cache_stable_nothing_changes() -> None:
    msgs, system = native("anthropic")
    res = rb.Assembler(config(cache_stable=False), provider="anthropic").assemble(
        msgs, system=system
    )
    assert res.report.cache_markers == [] and res.system is system and res.cache_key is None


def test_openai_gets_one_cache_key_per_conversation() -> None:
    keys = {r.cache_key for r in replay("openai_chat", config(), turns=8)}
    assert len(keys) == 1 and next(iter(keys)).startswith("ringbound-")
    other = agent_session(10, seed=2)
    res = rb.Assembler(config()).assemble(other)
    assert res.cache_key not in keys and res.report.cache_markers == []
    assert replay("openai_responses", config(), turns=2)[-1].cache_key is not None


def test_the_state_remembers_how_many_messages_it_sent() -> None:
    state = replay("anthropic", config(), turns=4)[-1].state
    assert state is not None and state.sent > 0
    assert rb.AssemblyState.from_bytes(state.to_bytes()) == state
    with pytest.raises(rb.StaleStateError):
        rb.AssemblyState.from_bytes(state.to_bytes().replace(b'"sent":', b'"sent":-'))


def test_the_anthropic_sdk_sends_the_marked_request() -> None:
    import anthropic

    res = replay("anthropic", config(), turns=5)[-1]
    seen: list[dict[str, Any]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        return httpx2.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        )

    client = anthropic.Anthropic(
        api_key="test",
        base_url="http://127.0.0.1:1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )
    client.messages.create(
        model="claude-sonnet-4-5", max_tokens=16, system=res.system, messages=res.messages
    )
    body = seen[0]
    marked = [
        i
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], list) and any("cache_control" in b for b in m["content"])
    ]
    assert marked == [m.index for m in res.report.cache_markers if m.where == "message"]
    assert body["system"][0]["cache_control"] == EPHEMERAL


def test_botocore_accepts_the_cache_points() -> None:
    res = replay("bedrock_converse", config(), turns=5)[-1]
    client = botocore.session.get_session().create_client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    shape = client.meta.service_model.operation_model("Converse").input_shape
    params = {"modelId": "m", "messages": res.messages, "system": res.system}
    report = botocore.validate.ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    assert markers("bedrock_converse", res) == len(res.report.cache_markers) == 3


def test_sdk_object_markers_count_against_four() -> None:
    from pydantic import BaseModel

    class Block(BaseModel):
        type: str = "text"
        text: str
        cache_control: dict[str, str] | None = None

    class Message(BaseModel):
        role: str
        content: list[Block]

    marked = [Block(text=f"part {k}", cache_control=EPHEMERAL) for k in range(3)]
    msgs = [Message(role="user", content=marked), {"role": "assistant", "content": "Done."}]
    res = rb.Assembler(config(), provider="anthropic").assemble(msgs, system="Be brief.")
    # Three of the caller's (in an SDK object): one left, for the newest message.
    assert [m.why for m in res.report.cache_markers] == ["last"]
    assert res.messages[0] is msgs[0] and res.system == "Be brief."


def test_a_named_session_keys_the_openai_cache_by_its_name() -> None:
    """With a session id, ``prompt_cache_key`` comes from it: the same on every replica (a
    new Assembler, a new store) and every turn, and different for another session; no key
    where the config sends no markers."""
    msgs = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "hi"}]
    cfg = rb.AssemblyConfig(cache_stable=True)
    key = rb.Assembler(cfg).assemble(msgs, session_id="conv-42").cache_key
    assert key == rb.cache_markers.session_key("conv-42")
    again = rb.Assembler(cfg, store=rb.MemoryStore()).assemble(
        [*msgs, {"role": "assistant", "content": "hello"}], session_id="conv-42"
    )
    assert again.cache_key == key
    assert rb.Assembler(cfg).assemble(msgs, session_id="conv-43").cache_key != key
    assert rb.Assembler(cfg).assemble(msgs).cache_key != key  # unnamed: the opening messages
    off = rb.AssemblyConfig(cache_stable=True, cache_markers="off")
    assert rb.Assembler(off).assemble(msgs, session_id="conv-42").cache_key is None


# OpenAI explicit prompt caching ---------------------------------------------------------------

BREAKPOINT = {"mode": "explicit"}


def breakpoints(res: rb.AssemblyResult) -> list[int]:
    """Indices of the messages that carry a ``prompt_cache_breakpoint``."""
    return [
        i
        for i, m in enumerate(res.messages)
        if isinstance(blocks(m), list)
        and any(isinstance(b, dict) and "prompt_cache_breakpoint" in b for b in blocks(m))
    ]


def blocks(item: dict[str, Any]) -> Any:
    """A message's content, or a Responses function call output's ``output``."""
    return item.get("output") if item.get("type") == "function_call_output" else item.get("content")


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses"])
def test_openai_breakpoints_go_on_content_blocks_at_the_stable_cut(provider: str) -> None:
    """OpenAI: "You can add explicit breakpoints to content blocks with
    prompt_cache_breakpoint. Each request can write up to four breakpoints." Chat takes it on
    a ``text`` part, Responses on an ``input_text`` block (an assistant's ``output_text``
    takes none); the options say "The ttl defaults to 30m, which is currently the only
    supported value"."""
    results = replay(provider, config(prompt_cache_mode="explicit"), turns=12)
    seen = set()
    for prev, res in itertools.pairwise(results):
        placed = res.report.cache_markers
        assert res.cache_options == {"mode": "explicit", "ttl": "30m"}
        assert breakpoints(res) == [m.index for m in placed] and len(placed) <= 4
        for m in placed:
            block = blocks(res.messages[m.index])[-1]
            assert block["prompt_cache_breakpoint"] == BREAKPOINT
            kinds = ("input_text", "input_image", "input_file")
            assert block["type"] in (kinds if provider == "openai_responses" else ("text",))
            seen.add(m.why)
        if res.report.state == "reused":
            assert unmarked(res.messages[: len(prev.messages)]) == unmarked(prev.messages)
    # Responses' system is ``instructions``, which takes no breakpoint.
    assert seen == (
        {"last", "stable_cut", "prefix"} if provider == "openai_chat" else {"last", "stable_cut"}
    )
    # Without the mode nothing is written: earlier models refuse the fields.
    plain = replay(provider, config(), turns=3)[-1]
    assert breakpoints(plain) == [] and plain.cache_options is None and plain.cache_key


def test_implicit_mode_leaves_one_breakpoint_to_openai() -> None:
    """OpenAI: "With implicit, OpenAI creates one implicit breakpoint and writes up to the
    latest three explicit breakpoints in the request." The caller's own count among them."""
    msgs = agent_session(30)
    first = msgs[1]
    mine = {
        **first,
        "content": [
            {"type": "text", "text": first["content"], "prompt_cache_breakpoint": BREAKPOINT}
        ],
    }
    msgs = [msgs[0], mine, *msgs[2:]]
    for mode, room in (("implicit", 2), ("explicit", 3)):
        res = replay_messages("openai_chat", msgs, config(prompt_cache_mode=mode), turns=12)
        assert all(len(r.report.cache_markers) <= room for r in res)
        assert max(len(r.report.cache_markers) for r in res) == room
        assert all(r.messages[1] is mine for r in res)


def replay_messages(
    provider: str, msgs: list[Any], cfg: rb.AssemblyConfig, turns: int
) -> list[rb.AssemblyResult]:
    asm = rb.Assembler(cfg, provider=provider)
    ends, _ = turn_ends(msgs, provider)
    state, out = None, []
    for end in ends[:turns]:
        res = asm.assemble(msgs[:end], state=state)
        state = res.state
        out.append(res)
    return out


def test_the_body_gets_prompt_cache_options_or_keeps_its_own() -> None:
    cfg = config(prompt_cache_mode="implicit")
    asm = rb.Assembler(cfg)
    msgs = agent_session(8)
    out = json.loads(
        asm.assemble_body(json.dumps({"model": "gpt-5.6", "messages": msgs}).encode()).body
    )
    assert out["prompt_cache_options"] == {"mode": "implicit", "ttl": "30m"}
    assert any("prompt_cache_breakpoint" in b for b in out["messages"][-1]["content"])
    own = {"mode": "explicit"}
    body = {"model": "gpt-5.6", "messages": msgs, "prompt_cache_options": own}
    out = json.loads(asm.assemble_body(json.dumps(body).encode()).body)
    assert out["prompt_cache_options"] == own
    # A retention policy and no options: the mode alone (the ttl would be refused with it).
    body = {"model": "gpt-5.6", "messages": msgs, "prompt_cache_retention": "24h"}
    out = json.loads(asm.assemble_body(json.dumps(body).encode()).body)
    assert out["prompt_cache_options"] == {"mode": "implicit"}
    assert out["prompt_cache_retention"] == "24h"


def test_ttl_with_prompt_cache_retention_is_refused() -> None:
    """OpenAI: "prompt_cache_options.ttl supersedes prompt_cache_retention, which applies to
    earlier models only. Setting both on the same request is rejected by OpenAI." """
    body = {
        "model": "gpt-5.6",
        "messages": agent_session(4),
        "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
        "prompt_cache_retention": "24h",
    }
    for provider, shape in (("openai_chat", body), ("openai_responses", None)):
        if shape is None:
            items, instructions = from_canonical("openai_responses", agent_session(4))
            shape = {**body, "input": items, "instructions": instructions}
            del shape["messages"]
        asm = rb.Assembler(config(prompt_cache_mode="implicit"), provider=provider)
        with pytest.raises(rb.InvalidBodyError) as e:
            asm.assemble_body(json.dumps(shape).encode())
        assert "prompt_cache_retention" in e.value.reason


def both_lifetimes(provider: str, turns: int, **extra: Any) -> bytes:
    """An OpenAI body of ``provider``'s shape with ``ttl`` and ``prompt_cache_retention``."""
    session = agent_session(turns)
    body: dict[str, Any] = {"model": "gpt-5.6", "messages": session}
    if provider == "openai_responses":
        items, instructions = from_canonical(provider, session)
        body = {"model": "gpt-5.6", "input": items, "instructions": instructions}
    lifetimes = {"prompt_cache_options": {"ttl": "30m"}, "prompt_cache_retention": "24h"}
    return json.dumps({**lifetimes, **body, **extra}).encode()


@pytest.mark.parametrize("provider", ["openai_chat", "openai_responses"])
@pytest.mark.parametrize("named", [True, False])
@pytest.mark.parametrize("budget", [100_000, 2_500])
def test_ttl_with_prompt_cache_retention_is_refused_on_the_stateless_body_paths(
    provider: str, named: bool, budget: int
) -> None:
    """Issue 35: a stateless assembler takes the native path (the core writes the body from
    its bytes) or the items path, never the dict path that refused the pair; both refuse it
    too, named or detected, whether the plan keeps every message or drops some."""
    cfg = rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0
    )
    asm = rb.Assembler(cfg, provider=provider if named else None)
    body = both_lifetimes(provider, 12)
    for call in (
        lambda: asm.assemble_body(body),
        lambda: asyncio.run(asm.assemble_body_async(body)),
    ):
        with pytest.raises(rb.InvalidBodyError) as e:
            call()
        assert "prompt_cache_retention" in e.value.reason
    # Either lifetime alone passes, and so does the name inside a message.
    for lifetime in ("prompt_cache_options", "prompt_cache_retention"):
        alone = json.loads(body)
        del alone[lifetime]
        sent = json.loads(asm.assemble_body(json.dumps(alone).encode()).body)
        assert (lifetime in sent) is False and len(sent) == len(alone)
    quoted = json.loads(body)
    del quoted["prompt_cache_options"]
    history = "messages" if provider == "openai_chat" else "input"
    quoted[history][-1]["content"] = 'set "prompt_cache_options" and "prompt_cache_retention"'
    assert asm.assemble_body(json.dumps(quoted).encode()).path == "native"


def test_ttl_with_prompt_cache_retention_is_refused_in_a_body_too_deep_to_parse() -> None:
    deep = json.loads(both_lifetimes("openai_chat", 4))
    text = json.dumps(deep)[:-1] + ', "metadata": ' + "[" * 5_000 + "]" * 5_000 + "}"
    with pytest.raises(rb.InvalidBodyError) as e:
        rb.Assembler(provider=None).assemble_body(text.encode())
    assert "prompt_cache_retention" in e.value.reason


# Anthropic's caching rules ----------------------------------------------------------------------


def test_a_top_level_cache_control_counts_among_the_four() -> None:
    """Anthropic's automatic caching: a top-level ``cache_control`` "automatically applies
    cache breakpoints to the last cacheable block in the request"; it is one of the four, so
    ringbound marks no last message of its own and leaves one fewer for the rest."""
    msgs, system = native("anthropic")
    system = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    tools = [
        {"name": f"t{k}", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}
        for k in range(2)
    ]
    asm = rb.Assembler(config(), provider="anthropic")
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": msgs, "system": system}
    plain = asm.assemble_body(json.dumps({**body, "tools": tools}).encode())
    assert [m.why for m in plain.report.cache_markers] == ["last"]
    auto = asm.assemble_body(
        json.dumps({**body, "tools": tools, "cache_control": {"type": "ephemeral"}}).encode()
    )
    assert auto.report.cache_markers == []
    out = json.loads(auto.body)
    assert out["cache_control"] == {"type": "ephemeral"}
    assert (
        sum(
            isinstance(m["content"], list) and any("cache_control" in b for b in m["content"])
            for m in out["messages"]
        )
        == 0
    )
    # With room left, the top-level marker takes the last block and ringbound the rest.
    res = asm.assemble_body(json.dumps({**body, "cache_control": {"type": "ephemeral"}}).encode())
    assert "last" not in [m.why for m in res.report.cache_markers]


def test_five_minute_markers_never_come_before_a_one_hour_one() -> None:
    """Anthropic: "Cache entries with longer TTL must appear before shorter TTLs (i.e., a
    1-hour cache entry must appear before any 5-minute cache entries)." ringbound's markers
    are 5-minute ones: none goes before the caller's last 1-hour marker."""
    long = {"type": "ephemeral", "ttl": "1h"}
    msgs, system = native("anthropic", turns=8)
    asm = rb.Assembler(config(model_input_limit=200_000), provider="anthropic")
    k = 5
    block = msgs[k]["content"][-1]
    hour = [
        *msgs[:k],
        {**msgs[k], "content": [*msgs[k]["content"][:-1], {**block, "cache_control": long}]},
        *msgs[k + 1 :],
    ]
    res = asm.assemble(hour, system=system)
    at = [m.index for m in res.report.cache_markers]
    assert at and all(m.where == "message" for m in res.report.cache_markers)
    kept = next(i for i, m in enumerate(res.messages) if m is hour[k])
    assert all(i > kept for i in at)
    # A 1-hour system marker: the system prefix may still be marked after it, messages too.
    sys_long = [{"type": "text", "text": system, "cache_control": long}]
    res = asm.assemble(msgs, system=sys_long)
    assert [m.why for m in res.report.cache_markers] == ["last"]
    # A top-level 1-hour marker is on the last block: nothing of ringbound's may precede it.
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": msgs,
        "system": system,
        "cache_control": long,
    }
    assert asm.assemble_body(json.dumps(body).encode()).report.cache_markers == []


def test_no_marker_below_the_models_minimum_cacheable_prefix() -> None:
    """Anthropic's minimum cacheable prompt length: "1024 tokens for Claude Sonnet 4.5 ...
    4096 tokens for Claude Haiku 4.5"; "Shorter prompts cannot be cached, even if marked with
    cache_control". The models table carries it; no marker goes below it."""
    assert rb.models.lookup("claude-haiku-4-5").min_cache_tokens == 4096
    assert rb.models.lookup("claude-sonnet-4-5-20250929").min_cache_tokens == 1024
    for model in ("claude-haiku-4-5", "claude-sonnet-4-5"):
        cfg = rb.AssemblyConfig.for_model(
            model, model_input_limit=8_000, output_reserve_tokens=0, safety_margin_tokens=0,
            cache_stable=True,
        )  # fmt: skip
        results = replay("anthropic", cfg, turns=12)
        for res in results:
            for m in res.report.cache_markers:
                if m.why == "last":
                    assert res.report.tokens_after >= cfg.min_cache_tokens
            if res.report.tokens_after < cfg.min_cache_tokens:
                assert res.report.cache_markers == []
        # The system alone is far below either minimum: never marked.
        assert all(m.where == "message" for r in results for m in r.report.cache_markers)
        if model == "claude-haiku-4-5":
            assert any(r.report.cache_markers == [] for r in results)
            assert any(r.report.cache_markers for r in results)


def test_a_breakpoint_moved_back_is_sized_where_it_lands() -> None:
    """An assistant's ``output_text`` takes no breakpoint: the newest input block before it
    does, and the minimum prefix is checked there, not at the end of the request."""
    items = [
        {"role": "user", "content": "Check the logs."},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "line " * 2000}],
        },
    ]
    strict = config(prompt_cache_mode="explicit", min_cache_tokens=1_000)
    res = rb.Assembler(strict, provider="openai_responses").assemble(items, system="Be brief.")
    assert res.report.tokens_after > 1_000 and res.report.cache_markers == []
    loose = config(prompt_cache_mode="explicit", min_cache_tokens=5)
    res = rb.Assembler(loose, provider="openai_responses").assemble(items, system="Be brief.")
    assert [(m.index, m.why) for m in res.report.cache_markers] == [(0, "last")]
    assert res.messages[0]["content"][0]["prompt_cache_breakpoint"] == {"mode": "explicit"}
    assert items[0]["content"] == "Check the logs."
