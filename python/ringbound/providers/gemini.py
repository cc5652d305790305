"""Gemini API (``generateContent``): ``contents`` of user and model turns whose parts carry text,
media, ``functionCall`` and ``functionResponse``. Pairing follows Gemini's turn rules (a response
turn right after its call turn, one response part per call part); kept contents are the
caller's own objects, and the side-effect ledger note travels in the system instruction.

The core reads the contents, checks those rules and writes the request a plan describes
(``rust/src/providers/gemini``), the system instruction and the tools included; this module
names the provider's wordings and figures and finds a response part for ``summary.recovery``.
The Python reading, canonical view and rendering it had are the tests' oracles
(``tests/native_readers/``, ``tests/providers/gemini_oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._core import (
    GEMINI_ALTERNATE,
    GEMINI_CALL_TURN_POSITION,
    GEMINI_COUNT_MISMATCH,
    GEMINI_RESPONSE_TURN_POSITION,
)
from ..errors import InvalidMessageError
from .base import (
    Canonical,
    NativeAdapter,
    UnreadableObject,
    as_mapping,
)

__all__ = [
    "ADAPTER",
    "ALTERNATE",
    "CALL_TURN_POSITION",
    "COUNT_MISMATCH",
    "RESPONSE_TURN_POSITION",
    "GeminiAdapter",
    "response_position",
]

# Gemini's 400 wordings, as the core's issues quote them (one home:
# rust/src/providers/gemini/mod.rs, where each names its public sources).
#: A response turn that does not answer every call of the call turn before it.
COUNT_MISMATCH = GEMINI_COUNT_MISMATCH
#: A call turn that follows neither a user turn nor a response turn.
CALL_TURN_POSITION = GEMINI_CALL_TURN_POSITION
#: Function responses that do not follow their call turn.
RESPONSE_TURN_POSITION = GEMINI_RESPONSE_TURN_POSITION
#: A history that opens with a model turn.
ALTERNATE = GEMINI_ALTERNATE


# --- reading native objects ------------------------------------------------------------------


def _view(obj: Any, where: str, index: int | None) -> Mapping[str, Any]:
    """A read-only mapping of a content, part or blob (SDK objects through ``model_dump``)."""
    try:
        data = as_mapping(obj)
    except UnreadableObject as e:
        raise _invalid(index, f"{where} {e}") from None
    if data is None:
        raise _invalid(index, f"{where} must be an object, got {type(obj).__name__}")
    return data


def _invalid(index: int | None, reason: str) -> InvalidMessageError:
    where = f"contents[{index}]: " if index is not None else "system_instruction: "
    return InvalidMessageError(where + reason, index=index, reason=reason)


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


# --- where a functionResponse stands (``summary.recovery`` reads a result by it) -------------


def _parts_of(obj: Any) -> list[Any]:
    parts = obj.get("parts") if isinstance(obj, Mapping) else getattr(obj, "parts", None)
    return list(parts or [])


def response_position(messages: Sequence[Any], canonical: Canonical, k: int) -> int | None:
    """The position among its content's parts of the functionResponse that canonical tool
    message ``k`` stands for (a content's tool messages stand for its functionResponse parts,
    in order); None if the content has no such part."""
    start = canonical.spans[k][0]
    nth = sum(
        1
        for j in range(k)
        if canonical.spans[j][0] == start and canonical.messages[j].get("role") == "tool"
    )
    positions = [
        p
        for p, part in enumerate(_parts_of(messages[start]))
        if _get(_view(part, "a part", start), "functionResponse", "function_response") is not None
    ]
    return positions[nth] if nth < len(positions) else None


# --- the adapter -----------------------------------------------------------------------------


class GeminiAdapter(NativeAdapter):
    """Gemini ``contents`` (dicts in REST camelCase or Python-SDK snake_case, or SDK objects).

    The core checks Gemini's turn rules: response turns, strays, and Gemini 3's
    ``thoughtSignature`` on the first functionCall part of each call step of the current turn,
    in a conversation whose calls are signed (kind ``missing_signature``).
    """

    key = "gemini"
    image_formula = "gemini"
    #: Gemini tokens per o200k token; see docs/providers/gemini.md for the measurement.
    default_token_ratio = 1.25
    items_field = "contents"
    raw_bytes = True


#: The adapter ``ringbound.providers.adapter("gemini")`` returns.
ADAPTER = GeminiAdapter()
