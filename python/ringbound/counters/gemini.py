"""Gemini's count: ``models:countTokens`` through a google-genai client.

On Vertex AI the request goes through ``client.models.count_tokens`` with the system
instruction and tools in its config. The Gemini Developer API counts those two only inside a
``generateContentRequest``, which the SDK's ``count_tokens`` cannot send (it refuses them as
config and always sends ``contents``, which the API takes as either-or with it). There the
request goes through the same client's own request method (``client._api_client``, what
``count_tokens`` itself calls): same authentication, transport and timeout, the body sent as
the REST API documents it. It also skips the SDK's conversion of every part to its pydantic
types and back, 80 ms for a 100-turn history on the mock transport."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson

from .base import Counter, plain

__all__ = ["GeminiCounter"]


class GeminiCounter(Counter):
    """``models.count_tokens`` of a ``google.genai.Client`` (sync) or of its ``client.aio``
    (async)."""

    formats = ("gemini",)
    name = "gemini"

    def _method(self) -> Any:
        return getattr(getattr(self._sdk, "models", None), "count_tokens", None)

    def _vertex(self) -> bool:
        # An AsyncClient carries the settings of the Client it came from.
        api = getattr(self._sdk, "_api_client", None)
        return bool(getattr(api, "vertexai", False))

    def _target(self) -> Callable[..., Any]:
        if self._vertex():
            return self._method()  # type: ignore[no-any-return]
        api = self.client._api_client
        return api.async_request if self.is_async else api.request  # type: ignore[no-any-return]

    def _request(
        self, messages: list[Any], tools: list[Any] | None, system: Any, fmt: str
    ) -> dict[str, Any]:
        contents = plain(messages)
        http: dict[str, Any] = {"timeout": math.ceil(self.timeout_s * 1000)}
        system = plain(system) if system is not None else None
        tools = plain(tools) if tools else None
        if self._vertex():
            config: dict[str, Any] = {"http_options": http}
            if system is not None:
                config["system_instruction"] = system
            if tools:
                config["tools"] = tools
            return {"model": self.model, "contents": contents, "config": config}
        body: dict[str, Any] = {"contents": contents}
        if system is not None or tools:
            request: dict[str, Any] = {"model": f"models/{self.model}", "contents": contents}
            if system is not None:
                request["systemInstruction"] = system
            if tools:
                request["tools"] = tools
            body = {"generateContentRequest": request}
        return {
            "http_method": "post",
            "path": f"models/{self.model}:countTokens",
            "request_dict": body,
            "http_options": http,
        }

    def _tokens(self, answer: Any) -> Any:
        if hasattr(answer, "total_tokens"):
            return answer.total_tokens
        # The REST answer; proto3 JSON leaves a zero count out.
        return orjson.loads(answer.body or b"{}").get("totalTokens", 0)
