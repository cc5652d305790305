"""Which provider's format a request body is in: the keys only that format uses, then, when
several formats fit, the providers' own parsers and the body's ``model`` as a hint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .counting import validate
from .errors import InvalidMessageError, RingboundError
from .providers.openai_responses import ITEM_TYPES

__all__ = ["detect_provider", "provider_candidates"]


def _items(body: Mapping[str, Any]) -> list[Any]:
    for key in ("messages", "input", "contents"):
        value = body.get(key)
        if isinstance(value, list):
            return value
    return []


def _blocks(items: Sequence[Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        out.append(item)
        for key in ("content", "parts"):
            value = item.get(key)
            if isinstance(value, list):
                out.extend(v for v in value if isinstance(v, Mapping))
    return out


#: Input item types only an OpenAI Responses input carries: every type the Responses adapter
#: and the core's parser read (``message`` too, as no other format's request messages carry
#: a ``type``), and ``item_reference``, which they refuse by name.
#: tests/test_detect_responses.py checks this against the list the core's refusals give.
_RESPONSES_ITEMS = frozenset({*ITEM_TYPES, "item_reference"})
#: Content part types only a Responses message carries (OpenAI Chat's are ``text``,
#: ``image_url``, ``input_audio``, ``file``, ``refusal``).
_RESPONSES_PARTS = frozenset({"input_text", "input_image", "input_file", "output_text"})


def _votes(body: Mapping[str, Any]) -> set[str]:
    votes: set[str] = set()
    if "contents" in body or "systemInstruction" in body or "system_instruction" in body:
        votes.add("gemini")
    if "input" in body or "instructions" in body:
        votes.add("openai_responses")
    if "toolConfig" in body or "inferenceConfig" in body:
        votes.add("bedrock_converse")
    items = _items(body)
    # Item types are read on the items alone: a content block may share a name with one
    # (Anthropic's `compaction` block is no Responses compaction item).
    kinds = {
        t for item in items if isinstance(item, Mapping) and isinstance(t := item.get("type"), str)
    }
    if kinds & _RESPONSES_ITEMS:
        votes.add("openai_responses")
    for block in _blocks(items):
        kind = block.get("type")
        if kind in ("tool_use", "tool_result", "thinking", "redacted_thinking"):
            votes.add("anthropic")
        elif isinstance(kind, str) and kind in _RESPONSES_PARTS:
            votes.add("openai_responses")
        if "toolUse" in block or "toolResult" in block or "reasoningContent" in block:
            votes.add("bedrock_converse")
        if any(k in block for k in ("functionCall", "functionResponse", "function_call")):
            votes.add("gemini" if "type" not in block else "openai_responses")
        if "tool_calls" in block or block.get("role") == "tool":
            votes.add("openai_chat")
        if block.get("role") == "model":
            votes.add("gemini")
    if isinstance(body.get("system"), (str, list)) and "messages" in body:
        if not votes & {"openai_chat", "bedrock_converse"}:
            votes.add("anthropic")
    if not votes and isinstance(body.get("messages"), list):
        # Plain text turns read the same in OpenAI Chat and Anthropic.
        votes.update(("openai_chat", "anthropic"))
    return votes


#: Model name prefixes that say which provider a body was written for (only consulted among
#: the formats a body fits).
_MODEL_HINTS = (
    ("claude", "anthropic"),
    ("anthropic.", "bedrock_converse"),
    ("us.anthropic.", "bedrock_converse"),
    ("eu.anthropic.", "bedrock_converse"),
    ("gemini", "gemini"),
    ("gpt-", "openai_chat"),
    ("chatgpt", "openai_chat"),
    ("o1", "openai_chat"),
    ("o3", "openai_chat"),
    ("o4", "openai_chat"),
)


def _parses(provider: str, body: Mapping[str, Any]) -> bool:
    """Whether ``provider``'s own parser reads the body's items (and system, where it has
    one) without a typed error."""
    system = body.get("system") if provider == "anthropic" else None
    try:
        validate(_items(body), provider, system=system)
    except RingboundError:
        return False
    return True


def _narrowed(body: Mapping[str, Any], votes: set[str]) -> set[str]:
    """The candidates whose parsers read the body; among several, the one its ``model``
    names, if any."""
    read = {p for p in votes if _parses(p, body)} or votes
    model = body.get("model")
    if len(read) > 1 and isinstance(model, str):
        hinted = {p for prefix, p in _MODEL_HINTS if model.lower().startswith(prefix)}
        if len(hinted & read) == 1:
            return hinted & read
    return read


def provider_candidates(payload: Any) -> set[str]:
    """Every provider whose format a request body fits (empty when none)."""
    body = {"messages": payload} if isinstance(payload, list) else payload
    return _votes(body) if isinstance(body, Mapping) else set()


def detect_provider(payload: Any) -> str:
    """The provider key of a request body (``openai_chat``, ``openai_responses``, ``anthropic``,
    ``gemini``, ``bedrock_converse``).

    A bare list is read as the message list of a body. When the keys fit several formats,
    each one's parser is asked (an OpenAI Chat ``system`` message is no Anthropic message),
    then the body's ``model`` breaks a remaining tie (``claude-*``, ``gpt-*``, ``gemini-*``,
    ...). Raises InvalidMessageError when the body fits no format, or still fits several (a
    plain text conversation without a ``model`` is valid OpenAI Chat and Anthropic alike:
    pass ``provider=`` explicitly then).

    Example:
        >>> import ringbound as rb
        >>> rb.detect_provider({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
        'gemini'
        >>> rb.detect_provider({"model": "m", "input": [{"type": "function_call_output",
        ...                     "call_id": "c", "output": "ok"}]})
        'openai_responses'
        >>> rb.detect_provider({"model": "gpt-4o", "messages": [
        ...     {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]})
        'openai_chat'
    """
    body = {"messages": payload} if isinstance(payload, list) else payload
    if not isinstance(body, Mapping):
        raise InvalidMessageError(
            f"a request body must be an object or a list, got {type(payload).__name__}",
            index=None,
        )
    try:
        votes = _votes(body)
        if len(votes) > 1:
            votes = _narrowed(body, votes)
    except RecursionError:
        raise InvalidMessageError("the request body is nested too deeply", index=None) from None
    except Exception as e:  # the caller's mapping or list raised while it was read
        raise InvalidMessageError(
            f"reading the request body raised {type(e).__name__}", index=None
        ) from e
    if len(votes) == 1:
        return votes.pop()
    if not votes:
        raise InvalidMessageError(
            "cannot tell the provider: the body has none of messages, input, contents",
            index=None,
        )
    raise InvalidMessageError(
        f"ambiguous request body: it fits {', '.join(sorted(votes))}; pass provider= explicitly",
        index=None,
        reason="ambiguous",
    )
