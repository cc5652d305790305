"""Observability: the Prometheus metrics of DESIGN §6 count successes, drops and rejects; any
object with observe/reject is a sink; the OpenTelemetry span carries the report's numbers; one
DEBUG record per assembly; and a secret planted in every kind of message text never reaches a
log record, a span or the metrics exposition, whether the assembly succeeds or fails."""

from __future__ import annotations

import hashlib
import logging
import sys
import timeit
from typing import Any

import orjson
import prometheus_client
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ringbound as rb
from ringbound.observability import metrics, tracing
from ringbound.providers import PROVIDERS

SECRET = "sk-live-PLANTED-SECRET-123"
P = {"provider": "openai_chat"}
METRICS = (
    "context_assemble_tokens",
    "context_assemble_seconds",
    "context_assemble_dropped_rings_total",
    "context_assemble_summary_total",
    "context_assemble_summary_fail_total",
    "context_assemble_pairing_error_total",
    "context_assemble_reject_total",
)


@pytest.fixture(autouse=True)
def _restore_defaults() -> Any:
    yield
    rb.set_default_sink(None)
    rb.disable_tracing()


def call(i: int, name: str = "read_log", args: str | None = None) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": args if args is not None else f'{{"n": {i}}}'},
    }


def session(rings: int = 10, secret: str = "") -> list[dict[str, Any]]:
    """A session with ``secret`` in user text, a name, tool arguments, a tool name and results."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": f"Email Ana the report {secret}.", "name": f"ana{secret}"},
    ]
    for i in range(rings):
        name = "send_email" if i == 0 else (f"lookup{secret}" if i == 1 else "read_log")
        args = f'{{"to": "ana@example.com", "token": "{secret}", "n": {i}}}'
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call(i, name, args)]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{secret} " + "log " * 60},
        ]
    messages.append({"role": "user", "content": f"Now summarize {secret}."})
    return messages


def config(limit: int = 100_000, **kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=limit,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=1,
        side_effect_tools=["send_email"],
        **kw,
    )


def sample(registry: Any, name: str, labels: dict[str, str] = P) -> float | None:
    value = registry.get_sample_value(name, labels)
    return None if value is None else float(value)


def reject(registry: Any, reason: str) -> float | None:
    return sample(registry, "context_assemble_reject_total", {**P, "reason": reason})


def tracer_and_exporter() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


# --- Prometheus ---------------------------------------------------------------------------


def test_every_metric_exists_at_zero_before_any_assembly() -> None:
    registry = prometheus_client.CollectorRegistry()
    rb.PrometheusSink(registry)
    text = prometheus_client.generate_latest(registry).decode()
    for name in METRICS:
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    for name in METRICS[2:6]:
        assert sample(registry, name) == 0.0, name
    for reason in ("BudgetExceededError", "InvalidMessageError", "PairingError"):
        assert reject(registry, reason) == 0.0
    assert "# TYPE context_assemble_tokens histogram" in text
    assert "# TYPE context_assemble_seconds histogram" in text


def test_success_observes_tokens_after_and_seconds() -> None:
    registry = prometheus_client.CollectorRegistry()
    asm = rb.Assembler(config(), sink=rb.PrometheusSink(registry))
    reports = [asm.assemble(session(3)).report for _ in range(2)]
    assert not reports[0].dropped_rings
    assert sample(registry, "context_assemble_tokens_count") == 2.0
    assert sample(registry, "context_assemble_tokens_sum") == sum(r.tokens_after for r in reports)
    assert sample(registry, "context_assemble_seconds_count") == 2.0
    seconds = sample(registry, "context_assemble_seconds_sum")
    assert seconds == pytest.approx(sum(r.elapsed_s for r in reports))
    assert sample(registry, "context_assemble_dropped_rings_total") == 0.0
    assert sample(registry, "context_assemble_pairing_error_total") == 0.0
    assert sample(registry, "context_assemble_summary_total") == 0.0
    assert sample(registry, "context_assemble_summary_fail_total") == 0.0
    assert all(reject(registry, r) == 0.0 for r in ("BudgetExceededError", "PairingError"))


def test_dropped_rings_are_counted_per_ring() -> None:
    registry = prometheus_client.CollectorRegistry()
    asm = rb.Assembler(config(900), sink=rb.PrometheusSink(registry))
    first = asm.assemble(session(10)).report
    second = asm.assemble(session(14)).report
    assert len(first.dropped_rings) > 1 and second.dropped_rings
    expected = len(first.dropped_rings) + len(second.dropped_rings)
    assert sample(registry, "context_assemble_dropped_rings_total") == expected
    bound = next(b for b in (1_000, 2_000) if b >= first.tokens_after)
    assert sample(registry, "context_assemble_tokens_bucket", {**P, "le": f"{bound:.1f}"}) == 2.0


def test_rejects_are_counted_by_error_class() -> None:
    registry = prometheus_client.CollectorRegistry()
    sink = rb.PrometheusSink(registry)
    asm = rb.Assembler(config(), sink=sink)
    broken = session(3)
    del broken[5]  # call_1 loses its result
    with pytest.raises(rb.PairingError):
        asm.assemble(broken)
    with pytest.raises(rb.InvalidMessageError):
        asm.assemble([{"role": "nobody", "content": "x"}])
    with pytest.raises(rb.InvalidMessageError):
        asm.assemble("not a list")  # type: ignore[arg-type]
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(config(60), sink=sink).assemble(session(3))
    with pytest.raises(rb.ConfigError):
        asm.assemble(session(1), pinned=[99])
    assert reject(registry, "PairingError") == 1.0
    assert reject(registry, "InvalidMessageError") == 2.0
    assert reject(registry, "BudgetExceededError") == 1.0
    assert reject(registry, "ConfigError") == 1.0
    assert reject(registry, "SummaryError") == 0.0
    assert sample(registry, "context_assemble_pairing_error_total") == 1.0
    # A reject is not an assembled request.
    assert sample(registry, "context_assemble_tokens_count") == 0.0

    repairing = rb.Assembler(config(on_pairing_error="synthesize_error_results"), sink=sink)
    assert repairing.assemble(broken).report.repairs == ["call_1"]
    assert sample(registry, "context_assemble_pairing_error_total") == 2.0
    assert reject(registry, "PairingError") == 1.0
    assert sample(registry, "context_assemble_tokens_count") == 1.0


def test_reject_reason_label_is_bounded_to_ringbound_classes() -> None:
    class Custom(rb.PairingError):
        pass

    assert metrics.reject_reason(Custom("x")) == "PairingError"
    assert metrics.reject_reason(rb.RingboundError("x")) == "RingboundError"
    registry = prometheus_client.CollectorRegistry()
    sink = rb.PrometheusSink(registry)
    sink.reject(Custom("x"), "some_future_provider")
    other = {"provider": "other", "reason": "PairingError"}
    assert sample(registry, "context_assemble_reject_total", other) == 1.0
    labels = {
        s.labels["provider"]
        for m in registry.collect()
        for s in m.samples
        if "provider" in s.labels
    }
    assert labels == {*PROVIDERS, "other"}


def test_sinks_on_one_registry_share_metrics_and_namespace_prefixes() -> None:
    registry = prometheus_client.CollectorRegistry()
    a, b = rb.PrometheusSink(registry), rb.PrometheusSink(registry)
    gw = rb.PrometheusSink(registry, namespace="gw")
    report = rb.Assembler(config()).assemble(session(2)).report
    a.observe(report, "openai_chat")
    b.observe(report, "openai_chat")
    gw.observe(report, "openai_chat")
    assert sample(registry, "context_assemble_tokens_count") == 2.0
    assert sample(registry, "gw_context_assemble_tokens_count") == 1.0
    assert sample(registry, "gw_context_assemble_reject_total", {**P, "reason": "ConfigError"}) == 0


def test_a_name_taken_by_another_collector_is_a_config_error() -> None:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("context_assemble_reject_total", "theirs", registry=registry)
    with pytest.raises(rb.ConfigError, match="context_assemble_reject_total") as e:
        rb.PrometheusSink(registry)
    assert e.value.key == "sink"


def test_missing_extras_raise_config_error_naming_the_extra(monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(rb.ConfigError, match=r"ringbound\[prometheus\]"):
        rb.PrometheusSink()
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(rb.ConfigError, match=r"ringbound\[otel\]"):
        rb.enable_tracing()


# --- The sink protocol --------------------------------------------------------------------


class RecordingSink:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, str]] = []

    def observe(self, report: rb.AssemblyReport, provider: str) -> None:
        self.calls.append(("observe", report, provider))

    def reject(self, error: rb.RingboundError, provider: str) -> None:
        self.calls.append(("reject", error, provider))


def test_a_custom_sink_gets_every_report_and_every_error() -> None:
    sink = RecordingSink()
    assert isinstance(sink, rb.MetricsSink)
    asm = rb.Assembler(config(900), sink=sink)
    res = asm.assemble(session(10))
    with pytest.raises(rb.InvalidMessageError) as e:
        asm.assemble([{"role": "user", "content": 3}])
    assert sink.calls == [
        ("observe", res.report, "openai_chat"),
        ("reject", e.value, "openai_chat"),
    ]


def test_the_default_sink_applies_to_assemblers_without_one() -> None:
    default, own = RecordingSink(), RecordingSink()
    plain = rb.Assembler(config())
    mine = rb.Assembler(config(), sink=own)
    assert isinstance(rb.get_default_sink(), rb.NullSink)
    rb.set_default_sink(default)  # after the Assembler was built: still applies
    plain.assemble(session(1))
    mine.assemble(session(1))
    assert [c[0] for c in default.calls] == ["observe"]
    assert [c[0] for c in own.calls] == ["observe"]
    rb.set_default_sink(None)
    assert isinstance(rb.get_default_sink(), rb.NullSink)
    plain.assemble(session(1))
    assert len(default.calls) == 1


def test_something_that_is_not_a_sink_is_a_config_error() -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler(config(), sink=object())  # type: ignore[arg-type]
    assert e.value.key == "sink"
    with pytest.raises(rb.ConfigError):
        rb.set_default_sink(lambda report, provider: None)  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler(config(), tracer="jaeger")
    assert e.value.key == "tracer"


def test_a_failing_sink_never_fails_or_changes_the_assembly(caplog: Any) -> None:
    class Broken:
        def observe(self, report: Any, provider: str) -> None:
            raise RuntimeError("observe broke")

        def reject(self, error: Any, provider: str) -> None:
            raise RuntimeError("reject broke")

    caplog.set_level(logging.WARNING, logger="ringbound")
    asm = rb.Assembler(config(), sink=Broken())
    assert asm.assemble(session(2)).report.tokens_after > 0
    with pytest.raises(rb.PairingError):
        asm.assemble([{"role": "tool", "tool_call_id": "call_9", "content": "x"}])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "metrics sink Broken.observe raised RuntimeError; the assembly is not affected",
        "metrics sink Broken.reject raised RuntimeError; the assembly is not affected",
    ]


# --- OpenTelemetry ------------------------------------------------------------------------


def test_span_carries_the_report_numbers() -> None:
    provider, exporter = tracer_and_exporter()
    asm = rb.Assembler(config(900), tracer=provider.get_tracer("test"))
    report = asm.assemble(session(10)).report
    (span,) = exporter.get_finished_spans()
    assert span.name == "ringbound.assemble"
    assert span.status.status_code == StatusCode.UNSET
    attrs = dict(span.attributes or {})
    assert attrs == {
        "ringbound.provider": "openai_chat",
        "ringbound.tokens_before": report.tokens_before,
        "ringbound.tokens_before_exact": report.tokens_before_exact,
        "ringbound.tokens_after": report.tokens_after,
        "ringbound.budget": 900,
        "ringbound.dropped_rings": len(report.dropped_rings),
        "ringbound.dropped_turns": len(report.dropped_turns),
        "ringbound.stages": tuple(s.stage for s in report.stages),
        "ringbound.messages_before": report.messages_before,
        "ringbound.messages_after": report.messages_after,
        "ringbound.repairs": 0,
        "ringbound.ledger_added": 1,
        "ringbound.tools_dropped": False,
        "ringbound.rewrites": 0,
        "ringbound.summarized": False,
        "ringbound.summary_failed": False,
    }
    assert attrs["ringbound.stages"] == ("drop_rings",)
    assert attrs["ringbound.dropped_rings"] > 1


def test_error_span_has_the_class_and_status_but_no_exception_text() -> None:
    provider, exporter = tracer_and_exporter()
    asm = rb.Assembler(config(60), tracer=provider.get_tracer("test"))
    with pytest.raises(rb.BudgetExceededError) as budget:
        asm.assemble(session(3))
    with pytest.raises(rb.InvalidMessageError):
        asm.assemble([{"role": "user", "content": "x"}, {"role": "nobody", "content": "x"}])
    with pytest.raises(rb.PairingError):
        asm.assemble([{"role": "tool", "tool_call_id": "call_9", "content": "x"}])
    spans = exporter.get_finished_spans()
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR] * 3
    assert [s.status.description for s in spans] == [
        "BudgetExceededError",
        "InvalidMessageError",
        "PairingError",
    ]
    assert all(not s.events for s in spans)  # no exception event: it would copy the message
    assert dict(spans[0].attributes or {}) == {
        "ringbound.provider": "openai_chat",
        "error.type": "BudgetExceededError",
        "ringbound.tokens_required": budget.value.tokens,
        "ringbound.budget": 60,
    }
    assert spans[1].attributes["ringbound.error_index"] == 1  # type: ignore[index]
    assert spans[2].attributes["ringbound.pairing_issues"] == 1  # type: ignore[index]


def test_enable_tracing_covers_assemblers_without_a_tracer() -> None:
    provider, exporter = tracer_and_exporter()
    asm = rb.Assembler(config())
    asm.assemble(session(1))
    assert not exporter.get_finished_spans()
    rb.enable_tracing(provider)
    asm.assemble(session(1))
    assert len(exporter.get_finished_spans()) == 1
    rb.disable_tracing()
    asm.assemble(session(1))
    assert len(exporter.get_finished_spans()) == 1


# --- Logs ---------------------------------------------------------------------------------


def test_one_debug_record_per_assembly_with_hash_and_counts(caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="ringbound")
    messages = session(10)
    report = rb.Assembler(config(900)).assemble(messages).report
    (record,) = caplog.records
    assert record.name == "ringbound" and record.levelno == logging.DEBUG
    digest = hashlib.blake2b(orjson.dumps(messages), digest_size=8).hexdigest()
    fields = record.ringbound
    assert fields["request_hash"] == digest
    assert digest in record.getMessage()
    assert fields["tokens_after"] == report.tokens_after
    assert fields["tokens_before"] == report.tokens_before
    assert fields["dropped_rings"] == len(report.dropped_rings) > 0
    assert fields["stages"] == ["drop_rings"]
    assert fields["tokens_before_exact"] == report.tokens_before_exact
    bound = "" if report.tokens_before_exact else "at most "
    assert f"tokens {bound}{report.tokens_before} -> {report.tokens_after}" in record.getMessage()


def test_an_upper_bound_is_logged_as_one(caplog: Any) -> None:
    """A small budget drops most rings uncounted: tokens_before is then a bound, and the log
    line says so rather than print it as a count."""
    caplog.set_level(logging.DEBUG, logger="ringbound")
    log = "line of a long log with numbers 12345 and words\n" * 60
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for i in range(30):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "r", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": log + str(i)},
        ]
    cfg = config(3_000, stages=("drop_rings",))
    report = rb.Assembler(cfg, cache=rb.CountCache()).assemble(messages).report
    assert not report.tokens_before_exact
    (record,) = caplog.records
    assert f"tokens about {report.tokens_before} -> " in record.getMessage()
    assert record.ringbound["tokens_before_exact"] is False


def test_a_rejected_assembly_logs_its_class_and_index(caplog: Any) -> None:
    caplog.set_level(logging.DEBUG, logger="ringbound")
    with pytest.raises(rb.InvalidMessageError):
        rb.Assembler(config()).assemble([{"role": "user", "content": "x"}, {"role": 7}])
    (record,) = caplog.records
    assert record.getMessage() == (
        "rejected openai_chat request: InvalidMessageError error_index=1"
    )


def test_nothing_is_hashed_or_formatted_when_nothing_listens(monkeypatch: Any) -> None:
    def boom(payload: bytes) -> str:
        raise AssertionError("hashed although DEBUG is off")

    monkeypatch.setattr(tracing, "request_hash", boom)
    logging.getLogger("ringbound").setLevel(logging.INFO)
    try:
        assert rb.Assembler(config()).assemble(session(2)).report.tokens_after > 0
        logging.getLogger("ringbound").setLevel(logging.DEBUG)
        with pytest.raises(AssertionError, match="hashed although"):
            rb.Assembler(config()).assemble(session(2))
    finally:
        logging.getLogger("ringbound").setLevel(logging.NOTSET)


def test_the_hook_costs_under_5_microseconds_when_nothing_is_configured() -> None:
    """The gateway budget for the default path: NullSink, no tracer, DEBUG off. Best of
    several runs, so a busy machine does not fail it; measured at about 0.25 µs."""
    logging.getLogger("ringbound").setLevel(logging.INFO)
    messages = session(2)
    res, payload = rb.Assembler(config()).assemble(messages), orjson.dumps(messages)
    error = rb.PairingError("x")

    def hook() -> None:
        span = tracing.start_span(None, "openai_chat")
        tracing.assembled(res.report, payload, "openai_chat", None, span)
        tracing.rejected(error, "openai_chat", None, span)

    try:
        n = 20_000
        best = min(timeit.repeat(hook, number=n, repeat=5)) / n
    finally:
        logging.getLogger("ringbound").setLevel(logging.NOTSET)
    assert best < 5e-6, f"{best * 1e6:.2f} µs"


# --- The planted secret -------------------------------------------------------------------


class LeakySink(RecordingSink):
    """A sink whose own failures quote what it was given: ringbound must not pass that on."""

    def observe(self, report: rb.AssemblyReport, provider: str) -> None:
        raise ValueError(f"cannot record {report!r}")

    def reject(self, error: rb.RingboundError, provider: str) -> None:
        raise ValueError(f"cannot record {error}")


def planted_cases() -> list[tuple[rb.AssemblyConfig, list[Any], type[Exception] | None]]:
    fits = session(4, SECRET)
    broken = session(4, SECRET)
    del broken[5]
    bad_role = [*session(2, SECRET), {"role": SECRET, "content": SECRET}]
    bad_detail = session(2, SECRET)
    bad_detail.append(
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "x", "detail": SECRET}}],
        }
    )
    bad_part = [*session(1, SECRET), {"role": "user", "content": [{"type": SECRET}]}]
    return [
        (config(), fits, None),
        (config(1_200), session(12, SECRET), None),  # drops rings, ledger quotes the args
        (config(on_pairing_error="synthesize_error_results"), broken, None),
        (config(80), session(4, SECRET), rb.BudgetExceededError),
        (config(), broken, rb.PairingError),
        (config(), bad_role, rb.InvalidMessageError),
        (config(), bad_detail, rb.InvalidMessageError),
        (config(), bad_part, rb.InvalidMessageError),
    ]


@pytest.mark.parametrize("sink_kind", ["prometheus", "leaky"])
def test_a_planted_secret_never_reaches_logs_spans_or_metrics(sink_kind: str, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="ringbound")
    registry = prometheus_client.CollectorRegistry()
    sink = rb.PrometheusSink(registry) if sink_kind == "prometheus" else LeakySink()
    provider, exporter = tracer_and_exporter()
    tracer = provider.get_tracer("test")
    outputs: list[str] = []
    errors: list[str] = []
    cases = planted_cases()
    for cfg, messages, expected in cases:
        asm = rb.Assembler(cfg, sink=sink, tracer=tracer)
        if expected is None:
            res = asm.assemble(messages)
            outputs.append(orjson.dumps(res.messages).decode())
        else:
            with pytest.raises(expected) as e:
                asm.assemble(messages)
            errors.append(str(e.value))

    # The secret did flow through every assembly, and the error messages quote it: a log,
    # span or sink that passed either on would fail below.
    assert all(SECRET in o for o in outputs)
    assert sum(SECRET in e for e in errors) == 3
    assert [o for o in outputs if "ledger" in o.lower()]

    ringbound_debug = [
        r for r in caplog.records if r.name == "ringbound" and r.levelno == logging.DEBUG
    ]
    assert len(ringbound_debug) == len(cases)
    if sink_kind == "leaky":
        assert sum(r.levelno == logging.WARNING for r in caplog.records) == len(cases)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    for record in caplog.records:
        text = " ".join([record.getMessage(), formatter.format(record), repr(vars(record))])
        assert SECRET not in text, record.getMessage()
    assert SECRET not in caplog.text

    spans = exporter.get_finished_spans()
    assert len(spans) == len(cases)
    for span in spans:
        assert SECRET not in span.to_json()
        assert SECRET not in repr(dict(span.attributes or {}))

    exposition = prometheus_client.generate_latest(registry).decode()
    if sink_kind == "prometheus":
        assert sample(registry, "context_assemble_reject_total", {**P, "reason": "PairingError"})
    assert SECRET not in exposition


def test_a_tracer_of_another_kind_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A duck-typed tracer (start_span) with opentelemetry not installed: a rejection is still
    the ringbound error, its span gets the attributes and ends; a span that raises does not
    replace the error."""
    ended: list[dict[str, Any]] = []

    class Span:
        def __init__(self, fail: bool) -> None:
            self.fail, self.attributes = fail, {}

        def set_attributes(self, attributes: dict[str, Any]) -> None:
            if self.fail:
                raise RuntimeError("span broke")
            self.attributes.update(attributes)

        def set_status(self, status: Any) -> None:
            raise AssertionError("no status without opentelemetry")

        def end(self) -> None:
            ended.append(self.attributes)

    class Tracer:
        def __init__(self, fail: bool = False) -> None:
            self.fail = fail

        def start_span(self, name: str, **kwargs: Any) -> Span:
            return Span(self.fail)

    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    monkeypatch.setattr(tracing, "_status", None)
    cfg = rb.AssemblyConfig(model_input_limit=20, output_reserve_tokens=0, safety_margin_tokens=0)
    big = [{"role": "user", "content": "word " * 100}]
    for fail in (False, True):
        with pytest.raises(rb.BudgetExceededError):
            rb.Assembler(cfg, tracer=Tracer(fail)).assemble(big)
    # The working span ended with the error's type; the broken one never reached end().
    assert len(ended) == 1 and ended[0]["error.type"] == "BudgetExceededError"
