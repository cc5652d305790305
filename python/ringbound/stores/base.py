"""The storage protocol behind ``assemble(..., session_id=...)``: a store keeps one opaque
record per session and replaces it only by compare-and-set on its revision, so that replicas
sharing a session never overwrite what they have not read. What the record holds is
``ringbound.stores.record``'s business, not the store's."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..caller_values import is_utf8, shown
from ..errors import ConfigError

__all__ = ["SessionStore", "Stored", "check_seconds", "check_session_id", "check_store"]

#: Longest session id accepted: ids are keys, not payloads.
MAX_SESSION_ID = 512


@dataclass(frozen=True)
class Stored:
    """One session's record as a store holds it.

    Attributes:
        revision: An opaque token that changes on every write and is never reused for the
            same session (so an expired and re-created record cannot pass for the old one).
        data: The record's bytes.
    """

    revision: str
    data: bytes


class SessionStore(ABC):
    """Where sessions' records live between assemblies: subclass it and implement ``get``,
    ``put`` and ``delete``.

    The one rule a store must keep: ``put`` writes only while the session's revision is still
    ``expected`` (None: the session has no record), atomically. Failures are raised as
    ``StoreError`` (anything else propagates unchanged). The async methods run the sync ones in
    a worker thread unless a store overrides them.
    """

    @abstractmethod
    def get(self, session_id: str) -> Stored | None:
        """The session's record, or None when it has none (never written, deleted, expired)."""

    @abstractmethod
    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        """Writes ``data`` if the session's revision is still ``expected``.

        Returns:
            The new revision, or None when the revision had moved on (nothing was written).
        """

    @abstractmethod
    def delete(self, session_id: str) -> None:
        """Forgets the session (no error if it has no record)."""

    async def aget(self, session_id: str) -> Stored | None:
        """``get`` for async callers."""
        return await asyncio.to_thread(self.get, session_id)

    async def aput(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        """``put`` for async callers."""
        return await asyncio.to_thread(self.put, session_id, data, expected)

    async def adelete(self, session_id: str) -> None:
        """``delete`` for async callers."""
        await asyncio.to_thread(self.delete, session_id)


def check_session_id(session_id: object) -> str:
    """``session_id`` as a plain ``str`` if it is a usable key, else ConfigError. A key is
    UTF-8 on the wire, so one holding a lone surrogate is refused here, not by the store's
    client mid-request."""
    text = str.__str__(session_id) if isinstance(session_id, str) else None
    if (
        text is None
        or not text
        or len(text) > MAX_SESSION_ID
        or "\x00" in text
        or not is_utf8(text)
    ):
        raise ConfigError(
            f"session_id must be a non-empty UTF-8 string of at most {MAX_SESSION_ID} "
            f"characters without NUL, got {shown(session_id)}",
            key="session_id",
            reason="must be a non-empty string",
        )
    return text


#: Bounds of a session's time to live (``ttl_s``): under a second, a record expires between
#: two turns of the same conversation and every turn starts anew; past ten years the expiry
#: (Redis adds it to the clock in milliseconds) is no longer a time any server keeps.
MIN_TTL_S = 1
MAX_TTL_S = 10 * 365 * 24 * 3600
#: Bounds of a store call's timeout (``timeout_s``): under a millisecond every call times
#: out; past an hour a stalled server holds the request as good as forever.
MIN_TIMEOUT_S = 0.001
MAX_TIMEOUT_S = 3600


def check_seconds(
    name: str, value: object, low: float, high: float, *, optional: bool
) -> float | None:
    """``value`` as a plain number if it is a number of seconds in ``[low, high]`` (or None
    when ``optional``), else ConfigError naming ``name`` and the value."""
    if value is None and optional:
        return None
    # A subclass as its plain value (its own comparisons are not ours to call); an int is
    # compared as it is, since a huge one does not convert to float.
    number = (
        None
        if isinstance(value, bool) or not isinstance(value, (int, float))
        else int.__index__(value)
        if isinstance(value, int)
        else float.__float__(value)
    )
    if number is None or not low <= number <= high:  # NaN and infinities fail this too
        reason = f"must be a number of seconds in [{low:g}, {high:g}]" + (
            " or None" if optional else ""
        )
        raise ConfigError(f"{name} {reason}, got {shown(value)}", key=name, reason=reason)
    return number


def check_put(data: object, expected: object) -> None:
    """ConfigError unless ``put``'s arguments have the types the protocol says."""
    if not isinstance(data, bytes):
        raise ConfigError(
            f"data must be bytes, got {type(data).__name__}", key="data", reason="must be bytes"
        )
    if expected is not None and not isinstance(expected, str):
        raise ConfigError(
            f"expected must be a revision string or None, got {type(expected).__name__}",
            key="expected",
            reason="must be a str or None",
        )


def check_store(store: object) -> SessionStore:
    """``store`` if it is a ``SessionStore``, else ConfigError (the assembler makes a
    ``MemoryStore`` of its own when given none)."""
    if not isinstance(store, SessionStore):
        raise ConfigError(
            f"store must be a ringbound.SessionStore (MemoryStore, RedisStore, or a subclass), "
            f"got {type(store).__name__}",
            key="store",
            reason="must be a SessionStore",
        )
    return store
