"""A request body read one level deep, for a body the JSON parser refuses as nested too deeply:
the core reads such a body (a ``metadata`` nested 100,000 deep passes through it as bytes), so
telling its provider must not need the deep value either. The members are found by a scan of
strings and brackets, without building the values; each is parsed on its own, and a value
nested deeper than the parser goes is left out."""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["TOO_DEEP", "shallow_members"]

#: At the object's own level: a string, a run of opening or of closing brackets, a colon or
#: a comma, or a scalar (whitespace between them skipped).
_TOP_TOKEN = re.compile(rb'\s*(?:"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+|[:,]|[^"\[\]{}:,\s]+)')
#: Inside a value: the next bracket or string (what lies between is skipped in one search),
#: then the whole run of brackets or the whole string in one step.
_INNER_MARK = re.compile(rb'[\[\]{}"]')
_BRACKETS = re.compile(rb"[\[{]+|[\]}]+")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: Nesting the JSON parser reads (orjson stops at 1024); a value deeper than this is not
#: parsed here.
_PARSER_DEPTH = 1000
#: Steps the scan takes at most before it gives up (the parser's refusal then stands): a
#: bound on the Python work a hostile body can cause, far above what a deep ``metadata``
#: needs (one step per run of brackets).
MAX_STEPS = 500_000
_QUOTE, _COLON, _COMMA = ord('"'), ord(":"), ord(",")


class _TooDeep:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TOO_DEEP"


#: The value of a member nested deeper than the JSON parser reads.
TOO_DEEP: Any = _TooDeep()


def shallow_members(data: bytes) -> dict[str, Any] | None:
    """The members of the JSON object ``data``, each value parsed, or ``TOO_DEEP`` for a
    value nested deeper than the parser reads; None when ``data`` is not an object the scan
    can split, or takes more than ``MAX_STEPS`` (the parser's own refusal then stands)."""
    opening = _TOP_TOKEN.match(data, 0)
    if opening is None or opening.group().strip() != b"{":
        return None
    members: dict[str, Any] = {}
    key: bytes | None = None
    start = -1
    pos = opening.end()
    steps = 0
    while steps < MAX_STEPS:
        steps += 1
        token = _TOP_TOKEN.match(data, pos)
        if token is None:
            return None
        pos = token.end()
        text = token.group().lstrip()
        first = text[0]
        if first == _QUOTE and key is None and start < 0:
            key = text
        elif first == _COLON and key is not None and start < 0:
            start = pos
        elif first in b"[{" and start >= 0:
            # A value that opens: skip to where it closes, counting its depth.
            depth = deepest = len(text)
            while depth > 0:
                steps += 1
                mark = _INNER_MARK.search(data, pos) if steps < MAX_STEPS else None
                if mark is None:
                    return None
                if data[mark.start()] == _QUOTE:
                    string = _STRING.match(data, mark.start())
                    if string is None:
                        return None
                    pos = string.end()
                    continue
                run = _BRACKETS.match(data, mark.start())
                pos = run.end()  # type: ignore[union-attr]
                size = pos - mark.start()
                depth += size if data[mark.start()] in b"[{" else -size
                deepest = max(deepest, depth)
            # A run of closing brackets may close the levels around the value too.
            pos += depth
            if not _add(members, data, key, start, pos, deepest):
                return None
            key = None
            start = -2  # the value is done: a comma or the end comes next
        elif first == _COMMA and start != -1:
            if start >= 0 and not _add(members, data, key, start, token.start(), 0):
                return None
            key, start = None, -1
        elif first == ord("}") and text == b"}" and (start != -1 or not members):
            if start >= 0 and not _add(members, data, key, start, token.start(), 0):
                return None
            return members if not data[pos:].strip() else None
        elif start >= 0 and first not in b"]}:,":
            continue  # a scalar value: it runs to the comma or the end
        else:
            return None
    return None


def _add(
    members: dict[str, Any], data: bytes, key: bytes | None, start: int, end: int, deepest: int
) -> bool:
    """Adds one member; False when it is malformed."""
    if key is None:
        return False
    try:
        name = orjson.loads(key)
        value = TOO_DEEP if deepest > _PARSER_DEPTH else orjson.loads(data[start:end])
    except orjson.JSONDecodeError:
        return False
    if name in members:
        return False  # the parser would keep the last; a duplicate is not worth guessing
    members[name] = value
    return True
