"""Redaction of secrets from text before it leaves for a summarizer.

A summarizer is often a third-party model: API keys, bearer tokens and private keys that sit
in tool results must not travel with the text. Every pattern is written so that one scan is
linear in the text (no nested or overlapping unbounded repeats), because the text can be
megabytes of tool output on a gateway's hot path. Redaction never logs the text it sees.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import ConfigError

__all__ = ["KINDS", "Redactor"]

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
    "bearer_token",
    "github_token",
    "jwt",
    "custom",
)

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # ``(?!ant-)``: an Anthropic key also starts with ``sk-`` and must be named as one.
    ("openai_key", re.compile(rf"(?<![A-Za-z0-9])sk-(?!ant-)[{_B64}]{{20,}}")),
    ("anthropic_key", re.compile(rf"(?<![A-Za-z0-9])sk-ant-[{_B64}]{{20,}}")),
    ("aws_access_key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    # The word stays so the text keeps reading "Authorization: Bearer [REDACTED:...]"; eight
    # characters at least so prose ("the bearer of ...") is left alone.
    ("bearer_token", re.compile(r"(?i)(\bbearer[ \t]+)[A-Za-z0-9\-._~+/]{8,}=*")),
    (
        "github_token",
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[opsur]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    ),
    (
        "jwt",
        re.compile(rf"(?<![{_B64}])eyJ[{_B64}]{{5,}}\.[{_B64}]{{5,}}\.[{_B64}]{{5,}}"),
    ),
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
            repl = _replacement(kind)
            if kind == "bearer_token":
                repl = r"\g<1>" + repl
            text, n = pattern.subn(repl, text)
            if n:
                counts[kind] = n
        for pattern in self._custom:
            text, n = pattern.subn(_replacement("custom"), text)
            if n:
                counts["custom"] = counts.get("custom", 0) + n
        return text, counts


def _redact_private_keys(text: str) -> tuple[str, int]:
    """Replaces each BEGIN ... END PRIVATE KEY block.

    A scan for headers and, from each one, for the next footer: one regex with ``.*?``
    between them would rescan the rest of the text for every header when footers are
    missing. Once no footer follows, no later header can have one, so the scan stops.
    """
    if "PRIVATE KEY-----" not in text:
        return text, 0
    out: list[str] = []
    pos = 0
    count = 0
    while (begin := _BEGIN.search(text, pos)) is not None:
        end = _END.search(text, begin.end())
        if end is None:
            break
        out.append(text[pos : begin.start()])
        out.append(_replacement("private_key"))
        pos = end.end()
        count += 1
    if not count:
        return text, 0
    out.append(text[pos:])
    return "".join(out), count


def _pattern_error(reason: str) -> ConfigError:
    return ConfigError(f"redact_patterns: {reason}", key="redact_patterns", reason=reason)
