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

from ..caller_values import is_utf8, shown
from ..errors import ConfigError
from ..report import LedgerEntry

__all__ = ["SideEffectLedger"]

_STATUS_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _need_str(name: str, value: Any, *, optional: bool = False) -> str | None:
    """``value`` as a plain ``str`` (a subclass's own methods are never called again), or
    ConfigError: the entry's fields go to the core and into the request as UTF-8."""
    if value is None and optional:
        return None
    text = str.__str__(value) if isinstance(value, str) else None
    if text is None or (not optional and not text) or not is_utf8(text):
        raise ConfigError(
            f"ledger entry `{name}` must be a non-empty UTF-8 string, got {shown(value)}",
            key=f"ledger.{name}",
            reason="must be a non-empty string",
        )
    return text


def _args_dict(args: Mapping[str, Any]) -> dict[Any, Any]:
    """The caller's ``args`` as a dict: a dict's pairs as stored, another mapping read
    through its own methods, whose exception is bad input, not ours."""
    try:
        return dict(dict.items(args)) if isinstance(args, dict) else dict(args.items())
    except Exception as e:
        raise ConfigError(
            f"ledger entry `args` could not be read ({type(e).__name__})",
            key="ledger.args",
            reason="could not be read",
        ) from None


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
        tool = _need_str("tool", tool)  # type: ignore[assignment]
        call_id = _need_str("call_id", call_id)  # type: ignore[assignment]
        idempotency_key = _need_str("idempotency_key", idempotency_key, optional=True)
        resource_id = _need_str("resource_id", resource_id, optional=True)
        word = str.__str__(status) if isinstance(status, str) else None
        if not word or not set(word) <= _STATUS_CHARS:
            raise ConfigError(
                f"ledger entry `status` must be a word of letters, digits and underscores, "
                f"got {shown(status)}",
                key="ledger.status",
                reason="must be a word",
            )
        status = word
        if turn is not None:
            if isinstance(turn, bool) or not isinstance(turn, int) or int.__index__(turn) < 0:
                raise ConfigError(
                    f"ledger entry `turn` must be an integer >= 0, got {shown(turn)}",
                    key="ledger.turn",
                    reason="must be an integer >= 0",
                )
            turn = int.__index__(turn)
        if args is not None and not isinstance(args, Mapping):
            raise ConfigError(
                f"ledger entry `args` must be a mapping, got {type(args).__name__}",
                key="ledger.args",
                reason="must be a mapping",
            )
        try:
            plain = _args_dict(args) if args is not None else {}
            args_json = orjson.dumps(plain, option=orjson.OPT_SORT_KEYS).decode()
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
        """Adds entries not already present (an assembly adds what it dropped).

        Raises:
            ConfigError: An entry is not a LedgerEntry, or a field has the wrong type.
        """
        try:
            checked = [_checked(e) for e in entries]
        except ConfigError:
            raise
        except Exception as e:  # the caller's iterable raised while read
            raise ConfigError(
                f"ledger entries could not be read ({type(e).__name__})",
                key="ledger",
                reason="could not be read",
            ) from None
        with self._lock:
            for e in checked:
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


def _checked(e: Any) -> LedgerEntry:
    """``e`` if its fields are plain data of their types, else an entry of their plain
    values (a subclass's own ``__eq__`` or ``__hash__`` is never called: entries are keyed)."""
    if not isinstance(e, LedgerEntry):
        raise ConfigError(
            f"ledger entries must be LedgerEntry objects, got {type(e).__name__}",
            key="ledger",
            reason="must be LedgerEntry objects",
        )
    if (
        type(e.tool) is str
        and type(e.call_id) is str
        and type(e.args) is str
        and type(e.status) is str
        and (e.idempotency_key is None or type(e.idempotency_key) is str)
        and (e.resource_id is None or type(e.resource_id) is str)
        and (e.turn is None or type(e.turn) is int)
        and all(is_utf8(t) for t in (e.tool, e.call_id, e.args, e.status))
        and all(t is None or is_utf8(t) for t in (e.idempotency_key, e.resource_id))
    ):
        return e
    turn = e.turn
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
        raise ConfigError(
            f"ledger entry `turn` must be an integer >= 0, got {shown(turn)}",
            key="ledger.turn",
            reason="must be an integer >= 0",
        )
    return LedgerEntry(
        tool=_need_str("tool", e.tool),  # type: ignore[arg-type]
        call_id=_need_str("call_id", e.call_id),  # type: ignore[arg-type]
        args=_need_str("args", e.args),  # type: ignore[arg-type]
        status=_need_str("status", e.status),  # type: ignore[arg-type]
        idempotency_key=_need_str("idempotency_key", e.idempotency_key, optional=True),
        resource_id=_need_str("resource_id", e.resource_id, optional=True),
        turn=None if turn is None else int.__index__(turn),
    )


def entry_tuple(e: LedgerEntry) -> tuple[Any, ...]:
    """An entry as a tuple in the core's field order; also its identity."""
    return (e.tool, e.call_id, e.args, e.status, e.idempotency_key, e.resource_id, e.turn)
