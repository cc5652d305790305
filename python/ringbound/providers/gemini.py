"""Gemini API (``generateContent``): ``contents`` of user and model turns whose parts carry text,
media, ``functionCall`` and ``functionResponse``. Pairing follows Gemini's turn rules (a response
turn right after its call turn, one response part per call part); kept contents are the
caller's own objects, and the side-effect ledger note travels in the system instruction.

The core reads the contents, checks those rules and writes the request a plan describes
(``rust/src/providers/gemini``); this module reads what the core needs from Python. The
Python canonical view and rendering it had are the tests' oracle for the core's reading and
writing (``tests/providers/gemini_oracle.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._core import (
    GEMINI_ALTERNATE,
    GEMINI_CALL_TURN_POSITION,
    GEMINI_COUNT_MISMATCH,
    GEMINI_RESPONSE_TURN_POSITION,
    LEDGER_MARKER,
)
from ..errors import InvalidMessageError
from .base import (
    Canonical,
    NativeAdapter,
    UnreadableObject,
    as_mapping,
    is_summary_note,
    split_system_note,
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


# --- the system instruction ------------------------------------------------------------------


@dataclass(frozen=True)
class _System:
    texts: list[str]
    note: str | None
    summary: str | None = None


def _read_system(system: Any) -> _System:
    if system is None:
        return _System([], None)
    if isinstance(system, str):
        base, note, summary = split_system_note(system)
        return _System([base] if base else [], note, summary)
    obj = _view(system, "the system instruction", None)
    parts = obj.get("parts")
    if parts is None and obj.get("text") is not None:
        # A part alone would be read as a content with no parts: its text neither counted
        # nor kept beside a note.
        raise _invalid(
            None,
            "the system instruction must be a content ({'parts': [{'text': ...}]}) or a "
            "string, got a part",
        )
    if isinstance(parts, (dict, str)) or parts is None:
        parts = [parts] if parts is not None else []
    if not isinstance(parts, (list, tuple)):
        raise _invalid(None, "parts must be a list")
    texts: list[str] = []
    for p, raw in enumerate(parts):
        if isinstance(raw, str):
            texts.append(raw)
            continue
        part = _view(raw, f"parts[{p}]", None)
        text = part.get("text")
        if not isinstance(text, str):
            raise _invalid(None, f"parts[{p}] must be a text part")
        texts.append(text)
    # The notes an earlier assembly left, wherever the caller's parts stand now (one may have
    # been added after them since): the request the core writes replaces them all.
    notes = [t for t in texts if t.startswith(LEDGER_MARKER)]
    summaries = [t for t in texts if is_summary_note(t)]
    own = [t for t in texts if not t.startswith(LEDGER_MARKER) and not is_summary_note(t)]
    return _System(own, notes[-1] if notes else None, summaries[-1] if summaries else None)


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

    def system_texts(self, system: Any) -> list[list[str]]:
        """The system instruction as the core counts it: the caller's parts (an empty message
        when there are none, so the first user turn always has one to hold on to, with notes or
        without: a note a plan adds then costs what it costs once rendered into the
        instruction), then the ledger note and the summary note, one system message each."""
        sys = _read_system(system)
        return [sys.texts] + [[t] for t in (sys.note, sys.summary) if t is not None]

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """``tools[].functionDeclarations`` as OpenAI function tools; built-in tools (Google
        Search, code execution, ...) as a function named after the tool, so they are counted."""
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise InvalidMessageError(
                f"tools must be a list of Tool objects, got {type(tools).__name__}",
                index=None,
                reason=f"tools must be a list, got {type(tools).__name__}",
            )
        out: list[dict[str, Any]] = []
        for t, raw in enumerate(tools):
            tool = _tool_view(raw, f"tools[{t}]")
            for key, value in tool.items():
                if value is None:
                    continue
                if key not in ("functionDeclarations", "function_declarations"):
                    out.append(_function(key, "", value if isinstance(value, Mapping) else {}))
                    continue
                if not isinstance(value, (list, tuple)):
                    raise _tool_error(f"tools[{t}].{key} must be a list")
                for d, raw_decl in enumerate(value):
                    decl = _tool_view(raw_decl, f"tools[{t}].{key}[{d}]")
                    name = decl.get("name")
                    if not isinstance(name, str) or not name:
                        raise _tool_error(f"tools[{t}].{key}[{d}].name must be a non-empty string")
                    params = _get(decl, "parametersJsonSchema", "parameters_json_schema")
                    if params is None:
                        params = decl.get("parameters")
                    description = decl.get("description")
                    out.append(
                        _function(
                            name,
                            description if isinstance(description, str) else "",
                            params if isinstance(params, Mapping) else {},
                        )
                    )
        return out


def _tool_view(obj: Any, where: str) -> Mapping[str, Any]:
    try:
        data = as_mapping(obj)
    except UnreadableObject as e:
        raise _tool_error(f"{where} {e}") from None
    if data is None:
        raise _tool_error(f"{where} must be an object, got {type(obj).__name__}")
    return data


def _tool_error(reason: str) -> InvalidMessageError:
    return InvalidMessageError(reason, index=None, reason=reason)


def _function(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": dict(parameters)},
    }


#: The adapter ``ringbound.providers.adapter("gemini")`` returns.
ADAPTER = GeminiAdapter()
