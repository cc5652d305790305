"""RingboundHook across a LiteLLM fallback that changes the provider: a real proxy on loopback
serves "claude" from a fake Anthropic upstream that answers every request 529 (overloaded) and
falls back to "gpt", a fake OpenAI upstream whose model calls a tool on every turn. A 30-turn
agent session on /v1/messages (it began on Claude: a thinking block with its signature, an
email sent) goes on through the switch; the session outgrows gpt's configured window, which is
far smaller than Claude's, so only the fallback trims it. LiteLLM bridges an Anthropic body to
an OpenAI model either through chat completions (``use_chat_completions_url_for_anthropic_
messages``) or, by default, through the Responses API: one proxy for each. Each request OpenAI
receives must be valid in its format, paired, within gpt's window as OpenAI counts it, with the
system and the goal, and carry nothing Anthropic-bound (LiteLLM's own translation would send
the thinking block as ``thinking_blocks`` with its signature, and ``reasoning_content``)."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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


def _next_day(arguments: list[str]) -> str:
    """gpt's next call: read the day after the last one read."""
    days = [json.loads(a).get("day", 0) for a in arguments]
    return json.dumps({"day": max([0, *days]) + 1})


def _chat_tool_call(body: dict[str, Any]) -> dict[str, Any]:
    """gpt's chat answer: a call to read_log."""
    arguments = _next_day(
        [c["function"]["arguments"] for m in body["messages"] for c in m.get("tool_calls") or ()]
    )
    call = {
        "id": f"call_{secrets.token_hex(6)}",
        "type": "function",
        "function": {"name": "read_log", "arguments": arguments},
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


def _responses_tool_call(body: dict[str, Any]) -> dict[str, Any]:
    """gpt's Responses answer: a call to read_log."""
    arguments = _next_day(
        [i["arguments"] for i in body["input"] if i.get("type") == "function_call"]
    )
    call_id = f"call_{secrets.token_hex(6)}"
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": "completed",
        "model": body.get("model", "fake"),
        "output": [
            {
                "type": "function_call",
                "id": "fc_" + call_id,
                "call_id": call_id,
                "name": "read_log",
                "arguments": arguments,
                "status": "completed",
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 2,
            "total_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
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


def _check_chat(body: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Asserts the chat request OpenAI received is one it takes; its calls' ids, in order."""
    messages = body["messages"]
    assert rb.validate(messages, provider="openai_chat") == []
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    tokens = rb.count_tokens(messages, provider="openai_chat", tools=body.get("tools"))
    assert tokens <= GPT_WINDOW - body["max_tokens"] == GPT_WINDOW - MAX_TOKENS
    # The system rules first, then (after the ledger note, when there is one) the goal.
    assert messages[0] == {"role": "system", "content": SYSTEM}
    first = next(m for m in messages if m["role"] == "user")
    assert first == {"role": "user", "content": GOAL}
    assert all(m["role"] == "system" for m in messages[: messages.index(first)])
    assert not any("thinking_blocks" in m or "reasoning_content" in m for m in messages)
    notes = [m["content"] for m in messages if _core.LEDGER_MARKER in str(m.get("content"))]
    return calls, results, notes


def _check_responses(body: dict[str, Any]) -> tuple[list[str], list[str], list[str]]:
    """Asserts the Responses request OpenAI received is one it takes; its calls' ids."""
    items, instructions = body["input"], body.get("instructions")
    assert rb.validate(items, provider="openai_responses", system=instructions) == []
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    results = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    tokens = rb.count_tokens(
        items, provider="openai_responses", tools=body.get("tools"), system=instructions
    )
    assert tokens <= GPT_WINDOW - body["max_output_tokens"] == GPT_WINDOW - MAX_TOKENS
    # The system rules lead the instructions (the ledger note, when there is one, follows).
    assert instructions.startswith(SYSTEM)
    first = next(i for i in items if i.get("role") == "user")
    assert _text(first["content"]) == GOAL
    assert not any(i.get("type") == "reasoning" for i in items)
    notes = [instructions] if _core.LEDGER_MARKER in instructions else []
    return calls, results, notes


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


@dataclass(frozen=True)
class Bridge:
    """How LiteLLM sends an Anthropic messages body to an OpenAI model."""

    name: str
    #: ``litellm_settings.use_chat_completions_url_for_anthropic_messages``.
    chat: bool
    path: str
    check: Callable[[dict[str, Any]], tuple[list[str], list[str], list[str]]]


BRIDGES = [
    Bridge("chat", True, "/v1/chat/completions", _check_chat),
    Bridge("responses", False, "/v1/responses", _check_responses),
]


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeUpstream, FakeUpstream]]:
    answers = {"/v1/chat/completions": _chat_tool_call, "/v1/responses": _responses_tool_call}
    with FakeUpstream(failing=OVERLOADED) as anthropic, FakeUpstream(answers=answers) as openai:
        yield anthropic, openai


def _proxy_config(anthropic: str, openai: str, bridge: Bridge) -> dict[str, Any]:
    return {
        "model_list": [
            {
                "model_name": "claude",
                "litellm_params": {
                    "model": "anthropic/claude-sonnet-4-5",
                    "api_key": "sk-fake",
                    "api_base": anthropic,
                },
            },
            {
                "model_name": "gpt",
                "litellm_params": {
                    "model": "openai/gpt-4o",
                    "api_key": "sk-fake",
                    "api_base": openai + "/v1",
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
            "use_chat_completions_url_for_anthropic_messages": bridge.chat,
        },
        "general_settings": {"master_key": "os.environ/LITELLM_MASTER_KEY"},
    }


@pytest.fixture(scope="module", params=BRIDGES, ids=[b.name for b in BRIDGES])
def proxy(
    request: pytest.FixtureRequest,
    upstreams: tuple[FakeUpstream, FakeUpstream],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Proxy, Bridge]]:
    anthropic, openai = upstreams
    bridge: Bridge = request.param
    work = tmp_path_factory.mktemp(f"litellm-fallback-{bridge.name}")
    config = _proxy_config(anthropic.base_url, openai.base_url, bridge)
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
        yield running, bridge


def _tools() -> list[dict[str, Any]]:
    return [
        {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
        for f in FUNCTIONS
    ]


def test_a_30_turn_session_goes_on_through_a_fallback_from_anthropic_to_openai(
    proxy: tuple[Proxy, Bridge], upstreams: tuple[FakeUpstream, FakeUpstream]
) -> None:
    (running, bridge), (anthropic, openai) = proxy, upstreams
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
        status, answer = running.post("/v1/messages", body)
        assert status == 200, (turn, answer)
        assert [r.path for r in anthropic.take()] == ["/v1/messages"]  # claude was tried
        (got,) = openai.take()
        assert got.path == bridge.path and got.body["model"] == "gpt-4o"
        calls, results, notes = bridge.check(got.body)
        # Every call answered, once: the ids as the agent sent them (Anthropic's toolu_ ids
        # and gpt's call_ ids alike, which OpenAI takes as they are).
        assert sorted(calls) == sorted(results) and len(set(calls)) == len(calls)
        # Nothing only Anthropic can read: LiteLLM's translation alone sends the thought,
        # with its signature.
        assert SIGNATURE not in json.dumps(got.body)
        sent = [b["id"] for m in history for b in m["content"] if _is(b, "tool_use")]
        assert set(calls) <= set(sent)
        if len(calls) < len(sent):
            trimmed += 1
            # The email, dropped with its ring, is still known: the ledger note says so.
            assert len(notes) == 1 and "ana@example.com" in notes[0]
        # The agent goes on with what gpt answered, in Anthropic's shape: its tool call,
        # then the result.
        (use,) = [b for b in answer["content"] if b["type"] == "tool_use"]
        result = {
            "type": "tool_result",
            "tool_use_id": use["id"],
            "content": _log(use["input"]["day"]),
        }
        history = [
            *history,
            {"role": "assistant", "content": answer["content"]},
            {"role": "user", "content": [result]},
        ]
    # The session outgrew gpt's window, and every turn after that was trimmed to fit.
    full = rb.count_tokens(history, provider="anthropic", system=SYSTEM, tools=_tools())
    assert full > 2 * GPT_WINDOW
    assert trimmed >= TURNS // 3
    assert len(history) == 3 + 2 * TURNS


def _is(block: Any, kind: str) -> bool:
    return isinstance(block, dict) and block.get("type") == kind
