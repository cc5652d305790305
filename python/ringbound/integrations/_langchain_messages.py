"""LangChain messages in the chat shape the core plans, and a plan's result as LangChain
messages again: kept messages are the caller's own objects, rewritten ones copies of them,
notes and synthesized results new messages. Needs only ``langchain-core``."""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from .._core import SYNTHESIZED_RESULT_TEXT
from ..cache_markers import BREAKPOINT, unmarked
from ..errors import ConfigError, InvalidMessageError
from ..notes import is_note

__all__ = ["from_chat", "note_message", "result", "to_chat", "tools_to_chat"]


def to_chat(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """One chat message per LangChain message (``AIMessage.tool_calls`` as ``tool_calls``,
    ``ToolMessage.tool_call_id``, content blocks as chat parts), as LangChain's own
    ``convert_to_openai_messages`` writes them.

    Raises:
        InvalidMessageError: A message is not a LangChain message, or LangChain cannot map it
            onto one chat message (the error names its index).
    """
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, BaseMessage):
            raise _invalid(i, f"a LangChain message list holds a {type(m).__name__}")
        try:
            # A list, not the message: given one message, LangChain returns only the first
            # of the chat messages it maps onto.
            chat = convert_to_openai_messages([m])
        except Exception as e:  # LangChain raises several kinds for blocks it cannot map
            raise _invalid(i, f"LangChain cannot map it ({type(e).__name__}: {e})") from None
        if len(chat) != 1:
            raise _invalid(
                i, f"it maps onto {len(chat)} chat messages (tool_result blocks?), not one"
            )
        out.append(chat[0])
    return out


def tools_to_chat(tools: Sequence[Any] | None) -> list[Any] | None:
    """Tools (LangChain tools, functions, or dicts) in the chat ``tools`` shape, counted as the
    model will receive them.

    Raises:
        ConfigError: A tool cannot be converted.
    """
    if tools is None:
        return None
    out = []
    for i, tool in enumerate(tools):
        try:
            out.append(convert_to_openai_tool(tool))
        except Exception as e:  # LangChain raises ValueError, TypeError, ... by tool kind
            raise ConfigError(
                f"tools[{i}]: cannot read it as a tool ({type(e).__name__}: {e})",
                key="tools",
                reason="must be tools LangChain can bind",
            ) from None
    return out


def note_message(chat: dict[str, Any]) -> BaseMessage:
    """A ledger or summary note as a LangChain message of its role."""
    if chat.get("role") == "user":
        return HumanMessage(content=chat["content"])
    return SystemMessage(content=chat["content"])


def from_chat(
    out: Sequence[Any], originals: Sequence[BaseMessage], chat: Sequence[Any], report: Any
) -> list[BaseMessage]:
    """The planned chat messages ``out`` as LangChain messages. ``chat`` is ``to_chat`` of
    ``originals``; the report says which of them were rewritten and which calls repaired."""
    by_id = {id(c): i for i, c in enumerate(chat)}
    rewritten = sorted({r.index for r in report.rewrites})
    repairs = set(report.repairs)
    last = -1
    messages: list[BaseMessage] = []
    for m in out:
        k = by_id.get(id(m))
        if k is not None:
            messages.append(originals[k])
            last = k
        elif is_note(m):
            messages.append(note_message(m))
        elif (
            m.get("role") == "tool"
            and m.get("tool_call_id") in repairs
            and m.get("content") == SYNTHESIZED_RESULT_TEXT
        ):
            messages.append(
                ToolMessage(content=m["content"], tool_call_id=m["tool_call_id"], status="error")
            )
        else:
            # A copy carrying a cache breakpoint (``prompt_cache_mode``) of a kept original,
            # else of the next rewritten one: the caller's message with the copy's content.
            k = _marked_original(m, chat, last)
            if k is None:
                k = rewritten[bisect.bisect_right(rewritten, last)]
            last = k
            messages.append(originals[k].model_copy(update={"content": m["content"]}))
    return messages


def _marked_original(m: Any, chat: Sequence[Any], after: int) -> int | None:
    """The index in ``chat`` past ``after`` of the message ``m`` is a marked copy of (equal
    to it but for ``prompt_cache_breakpoint``), or None when ``m`` carries no breakpoint."""
    content = m.get("content")
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and BREAKPOINT in b for b in content
    ):
        return None
    plain = unmarked(content)
    for k in range(after + 1, len(chat)):
        c = chat[k]
        same = c.get("role") == m.get("role") and c.get("tool_call_id") == m.get("tool_call_id")
        if same and unmarked(c.get("content")) == plain:
            return k
    return None


def result(res: Any, originals: Sequence[BaseMessage], chat: Sequence[Any], tools: Any) -> Any:
    """An ``AssemblyResult`` of chat messages as one of the caller's LangChain messages and
    tools."""
    return dataclasses.replace(
        res,
        messages=from_chat(res.messages, originals, chat, res.report),
        tools=None if res.tools is None else tools,
    )


def _invalid(i: int, reason: str) -> InvalidMessageError:
    return InvalidMessageError(f"messages[{i}]: {reason}", index=i, reason=reason)
