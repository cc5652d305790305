"""The official SDK clients over their HTTP package's mock transport (httpx2 for openai and
anthropic, httpx for google-genai) and boto3 over botocore's Stubber: no network. The mock
provider counts a request as ringbound's raw count of it (no ratio) times a planted ratio, so
tests know what the provider will say and can plant the figure calibration must find."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import boto3
import httpx
import httpx2
import openai
from botocore.stub import Stubber
from google import genai
from google.genai import types as genai_types

import ringbound as rb

#: The provider key of each SDK's request format in these tests.
FORMAT = {
    "openai": "openai_responses",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "bedrock": "bedrock_converse",
}


@dataclass
class Provider:
    """What the mock provider answers: ``ratio`` x ringbound's raw count (times a seeded
    noise factor in [1 - noise, 1 + noise]), or a fixed ``tokens``; ``delay_s`` before
    answering; ``status`` other than 200 to fail."""

    ratio: float = 1.0
    noise: float = 0.0
    tokens: int | None = None
    delay_s: float = 0.0
    status: int = 200
    seed: int = 7
    #: Whether every request body is kept in ``bodies`` (a benchmark keeps none: a growing
    #: heap slows every garbage collection of the run).
    keep: bool = True
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def count(self, fmt: str, messages: Any, system: Any, tools: Any) -> int:
        if self.tokens is not None:
            return self.tokens
        raw = rb.count_tokens(messages, provider=fmt, system=system, tools=tools, token_ratio=1.0)
        factor = 1 + self.rng.uniform(-self.noise, self.noise) if self.noise else 1.0
        return math.ceil(raw * self.ratio * factor)


def _read(fmt: str, body: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The messages, system and tools of a count request's body."""
    if fmt == "openai_responses":
        return body["input"], body.get("instructions"), body.get("tools")
    if fmt == "anthropic":
        return body["messages"], body.get("system"), body.get("tools")
    request = body.get("generateContentRequest", body)
    return request["contents"], request.get("systemInstruction"), request.get("tools")


def _answer(p: Provider, fmt: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if p.keep:
        p.bodies.append(body)
    if p.status != 200:
        return p.status, {"error": {"type": "invalid_request_error", "message": "refused"}}
    tokens = p.count(fmt, *_read(fmt, body))
    if fmt == "gemini":
        return 200, {"totalTokens": tokens}
    if fmt == "openai_responses":
        return 200, {"object": "response.input_tokens", "input_tokens": tokens}
    return 200, {"input_tokens": tokens}


def _read_timeout(request: Any) -> float | None:
    """The read timeout the SDK set on this request (a real transport enforces it; the mock
    one does not, so the handlers below do)."""
    timeout = request.extensions.get("timeout") or {}
    return timeout.get("read")


def _handlers(p: Provider, fmt: str, module: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def sync(request: Any) -> Any:
        if p.delay_s:
            limit = _read_timeout(request)
            if limit is not None and limit < p.delay_s:
                time.sleep(limit)
                raise module.ReadTimeout("timed out", request=request)
            time.sleep(p.delay_s)
        status, payload = _answer(p, fmt, json.loads(request.content))
        return module.Response(status, json=payload)

    async def async_(request: Any) -> Any:
        if p.delay_s:
            await asyncio.sleep(p.delay_s)
        status, payload = _answer(p, fmt, json.loads(await request.aread()))
        return module.Response(status, json=payload)

    return sync, async_


def openai_client(p: Provider, *, asynchronous: bool = False) -> Any:
    sync, async_ = _handlers(p, "openai_responses", httpx2)
    if asynchronous:
        return openai.AsyncOpenAI(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(async_)),
        )
    return openai.OpenAI(
        api_key="test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(sync)),
    )


def anthropic_client(p: Provider, *, asynchronous: bool = False) -> Any:
    sync, async_ = _handlers(p, "anthropic", httpx2)
    if asynchronous:
        return anthropic.AsyncAnthropic(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(async_)),
        )
    return anthropic.Anthropic(
        api_key="test",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(sync)),
    )


def gemini_client(p: Provider, *, asynchronous: bool = False) -> Any:
    sync, async_ = _handlers(p, "gemini", httpx)
    options = genai_types.HttpOptions(
        httpx_client=httpx.Client(transport=httpx.MockTransport(sync)),
        httpx_async_client=httpx.AsyncClient(transport=httpx.MockTransport(async_)),
        retry_options=genai_types.HttpRetryOptions(attempts=1),
    )
    client = genai.Client(api_key="test", http_options=options)
    return client.aio if asynchronous else client


def bedrock_client() -> tuple[Any, Stubber]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    return client, Stubber(client)


def client_for(name: str, p: Provider, *, asynchronous: bool = False) -> Any:
    return {"openai": openai_client, "anthropic": anthropic_client, "gemini": gemini_client}[name](
        p, asynchronous=asynchronous
    )


def counter_for(
    name: str, p: Provider, *, asynchronous: bool = False, timeout: float = 2.0
) -> rb.counters.Counter:
    make = getattr(rb.counters, name)
    return make(
        client_for(name, p, asynchronous=asynchronous), model=f"{name}-model", timeout=timeout
    )


def session(fmt: str, rings: int, *, words: int = 40) -> tuple[list[Any], Any]:
    """A tool-using session of ``rings`` rings in format ``fmt``, and its top-level system."""
    text = "log line " * words
    if fmt == "anthropic":
        messages: list[Any] = [{"role": "user", "content": "Read every log."}]
        for i in range(rings):
            messages += [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"day": i}}
                    ],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": text}],
                },
            ]
        return messages, "Be careful."
    if fmt == "openai_responses":
        items: list[Any] = [{"role": "user", "content": "Read every log."}]
        for i in range(rings):
            items += [
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": "read",
                    "arguments": f'{{"day": {i}}}',
                },
                {"type": "function_call_output", "call_id": f"c{i}", "output": text},
            ]
        return items, "Be careful."
    if fmt == "gemini":
        contents: list[Any] = [{"role": "user", "parts": [{"text": "Read every log."}]}]
        for i in range(rings):
            contents += [
                {
                    "role": "model",
                    "parts": [{"functionCall": {"name": "read", "args": {"day": i}}}],
                },
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "read", "response": {"text": text}}}],
                },
            ]
        return contents, {"parts": [{"text": "Be careful."}]}
    converse: list[Any] = [{"role": "user", "content": [{"text": "Read every log."}]}]
    for i in range(rings):
        converse += [
            {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": f"t{i}", "name": "read", "input": {"day": i}}}
                ],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": f"t{i}", "content": [{"text": text}]}}],
            },
        ]
    return converse, [{"text": "Be careful."}]
