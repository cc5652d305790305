"""Serializing the caller's messages for the core: all of them (counting, validation, the
adapters), or only those the chat core's cache has not seen. orjson does it in one pass; SDK
objects (pydantic models such as the OpenAI SDK's ``ChatCompletionMessage``) are dumped the way
the SDK sends them. A value that cannot be serialized is reported with the index of its
message."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import orjson

from .errors import InvalidMessageError
from .raw_items import RawItems

__all__ = [
    "check_message_list",
    "check_tools",
    "dump_messages",
    "dump_native",
    "dump_system",
    "dump_tools",
    "dump_value",
    "native_default",
    "nesting_guard",
    "snapshot",
]


def _default(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def native_default(obj: Any) -> Any:
    """What JSON cannot hold, as the providers' JSON bodies carry it: bytes as base64 text (a
    boto3 image, a Gemini SDK blob), SDK objects as they dump, other mappings and sequences as
    dicts and lists."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode()
    return _as_json(obj)


def _as_json(obj: Any) -> Any:
    """``native_default`` for the providers whose SDKs take no raw bytes (Anthropic, OpenAI):
    bytes there are the caller's mistake, refused naming the item."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes, bytearray)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dump_native(messages: Any, field: str = "messages", *, raw_bytes: bool = True) -> list[bytes]:
    """JSON arrays of native items for the core's parser of their provider: as
    ``dump_messages``, with bytes as base64 text, any mapping or sequence as JSON's own and keys
    that are not strings as strings (the adapters' own JSON writes them so), so every item a
    provider's reader can take is written; InvalidMessageError naming the item that cannot be
    written (by its index in ``field``, the provider's name for the list), and why. Without
    ``raw_bytes`` (a provider whose SDK takes none), bytes are refused."""
    items = snapshot(messages)
    default = native_default if raw_bytes else _as_json
    step = DUMP_PART_MESSAGES
    try:
        return [
            orjson.dumps(items[i : i + step], default=default, option=orjson.OPT_NON_STR_KEYS)
            for i in range(0, max(len(items), 1), step)
        ]
    except Exception:  # not JSON, or the caller's own object raised while read: which one?
        pass
    for i, item in enumerate(items):
        try:
            orjson.dumps(item, default=default, option=orjson.OPT_NON_STR_KEYS)
        except Exception as e:
            reason = f"cannot be serialized as JSON ({_why(e)})"
            raise InvalidMessageError(f"{field}[{i}]: {reason}", index=i, reason=reason) from None
    reason = "cannot be serialized as JSON"
    raise InvalidMessageError(f"{field} {reason}", index=None, reason=reason)


def _why(e: Exception) -> str:
    """What went wrong, naming the caller's own exception when orjson wraps it."""
    cause = e.__cause__
    if isinstance(cause, Exception) and not isinstance(cause, orjson.JSONEncodeError):
        return f"{type(cause).__name__}: {cause}"
    return str(e)


def dump_system(system: Any) -> bytes:
    """A top-level system as JSON for the core's reader (``null`` for none): ``dump_value``."""
    return b"null" if system is None else dump_value(system, "system")


def dump_value(value: Any, field: str) -> bytes:
    """A request field (the system, the tools) as JSON for the core's readers, written as the
    provider's SDK would read it: through the caller's own methods (a subclass of ``list`` or
    ``dict`` is iterated as it says, so one that raises is refused), bytes as base64 text, an
    int too large for orjson through the json module. InvalidMessageError naming ``field`` if
    impossible."""
    try:
        return orjson.dumps(value, default=_system_default, option=_SYSTEM_OPTIONS)
    except Exception as e:  # not JSON, or the caller's own object raised while read
        why = _why(e)
        if "64-bit" in str(e):
            try:
                return json.dumps(value, default=_system_default, allow_nan=False).encode()
            except Exception as again:
                why = _why(again)
    reason = f"cannot be serialized as JSON ({why})"
    raise InvalidMessageError(f"{field}: {reason}", index=None, reason=reason) from None


_SYSTEM_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _system_default(obj: Any) -> Any:
    """``native_default`` through the caller's own methods for containers, and the text or
    number a subclass of ``str``, ``int`` or ``float`` holds (read by the base type: the value
    sent, whatever its overrides say)."""
    if isinstance(obj, str):
        return str.__str__(obj)
    if isinstance(obj, int):
        return int.__int__(obj)
    if isinstance(obj, float):
        return float.__float__(obj)
    if isinstance(obj, Mapping) and not hasattr(obj, "model_dump"):
        # Each value through the caller's own ``__getitem__``: ``dict(obj)`` copies a dict
        # subclass by its storage, past what the class says it holds.
        return {k: obj[k] for k in obj}
    return native_default(obj)


def snapshot(messages: Any) -> list[Any]:
    """The caller's messages as a list of their own objects, taken once: every later step
    reads this copy, so another thread that inserts or deletes meanwhile changes nothing of
    this assembly (the message objects are the caller's, not copied)."""
    check_message_list(messages)
    if type(messages) is list:
        return messages.copy()
    if type(messages) is RawItems:
        return messages  # type: ignore[return-value]  # immutable: its own snapshot
    try:
        return list(messages)
    except Exception as e:  # a sequence whose iteration raises is bad input
        reason = f"cannot be read ({type(e).__name__}: {e})"
        raise InvalidMessageError(f"messages {reason}", index=None, reason=reason) from None


@contextmanager
def nesting_guard() -> Iterator[None]:
    """Turns Python's RecursionError, raised while walking a value nested thousands deep,
    into the InvalidMessageError a malformed message gets (the core has a depth limit of its
    own)."""
    try:
        yield
    except RecursionError:
        reason = "a value is nested too deeply to read"
        raise InvalidMessageError(f"messages: {reason}", index=None, reason=reason) from None


def check_message_list(messages: Any) -> None:
    """InvalidMessageError unless ``messages`` is a list-like sequence of messages."""
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"messages must be a list of message objects, got {type(messages).__name__}",
            index=None,
            reason=f"must be a list, got {type(messages).__name__}",
        )


#: Messages per JSON array of a serialized message list. One ``orjson.dumps`` of a whole long
#: history peaks near twice its size (the writer's buffer grows by doubling and the allocator
#: keeps the pages), which made serializing the larger part of an assembly's memory; parts of
#: this many messages each peak near their own size, and a history this short is one part.
DUMP_PART_MESSAGES = 512


def dump_messages(messages: Any, indices: Sequence[int] | None = None) -> list[bytes]:
    """JSON arrays of consecutive messages (one per ``DUMP_PART_MESSAGES``) that together
    hold the whole list, or only the messages at ``indices`` (in that order);
    InvalidMessageError naming the message (by its index in ``messages``) if impossible."""
    check_message_list(messages)
    if indices is None:
        messages = list(messages)
        indices = range(len(messages))
    chosen = [messages[i] for i in indices]
    step = DUMP_PART_MESSAGES
    try:
        return [
            orjson.dumps(chosen[i : i + step], default=_default)
            for i in range(0, max(len(chosen), 1), step)
        ]
    except (TypeError, orjson.JSONEncodeError):
        pass
    for i, message in zip(indices, chosen, strict=True):
        try:
            orjson.dumps(message, default=_default)
        except (TypeError, orjson.JSONEncodeError) as e:
            raise InvalidMessageError(
                f"messages[{i}]: cannot be serialized as JSON ({e})", index=i, reason=str(e)
            ) from None
    raise InvalidMessageError("messages cannot be serialized as JSON", index=None)


def check_tools(tools: Any) -> None:
    """InvalidMessageError unless ``tools`` is None or a list-like sequence of tools."""
    if tools is not None and (
        isinstance(tools, (str, bytes, dict)) or not isinstance(tools, Sequence)
    ):
        raise InvalidMessageError(
            f"tools must be a list of tool objects, got {type(tools).__name__}",
            index=None,
            reason=f"tools must be a list, got {type(tools).__name__}",
        )
    if tools is not None and type(tools) not in (list, tuple):
        # A caller's own sequence type: read it once here, so one whose iteration raises is
        # bad input, not an exception from whichever provider reads the tools first.
        try:
            list(tools)
        except Exception as e:
            reason = f"tools cannot be read ({type(e).__name__}: {e})"
            raise InvalidMessageError(reason, index=None, reason=reason) from None


def dump_tools(tools: Any) -> bytes | None:
    """JSON bytes of the ``tools`` parameter, or None when there are no tools."""
    check_tools(tools)
    if tools is None:
        return None
    try:
        return orjson.dumps(list(tools), default=_default)
    except (TypeError, orjson.JSONEncodeError) as e:
        raise InvalidMessageError(
            f"tools cannot be serialized as JSON ({e})", index=None, reason=str(e)
        ) from None
