"""OpenAI Chat Completions: insertions in its native message shape."""

from __future__ import annotations

from typing import Any

from .._core import SYNTHESIZED_RESULT_TEXT

__all__ = ["ledger_note", "synthesized_result"]


def synthesized_result(call_id: str) -> dict[str, Any]:
    """The error result inserted for a call that has none (``synthesize_error_results``)."""
    return {"role": "tool", "tool_call_id": call_id, "content": SYNTHESIZED_RESULT_TEXT}


def ledger_note(text: str, role: str) -> dict[str, Any]:
    """The side-effect ledger note, as an instruction message of the conversation's own role."""
    return {"role": role, "content": text}
