"""Redaction of secrets from text before it leaves for a summarizer.

A summarizer is often a third-party model: API keys, bearer tokens and private keys that sit
in tool results must not travel with the text. Every pattern is written so that one scan is
linear in the text (no nested or overlapping unbounded repeats), because the text can be
megabytes of tool output on a gateway's hot path. Redaction never logs the text it sees.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ConfigError
from ..providers.base import as_mapping
from ..report import LedgerEntry

__all__ = ["KINDS", "Redactor", "redacted_entry", "redacted_value"]

# A run of these characters cannot start just before a key: the lookbehinds make a key start
# a run, so a long run holding many "eyJ"/"sk-" is scanned from its start only, not again
# from each of them (which would be quadratic).
_B64 = r"A-Za-z0-9_\-"

_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")

#: Builtin kinds in the order they are applied (``private_key`` first: its base64 body must
#: not be half-eaten by the others), then ``custom`` for the caller's patterns.
KINDS = (
    "private_key",
    "openai_key",
    "anthropic_key",
    "aws_access_key",
    "aws_secret_key",
    "bearer_token",
    "github_token",
    "jwt",
    "url_credentials",
    "custom",
)


def _starts_word(width: int, word: str) -> str:
    """A lookbehind, placed right after the ``width`` characters a secret opens with, that
    holds when the character before them is not a ``word`` character, or is the letter that
    ends a JSON escape (``\\n``, ``\\t``, ``\\b``, ``\\f``, ``\\r``, ``\\u00e9``): text rendered
    as JSON, or a tool result that is itself a JSON string, keeps a line break as ``\\n``, and
    the secret on the next line must not read as glued to an ``n``. Placed after the opening
    literal, so the scan jumps from one literal to the next instead of testing every
    position."""
    skip = "." * width
    return rf"(?:(?<![{word}]{skip})|(?<=\\[nrtbf]{skip})|(?<=\\u[0-9A-Fa-f]{{4}}{skip}))"


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # ``(?!ant-)``: an Anthropic key also starts with ``sk-`` and must be named as one. A
    # key with a typed prefix (``sk-proj-``, ``sk-ant-api03-``) is distinctive enough to be
    # found glued to the word before it (``APIKEYsk-proj-...``); a bare ``sk-`` is not.
    (
        "openai_key",
        re.compile(
            rf"sk-(?:(?!ant-){_starts_word(3, 'A-Za-z0-9')}|(?=(?:proj|svcacct|admin)-))"
            rf"[{_B64}]{{20,}}"
        ),
    ),
    (
        "anthropic_key",
        re.compile(
            rf"sk-ant-(?:{_starts_word(7, 'A-Za-z0-9')}|(?=(?:api|admin|oat|sid)\d\d-))"
            rf"[{_B64}]{{20,}}"
        ),
    ),
    (
        "aws_access_key",
        re.compile(rf"(?:AKIA|ASIA){_starts_word(4, 'A-Za-z0-9')}[A-Z0-9]{{16}}(?![A-Za-z0-9])"),
    ),
    # A secret access key is 40 characters of base64 with nothing distinctive in it: it is
    # found by the name it is given in config files, env files, JSON (escaped in a JSON
    # string too: ``\\"SecretAccessKey\\": \\"...``) and CLI output.
    (
        "aws_secret_key",
        re.compile(
            r"(?i)((?:aws_?)?secret_?access_?key(?:\\?[\"'])?[ \t]*[:=][ \t]*(?:\\?[\"'])?)"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"
        ),
    ),
    # The word stays so the text keeps reading "Authorization: Bearer [REDACTED:...]"; eight
    # characters at least so prose ("the bearer of ...") is left alone.
    (
        "bearer_token",
        re.compile(
            rf"(?i)(bearer{_starts_word(6, 'A-Za-z0-9_')}(?:[ \t]|\\t)+)"
            r"[A-Za-z0-9\-._~+/]{8,}=*"
        ),
    ),
    (
        "github_token",
        re.compile(
            rf"gh[opsur]_{_starts_word(4, 'A-Za-z0-9_')}[A-Za-z0-9]{{20,}}"
            rf"|github_pat_{_starts_word(11, 'A-Za-z0-9_')}[A-Za-z0-9_]{{20,}}"
        ),
    ),
    (
        "jwt",
        re.compile(rf"eyJ{_starts_word(3, _B64)}[{_B64}]{{5,}}\.[{_B64}]{{5,}}\.[{_B64}]{{5,}}"),
    ),
    # ``scheme://user:password@host``: the password goes, the user and host stay readable.
    # The scheme starts after any character that cannot be in one (an accented letter too:
    # ``\b`` would read ``éhttps`` as one word).
    (
        "url_credentials",
        re.compile(
            r"((?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@]{1,200}:)"
            r"(?!\[REDACTED:)"
            r"[^\s@/]{1,200}(?=@)"
        ),
    ),
)
#: A literal each kind's secret must contain, looked for before its pattern runs: a substring
#: search is many times faster than a scan with a case-insensitive or unanchored pattern.
_NEEDS: dict[str, tuple[str, ...]] = {
    "aws_secret_key": ("ecret", "ECRET"),
    "url_credentials": ("://",),
}
#: Kinds whose pattern keeps its first group (the words around the secret).
_KEEPS_PREFIX = frozenset({"bearer_token", "aws_secret_key", "url_credentials"})
#: Where a cut PEM block (no END line follows) ends: the text's end, or in
#: ``SummaryRequest.text`` its message's end. Its lines (base64, indented as ``.text``
#: indents a message's further lines, or broken by JSON's ``\\n`` inside one line) run up to
#: a line that opens ``.text``'s next message (``user: ``, ``tool read: ``, ``### unit 2``)
#: or with a character no key line opens with. One search from a literal newline: linear.
_CUT_PEM_END = re.compile(
    r"\n(?=(?:user|assistant|system|developer|unknown)(?::| →)|tool [^\n]*:"
    r"|[^A-Za-z0-9+/= \t\r\n])"
)


def _replacement(kind: str) -> str:
    return f"[REDACTED:{kind}]"


class Redactor:
    """Replaces secrets in text with ``[REDACTED:<kind>]``.

    Args:
        patterns: Extra regular expressions (kind ``custom``), applied after the builtin
            kinds. A pattern that does not compile, or that matches the empty string (it
            would fire between every two characters), raises ConfigError with key
            ``redact_patterns``.

    Example:
        >>> Redactor().redact("key sk-abcdefghijklmnopqrstuvwx")
        ('key [REDACTED:openai_key]', {'openai_key': 1})
    """

    __slots__ = ("_custom",)

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        if isinstance(patterns, str):
            raise _pattern_error("a list of regular expressions, not a single string")
        custom = []
        for p in patterns:
            if not isinstance(p, str):
                raise _pattern_error(f"patterns must be strings, got {type(p).__name__}")
            try:
                compiled = re.compile(p)
            except re.error as exc:
                raise _pattern_error(f"{p!r} is not a valid regular expression: {exc}") from None
            if compiled.fullmatch(""):
                raise _pattern_error(f"{p!r} matches the empty string")
            custom.append(compiled)
        self._custom = tuple(custom)

    def redact(self, text: str) -> tuple[str, dict[str, int]]:
        """Redacts ``text``.

        Returns:
            The redacted text and how many secrets of each kind were replaced (kinds with
            none are left out).
        """
        counts: dict[str, int] = {}
        text, n = _redact_private_keys(text)
        if n:
            counts["private_key"] = n
        for kind, pattern in _PATTERNS:
            needs = _NEEDS.get(kind)
            if needs is not None and not any(n in text for n in needs):
                continue
            repl = _replacement(kind)
            if kind in _KEEPS_PREFIX:
                repl = r"\g<1>" + repl
            text, n = pattern.subn(repl, text)
            if n:
                counts[kind] = n
        for pattern in self._custom:
            text, n = pattern.subn(_replacement("custom"), text)
            if n:
                counts["custom"] = counts.get("custom", 0) + n
        return text, counts


def redacted_value(value: Any, redactor: Redactor, counts: dict[str, int]) -> Any:
    """A provider-native value (a message, its content, a tool's arguments) with every
    string in it redacted, as plain data: mappings become dicts, sequences lists, SDK objects
    what they dump to. ``counts`` gathers the kinds replaced. The caller's objects are never
    changed."""
    if isinstance(value, str):
        out, found = redactor.redact(value)
        for kind, n in found.items():
            counts[kind] = counts.get(kind, 0) + n
        return out
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        # The items as stored, as the core read them: a subclass's own __iter__ may raise.
        items = list.copy(value) if isinstance(value, list) else tuple.__iter__(value)
        return [redacted_value(v, redactor, counts) for v in items]
    try:
        mapping = as_mapping(value)
        # The pairs as stored, as the core read them: a dict subclass's own items() may
        # raise. Any other mapping is read through its own methods, which may raise too.
        if isinstance(mapping, dict):
            pairs = list(dict.items(mapping))
        elif isinstance(mapping, Mapping):
            pairs = list(mapping.items())
        else:
            pairs = None
    except RecursionError:
        raise
    except Exception:  # an object that cannot be read passes on as its type name only
        pairs = None
    if pairs is not None:
        return {_key(k): redacted_value(v, redactor, counts) for k, v in pairs}
    # Bytes, sets and other values no provider format holds: nothing of them is passed on.
    return f"[{type(value).__name__}]"


def _key(key: Any) -> str:
    """A mapping key as a plain str, without calling a subclass's own ``__str__``."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None or isinstance(key, (bool, int, float)):
        try:
            return repr(key)
        except ValueError:  # an int past the interpreter's digit limit
            pass
    return f"[{type(key).__name__}]"


def redacted_entry(entry: LedgerEntry, redactor: Redactor) -> LedgerEntry:
    """A ledger entry with its arguments and keys redacted, for what leaves the request: the
    report, metrics, logs and the summarizer (the ledger note in the request keeps them, as
    it goes to the same provider as the history)."""
    changed: dict[str, Any] = {}
    for name in ("args", "idempotency_key", "resource_id"):
        value = getattr(entry, name)
        if isinstance(value, str):
            out, found = redactor.redact(value)
            if found:
                changed[name] = out
    return dataclasses.replace(entry, **changed) if changed else entry


def _redact_private_keys(text: str) -> tuple[str, int]:
    """Replaces each BEGIN ... END PRIVATE KEY block, and a block cut before its END line
    (tool output truncated mid-key) from its header to the end of the text, or of its
    message in ``SummaryRequest.text`` (``_CUT_PEM_END``).

    A scan for headers and, from each one, for the next footer: one regex with ``.*?``
    between them would rescan the rest of the text for every header when footers are
    missing. Once no footer follows, no later header has one either: each of them runs to the
    end ``_CUT_PEM_END`` finds, and the headers it swallows are not searched again.
    """
    if "PRIVATE KEY-----" not in text:
        return text, 0
    out: list[str] = []
    pos = 0
    count = 0
    footers = True
    while (begin := _BEGIN.search(text, pos)) is not None:
        end = _END.search(text, begin.end()) if footers else None
        if end is None:
            footers = False
            stop = _CUT_PEM_END.search(text, begin.end())
            stop_at = stop.start() if stop is not None else len(text)
            # Keep the line break that ends the body, so the text after it reads as before.
            while stop_at > begin.end() and text[stop_at - 1] in "\r\n":
                stop_at -= 1
        else:
            stop_at = end.end()
        out.append(text[pos : begin.start()])
        out.append(_replacement("private_key"))
        pos = stop_at
        count += 1
    if not count:
        return text, 0
    out.append(text[pos:])
    return "".join(out), count


def _pattern_error(reason: str) -> ConfigError:
    return ConfigError(f"redact_patterns: {reason}", key="redact_patterns", reason=reason)
