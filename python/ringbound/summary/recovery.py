"""Recovering what truncation cut: the ``expand_message`` tool a model calls with the id a
shortened tool result names, and ``recover``, which finds that result's full text in the
caller's original history (ringbound keeps nothing between calls; the caller keeps the history).

The id is a hash of the result's full text, so an anchor from a history that has changed since
finds nothing rather than the wrong result.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _core
from ..adapted import read_canonical
from ..errors import InvalidMessageError, RingboundError
from ..payload import nesting_guard, snapshot
from ..providers import adapter, check_provider, check_system
from ..providers.base import Canonical, UnreadableObject, as_mapping
from ..providers.gemini import response_position

__all__ = [
    "EXPAND_MESSAGE",
    "AnchorNotFoundError",
    "InvalidAnchorError",
    "Recovered",
    "expand_message_tool",
    "recover",
]

#: The name of the recovery tool the truncation anchor tells the model to call.
EXPAND_MESSAGE = "expand_message"
_DESCRIPTION = (
    "Returns the full original text of a tool result that ringbound shortened to save context. "
    'Call it with the message_id the shortened result names ({"message_id": "rb-..."}).'
)
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message_id": {
            "type": "string",
            "description": 'The id the shortened result names: "rb-" and 16 hex digits.',
        }
    },
    "required": ["message_id"],
}
_ID = re.compile(r"rb-[0-9a-f]{16}")
_IN_TEXT = re.compile(r'"message_id"\s*:\s*"(rb-[0-9a-f]{16})"')


class InvalidAnchorError(RingboundError, ValueError):
    """The anchor names no message id.

    Attributes:
        anchor: The anchor as given.
    """

    def __init__(self, message: str, *, anchor: Any = None) -> None:
        super().__init__(message)
        self.anchor = anchor


class AnchorNotFoundError(RingboundError, LookupError):
    """No tool result of the history has the full text the id names (the history is not the
    one the anchor was made from, or the result has changed since).

    Attributes:
        message_id: The id looked for.
    """

    def __init__(self, message: str, *, message_id: str = "") -> None:
        super().__init__(message)
        self.message_id = message_id


@dataclass(frozen=True)
class Recovered:
    """A tool result found by its anchor.

    Attributes:
        index: Index in the caller's message list of the native message (or item) holding it.
        call_id: The id of the call it answers, as the canonical view names it (the native id
            where the provider has one).
        text: Its full text, exactly as truncation saw it.
        content: The caller's own content object of that result (not a copy).
    """

    index: int
    call_id: str
    text: str
    content: Any


def expand_message_tool(provider: str = "openai_chat") -> dict[str, Any]:
    """The ``expand_message`` tool definition in the provider's native tools shape (for Gemini,
    one entry of ``functionDeclarations``). A new object on each call.

    Example:
        >>> tool = expand_message_tool("anthropic")
        >>> tool["name"], tool["input_schema"]["required"]
        ('expand_message', ['message_id'])
    """
    provider = check_provider(provider)
    parameters = copy.deepcopy(_PARAMETERS)
    if provider == "openai_chat":
        return {
            "type": "function",
            "function": {
                "name": EXPAND_MESSAGE,
                "description": _DESCRIPTION,
                "parameters": parameters,
            },
        }
    if provider == "openai_responses":
        return {
            "type": "function",
            "name": EXPAND_MESSAGE,
            "description": _DESCRIPTION,
            "parameters": parameters,
        }
    if provider == "anthropic":
        return {"name": EXPAND_MESSAGE, "description": _DESCRIPTION, "input_schema": parameters}
    if provider == "gemini":
        return {"name": EXPAND_MESSAGE, "description": _DESCRIPTION, "parameters": parameters}
    return {
        "toolSpec": {
            "name": EXPAND_MESSAGE,
            "description": _DESCRIPTION,
            "inputSchema": {"json": parameters},
        }
    }


def recover(
    original_messages: Sequence[Any],
    anchor: Any,
    provider: str = "openai_chat",
    *,
    system: Any = None,
) -> Recovered:
    """The tool result an anchor names, found in the caller's original (untruncated) history.

    Args:
        original_messages: The history as the caller keeps it, in the provider's shape.
        anchor: The message id (``"rb-"`` and 16 hex digits); a text holding
            ``"message_id": "rb-..."`` (the shortened result itself); or the arguments of the
            model's ``expand_message`` call, as a mapping or a JSON string.
        provider: The provider whose shape ``original_messages`` has.
        system: The provider's top-level system, if it has one.

    Raises:
        InvalidAnchorError: The anchor names no id (or several different ones).
        AnchorNotFoundError: No tool result of the history has that id.
        InvalidMessageError: The history is malformed.

    Example:
        >>> history = [
        ...     {"role": "user", "content": "read it"},
        ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1",
        ...      "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        ...     {"role": "tool", "tool_call_id": "c1", "content": "the whole file"},
        ... ]
        >>> anchor = {"message_id": _core.content_id("the whole file")}
        >>> recover(history, anchor).text
        'the whole file'
    """
    provider = check_provider(provider)
    check_system(provider, system)
    message_id = _anchor_id(anchor)
    original_messages = snapshot(original_messages)
    with nesting_guard():
        return _recover(original_messages, message_id, provider, system)


def _recover(
    original_messages: list[Any], message_id: str, provider: str, system: Any
) -> Recovered:
    if provider == "openai_chat":
        canonical = Canonical(
            messages=[_chat_message(i, m) for i, m in enumerate(original_messages)],
            spans=[(i, i + 1) for i in range(len(original_messages))],
        )
    else:
        canonical = read_canonical(adapter(provider), original_messages, system)
    for k in reversed(range(len(canonical.messages))):
        message = canonical.messages[k]
        if _read(message, "role") != "tool":
            continue
        text = _full_text(_read(message, "content"))
        try:
            found = _core.content_id(text)
        except UnicodeEncodeError:
            continue  # not text ringbound could have cut (a lone surrogate): never this anchor
        if found != message_id:
            continue
        call_id = str(_read(message, "tool_call_id") or "")
        index, content = _native(provider, original_messages, canonical, k, call_id)
        return Recovered(index=index, call_id=call_id, text=text, content=content)
    raise AnchorNotFoundError(
        f"no tool result in the {len(original_messages)} messages given has the id "
        f"{message_id}: pass the original history the truncated request was assembled from",
        message_id=message_id,
    )


def _anchor_id(anchor: Any) -> str:
    value = anchor
    if isinstance(value, str):
        stripped = value.strip()
        if _ID.fullmatch(stripped):
            return stripped
        try:
            value = json.loads(stripped)
        except ValueError:
            value = stripped
    if isinstance(value, Mapping):
        try:
            found = value.get("message_id")
        except Exception as e:  # a caller's mapping whose get raises: still a bad anchor
            raise InvalidAnchorError(
                f"reading the anchor's message_id raised {type(e).__name__}: {e}", anchor=anchor
            ) from e
        if isinstance(found, str) and _ID.fullmatch(found.strip()):
            return found.strip()
        raise InvalidAnchorError(
            f"the anchor's message_id must be 'rb-' and 16 lowercase hex digits, got {found!r}",
            anchor=anchor,
        )
    if isinstance(value, str):
        ids = list(dict.fromkeys(_IN_TEXT.findall(value)))
        if len(ids) == 1:
            return ids[0]
        if ids:
            raise InvalidAnchorError(
                f"the text names {len(ids)} different message ids ({', '.join(ids)}); "
                "pass the one to recover",
                anchor=anchor,
            )
        raise InvalidAnchorError(
            'the text holds no anchor ({"message_id": "rb-" and 16 hex digits})', anchor=anchor
        )
    raise InvalidAnchorError(
        "an anchor is a message id, a text holding one, or expand_message's arguments "
        f"(a mapping or a JSON string), got {type(anchor).__name__}",
        anchor=anchor,
    )


def _chat_message(i: int, message: Any) -> Mapping[str, Any]:
    try:
        data = as_mapping(message)
    except UnreadableObject as e:
        raise InvalidMessageError(f"messages[{i}]: {e}", index=i, reason=str(e)) from None
    if data is None:
        reason = f"a message must be an object, got {type(message).__name__}"
        raise InvalidMessageError(f"messages[{i}]: {reason}", index=i, reason=reason)
    return data


def _full_text(content: Any) -> str:
    """A tool result's full text as the core sees it: its text parts joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        return ""
    # The parts as stored, as the core read them: a subclass's own __iter__ or get may raise.
    parts = list.copy(content) if isinstance(content, list) else tuple.__iter__(content)
    texts = []
    for part in parts:
        if isinstance(part, Mapping) and _read(part, "type") == "text":
            text = _read(part, "text")
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts)


def _read(obj: Mapping[str, Any], key: str) -> Any:
    """A message's or part's value: a dict's as stored, as the core reads it (a subclass's own
    ``get`` may raise); another mapping's through its ``get``, raising there being a
    malformed message."""
    if isinstance(obj, dict):
        return dict.get(obj, key)
    try:
        return obj.get(key)
    except Exception as e:
        reason = f"a message or content part cannot be read ({type(e).__name__}: {e})"
        raise InvalidMessageError(reason, reason=reason) from None


def _field(obj: Any, *names: str) -> Any:
    """The first of ``names`` an object (a mapping or an SDK object) sets."""
    for name in names:
        value = _read(obj, name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


#: Responses result items: their type -> (the field naming the call, the field holding the result).
_RESPONSES_RESULTS = {
    "function_call_output": ("call_id", "output"),
    "custom_tool_call_output": ("call_id", "output"),
    "mcp_approval_response": ("approval_request_id", "reason"),
    "mcp_call": ("id", "output"),
}
#: Anthropic and Bedrock result blocks: how to reach the result, its call id and its content.
_RESULT_BLOCKS = {
    "anthropic": (lambda b: b if _field(b, "type") == "tool_result" else None, "tool_use_id"),
    "bedrock_converse": (lambda b: _field(b, "toolResult"), "toolUseId"),
}
_ABSENT = object()


def _native(
    provider: str,
    messages: Sequence[Any],
    canonical: Canonical,
    k: int,
    call_id: str,
) -> tuple[int, Any]:
    """The native index and the caller's content object of canonical tool message ``k``."""
    start, end = canonical.spans[k]
    if provider == "openai_chat":
        return start, _field(messages[start], "content")
    if provider == "gemini":
        at = response_position(messages, canonical, k)
        if at is None:
            return start, None
        part = list(_field(messages[start], "parts"))[at]
        return start, _field(_field(part, "functionResponse", "function_response"), "response")
    for i in range(start, end):
        content = _result_content(provider, messages[i], call_id)
        if content is not _ABSENT:
            return i, content
    return start, None


def _result_content(provider: str, item: Any, call_id: str) -> Any:
    """The content of the result of ``call_id`` a native message (or item) holds, else
    ``_ABSENT``."""
    if provider == "openai_responses":
        fields = _RESPONSES_RESULTS.get(_field(item, "type"))
        if fields is not None and _field(item, fields[0]) == call_id:
            return _field(item, fields[1])
        return _ABSENT
    result_of, id_field = _RESULT_BLOCKS[provider]
    blocks = _field(item, "content")
    for block in blocks if isinstance(blocks, (list, tuple)) else ():
        result = result_of(block)
        if result is not None and _field(result, id_field) == call_id:
            return _field(result, "content")
    return _ABSENT
