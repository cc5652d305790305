"""Provider counters: the provider's own count of an assembled request, through its official
SDK, for ``Assembler(cfg, counter=...)`` (``token_counter``) and for online calibration. Each
SDK is imported by the caller, never by ringbound: install the extra of the one you use
(``ringbound[openai]``, ``[anthropic]``, ``[gemini]``, ``[bedrock]``)."""

from __future__ import annotations

from typing import Any

from .anthropic import AnthropicCounter
from .base import DEFAULT_TIMEOUT_S, Counter
from .bedrock import BedrockCounter
from .gemini import GeminiCounter
from .openai import OpenAICounter

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "AnthropicCounter",
    "BedrockCounter",
    "Counter",
    "GeminiCounter",
    "OpenAICounter",
    "anthropic",
    "bedrock",
    "gemini",
    "openai",
]


def openai(client: Any, *, model: str, timeout: float = DEFAULT_TIMEOUT_S) -> OpenAICounter:
    """A counter over ``client.responses.input_tokens.count`` (``openai.OpenAI`` or
    ``AsyncOpenAI``); reads ``openai_responses`` and ``openai_chat`` requests."""
    return OpenAICounter(client, model=model, timeout=timeout)


def anthropic(client: Any, *, model: str, timeout: float = DEFAULT_TIMEOUT_S) -> AnthropicCounter:
    """A counter over ``client.messages.count_tokens`` (``anthropic.Anthropic`` or
    ``AsyncAnthropic``); reads ``anthropic`` requests."""
    return AnthropicCounter(client, model=model, timeout=timeout)


def gemini(client: Any, *, model: str, timeout: float = DEFAULT_TIMEOUT_S) -> GeminiCounter:
    """A counter over ``client.models.count_tokens`` (``google.genai.Client``, or its
    ``.aio`` for async); reads ``gemini`` requests."""
    return GeminiCounter(client, model=model, timeout=timeout)


def bedrock(client: Any, *, model: str, timeout: float = DEFAULT_TIMEOUT_S) -> BedrockCounter:
    """A counter over ``CountTokens`` of a boto3 ``bedrock-runtime`` client; reads
    ``bedrock_converse`` requests."""
    return BedrockCounter(client, model=model, timeout=timeout)
