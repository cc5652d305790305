"""Anthropic's count: ``client.messages.count_tokens`` (``POST /v1/messages/count_tokens``),
which takes the request as it would be sent: messages, system and tools."""

from __future__ import annotations

from typing import Any

from .base import Counter, plain

__all__ = ["AnthropicCounter"]


class AnthropicCounter(Counter):
    """``client.messages.count_tokens`` of an ``anthropic.Anthropic`` or
    ``anthropic.AsyncAnthropic`` client (or their Bedrock and Vertex variants)."""

    formats = ("anthropic",)
    name = "anthropic"

    def _prepare(self, client: Any) -> Any:
        # One attempt per count: the timeout is then the count's, not one of several tries.
        with_options = getattr(client, "with_options", None)
        return with_options(max_retries=0) if callable(with_options) else client

    def _method(self) -> Any:
        return getattr(getattr(self._sdk, "messages", None), "count_tokens", None)

    def _request(
        self, messages: list[Any], tools: list[Any] | None, system: Any, fmt: str
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": plain(messages),
            "timeout": self.timeout_s,
        }
        if tools:
            kwargs["tools"] = plain(tools)
        if system is not None:
            kwargs["system"] = plain(system)
        return kwargs

    def _tokens(self, answer: Any) -> Any:
        return answer.input_tokens
