"""The count gate: what ``token_counter`` and the learned ratio and margin do around the plan.
The request is planned locally with the calibrated figures; then, by the mode, the provider
counts it, and a request it counts over the budget is planned again under a budget scaled by
the provider's own figure, at most twice before failing closed. A counter that fails leaves
the local estimate in force, and the report says so."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from typing import Any

from ..assembly import Assembles, AssemblyInputs, AssemblyResult
from ..config import AssemblyConfig
from ..errors import BudgetExceededError, ConfigError, CounterError
from ..flow import Flow
from ..ledgers.calibrator import DEFAULT_MODEL, Calibrator
from ..ledgers.tokens import TokenLedger
from ..observability import tracing
from ..observability.metrics import NullSink
from ..payload import dump_messages
from ..report import ProviderCount
from .base import Counter

__all__ = ["MAX_RECHECKS", "PRIOR_MARGIN_SHARE", "CountGate", "count_gate"]

#: Times a request the provider counted over budget is tightened and counted again.
MAX_RECHECKS = 2
#: A learned margin's start, before enough samples: this share of the input window.
PRIOR_MARGIN_SHARE = 0.05
#: Inner assemblers kept, one per (ratio, margin) the calibration has moved through.
_INNER_KEPT = 8


def count_gate(asm: Assembles, counter: Any, calibrator: Any, cache: Any) -> CountGate | None:
    """The gate an Assembler needs, or None when its config and counter need none."""
    cfg = asm.config
    if counter is not None:
        if not isinstance(counter, Counter):
            raise ConfigError(
                f"counter must be a ringbound.counters counter, got {type(counter).__name__}",
                key="counter",
                reason="must be made by ringbound.counters",
            )
        counter.check_format(asm.provider)
    if cfg.token_counter == "provider" and counter is None:
        raise ConfigError(
            "config `token_counter` provider needs Assembler(counter=...)",
            key="token_counter",
            reason="provider needs a counter",
        )
    if cfg.token_counter == "tiktoken" and counter is not None:
        raise ConfigError(
            "config `token_counter` tiktoken counts locally only: the counter would never be "
            "called (use provider or provider_or_tiktoken_model_encoding)",
            key="token_counter",
            reason="tiktoken takes no counter",
        )
    if calibrator is not None and not isinstance(calibrator, Calibrator):
        raise ConfigError(
            f"calibrator must be a ringbound.Calibrator, got {type(calibrator).__name__}",
            key="calibrator",
            reason="must be a Calibrator",
        )
    learns = cfg.token_ratio == "auto" or cfg.safety_margin_tokens == "auto"
    if counter is None and not learns:
        return None
    return CountGate(asm, counter, calibrator or Calibrator(cfg.calibration_coverage), cache)


@dataclasses.dataclass
class _Settling:
    """One assembly between its counts: the figures it was planned with and what the provider
    said so far."""

    model: str
    calibrator: Calibrator
    ratio: float
    margin: int
    budget: int
    samples: int
    result: AssemblyResult | None = None
    tokens: int | None = None
    checked: bool = False
    rechecks: int = 0
    failed: bool = False
    reason: str | None = None
    elapsed_s: float = 0.0


class CountGate:
    """Runs an Assembler's assemblies through the calibrated figures and its counter."""

    def __init__(
        self, asm: Assembles, counter: Counter | None, calibrator: Calibrator, cache: Any
    ) -> None:
        self.asm = asm
        self.counter = counter
        self.calibrator = calibrator
        self._cache = cache
        self._inner: OrderedDict[tuple[float, int], Assembles] = OrderedDict()
        self._lock = threading.Lock()

    def _inner_for(self, ratio: float, margin: int, *, keep: bool = True) -> Assembles:
        """An assembler of the same policy with these figures, reporting to no sink (made by
        the gated assembler's own class)."""
        key = (ratio, margin)
        with self._lock:
            inner = self._inner.get(key)
            if inner is not None:
                self._inner.move_to_end(key)
                return inner
        cfg = self.asm.config
        values = dict(
            cfg.to_dict(),
            token_ratio=ratio,
            safety_margin_tokens=margin,
            token_counter="tiktoken",
        )
        inner: Assembles = type(self.asm)(  # type: ignore[call-arg]
            AssemblyConfig.from_dict(values),
            provider=self.asm.provider,
            summarizer=self.asm._summarizer,
            sink=NullSink(),
            cache=self._cache,
        )
        inner._accounts = False
        if keep:
            with self._lock:
                self._inner[key] = inner
                while len(self._inner) > _INNER_KEPT:
                    self._inner.popitem(last=False)
        return inner

    def _start(self, token_ledger: Any) -> _Settling:
        cfg, asm = self.asm.config, self.asm
        calibrator = (
            token_ledger.calibrator if isinstance(token_ledger, TokenLedger) else self.calibrator
        )
        model = (
            (token_ledger.model if isinstance(token_ledger, TokenLedger) else None)
            or (self.counter.model if self.counter is not None else None)
            or DEFAULT_MODEL
        )
        window = cfg.model_input_limit - cfg.output_reserve_tokens
        learn_margin = cfg.safety_margin_tokens == "auto"
        figures = calibrator.figures(
            model,
            prior_ratio=asm._ratio,
            ratio=None if cfg.token_ratio == "auto" else asm._ratio,
            learn_margin=learn_margin,
            prior_margin=math.ceil(PRIOR_MARGIN_SHARE * window),
            window=window,
        )
        margin = (
            figures.safety_margin_tokens
            if learn_margin and figures.safety_margin_tokens is not None
            else cfg.margin_tokens
        )
        # A learned margin never takes the whole window: a quarter of it is the most any
        # calibration may hold back.
        margin = min(margin, window // 4) if learn_margin else margin
        return _Settling(
            model=model,
            calibrator=calibrator,
            # Within the range the config accepts: a ratio outside it is a broken counter.
            ratio=min(10.0, max(0.1, figures.token_ratio)),
            margin=margin,
            budget=window - margin,
            samples=figures.samples,
        )

    def _wants_count(self, s: _Settling) -> bool:
        assert s.result is not None
        if self.counter is None:
            return False
        if self.asm.config.token_counter == "provider":
            return True
        tokens = s.result.report.tokens_after
        return tokens >= s.budget - s.calibrator.error(s.model, tokens, s.ratio)

    def _counted(self, s: _Settling, tokens: int | None, error: CounterError | None) -> bool:
        """Takes the provider's answer; True when the request must be tightened."""
        assert s.result is not None
        s.checked = True
        if error is not None:
            s.failed, s.reason, s.tokens = True, error.reason, None
            return False
        assert tokens is not None
        s.tokens = tokens
        local = s.result.report.tokens_after
        if tokens > 0 and local > 0:
            s.calibrator.observe(s.model, local / s.ratio, tokens)
        if tokens <= s.budget:
            return False
        if s.rechecks >= MAX_RECHECKS:
            raise BudgetExceededError(
                f"the provider counted {tokens} tokens, over the budget {s.budget}, after "
                f"{MAX_RECHECKS} tightenings",
                tokens=tokens,
                budget=s.budget,
                bucket_tokens=s.result.report.bucket_tokens,
            )
        return True

    def _tighter(self, s: _Settling) -> Assembles:
        """The assembler of the next try: its budget scaled by budget / provider count."""
        assert s.result is not None and s.tokens is not None
        s.rechecks += 1
        local = s.result.report.tokens_after
        target = min(local - 1, math.floor(local * s.budget / s.tokens))
        cfg = self.asm.config
        window = cfg.model_input_limit - cfg.output_reserve_tokens
        if target < 1:
            raise BudgetExceededError(
                f"the provider counted {s.tokens} tokens, over the budget {s.budget}, and "
                "nothing is left to drop",
                tokens=s.tokens,
                budget=s.budget,
                bucket_tokens=s.result.report.bucket_tokens,
            )
        return self._inner_for(s.ratio, window - target, keep=False)

    def _finish(self, s: _Settling, token_ledger: Any) -> AssemblyResult:
        assert s.result is not None
        report = s.result.report
        check = ProviderCount(
            mode=self.asm.config.token_counter,
            counter=self.counter.name if self.counter is not None else None,
            model=s.model,
            checked=s.checked,
            tokens=s.tokens,
            local_tokens=report.tokens_after,
            rechecks=s.rechecks,
            failed=s.failed,
            reason=s.reason,
            token_ratio=s.ratio,
            safety_margin_tokens=s.margin,
            calibration_samples=s.samples,
            elapsed_s=s.elapsed_s,
        )
        changes: dict[str, Any] = {"provider_count": check}
        if s.rechecks:
            changes["budget"] = s.budget
        report = dataclasses.replace(report, **changes)
        if isinstance(token_ledger, TokenLedger):
            token_ledger.observe_assembly(report)
            report = dataclasses.replace(report, token_account=token_ledger.account)
        return dataclasses.replace(s.result, report=report)

    def _report(self, result: AssemblyResult, messages: Any, span: Any) -> AssemblyResult:
        asm = self.asm
        tracing.assembled(
            result.report, lambda: dump_messages(messages), asm.provider, asm._sink, span
        )
        return result

    def flow(self, inputs: AssemblyInputs) -> Flow[AssemblyResult]:
        """``Assembler.assemble`` through the gate, as a flow (``ringbound.flow``): each
        assembly nested, each provider count an effect."""
        asm = self.asm
        span = tracing.start_span(asm._tracer, asm.provider)
        token_ledger = inputs.token_ledger
        try:
            s = self._start(token_ledger)
            inner = self._inner_for(s.ratio, s.margin)
            s.result = yield from inner._flow(inputs)
            if self._wants_count(s):
                assert self.counter is not None
                while True:
                    start = time.perf_counter()
                    tokens, error = None, None
                    try:
                        tokens = yield _Count(self.counter, s.result, asm.provider)
                    except CounterError as e:
                        error = e
                    s.elapsed_s += time.perf_counter() - start
                    if not self._counted(s, tokens, error):
                        break
                    s.result = yield from self._tighter(s)._flow(inputs)
            result = self._finish(s, token_ledger)
        except BaseException as e:
            tracing.rejected(e, asm.provider, asm._sink, span)
            raise
        return self._report(result, inputs.messages, span)


@dataclasses.dataclass(frozen=True)
class _Count:
    """The provider's count of an assembled request: the effect the gate waits on."""

    counter: Counter
    result: AssemblyResult
    provider: str

    def run(self) -> int:
        r = self.result
        return self.counter.count(r.messages, tools=r.tools, system=r.system, format=self.provider)

    async def arun(self) -> int:
        r = self.result
        return await self.counter.acount(
            r.messages, tools=r.tools, system=r.system, format=self.provider
        )
