"""OpenAI Chat Completions: insertions and rewrites in its native message shape."""

from __future__ import annotations

from typing import Any

from .._core import SYNTHESIZED_RESULT_TEXT
from ..errors import InvalidMessageError
from .base import as_mapping

__all__ = ["ledger_note", "rewritten", "summary_note", "synthesized_result"]


def synthesized_result(call_id: str) -> dict[str, Any]:
    """The error result inserted for a call that has none (``synthesize_error_results``)."""
    return {"role": "tool", "tool_call_id": call_id, "content": SYNTHESIZED_RESULT_TEXT}


def ledger_note(text: str, role: str) -> dict[str, Any]:
    """The side-effect ledger note, as an instruction message of the conversation's own role."""
    return {"role": role, "content": text}


def summary_note(text: str, role: str) -> dict[str, Any]:
    """The summary note, as an instruction message of the conversation's own role."""
    return {"role": role, "content": text}


def rewritten(message: Any, kind: str, text: str) -> dict[str, Any]:
    """A new message: the caller's (a dict or an SDK object), with its content rewritten.

    ``truncated`` and ``deduped`` make a tool result's content the single text ``text``;
    ``media`` turns every image part into a text part ``text``. Every other field is kept and
    the caller's message is not changed.

    Example:
        >>> rewritten({"role": "tool", "tool_call_id": "c1", "content": "long"}, "deduped", "x")
        {'role': 'tool', 'tool_call_id': 'c1', 'content': 'x'}
    """
    data = as_mapping(message)
    if data is None:
        reason = f"a message must be an object, got {type(message).__name__}"
        raise InvalidMessageError(reason, reason=reason)
    out = dict(data)
    if kind == "media":
        content = out.get("content")
        if isinstance(content, list):
            out["content"] = [_without_image(part, text) for part in content]
    elif kind in ("truncated", "deduped"):
        out["content"] = text
    else:
        raise ValueError(f"unknown rewrite kind {kind!r}")
    return out


def _without_image(part: Any, text: str) -> Any:
    data = as_mapping(part)
    if data is not None and data.get("type") == "image_url":
        return {"type": "text", "text": text}
    return part
