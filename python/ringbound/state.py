"""Cache-stable assembly: the checkpoint an assembly leaves for the next turn.

A provider's prompt cache only hits while the request begins with exactly the bytes of an
earlier one. Re-planning every turn moves the cut through the middle and rewrites the prefix;
an ``AssemblyState`` remembers where the cut was (the units dropped, the messages rewritten)
and the summary note, so the next turn makes the same decisions again and only appends (the
ledger note is derived again from the history and the caller's ledger). When the reused cut no
longer fits under ``compact_trigger_ratio`` of the budget, the assembly compacts down to
``compact_target_ratio`` (a low-water mark), not just under the trigger, so the next many
turns append again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from .errors import StaleStateError

__all__ = ["AssemblyState"]

_FORMAT = "ringbound.AssemblyState"
_VERSION = 1
_INT_MAX = 2**40


def fingerprint(messages: Sequence[Any]) -> str:
    """A hash of canonical messages, as the state compares histories."""
    return hashlib.blake2b(orjson.dumps(list(messages)), digest_size=16).hexdigest()


@dataclass(frozen=True)
class AssemblyState:
    """Where the last assembly cut the history, to cut it the same way next turn.

    Pass ``res.state`` back as ``assemble(messages, state=...)`` with the history grown by the
    new turns. Serializable with ``to_bytes``/``from_bytes``; indices are positions in the
    provider-independent (canonical) view of the history.

    Attributes:
        provider: The provider key of the history.
        session: A hash of the history's first message: a state is never applied to another
            session.
        messages: How many canonical messages its decisions cover (up to the last one it
            dropped or rewrote); later ones may change freely.
        prefix: A hash of those messages: a history edited there no longer matches.
        budget: The budget it was planned for.
        dropped: Canonical messages dropped (whole units).
        rewrites: ``(index, kind)`` of the messages a cheap stage rewrote.
        summary: The summary note's text, or None.
        summary_span: ``(start, end)`` of the canonical messages the summary stands for.
        ledger: Empty: the next assembly derives the ledger note from the history and the
            caller's ledger. Kept so that states already written still load.
        compactions: Compactions so far in this session.
        floor: The tokens of the request its last compaction made, summary included. The
            cut is reused while the request stays under the trigger or under this, so that a
            compaction that could not go below the trigger (a protected part and a summary
            too large for it) is still reused by the same history: assembling again with
            the state it returned changes nothing.
        sent: How many messages the request this assembly returned holds: on a turn that
            reuses the cut they are the next request's first ones (where a cache marker
            goes, see ``ringbound.cache_markers``).
        tokens: The tokens of the request this assembly returned: on a reused turn, the
            size of the prefix the next request repeats (a cache marker below the model's
            minimum cacheable prefix would be wasted).
        assembled_at: When it was assembled, in seconds since the epoch (``assemble(...,
            now=...)``, else the wall clock): the provider's cache lifetime runs from there
            (``ringbound.cache_lifetime``). None in states written before it was recorded.
            Not compared: the same cut assembled later is the same state.
    """

    provider: str
    session: str
    messages: int
    prefix: str
    budget: int
    dropped: tuple[int, ...] = ()
    rewrites: tuple[tuple[int, str], ...] = ()
    summary: str | None = None
    summary_span: tuple[int, int] | None = None
    ledger: tuple[str, ...] = field(default_factory=tuple)
    compactions: int = 0
    floor: int = 0
    sent: int = 0
    tokens: int = 0
    assembled_at: float | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # A state crosses process boundaries (a store, a client's cookie): every index is
        # checked here, so a corrupt one is a StaleStateError, never an overflow in the core.
        for key in ("messages", "budget", "compactions", "floor", "sent", "tokens"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INT_MAX:
                raise _corrupt(f"{key} must be an integer in [0, 2**40], got {value!r}")
        if not all(_index(i, self.messages) for i in self.dropped):
            raise _corrupt("a dropped index is out of range")
        if not all(
            isinstance(r, tuple)
            and len(r) == 2
            and _index(r[0], self.messages)
            and isinstance(r[1], str)
            for r in self.rewrites
        ):
            raise _corrupt("a rewrite is malformed or out of range")
        span = self.summary_span
        if span is not None and not (
            isinstance(span, tuple)
            and len(span) == 2
            and _index(span[0], self.messages + 1)
            and _index(span[1], self.messages + 1)
            and span[0] <= span[1]
        ):
            raise _corrupt("the summary span is malformed or out of range")
        at = self.assembled_at
        if at is not None and (
            isinstance(at, bool)
            or not isinstance(at, (int, float))
            or not 0 <= at <= _INT_MAX  # NaN fails both comparisons
        ):
            raise _corrupt(f"assembled_at must be seconds in [0, 2**40] or null, got {at!r}")

    def to_bytes(self) -> bytes:
        """The state as versioned JSON."""
        return orjson.dumps(
            {
                "format": _FORMAT,
                "version": _VERSION,
                "provider": self.provider,
                "session": self.session,
                "messages": self.messages,
                "prefix": self.prefix,
                "budget": self.budget,
                "dropped": list(self.dropped),
                "rewrites": [list(r) for r in self.rewrites],
                "summary": self.summary,
                "summary_span": None if self.summary_span is None else list(self.summary_span),
                "ledger": list(self.ledger),
                "compactions": self.compactions,
                "floor": self.floor,
                "sent": self.sent,
                "tokens": self.tokens,
                "assembled_at": self.assembled_at,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes | str) -> AssemblyState:
        """Reads ``to_bytes``'s output.

        Raises:
            StaleStateError: Not a state, corrupt, or of another version.
        """
        try:
            d = orjson.loads(data)
        except (orjson.JSONDecodeError, TypeError) as e:
            raise _corrupt(f"not JSON ({e})") from None
        if not isinstance(d, dict) or d.get("format") != _FORMAT:
            raise _corrupt("not an AssemblyState")
        if d.get("version") != _VERSION:
            raise _corrupt(f"version {d.get('version')!r}, this release reads {_VERSION}")
        try:
            state = cls(
                provider=_typed(d, "provider", str),
                session=_typed(d, "session", str),
                messages=_typed(d, "messages", int),
                prefix=_typed(d, "prefix", str),
                budget=_typed(d, "budget", int),
                dropped=tuple(_ints(d["dropped"])),
                rewrites=tuple((_typed_int(i), _typed_str(k)) for i, k in d["rewrites"]),
                summary=d["summary"] if isinstance(d["summary"], str) else None,
                summary_span=None
                if d["summary_span"] is None
                else (_typed_int(d["summary_span"][0]), _typed_int(d["summary_span"][1])),
                ledger=tuple(_typed_str(line) for line in d["ledger"]),
                compactions=_typed(d, "compactions", int),
                # States written before floors were recorded have none: 0, the trigger alone.
                floor=_typed(d, "floor", int) if "floor" in d else 0,
                sent=_typed(d, "sent", int) if "sent" in d else 0,
                tokens=_typed(d, "tokens", int) if "tokens" in d else 0,
                assembled_at=_seconds(d.get("assembled_at")),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise _corrupt(f"a field is missing or malformed ({type(e).__name__}: {e})") from None
        return state

    def advanced(self, messages: int, prefix: str) -> AssemblyState:
        """The same cut over a longer history."""
        return replace(self, messages=messages, prefix=prefix)


def _typed(d: dict[str, Any], key: str, kind: type) -> Any:
    value = d[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError(f"{key} must be {kind.__name__}")
    return value


def _typed_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _typed_str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"assembled_at must be a number, got {type(value).__name__}")
    return float(value)


def _index(value: Any, size: int) -> bool:
    """Whether ``value`` is an index into ``size`` items."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


def _ints(values: Any) -> list[int]:
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    ):
        raise TypeError("dropped must be a list of integers")
    return values


def _corrupt(reason: str) -> StaleStateError:
    return StaleStateError(f"cannot read the assembly state: {reason}", reason=reason)
