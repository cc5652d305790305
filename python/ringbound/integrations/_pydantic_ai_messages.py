"""Pydantic AI messages in the chat shape the core plans, and a plan's result as Pydantic AI
messages again. A ``ModelRequest`` holds several parts (system prompt, user prompt, tool
returns), each one chat message; a ``ModelResponse`` is one assistant message. A request the
plan keeps whole is the caller's own object; one it keeps in part is a copy with the parts
kept; notes and synthesized results are new parts of the request beside them."""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ToolReturnPart,
    UserPromptPart,
)

from .._core import SYNTHESIZED_RESULT_TEXT
from ..errors import InvalidMessageError
from ..notes import is_note

__all__ = ["Chat", "from_chat", "to_chat"]


@dataclasses.dataclass
class Chat:
    """The chat view of a history: ``messages[k]`` came from part ``parts[k]`` of message
    ``owners[k]`` (a response is one message: its part is None)."""

    messages: list[dict[str, Any]]
    owners: list[int]
    parts: list[int | None]


def to_chat(history: Sequence[ModelMessage]) -> Chat:
    """The chat view of ``history``.

    Raises:
        InvalidMessageError: An item is not a Pydantic AI message (the error names its index).
    """
    chat = Chat([], [], [])
    for i, m in enumerate(history):
        if isinstance(m, ModelRequest):
            for j, part in enumerate(m.parts):
                chat.messages.append(_request_part(part))
                chat.owners.append(i)
                chat.parts.append(j)
        elif isinstance(m, ModelResponse):
            chat.messages.append(_response(m))
            chat.owners.append(i)
            chat.parts.append(None)
        else:
            reason = f"a Pydantic AI history holds a {type(m).__name__}"
            raise InvalidMessageError(f"messages[{i}]: {reason}", index=i, reason=reason)
    return chat


def from_chat(
    out: Sequence[Any], history: Sequence[ModelMessage], chat: Chat, report: Any
) -> list[ModelMessage]:
    """The planned chat messages ``out`` as Pydantic AI messages."""
    by_id = {id(c): k for k, c in enumerate(chat.messages)}
    rewritten = sorted({r.index for r in report.rewrites})
    names = _call_names(history)
    last = -1
    # Runs of (owner, parts): owner None for new parts that join the request beside them.
    groups: list[tuple[int | None, list[Any]]] = []
    for m in out:
        k = by_id.get(id(m))
        if k is None and not is_note(m) and not _synthesized(m, report):
            last = rewritten[bisect.bisect_right(rewritten, last)]
            k = -1 - last  # a rewrite of chat message ``last``
        if k is None:
            groups.append((None, [_new_part(m, names)]))
            continue
        source = k if k >= 0 else -1 - k
        last = max(last, source)
        owner, j = chat.owners[source], chat.parts[source]
        if j is None:
            groups.append((owner, [history[owner]]))
            continue
        part = history[owner].parts[j]  # type: ignore[union-attr]
        if k < 0:
            part = _rewritten(part, m["content"])
        if groups and groups[-1][0] == owner:
            groups[-1][1].append(part)
        else:
            groups.append((owner, [part]))
    return _messages(_attach(groups, history), history)


def _request_part(part: Any) -> dict[str, Any]:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, RetryPromptPart):
        if part.tool_name is not None:
            return {"role": "tool", "tool_call_id": part.tool_call_id, "content": _text(part)}
        return {"role": "user", "content": _text(part)}
    if isinstance(part, BaseToolReturnPart) and not isinstance(part, NativeToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": _text(part)}
    return {"role": "user", "content": _text(part)}


def _response(m: ModelResponse) -> dict[str, Any]:
    texts: list[str] = []
    calls = []
    for part in m.parts:
        if isinstance(part, BaseToolCallPart) and not isinstance(part, NativeToolCallPart):
            calls.append(
                {
                    "id": part.tool_call_id,
                    "type": "function",
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
        elif isinstance(part, TextPart):
            texts.append(part.content)
        else:
            # Thinking, server-side tool calls and their returns, files: sent back by some
            # models, so counted as the text they hold.
            texts.append(_text(part))
    out: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
    if calls:
        out["tool_calls"] = calls
    return out


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            parts.append({"type": "text", "text": item})
        elif isinstance(item, TextContent):
            parts.append({"type": "text", "text": item.content})
        elif isinstance(item, ImageUrl):
            parts.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(item, BinaryContent) and item.is_image:
            parts.append({"type": "image_url", "image_url": {"url": item.data_uri}})
        else:
            parts.append({"type": "text", "text": _text(item)})
    return parts


def _text(part: Any) -> str:
    """What a part says to the model, as text."""
    for name in ("model_response_str", "model_response"):
        method = getattr(part, name, None)
        if callable(method):
            return str(method())
    for name in ("content", "url", "args"):
        value = getattr(part, name, None)
        if value is not None:
            return value if isinstance(value, str) else json.dumps(value, default=str)
    return type(part).__name__


def _synthesized(m: dict[str, Any], report: Any) -> bool:
    return (
        m.get("role") == "tool"
        and m.get("tool_call_id") in report.repairs
        and m.get("content") == SYNTHESIZED_RESULT_TEXT
    )


def _new_part(m: dict[str, Any], names: dict[str, str]) -> Any:
    """A note or a synthesized result as a request part."""
    if m["role"] == "tool":
        call_id = m["tool_call_id"]
        return ToolReturnPart(
            tool_name=names.get(call_id, ""), content=m["content"], tool_call_id=call_id
        )
    if m["role"] == "user":
        return UserPromptPart(content=m["content"])
    return SystemPromptPart(content=m["content"])


def _rewritten(part: Any, content: Any) -> Any:
    """``part`` with the content a cheap stage gave its chat message."""
    if isinstance(content, list):
        content = [p["text"] if p.get("type") == "text" else p for p in content]
    return dataclasses.replace(part, content=content)


def _call_names(history: Sequence[ModelMessage]) -> dict[str, str]:
    return {
        p.tool_call_id: p.tool_name
        for m in history
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, BaseToolCallPart)
    }


def _attach(
    groups: list[tuple[int | None, list[Any]]], history: Sequence[ModelMessage]
) -> list[tuple[int | None, list[Any]]]:
    """New parts join the request after them (at its head), else the request before them
    (at its end); only between two responses do they make a request of their own."""
    out: list[tuple[int | None, list[Any]]] = []
    pending: list[Any] = []
    for owner, parts in groups:
        if owner is None:
            pending += parts
        elif isinstance(history[owner], ModelRequest):
            if out and out[-1][0] == owner:  # a note between two parts of one request
                out[-1][1].extend([*pending, *parts])
            else:
                out.append((owner, [*pending, *parts]))
            pending = []
        else:
            if pending:
                if out and out[-1][0] is not None and isinstance(history[out[-1][0]], ModelRequest):
                    out[-1][1].extend(pending)
                else:
                    out.append((None, pending))
                pending = []
            out.append((owner, parts))
    if pending:
        if out and out[-1][0] is not None and isinstance(history[out[-1][0]], ModelRequest):
            out[-1][1].extend(pending)
        else:
            out.append((None, pending))
    return out


def _messages(
    groups: list[tuple[int | None, list[Any]]], history: Sequence[ModelMessage]
) -> list[ModelMessage]:
    out: list[ModelMessage] = []
    for owner, parts in groups:
        if owner is None:
            out.append(ModelRequest(parts=parts))
            continue
        original = history[owner]
        if isinstance(original, ModelResponse):
            out.append(original)
        elif len(parts) == len(original.parts) and all(
            a is b for a, b in zip(parts, original.parts, strict=True)
        ):
            out.append(original)
        else:
            out.append(dataclasses.replace(original, parts=parts))
    return out
