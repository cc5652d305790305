"""RingboundHook's per-attempt hook called as LiteLLM calls it on a router fallback
(``async_pre_call_deployment_hook`` with the attempt's kwargs: the deployment's ``model``, the
model group in ``litellm_metadata``, the call id the pre-call hook saw), for what the real
proxy test (test_litellm_fallback.py) cannot reach cheaply: the chat route, a fallback model
without a config of its own, the attempts it must leave alone, the caller's kwargs never
modified, and LiteLLM's bridge calls getting ringbound's translation."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from fastapi import HTTPException

import ringbound as rb
from ringbound.integrations.litellm import RingboundHook

from .litellm_sessions import anthropic_body, chat_body

BIG = rb.AssemblyConfig(model_input_limit=200_000, side_effect_tools=["send_email"])
SMALL = rb.AssemblyConfig(
    model_input_limit=3_000,
    output_reserve_tokens=256,  # the bodies' own max_tokens, which the hook reserves anyway
    safety_margin_tokens=100,
    recent_tool_rings=2,
    side_effect_tools=["send_email"],
)
TURNS = 30


def pre_call(hook: RingboundHook, data: dict[str, Any], call_type: str) -> dict[str, Any]:
    """The proxy's pre-call hook; the body the router then gets."""
    body = asyncio.run(hook.async_pre_call_hook(None, None, data, call_type))
    return data if body is None else body


def attempt(
    hook: RingboundHook, body: dict[str, Any], call_type: str, group: str, model: str
) -> dict[str, Any] | None:
    """One router attempt on ``group``'s deployment ``model``, as LiteLLM's client wrapper
    calls the deployment hook."""
    kwargs = {**body, "model": model, "litellm_metadata": {"model_group": group}}
    return asyncio.run(hook.async_pre_call_deployment_hook(kwargs, call_type))


def with_id(body: dict[str, Any], call_id: str = "call-1") -> dict[str, Any]:
    return {**body, "litellm_call_id": call_id}


def test_the_first_attempt_on_the_requested_model_is_left_to_the_pre_call_hook() -> None:
    hook = RingboundHook({"claude": BIG, "gpt": SMALL})
    body = pre_call(hook, with_id(chat_body("claude", TURNS)), "acompletion")
    assert attempt(hook, body, "acompletion", "claude", "anthropic/claude-sonnet-4-5") is None


def test_a_fallback_on_the_chat_route_is_refitted_for_the_fallback_window() -> None:
    hook = RingboundHook({"claude": BIG, "gpt": SMALL})
    data = with_id(chat_body("claude", TURNS))
    body = pre_call(hook, data, "acompletion")
    assert len(body["messages"]) == len(data["messages"])  # Claude's window holds it all
    kwargs = {**body, "model": "openai/gpt-4o", "litellm_metadata": {"model_group": "gpt"}}
    before = copy.deepcopy(kwargs)
    out = asyncio.run(hook.async_pre_call_deployment_hook(kwargs, "acompletion"))
    assert kwargs == before  # the router's kwargs untouched
    assert out is not None and out["model"] == "openai/gpt-4o"
    budget = SMALL.model_input_limit - data["max_tokens"] - SMALL.safety_margin_tokens
    assert rb.count_tokens(out["messages"], tools=out["tools"]) <= budget
    assert rb.validate(out["messages"]) == []
    assert out["messages"][0] == data["messages"][0]  # the system rules
    note = next(m["content"] for m in out["messages"] if "send_email" in str(m["content"]))
    assert "ana@example.com" in note
    # Every other field as the router gave it.
    assert {k: v for k, v in out.items() if k != "messages"} == {
        k: v for k, v in kwargs.items() if k != "messages"
    }


def test_a_fallback_model_without_a_config_takes_the_requested_model_s_policy() -> None:
    # Only "claude" has a config: the fallback keeps its policy (the email in the ledger),
    # sized for the fallback model, which the models table knows (gpt-4: 8,192 tokens).
    hook = RingboundHook({"claude": BIG})
    body = pre_call(hook, with_id(chat_body("claude", TURNS)), "acompletion")
    out = attempt(hook, body, "acompletion", "gpt-4", "openai/gpt-4")
    assert out is not None
    assert rb.count_tokens(out["messages"], tools=out["tools"]) <= 8_192 - 256
    assert len(out["messages"]) < len(body["messages"])
    assert any("ana@example.com" in str(m["content"]) for m in out["messages"])


def test_an_attempt_without_a_known_call_is_left_alone() -> None:
    hook = RingboundHook({"claude": BIG, "gpt": SMALL})
    body = chat_body("claude", TURNS)
    # No call id, a call id the pre-call hook never saw (and no proxy_server_request), a
    # call type the hook does not serve, no model group.
    assert attempt(hook, body, "acompletion", "gpt", "openai/gpt-4o") is None
    assert attempt(hook, with_id(body, "other"), "acompletion", "gpt", "openai/gpt-4o") is None
    pre_call(hook, with_id(body), "acompletion")
    assert attempt(hook, with_id(body), "aembedding", "gpt", "openai/gpt-4o") is None
    kwargs = {**with_id(body), "model": "openai/gpt-4o"}
    assert asyncio.run(hook.async_pre_call_deployment_hook(kwargs, "acompletion")) is None


def test_the_requested_model_is_read_from_the_proxy_s_copy_of_the_request() -> None:
    # A call the pre-call hook did not see (the hook added while it was under way).
    hook = RingboundHook({"claude": BIG, "gpt": SMALL})
    body = {
        **with_id(chat_body("claude", TURNS)),
        "proxy_server_request": {"body": {"model": "claude"}},
    }
    out = attempt(hook, body, "acompletion", "gpt", "openai/gpt-4o")
    assert out is not None and len(out["messages"]) < len(body["messages"])


def _anthropic_session() -> dict[str, Any]:
    body = with_id(anthropic_body("claude", TURNS))
    thought = {"type": "thinking", "thinking": "Email Ana first.", "signature": "sig-anthropic"}
    first = body["messages"][1]
    body["messages"][1] = {**first, "content": [thought, *first["content"]]}
    return body


@pytest.mark.parametrize(
    ("call_type", "provider", "history"),
    [("acompletion", "openai_chat", "messages"), ("aresponses", "openai_responses", "input")],
)
def test_litellm_s_bridge_call_gets_ringbound_s_translation(
    call_type: str, provider: str, history: str
) -> None:
    """/v1/messages to an OpenAI fallback: LiteLLM's anthropic_messages attempt, then its
    bridge call in the chat or Responses format, whose body ringbound's translation
    replaces."""
    hook = RingboundHook({"claude": BIG, "gpt": SMALL})
    data = _anthropic_session()
    body = pre_call(hook, data, "anthropic_messages")
    fitted = attempt(hook, body, "anthropic_messages", "gpt", "openai/gpt-4o")
    assert fitted is not None and len(fitted["messages"]) < len(data["messages"])
    # The bridge call: LiteLLM's translation of the attempt's body (here, a stand-in carrying
    # what LiteLLM's carries: the thinking block with its signature).
    litellm_shape = [{"role": "assistant", "content": "x", "thinking_blocks": [{"signature": "s"}]}]
    bridge = {
        "litellm_call_id": "call-1",
        "model": "openai/gpt-4o",
        "litellm_metadata": {"model_group": "gpt"},
        history: litellm_shape,
        "max_tokens" if provider == "openai_chat" else "max_output_tokens": 256,
        "tools": "LiteLLM's tools",
        "tool_choice": "auto",
    }
    out = asyncio.run(hook.async_pre_call_deployment_hook(dict(bridge), call_type))
    assert out is not None and out["tool_choice"] == "auto"
    items = out[history]
    system = out.get("instructions")
    assert rb.validate(items, provider=provider, system=system) == []
    tokens = rb.count_tokens(items, provider=provider, tools=out["tools"], system=system)
    assert tokens <= SMALL.model_input_limit - 256 - SMALL.safety_margin_tokens
    assert "sig-anthropic" not in str(out) and "thinking_blocks" not in str(out)
    # The tools in the bridge's format, the system and the goal kept.
    assert (
        out["tools"]
        == rb.translate([], source="anthropic", target=provider, tools=data["tools"]).tools
    )
    text = str(items[0]) + str(system)
    assert data["system"] in text
    assert bridge[history] is litellm_shape  # the router's kwargs untouched


def test_an_unfittable_fallback_is_the_client_s_400() -> None:
    hook = RingboundHook(
        {
            "claude": BIG,
            "gpt": rb.AssemblyConfig(
                model_input_limit=300, output_reserve_tokens=10, safety_margin_tokens=10
            ),
        }
    )
    body = pre_call(hook, with_id(chat_body("claude", TURNS)), "acompletion")
    with pytest.raises(HTTPException) as e:
        attempt(hook, body, "acompletion", "gpt", "openai/gpt-4o")
    assert e.value.status_code == 400


class Sink:
    def __init__(self) -> None:
        self.observed: list[str] = []

    def observe(self, report: rb.AssemblyReport, provider: str) -> None:
        self.observed.append(provider)

    def reject(self, error: rb.RingboundError, provider: str) -> None:
        raise AssertionError(f"rejected: {error}")


def test_a_translated_fallback_is_reported_to_the_sink_and_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink()
    hook = RingboundHook({"claude": BIG, "gpt": SMALL}, sink=sink)
    body = pre_call(hook, _anthropic_session(), "anthropic_messages")
    attempt(hook, body, "anthropic_messages", "gpt", "openai/gpt-4o")
    bridge = {**with_id({"messages": [], "max_tokens": 256}), "model": "openai/gpt-4o"}
    bridge["litellm_metadata"] = {"model_group": "gpt"}
    with caplog.at_level("INFO", logger="ringbound"):
        asyncio.run(hook.async_pre_call_deployment_hook(bridge, "acompletion"))
    # The pre-call hook's assembly, the attempt's (Anthropic's format), the bridge's (chat).
    assert sink.observed == ["anthropic", "anthropic", "openai_chat"]
    (line,) = [r.getMessage() for r in caplog.records if "fallback" in r.getMessage()]
    assert "'gpt'" in line and "anthropic -> openai_chat" in line
    assert "dropped signature" in line and "dropped reasoning" in line


def test_a_chat_bridge_to_claude_is_counted_as_anthropic_counts() -> None:
    """/v1/responses falling back to Claude: LiteLLM bridges the Responses body to chat and
    converts that for Anthropic itself; the chat body is fitted as Anthropic counts it."""
    from .litellm_sessions import responses_body

    # Outside a proxy, the model group's name is what LiteLLM's model map is asked about.
    claude = "anthropic/claude-sonnet-4-5"
    hook = RingboundHook({"gpt": BIG, claude: SMALL})
    body = pre_call(hook, with_id(responses_body("gpt", TURNS)), "aresponses")
    outer = attempt(hook, body, "aresponses", claude, claude)
    assert outer is not None and len(outer["input"]) < len(body["input"])
    bridge = {**with_id({"messages": [], "max_tokens": 256}), "model": claude}
    bridge["litellm_metadata"] = {"model_group": claude}
    out = asyncio.run(hook.async_pre_call_deployment_hook(bridge, "acompletion"))
    assert out is not None and rb.validate(out["messages"]) == []
    native = rb.translate(out["messages"], source="openai_chat", target="anthropic")
    tokens = rb.count_tokens(
        native.messages, provider="anthropic", system=native.system, tools=native.tools
    )
    assert tokens <= SMALL.model_input_limit - 256 - SMALL.safety_margin_tokens
