"""Bedrock's count: the ``CountTokens`` operation of a boto3 ``bedrock-runtime`` client, given
the Converse request (messages, system, toolConfig). boto3 has no per-call timeout, so the
deadline is the shared base's."""

from __future__ import annotations

from typing import Any

from .base import Counter, plain

__all__ = ["BedrockCounter"]


class BedrockCounter(Counter):
    """``client.count_tokens`` of a boto3 ``bedrock-runtime`` client (sync; ``acount`` runs it
    in a worker thread)."""

    formats = ("bedrock_converse",)
    name = "bedrock"
    sdk_deadline = False

    def _method(self) -> Any:
        return getattr(self.client, "count_tokens", None)

    def _request(
        self, messages: list[Any], tools: list[Any] | None, system: Any, fmt: str
    ) -> dict[str, Any]:
        converse: dict[str, Any] = {"messages": plain(messages)}
        if system is not None:
            converse["system"] = plain(system)
        if tools:
            converse["toolConfig"] = {"tools": plain(tools)}
        return {"modelId": self.model, "input": {"converse": converse}}

    def _tokens(self, answer: Any) -> Any:
        return answer["inputTokens"]
