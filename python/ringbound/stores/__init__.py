"""Session stores: where ``assemble(..., session_id=...)`` keeps each conversation's
checkpoint, side-effect ledger and token ledger between requests, so that any replica of a
gateway can serve the next turn (see docs/session-store.md)."""

from __future__ import annotations

from .base import SessionStore, Stored
from .memory import MemoryStore
from .record import SessionRecord
from .redis import RedisStore
from .session import StoreOutcome

__all__ = [
    "MemoryStore",
    "RedisStore",
    "SessionRecord",
    "SessionStore",
    "StoreOutcome",
    "Stored",
]
