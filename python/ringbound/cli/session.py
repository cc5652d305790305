"""Reading a session file: a bare list of messages, or an object with ``messages`` (and
optionally ``tools``), as written by most agent frameworks and gateways."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..detect import detect_provider, provider_candidates
from ..errors import InvalidMessageError

__all__ = ["Session", "load_session"]


#: Where each provider's request body keeps its messages and its top-level system.
_MESSAGE_KEYS = ("messages", "input", "contents")
_SYSTEM_KEYS = ("system", "instructions", "systemInstruction", "system_instruction")


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
    if isinstance(doc, dict):
        key = next((k for k in _MESSAGE_KEYS if isinstance(doc.get(k), list)), None)
        if key is not None:
            system_key = next((k for k in _SYSTEM_KEYS if k in doc), None)
            return Session(
                messages=doc[key],
                tools=doc.get("tools"),
                bare=False,
                system=doc.get(system_key) if system_key else None,
                messages_key=key,
                system_key=system_key,
            )
    raise InvalidMessageError(
        f"{path} must hold a list of messages or an object with a `messages` "
        "(or `input`, `contents`) list",
        index=None,
    )
