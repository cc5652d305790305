"""The Python readers of Bedrock Converse messages and the top-level system, which
``ringbound.providers.bedrock_converse`` held until the core became the only reader. They stay
as the differential oracles for the core's reading (``tests/providers/test_system_read.py``,
``test_tools_read.py``), and the oracle's rendering
(``tests/providers/bedrock_converse_oracle.py``) reads through them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ringbound._core import (
    BEDROCK_ASSISTANT_BLOCKS,
    BEDROCK_RESULT_BLOCKS,
    BEDROCK_USER_BLOCKS,
    LEDGER_MARKER,
)
from ringbound.errors import InvalidMessageError
from ringbound.providers.base import guarded, is_summary_note

# Bedrock's ValidationException text, verbatim (sources in docs/providers/bedrock_converse.md).
EMPTY_CONTENT = "The content field in the Message object at messages.{n} is empty."
# The blocks each message and a toolResult may carry: the core's tables (one home,
# rust/src/providers/bedrock_converse/parse.rs).
_USER_BLOCKS = frozenset(BEDROCK_USER_BLOCKS)
_ASSISTANT_BLOCKS = frozenset(BEDROCK_ASSISTANT_BLOCKS)
_RESULT_BLOCKS = frozenset(BEDROCK_RESULT_BLOCKS)


@dataclass
class _Call:
    id: str
    name: str


@dataclass
class _Result:
    id: str
    error: bool
    block: int
    empty: bool


@dataclass
class _Turn:
    """One native message, read for its pairing: its calls (an assistant turn) or results (a
    user turn), and whether it also carries conversation blocks. The core reads and prices its
    content."""

    role: str
    calls: list[_Call] = field(default_factory=list)
    results: list[_Result] = field(default_factory=list)
    conversation: bool = False


def _json(i: int | None, value: Any, where: str) -> str:
    try:
        return orjson.dumps(value).decode()
    except Exception as e:  # not JSON, or the caller's own object raised while read
        raise _invalid(i, f"{where} is not JSON ({type(e).__name__}: {e})") from None


def _check_opaque(i: int | None, block: Any, where: str) -> None:
    """A document, video or audio block: its name and context, and a source of bytes, an S3
    location, text or text blocks."""
    block = _obj(i, block, where)
    for key in ("name", "context"):
        if block.get(key) is not None:
            _str(i, block[key], f"{where}.{key}")
    kind, source = _member(i, block.get("source"), f"{where}.source")
    if kind == "bytes":
        _check_payload(i, block["source"], where)
    elif kind == "s3Location":
        uri = _obj(i, source, f"{where}.source.s3Location").get("uri")
        _str(i, uri, f"{where}.source.s3Location.uri")
    elif kind == "text":
        _str(i, source, f"{where}.source.text")
    elif kind == "content":
        for c, item in enumerate(_list(i, source, f"{where}.source.content")):
            k, text = _member(i, item, f"{where}.source.content[{c}]")
            if k != "text":
                raise _invalid(i, f"{where}.source.content[{c}] must be a text block, got {k}")
            _str(i, text, f"{where}.source.content[{c}]")
    else:
        raise _invalid(i, f"{where}.source has unknown type {kind}")


def _check_media(i: int | None, kind: str, value: Any, where: str) -> None:
    """A user-side block other than a tool result."""
    if kind == "text":
        _str(i, value, where)
    elif kind == "image":
        _check_image(i, value, where)
    elif kind in ("document", "video", "audio"):
        _check_opaque(i, value, where)
    elif kind == "guardContent":
        _guard_text(i, value, where)
    elif kind in ("searchResult", "json"):
        _json(i, value, where)


def _tool_result(i: int, b: int, value: Any) -> _Result:
    where = f"content[{b}].toolResult"
    value = _obj(i, value, where)
    call_id = _str(i, value.get("toolUseId"), f"{where}.toolUseId", empty=False)
    status = value.get("status")
    if status not in (None, "success", "error"):
        raise _invalid(i, f"{where}.status must be success or error, got {status!r}")
    content = _list(i, value.get("content"), f"{where}.content")
    result = _Result(id=call_id, error=status == "error", block=b, empty=not content)
    for c, block in enumerate(content):
        at = f"{where}.content[{c}]"
        kind, item = _member(i, block, at)
        if kind not in _RESULT_BLOCKS:
            raise _invalid(i, f"{at} has type {kind}, which a toolResult cannot carry")
        _check_media(i, kind, item, at)
    return result


def _tool_use(i: int, b: int, value: Any) -> _Call:
    where = f"content[{b}].toolUse"
    value = _obj(i, value, where)
    call_id = _str(i, value.get("toolUseId"), f"{where}.toolUseId", empty=False)
    name = _str(i, value.get("name"), f"{where}.name", empty=False)
    if "input" not in value:
        raise _invalid(i, f"{where} has no `input`")
    _json(i, value["input"], f"{where}.input")
    return _Call(call_id, name)


def _check_reasoning(i: int, b: int, value: Any) -> None:
    """A reasoning block: thinking text (and its signature), or redacted content."""
    where = f"content[{b}].reasoningContent"
    kind, item = _member(i, value, where)
    if kind == "reasoningText":
        item = _obj(i, item, f"{where}.reasoningText")
        _str(i, item.get("text"), f"{where}.reasoningText.text")
        signature = item.get("signature")
        if signature is not None:
            _str(i, signature, f"{where}.reasoningText.signature")
    elif kind == "redactedContent":
        if not isinstance(item, (bytes, bytearray, memoryview)):
            _str(i, item, f"{where}.redactedContent")
    else:
        raise _invalid(i, f"{where} has unknown type {kind}")


def _turn(i: int, message: Any) -> _Turn:
    if not isinstance(message, Mapping):
        raise _invalid(i, f"a message must be an object, got {_type(message)}")
    role = message.get("role")
    if role not in ("user", "assistant"):
        hint = (
            " (Bedrock takes the system prompt as the top-level `system`, not as a message)"
            if role == "system"
            else ""
        )
        raise _invalid(i, f"`role` must be user or assistant, got {role!r}{hint}")
    content = message.get("content")
    if content is None:
        raise _invalid(i, "missing `content`")
    content = _list(i, content, "`content`")
    if not content:
        raise _invalid(i, EMPTY_CONTENT.format(n=i))
    turn = _Turn(role)
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    for b, block in enumerate(content):
        kind, value = _member(i, block, f"content[{b}]")
        if kind not in allowed:
            raise _invalid(i, f"content[{b}] has type {kind}, which a {role} message cannot carry")
        if kind == "cachePoint":
            continue
        if kind == "toolResult":
            turn.results.append(_tool_result(i, b, value))
        elif kind == "toolUse":
            turn.calls.append(_tool_use(i, b, value))
        elif kind == "reasoningContent":
            _check_reasoning(i, b, value)
        elif kind == "citationsContent":
            _json(i, value, f"content[{b}]")
        else:
            turn.conversation = True
            _check_media(i, kind, value, f"content[{b}].{kind}")
    return turn


def _turns(messages: Any) -> list[_Turn]:
    return guarded(_turns_uncached, messages)


def _turns_uncached(messages: Any) -> list[_Turn]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"messages must be a list of message objects, got {_type(messages)}",
            index=None,
            reason=f"must be a list, got {_type(messages)}",
        )
    return [_turn(i, m) for i, m in enumerate(messages)]


@dataclass
class _System:
    texts: list[str]
    notes: list[str]
    summaries: list[str] = field(default_factory=list)


def _str(i: int | None, value: Any, where: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise _invalid(i, f"{where} must be a string, got {_type(value)}")
    if not empty and not value:
        raise _invalid(i, f"{where} is empty")
    # A str subclass is read as its characters: its own __str__ or __format__ may raise
    # where an id is quoted in an issue.
    return str.__str__(value)


def _obj(i: int | None, value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _invalid(i, f"{where} must be an object, got {_type(value)}")
    return value


def _check_payload(i: int | None, source: Mapping[str, Any], where: str) -> None:
    """The ``bytes`` of a media source: raw bytes (boto3) or base64 text (JSON payloads)."""
    data = source["bytes"]
    if not isinstance(data, (bytes, bytearray, memoryview)):
        _str(i, data, f"{where}.source.bytes")


def _check_image(i: int | None, image: Any, where: str) -> None:
    """An image block: a format, and bytes or an S3 location."""
    image = _obj(i, image, where)
    _str(i, image.get("format"), f"{where}.format", empty=False)
    kind, source = _member(i, image.get("source"), f"{where}.source")
    if kind == "bytes":
        _check_payload(i, image["source"], where)
    elif kind == "s3Location":
        _str(i, _obj(i, source, f"{where}.source.s3Location").get("uri"), f"{where}.uri")
    else:
        raise _invalid(i, f"{where}.source must be bytes or s3Location, got {kind}")


def _guard_text(i: int | None, value: Any, where: str) -> str | None:
    """The text of a ``guardContent`` block; None for a guarded image."""
    kind, inner = _member(i, value, where)
    if kind == "text":
        text = _obj(i, inner, f"{where}.text").get("text")
        return _str(i, text, f"{where}.text.text")
    if kind == "image":
        _check_image(i, inner, f"{where}.image")
        return None
    raise _invalid(i, f"{where} has unknown type {kind}")


def _system(system: Any) -> _System:
    """The caller's system texts, and the ledger and summary notes an earlier assembly
    appended as blocks."""
    out = _System([], [])
    if system is None:
        return out
    for b, block in enumerate(_list(None, system, "system")):
        kind, value = _member(None, block, f"system[{b}]")
        if kind == "text":
            text = _str(None, value, f"system[{b}].text")
            if text.startswith(LEDGER_MARKER):
                out.notes.append(text)
            elif is_summary_note(text):
                out.summaries.append(text)
            else:
                out.texts.append(text)
        elif kind == "guardContent":
            text = _guard_text(None, value, f"system[{b}]")
            if text is None:
                raise _invalid(None, f"system[{b}] is a guarded image; system takes text")
            out.texts.append(text)
        elif kind != "cachePoint":
            raise _invalid(None, f"system[{b}] has type {kind}; system takes text blocks")
    return out


def _invalid(i: int | None, reason: str) -> InvalidMessageError:
    """A bad message ``i``, or (None) a bad ``system`` or ``tools``, which ``reason`` names."""
    text = reason if i is None else f"messages[{i}]: {reason}"
    return InvalidMessageError(text, index=i, reason=reason)


def _type(v: Any) -> str:
    return type(v).__name__


def _member(i: int | None, block: Any, where: str) -> tuple[str, Any]:
    """The one member a Bedrock union block sets (keys set to None count as absent)."""
    if not isinstance(block, Mapping):
        raise _invalid(i, f"{where} must be an object, got {_type(block)}")
    keys = [k for k, v in block.items() if v is not None]
    if len(keys) != 1:
        raise _invalid(i, f"{where} must set exactly one block type, got {sorted(map(str, keys))}")
    return keys[0], block[keys[0]]


def _list(i: int | None, value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise _invalid(i, f"{where} must be a list, got {_type(value)}")
    return value
