"""ringbound: assemble the next LLM request from a long agent session so that it fits the
context window, keeps every tool call paired with its result, and keeps what must never be
lost. The hot path is Rust (``ringbound._core``); this package is the façade."""

from __future__ import annotations

from . import _binding, counters, models  # noqa: F401  (_binding: first, binds the core)
from ._core import CountCache, __version__
from .assembler import Assembler, AssemblyResult
from .body import BodyResult
from .cli.calibrate import Calibration, calibrate, load_usage
from .config import AssemblyConfig
from .counting import count_text, count_tokens, validate
from .detect import detect_provider
from .errors import (
    BudgetExceededError,
    ConfigError,
    CounterError,
    InternalError,
    InvalidBodyError,
    InvalidMessageError,
    PairingError,
    PairingIssue,
    RingboundError,
    StaleStateError,
    StoreError,
    SummaryError,
)
from .ledgers.account import TokenAccount
from .ledgers.calibrator import Calibrator
from .ledgers.side_effects import SideEffectLedger
from .ledgers.tokens import Admission, TokenLedger, ToolStats
from .ledgers.usage import Usage, read_usage
from .observability.metrics import (
    MetricsSink,
    NullSink,
    PrometheusSink,
    get_default_sink,
    set_default_sink,
)
from .observability.tracing import disable_tracing, enable_tracing
from .report import (
    AssemblyReport,
    LedgerEntry,
    ProviderCount,
    RewriteRecord,
    StageRecord,
    SummaryRecord,
)
from .retry import (
    ContextOverflow,
    RetryOutcome,
    is_context_length_error,
    with_context_retry,
    with_context_retry_async,
)
from .startup import warmup, warmup_from_env
from .state import AssemblyState
from .stores import MemoryStore, RedisStore, SessionStore, StoreOutcome
from .summary import recovery, summarizers
from .summary.recovery import (
    AnchorNotFoundError,
    InvalidAnchorError,
    Recovered,
    expand_message_tool,
    recover,
)
from .summary.request import SummaryRequest
from .translation import (
    Translation,
    TranslationChange,
    TranslationReport,
    translate,
    translate_body,
)

__all__ = [
    "Admission",
    "AnchorNotFoundError",
    "Assembler",
    "AssemblyConfig",
    "AssemblyReport",
    "AssemblyResult",
    "AssemblyState",
    "BodyResult",
    "BudgetExceededError",
    "Calibration",
    "Calibrator",
    "ConfigError",
    "ContextOverflow",
    "CountCache",
    "CounterError",
    "InternalError",
    "InvalidAnchorError",
    "InvalidBodyError",
    "InvalidMessageError",
    "LedgerEntry",
    "MemoryStore",
    "MetricsSink",
    "NullSink",
    "PairingError",
    "PairingIssue",
    "PrometheusSink",
    "ProviderCount",
    "Recovered",
    "RedisStore",
    "RetryOutcome",
    "RewriteRecord",
    "RingboundError",
    "SessionStore",
    "SideEffectLedger",
    "StageRecord",
    "StaleStateError",
    "StoreError",
    "StoreOutcome",
    "SummaryError",
    "SummaryRecord",
    "SummaryRequest",
    "TokenAccount",
    "TokenLedger",
    "ToolStats",
    "Translation",
    "TranslationChange",
    "TranslationReport",
    "Usage",
    "__version__",
    "calibrate",
    "count_text",
    "count_tokens",
    "counters",
    "detect_provider",
    "disable_tracing",
    "enable_tracing",
    "expand_message_tool",
    "get_default_sink",
    "is_context_length_error",
    "load_usage",
    "models",
    "read_usage",
    "recover",
    "recovery",
    "set_default_sink",
    "summarizers",
    "translate",
    "translate_body",
    "validate",
    "warmup",
    "with_context_retry",
    "with_context_retry_async",
]

warmup_from_env()
