"""History items of a request body kept as their own bytes. The gateway path's ``items`` path
(a plan the body path does not write: the core writes it from the items) has the body's
history split into items without parsing them (``_core.split_body_at``); the core reads them
from those bytes, through its item cache, and an item the assembly keeps unchanged goes back
into the request as the same bytes. Only an item written anew (changed, merged or answered) is
parsed, when the core's writing is applied (``list_ops``)."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, SupportsIndex, overload

import orjson

from .errors import InvalidMessageError

__all__ = ["RawItem", "RawItems", "dumps_with_items", "items_json", "raw_items"]


class RawItem(Mapping[str, Any]):
    """One item of a body's history: its bytes, and the object they hold once read."""

    __slots__ = ("_index", "_owner", "_value")

    def __init__(self, owner: RawItems, index: int) -> None:
        #: Element ``index`` of the history array ``owner`` holds.
        self._owner, self._index = owner, index
        self._value: dict[str, Any] | None = None

    @property
    def raw(self) -> bytes:
        """The item's JSON, as the body holds it."""
        start, end = self._owner._spans[self._index]
        return self._owner._source[start:end]

    def _read(self) -> dict[str, Any]:
        if self._value is None:
            start, end = self._owner._spans[self._index]
            try:
                value = orjson.loads(memoryview(self._owner._source)[start:end])
            except orjson.JSONDecodeError as e:
                reason = f"not valid JSON ({e})"
                raise InvalidMessageError(reason, index=None, reason=reason) from None
            if not isinstance(value, dict):
                reason = f"an item must be an object, got {type(value).__name__}"
                raise InvalidMessageError(reason, index=None, reason=reason)
            self._value = value
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __repr__(self) -> str:
        return f"RawItem({self.raw[:60]!r})"


class RawItems(Sequence[RawItem]):
    """The items of a history array, each made when first asked for: an assembly that trims
    a long history reads a few of them in Python (the ones it keeps or changes), so making an
    object per item up front was a third of the items path. Immutable: it is its own
    snapshot."""

    __slots__ = ("_made", "_source", "_spans")

    def __init__(self, source: bytes, spans: Sequence[tuple[int, int]]) -> None:
        #: The history array, and each element's ``[start, end)`` in it.
        self._source, self._spans = source, spans
        self._made: list[RawItem | None] = [None] * len(spans)

    @property
    def source(self) -> bytes:
        """The history array the items are the elements of."""
        return self._source

    @property
    def spans(self) -> Sequence[tuple[int, int]]:
        """Each item's ``[start, end)`` in ``source``."""
        return self._spans

    @overload
    def __getitem__(self, i: SupportsIndex) -> RawItem: ...
    @overload
    def __getitem__(self, i: slice) -> list[RawItem]: ...
    def __getitem__(self, i: SupportsIndex | slice) -> RawItem | list[RawItem]:
        if type(i) is not int:
            if isinstance(i, slice):
                return [self[k] for k in range(len(self._spans))[i]]
            i = operator.index(i)
        made = self._made[i]  # a list's IndexError when out of range
        if made is None:
            k = i if i >= 0 else i + len(self._spans)
            made = self._made[k] = RawItem(self, k)
        return made

    def __len__(self) -> int:
        return len(self._spans)

    def __iter__(self) -> Iterator[RawItem]:
        return map(self.__getitem__, range(len(self._spans)))

    def __repr__(self) -> str:
        return f"RawItems({len(self)} items)"

    def take(self, indices: Sequence[int]) -> KeptItems:
        """The items at ``indices`` (increasing), as they are."""
        return KeptItems(self, indices)


class KeptItems(Sequence[RawItem]):
    """Items of a ``RawItems``, in order: what a rendering keeps of a body's history as it
    is. ``items_json`` writes each stretch of consecutive items as one slice of the body,
    without an object made per item."""

    __slots__ = ("_indices", "_owner")

    def __init__(self, owner: RawItems, indices: Sequence[int]) -> None:
        self._owner, self._indices = owner, indices

    @overload
    def __getitem__(self, i: SupportsIndex) -> RawItem: ...
    @overload
    def __getitem__(self, i: slice) -> list[RawItem]: ...
    def __getitem__(self, i: SupportsIndex | slice) -> RawItem | list[RawItem]:
        if isinstance(i, slice):
            return [self._owner[k] for k in self._indices[i]]
        return self._owner[self._indices[i]]

    def __len__(self) -> int:
        return len(self._indices)

    def __repr__(self) -> str:
        return f"KeptItems({len(self)} of {len(self._owner)} items)"

    def json(self) -> bytes:
        """The items as one JSON array."""
        owner, indices = self._owner, self._indices
        if len(indices) == len(owner):
            return owner.source  # increasing and as many: every item
        pieces = []
        first = last = -2
        for k in indices:
            if k != last + 1:
                if first >= 0:
                    pieces.append(_run(owner, first, last))
                first = k
            last = k
        if first >= 0:
            pieces.append(_run(owner, first, last))
        return b"[" + b",".join(pieces) + b"]"


def raw_items(history: bytes, spans: Sequence[tuple[int, int]]) -> RawItems:
    """The items of a history array, given each one's byte span in it."""
    return RawItems(history, spans)


def _fragment(obj: Any) -> Any:
    if type(obj) is RawItem:
        return orjson.Fragment(obj.raw)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def dumps_with_items(value: Any) -> bytes:
    """``orjson.dumps`` of a value holding raw items, each written as its own bytes."""
    return orjson.dumps(value, default=_fragment)


def items_json(messages: Sequence[Any]) -> bytes | None:
    """A JSON array of a list of messages that holds raw items; None when it holds none, for
    the caller to serialize as usual. Raw items that follow each other in the body's history
    go in as one slice of it (separators and all), so a long kept stretch costs one copy,
    whatever its length; the history array itself when the list is exactly the body's items.
    """
    if type(messages) is RawItems:
        return messages.source
    if type(messages) is KeptItems:
        return messages.json()
    if RawItem not in map(type, messages):  # C-speed: one type check per message
        return None  # the caller's own objects: serialized the caller's way
    pieces: list[bytes] = []
    # The open run of consecutive raw items: their owner, first and last index.
    owner: RawItems | None = None
    first = last = 0
    for m in messages:
        if type(m) is RawItem:
            if m._owner is owner and m._index == last + 1:
                last += 1
                continue
            if owner is not None:
                pieces.append(_run(owner, first, last))
            owner, first = m._owner, m._index
            last = first
            continue
        if owner is not None:
            pieces.append(_run(owner, first, last))
            owner = None
        pieces.append(dumps_with_items(m))
    if owner is not None:
        if not pieces and first == 0 and last == len(owner) - 1:
            return owner.source
        pieces.append(_run(owner, first, last))
    return b"[" + b",".join(pieces) + b"]"


def _run(owner: RawItems, first: int, last: int) -> bytes:
    """Items ``first`` to ``last`` of ``owner``'s history as they stand in it, with what
    separates them."""
    return owner._source[owner._spans[first][0] : owner._spans[last][1]]
