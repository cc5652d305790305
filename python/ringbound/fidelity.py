"""Fidelity: whether an assembled request still holds what the agent is about to use. At each
assistant tool call of a real session, the call's concrete argument values that first appeared
in an earlier tool result are the facts the next step needs; recall is the share of them that
an assembly of the history before the call still holds verbatim. No model is involved.

The rules, deterministic and the same everywhere (``benches/fidelity.py``, ``ringbound
simulate --fidelity``):

- A call's **candidate values** come from its parsed JSON arguments: each string leaf is split
  into words (runs of letters, digits and ``_ . / : @ # + - ~``, trailing ``. : -`` stripped),
  and a word of at least ``MIN_CHARS`` characters is a candidate when it looks like a path (it
  holds a ``/``, or is a file name: a name, a dot, a 1-8 letter extension), a number (digits
  with ``. , : -`` between them: amounts, dates, times) or an id (letters and digits mixed, or
  an ``_``, ``@`` or ``#`` in it, or camelCase, or all capitals). Text between double or single
  quotes inside a string leaf (a grep pattern in a shell command) is a candidate as a whole
  when it is at least ``MIN_CHARS`` long. A number leaf is its JSON text. Plain words
  ("economy", "python") are not candidates: they are vocabulary, not facts.
- A candidate is a **fact** when the earliest message of the history that holds it holds it in
  a tool result: it came from a tool, not from the rules, the user or the agent itself.
- "Holds" means verbatim, and not inside a longer word: the characters on either side are not
  letters, digits or ``_``.
- A request **holds** a fact when any of its texts does: message contents, text parts, tool
  call names and arguments (raw and decoded), the top-level system.

Example:
    >>> msgs = [
    ...     {"role": "user", "content": "Change my booking."},
    ...     {"role": "assistant", "content": None, "tool_calls": [
    ...         {"id": "c1", "type": "function",
    ...          "function": {"name": "get_user", "arguments": '{"user_id": "mia_li_3668"}'}}]},
    ...     {"role": "tool", "tool_call_id": "c1",
    ...      "content": '{"reservations": ["NO6JO3"], "payment": "credit_card_4421486"}'},
    ...     {"role": "assistant", "content": None, "tool_calls": [
    ...         {"id": "c2", "type": "function", "function": {
    ...             "name": "get_reservation", "arguments": '{"reservation_id": "NO6JO3"}'}}]},
    ... ]
    >>> [(c.index, c.facts) for c in cut_points(msgs)]
    [(3, ('NO6JO3',))]
    >>> recall(("NO6JO3",), msgs[:1])
    0.0
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MIN_CHARS",
    "CutPoint",
    "candidate_values",
    "cut_points",
    "held",
    "identifiers",
    "recall",
    "request_text",
]

#: Shorter values (airport codes, small counts) are too common to say where they came from.
MIN_CHARS = 4

_WORD = re.compile(r"[\w./:@#+~-]+")
_QUOTED = re.compile(r"\"([^\"\n]+)\"|'([^'\n]+)'")
_FILE_NAME = re.compile(r"[A-Za-z_][\w-]*\.[A-Za-z][A-Za-z0-9]{0,7}")
_NUMBER = re.compile(r"[-+]?\d+(?:[.,:-]\d+)*")
_CAMEL = re.compile(r"[a-z][A-Z]")


def _looks_concrete(word: str) -> bool:
    if len(word) < MIN_CHARS:
        return False
    if "/" in word or _FILE_NAME.fullmatch(word) or _NUMBER.fullmatch(word):
        return True
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    if has_digit and has_alpha:
        return True
    if any(c in word for c in "_@#") and (has_alpha or has_digit):
        return True
    letters = [c for c in word if c.isalpha()]
    return bool(_CAMEL.search(word)) or (len(letters) >= MIN_CHARS and word.isupper())


def identifiers(text: str) -> list[str]:
    """The words of ``text`` that look like paths, numbers or ids, in order, each once.

    Example:
        >>> identifiers("Opened src/app.py at 2024-05-01 for user mia_li_3668 (economy)")
        ['src/app.py', '2024-05-01', 'mia_li_3668']
    """
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group().rstrip(".:-")
        if _looks_concrete(word):
            seen.setdefault(word, None)
    return list(seen)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _parsed_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


def candidate_values(arguments: Any) -> list[str]:
    """A call's candidate values (module docstring), in order, each once.

    Args:
        arguments: The call's arguments: a JSON string (OpenAI) or the parsed object.

    Example:
        >>> candidate_values('{"command": "grep -rn \\'def load_session\\' src/cli", "n": 1200}')
        ['load_session', 'src/cli', 'def load_session', '1200']
    """
    seen: dict[str, None] = {}
    for leaf in _leaves(_parsed_arguments(arguments)):
        if isinstance(leaf, bool) or leaf is None:
            continue
        if isinstance(leaf, (int, float)):
            text = json.dumps(leaf)
            if len(text) >= MIN_CHARS:
                seen.setdefault(text, None)
            continue
        if not isinstance(leaf, str):
            continue
        for word in identifiers(leaf):
            seen.setdefault(word, None)
        for match in _QUOTED.finditer(leaf):
            quoted = (match.group(1) or match.group(2)).strip()
            if len(quoted) >= MIN_CHARS:
                seen.setdefault(quoted, None)
    return list(seen)


def _texts(message: Any) -> Iterator[str]:
    """Every text of an OpenAI Chat message (content, parts, call names and arguments)."""
    if not isinstance(message, Mapping):
        return
    yield from _content_texts(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {} if isinstance(call, Mapping) else {}
        yield str(function.get("name") or "")
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            yield arguments
        parsed = _parsed_arguments(arguments)
        yield from (leaf for leaf in _leaves(parsed) if isinstance(leaf, str))


def _content_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, (list, tuple)):
        for part in content:
            yield from _content_texts(part)
    elif isinstance(content, Mapping):
        for key in ("text", "content", "input", "output"):
            if key in content:
                value = content[key]
                if isinstance(value, (str, list, tuple, Mapping)):
                    yield from _content_texts(value)
                elif value is not None:
                    yield json.dumps(value)


def request_text(messages: Iterable[Any], system: Any = None) -> str:
    """All the texts of a request, one per line: what :func:`held` searches."""
    texts = list(_content_texts(system))
    for m in messages:
        texts.extend(_texts(m))
    return "\n".join(texts)


def _pattern(fact: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(fact) + r"(?!\w)")


def held(facts: Sequence[str], text: str) -> int:
    """How many of ``facts`` occur verbatim in ``text``, not inside a longer word."""
    return sum(1 for f in facts if f in text and _pattern(f).search(text))


def recall(facts: Sequence[str], messages: Iterable[Any], system: Any = None) -> float:
    """The share of ``facts`` a request still holds (1.0 when there are none)."""
    if not facts:
        return 1.0
    return held(facts, request_text(messages, system)) / len(facts)


@dataclass(frozen=True)
class CutPoint:
    """A place to measure: the history is ``messages[:index]``, the next message is an
    assistant tool call, and ``facts`` are the values of its arguments that came from earlier
    tool results."""

    index: int
    facts: tuple[str, ...]


def cut_points(messages: Sequence[Any]) -> list[CutPoint]:
    """Every assistant tool call of OpenAI Chat ``messages`` with at least one fact, in order.

    A call's facts are its candidate values whose earliest occurrence in the messages before
    it is in a tool result (module docstring).
    """
    out = []
    texts = ["\n".join(_texts(m)) for m in messages]  # each message read once, not per call
    for i, m in enumerate(messages):
        if not (isinstance(m, Mapping) and m.get("role") == "assistant" and m.get("tool_calls")):
            continue
        candidates: dict[str, None] = {}
        for call in m["tool_calls"]:
            function = call.get("function") or {} if isinstance(call, Mapping) else {}
            for value in candidate_values(function.get("arguments")):
                candidates.setdefault(value, None)
        pending = {c: _pattern(c) for c in candidates}
        facts = []
        for earlier, text in zip(messages[:i], texts, strict=False):
            if not pending:
                break
            found = [c for c, p in pending.items() if c in text and p.search(text)]
            for c in found:
                del pending[c]
                if isinstance(earlier, Mapping) and earlier.get("role") == "tool":
                    facts.append(c)
        if facts:
            ordered = [c for c in candidates if c in set(facts)]
            out.append(CutPoint(i, tuple(ordered)))
    return out
