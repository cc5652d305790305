"""A caller's argument read without running its code: shown in an error message, taken as a
plain ``str`` or list of them, checked to encode as UTF-8. An argument's own ``__repr__``,
``__iter__`` or ``__eq__`` may raise, and what it raises must not escape as if it were ours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "is_utf8",
    "plain_dict",
    "plain_int",
    "plain_items",
    "plain_iterable",
    "plain_number",
    "plain_str",
    "shown",
    "str_list",
]

_SHOWN_ITEMS = 5


def shown(value: Any, limit: int = 80) -> str:
    """``value`` for an error message: the repr of plain data (a subclass as its base type),
    anything else as ``<TypeName>``; never calls the value's own methods."""
    return _shown(value, 2)[:limit]


def _shown(value: Any, depth: int) -> str:
    if value is None or type(value) in (bool, float):
        return repr(value)
    if isinstance(value, str):
        return repr(str.__str__(value))
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int.__repr__(value)
        except ValueError:  # past the interpreter's digit limit
            return "<a huge int>"
    if isinstance(value, (list, tuple)) and depth > 0:
        items = list.copy(value) if isinstance(value, list) else tuple(tuple.__iter__(value))
        inner = ", ".join(_shown(v, depth - 1) for v in items[:_SHOWN_ITEMS])
        more = ", ..." if len(items) > _SHOWN_ITEMS else ""
        return f"[{inner}{more}]"
    return f"<{type(value).__name__}>"


def is_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate), as the core needs it."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def str_list(value: Any) -> list[str] | None:
    """A list or tuple of strings as plain ``str`` objects, read as stored (a subclass's own
    ``__iter__`` is not called); None when ``value`` is not one, or an item is not a string
    or holds a lone surrogate."""
    if isinstance(value, list):
        items = list.copy(value)
    elif isinstance(value, tuple):
        items = list(tuple.__iter__(value))
    else:
        return None
    out = []
    for item in items:
        if not isinstance(item, str):
            return None
        text = str.__str__(item)
        if not is_utf8(text):
            return None
        out.append(text)
    return out


def plain_str(value: Any) -> str | None:
    """A string (a subclass as the plain ``str`` it holds), or None when ``value`` is not one."""
    return str.__str__(value) if isinstance(value, str) else None


def plain_int(value: Any) -> int | None:
    """An integer (a subclass as the plain ``int`` it holds; never a bool), or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__index__(value)
    return None


def plain_number(value: Any) -> int | float | None:
    """An integer or float as the plain value it holds (never a bool), or None."""
    if isinstance(value, float):
        return float.__float__(value)
    return plain_int(value)


def plain_items(value: Any) -> list[Any] | None:
    """A list's or tuple's items as stored (a subclass's own ``__iter__``, ``__len__`` and
    ``__getitem__`` are not called), or None when ``value`` is neither."""
    if isinstance(value, list):
        return list.copy(value)
    if isinstance(value, tuple):
        return list(tuple.__iter__(value))
    return None


def plain_iterable(value: Any) -> list[Any] | None:
    """A list's or tuple's items as stored, another iterable's as it yields them once; None
    for a string, bytes or a mapping (one value, not a list of them), something that does
    not iterate, or an iteration that raises."""
    items = plain_items(value)
    if items is not None or isinstance(value, (str, bytes, bytearray, Mapping)):
        return items
    try:
        return list(value)
    except Exception:  # not iterable, or the caller's own iteration failed
        return None


def plain_dict(value: Any) -> dict[Any, Any] | None:
    """A mapping as a plain dict: a dict's pairs as stored; another mapping's from its own
    ``items()``, None when that raises or ``value`` is no mapping."""
    if isinstance(value, dict):
        return dict(dict.items(value))
    if isinstance(value, Mapping):
        try:
            return dict(value.items())
        except Exception:  # the caller's mapping failed while read: not one we can take
            return None
    return None
