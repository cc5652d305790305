"""Assembly metrics: the sink protocol every Assembler reports to, the no-op default, and a
Prometheus sink with the metric names fixed by the design. A sink receives the report (counts
and indices only) or the error of each assembly; labels stay bounded: the provider and, for
rejects, the error class."""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..caller_values import plain_str, shown
from ..errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    RingboundError,
    StoreError,
    SummaryError,
)
from ..providers import PROVIDERS
from ..report import AssemblyReport

__all__ = [
    "COUNT_OUTCOMES",
    "REJECT_REASONS",
    "USAGE_KINDS",
    "MetricsSink",
    "NullSink",
    "PrometheusSink",
    "get_default_sink",
    "reject_reason",
    "set_default_sink",
]

#: Values of the ``reason`` label of ``context_assemble_reject_total``.
REJECT_REASONS = (
    "BudgetExceededError",
    "ConfigError",
    "InvalidMessageError",
    "PairingError",
    "SummaryError",
    "StoreError",
    "RingboundError",
)
_REASON_CLASSES: tuple[type[RingboundError], ...] = (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    SummaryError,
    StoreError,
)
#: Values of the ``op`` label of ``context_assemble_store_error_total``.
STORE_OPS = ("load", "save", "conflict")
#: Bucket bounds of ``context_assemble_tokens``: common context windows and their halves.
TOKEN_BUCKETS = (
    1_000,
    2_000,
    4_000,
    8_000,
    16_000,
    32_000,
    64_000,
    100_000,
    128_000,
    200_000,
    256_000,
    500_000,
    1_000_000,
)
#: Bucket bounds of ``context_assemble_seconds``: an assembly takes microseconds to tens of
#: milliseconds, far below prometheus_client's default buckets.
SECONDS_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)
#: The ``provider`` label for a provider this release does not speak (bounds the label).
OTHER_PROVIDER = "other"
#: A Prometheus metric name, which a sink's namespace begins.
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: Values of the ``outcome`` label of ``context_assemble_provider_count_total``: the provider
#: counted the request within budget, over it (then tightened), or the counter timed out or
#: failed (the local estimate was used).
COUNT_OUTCOMES = ("fits", "tightened", "timeout", "error")
#: Values of the ``kind`` label of ``context_usage_tokens_total``.
USAGE_KINDS = ("input", "cached_input", "cache_write", "output")


@runtime_checkable
class MetricsSink(Protocol):
    """Receives one call per assembly: ``observe`` when it succeeded, ``reject`` when it raised.

    Any object with these two methods is a sink. A sink must be thread-safe (one Assembler
    serves many threads) and fast (it runs on the request path). An exception a sink raises
    is logged (its type only) and does not fail the assembly.

    Example:
        >>> import ringbound as rb
        >>> class Counting:
        ...     def __init__(self):
        ...         self.tokens = []
        ...     def observe(self, report, provider):
        ...         self.tokens.append(report.tokens_after)
        ...     def reject(self, error, provider):
        ...         pass
        >>> sink = Counting()
        >>> asm = rb.Assembler(rb.AssemblyConfig(model_input_limit=10_000), sink=sink)
        >>> _ = asm.assemble([{"role": "user", "content": "hi"}])
        >>> sink.tokens
        [8]
    """

    def observe(self, report: AssemblyReport, provider: str) -> None:
        """Records an assembly that returned ``report``."""

    def reject(self, error: RingboundError, provider: str) -> None:
        """Records an assembly that raised ``error`` (nothing was returned)."""


class NullSink:
    """The default sink: records nothing."""

    def observe(self, report: AssemblyReport, provider: str) -> None:
        return None

    def reject(self, error: RingboundError, provider: str) -> None:
        return None


_default_sink: MetricsSink = NullSink()


def check_sink(sink: Any) -> MetricsSink:
    """Returns ``sink`` if it has callable ``observe`` and ``reject``, else ConfigError."""
    if not (callable(getattr(sink, "observe", None)) and callable(getattr(sink, "reject", None))):
        raise ConfigError(
            f"sink must have observe(report, provider) and reject(error, provider) methods, "
            f"got {type(sink).__name__}",
            key="sink",
            reason="must implement MetricsSink",
        )
    return sink  # type: ignore[no-any-return]


def set_default_sink(sink: MetricsSink | None) -> None:
    """Sets the sink of every Assembler built without ``sink=`` (None restores NullSink).

    Takes effect on their next assembly, including Assemblers built before the call.
    """
    global _default_sink
    _default_sink = NullSink() if sink is None else check_sink(sink)


def get_default_sink() -> MetricsSink:
    """The sink of Assemblers built without ``sink=``."""
    return _default_sink


def reject_reason(error: BaseException) -> str:
    """The ``reason`` label for ``error``: its ringbound error class, one of REJECT_REASONS.

    Example:
        >>> import ringbound as rb
        >>> reject_reason(rb.PairingError("broken"))
        'PairingError'
    """
    for cls in _REASON_CLASSES:
        if isinstance(error, cls):
            return cls.__name__
    return "RingboundError"


@dataclass(frozen=True)
class _Children:
    """The metric children of one provider label value, looked up once."""

    tokens: Any
    seconds: Any
    dropped_rings: Any
    summary: Any
    summary_fail: Any
    pairing_error: Any
    reject: dict[str, Any]
    store_error: dict[str, Any]

    provider_count: dict[str, Any]
    checked_tokens: dict[str, Any]


class _Metrics:
    """The metrics of one registry and namespace: the seven of the design, and those of
    provider counts and reported usage."""

    def __init__(self, prometheus_client: Any, registry: Any, namespace: str) -> None:
        def make(kind: Any, name: str, doc: str, labels: tuple[str, ...], **kw: Any) -> Any:
            try:
                return kind(name, doc, labels, namespace=namespace, registry=registry, **kw)
            except ValueError as e:
                raise ConfigError(
                    f"cannot register the metric {name} ({e}); another collector in this "
                    f"registry already uses the name: pass PrometheusSink(namespace=...) or "
                    f"another registry",
                    key="sink",
                    reason="metric name already registered",
                ) from None

        pc = prometheus_client
        provider = ("provider",)
        self.tokens = make(
            pc.Histogram,
            "context_assemble_tokens",
            "Tokens of each assembled request (tokens_after).",
            provider,
            buckets=TOKEN_BUCKETS,
        )
        self.seconds = make(
            pc.Histogram,
            "context_assemble_seconds",
            "Wall time of each successful assembly, in seconds.",
            provider,
            buckets=SECONDS_BUCKETS,
        )
        self.dropped_rings = make(
            pc.Counter,
            "context_assemble_dropped_rings_total",
            "Tool rings dropped from assembled requests.",
            provider,
        )
        self.summary = make(
            pc.Counter,
            "context_assemble_summary_total",
            "Assemblies that summarized dropped units.",
            provider,
        )
        self.summary_fail = make(
            pc.Counter,
            "context_assemble_summary_fail_total",
            "Assemblies whose summarizer failed (a fallback summary may have been written).",
            provider,
        )
        self.pairing_error = make(
            pc.Counter,
            "context_assemble_pairing_error_total",
            "Assemblies whose input had broken tool-call pairing (rejected or repaired).",
            provider,
        )
        self.reject = make(
            pc.Counter,
            "context_assemble_reject_total",
            "Assemblies that raised, by error class.",
            ("provider", "reason"),
        )
        self.store_error = make(
            pc.Counter,
            "context_assemble_store_error_total",
            "Session-store failures (load, save) and lost compare-and-sets (conflict).",
            ("provider", "op"),
        )
        self.provider_count = make(
            pc.Counter,
            "context_assemble_provider_count_total",
            "Assembled requests counted by the provider's count API, by outcome.",
            ("provider", "outcome"),
        )
        self.checked_tokens = make(
            pc.Counter,
            "context_assemble_checked_tokens_total",
            "Tokens of the requests the provider counted: ringbound's estimate and the "
            "provider's count (source).",
            ("provider", "source"),
        )
        self.usage_tokens = make(
            pc.Counter,
            "context_usage_tokens_total",
            "Tokens the provider reported in responses (TokenLedger.observe_usage), by kind.",
            ("provider", "kind"),
        )
        self.usage_compactions = make(
            pc.Counter,
            "context_usage_compactions_total",
            "Server-side compactions the provider reported (Anthropic usage.iterations).",
            provider,
        )
        self.unknown_model = make(
            pc.Counter,
            "context_assemble_unknown_model_total",
            "Requests sized for a model name the models table does not know (the config's "
            "window used instead).",
            provider,
        )
        # The providers' series exist from the start, so dashboards see 0 rather than no
        # series; ``other`` only once something reports an unknown provider.
        self.children = {p: self.make_children(p) for p in PROVIDERS}
        for p in PROVIDERS:
            self.unknown_model.labels(p)

    def make_children(self, provider: str) -> _Children:
        return _Children(
            tokens=self.tokens.labels(provider),
            seconds=self.seconds.labels(provider),
            dropped_rings=self.dropped_rings.labels(provider),
            summary=self.summary.labels(provider),
            summary_fail=self.summary_fail.labels(provider),
            pairing_error=self.pairing_error.labels(provider),
            reject={r: self.reject.labels(provider, r) for r in REJECT_REASONS},
            store_error={op: self.store_error.labels(provider, op) for op in STORE_OPS},
            provider_count={o: self.provider_count.labels(provider, o) for o in COUNT_OUTCOMES},
            checked_tokens={
                s: self.checked_tokens.labels(provider, s) for s in ("estimate", "provider")
            },
        )


# Metrics of each registry by namespace: two sinks on one registry share its metrics rather
# than failing on a duplicate registration.
_registered: weakref.WeakKeyDictionary[Any, dict[str, _Metrics]] = weakref.WeakKeyDictionary()
_registered_lock = threading.Lock()


class PrometheusSink:
    """Records the ``context_assemble_*`` metrics with ``prometheus_client``.

    Needs the ``prometheus`` extra (``pip install 'ringbound[prometheus]'``). The metrics are
    registered when the first sink for a registry and namespace is built; later sinks for the
    same pair share them.

    Args:
        registry: The ``CollectorRegistry`` to register in; prometheus_client's default
            ``REGISTRY`` when None.
        namespace: Prefix of every metric name (``{namespace}_context_assemble_tokens``);
            empty for the fixed names.

    Raises:
        ConfigError: prometheus_client is not installed, or another collector of the
            registry already uses one of the names.

    Example:
        >>> import prometheus_client
        >>> import ringbound as rb
        >>> registry = prometheus_client.CollectorRegistry()
        >>> asm = rb.Assembler(rb.AssemblyConfig(model_input_limit=10_000),
        ...                    sink=rb.PrometheusSink(registry))
        >>> _ = asm.assemble([{"role": "user", "content": "hi"}])
        >>> registry.get_sample_value("context_assemble_tokens_count",
        ...                           {"provider": "openai_chat"})
        1.0
    """

    def __init__(self, registry: Any = None, namespace: str = "") -> None:
        try:
            import prometheus_client
        except ImportError:
            raise ConfigError(
                "PrometheusSink needs prometheus_client: pip install 'ringbound[prometheus]'",
                key="sink",
                reason="prometheus_client is not installed",
            ) from None
        name = plain_str(namespace)
        # Prometheus's own rule for the metric names it prefixes (else its ValueError).
        if name is None or (name and _METRIC_NAME.fullmatch(name) is None):
            raise ConfigError(
                f"namespace must be a Prometheus name ([a-zA-Z_:][a-zA-Z0-9_:]*), "
                f"got {shown(namespace)}",
                key="namespace",
                reason="must be a Prometheus name",
            )
        namespace = name
        self.registry = prometheus_client.REGISTRY if registry is None else registry
        self.namespace = namespace
        with _registered_lock:
            by_namespace = _registered.setdefault(self.registry, {})
            metrics = by_namespace.get(namespace)
            if metrics is None:
                metrics = _Metrics(prometheus_client, self.registry, namespace)
                by_namespace[namespace] = metrics
        self._metrics = metrics

    def _for(self, provider: str) -> _Children:
        children = self._metrics.children.get(provider)
        if children is None:
            # Racing threads build equal children: labels() returns the same series.
            children = self._metrics.children.get(OTHER_PROVIDER)
            if children is None:
                children = self._metrics.make_children(OTHER_PROVIDER)
                self._metrics.children[OTHER_PROVIDER] = children
        return children

    def observe(self, report: AssemblyReport, provider: str) -> None:
        c = self._for(provider)
        c.tokens.observe(report.tokens_after)
        c.seconds.observe(report.elapsed_s)
        if report.dropped_rings:
            c.dropped_rings.inc(len(report.dropped_rings))
        if report.summarized:
            c.summary.inc()
        if report.summary_failed:
            c.summary_fail.inc()
        if report.repairs:
            c.pairing_error.inc()
        check = report.provider_count
        if check is not None and check.checked:
            if check.failed:
                outcome = "timeout" if check.reason == "timeout" else "error"
            else:
                outcome = "tightened" if check.rechecks else "fits"
            c.provider_count[outcome].inc()
            if check.tokens is not None:
                c.checked_tokens["estimate"].inc(check.local_tokens)
                c.checked_tokens["provider"].inc(check.tokens)

    def observe_usage(self, usage: Any, provider: str) -> None:
        """Records one response's reported usage (a ``TokenLedger`` given this sink calls it);
        ``provider`` is the usage's SDK shape."""
        tokens = self._metrics.usage_tokens
        for kind, value in zip(
            USAGE_KINDS,
            (
                usage.input_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
                usage.output_tokens,
            ),
            strict=True,
        ):
            if value:
                tokens.labels(provider, kind).inc(value)
        if usage.compaction_iterations:
            self._metrics.usage_compactions.labels(provider).inc(usage.compaction_iterations)

    def reject(self, error: RingboundError, provider: str) -> None:
        c = self._for(provider)
        c.reject[reject_reason(error)].inc()
        if isinstance(error, PairingError):
            c.pairing_error.inc()
        elif isinstance(error, SummaryError):
            c.summary_fail.inc()

    def unknown_model(self, provider: str) -> None:
        """Records a request named a model the models table does not know
        (``ringbound.models.resolve``)."""
        known = provider if provider in self._metrics.children else OTHER_PROVIDER
        self._metrics.unknown_model.labels(known).inc()

    def store_error(self, op: str, provider: str) -> None:
        """Records a session-store failure (``load``, ``save``) or a lost compare-and-set
        (``conflict``); called by ``assemble(..., session_id=...)`` on sinks that have it."""
        counter = self._for(provider).store_error.get(op)
        if counter is not None:
            counter.inc()
