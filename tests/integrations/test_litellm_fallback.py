"""RingboundHook across a LiteLLM fallback that changes the provider: a real proxy on loopback
serves "claude" from a fake Anthropic upstream that answers every request 529 (overloaded) and
falls back to "gpt", a fake OpenAI upstream whose model calls a tool on every turn. A 30-turn
agent session on /v1/messages (it began on Claude: a thinking block with its signature, an
email sent) goes on through the switch; the session outgrows gpt's configured window, which is
far smaller than Claude's, so only the fallback trims it. Each request OpenAI receives must be
valid chat, paired, within gpt's window as OpenAI counts it, with the system and the goal, and
carry nothing Anthropic-bound (LiteLLM's own translation would send the thinking block as
``thinking_blocks`` with its signature, and ``reasoning_content``)."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

import ringbound as rb
from ringbound import _core

from .litellm_proxy_process import Proxy, pythonpath, running_proxy
from .litellm_sessions import EMAIL, FUNCTIONS, GOAL, SYSTEM
from .litellm_upstream import OVERLOADED, FakeUpstream

TURNS = 30
#: gpt's window, as the proxy's config gives it (model_info.max_input_tokens): the session
#: outgrows it about halfway; Claude's (200,000, from LiteLLM's model map) it never does.
GPT_WINDOW = 6_000
MAX_TOKENS = 256
SIGNATURE = "EqQBCkYIBxgCKkCsignature-only-anthropic-can-verify"

HOOK = """
import ringbound as rb
from ringbound.integrations.litellm import RingboundHook

# No window anywhere: each model is sized from what the proxy knows of it.
hook = RingboundHook(rb.AssemblyConfig(side_effect_tools=["send_email"]))
"""


def _log(day: int) -> str:
    return f"day {day}: " + " ".join(f"event-{day}-{k} ok" for k in range(60))


def _tool_call(body: dict[str, Any]) -> dict[str, Any]:
    """gpt's answer: read the next day's log (the day after the last one read)."""
    days = [
        json.loads(c["function"]["arguments"]).get("day", 0)
        for m in body["messages"]
        for c in m.get("tool_calls") or ()
    ]
    day = max([0, *days]) + 1
    call = {
        "id": f"call_{secrets.token_hex(6)}",
        "type": "function",
        "function": {"name": "read_log", "arguments": json.dumps({"day": day})},
    }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def _begun_on_claude() -> list[dict[str, Any]]:
    """The session as Claude left it: a thought with its signature, an email sent."""
    return [
        {"role": "user", "content": GOAL},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Email Ana first.", "signature": SIGNATURE},
                {"type": "tool_use", "id": "toolu_01", "name": "send_email", "input": EMAIL},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "sent: m-1"}],
        },
    ]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeUpstream, FakeUpstream]]:
    with (
        FakeUpstream(failing=OVERLOADED) as anthropic,
        FakeUpstream(answers={"/v1/chat/completions": _tool_call}) as openai,
    ):
        yield anthropic, openai


@pytest.fixture(scope="module")
def proxy(
    upstreams: tuple[FakeUpstream, FakeUpstream], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    anthropic, openai = upstreams
    work = tmp_path_factory.mktemp("litellm-fallback")
    config = {
        "model_list": [
            {
                "model_name": "claude",
                "litellm_params": {
                    "model": "anthropic/claude-sonnet-4-5",
                    "api_key": "sk-fake",
                    "api_base": anthropic.base_url,
                },
            },
            {
                "model_name": "gpt",
                "litellm_params": {
                    "model": "openai/gpt-4o",
                    "api_key": "sk-fake",
                    "api_base": openai.base_url + "/v1",
                },
                "model_info": {"max_input_tokens": GPT_WINDOW},
            },
        ],
        # No retry of the 529 on "claude" itself: straight to the fallback, so that each turn
        # takes a second, not the retry's backoff.
        "router_settings": {"fallbacks": [{"claude": ["gpt"]}], "num_retries": 0},
        "litellm_settings": {
            "callbacks": "ringbound_hook.hook",
            "drop_params": True,
            # /v1/messages to an OpenAI model: chat completions, not LiteLLM's default bridge
            # to the Responses API.
            "use_chat_completions_url_for_anthropic_messages": True,
        },
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    (work / "ringbound_hook.py").write_text(HOOK)
    key = "sk-" + secrets.token_hex(32)
    env = dict(
        os.environ,
        LITELLM_MASTER_KEY=key,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        DISABLE_ADMIN_UI="True",
        PYTHONPATH=pythonpath(),
    )
    with running_proxy(work / "config.yaml", env, key, work) as running:
        yield running


def _tools() -> list[dict[str, Any]]:
    return [
        {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
        for f in FUNCTIONS
    ]


def _check_received(body: dict[str, Any]) -> int:
    """Asserts what OpenAI received is a request OpenAI takes; its tokens as OpenAI counts."""
    messages = body["messages"]
    assert rb.validate(messages, provider="openai_chat") == []
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls)
    tokens = rb.count_tokens(messages, provider="openai_chat", tools=body.get("tools"))
    assert tokens <= GPT_WINDOW - body["max_tokens"]
    # The system rules first, then (after the ledger note, when there is one) the goal.
    assert messages[0] == {"role": "system", "content": SYSTEM}
    (first,) = [m for m in messages if m["role"] == "user"][:1]
    assert first == {"role": "user", "content": GOAL}
    assert all(m["role"] == "system" for m in messages[: messages.index(first)])
    # Nothing only Anthropic can read: LiteLLM's translation alone sends the thought as
    # ``thinking_blocks`` (with the signature) and ``reasoning_content``.
    assert SIGNATURE not in json.dumps(body)
    assert not any("thinking_blocks" in m or "reasoning_content" in m for m in messages)
    assert body["model"] == "gpt-4o" and body["max_tokens"] == MAX_TOKENS
    return tokens


def test_a_30_turn_session_goes_on_through_a_fallback_from_anthropic_to_openai(
    proxy: Proxy, upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    anthropic, openai = upstreams
    history = _begun_on_claude()
    trimmed = 0
    for turn in range(TURNS):
        anthropic.take(), openai.take()
        body = {
            "model": "claude",
            "system": SYSTEM,
            "messages": history,
            "tools": _tools(),
            "max_tokens": MAX_TOKENS,
        }
        status, answer = proxy.post("/v1/messages", body)
        assert status == 200, (turn, answer)
        assert [r.path for r in anthropic.take()] == ["/v1/messages"]  # claude was tried
        (got,) = openai.take()
        assert got.path == "/v1/chat/completions"
        _check_received(got.body)
        sent_calls = sum(1 for m in history for b in m["content"] if _is(b, "tool_use"))
        kept_calls = sum(len(m.get("tool_calls") or ()) for m in got.body["messages"])
        if kept_calls < sent_calls:
            trimmed += 1
            # The email, dropped with its ring, is still known: the ledger note says so.
            notes = [
                m["content"]
                for m in got.body["messages"]
                if m["role"] == "system" and _core.LEDGER_MARKER in m["content"]
            ]
            assert len(notes) == 1 and "ana@example.com" in notes[0]
        # The agent goes on with what gpt answered, in Anthropic's shape: its tool call,
        # then the result.
        (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
        history = [
            *history,
            {"role": "assistant", "content": answer["content"]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": use["id"],
                        "content": _log(use["input"]["day"]),
                    }
                ],
            },
        ]
    # The session outgrew gpt's window, and every turn after that was trimmed to fit.
    full = rb.count_tokens(history, provider="anthropic", system=SYSTEM, tools=_tools())
    assert full > 2 * GPT_WINDOW
    assert trimmed >= TURNS // 3
    assert len(history) == 3 + 2 * TURNS


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind
