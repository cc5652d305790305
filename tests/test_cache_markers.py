"""Cache-stable assembly places each provider's prompt-cache markers: Anthropic
``cache_control``, Bedrock ``cachePoint`` (within four per request, the caller's kept), and
OpenAI's ``prompt_cache_key`` as ``res.cache_key``."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import botocore.session
import botocore.validate
import httpx2
import pytest

import ringbound as rb
from ringbound.cache_markers import CacheMarker, unmarked
from ringbound.cli.simulate import agent_session, turn_ends
from ringbound.providers import adapter

EPHEMERAL = {"type": "ephemeral"}


def config(**kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        **{
            "model_input_limit": 8_000,
            "output_reserve_tokens": 0,
            "safety_margin_tokens": 0,
            "cache_stable": True,
            **kw,
        }
    )


def native(provider: str, turns: int = 40) -> tuple[list[Any], Any]:
    if provider == "openai_chat":
        return agent_session(turns), None
    return adapter(provider).from_canonical(agent_session(turns))


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
