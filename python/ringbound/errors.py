"""Exceptions of ringbound. Every failure a caller can act on has its own type and carries the
fields needed to act on it; nothing is raised as a bare ``Exception``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "BudgetExceededError",
    "ConfigError",
    "CounterError",
    "InternalError",
    "InvalidBodyError",
    "InvalidMessageError",
    "PairingError",
    "PairingIssue",
    "RingboundError",
    "StaleStateError",
    "StoreError",
    "SummaryError",
]


@dataclass(frozen=True)
class PairingIssue:
    """One broken tool-call pairing.

    Attributes:
        kind: ``duplicate_id``, ``missing_result``, ``orphan_result``, ``result_before_call``
            or ``result_not_adjacent``.
        call_id: The call id concerned, when there is one.
        index: Index of the message the issue points at.
        message: Human-readable text quoting the provider's own error wording.
    """

    kind: str
    call_id: str | None
    index: int
    message: str


class RingboundError(Exception):
    """Base class of every error ringbound raises."""


class InvalidMessageError(RingboundError, ValueError):
    """A message (or the request as a whole, when ``index`` is None) is malformed.

    Attributes:
        index: Index of the offending message, or None for the request as a whole.
        reason: What is wrong, without the index prefix.
    """

    def __init__(self, message: str, *, index: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.index = index
        self.reason = reason or message


class InvalidBodyError(InvalidMessageError):
    """A request body given to ``assemble_body`` is not what its provider sends: not UTF-8,
    not JSON, not an object, over ``max_request_bytes``, a field of the wrong type (a
    history that is not a list, a ``max_tokens`` that is not a count), or a field given under
    both its spellings (Gemini's ``systemInstruction`` and ``system_instruction``).
    ``index`` is None; a malformed message inside a well-formed body is an
    ``InvalidMessageError`` naming it.

    Attributes:
        reason: What is wrong.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message, index=None, reason=reason)


class PairingError(RingboundError, ValueError):
    """Tool calls and results do not pair; nothing was assembled.

    Attributes:
        issues: Every issue found, in message order.
    """

    def __init__(self, message: str, *, issues: list[Any] = ()) -> None:  # type: ignore[assignment]
        super().__init__(message)
        self.issues: list[PairingIssue] = [
            i if isinstance(i, PairingIssue) else PairingIssue(*i) for i in issues
        ]


class BudgetExceededError(RingboundError):
    """The protected part of the request alone does not fit the budget.

    Attributes:
        tokens: Tokens of the smallest request the policy allows.
        budget: The budget it had to fit.
        bucket_tokens: Tokens per bucket: prefix, middle, suffix, tools, insertions, framing.
    """

    def __init__(
        self,
        message: str,
        *,
        tokens: int = 0,
        budget: int = 0,
        bucket_tokens: dict[str, int] | None = None,
    ) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.budget = budget
        self.bucket_tokens = dict(bucket_tokens or {})


class ConfigError(RingboundError, ValueError):
    """A configuration value is out of range.

    Attributes:
        key: The configuration key.
        reason: What is wrong and which values are allowed.
    """

    def __init__(self, message: str, *, key: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.key = key
        self.reason = reason or message


class SummaryError(RingboundError):
    """The summarizer failed and ``on_summary_failure`` is ``fail_closed``; nothing was sent.

    Attributes:
        reason: ``timeout``, ``empty``, ``oversized``, ``not_text`` or
            ``exception:<type>`` (never the exception's text, which may quote the history).
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


class StaleStateError(RingboundError, ValueError):
    """An ``AssemblyState`` does not describe the history it was given.

    Raised when a state is corrupt, of another version, or from another session. A state whose
    history was edited since (messages changed or removed) is not an error: the assembly falls
    back to a fresh plan and says so in ``report.state``.

    Attributes:
        reason: What does not match.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class InternalError(RingboundError, RuntimeError):
    """A bug in ringbound's core: a Rust panic, stopped at the binding, or a plan the core
    made but does not write as its provider's request. Nothing was assembled and the caller's
    input is untouched; the next call starts afresh.

    Attributes:
        reason: The panic's message, or what the core did not write.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class StoreError(RingboundError):
    """A session store failed (unreachable, timed out, or lost every compare-and-set) and
    ``on_store_error`` is ``fail_closed``; nothing was returned.

    Attributes:
        reason: What failed, e.g. ``TimeoutError: Timeout reading from socket`` or
            ``conflict``; never a stored value.
        op: The store operation: ``load``, ``save`` or ``delete``.
    """

    def __init__(self, message: str, *, reason: str = "", op: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message
        self.op = op


class CounterError(RingboundError):
    """A provider's count API did not answer (``ringbound.counters``).

    The assembler never lets this escape: it falls back to the local estimate and says so in
    ``report.provider_count``. Calling a counter directly raises it.

    Attributes:
        reason: ``timeout``, ``exception:<type>`` or ``malformed`` (the answer held no count);
            never the exception's text, which may quote the request.
    """

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason
