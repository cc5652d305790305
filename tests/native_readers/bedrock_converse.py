"""The Python reader of Bedrock Converse messages, which ``ringbound.providers.bedrock_converse``
held until the core became the only reader. It stays as the differential oracle for the core's
reading: the oracle's rendering (``tests/providers/bedrock_converse_oracle.py``) reads through
it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ringbound._core import (
    BEDROCK_ASSISTANT_BLOCKS,
    BEDROCK_RESULT_BLOCKS,
    BEDROCK_USER_BLOCKS,
)
from ringbound.errors import InvalidMessageError
from ringbound.providers.base import guarded
from ringbound.providers.bedrock_converse import (
    _check_image,
    _check_payload,
    _guard_text,
    _invalid,
    _list,
    _member,
    _obj,
    _str,
    _type,
)

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
