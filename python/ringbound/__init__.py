"""ringbound: assemble the next LLM request from a long agent session so that it fits the
context window, keeps every tool call paired with its result, and keeps what must never be
lost. The hot path is Rust (``ringbound._core``); this package is the façade."""

from __future__ import annotations

from ._core import __version__
from .assembler import Assembler, AssemblyResult
from .config import AssemblyConfig
from .counting import count_text, count_tokens, validate
from .errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    PairingIssue,
    RingboundError,
    SummaryError,
)
from .report import AssemblyReport, LedgerEntry, StageRecord

__all__ = [
    "Assembler",
    "AssemblyConfig",
    "AssemblyReport",
    "AssemblyResult",
    "BudgetExceededError",
    "ConfigError",
    "InvalidMessageError",
    "LedgerEntry",
    "PairingError",
    "PairingIssue",
    "RingboundError",
    "StageRecord",
    "SummaryError",
    "__version__",
    "count_text",
    "count_tokens",
    "validate",
]
