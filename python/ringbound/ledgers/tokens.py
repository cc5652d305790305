"""The token ledger of one agent run, shared by the assembler and the tool-call budget: what the
provider actually billed calibrates the local estimate, and what each tool has returned so far
predicts what its next call will bring into the window.

Units: every count given to the ledger (``current_tokens``, tool return sizes, predictions) is a
local estimate; ``budget`` and every count the ledger returns are provider tokens, i.e. local
estimates scaled by :attr:`TokenLedger.ratio`.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from ..caller_values import is_utf8, plain_int, plain_number, plain_str, shown
from ..errors import ConfigError
from .account import TokenAccount
from .calibrator import DEFAULT_MODEL, MAX_TOKENS, Calibrator
from .usage import Usage, read_usage

__all__ = [
    "DEFAULT_TOOL_TOKENS",
    "Admission",
    "TokenLedger",
    "ToolStats",
]

#: Predicted return of a tool never observed: a large file read or search page, capped at a
#: quarter of the budget so an unknown tool can still be admitted into a small window.
DEFAULT_TOOL_TOKENS = 4_096
#: Observations kept per series (provider ratios, each tool's returns) for the p95; the max
#: and the count cover the whole run.
HISTORY = 256
_VERSION = 2
#: Versions ``from_dict`` reads: 1 predates the reconciled account and the calibrator.
_READS = (1, 2)
_DECISIONS = ("allow", "compact_first", "deny")

Decision = Literal["allow", "compact_first", "deny"]


@dataclass(frozen=True)
class ToolStats:
    """Observed return sizes of one tool, in local tokens.

    Attributes:
        count: Returns observed in the run.
        max: The largest single return of the run.
        p95: Nearest-rank 95th percentile of the last returns (the max below 20 returns).
    """

    count: int
    max: int
    p95: int


@dataclass(frozen=True)
class Admission:
    """Whether a tool call may run now.

    Attributes:
        decision: ``allow`` (the predicted return fits the free space), ``compact_first`` (it
            fits the budget once the history is compacted) or ``deny`` (it cannot fit the
            budget at all, or it would take the run past ``hard_cap``).
        predicted_tokens: The predicted return, in provider tokens.
        remaining_tokens: Free space now: ``budget`` minus the calibrated ``current_tokens``
            minus ``margin_tokens``; negative when the context is already over.
        reason: One line saying why, with the numbers.
    """

    decision: Decision
    predicted_tokens: int
    remaining_tokens: int
    reason: str


def _quantile(sorted_values: list[int] | list[float], q: float) -> Any:
    """Nearest-rank quantile: always an observed value, and monotone in ``q``."""
    rank = max(1, math.ceil(q * len(sorted_values) - 1e-9))
    return sorted_values[rank - 1]


def _count(name: str, value: Any, *, positive: bool = False) -> int:
    """``value`` as a plain int (an int subclass as the value it holds) below
    ``MAX_TOKENS``, which floats hold exactly (ratios are taken of these counts)."""
    count = plain_int(value)
    if count is None or not (1 if positive else 0) <= count < MAX_TOKENS:
        bound = "a positive" if positive else "a non-negative"
        raise ConfigError(
            f"{name} must be {bound} int below 2**53, got {shown(value)}",
            key=name,
            reason=f"{bound} int",
        )
    return count


class _Series:
    """Count, max and recent values of one tool's returns."""

    __slots__ = ("count", "max", "recent")

    def __init__(self, count: int = 0, max_: int = 0, recent: Iterable[int] = ()) -> None:
        self.count = count
        self.max = max_
        self.recent: deque[int] = deque(recent, maxlen=HISTORY)

    def add(self, tokens: int) -> None:
        self.count += 1
        self.max = max(self.max, tokens)
        self.recent.append(tokens)

    def stats(self) -> ToolStats:
        p95 = _quantile(sorted(self.recent), 0.95) if self.recent else 0
        return ToolStats(self.count, self.max, p95)


class TokenLedger:
    """Token accounting of one agent run. Thread-safe: one ledger may be shared by the
    assembler and by tool calls running in parallel.

    Args:
        budget: Provider tokens the context may hold (the compaction trigger).
        hard_cap: Provider tokens of tool returns the whole run may take in; a call whose
            predicted return would pass it is denied. None: no cap.
        margin_tokens: Kept free on top of every prediction and of the tail reserve.
        default_tool_tokens: Predicted return of a tool never observed; None takes
            ``min(DEFAULT_TOOL_TOKENS, budget // 4)``.
        model: The model the run talks to: the key its usage is calibrated under.
        calibrator: Where reported usage teaches the ratio of provider tokens to counted
            tokens (``token_ratio: auto``); share the ``Assembler``'s. A new one when None.
        sink: A metrics sink; if it has ``observe_usage(usage, provider)`` (``PrometheusSink``
            does), every usage observed is passed to it.

    Example:
        >>> ledger = TokenLedger(10_000, margin_tokens=100)
        >>> ledger.observe_usage(prompt_tokens=1_030, local_estimate=1_000)
        >>> ledger.ratio, ledger.calibrated(2_000)
        (1.03, 2060)
        >>> ledger.observe_tool_result("read_file", 3_000)
        >>> ledger.admit("read_file", current_tokens=5_000).decision
        'allow'
        >>> ledger.admit("read_file", current_tokens=7_000).decision
        'compact_first'
        >>> ledger.tail_reserve(["read_file"])
        3190
    """

    def __init__(
        self,
        budget: int,
        *,
        hard_cap: int | None = None,
        margin_tokens: int = 0,
        default_tool_tokens: int | None = None,
        model: str | None = None,
        calibrator: Calibrator | None = None,
        sink: Any = None,
    ) -> None:
        self.budget = _count("budget", budget, positive=True)
        self.hard_cap = None if hard_cap is None else _count("hard_cap", hard_cap)
        self.margin_tokens = _count("margin_tokens", margin_tokens)
        self.default_tool_tokens = (
            min(DEFAULT_TOOL_TOKENS, max(1, self.budget // 4))
            if default_tool_tokens is None
            else _count("default_tool_tokens", default_tool_tokens)
        )
        self._lock = threading.Lock()
        self._ratios: deque[float] = deque(maxlen=HISTORY)
        self._tools: dict[str, _Series] = {}
        self._tool_tokens_total = 0
        self.model = _model(model)
        if calibrator is not None and not isinstance(calibrator, Calibrator):
            raise ConfigError(
                f"calibrator must be a ringbound.Calibrator, got {type(calibrator).__name__}",
                key="calibrator",
            )
        self.calibrator = calibrator if calibrator is not None else Calibrator()
        self.sink = sink
        self._account = TokenAccount()

    def __repr__(self) -> str:
        return (
            f"TokenLedger(budget={self.budget}, hard_cap={self.hard_cap}, "
            f"margin_tokens={self.margin_tokens}, ratio={self.ratio}, "
            f"tools={sorted(self._tools)})"
        )

    def observe_usage(
        self,
        usage: Any = None,
        *,
        local_estimate: int | None = None,
        prompt_tokens: int | None = None,
        token_ratio: float = 1.0,
        model: str | None = None,
        summarizer: bool = False,
    ) -> Usage | None:
        """Record what the provider reported for one response.

        Args:
            usage: The SDK's usage object (OpenAI Chat or Responses ``usage``, Anthropic
                ``usage`` with cache reads, cache writes and ``iterations``, Gemini
                ``usage_metadata``, Bedrock ``usage``), its JSON, or the whole response.
            local_estimate: ringbound's count of the request (``report.tokens_after``); with
                it, the reported prompt size calibrates the estimate.
            prompt_tokens: The reported prompt size alone, instead of ``usage`` (a
                context-length error quotes it).
            token_ratio: The ratio ``local_estimate`` was counted with (``report.
                provider_count.token_ratio``; 1.0 for OpenAI), so the calibrator learns the
                ratio of raw counts.
            model: The calibration key; the ledger's ``model`` when None.
            summarizer: The response was the summarizer's own call: it is billed to the
                run but calibrates nothing.

        Returns:
            The usage as read, or None when only ``prompt_tokens`` was given.
        """
        if usage is not None and prompt_tokens is not None:
            raise ConfigError("give usage or prompt_tokens, not both", key="usage")
        if usage is None and prompt_tokens is None:
            raise ConfigError("observe_usage needs usage or prompt_tokens", key="usage")
        read = None
        if usage is not None:
            read = read_usage(usage)
            reported = read.prompt_tokens
        else:
            reported = _count("prompt_tokens", prompt_tokens)
        if local_estimate is not None:
            _count("local_estimate", local_estimate, positive=True)
        ratio = plain_number(token_ratio)
        if ratio is None or not 0 < ratio < math.inf:
            raise ConfigError(
                f"token_ratio must be positive, got {shown(token_ratio)}", key="ratio"
            )
        token_ratio = ratio
        key = _model(model) or self.model or DEFAULT_MODEL
        with self._lock:
            if read is not None:
                self._account = self._account.with_usage(read, summarizer=summarizer)
            if local_estimate is not None and reported is not None and not summarizer:
                self._ratios.append(reported / local_estimate)
        if local_estimate is not None and reported and not summarizer:
            self.calibrator.observe(key, local_estimate / token_ratio, reported)
        if read is not None and callable(getattr(self.sink, "observe_usage", None)):
            self.sink.observe_usage(read, read.shape)
        return read

    def observe_assembly(self, report: Any) -> None:
        """Record an assembly of the run: its estimate, the provider's count when it was
        checked, and the summarizer calls it made (``Assembler`` calls this when given
        ``token_ledger=``)."""
        with self._lock:
            self._account = self._account.with_assembly(report)

    @property
    def account(self) -> TokenAccount:
        """The run's reconciled token account: estimated, provider-counted, reported and
        billed tokens, summarizer calls and server-side compactions."""
        with self._lock:
            return self._account

    @property
    def ratio(self) -> float:
        """Provider tokens per local token: the p95 of the last reported/estimate ratios
        (nearest rank, so the max below 20 observations); 1.0 before any observation."""
        with self._lock:
            return self._ratio_locked()

    def _ratio_locked(self) -> float:
        return _quantile(sorted(self._ratios), 0.95) if self._ratios else 1.0

    def calibrated(self, estimate: int) -> int:
        """``estimate`` local tokens in provider tokens, rounded up."""
        _count("estimate", estimate)
        return _scale(estimate, self.ratio)

    def observe_tool_result(self, tool: str, tokens: int) -> None:
        """Record that one call of ``tool`` returned ``tokens`` local tokens."""
        name = plain_str(tool)
        if not name:
            raise ConfigError(f"tool must be a non-empty str, got {shown(tool)}", key="tool")
        tool, tokens = name, _count("tokens", tokens)
        with self._lock:
            self._tools.setdefault(tool, _Series()).add(tokens)
            self._tool_tokens_total += tokens

    def tool_stats(self, tool: str) -> ToolStats:
        """Observed return sizes of ``tool``; all zero when it was never observed."""
        name = plain_str(tool)
        with self._lock:
            series = self._tools.get(name) if name is not None else None
            return series.stats() if series else ToolStats(0, 0, 0)

    @property
    def tool_tokens_total(self) -> int:
        """Local tokens of every tool return observed in the run (what ``hard_cap`` limits)."""
        with self._lock:
            return self._tool_tokens_total

    def admit(
        self, tool: str, predicted_tokens: int | None = None, *, current_tokens: int
    ) -> Admission:
        """Decide whether a call of ``tool`` may run with ``current_tokens`` (local) in the
        context.

        The prediction is ``predicted_tokens`` when given, else the tool's observed p95 (its
        max below 20 observations), else ``default_tool_tokens``. With the margin added, it is
        ``allow`` when it fits the free space, ``compact_first`` when it fits the budget on its
        own, ``deny`` otherwise or when it would take the run's tool returns past ``hard_cap``.
        """
        _count("current_tokens", current_tokens)
        if predicted_tokens is not None:
            _count("predicted_tokens", predicted_tokens)
        with self._lock:
            ratio = self._ratio_locked()
            if predicted_tokens is None:
                series = self._tools.get(tool)
                predicted_tokens = series.stats().p95 if series else self.default_tool_tokens
            total = self._tool_tokens_total
        predicted = _scale(predicted_tokens, ratio)
        remaining = self.budget - _scale(current_tokens, ratio) - self.margin_tokens
        if self.hard_cap is not None and _scale(total, ratio) + predicted > self.hard_cap:
            return Admission(
                "deny",
                predicted,
                remaining,
                f"{tool}: {predicted} predicted would take the run's tool returns "
                f"({_scale(total, ratio)}) past the hard cap {self.hard_cap}",
            )
        if predicted <= remaining:
            return Admission(
                "allow", predicted, remaining, f"{tool}: {predicted} predicted, {remaining} free"
            )
        if predicted + self.margin_tokens <= self.budget:
            return Admission(
                "compact_first",
                predicted,
                remaining,
                f"{tool}: {predicted} predicted, only {remaining} free; fits the budget "
                f"{self.budget} after compaction",
            )
        return Admission(
            "deny",
            predicted,
            remaining,
            f"{tool}: {predicted} predicted plus margin {self.margin_tokens} exceeds the "
            f"budget {self.budget}",
        )

    def tail_reserve(self, tools: Iterable[str] | None = None) -> int:
        """Provider tokens to leave free after compaction: the worst single return observed of
        ``tools`` (every observed tool when None; a listed tool never observed counts as
        ``default_tool_tokens``), plus ``margin_tokens``. With at least this much free, every
        one of those tools is admitted with ``allow``."""
        with self._lock:
            ratio = self._ratio_locked()
            if tools is None:
                worst = max((s.max for s in self._tools.values()), default=0)
            else:
                worst = max(
                    (
                        self._tools[t].max if t in self._tools else self.default_tool_tokens
                        for t in tools
                    ),
                    default=0,
                )
        return _scale(worst, ratio) + self.margin_tokens

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; :meth:`from_dict` rebuilds an equal ledger."""
        with self._lock:
            return {
                "version": _VERSION,
                "budget": self.budget,
                "hard_cap": self.hard_cap,
                "margin_tokens": self.margin_tokens,
                "default_tool_tokens": self.default_tool_tokens,
                "ratios": list(self._ratios),
                "tools": {
                    name: {"count": s.count, "max": s.max, "recent": list(s.recent)}
                    for name, s in self._tools.items()
                },
                "tool_tokens_total": self._tool_tokens_total,
                "model": self.model,
                "account": self._account.to_dict(),
                "calibrator": self.calibrator.to_dict(),
            }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TokenLedger:
        """Rebuild a ledger from :meth:`to_dict` output; ConfigError when it is malformed."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"token ledger must be a mapping, got {type(data).__name__}")
        try:
            # The caller's data as plain JSON: what a mapping or list of theirs raises while
            # read (or holds that JSON does not) is a malformed ledger, not our exception.
            plain = orjson.loads(orjson.dumps(_as_dict(data)))
        except (orjson.JSONEncodeError, RecursionError, RuntimeError, TypeError, ValueError):
            raise ConfigError("token ledger could not be read as JSON data") from None
        except Exception as e:  # a hostile mapping's own exception
            raise ConfigError(f"token ledger could not be read ({type(e).__name__})") from None
        return cls._from_plain(plain)

    @classmethod
    def _from_plain(cls, data: dict[str, Any]) -> TokenLedger:
        if data.get("version") not in _READS:
            raise ConfigError(
                f"token ledger version {data.get('version')!r} is not one of {_READS}",
                key="version",
            )
        try:
            ledger = cls(
                data["budget"],
                hard_cap=data["hard_cap"],
                margin_tokens=data["margin_tokens"],
                default_tool_tokens=data["default_tool_tokens"],
                model=data.get("model"),
                calibrator=(
                    Calibrator.from_dict(data["calibrator"]) if "calibrator" in data else None
                ),
            )
            ratios, tools, total = data["ratios"], data["tools"], data["tool_tokens_total"]
        except KeyError as e:
            raise ConfigError(f"token ledger lacks {e.args[0]!r}", key=str(e.args[0])) from None
        if not isinstance(ratios, list) or not all(
            not isinstance(r, bool) and isinstance(r, (int, float)) and 0 <= r < math.inf
            for r in ratios
        ):
            raise ConfigError(
                "token ledger ratios must be a list of finite numbers >= 0", key="ratios"
            )
        if not isinstance(tools, Mapping):
            raise ConfigError("token ledger tools must be a mapping", key="tools")
        ledger._ratios.extend(float(r) for r in ratios)
        for name, entry in tools.items():
            key = f"tools.{name}"
            if not isinstance(name, str) or not name or not isinstance(entry, Mapping):
                raise ConfigError(f"token ledger {key} is malformed", key=key)
            recent = entry.get("recent")
            if not isinstance(recent, list):
                raise ConfigError(f"token ledger {key}.recent must be a list", key=key)
            count = _count(f"{key}.count", entry.get("count"))
            max_ = _count(f"{key}.max", entry.get("max"))
            values = [_count(f"{key}.recent", v) for v in recent]
            if len(values) > count or any(v > max_ for v in values):
                raise ConfigError(f"token ledger {key} is inconsistent", key=key)
            ledger._tools[name] = _Series(count, max_, values)
        ledger._tool_tokens_total = _count("tool_tokens_total", total)
        if "account" in data:
            ledger._account = TokenAccount.from_dict(data["account"])
        return ledger


def _model(model: Any) -> str | None:
    """A model name as plain text, None for none; a ConfigError for anything else."""
    if model is None:
        return None
    name = plain_str(model)
    if not name or not is_utf8(name):
        raise ConfigError(f"model must be a non-empty string, got {shown(model)}", key="model")
    return name


def _scale(tokens: int, ratio: float) -> int:
    # The epsilon keeps 1000 * 1.1 = 1100.0000000000002 at 1100 instead of 1101.
    return max(0, math.ceil(tokens * ratio - 1e-9))


def _as_dict(data: Mapping[str, Any]) -> dict[Any, Any]:
    """A dict's pairs as stored (a subclass's own methods are not called); another mapping
    read through its own methods."""
    return dict(dict.items(data)) if isinstance(data, dict) else dict(data.items())
