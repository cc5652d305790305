"""What a session store holds for one session: the cache-stable checkpoint (with its summary),
the side-effect ledger and the token ledger, as one versioned JSON record. A record this
release cannot read is reported and replaced, never trusted and never a crash."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import orjson

from ..errors import ConfigError, StaleStateError
from ..ledgers.side_effects import SideEffectLedger
from ..ledgers.tokens import TokenLedger
from ..report import LedgerEntry
from ..state import AssemblyState

__all__ = ["SCHEMA", "VERSION", "SessionRecord", "UnreadableRecord"]

SCHEMA = "ringbound.SessionRecord"
VERSION = 1


class UnreadableRecord(Exception):
    """A stored record that is not one this release writes; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SessionRecord:
    """One session's state between assemblies.

    Attributes:
        history: Messages of the history the state was planned for: a record from a longer
            history is newer, and an assembly of a shorter one never replaces its state.
        state: The cache-stable checkpoint (None before the first assembly).
        ledger: The side-effect ledger's entries, in the order first seen.
        token_ledger: The token ledger as ``TokenLedger.to_dict`` gives it, or None.
    """

    history: int = 0
    state: AssemblyState | None = None
    ledger: tuple[LedgerEntry, ...] = ()
    token_ledger: dict[str, Any] | None = None

    @property
    def summary(self) -> str | None:
        """The session's current summary note (kept with the checkpoint it belongs to)."""
        return None if self.state is None else self.state.summary

    def side_effect_ledger(self) -> SideEffectLedger:
        return SideEffectLedger(self.ledger)

    def tokens(self) -> TokenLedger | None:
        return None if self.token_ledger is None else TokenLedger.from_dict(self.token_ledger)

    def merged(self, entries: tuple[LedgerEntry, ...]) -> SessionRecord:
        """This record with ``entries`` it lacks appended: no writer's entry is lost."""
        ledger = SideEffectLedger(self.ledger)
        ledger.extend(entries)
        return replace(self, ledger=ledger.entries)

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "schema": SCHEMA,
                "version": VERSION,
                "history": self.history,
                "state": None if self.state is None else orjson.Fragment(self.state.to_bytes()),
                "ledger": [
                    [e.tool, e.call_id, e.args, e.status, e.idempotency_key, e.resource_id, e.turn]
                    for e in self.ledger
                ],
                "token_ledger": self.token_ledger,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> SessionRecord:
        """Reads ``to_bytes``'s output.

        Raises:
            UnreadableRecord: Not JSON, another schema or version, or a malformed field.
        """
        try:
            d = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise UnreadableRecord("not JSON") from None
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise UnreadableRecord("not a session record")
        if d.get("version") != VERSION:
            raise UnreadableRecord(
                f"record version {d.get('version')!r}, this release reads {VERSION}"
            )
        history = d.get("history")
        if isinstance(history, bool) or not isinstance(history, int) or history < 0:
            raise UnreadableRecord("history is not a count")
        try:
            state = None
            if d.get("state") is not None:
                state = AssemblyState.from_bytes(orjson.dumps(d["state"]))
            ledger = SideEffectLedger([_entry(fields) for fields in d["ledger"]])
            tokens = d.get("token_ledger")
            if tokens is not None:
                TokenLedger.from_dict(tokens)
        except StaleStateError as e:
            raise UnreadableRecord(f"state: {e.reason}") from None
        except ConfigError as e:
            raise UnreadableRecord(f"token ledger: {e.reason}") from None
        except (KeyError, TypeError, ValueError) as e:
            raise UnreadableRecord(f"a field is malformed ({type(e).__name__})") from None
        return cls(history=history, state=state, ledger=ledger.entries, token_ledger=tokens)


def _entry(fields: Any) -> LedgerEntry:
    """A ledger entry from its stored list, its fields checked (TypeError/ValueError if not)."""
    tool, call_id, args, status, key, resource, turn = fields
    for value in (tool, call_id, args, status):
        if not isinstance(value, str):
            raise TypeError("a ledger field must be a string")
    for value in (key, resource):
        if value is not None and not isinstance(value, str):
            raise TypeError("a ledger field must be a string or null")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int)):
        raise TypeError("a ledger turn must be an integer or null")
    return LedgerEntry(tool, call_id, args, status, key, resource, turn)
