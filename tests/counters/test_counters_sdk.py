"""Each counter through its official SDK over a mock transport: the count the provider
answers, what the SDK sent, the deadline, failures, async clients."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from google import genai
from google.genai import types as genai_types
from sdk_mocks import FORMAT, Provider, bedrock_client, counter_for, session

import ringbound as rb

SDKS = ("openai", "anthropic", "gemini")


@pytest.mark.parametrize("name", SDKS)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_count_is_the_providers(name: str, asynchronous: bool) -> None:
    fmt = FORMAT[name]
    p = Provider(ratio=1.2)
    messages, system = session(fmt, 3)
    counter = counter_for(name, p, asynchronous=asynchronous)
    assert counter.is_async is asynchronous
    expected = p.count(fmt, messages, system, None)
    if asynchronous:
        got = asyncio.run(counter.acount(messages, system=system, format=fmt))
    else:
        got = counter.count(messages, system=system, format=fmt)
    assert got == expected
    # The system travelled with the request: the count would be smaller without it.
    assert got > p.count(fmt, messages, None, None)
    assert len(p.bodies) == 1


def test_gemini_developer_api_gets_system_and_tools_in_a_generate_content_request() -> None:
    p = Provider()
    messages, system = session("gemini", 2)
    tools = [{"functionDeclarations": [{"name": "read", "description": "Reads a log."}]}]
    counter_for("gemini", p).count(messages, system=system, tools=tools)
    assert list(p.bodies[0]) == ["generateContentRequest"]  # never both: the API says either
    request = p.bodies[0]["generateContentRequest"]
    assert request["model"] == "models/gemini-model" and request["contents"] == messages
    assert request["systemInstruction"] == system and request["tools"] == tools
    counter_for("gemini", p).count(messages)
    assert p.bodies[1] == {"contents": messages}


def test_gemini_on_vertex_sends_system_and_tools_beside_the_contents() -> None:
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={"totalTokens": 9})

    options = genai_types.HttpOptions(
        httpx_client=httpx.Client(transport=httpx.MockTransport(handler))
    )
    client = genai.Client(vertexai=True, api_key="test", http_options=options)
    messages, system = session("gemini", 1)
    tools = [{"functionDeclarations": [{"name": "read"}]}]
    assert (
        rb.counters.gemini(client, model="gemini-2.5-flash").count(
            messages, system=system, tools=tools
        )
        == 9
    )
    path, body = seen[0]
    assert path.endswith("/publishers/google/models/gemini-2.5-flash:countTokens")
    assert body["systemInstruction"] == system and body["tools"] == tools
    assert body["contents"][0]["parts"] == messages[0]["parts"]


def test_openai_reads_chat_requests_as_the_responses_items_they_stand_for() -> None:
    p = Provider()
    chat = [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": [{"type": "text", "text": "Read the log."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
    counter_for("openai", p).count(chat, tools=tools, format="openai_chat")
    body = p.bodies[0]
    assert [i.get("type") for i in body["input"]] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert body["input"][1]["content"] == [{"type": "input_text", "text": "Read the log."}]
    assert body["tools"] == [{"type": "function", "name": "read", "parameters": {"type": "object"}}]
    assert chat[1]["content"][0]["type"] == "text"  # the caller's request is untouched


@pytest.mark.parametrize("name", SDKS)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_slow_provider_times_out(name: str, asynchronous: bool) -> None:
    fmt = FORMAT[name]
    counter = counter_for(name, Provider(delay_s=0.5), asynchronous=asynchronous, timeout=0.05)
    messages, _ = session(fmt, 1)
    start = time.perf_counter()
    with pytest.raises(rb.CounterError) as info:
        if asynchronous:
            asyncio.run(counter.acount(messages, format=fmt))
        else:
            counter.count(messages, format=fmt)
    assert info.value.reason == "timeout"
    assert time.perf_counter() - start < 0.4  # the deadline, not the provider, ended the wait


@pytest.mark.parametrize("name", SDKS)
def test_a_refusal_is_a_counter_error_naming_the_sdk_exception(name: str) -> None:
    fmt = FORMAT[name]
    counter = counter_for(name, Provider(status=400))
    with pytest.raises(rb.CounterError) as info:
        counter.count(session(fmt, 1)[0], format=fmt)
    assert info.value.reason.startswith("exception:")
    assert "refused" not in str(info.value)  # the provider's text is not passed on


def test_bedrock_counts_the_converse_request() -> None:
    client, stub = bedrock_client()
    messages, system = session("bedrock_converse", 2)
    tools = [{"toolSpec": {"name": "read", "inputSchema": {"json": {"type": "object"}}}}]
    expected = {
        "modelId": "anthropic.claude-sonnet-4-5",
        "input": {
            "converse": {"messages": messages, "system": system, "toolConfig": {"tools": tools}}
        },
    }
    stub.add_response("count_tokens", {"inputTokens": 321}, expected)
    stub.add_response("count_tokens", {"inputTokens": 322}, expected)
    counter = rb.counters.bedrock(client, model="anthropic.claude-sonnet-4-5")
    with stub:
        assert counter.count(messages, system=system, tools=tools) == 321
        assert asyncio.run(counter.acount(messages, system=system, tools=tools)) == 322
    stub.assert_no_pending_responses()


def test_bedrock_times_out_and_fails_as_counter_errors() -> None:
    client, stub = bedrock_client()
    finished = threading.Event()

    def slow(**_: object) -> None:
        time.sleep(0.5)

    client.meta.events.register_first("before-parameter-build.bedrock-runtime.CountTokens", slow)
    client.meta.events.register(
        "after-call.bedrock-runtime.CountTokens", lambda **_: finished.set()
    )
    counter = rb.counters.bedrock(client, model="m", timeout=0.05)
    stub.add_response("count_tokens", {"inputTokens": 1})
    with stub:
        with pytest.raises(rb.CounterError) as info:
            counter.count([{"role": "user", "content": [{"text": "hi"}]}])
        # The call the deadline gave up on still ends on its pool thread; let it, so it does
        # not run into the next test.
        assert finished.wait(5)
    assert info.value.reason == "timeout"
    client, stub = bedrock_client()
    stub.add_client_error("count_tokens", "ValidationException", "bad model")
    with stub, pytest.raises(rb.CounterError) as info:
        rb.counters.bedrock(client, model="m").count(
            [{"role": "user", "content": [{"text": "hi"}]}]
        )
    assert info.value.reason == "exception:ValidationException"


def test_an_answer_without_a_count_is_malformed() -> None:
    client, stub = bedrock_client()
    stub.add_response("count_tokens", {"inputTokens": 0})
    counter = rb.counters.bedrock(client, model="m")
    counter._tokens = lambda answer: answer.get("missing")  # type: ignore[method-assign]
    with stub, pytest.raises(rb.CounterError) as info:
        counter.count([{"role": "user", "content": [{"text": "hi"}]}])
    assert info.value.reason == "malformed"


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(rb.ConfigError, match="not a openai SDK client"):
        rb.counters.openai(object(), model="m")
    with pytest.raises(rb.ConfigError) as info:
        counter_for("openai", Provider(), timeout=0)
    assert info.value.key == "timeout"
    with pytest.raises(rb.ConfigError) as info:
        rb.counters.anthropic(counter_for("anthropic", Provider()).client, model="")
    assert info.value.key == "model"
    async_counter = counter_for("anthropic", Provider(), asynchronous=True)
    with pytest.raises(rb.ConfigError, match="acount"):
        async_counter.count([{"role": "user", "content": "hi"}])
    with pytest.raises(rb.ConfigError, match="reads anthropic"):
        counter_for("anthropic", Provider()).count([], format="gemini")


def test_the_new_public_names_are_documented() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "calibration.md").read_text()
    names = ("Calibrator", "CounterError", "ProviderCount", "TokenAccount", "Usage", "read_usage")
    for name in (*names, "counters.openai", "counters.anthropic", "counters.gemini"):
        assert f"`rb.{name}" in page, name
    assert "`rb.counters.bedrock(" in page
