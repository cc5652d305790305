"""Reading a session file: a bare list of messages, or a request body with ``messages`` (or
``input``, ``contents``) and optionally ``tools`` and a system, as written by most agent
frameworks and gateways; or a file that holds a list of such sessions (tau-bench's), from which
one is picked by index and key. ``-`` reads standard input."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..body import both_spellings
from ..config import AssemblyConfig
from ..detect import detect_provider, provider_candidates
from ..errors import InvalidBodyError, InvalidMessageError

__all__ = ["Session", "load_session"]


#: The most bytes a session file or standard input may hold: ``max_request_bytes``'s default.
MAX_BYTES = AssemblyConfig().max_request_bytes
#: Where each provider's request body keeps its messages and its top-level system.
_MESSAGE_KEYS = ("messages", "input", "contents")
_SYSTEM_KEYS = ("system", "instructions", "systemInstruction", "system_instruction")
#: Gemini's two spellings of its system: a body giving both is refused, as ``assemble_body``
#: refuses it, rather than one of them read and the other kept.
_GEMINI_SYSTEM = ("systemInstruction", "system_instruction")


@dataclass(frozen=True)
class Session:
    messages: list[Any]
    tools: list[Any] | None
    #: Whether the file held a bare list (written back the same way).
    bare: bool
    #: The top-level system (Anthropic, Bedrock, Gemini, Responses), if the body has one.
    system: Any = None
    #: The body's key for the messages and for the system, to write them back the same way.
    messages_key: str = "messages"
    system_key: str | None = None
    #: The whole body the session came in (empty for a bare list): every other field is
    #: written back as it was.
    body: dict[str, Any] = field(default_factory=dict)

    #: The body's own bytes when the file is that body (not one picked from a list): what
    #: a gateway would have received.
    raw: bytes | None = None

    def request_body(self) -> bytes:
        """The request body as bytes: the file's own, or the picked body serialized."""
        return self.raw if self.raw is not None else orjson.dumps(self.body)

    def detected_provider(self) -> str:
        """The provider the body's format shows; a plain-text session, valid in several
        formats, is read as OpenAI Chat."""
        body: dict[str, Any] = {self.messages_key: self.messages}
        if self.system_key is not None:
            body[self.system_key] = self.system
        candidates = provider_candidates(body)
        if len(candidates) > 1 and "openai_chat" in candidates:
            return "openai_chat"
        return detect_provider(body)


def load_session(
    path: str | Path,
    *,
    index: int | None = None,
    key: str | None = None,
    limit: int = MAX_BYTES,
) -> Session:
    """Loads a session file (``-``: standard input); InvalidMessageError when it holds no
    session, InvalidBodyError when it is over ``limit`` bytes, OSError when it cannot be read.

    Args:
        path: The file.
        index: For a file holding a list of sessions, which one (0-based).
        key: For such a file, the key of each element that holds the session (``traj`` for
            tau-bench); found by itself when the elements have one list-valued key.
        limit: The most bytes read (``max_request_bytes``): a larger input is refused
            before it is read whole.
    """
    data, doc = _read(path, limit)
    whole = True
    if _is_session_list(doc):
        doc, whole = _pick(path, doc, index, key), False
    elif index is not None or key is not None:
        raise InvalidMessageError(
            f"{path} holds one session; --session and --key are for a list of sessions",
            index=None,
        )
    if isinstance(doc, list):
        return Session(messages=doc, tools=None, bare=True)
    if isinstance(doc, dict):
        found = next((k for k in _MESSAGE_KEYS if isinstance(doc.get(k), list)), None)
        if found is not None:
            if all(k in doc for k in _GEMINI_SYSTEM):
                raise both_spellings(*_GEMINI_SYSTEM)
            system_key = next((k for k in _SYSTEM_KEYS if k in doc), None)
            tools = _tools(doc)
            return Session(
                messages=doc[found],
                tools=tools if isinstance(tools, list) else None,
                bare=False,
                system=doc.get(system_key) if system_key else None,
                messages_key=found,
                system_key=system_key,
                body=doc,
                raw=data if whole else None,
            )
    raise InvalidMessageError(
        f"{path} must hold a list of messages or an object with a `messages` "
        "(or `input`, `contents`) list",
        index=None,
    )


def _read(path: str | Path, limit: int) -> tuple[bytes, Any]:
    """The file's bytes and its parsed document. At most ``limit`` + 1 bytes are read, so a
    file or a stream larger than the limit (``/dev/zero`` on standard input) is refused at
    once, as ``assemble_body`` refuses such a body, instead of being read whole. A file that
    cannot be read raises its OSError, which the command line reports with the path."""
    name = "standard input" if str(path) == "-" else str(path)
    if str(path) == "-":
        try:
            data = sys.stdin.buffer.read(limit + 1)
        except OSError as e:
            raise OSError(e.errno, e.strerror, name) from e
    else:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    if len(data) > limit:
        reason = f"{name} is over max_request_bytes = {limit} bytes"
        raise InvalidBodyError(f"{reason}; nothing past that was read", reason=reason)
    try:
        return data, orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise InvalidMessageError(f"{name} is not valid JSON: {e}", index=None) from e


def _tools(doc: dict[str, Any]) -> Any:
    """The body's tools: top-level ``tools``, or Bedrock Converse's ``toolConfig.tools``
    (counted as the assembly counts them)."""
    tools = doc.get("tools")
    config = doc.get("toolConfig")
    if tools is None and isinstance(config, dict):
        tools = config.get("tools")
    return tools


def _is_session_list(doc: Any) -> bool:
    """A list whose elements are not messages but records holding one (tau-bench's
    ``{task_id, traj, ...}``), or lists of messages."""
    if not isinstance(doc, list) or not doc:
        return False
    first = doc[0]
    if isinstance(first, list):
        return True
    return isinstance(first, dict) and not any(
        k in first for k in ("role", "type", "parts", "content")
    )


def _pick(path: str | Path, doc: list[Any], index: int | None, key: str | None) -> Any:
    if index is None:
        raise InvalidMessageError(
            f"{path} holds a list of {len(doc)} sessions; pick one with --session N "
            f"(0 to {len(doc) - 1})" + _key_hint(doc[0], key),
            index=None,
        )
    if not 0 <= index < len(doc):
        raise InvalidMessageError(
            f"--session {index} is out of range: {path} holds {len(doc)} sessions", index=None
        )
    item = doc[index]
    if isinstance(item, list):
        return item
    if (
        key is None
        and isinstance(item, dict)
        and any(isinstance(item.get(k), list) for k in _MESSAGE_KEYS)
    ):
        return item  # the element is a request body itself (SWE-Gym's records)
    if key is None:
        lists = (
            [k for k, v in item.items() if isinstance(v, list)] if isinstance(item, dict) else []
        )
        if len(lists) != 1:
            raise InvalidMessageError(
                f"session {index} of {path} has no single list to read; name it with --key "
                f"(one of: {', '.join(map(str, lists)) or 'none'})",
                index=None,
            )
        key = lists[0]
    value = item.get(key) if isinstance(item, dict) else None
    if not isinstance(value, (list, dict)):
        raise InvalidMessageError(
            f"session {index} of {path} has no list or object at key {key!r}", index=None
        )
    return value


def _key_hint(first: Any, key: str | None) -> str:
    if key is not None or not isinstance(first, dict):
        return ""
    if any(isinstance(first.get(k), list) for k in _MESSAGE_KEYS):
        return ""
    lists = [str(k) for k, v in first.items() if isinstance(v, list)]
    return f" and, if needed, --key (lists in each: {', '.join(lists)})" if len(lists) > 1 else ""
