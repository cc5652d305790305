"""History items of a request body kept as their own bytes. The gateway path of a format the
core does not write out splits the body's history into items without parsing them
(``_core.split_body``); the core reads them from those bytes, through its item cache, and an
item the assembly keeps unchanged goes back into the request as the same bytes. Only what the
adapter has to read (an item it changes, merges or answers) is parsed, when it reads it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from .errors import InvalidMessageError

__all__ = ["RawItem", "dumps_with_items", "items_json", "raw_items"]


class RawItem(Mapping[str, Any]):
    """One item of a body's history: its bytes, and the object they hold once read."""

    __slots__ = ("_end", "_index", "_source", "_start", "_total", "_value")

    def __init__(self, source: bytes, start: int, end: int, index: int, total: int) -> None:
        #: The history array the item is element ``index`` of ``total`` of, at ``[start, end)``.
        self._source, self._start, self._end = source, start, end
        self._index, self._total = index, total
        self._value: dict[str, Any] | None = None

    @property
    def raw(self) -> bytes:
        """The item's JSON, as the body holds it."""
        return self._source[self._start : self._end]

    def _read(self) -> dict[str, Any]:
        if self._value is None:
            try:
                value = orjson.loads(memoryview(self._source)[self._start : self._end])
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


def raw_items(history: bytes, spans: Sequence[tuple[int, int]]) -> list[RawItem]:
    """The items of a history array, given each one's byte span in it."""
    total = len(spans)
    return [RawItem(history, start, end, i, total) for i, (start, end) in enumerate(spans)]


def _fragment(obj: Any) -> Any:
    if type(obj) is RawItem:
        return orjson.Fragment(obj.raw)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def dumps_with_items(value: Any) -> bytes:
    """``orjson.dumps`` of a value holding raw items, each written as its own bytes."""
    return orjson.dumps(value, default=_fragment)


def items_json(messages: Sequence[Any]) -> bytes | None:
    """A JSON array of a list of messages that holds raw items (each written as its bytes;
    the history array itself when the list is exactly a body's items, in order); None when
    it holds none, for the caller to serialize as usual."""
    if not any(type(m) is RawItem for m in messages):
        return None
    first = messages[0]
    if type(first) is RawItem and len(messages) == first._total:
        source = first._source
        if all(
            type(m) is RawItem and m._source is source and m._index == k
            for k, m in enumerate(messages)
        ):
            return source
    return dumps_with_items(list(messages))
