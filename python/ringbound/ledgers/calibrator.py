"""Online calibration (``token_ratio: auto``, ``safety_margin_tokens: auto``): per model, the
provider's counts and reported usage against ringbound's own count of the same requests, turned
into a ratio and a margin that cover a chosen share of requests. The bound starts conservative
and tightens as samples arrive; the samples are plain data, so a session store can keep them.

The model is ``provider tokens = ratio x counted tokens`` with a multiplicative error: the bound
is a one-sided prediction bound of the log ratio (Student t at the coverage, the sample's mean
and deviation), so it holds for the next request, not only on average.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, NamedTuple

from ..caller_values import (
    is_utf8,
    plain_dict,
    plain_int,
    plain_items,
    plain_number,
    plain_str,
    shown,
)
from ..errors import ConfigError

__all__ = [
    "DEFAULT_MODEL",
    "MIN_SAMPLES",
    "PRIOR_ERROR",
    "Calibrator",
    "Figures",
]

#: Samples a model needs before its own figures replace the conservative start.
MIN_SAMPLES = 5
#: Before that, the share a provider count may exceed the estimate by: the ratio is the prior
#: (or the largest seen) times ``1 + PRIOR_ERROR``, and a request this close to the budget is
#: checked with the provider.
PRIOR_ERROR = 0.25
#: Margins are rounded up to this many tokens, so a margin that moves by a few tokens does not
#: rebuild the plan's configuration on every request.
MARGIN_STEP = 64
#: The calibration key of requests whose model nobody named.
DEFAULT_MODEL = "default"
WINDOW = 1024
#: The most samples a model keeps: each is two numbers held in memory for the run.
MAX_WINDOW = 1 << 20
#: Counts past any request's, and exact as floats (the statistics are taken in floats).
MAX_TOKENS = 2**53
#: Past any provider's tokens per counted token (ringbound's tables hold 1.0 to 1.4).
MAX_RATIO = 1000
_VERSION = 1


@dataclass(frozen=True)
class Figures:
    """What the calibration of one model says now.

    Attributes:
        model: The model.
        samples: Samples it rests on (0: the prior).
        token_ratio: The ratio to count with (provider tokens per counted token).
        safety_margin_tokens: The margin to keep (None: the configured one stands).
        ratio_mean: The geometric mean of the observed ratios (the prior without samples).
        ratio_bound: The ratio at the coverage bound.
        conservative: Whether the figures are still the conservative start.
    """

    model: str
    samples: int
    token_ratio: float
    safety_margin_tokens: int | None
    ratio_mean: float
    ratio_bound: float
    conservative: bool


class _Stats(NamedTuple):
    """The log ratios of one model's samples: count, mean, sample deviation, largest."""

    n: int
    mean: float
    dev: float
    top: float


def _stats(series: deque[tuple[float, int]]) -> _Stats:
    # Plain float sums: statistics.stdev is exact (fractions) and took milliseconds over a
    # full window, on every assembly.
    logs = [math.log(rep / counted) for counted, rep in series]
    n = len(logs)
    if n == 0:
        return _Stats(0, 0.0, 0.0, 0.0)
    mean = math.fsum(logs) / n
    dev = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1)) if n > 1 else 0.0
    return _Stats(n, mean, dev, max(logs))


def _t_quantile(q: float, dof: int) -> float:
    """Student's t quantile by its Cornish-Fisher expansion around the normal's: within 4% of
    the exact value at 4 degrees of freedom (``MIN_SAMPLES`` - 1), within 0.2% from 10."""
    z = NormalDist().inv_cdf(q)
    v = float(dof)
    return (
        z
        + (z**3 + z) / (4 * v)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
    )


def _round_ratio(r: float) -> float:
    return math.ceil(r * 1000 - 1e-9) / 1000


def _round_margin(m: float) -> int:
    return max(0, math.ceil(m / MARGIN_STEP - 1e-9) * MARGIN_STEP)


def _check_coverage(coverage: Any) -> float:
    share = plain_number(coverage)
    if share is None or not 0.5 <= share < 1:
        raise ConfigError(
            f"coverage must be a number in [0.5, 1), got {shown(coverage)}",
            key="calibration_coverage",
            reason="must be in [0.5, 1)",
        )
    return float(share)


def _model(model: Any) -> str:
    """A calibration key as plain text (a caller's ``str`` subclass is never hashed)."""
    name = plain_str(model)
    if not name or not is_utf8(name):
        raise ConfigError(f"model must be a non-empty string, got {shown(model)}", key="model")
    return name


class Calibrator:
    """Learns, per model, the ratio of provider tokens to ringbound's counted tokens.

    Thread-safe; share one between an ``Assembler`` and the run's ``TokenLedger`` so provider
    counts and reported usage both feed it.

    Args:
        coverage: Share of requests the bound covers (``calibration_coverage``).
        window: Samples kept per model (the most recent).

    Example:
        >>> cal = Calibrator(coverage=0.999)
        >>> cal.figures("m", prior_ratio=1.3).token_ratio   # the conservative start
        1.625
        >>> for i in range(40):
        ...     cal.observe("m", counted=1_000, reported=1_200 + (i % 5))
        >>> f = cal.figures("m", prior_ratio=1.3)
        >>> f.samples, f.conservative, 1.2 < f.token_ratio < 1.21
        (40, False, True)
    """

    def __init__(self, coverage: float = 0.999, *, window: int = WINDOW) -> None:
        self.coverage = _check_coverage(coverage)
        size = plain_int(window)
        if size is None or not MIN_SAMPLES <= size <= MAX_WINDOW:
            raise ConfigError(
                f"window must be an integer in [{MIN_SAMPLES}, {MAX_WINDOW}], got {shown(window)}",
                key="window",
                reason=f"must be in [{MIN_SAMPLES}, {MAX_WINDOW}]",
            )
        self.window = size
        self._lock = threading.Lock()
        self._samples: dict[str, deque[tuple[float, int]]] = {}
        #: Each model's statistics, computed once per new sample.
        self._stats: dict[str, _Stats] = {}

    def __repr__(self) -> str:
        with self._lock:
            counts = {m: len(s) for m, s in self._samples.items()}
        return f"Calibrator(coverage={self.coverage}, samples={counts})"

    def observe(self, model: str, counted: float, reported: int) -> None:
        """Record that a request ringbound counted at ``counted`` tokens (before any ratio)
        was ``reported`` tokens by the provider (a count API or a response's usage)."""
        name, size, count = _model(model), plain_number(counted), plain_int(reported)
        # Sizes a float holds exactly: a ratio and a mean are taken of them.
        if size is None or not 0 < size < MAX_TOKENS:
            raise ConfigError(
                f"counted must be a positive number, got {shown(counted)}", key="counted"
            )
        if count is None or not 0 < count < MAX_TOKENS:
            raise ConfigError(
                f"reported must be a positive integer, got {shown(reported)}", key="reported"
            )
        model, counted, reported = name, size, count
        with self._lock:
            series = self._samples.get(model)
            if series is None:
                series = self._samples[model] = deque(maxlen=self.window)
            series.append((float(counted), reported))
            self._stats.pop(model, None)

    def samples(self, model: str) -> int:
        """Samples kept for ``model``."""
        model = _model(model)
        with self._lock:
            return len(self._samples.get(model, ()))

    def _stats_of(self, model: str) -> _Stats:
        with self._lock:
            stats = self._stats.get(model)
            if stats is None:
                stats = _stats(self._samples.get(model, deque()))
                if model in self._samples:
                    self._stats[model] = stats
            return stats

    def _k(self, n: int) -> float:
        return _t_quantile(self.coverage, n - 1) * math.sqrt(1 + 1 / n)

    def figures(
        self,
        model: str,
        *,
        prior_ratio: float,
        ratio: float | None = None,
        learn_margin: bool = False,
        prior_margin: int = 0,
        window: int = 0,
    ) -> Figures:
        """The ratio and margin to assemble ``model``'s requests with.

        Args:
            model: The model.
            prior_ratio: The ratio before any sample (the provider's documented default).
            ratio: A fixed ratio (``token_ratio`` set to a number); None learns it.
            learn_margin: Whether the margin is learned (``safety_margin_tokens: auto``).
            prior_margin: The margin before enough samples, when it is learned.
            window: The tokens the request may take with the margin included
                (``model_input_limit - output_reserve_tokens``), which a learned margin is
                sized for.

        With the ratio learned and the margin fixed, the ratio is the coverage bound. With
        both learned, the ratio is the mean and the margin what keeps a request estimated
        at the budget under ``window`` at the coverage: ``window x (1 - 1 / B)``, ``B`` the
        bound of the provider's count over the estimate (the error is taken as
        proportional to the request, so the margin is sized where it matters, at the
        budget). Either one covers; both would over-reserve. With the ratio fixed, the
        margin is the same bound for the fixed ratio.
        """
        model = _model(model)
        prior = plain_number(prior_ratio)
        if prior is None or not 0 < prior < MAX_RATIO:
            raise ConfigError(
                f"prior_ratio must be a positive number below {MAX_RATIO}, "
                f"got {shown(prior_ratio)}",
                key="prior_ratio",
            )
        prior_ratio = prior
        n, mean, dev, top = self._stats_of(model)
        if n < MIN_SAMPLES:
            start = max(prior_ratio, math.exp(top)) if n else prior_ratio
            applied = ratio if ratio is not None else _round_ratio(start * (1 + PRIOR_ERROR))
            return Figures(
                model,
                n,
                applied,
                _round_margin(prior_margin) if learn_margin else None,
                math.exp(mean) if n else prior_ratio,
                start * (1 + PRIOR_ERROR),
                True,
            )
        k = self._k(n)
        bound = math.exp(mean + k * dev)
        margin = None
        if ratio is None:
            applied = _round_ratio(math.exp(mean) if learn_margin else bound)
        else:
            applied = ratio
        if learn_margin:
            over = math.exp(mean + k * dev) / applied
            margin = _round_margin(window * (1 - 1 / over)) if over > 1 else 0
        return Figures(model, n, applied, margin, math.exp(mean), bound, False)

    def error(self, model: str, estimate: int, ratio: float) -> int:
        """Tokens a provider's count may exceed ``estimate`` by, at the coverage, for a request
        estimated with ``ratio``: how close to the budget a request must come to be checked
        with the provider (``provider_or_tiktoken_model_encoding``)."""
        n, mean, dev, _ = self._stats_of(_model(model))
        if n < MIN_SAMPLES:
            return math.ceil(estimate * PRIOR_ERROR)
        bound = math.exp(mean + self._k(n) * dev)
        return max(0, math.ceil(estimate / ratio * bound - estimate))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; :meth:`from_dict` rebuilds an equal calibrator."""
        with self._lock:
            return {
                "version": _VERSION,
                "coverage": self.coverage,
                "window": self.window,
                "models": {m: [list(s) for s in series] for m, series in self._samples.items()},
            }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibrator:
        """Rebuild a calibrator from :meth:`to_dict` output; ConfigError when malformed."""
        # The caller's containers are read as stored: their own methods may raise.
        plain = plain_dict(data)
        if plain is None or plain_int(plain.get("version")) != _VERSION:
            raise ConfigError(
                f"calibrator data must be a mapping of version {_VERSION}", key="calibrator"
            )
        models = plain_dict(plain.get("models"))
        if models is None:
            raise ConfigError("calibrator models must be a mapping", key="calibrator.models")
        cal = cls(plain.get("coverage"), window=plain.get("window"))
        for model, given in models.items():
            series = plain_items(given)
            if series is None:
                raise ConfigError(
                    f"calibrator samples of {shown(model)} must be a list",
                    key="calibrator.models",
                )
            for item in series:
                sample = plain_items(item)
                if sample is None or len(sample) != 2:
                    raise ConfigError(
                        f"a calibrator sample of {shown(model)} is not a pair",
                        key="calibrator.models",
                    )
                cal.observe(model, sample[0], sample[1])
        return cal
