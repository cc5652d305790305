"""The Python readers of Gemini contents and the system instruction, which
``ringbound.providers.gemini`` held until the core became the only reader. They stay as the
differential oracles for the core's reading (``tests/providers/test_system_read.py``,
``test_tools_read.py``), and the oracle's rendering (``tests/providers/gemini_oracle.py``) reads
through them."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ringbound._core import (
    GEMINI_DATA_FIELDS,
    GEMINI_META_FIELDS,
    LEDGER_MARKER,
    SYNTHESIZED_RESULT_TEXT,
)
from ringbound.errors import InvalidMessageError
from ringbound.providers.base import (
    UnreadableObject,
    as_mapping,
    guarded,
    is_summary_note,
    split_system_note,
)
from ringbound.providers.gemini import _get, _invalid, _view

# The core's tables (one home: rust/src/providers/gemini/parse.rs). The one-of data fields of
# a Part, camelCase (REST) to snake_case (Python SDK).
_DATA_FIELDS = dict(GEMINI_DATA_FIELDS)
_SNAKE_TO_CAMEL = {snake: camel for camel, snake in GEMINI_DATA_FIELDS}
# Part fields that carry nothing the model reads as content (the signature is counted apart).
_META_FIELDS = frozenset(GEMINI_META_FIELDS)


@dataclass
class _Call:
    """One functionCall part."""

    pos: int
    name: str
    native_id: str | None
    arguments: str
    cid: str = ""


@dataclass
class _Response:
    """One functionResponse part."""

    pos: int
    name: str
    native_id: str | None
    content: str
    #: A result ringbound synthesized earlier: counted exactly as the core counts its own.
    synthesized: bool


@dataclass
class _Turn:
    """One content of ``contents``, read."""

    index: int
    role: str
    snake: bool
    texts: list[str] = field(default_factory=list)
    media: list[dict[str, Any]] = field(default_factory=list)
    calls: list[_Call] = field(default_factory=list)
    responses: list[_Response] = field(default_factory=list)


def _string(value: Any, where: str, index: int | None) -> str:
    if not isinstance(value, str):
        got = "nothing" if value is None else type(value).__name__
        raise _invalid(index, f"{where} must be a string, got {got}")
    # A str subclass is read as its characters: its own __str__ may raise where it is quoted.
    return str.__str__(value)


#: ``json.dumps`` with any option builds a new encoder per call; one made once writes the same.
_ENCODER = json.JSONEncoder(ensure_ascii=False)
_COMPACT = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _json(value: Any, where: str, index: int | None) -> str:
    try:
        return _ENCODER.encode(value)
    except Exception as e:  # not JSON, or the caller's own object raised while read
        raise _invalid(index, f"{where} is not JSON ({type(e).__name__}: {e})") from None


def _looks_like_error(text: str) -> bool:
    """The core's test for an error result (text opening with error, exception, traceback)."""
    head = text.lstrip()[:40].lower()
    return head.startswith(("error", "exception", "traceback (most recent call last)"))


def _response_content(response: Mapping[str, Any], where: str, index: int) -> tuple[str, bool]:
    """The text a response counts as, and whether it is a result ringbound synthesized.

    ``{"error": ...}`` alone reads as an error result (Gemini: "use 'output' for the function
    output and 'error' for error details"), so the core treats it as one."""
    if set(response) == {"error"}:
        error = response["error"]
        if error == SYNTHESIZED_RESULT_TEXT:
            return SYNTHESIZED_RESULT_TEXT, True
        text = error if isinstance(error, str) else _json(error, where, index)
        return (text if _looks_like_error(text) else f"Error: {text}"), False
    return _json(dict(response), where, index), False


def _blob(obj: Any, kind: str, where: str, index: int) -> dict[str, Any]:
    """An inlineData or fileData part as a canonical part: images as image_url (priced by
    Gemini's image formula), anything else as a file part (priced by its payload size)."""
    blob = _view(obj, where, index)
    mime = _string(_get(blob, "mimeType", "mime_type"), f"{where}.mimeType", index)
    if kind == "inline":
        data = blob.get("data")
        if isinstance(data, (bytes, bytearray)):
            encoded = base64.b64encode(bytes(data)).decode()
        else:
            # The Python SDK dumps bytes as URL-safe base64; data URLs want the standard alphabet.
            encoded = _string(data, f"{where}.data", index).translate(_URLSAFE)
        url = f"data:{mime};base64,{encoded}"
        if mime.startswith("image/"):
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "file", "file": {"file_data": url}}
    uri = _string(_get(blob, "fileUri", "file_uri"), f"{where}.fileUri", index)
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": uri}}
    return {"type": "file", "file": {"file_id": uri, "mime_type": mime}}


_URLSAFE = str.maketrans("-_", "+/")


def _read_turn(index: int, content: Any) -> _Turn:
    obj = _view(content, "a content", index)
    role = obj.get("role")
    if role is None or role == "function":
        # Vertex AI's SDK sends function responses in a 'function' content: a user turn.
        role = "user"
    if role not in ("user", "model"):
        raise _invalid(
            index,
            f"role must be 'user' or 'model', got {role!r} (Gemini: Please use a valid role: "
            "user, model.)",
        )
    parts = obj.get("parts")
    if not isinstance(parts, (list, tuple)) or not parts:
        raise _invalid(
            index, "parts must be a non-empty list (Gemini: contents.parts must not be empty.)"
        )
    turn = _Turn(index=index, role=role, snake=False)
    for p, raw in enumerate(parts):
        _read_part(turn, p, _view(raw, f"parts[{p}]", index))
    return turn


def _read_part(turn: _Turn, p: int, part: Mapping[str, Any]) -> None:
    index, where = turn.index, f"parts[{p}]"
    present = [key for key in part if part[key] is not None]
    data = [key for key in present if key in _DATA_FIELDS or key in _SNAKE_TO_CAMEL]
    if len(data) > 1:
        raise _invalid(index, f"{where} holds {' and '.join(data)}; a part holds one of them")
    signature = _get(part, "thoughtSignature", "thought_signature")
    if signature is not None:
        # Opaque, but sent back with the part: counted as text, which over-counts safely.
        turn.texts.append(_string(signature, f"{where}.thoughtSignature", index))
    for key in present:
        if key not in _DATA_FIELDS and key not in _SNAKE_TO_CAMEL and key not in _META_FIELDS:
            # A field ringbound does not know may still reach the model: count it as text.
            turn.texts.append(_json(part[key], f"{where}.{key}", index))
    if not data:
        if signature is None and not present:
            raise _invalid(index, f"{where} is empty")
        return
    key = data[0]
    camel = _SNAKE_TO_CAMEL.get(key, key)
    turn.snake = turn.snake or key != camel
    value = part[key]
    if camel == "text":
        turn.texts.append(_string(value, f"{where}.text", index))
    elif camel == "inlineData":
        turn.media.append(_blob(value, "inline", f"{where}.inlineData", index))
    elif camel == "fileData":
        turn.media.append(_blob(value, "file", f"{where}.fileData", index))
    elif camel == "executableCode":
        code = _view(value, f"{where}.executableCode", index)
        turn.texts.append(_json(dict(code), f"{where}.executableCode", index))
    elif camel == "codeExecutionResult":
        result = _view(value, f"{where}.codeExecutionResult", index)
        turn.texts.append(_json(dict(result), f"{where}.codeExecutionResult", index))
    elif camel == "functionCall":
        if turn.role != "model":
            raise _invalid(index, f"{where}: a functionCall part belongs in a 'model' content")
        turn.calls.append(_read_call(p, _view(value, f"{where}.functionCall", index), index))
    else:
        if turn.role != "user":
            raise _invalid(index, f"{where}: a functionResponse part belongs in a 'user' content")
        _read_response(turn, p, _view(value, f"{where}.functionResponse", index))


def _name(body: Mapping[str, Any], where: str, index: int) -> str:
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise _invalid(index, f"{where}.name must be a non-empty string (Name cannot be empty.)")
    return str.__str__(name)


def _native_id(body: Mapping[str, Any], where: str, index: int) -> str | None:
    value = body.get("id")
    if value is None or value == "":
        return None
    return _string(value, f"{where}.id", index)


def _read_call(p: int, body: Mapping[str, Any], index: int) -> _Call:
    where = f"parts[{p}].functionCall"
    args = body.get("args")
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise _invalid(index, f"{where}.args must be an object, got {type(args).__name__}")
    return _Call(
        pos=p,
        name=_name(body, where, index),
        native_id=_native_id(body, where, index),
        arguments=_json(dict(args), f"{where}.args", index),
    )


def _read_response(turn: _Turn, p: int, body: Mapping[str, Any]) -> None:
    index, where = turn.index, f"parts[{p}].functionResponse"
    response = body.get("response")
    if response is None:
        response = {}
    if not isinstance(response, Mapping):
        raise _invalid(index, f"{where}.response must be an object, got {type(response).__name__}")
    content, synthesized = _response_content(response, f"{where}.response", index)
    turn.responses.append(
        _Response(
            pos=p,
            name=_name(body, where, index),
            native_id=_native_id(body, where, index),
            content=content,
            synthesized=synthesized,
        )
    )
    media = body.get("parts")
    if media is not None:
        if not isinstance(media, (list, tuple)):
            raise _invalid(index, f"{where}.parts must be a list")
        for m, raw in enumerate(media):
            sub = _view(raw, f"{where}.parts[{m}]", index)
            inline, stored = (
                _get(sub, "inlineData", "inline_data"),
                _get(sub, "fileData", "file_data"),
            )
            if inline is not None:
                turn.media.append(_blob(inline, "inline", f"{where}.parts[{m}]", index))
            elif stored is not None:
                turn.media.append(_blob(stored, "file", f"{where}.parts[{m}]", index))
            else:
                turn.texts.append(_json(dict(sub), f"{where}.parts[{m}]", index))


def _read(messages: Sequence[Any]) -> list[_Turn]:
    return guarded(_read_uncached, messages)


def _read_uncached(messages: Sequence[Any]) -> list[_Turn]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"contents must be a list of Content objects, got {type(messages).__name__}",
            index=None,
            reason=f"must be a list, got {type(messages).__name__}",
        )
    turns = [_read_turn(i, content) for i, content in enumerate(messages)]
    _assign_ids(turns)
    return turns


def _assign_ids(turns: list[_Turn]) -> None:
    """Canonical call ids: the native id (a repeat within one turn gets ``#k``), else one
    derived from the call itself and its occurrence, so the same call keeps its id when
    earlier turns are trimmed away (the ledger remembers calls by id)."""
    seen: dict[str, int] = {}
    for turn in turns:
        in_turn: dict[str, int] = {}
        for call in turn.calls:
            if call.native_id is not None:
                k = in_turn.get(call.native_id, 0)
                in_turn[call.native_id] = k + 1
                call.cid = call.native_id if k == 0 else f"{call.native_id}#{k}"
                continue
            # The arguments as the core writes them (compact, keys sorted), so both make one id.
            args = _COMPACT.encode(json.loads(call.arguments))
            digest = hashlib.sha256(f"{call.name}\0{args}".encode()).hexdigest()[:10]
            k = seen.get(digest, 0)
            seen[digest] = k + 1
            call.cid = f"gemini_{digest}_{k}"


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
