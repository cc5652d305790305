"""Gemini's count: ``client.models.count_tokens`` of google-genai (``models:countTokens``).

The Gemini Developer API counts a system instruction and tools only inside a
``generateContentRequest`` (the SDK refuses them as config there), so they travel in that
field, which the API reads instead of ``contents``; on Vertex AI they go in the config."""

from __future__ import annotations

import math
from typing import Any

from .base import Counter, plain

__all__ = ["GeminiCounter"]


class GeminiCounter(Counter):
    """``models.count_tokens`` of a ``google.genai.Client`` (sync) or of its ``client.aio``
    (async)."""

    formats = ("gemini",)
    name = "gemini"

    def _method(self) -> Any:
        return getattr(getattr(self.client, "models", None), "count_tokens", None)

    def _vertex(self) -> bool:
        # An AsyncClient carries the settings of the Client it came from.
        api = getattr(self.client, "_api_client", None)
        return bool(getattr(api, "vertexai", False))

    def _request(
        self, messages: list[Any], tools: list[Any] | None, system: Any, fmt: str
    ) -> dict[str, Any]:
        contents = plain(messages)
        http: dict[str, Any] = {"timeout": math.ceil(self.timeout_s * 1000)}
        config: dict[str, Any] = {"http_options": http}
        system = plain(system) if system is not None else None
        tools = plain(tools) if tools else None
        if self._vertex():
            if system is not None:
                config["system_instruction"] = system
            if tools:
                config["tools"] = tools
        elif system is not None or tools:
            request: dict[str, Any] = {"model": f"models/{self.model}", "contents": contents}
            if system is not None:
                request["systemInstruction"] = system
            if tools:
                request["tools"] = tools
            http["extra_body"] = {"generateContentRequest": request}
        return {"model": self.model, "contents": contents, "config": config}

    def _tokens(self, answer: Any) -> Any:
        return answer.total_tokens
