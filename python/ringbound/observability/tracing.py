"""What one assembly tells the outside world: the metrics sink, one DEBUG record on the
``ringbound`` logger, and an OpenTelemetry span ``ringbound.assemble`` when tracing is on.
All three carry counts, stage names, a content hash and error classes, never message text:
error messages can quote the caller's values, so they are never passed on."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from .._core import __version__
from ..errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    RingboundError,
)
from ..report import AssemblyReport
from .metrics import MetricsSink, get_default_sink

__all__ = [
    "SPAN_NAME",
    "check_tracer",
    "disable_tracing",
    "enable_tracing",
    "logger",
    "request_hash",
]

#: Name of the span of each assembly.
SPAN_NAME = "ringbound.assemble"
#: The logger of every record ringbound writes.
logger = logging.getLogger("ringbound")
#: Pairing issue indices listed in a log record or span, at most.
_MAX_ISSUES = 16

_default_tracer: Any = None
_status: Any = None


def enable_tracing(tracer_provider: Any = None) -> None:
    """Opens a span ``ringbound.assemble`` for every assembly of Assemblers without ``tracer=``.

    Needs the ``otel`` extra (``pip install 'ringbound[otel]'``).

    Args:
        tracer_provider: The OpenTelemetry ``TracerProvider``; the global one when None
            (resolved when spans start, so it may be configured after this call).

    Raises:
        ConfigError: opentelemetry-api is not installed.
    """
    global _default_tracer
    trace = _opentelemetry_trace()
    _default_tracer = trace.get_tracer("ringbound", __version__, tracer_provider=tracer_provider)


def disable_tracing() -> None:
    """Stops the spans ``enable_tracing`` started (Assemblers given ``tracer=`` keep theirs)."""
    global _default_tracer
    _default_tracer = None


def check_tracer(tracer: Any) -> Any:
    """Returns ``tracer`` if it can start spans (an OpenTelemetry Tracer), else ConfigError."""
    if not callable(getattr(tracer, "start_span", None)):
        raise ConfigError(
            f"tracer must be an OpenTelemetry Tracer, got {type(tracer).__name__}",
            key="tracer",
            reason="must be an opentelemetry.trace.Tracer",
        )
    return tracer


def request_hash(payload: bytes | Sequence[bytes]) -> str:
    """16 hex digits identifying a serialized request (blake2b, 8-byte digest): its JSON, or
    the parts it was serialized in (hashed as one stream).

    Example:
        >>> request_hash(b'[{"role":"user","content":"hi"}]')
        'c69fb9f3417824b7'
    """
    h = hashlib.blake2b(digest_size=8)
    for part in [payload] if isinstance(payload, bytes) else payload:
        h.update(part)
    return h.hexdigest()


def _opentelemetry_trace() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        raise ConfigError(
            "tracing needs opentelemetry-api: pip install 'ringbound[otel]'",
            key="tracer",
            reason="opentelemetry-api is not installed",
        ) from None
    return trace


def start_span(tracer: Any, provider: str) -> Any:
    """The span of one assembly, or None when tracing is off (``tracer`` None and no default).

    The span is a child of the current context and is not made current: nothing runs under
    it but the core. Exceptions are recorded by ``rejected``, never by the OpenTelemetry
    defaults, which would copy the exception message (it can quote message content).
    """
    if tracer is None:
        tracer = _default_tracer
        if tracer is None:
            return None
    return tracer.start_span(
        SPAN_NAME,
        attributes={"ringbound.provider": provider},
        record_exception=False,
        set_status_on_exception=False,
    )


#: The serialized input of an assembly, or how to make it (only a DEBUG log needs it).
Payload = bytes | Sequence[bytes] | Callable[[], Sequence[bytes]]


def assembled(
    report: AssemblyReport,
    payload: Payload,
    provider: str,
    sink: MetricsSink | None,
    span: Any,
) -> None:
    """Reports an assembly that returned ``report``; ``payload`` is the serialized input."""
    _call_sink(sink, "observe", report, provider)
    if logger.isEnabledFor(logging.DEBUG):
        if callable(payload):
            payload = payload()
        stages = [s.stage for s in report.stages]
        fields = {
            "request_hash": request_hash(payload),
            "provider": provider,
            "tokens_before": report.tokens_before,
            "tokens_before_exact": report.tokens_before_exact,
            "tokens_after": report.tokens_after,
            "budget": report.budget,
            "messages_before": report.messages_before,
            "messages_after": report.messages_after,
            "stages": stages,
            "dropped_rings": len(report.dropped_rings),
            "dropped_turns": len(report.dropped_turns),
            "repairs": len(report.repairs),
            "ledger_added": len(report.ledger_added),
            "tools_dropped": report.tools_dropped,
            "rewrites": len(report.rewrites),
            "summarized": report.summarized,
            "summary_failed": report.summary_failed,
            "summary_reason": None if report.summary is None else report.summary.reason,
            "redactions": {} if report.summary is None else dict(report.summary.redactions),
            "elapsed_s": report.elapsed_s,
        }
        logger.debug(
            "assembled %s request %s: tokens %s -> %d (budget %d), messages %d -> %d, "
            "stages %s, dropped %d rings %d turns, %d repairs, %d ledger entries added, %.6fs",
            provider,
            fields["request_hash"],
            # A lazily counted request's tokens_before is an upper bound: say so.
            f"{'' if report.tokens_before_exact else 'about '}{report.tokens_before}",
            report.tokens_after,
            report.budget,
            report.messages_before,
            report.messages_after,
            stages,
            fields["dropped_rings"],
            fields["dropped_turns"],
            fields["repairs"],
            fields["ledger_added"],
            report.elapsed_s,
            extra={"ringbound": fields},
        )
    if span is not None:
        span.set_attributes(
            {
                "ringbound.tokens_before": report.tokens_before,
                "ringbound.tokens_before_exact": report.tokens_before_exact,
                "ringbound.tokens_after": report.tokens_after,
                "ringbound.budget": report.budget,
                "ringbound.dropped_rings": len(report.dropped_rings),
                "ringbound.dropped_turns": len(report.dropped_turns),
                "ringbound.stages": [s.stage for s in report.stages],
                "ringbound.messages_before": report.messages_before,
                "ringbound.messages_after": report.messages_after,
                "ringbound.repairs": len(report.repairs),
                "ringbound.ledger_added": len(report.ledger_added),
                "ringbound.tools_dropped": report.tools_dropped,
                "ringbound.rewrites": len(report.rewrites),
                "ringbound.summarized": report.summarized,
                "ringbound.summary_failed": report.summary_failed,
            }
        )
        span.end()


def rejected(error: BaseException, provider: str, sink: MetricsSink | None, span: Any) -> None:
    """Reports an assembly that raised ``error``: its class and numbers, never its message."""
    if isinstance(error, RingboundError):
        _call_sink(sink, "reject", error, provider)
    error_type = type(error).__name__
    if logger.isEnabledFor(logging.DEBUG):
        fields = _error_fields(error)
        logger.debug(
            "rejected %s request: %s",
            provider,
            " ".join([error_type, *(f"{k}={v}" for k, v in fields.items())]),
            extra={"ringbound": {"provider": provider, "error_type": error_type, **fields}},
        )
    if span is not None:
        attributes = {f"ringbound.{k}": v for k, v in _error_fields(error).items()}
        try:
            span.set_attributes({"error.type": error_type, **attributes})
            status = _error_status(error_type)
            if status is not None:
                span.set_status(status)
            span.end()
        except Exception:  # the caller's tracer must never replace the error being reported
            logger.debug("the tracer's span failed while recording a rejection", exc_info=True)


def _error_status(error_type: str) -> Any:
    """OpenTelemetry's ERROR status, or None where opentelemetry is not installed (a tracer of
    another kind that starts spans: it gets the attributes and the end, not the status)."""
    global _status
    if _status is None:
        try:
            from opentelemetry.trace import Status, StatusCode
        except ImportError:
            return None
        _status = (Status, StatusCode.ERROR)
    status, code = _status
    return status(code, error_type)


def _error_fields(error: BaseException) -> dict[str, Any]:
    """Numbers and kinds an error carries, none of its text."""
    if isinstance(error, InvalidMessageError):
        return {} if error.index is None else {"error_index": error.index}
    if isinstance(error, PairingError):
        issues = error.issues[:_MAX_ISSUES]
        return {
            "pairing_issues": len(error.issues),
            "pairing_issue_kinds": sorted({i.kind for i in error.issues}),
            "pairing_issue_indices": [i.index for i in issues],
        }
    if isinstance(error, BudgetExceededError):
        return {"tokens_required": error.tokens, "budget": error.budget}
    return {}


def _call_sink(sink: MetricsSink | None, method: str, arg: Any, provider: str) -> None:
    """Calls the sink; a failing sink is logged by exception class and never fails the
    assembly (its message could quote what the sink was given)."""
    if sink is None:
        sink = get_default_sink()
    try:
        getattr(sink, method)(arg, provider)
    except Exception as e:
        logger.warning(
            "metrics sink %s.%s raised %s; the assembly is not affected",
            type(sink).__name__,
            method,
            type(e).__name__,
        )
