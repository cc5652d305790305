"""The Python readers of Anthropic messages and the top-level system, which
``ringbound.providers.anthropic`` held until the core became the only reader. They stay as the
differential oracles for the core's reading (``tests/providers/test_system_read.py``,
``test_tools_read.py``), and the oracle's rendering (``tests/providers/anthropic_oracle.py``)
reads through them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ringbound._core import LEDGER_MARKER
from ringbound.errors import InvalidMessageError
from ringbound.providers.base import (
    UnreadableObject,
    as_mapping,
    guarded,
    is_summary_note,
    split_system_note,
)


@dataclass(frozen=True)
class _Msg:
    """One native message: its role and content blocks, read as plain dicts."""

    role: str
    blocks: list[dict[str, Any]]


def _need_str(i: int, d: Mapping[str, Any], key: str, where: str, *, empty: bool = True) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise _invalid(i, f"{where}.{key} must be a string, got {_type_name(v)}")
    if not empty and not v:
        raise _invalid(i, f"{where}.{key} is empty")
    return v


def _check_source(i: int, block: Mapping[str, Any], where: str, kinds: tuple[str, ...]) -> None:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise _invalid(i, f"{where}.source must be an object, got {_type_name(source)}")
    kind = source.get("type")
    if kind not in kinds:
        raise _invalid(i, f"{where}.source.type must be one of {', '.join(kinds)}, got {kind!r}")
    if kind == "base64":
        _need_str(i, source, "media_type", f"{where}.source")
        _need_str(i, source, "data", f"{where}.source")
    elif kind == "url":
        _need_str(i, source, "url", f"{where}.source")
    elif kind == "file":
        _need_str(i, source, "file_id", f"{where}.source")
    elif kind == "text":
        _need_str(i, source, "data", f"{where}.source")
    elif kind == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return
        if not isinstance(inner, list):
            raise _invalid(i, f"{where}.source.content must be a string or a list of blocks")
        for k, sub in enumerate(inner):
            _check_nested(i, sub, f"{where}.source.content[{k}]")


def _check_nested(i: int, obj: Any, where: str) -> dict[str, Any]:
    """A block inside a tool_result or a document: text, image, document, search_result."""
    block = _plain(obj)
    if block is None:
        raise _invalid(i, f"{where} must be an object, got {_type_name(obj)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _invalid(i, f"{where} has no string `type`")
    if kind == "text":
        _need_str(i, block, "text", where)
    elif kind == "image":
        _check_source(i, block, where, ("base64", "url", "file"))
    elif kind == "document":
        _check_source(i, block, where, ("base64", "text", "content", "url", "file"))
    return block


def _check_block(i: int, b: int, role: str, obj: Any) -> dict[str, Any]:
    where = f"content[{b}]"
    block = _plain(obj)
    if block is None:
        raise _invalid(i, f"{where} must be an object, got {_type_name(obj)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _invalid(i, f"{where} has no string `type`")
    if kind in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
        raise _invalid(i, f"{where} is a `{kind}` block, which only an assistant message carries")
    if kind in ("tool_result", "image", "document") and role != "user":
        raise _invalid(i, f"{where} is a `{kind}` block, which only a user message carries")
    if kind == "text":
        _need_str(i, block, "text", where)
    elif kind == "tool_use":
        _need_str(i, block, "id", where, empty=False)
        _need_str(i, block, "name", where)
        if not isinstance(block.get("input"), Mapping):
            raise _invalid(
                i, f"{where}.input must be an object, got {_type_name(block.get('input'))}"
            )
    elif kind == "tool_result":
        _need_str(i, block, "tool_use_id", where, empty=False)
        content = block.get("content")
        if isinstance(content, list):
            for k, sub in enumerate(content):
                _check_nested(i, sub, f"{where}.content[{k}]")
        elif content is not None and not isinstance(content, str):
            raise _invalid(
                i,
                f"{where}.content must be a string or a list of blocks, got {_type_name(content)}",
            )
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise _invalid(i, f"{where}.is_error must be a boolean, got {_type_name(is_error)}")
    elif kind == "thinking":
        _need_str(i, block, "thinking", where)
    elif kind == "redacted_thinking":
        _need_str(i, block, "data", where)
    elif kind in ("image", "document"):
        _check_nested(i, block, where)
    return block


def _read_message(i: int, obj: Any) -> _Msg:
    msg = _plain(obj)
    if msg is None:
        raise _invalid(i, f"a message must be an object, got {_type_name(obj)}")
    role = msg.get("role")
    if role == "system":
        raise _invalid(
            i,
            "role 'system' is not a message role in Anthropic's API: pass the system prompt "
            "as the top-level `system` parameter",
        )
    if role not in ("user", "assistant"):
        got = "missing `role`" if role is None else f"got {role!r}"
        raise _invalid(i, f"`role` must be 'user' or 'assistant' ({got})")
    if "content" not in msg:
        raise _invalid(i, "missing `content`")
    content = msg["content"]
    if isinstance(content, str):
        return _Msg(role, [{"type": "text", "text": content}])
    if not isinstance(content, (list, tuple)):
        raise _invalid(
            i, f"`content` must be a string or a list of blocks, got {_type_name(content)}"
        )
    return _Msg(role, [_check_block(i, b, role, blk) for b, blk in enumerate(content)])


def _read(messages: Any) -> list[_Msg]:
    return guarded(_read_uncached, messages)


def _read_uncached(messages: Any) -> list[_Msg]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise _invalid(
            None, f"messages must be a list of message objects, got {type(messages).__name__}"
        )
    return [_read_message(i, m) for i, m in enumerate(messages)]


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


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


def _cache_markers(blocks: Sequence[Any]) -> int:
    return sum(1 for b in blocks if (_plain(b) or {}).get("cache_control") is not None)


def _invalid(i: int | None, reason: str) -> InvalidMessageError:
    prefix = f"messages[{i}]: " if i is not None else ""
    return InvalidMessageError(prefix + reason, index=i, reason=reason)


def _plain(obj: Any) -> dict[str, Any] | None:
    """A dict view of a message or block (SDK pydantic objects through ``model_dump``)."""
    try:
        data = as_mapping(obj)
    except UnreadableObject:
        return None
    if data is None:
        return None
    return data if isinstance(data, dict) else dict(data)


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
