"""RingboundHook with no config sizes each request from what the proxy knows of its model: the
deployments of a LiteLLM ``Router`` (its ``model_info``, its route to each provider family),
LiteLLM's model map, then ringbound's models table; and it takes the body's own ``max_tokens``
as the output reserve on every route. Each request it hands the proxy must fit the model's
window, counted as the upstream provider, less that reserve."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import HTTPException
from litellm import Router

import ringbound as rb
from ringbound import models
from ringbound.integrations._base import Target
from ringbound.integrations.litellm import ROUTES, RingboundHook

from .litellm_sessions import anthropic_body, chat_body, responses_body

TURNS = 60
WINDOW = 12_000
RESERVE = 1_000
#: One deployment per provider family, each with the test's window in its model_info.
UPSTREAMS = {
    "openai_chat": "openai/acme-gpt-tiny",
    "anthropic": "anthropic/acme-claude-tiny",
    "gemini": "gemini/acme-gemini-tiny",
    "bedrock_converse": "bedrock/acme-nova-tiny",
}
#: LiteLLM's Router builds pydantic models of its TypedDicts, which warn on its own
#: ``ReadOnly`` items: not ringbound's to fix.
pytestmark = pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier")
BODIES = {"acompletion": chat_body, "anthropic_messages": anthropic_body,
          "aresponses": responses_body}  # fmt: skip


def run(hook: RingboundHook, data: dict[str, Any], call_type: str) -> dict[str, Any] | None:
    return asyncio.run(hook.async_pre_call_hook(None, None, data, call_type))


def body(call_type: str, model: str, reserve: int = RESERVE) -> dict[str, Any]:
    data = BODIES[call_type](model, TURNS)
    data["max_output_tokens" if call_type == "aresponses" else "max_tokens"] = reserve
    return data


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Router]:
    """A running proxy as the hook sees one: its server module holding the router."""
    router = Router(
        model_list=[
            {"model_name": family, "litellm_params": {"model": route, "api_key": "unused"},
             "model_info": {"max_input_tokens": WINDOW, "max_output_tokens": 4_000}}
            for family, route in UPSTREAMS.items()
        ]
    )  # fmt: skip
    monkeypatch.setitem(sys.modules, "litellm.proxy.proxy_server",
                        SimpleNamespace(llm_router=router))  # fmt: skip
    yield router


def upstream_tokens(upstream: str, call_type: str, out: dict[str, Any]) -> int:
    """The request as the upstream receives it: in the route's shape, counted as the route's
    provider; a chat body for another provider, in that provider's shape."""
    route = ROUTES[call_type]
    history, tools = out[route.history], out.get("tools")
    system = out.get(route.system) if route.system else None
    if route.provider == "openai_chat" and upstream != "openai_chat":
        return Target(upstream).count(history, tools, rb.AssemblyConfig())
    # LiteLLM translates a Responses body for a Claude model: its tokens, at Claude's ratio.
    ratio = Target(upstream).token_ratio if route.provider == "openai_responses" else None
    return rb.count_tokens(history, provider=route.provider, tools=tools, system=system,
                           token_ratio=ratio)  # fmt: skip


#: Every family behind the chat route; OpenAI and Anthropic behind the other two.
CASES = [("acompletion", u) for u in UPSTREAMS] + [
    (c, u) for c in ("anthropic_messages", "aresponses") for u in ("openai_chat", "anthropic")
]


@pytest.mark.parametrize(("call_type", "upstream"), CASES, ids=[f"{c}-{u}" for c, u in CASES])
def test_no_config_fits_each_body_to_the_deployments_window_and_provider(
    proxy: Router, upstream: str, call_type: str
) -> None:
    data = body(call_type, upstream)
    route = ROUTES[call_type]
    before = upstream_tokens(upstream, call_type, data)
    assert before > WINDOW  # the session must need trimming
    out = run(RingboundHook(), data, call_type)
    assert out is not None
    tokens = upstream_tokens(upstream, call_type, out)
    assert tokens <= WINDOW - RESERVE, (tokens, WINDOW - RESERVE)
    assert tokens > 0.7 * (WINDOW - RESERVE)
    assert len(out[route.history]) < len(data[route.history])


@pytest.mark.parametrize("call_type", list(BODIES))
def test_the_bodys_max_tokens_is_the_reserve_on_every_route(call_type: str) -> None:
    """The issue's case: a 10,000 window and max_tokens 5,000 sent 8,557 input tokens."""
    hook = RingboundHook(rb.AssemblyConfig(model_input_limit=10_000))
    data = body(call_type, "m", reserve=5_000)
    route = ROUTES[call_type]
    out = run(hook, data, call_type)
    assert out is not None
    system = out.get(route.system) if route.system else None
    tokens = rb.count_tokens(out[route.history], provider=route.provider, tools=out["tools"],
                             system=system)  # fmt: skip
    assert tokens + 5_000 <= 10_000 - 1024
    # Without max_tokens, the reserve is what the model can write (a quarter of a small
    # window at most), not 8,192 out of 10,000: a budget of 784 kept 6 of 84 messages.
    del data["max_output_tokens" if call_type == "aresponses" else "max_tokens"]
    out = run(hook, data, call_type)
    assert out is not None and len(out[route.history]) > 12
    system = out.get(route.system) if route.system else None
    tokens = rb.count_tokens(out[route.history], provider=route.provider, tools=out["tools"],
                             system=system)  # fmt: skip
    assert tokens <= 10_000 - 10_000 // 4 - 1024


def test_a_models_table_source_resolves_the_example_alias() -> None:
    hook = RingboundHook(rb.AssemblyConfig.for_model)
    out = run(hook, body("anthropic_messages", "claude-sonnet", reserve=190_000),
              "anthropic_messages")  # fmt: skip
    assert out is not None
    tokens = rb.count_tokens(out["messages"], provider="anthropic", tools=out["tools"],
                             system=out["system"])  # fmt: skip
    assert tokens <= 200_000 - 190_000 - 1024


def test_an_unknown_model_is_said_and_passed_through_or_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Sink:
        def __init__(self) -> None:
            self.unknown: list[str] = []

        def observe(self, report: Any, provider: str) -> None:
            pass

        def reject(self, error: Any, provider: str) -> None:
            pass

        def unknown_model(self, provider: str) -> None:
            self.unknown.append(provider)

    sink = Sink()
    hook = RingboundHook(sink=sink)
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        assert run(hook, body("acompletion", "my-local-llama"), "acompletion") is None
    assert "'my-local-llama' is not in the models table" in caplog.text
    assert sink.unknown == ["openai_chat"]
    models.set_strict(True)
    try:
        with pytest.raises(HTTPException) as e:
            run(RingboundHook(), body("acompletion", "my-local-llama"), "acompletion")
        assert e.value.status_code == 500
        assert e.value.detail["ringbound"] == {"error": "ConfigError", "key": "model"}
    finally:
        models.set_strict(False)
    # Known to ringbound's table, though not to the proxy: sized by the table.
    out = run(RingboundHook(), body("acompletion", "gpt-4", reserve=4_000), "acompletion")
    assert out is not None
    assert rb.count_tokens(out["messages"], tools=out["tools"]) <= 8_192 - 4_000 - 1024


def test_a_max_tokens_leaving_no_room_is_the_clients_400() -> None:
    data = body("acompletion", "gpt-4", reserve=8_000)
    with pytest.raises(HTTPException) as e:
        run(RingboundHook(), data, "acompletion")
    assert e.value.status_code == 400
    assert e.value.detail["ringbound"] == {"error": "ConfigError", "key": "model_input_limit"}
    assert "max_tokens 8000" in e.value.detail["error"]
    bad = dict(data, max_tokens="lots")
    with pytest.raises(HTTPException) as e:
        run(RingboundHook(), bad, "acompletion")
    assert e.value.status_code == 400
