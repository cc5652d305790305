"""Margin calibration: from pairs of (local estimate, provider-reported prompt tokens) collected
on real traffic, the distribution of the estimation error and the ``token_ratio`` and
``safety_margin_tokens`` that cover a chosen share of requests. ``ringbound calibrate`` prints
the report; ``docs/calibration.md`` says how to collect the pairs and read it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import orjson

from ..caller_values import (
    is_utf8,
    plain_dict,
    plain_items,
    plain_iterable,
    plain_number,
    plain_str,
    shown,
)
from ..errors import ConfigError
from ..ledgers.usage import MAX_COUNT, read_usage

__all__ = [
    "MIN_RECORDS",
    "Calibration",
    "Histogram",
    "Quantiles",
    "calibrate",
    "cli_main",
    "load_usage",
    "plot",
]

#: Below this many records the report warns that the sample is small.
MIN_RECORDS = 20
HISTOGRAM_BINS = 12
_BAR = 40
_ESTIMATE_KEYS = ("local_estimate", "estimate")
_REPORTED_KEYS = ("prompt_tokens", "reported")
#: Keys under which a record may carry the provider's own usage or whole response instead of
#: a number: what the SDK returned, as it returned it.
_USAGE_KEYS = ("usage", "usageMetadata", "usage_metadata", "response")


@dataclass(frozen=True)
class Quantiles:
    """Nearest-rank quantiles of one series (each is an observed value)."""

    min: float
    p50: float
    p90: float
    p99: float
    max: float


@dataclass(frozen=True)
class Histogram:
    """Counts of the relative error ``reported / estimate - 1``, in percent.

    Attributes:
        bins: Bin edges, one more than ``counts``; the last bin includes its right edge.
        counts: Records per bin.
    """

    bins: tuple[float, ...]
    counts: tuple[int, ...]


@dataclass(frozen=True)
class Calibration:
    """What :func:`calibrate` found.

    Attributes:
        n: Records.
        coverage: Share of requests the recommendations cover.
        error: Quantiles of ``reported - estimate``, in tokens.
        ratio: Quantiles of ``reported / estimate``.
        histogram: The relative error, binned.
        safety_margin_tokens: Additive margin covering ``coverage`` of the requests when the
            estimates are used as they were made (``token_ratio`` unchanged): the larger of
            the error's coverage quantile over all records and over the quarter of records
            with the largest estimates, and at least 0.
        token_ratio: Multiplicative alternative: the ratio's coverage quantile, rounded up to
            3 decimals. Multiply it into the ``token_ratio`` the estimates were made with.
        records: The (estimate, reported) pairs.
        skipped: Records whose usage does not give the request's size (Anthropic compacted
            it server-side before answering), left out.
    """

    n: int
    coverage: float
    error: Quantiles
    ratio: Quantiles
    histogram: Histogram
    safety_margin_tokens: int
    token_ratio: float
    records: tuple[tuple[int, int], ...] = field(repr=False)
    skipped: int = 0

    @property
    def small_sample(self) -> bool:
        """Fewer than :data:`MIN_RECORDS` records."""
        return self.n < MIN_RECORDS

    def format(self) -> str:
        """The terminal report: quantiles, a text histogram and the recommendations."""
        e, r = self.error, self.ratio
        cov = f"{self.coverage * 100:g}%"
        lines = [
            f"{self.n} usage records (local estimate vs provider-reported prompt tokens)",
            "",
            f"{'':16}{'min':>10}{'p50':>10}{'p90':>10}{'p99':>10}{'max':>10}",
            f"{'error (tokens)':16}"
            + "".join(f"{int(v):>+10d}" for v in (e.min, e.p50, e.p90, e.p99, e.max)),
            f"{'ratio':16}" + "".join(f"{v:>10.4f}" for v in (r.min, r.p50, r.p90, r.p99, r.max)),
            "",
            "relative error, reported / estimate - 1:",
        ]
        top = max(self.histogram.counts)
        edges = self.histogram.bins
        for i, count in enumerate(self.histogram.counts):
            bar = "#" * math.ceil(_BAR * count / top) if count else ""
            lines.append(
                f"  {edges[i]:>+8.2f}% .. {edges[i + 1]:>+8.2f}%  {bar:<{_BAR}} {count:>6}"
            )
        lines += [
            "",
            f"recommended for {cov} coverage (either one suffices):",
            f"  token_ratio: {self.token_ratio:.3f}  "
            "# times the token_ratio the estimates were made with",
            f"  safety_margin_tokens: {self.safety_margin_tokens}  # with token_ratio unchanged",
        ]
        needed = math.ceil(1 / (1 - self.coverage) - 1e-9) if self.coverage < 1 else math.inf
        if self.n < needed:
            lines.append(
                f"note: {self.n} records cannot resolve the {cov} quantile (that takes "
                f"{needed}); the largest observations are used"
            )
        if self.skipped:
            lines.append(
                f"note: {self.skipped} records left out: their usage does not give the "
                "request's size (server-side compaction)"
            )
        if self.small_sample:
            lines.append(
                f"warning: small sample ({self.n} records, fewer than {MIN_RECORDS}); "
                "collect more before trusting these numbers"
            )
        return "\n".join(lines)

    def plot(self, path: str | Path) -> None:
        """Write a PNG: error against estimate with both recommendations, and the histogram.
        Needs matplotlib; ConfigError when it is not installed."""
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ConfigError(
                "the calibration plot needs matplotlib: pip install matplotlib",
                key="plot",
                reason="matplotlib is not installed",
            ) from None
        fig = Figure(figsize=(10, 4), layout="constrained")
        scatter, hist = fig.subplots(1, 2)
        estimates = [est for est, _ in self.records]
        scatter.scatter(estimates, [rep - est for est, rep in self.records], s=6)
        top = max(estimates)
        scatter.axhline(
            self.safety_margin_tokens,
            color="tab:red",
            label=f"safety_margin_tokens {self.safety_margin_tokens}",
            lw=1,
        )
        scatter.plot(
            [0, top],
            [0, (self.token_ratio - 1) * top],
            color="tab:green",
            label=f"token_ratio {self.token_ratio:.3f}",
            lw=1,
        )
        scatter.set(xlabel="local estimate (tokens)", ylabel="reported - estimate (tokens)")
        scatter.legend()
        edges = self.histogram.bins
        widths = [b - a for a, b in itertools.pairwise(edges)]
        hist.bar(edges[:-1], self.histogram.counts, width=widths, align="edge")
        hist.set(xlabel="reported / estimate - 1 (%)", ylabel="records")
        fig.savefig(path, format="png")


def _quantile(sorted_values: list[Any], q: float) -> Any:
    """Nearest-rank quantile: an observed value, monotone in ``q``."""
    return sorted_values[max(1, math.ceil(q * len(sorted_values) - 1e-9)) - 1]


def _quantiles(values: list[Any]) -> Quantiles:
    s = sorted(values)
    return Quantiles(s[0], _quantile(s, 0.5), _quantile(s, 0.9), _quantile(s, 0.99), s[-1])


def _histogram(values: list[float]) -> Histogram:
    lo, hi = min(values), max(values)
    if hi == lo:
        return Histogram((lo, hi), (len(values),))
    width = (hi - lo) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for v in values:
        counts[min(HISTOGRAM_BINS - 1, int((v - lo) / width))] += 1
    edges = (*(lo + i * width for i in range(HISTOGRAM_BINS)), hi)
    return Histogram(edges, tuple(counts))


def _tokens(value: Any, where: str, name: str, *, positive: bool) -> int:
    number = plain_number(value)
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if not isinstance(number, int) or not (1 if positive else 0) <= number < MAX_COUNT:
        bound = "a positive" if positive else "a non-negative"
        raise ConfigError(
            f"{where}: {name} must be {bound} integer below 2**53, got {shown(value)}",
            key=name,
            reason=where,
        )
    return number


def _reported(value: Any, where: str) -> int | None:
    """A reported prompt size: a number, or an SDK usage object / response (or its JSON),
    read for the size of the request as sent (None when it does not give it)."""
    if isinstance(value, (int, float)):
        return _tokens(value, where, "prompt_tokens", positive=False)
    try:
        return read_usage(value).prompt_tokens
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}", key="records", reason=where) from None


def _record(item: Any, where: str) -> tuple[int, int] | None:
    # The caller's containers are read as stored: their own methods may raise or change them.
    mapping = plain_dict(item)
    pair = plain_items(item)
    if mapping is not None:
        est_key = next((k for k in _ESTIMATE_KEYS if k in mapping), None)
        rep_key = next((k for k in (*_REPORTED_KEYS, *_USAGE_KEYS) if k in mapping), None)
        if est_key is None or rep_key is None:
            keys = ", ".join(sorted(shown(k, 40) for k in mapping)[:20])
            raise ConfigError(
                f"{where}: a usage record needs local_estimate (or estimate) and "
                f"prompt_tokens (or reported) or the SDK's usage (usage / response); got keys "
                f"[{keys}]",
                key="records",
                reason=where,
            )
        est, rep = mapping[est_key], mapping[rep_key]
    elif pair is not None and len(pair) == 2:
        est, rep = pair
    else:
        raise ConfigError(
            f"{where}: a usage record is an (estimate, reported) pair or an object, "
            f"got {type(item).__name__}",
            key="records",
            reason=where,
        )
    estimate = _tokens(est, where, "local_estimate", positive=True)
    reported = _reported(rep, where)
    return None if reported is None else (estimate, reported)


def calibrate(records: Iterable[Any], coverage: float = 0.999) -> Calibration:
    """The error distribution of local estimates and the margins that cover ``coverage`` of
    the requests.

    Args:
        records: (local estimate, provider-reported prompt tokens) pairs: tuples, or mappings
            with ``local_estimate``/``prompt_tokens`` or ``estimate``/``reported``. The
            reported side may be the SDK's own usage object or response, or their JSON
            (under ``usage``, ``usageMetadata`` or ``response`` in a mapping): OpenAI Chat
            and Responses, Anthropic, Gemini, Bedrock (see ``read_usage``).
        coverage: Share of requests the recommendations must cover, in (0, 1].

    Raises:
        ConfigError: No records, a malformed record (named by its index), or a coverage
            out of range.

    Example:
        >>> cal = calibrate([(1000, 1012), (2000, 2050), (4000, 4040)], coverage=0.9)
        >>> cal.token_ratio, cal.safety_margin_tokens, cal.error.max
        (1.025, 50, 50)
    """
    share = plain_number(coverage)
    if share is None or not 0 < share <= 1:
        raise ConfigError(
            f"coverage must be a number in (0, 1], got {shown(coverage)}", key="coverage"
        )
    coverage = share
    read = [_record(item, f"record {i}") for i, item in enumerate(_records(records))]
    pairs = tuple(p for p in read if p is not None)
    if not pairs:
        raise ConfigError("no usage records to calibrate from", key="records")
    errors = [rep - est for est, rep in pairs]
    ratios = [rep / est for est, rep in pairs]
    by_size = sorted(pairs)
    large = by_size[len(by_size) * 3 // 4 :]
    margin = max(
        0,
        _quantile(sorted(errors), coverage),
        _quantile(sorted(rep - est for est, rep in large), coverage),
    )
    ratio = math.ceil(_quantile(sorted(ratios), coverage) * 1000 - 1e-9) / 1000
    return Calibration(
        n=len(pairs),
        coverage=float(coverage),
        error=_quantiles(errors),
        ratio=_quantiles(ratios),
        histogram=_histogram([(r - 1) * 100 for r in ratios]),
        safety_margin_tokens=margin,
        token_ratio=ratio,
        records=pairs,
        skipped=len(read) - len(pairs),
    )


def _records(records: Any) -> list[Any]:
    """The caller's records, read once (a list or tuple as stored)."""
    items = plain_iterable(records)
    if items is None:
        raise ConfigError(
            f"records must be an iterable of usage records, got {type(records).__name__}",
            key="records",
            reason="not an iterable of records",
        )
    return items


def load_usage(path: str | Path) -> list[tuple[int, int]]:
    """Read usage records from a JSONL file, one object a line, as (estimate, reported) pairs;
    blank lines are skipped. A line's reported side may be a number or the SDK's usage /
    response JSON (see ``calibrate``); a line whose usage does not give the request's size
    (server-side compaction) is left out.

    Raises:
        ConfigError: The file cannot be read, or a line is not a usage record (named by its
            line number).
    """
    return [r for r in _read(path) if r is not None]


def _read(path: str | Path) -> list[tuple[int, int] | None]:
    text = plain_str(path)
    if text is None and not isinstance(path, PurePath):
        raise ConfigError(
            f"path must be a str or a pathlib path, got {type(path).__name__}", key="path"
        )
    name = PurePath.__str__(path) if text is None else text
    name = name if is_utf8(name) else shown(name, 200)
    try:
        data = Path(path if text is None else text).read_bytes()
    except (OSError, ValueError) as e:  # ValueError: a NUL byte or a lone surrogate
        why = e.strerror if isinstance(e, OSError) else "not a file name"
        raise ConfigError(f"cannot read {name}: {why}", key="path") from None
    records = []
    for number, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise ConfigError(f"{where}: not JSON ({e})", key="records", reason=where) from None
        if not isinstance(item, dict):
            raise ConfigError(
                f"{where}: expected a JSON object, got {type(item).__name__}",
                key="records",
                reason=where,
            )
        records.append(_record(item, where))
    return records


def plot(calibration: Calibration, path: str | Path) -> None:
    """Write ``calibration`` as a PNG to ``path`` (see :meth:`Calibration.plot`)."""
    calibration.plot(path)


def cli_main(path: str | Path, coverage: float = 0.999, plot: str | Path | None = None) -> int:
    """``ringbound calibrate USAGE.jsonl [--coverage C] [--plot OUT.png]``: print the report
    (and write the plot). Errors are ConfigError, for the command line to print."""
    read = _read(path)
    pairs = [r for r in read if r is not None]
    cal = dataclasses.replace(calibrate(pairs, coverage), skipped=len(read) - len(pairs))
    print(cal.format())
    if plot is not None:
        cal.plot(plot)
        print(f"plot written to {plot}")
    return 0
