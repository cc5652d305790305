"""The storage protocol behind ``assemble(..., session_id=...)``: a store keeps one opaque
record per session and replaces it only by compare-and-set on its revision, so that replicas
sharing a session never overwrite what they have not read. What the record holds is
``ringbound.stores.record``'s business, not the store's."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..errors import ConfigError

__all__ = ["SessionStore", "Stored", "check_session_id", "check_store"]

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
    """``session_id`` if it is a usable key, else ConfigError."""
    if (
        not isinstance(session_id, str)
        or not session_id
        or len(session_id) > MAX_SESSION_ID
        or "\x00" in session_id
    ):
        raise ConfigError(
            f"session_id must be a non-empty string of at most {MAX_SESSION_ID} characters "
            f"without NUL, got {session_id!r:.80}",
            key="session_id",
            reason="must be a non-empty string",
        )
    return session_id


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
    """``store``, or a new ``MemoryStore`` when None; ConfigError for anything else."""
    if store is None:
        from .memory import MemoryStore

        return MemoryStore()
    if not isinstance(store, SessionStore):
        raise ConfigError(
            f"store must be a ringbound.SessionStore (MemoryStore, RedisStore, or a subclass), "
            f"got {type(store).__name__}",
            key="store",
            reason="must be a SessionStore",
        )
    return store
