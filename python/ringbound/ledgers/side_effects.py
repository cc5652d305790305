"""The side-effect ledger a run keeps: which side-effecting tools already ran, so that neither a
trimmed history nor a summary invites the model to run them again.

Entries come from two places: the execution layer records what it executed (it knows the
idempotency key and what the effect created), and each assembly adds the side-effecting calls
of the rings it drops. The assembler renders all of them, in the order they were first seen,
into one pinned note with fixed wording, so the note's bytes change only when an entry is
added and prompt caches keep hitting.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from ..errors import ConfigError
from ..report import LedgerEntry

__all__ = ["SideEffectLedger"]

_STATUS_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _need_str(name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or (not optional and not value):
        raise ConfigError(
            f"ledger entry `{name}` must be a non-empty string, got {value!r}",
            key=f"ledger.{name}",
            reason="must be a non-empty string",
        )


class SideEffectLedger:
    """A run's record of executed side-effecting tool calls; thread-safe.

    Pass it to every assembly of the run (``asm.assemble(messages, ledger=ledger)``): its
    entries are rendered into the pinned ledger note, and the side-effecting calls of rings
    the assembly drops are added to it. The execution layer adds what it executes with
    ``record``.

    Example:
        >>> import ringbound as rb
        >>> ledger = rb.SideEffectLedger()
        >>> entry = ledger.record("send_email", "call_7", args={"to": "a@b.c"},
        ...                       idempotency_key="k-7", resource_id="msg-91")
        >>> [e.tool for e in ledger]
        ['send_email']
    """

    def __init__(self, entries: Iterable[LedgerEntry] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: list[LedgerEntry] = []
        self._keys: set[tuple[Any, ...]] = set()
        self.extend(entries)

    def record(
        self,
        tool: str,
        call_id: str,
        *,
        args: Mapping[str, Any] | None = None,
        status: str = "ok",
        idempotency_key: str | None = None,
        resource_id: str | None = None,
        turn: int | None = None,
    ) -> LedgerEntry:
        """Records an executed call; a second record of the same entry changes nothing.

        Args:
            tool: The tool's name.
            call_id: The id of the call that ran it.
            args: The arguments that identify the effect (keep it short: a recipient, an
                order id), JSON-serializable.
            status: ``ok``, ``error``, ``not_completed`` or another word (letters, digits,
                underscores).
            idempotency_key: The key the effect is deduplicated by.
            resource_id: What the effect created or changed.
            turn: The conversation turn of the call.

        Returns:
            The entry.

        Raises:
            ConfigError: A field has the wrong type or shape.
        """
        _need_str("tool", tool)
        _need_str("call_id", call_id)
        _need_str("idempotency_key", idempotency_key, optional=True)
        _need_str("resource_id", resource_id, optional=True)
        if not isinstance(status, str) or not status or not set(status) <= _STATUS_CHARS:
            raise ConfigError(
                f"ledger entry `status` must be a word of letters, digits and underscores, "
                f"got {status!r}",
                key="ledger.status",
                reason="must be a word",
            )
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 0):
            raise ConfigError(
                f"ledger entry `turn` must be an integer >= 0, got {turn!r}",
                key="ledger.turn",
                reason="must be an integer >= 0",
            )
        if args is not None and not isinstance(args, Mapping):
            raise ConfigError(
                f"ledger entry `args` must be a mapping, got {type(args).__name__}",
                key="ledger.args",
                reason="must be a mapping",
            )
        try:
            args_json = orjson.dumps(dict(args or {}), option=orjson.OPT_SORT_KEYS).decode()
        except TypeError as e:
            raise ConfigError(
                f"ledger entry `args` must be JSON-serializable ({e})",
                key="ledger.args",
                reason="must be JSON-serializable",
            ) from None
        entry = LedgerEntry(
            tool=tool,
            call_id=call_id,
            args=args_json,
            status=status,
            idempotency_key=idempotency_key,
            resource_id=resource_id,
            turn=turn,
        )
        self.extend([entry])
        return entry

    def extend(self, entries: Iterable[LedgerEntry]) -> None:
        """Adds entries not already present (an assembly adds what it dropped)."""
        with self._lock:
            for e in entries:
                key = entry_tuple(e)
                if key not in self._keys:
                    self._keys.add(key)
                    self._entries.append(e)

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The entries, in the order they were first seen."""
        with self._lock:
            return tuple(self._entries)

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __repr__(self) -> str:
        return f"SideEffectLedger({len(self)} entries)"

    def core_entries(self) -> list[tuple[Any, ...]]:
        """The entries as the core takes them: (tool, call id, arguments JSON, status,
        idempotency key, resource id, turn)."""
        return [entry_tuple(e) for e in self.entries]


def entry_tuple(e: LedgerEntry) -> tuple[Any, ...]:
    """An entry as a tuple in the core's field order; also its identity."""
    return (e.tool, e.call_id, e.args, e.status, e.idempotency_key, e.resource_id, e.turn)
