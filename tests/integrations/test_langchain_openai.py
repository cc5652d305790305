"""A LangChain agent on ChatOpenAI, the real client, against a fake OpenAI upstream on loopback:
with ``prompt_cache_mode`` under ``cache_stable``, ``RingboundMiddleware`` passes the
assembly's ``prompt_cache_options`` to the call (in ``extra_body``, where ChatOpenAI sends what
the OpenAI SDK has no argument for), and the request OpenAI receives carries them (issue 35)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from pydantic import Field

import ringbound as rb
from ringbound.integrations.langchain import RingboundMiddleware

from .fake_chat import RecordingFakeModel
from .litellm_upstream import FakeUpstream

CACHED = rb.AssemblyConfig(
    model_input_limit=3_000,
    output_reserve_tokens=400,
    safety_margin_tokens=100,
    cache_stable=True,
    prompt_cache_mode="explicit",
)
OPTIONS = {"mode": "explicit", "ttl": "30m"}


def history(turns: int) -> list[Any]:
    """A long agent session, so the middleware trims it."""
    out: list[Any] = [HumanMessage("Audit the logs.")]
    for i in range(turns):
        call = {"id": f"call_{i}", "name": "read_log", "args": {"day": i}}
        out += [
            AIMessage(content="", tool_calls=[call]),
            ToolMessage(f"day {i}: " + "request served in 12 ms; " * 25, tool_call_id=f"call_{i}"),
        ]
    return [*out, HumanMessage("Summarize what you found.")]


def sent(config: rb.AssemblyConfig, **kwargs: Any) -> dict[str, Any]:
    """The body the OpenAI upstream receives from one run of an agent on ChatOpenAI."""
    with FakeUpstream() as upstream:
        model = ChatOpenAI(
            model="gpt-4o",
            api_key="sk-test",
            base_url=upstream.base_url + "/v1",
            max_retries=0,
            timeout=10,
            **kwargs,
        )
        agent = create_agent(model, [], middleware=[RingboundMiddleware(config)])
        agent.invoke({"messages": history(20)})
        (got,) = upstream.take()
    return got.body


def test_chat_openai_receives_the_cache_options() -> None:
    body = sent(CACHED)
    assert body["prompt_cache_options"] == OPTIONS
    assert len(body["messages"]) < len(history(20))  # trimmed, so the middleware ran
    marked = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert any("prompt_cache_breakpoint" in b for b in marked)
    plain = sent(dataclasses.replace(CACHED, prompt_cache_mode=None))
    assert "prompt_cache_options" not in plain


def test_the_callers_own_cache_options_are_kept_and_a_retention_takes_the_ttl_out() -> None:
    own = {"mode": "implicit"}
    body = sent(CACHED, extra_body={"prompt_cache_options": own})
    assert body["prompt_cache_options"] == own
    body = sent(CACHED, extra_body={"prompt_cache_retention": "24h"})
    assert body["prompt_cache_options"] == {"mode": "explicit"}
    assert body["prompt_cache_retention"] == "24h"


class SettingsRecordingModel(RecordingFakeModel):
    """The fake model, recording the settings each call is made with."""

    settings: list[dict[str, Any]] = Field(default_factory=list)

    def _generate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.settings.append(kwargs)
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize(("provider", "expected"), [("openai_chat", OPTIONS), ("anthropic", None)])
def test_only_a_model_speaking_openais_format_gets_them(provider: str, expected: Any) -> None:
    model = SettingsRecordingModel(messages=iter([AIMessage(content="done")]), settings=[])
    middleware = RingboundMiddleware(CACHED, provider=provider)
    create_agent(model, [], middleware=[middleware]).invoke({"messages": history(20)})
    (settings,) = model.settings
    assert settings.get("extra_body", {}).get("prompt_cache_options") == expected
