"""The default session store: a bounded, least-recently-used map in this process. Enough for
one process serving its own sessions; several replicas need a shared store (``RedisStore``)."""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict

from ..caller_values import shown
from ..errors import ConfigError
from .base import (
    MAX_TTL_S,
    MIN_TTL_S,
    SessionStore,
    Stored,
    check_put,
    check_seconds,
    check_session_id,
)

__all__ = ["MemoryStore"]

#: Revisions are unique in the process: a counter never repeats, even across sessions, so a
#: session evicted and written again never gets back a revision a replica still holds.
_revisions = itertools.count(1)


class MemoryStore(SessionStore):
    """Sessions in this process's memory, at most ``max_sessions`` of them: writing one more
    forgets the least recently used. Thread-safe.

    Args:
        max_sessions: Sessions kept.
        ttl_s: Seconds a record lives after its last write, from 1 to ten years; None:
            until evicted.

    Example:
        >>> import ringbound as rb
        >>> store = rb.MemoryStore(max_sessions=2)
        >>> rev = store.put("s1", b"x", expected=None)
        >>> store.get("s1").data, store.put("s1", b"y", expected="stale")
        (b'x', None)
    """

    def __init__(self, max_sessions: int = 10_000, ttl_s: float | None = None) -> None:
        if (
            isinstance(max_sessions, bool)
            or not isinstance(max_sessions, int)
            or int.__index__(max_sessions) < 1
        ):
            raise ConfigError(
                f"max_sessions must be an integer >= 1, got {shown(max_sessions)}",
                key="max_sessions",
                reason="must be an integer >= 1",
            )
        ttl_s = check_seconds("ttl_s", ttl_s, MIN_TTL_S, MAX_TTL_S, optional=True)
        self.max_sessions = int.__index__(max_sessions)
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        # session id -> (revision, data, expiry on the monotonic clock or None)
        self._records: OrderedDict[str, tuple[str, bytes, float | None]] = OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            now = time.monotonic()
            return sum(1 for _, _, exp in self._records.values() if exp is None or exp > now)

    def _live(self, session_id: str) -> tuple[str, bytes, float | None] | None:
        hit = self._records.get(session_id)
        if hit is not None and hit[2] is not None and hit[2] <= time.monotonic():
            del self._records[session_id]
            return None
        return hit

    def get(self, session_id: str) -> Stored | None:
        session_id = check_session_id(session_id)
        with self._lock:
            hit = self._live(session_id)
            if hit is None:
                return None
            self._records.move_to_end(session_id)
            return Stored(hit[0], hit[1])

    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        session_id = check_session_id(session_id)
        check_put(data, expected)
        with self._lock:
            hit = self._live(session_id)
            if (hit[0] if hit is not None else None) != expected:
                return None
            revision = str(next(_revisions))
            expiry = None if self.ttl_s is None else time.monotonic() + self.ttl_s
            self._records[session_id] = (revision, data, expiry)
            self._records.move_to_end(session_id)
            while len(self._records) > self.max_sessions:
                self._records.popitem(last=False)
            return revision

    def delete(self, session_id: str) -> None:
        session_id = check_session_id(session_id)
        with self._lock:
            self._records.pop(session_id, None)
