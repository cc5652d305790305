"""Gemini API (``generateContent``): ``contents`` of user and model turns whose parts carry text,
media, ``functionCall`` and ``functionResponse``. Pairing follows Gemini's turn rules (a response
turn right after its call turn, one response part per call part); kept contents are the
caller's own objects, and the side-effect ledger note travels in the system instruction."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _core
from .._core import (
    GEMINI_DATA_FIELDS,
    GEMINI_META_FIELDS,
    GEMINI_SIGNATURE_FIELDS,
    LEDGER_MARKER,
    SYNTHESIZED_RESULT_TEXT,
    Insertion,
)
from ..errors import InvalidMessageError, PairingIssue
from .base import (
    Canonical,
    PlanItem,
    Rendered,
    UnreadableObject,
    as_mapping,
    call_message,
    is_summary_note,
    join_system_note,
    named_by,
    native_json,
    read_once,
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

#: Gemini's 400 when a response turn does not answer every call of the call turn before it
#: (google-gemini/gemini-cli#4217, microsoft/vscode#299295).
COUNT_MISMATCH = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)
#: Gemini's 400 for a call turn that follows neither a user turn nor a response turn
#: (google-gemini/gemini-cli#11814, continuedev/continue#11164).
CALL_TURN_POSITION = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
#: Gemini's 400 for function responses that do not follow their call turn
#: (langchain-ai/langchain#27799, GoogleCloudPlatform/generative-ai#368).
RESPONSE_TURN_POSITION = (
    "Please ensure that function response turn comes immediately after a function call turn."
)
#: Gemini's 400 for a history that opens with a model turn (NousResearch/hermes-agent#55427).
ALTERNATE = "Please ensure that multiturn requests alternate between user and model."

# The core's tables (one home: rust/src/providers/gemini/parse.rs). The one-of data fields of
# a Part, camelCase (REST) to snake_case (Python SDK).
_DATA_FIELDS = dict(GEMINI_DATA_FIELDS)
_SNAKE_TO_CAMEL = {snake: camel for camel, snake in GEMINI_DATA_FIELDS}
#: Part fields that travel with the part they sign, whatever it becomes.
_SIGNATURE_FIELDS = GEMINI_SIGNATURE_FIELDS
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


@dataclass(frozen=True)
class _GeminiCanonical(Canonical):
    """The canonical view plus what rendering needs to map the plan back."""

    #: The contents read, by index (only when a plan synthesizes responses: placing them reads
    #: the call turns and the turns after them).
    turns: Sequence[_Turn] | Mapping[int, _Turn] = ()
    #: Every content's role, ``user`` or ``model``.
    roles: Sequence[str] = ()
    #: Canonical index of the ledger note an earlier assembly left in the system instruction.
    note: int | None = None
    #: Canonical index of the summary note an earlier assembly left there.
    summary: int | None = None
    #: Part position of the functionResponse of each canonical tool message, by canonical index.
    responses_at: Mapping[int, int] = field(default_factory=dict)
    #: Calls of each canonical assistant message, by canonical index.
    calls_at: Mapping[int, tuple[_Call, ...]] = field(default_factory=dict)


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
    return read_once("gemini", messages, _read_uncached)


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


# --- pairing ---------------------------------------------------------------------------------


def _answers(turns: list[_Turn]) -> dict[tuple[int, int], _Call]:
    """The call each response of a response turn answers, by (content index, part position):
    how the canonical view pairs them. The rules themselves are checked in the core."""
    answers: dict[tuple[int, int], _Call] = {}
    for k, turn in enumerate(turns):
        prev = turns[k - 1] if k else None
        if turn.role != "user" or prev is None or prev.role != "model" or not prev.calls:
            continue
        used = [False] * len(prev.calls)
        for r in turn.responses:
            m = _match(prev.calls, used, r)
            if m is not None:
                used[m] = True
                answers[(turn.index, r.pos)] = prev.calls[m]
    return answers


def _match(calls: list[_Call], used: list[bool], r: _Response) -> int | None:
    """The call a response answers: same id; else (no id on one side) same name, in order."""
    if r.native_id is not None:
        for m, c in enumerate(calls):
            if not used[m] and c.native_id == r.native_id:
                return m
    for m, c in enumerate(calls):
        if not used[m] and c.native_id is None and c.name == r.name:
            return m
    if r.native_id is None:
        for m, c in enumerate(calls):
            if not used[m] and c.name == r.name:
                return m
    return None


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
    # been added after them since): the rendering replaces them all.
    notes = [t for t in texts if t.startswith(LEDGER_MARKER)]
    summaries = [t for t in texts if is_summary_note(t)]
    own = [t for t in texts if not t.startswith(LEDGER_MARKER) and not is_summary_note(t)]
    return _System(own, notes[-1] if notes else None, summaries[-1] if summaries else None)


def _system_with_notes(system: Any, note: str | None, summary: str | None) -> Any:
    """The caller's system instruction with the ledger and summary notes replaced (a new
    object): the ledger note, then the summary note, after the caller's own parts."""
    notes = [t for t in (note, summary) if t]
    if isinstance(system, str):
        return join_system_note(split_system_note(system)[0], note, summary)
    if system is None:
        return {"parts": [{"text": t} for t in notes]} if notes else None
    if isinstance(system, Mapping):
        parts = system.get("parts")
        parts = list(parts) if isinstance(parts, (list, tuple)) else [parts] if parts else []
        base = [p for p in parts if not _is_note_part(p)]
        return {**system, "parts": base + [{"text": t} for t in notes]}
    parts = list(getattr(system, "parts", None) or [])
    base = [p for p in parts if not _is_note_part(p)]
    extra = [_like(parts[0] if parts else None, {"text": t}) for t in notes]
    copy = getattr(system, "model_copy", None)
    if callable(copy):
        return copy(update={"parts": base + extra})
    return {"parts": [_view(p, "part", None) for p in base] + [{"text": t} for t in notes]}


def _is_note_part(part: Any) -> bool:
    text = part if isinstance(part, str) else _view(part, "part", None).get("text")
    return isinstance(text, str) and (text.startswith(LEDGER_MARKER) or is_summary_note(text))


def _like(sample: Any, part: dict[str, Any]) -> Any:
    """A new part of the same kind as ``sample`` (an SDK Part object, or a dict)."""
    validate = getattr(type(sample), "model_validate", None) if sample is not None else None
    return validate(part) if callable(validate) else part


# --- rendering -------------------------------------------------------------------------------


@dataclass
class _Entry:
    obj: Any
    role: str
    first: int | None  # native index of the first content it holds (None: a new content)
    last: int | None
    changed: bool = False


def _parts_of(obj: Any) -> list[Any]:
    parts = obj.get("parts") if isinstance(obj, Mapping) else getattr(obj, "parts", None)
    return list(parts or [])


def _with_parts(obj: Any, parts: list[Any], role: str) -> Any:
    if isinstance(obj, Mapping):
        return {**obj, "parts": parts}
    copy = getattr(obj, "model_copy", None)
    if callable(copy):
        return copy(update={"parts": parts})
    return {"role": role, "parts": parts}


def _role_of(content: Any) -> str:
    """A content's role as the core reads it ('function' and none are the user's)."""
    role = content.get("role") if isinstance(content, Mapping) else getattr(content, "role", None)
    return "model" if role == "model" else "user"


class _TurnsRead(Mapping[int, _Turn]):
    """Contents read when first asked for, by index."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages
        self._read: dict[int, _Turn] = {}

    def __getitem__(self, i: int) -> _Turn:
        turn = self._read.get(i)
        if turn is None:
            turn = self._read[i] = _read_turn(i, self._messages[i])
        return turn

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._messages)))

    def __len__(self) -> int:
        return len(self._messages)


def _for_render(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical
) -> _GeminiCanonical | None:
    """What rendering needs of the core's canonical view, read from the contents only where the
    plan needs it: every content's role; the functionResponse position of each result a
    rewrite changes; for each response the plan synthesizes, the call turn it answers (its
    calls under the core's ids, in order) and, through ``turns``, the contents placing it
    reads. None when a synthesized response's call is not where the plan puts it."""
    facts = canonical.facts
    roles = facts.roles if facts is not None else [_role_of(m) for m in messages]
    responses_at: dict[int, int] = {}
    calls_at: dict[int, tuple[_Call, ...]] = {}
    turns = _TurnsRead(messages)
    for j, item in enumerate(items):
        if type(item) is Insertion.Rewrite:
            k = item.index
            at = response_position(messages, canonical, k)
            if at is not None:
                responses_at[k] = at
        elif type(item) is Insertion.Synthesized:
            k = call_message(items, j, canonical, item.call_id)
            if k is None:
                return None
            if k not in calls_at:
                calls = turns[canonical.spans[k][0]].calls
                ids = [c["id"] for c in canonical.messages[k]["tool_calls"]]
                if len(ids) != len(calls):
                    return None
                for call, cid in zip(calls, ids, strict=True):
                    call.cid = cid
                calls_at[k] = tuple(calls)
    return _GeminiCanonical(
        **vars(canonical),
        roles=roles,
        responses_at=responses_at,
        calls_at=calls_at,
        turns=turns,
        **_notes_at(canonical),
    )


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


def _notes_at(canonical: Canonical) -> dict[str, int | None]:
    """Canonical indices of the ledger and summary notes an earlier assembly left in the
    system instruction."""
    out: dict[str, int | None] = {"note": None, "summary": None}
    for k, (start, _) in enumerate(canonical.spans):
        if start >= 0:
            break
        text = canonical.messages[k].get("content")
        if isinstance(text, str) and text.startswith(LEDGER_MARKER):
            out["note"] = k
        elif is_summary_note(text):
            out["summary"] = k
    return out


def _rewrites(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: _GeminiCanonical
) -> dict[int, Any]:
    """New contents for the plan's rewrites, by native index (several rewrites of one content
    apply in turn): a functionResponse whose response holds the text, or images made text."""
    out: dict[int, Any] = {}
    for item in items:
        if type(item) is not Insertion.Rewrite:
            continue
        k, kind, text = item.index, item.kind, item.text
        i = canonical.spans[k][0]
        current = out.get(i, messages[i])
        parts = _parts_of(current)
        if kind == "media":
            new = _without_media(i, parts, text)
        else:
            at = canonical.responses_at[k]
            new = list(parts)
            new[at] = _response_as_text(i, parts[at], text)
        out[i] = _with_parts(current, new, canonical.roles[i])
    return out


def _response_as_text(index: int, part: Any, text: str) -> Any:
    """A functionResponse part whose response is ``text``, under the key the original used:
    ``error`` for an error response, its one key, else ``output``."""
    view = _view(part, "a part", index)
    key = _response_key(view)
    body = _view(view[key], "a functionResponse", index)
    response = body.get("response") or {}
    keys = list(_view(response, "a response", index))
    field_name = keys[0] if len(keys) == 1 else "output"
    return _like(part, {**view, key: {**body, "response": {field_name: text}}})


def _response_key(part: Mapping[str, Any]) -> str:
    """The spelling of a part's functionResponse field (REST camelCase or SDK snake_case)."""
    return "function_response" if part.get("function_response") is not None else "functionResponse"


def _image_blob(part: Mapping[str, Any]) -> bool:
    blob = _get(part, "inlineData", "inline_data")
    if blob is None:
        blob = _get(part, "fileData", "file_data")
    if blob is None:
        return False
    mime = _get(as_mapping(blob) or {}, "mimeType", "mime_type")
    return isinstance(mime, str) and mime.startswith("image/")


def _without_media(index: int, parts: list[Any], text: str) -> list[Any]:
    """The parts with each image a text part ``text`` (a thought signature stays on its part).
    Images inside a functionResponse leave it, and their texts close the content."""
    new: list[Any] = []
    moved: list[Any] = []
    for part in parts:
        view = _view(part, "a part", index)
        if _image_blob(view):
            keep = {k: view[k] for k in _SIGNATURE_FIELDS if view.get(k) is not None}
            new.append(_like(part, {"text": text, **keep}))
            continue
        key = _response_key(view)
        body = _view(view[key], "a functionResponse", index) if key in view else {}
        inner = body.get("parts") or []
        kept = [p for p in inner if not _image_blob(_view(p, "a part", index))]
        if len(kept) == len(inner):
            new.append(part)
            continue
        moved.extend(_like(part, {"text": text}) for _ in range(len(inner) - len(kept)))
        body = {k: v for k, v in body.items() if k != "parts"}
        new.append(_like(part, {**view, key: {**body, **({"parts": kept} if kept else {})}}))
    return new + moved


# --- the adapter -----------------------------------------------------------------------------


class GeminiAdapter:
    """Gemini ``contents`` (dicts in REST camelCase or Python-SDK snake_case, or SDK objects)."""

    key = "gemini"
    image_formula = "gemini"
    notes_as_counted = True
    results_as_counted = True
    #: Gemini tokens per o200k token; see docs/providers/gemini.md for the measurement.
    default_token_ratio = 1.25
    items_field = "contents"

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by Gemini's turn rules, each opening with Gemini's 400 wording,
        checked in the core (``_core.validate``): response turns, strays, and Gemini 3's
        ``thoughtSignature`` on the first functionCall part of each call step of the current
        turn, in a conversation whose calls are signed (kind ``missing_signature``).

        Raises:
            InvalidMessageError: A content (or ``system``) is malformed.
        """
        _read_system(system)
        parts = self.native_parts(messages)
        issues = named_by(self.items_field, lambda: _core.validate(self.key, parts))
        return [PairingIssue(*issue) for issue in issues]

    def native_parts(self, messages: Sequence[Any]) -> list[bytes]:
        """The contents as JSON arrays for the core's Gemini parser."""
        return native_json(messages, _read)

    def system_texts(self, system: Any) -> list[list[str]]:
        """The system instruction as the core counts it: the caller's parts (an empty message
        when there are none, so the first user turn always has one to hold on to, with notes or
        without: a note a plan adds then costs what it costs once rendered into the
        instruction), then the ledger note and the summary note, one system message each."""
        sys = _read_system(system)
        return [sys.texts] + [[t] for t in (sys.note, sys.summary) if t is not None]

    def to_canonical(self, messages: Sequence[Any], *, system: Any = None) -> Canonical:
        """The canonical view: a system message (always, so the first user turn can be glued to
        it and never trimmed: Gemini needs a user turn first), then per content its messages."""
        sys = _read_system(system)
        turns = _read(messages)
        answers = _answers(turns)
        out: list[dict[str, Any]] = []
        spans: list[tuple[int, int]] = []
        binds: list[bool] = []
        calls_at: dict[int, tuple[_Call, ...]] = {}

        def add(message: dict[str, Any], span: tuple[int, int], glue: bool = False) -> None:
            out.append(message)
            spans.append(span)
            binds.append(glue)

        content = [{"type": "text", "text": t} for t in sys.texts]
        add({"role": "system", "content": content or ""}, (-1, -1), glue=True)
        note = summary = None
        if sys.note is not None:
            note = len(out)
            add({"role": "system", "content": sys.note}, (-1, -1), glue=True)
        if sys.summary is not None:
            summary = len(out)
            add({"role": "system", "content": sys.summary}, (-1, -1), glue=True)
        responses_at: dict[int, int] = {}
        for turn in turns:
            span = (turn.index, turn.index + 1)
            texts = [{"type": "text", "text": t} for t in turn.texts]
            if turn.role == "model":
                if turn.media:
                    # Canonical assistant messages carry no images: the turn's media go in a
                    # user message of the same native item, so they are priced as images.
                    add({"role": "user", "content": turn.media}, span)
                message: dict[str, Any] = {"role": "assistant", "content": texts or None}
                if turn.calls:
                    calls_at[len(out)] = tuple(turn.calls)
                    message["tool_calls"] = [
                        {
                            "id": c.cid,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in turn.calls
                    ]
                add(message, span)
                continue
            for r in turn.responses:
                call = answers.get((turn.index, r.pos))
                result: dict[str, Any] = {
                    "role": "tool",
                    "tool_call_id": call.cid if call else f"gemini_orphan_{turn.index}_{r.pos}",
                    "content": r.content,
                }
                if not r.synthesized:
                    result["name"] = r.name
                responses_at[len(out)] = r.pos
                add(result, span)
            if texts or turn.media or not turn.responses:
                add({"role": "user", "content": texts + turn.media}, span)
        return _GeminiCanonical(
            messages=out,
            spans=spans,
            binds_next=binds,
            turns=tuple(turns),
            roles=tuple(t.role for t in turns),
            note=note,
            summary=summary,
            calls_at=calls_at,
            responses_at=responses_at,
        )

    def render(
        self,
        messages: Sequence[Any],
        items: Sequence[PlanItem],
        canonical: Canonical,
        *,
        system: Any = None,
    ) -> Rendered:
        """The contents the plan keeps (the caller's objects; new copies where a rewrite
        changes a response or an image), synthesized responses in the user turn after their
        call turn, same-role neighbours that trimming brought together merged into new
        contents, and the ledger and summary notes in the system instruction."""
        if not isinstance(canonical, _GeminiCanonical):
            # The plan's own needs are read; a synthesized response whose call is not where
            # the plan puts it (never, for the core's plans) reads every content again.
            canonical = _for_render(messages, items, canonical) or self.to_canonical(
                messages, system=system
            )
        turns = canonical.turns
        replaced = _rewrites(messages, items, canonical)
        entries: list[_Entry] = []
        call_turn: dict[str, tuple[int, _Call]] = {}
        pending: dict[int, list[_Call]] = {}
        before = {
            kind: canonical.messages[at]["content"] if at is not None else None
            for kind, at in (("ledger", canonical.note), ("summary", canonical.summary))
        }
        notes: dict[str, str | None] = dict.fromkeys(before)
        for item in items:
            if type(item) is int or type(item) is Insertion.Rewrite:
                k: int = item if type(item) is int else item.index
                start, _ = canonical.spans[k]
                if start < 0:
                    if k in (canonical.note, canonical.summary):
                        kind = "ledger" if k == canonical.note else "summary"
                        notes[kind] = notes[kind] or before[kind]
                    continue
                if not entries or entries[-1].first != start:
                    obj = replaced.get(start, messages[start])
                    entries.append(_Entry(obj, canonical.roles[start], start, start))
                for call in canonical.calls_at.get(k, ()):
                    call_turn[call.cid] = (len(entries) - 1, call)
            elif type(item) is Insertion.Synthesized:
                at, call = call_turn[item.call_id]
                pending.setdefault(at, []).append(call)
            elif type(item) is Insertion.LedgerNote:
                notes["ledger"] = item.text
            elif type(item) is Insertion.Summary:
                notes["summary"] = item.text

        for at in sorted(pending, reverse=True):
            self._answer(entries, at, pending[at], turns)

        merged_out: list[_Entry] = []
        for entry in entries:
            prev = merged_out[-1] if merged_out else None
            adjacent = (
                prev is not None
                and prev.last is not None
                and entry.first is not None
                and entry.first == prev.last + 1
            )
            if prev is not None and prev.role == entry.role and not adjacent:
                parts = _parts_of(prev.obj) + _parts_of(entry.obj)
                merged_out[-1] = _Entry(
                    _with_parts(prev.obj, parts, prev.role),
                    prev.role,
                    prev.first,
                    entry.last if entry.last is not None else prev.last,
                    changed=True,
                )
            else:
                merged_out.append(entry)
        merged = sum(1 for e in merged_out if e.changed and e.first is not None)
        out_system = (
            system
            if notes == before
            else _system_with_notes(system, notes["ledger"], notes["summary"])
        )
        return Rendered(messages=[e.obj for e in merged_out], system=out_system, merged=merged)

    @staticmethod
    def _answer(entries: list[_Entry], at: int, calls: list[_Call], turns: Sequence[_Turn]) -> None:
        """Puts synthesized error responses for ``calls`` (of the call turn at ``at``) into the
        user turn after it: after its own responses in a new object, or in a new user turn."""
        call_entry = entries[at]
        call_obj = call_entry.obj
        sample = next(iter(_parts_of(call_obj)), None)
        snake = turns[call_entry.first].snake if call_entry.first is not None else False
        key = "function_response" if snake else "functionResponse"
        parts = []
        for call in calls:
            body: dict[str, Any] = {
                "name": call.name,
                "response": {"error": SYNTHESIZED_RESULT_TEXT},
            }
            if call.native_id is not None:
                body["id"] = call.native_id
            parts.append(_like(sample, {key: body}))
        nxt = at + 1
        if nxt < len(entries) and entries[nxt].role == "user":
            target = entries[nxt]
            existing = _parts_of(target.obj)
            after = 0
            if target.first is not None and turns[target.first].responses:
                after = turns[target.first].responses[-1].pos + 1
            new_parts = existing[:after] + parts + existing[after:]
            entries[nxt] = _Entry(
                _with_parts(target.obj, new_parts, "user"),
                "user",
                target.first,
                target.last,
                changed=True,
            )
        else:
            copy = None if isinstance(call_obj, Mapping) else getattr(call_obj, "model_copy", None)
            fresh = (
                copy(update={"role": "user", "parts": parts})
                if callable(copy)
                else {"role": "user", "parts": parts}
            )
            entries.insert(nxt, _Entry(fresh, "user", None, None))

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
