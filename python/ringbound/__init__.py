"""ringbound: assemble the next LLM request from a long agent session so that it fits the
context window, keeps every tool call paired with its result, and keeps what must never be
lost. The hot path is Rust (``ringbound._core``); this package is the façade."""

from __future__ import annotations

from ._core import CountCache, __version__
from .assembler import Assembler, AssemblyResult
from .config import AssemblyConfig
from .counting import count_text, count_tokens, validate
from .detect import detect_provider
from .errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    PairingIssue,
    RingboundError,
    SummaryError,
)
from .metrics import MetricsSink, NullSink, PrometheusSink, get_default_sink, set_default_sink
from .report import AssemblyReport, LedgerEntry, StageRecord
from .telemetry import disable_tracing, enable_tracing

__all__ = [
    "Assembler",
    "AssemblyConfig",
    "AssemblyReport",
    "AssemblyResult",
    "BudgetExceededError",
    "ConfigError",
    "CountCache",
    "InvalidMessageError",
    "LedgerEntry",
    "MetricsSink",
    "NullSink",
    "PairingError",
    "PairingIssue",
    "PrometheusSink",
    "RingboundError",
    "StageRecord",
    "SummaryError",
    "__version__",
    "count_text",
    "count_tokens",
    "detect_provider",
    "disable_tracing",
    "enable_tracing",
    "get_default_sink",
    "set_default_sink",
    "validate",
]
