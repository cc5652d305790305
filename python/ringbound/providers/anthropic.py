"""Anthropic Messages API: the core reads the request, checks Anthropic's own pairing rules
(quoting its 400 wording) and maps it onto the canonical view, each part at its real cost
(``rust/src/providers/anthropic``), and writes the request the plan describes: messages that
alternate, with the ledger note in the top-level ``system``. This module reads what the core
needs from Python (the system, tools, SDK objects); the Python rendering it had is the tests'
oracle for the core's writing (``tests/providers/anthropic_oracle.py``).

The API combines consecutive same-role messages into one turn, so a *turn* (a run of same-role
messages) is the native item here: the core maps it to one canonical assistant message, or one
canonical tool message per ``tool_result`` plus one user message for the rest, all in one group.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._core import LEDGER_MARKER
from ..errors import InvalidMessageError
from .base import (
    NativeAdapter,
    UnreadableObject,
    as_mapping,
    is_summary_note,
    split_system_note,
)

__all__ = ["ADAPTER", "AnthropicAdapter"]


def _invalid(i: int | None, reason: str) -> InvalidMessageError:
    prefix = f"messages[{i}]: " if i is not None else ""
    return InvalidMessageError(prefix + reason, index=i, reason=reason)


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _plain(obj: Any) -> dict[str, Any] | None:
    """A dict view of a message or block (SDK pydantic objects through ``model_dump``)."""
    try:
        data = as_mapping(obj)
    except UnreadableObject:
        return None
    if data is None:
        return None
    return data if isinstance(data, dict) else dict(data)


# --- system -----------------------------------------------------------------------------------


def _is_note(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(LEDGER_MARKER)


def _system_blocks(system: Any) -> list[dict[str, Any]] | None:
    """The system as text blocks (None for a string or no system); InvalidMessageError if it
    is neither a string nor a list of text blocks."""
    if system is None or isinstance(system, str):
        return None
    if isinstance(system, (bytes, Mapping)) or not isinstance(system, Sequence):
        raise _invalid(
            None, f"system must be a string or a list of text blocks, got {_type_name(system)}"
        )
    out = []
    for k, obj in enumerate(system):
        block = _plain(obj)
        if block is None or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _invalid(None, f"system[{k}] must be a text block {{type: text, text: str}}")
        out.append(block)
    return out


def _is_any_note(text: Any) -> bool:
    return _is_note(text) or is_summary_note(text)


def _system_parts(system: Any) -> tuple[list[str], str | None, str | None]:
    """The caller's system texts, and the ledger note and the summary note an earlier assembly
    left in it."""
    blocks = _system_blocks(system)
    if blocks is None:
        if not system:
            return [], None, None
        base, note, summary = split_system_note(system)
        return ([base] if base else []), note, summary
    texts = [b["text"] for b in blocks if not _is_any_note(b["text"])]
    notes = [b["text"] for b in blocks if _is_note(b["text"])]
    summaries = [b["text"] for b in blocks if is_summary_note(b["text"])]
    return texts, (notes[-1] if notes else None), (summaries[-1] if summaries else None)


#: ``json.dumps`` with any option builds a new encoder per call; one made once writes the same.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _compact(value: Any) -> str:
    try:
        return _COMPACT.encode(value)
    except Exception as e:  # not JSON, or the caller's own object raised while read
        reason = f"a value is not JSON ({type(e).__name__}: {e})"
        raise InvalidMessageError(reason, index=None, reason=reason) from None


def _without_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _cache_markers(blocks: Sequence[Any]) -> int:
    return sum(1 for b in blocks if (_plain(b) or {}).get("cache_control") is not None)


class AnthropicAdapter(NativeAdapter):
    """The Anthropic Messages API (``/v1/messages``).

    The core's check also drops what the API ignores before the latest ``compaction``
    block.
    """

    key = "anthropic"
    image_formula = "anthropic"
    #: Claude tokens per o200k token: Claude's tokenizer (Claude 3 to 4.6) measured at +16%
    #: (English), +21% (math), +30% (Python) against GPT-4o's o200k; the top of that range.
    default_token_ratio = 1.3
    items_field = "messages"

    # -- validation --------------------------------------------------------------------------

    def system_texts(self, system: Any) -> list[list[str]]:
        """The system as the core counts it: the caller's texts, then the ledger note and the
        summary note an earlier assembly appended, one system message each."""
        texts, note, summary = _system_parts(system)
        return ([texts] if texts else []) + [[t] for t in (note, summary) if t is not None]

    def system_markers(self, system: Any) -> int:
        """The ``cache_control`` markers a system sent as it is carries: they count against
        the request's 4 (the core's native body path checks the kept items' against the
        rest)."""
        return _cache_markers(system) if isinstance(system, list) else 0

    # -- tools and conversion ----------------------------------------------------------------

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """Anthropic tool definitions as OpenAI functions; server tools (``type`` other than
        ``custom``) by their definition. The core adds the tool-use system prompt Anthropic
        adds whenever tools are given.

        Raises:
            InvalidMessageError: ``tools`` is not a list of tool objects.
        """
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise _invalid(
                None, f"tools must be a list of tool objects, got {type(tools).__name__}"
            )
        out = []
        for k, obj in enumerate(tools):
            tool = _plain(obj)
            if tool is None or not isinstance(tool.get("name"), str):
                raise _invalid(None, f"tools[{k}] must be an object with a string `name`")
            schema = tool.get("input_schema")
            if isinstance(schema, Mapping):
                description = tool.get("description")
                function = {
                    "name": tool["name"],
                    "description": description if isinstance(description, str) else "",
                    "parameters": schema,
                }
            else:
                function = {
                    "name": tool["name"],
                    "description": _compact(_without_cache_control(tool)),
                }
            out.append({"type": "function", "function": function})
        return out


#: The adapter ``ringbound.providers.adapter("anthropic")`` returns.
ADAPTER = AnthropicAdapter()
