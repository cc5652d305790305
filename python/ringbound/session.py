"""Reading a session file: a bare list of messages, or an object with ``messages`` (and
optionally ``tools``), as written by most agent frameworks and gateways."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .errors import InvalidMessageError

__all__ = ["Session", "load_session"]


@dataclass(frozen=True)
class Session:
    messages: list[Any]
    tools: list[Any] | None
    #: Whether the file held a bare list (written back the same way).
    bare: bool


def load_session(path: str | Path) -> Session:
    """Loads a session file; InvalidMessageError when it holds neither shape."""
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise InvalidMessageError(f"cannot read {path}: {e.strerror}", index=None) from e
    except orjson.JSONDecodeError as e:
        raise InvalidMessageError(f"{path} is not valid JSON: {e}", index=None) from e
    if isinstance(doc, list):
        return Session(messages=doc, tools=None, bare=True)
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        tools = doc.get("tools")
        return Session(messages=doc["messages"], tools=tools, bare=False)
    raise InvalidMessageError(
        f"{path} must hold a list of messages or an object with a `messages` list",
        index=None,
    )
