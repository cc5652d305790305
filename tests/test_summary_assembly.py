"""The summary stage through the Assembler: when it runs, where the note goes, what the
summarizer is asked, what happens when it fails, iterative updates, redaction, the ledger,
and the async path. Summarizers here are fakes that record their calls."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound import _core
from ringbound.adapted import read_canonical
from ringbound.providers import adapter
from ringbound.summary.request import note_body

SECRET = "sk-proj-" + "Q7" * 16
FACT = "the customer's locker code is 4417"


def ring(i: int, name: str = "read_log", args: dict[str, Any] | None = None) -> list[dict]:
    args = {"day": i} if args is None else args
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i}: " + "log line " * 40},
    ]


def session(rings: int = 30, fact: str = FACT) -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": f"Email Ana the report. Token: {SECRET}"},
    ]
    msgs += ring(0, "send_email", {"to": "ana@example.com"})
    msgs[2]["content"] = f"Noted: {fact}. Sending the email."
    for i in range(1, rings):
        msgs += ring(i)
    msgs.append({"role": "user", "content": "What next?"})
    return msgs


def config(**kw: Any) -> rb.AssemblyConfig:
    base = {
        "model_input_limit": 3000,
        "output_reserve_tokens": 500,
        "safety_margin_tokens": 100,
        "side_effect_tools": ("send_email",),
        "summary_max_tokens": 300,
    }
    return rb.AssemblyConfig(**{**base, **kw})


class Recorder:
    """A summarizer that records its requests and answers with `answer`."""

    def __init__(self, answer: Any = "The agent read logs.") -> None:
        self.answer = answer
        self.requests: list[rb.SummaryRequest] = []

    def __call__(self, request: rb.SummaryRequest) -> Any:
        self.requests.append(request)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer(request) if callable(self.answer) else self.answer


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def summary_notes(messages: list[dict]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), str) and m["content"].startswith(_core.SUMMARY_MARKER)
    ]


def test_no_summary_when_the_request_fits_below_the_trigger() -> None:
    rec = Recorder()
    res = rb.Assembler(config(), summarizer=rec).assemble(session(rings=3))
    assert rec.requests == []
    assert res.report.summary is None and not res.report.summarized


def test_dropped_units_become_one_note_after_the_ledger_note() -> None:
    rec = Recorder()
    msgs = session()
    res = rb.Assembler(config(), summarizer=rec).assemble(msgs)
    r = res.report
    assert len(rec.requests) == 1
    assert r.summarized and r.summary is not None
    dropped = len(r.dropped_rings) + len(r.dropped_turns)
    assert r.summary.units == dropped
    notes = summary_notes(res.messages)
    assert len(notes) == 1
    ledger_at = next(i for i, m in enumerate(res.messages) if "side-effect-ledger" in str(m))
    assert notes[0] == ledger_at + 1
    assert "The agent read logs." in res.messages[notes[0]]["content"]
    assert r.stages[-1].stage == "summarize"
    # Compacted to the low-water mark, and the count is exact.
    assert r.tokens_after <= config().summarize_trigger_ratio * r.budget
    assert rb.count_tokens(res.messages) == r.tokens_after
    assert rb.validate(res.messages) == []
    # The request names every dropped unit, as text and in native form.
    req = rec.requests[0]
    assert len(req.units) == dropped
    # Natives as plain, redacted copies; the caller's own objects only on request.
    assert req.units[0][0] == msgs[2] and req.units[0][0] is not msgs[2]
    assert req.raw_units is None
    asm = rb.Assembler(config(summary_raw_units=True), summarizer=rec)
    asm.assemble(msgs)
    assert rec.requests[-1].raw_units[0][0] is msgs[2]
    assert req.text.count("### unit") == dropped
    assert req.previous_summary is None
    assert [e.tool for e in req.ledger] == ["send_email"]


def test_secrets_are_redacted_before_the_summarizer_sees_them() -> None:
    rec = Recorder()
    msgs = session()
    msgs[4]["content"] = f"Authorization: Bearer {'x' * 30} and AKIA{'A' * 16}"
    res = rb.Assembler(config(), summarizer=rec).assemble(msgs)
    req = rec.requests[0]
    seen = req.text + (req.goal or "")
    assert SECRET not in seen and "x" * 30 not in seen and "AKIA" + "A" * 16 not in seen
    assert res.report.summary.redactions == {
        "openai_key": 1,
        "bearer_token": 1,
        "aws_access_key": 1,
    }
    # The native units and the ledger carry no secret either.
    natives = str(req.units)
    assert SECRET not in natives and "x" * 30 not in natives and "AKIA" + "A" * 16 not in natives
    assert "[REDACTED:bearer_token]" in natives


def test_side_effect_arguments_are_redacted_everywhere_but_the_request() -> None:
    """A side-effecting call's arguments can hold a secret: the report, its repr, the metrics
    sink and the summarizer see it redacted; the ledger note in the request (sent to the same
    provider as the history) and the caller's ledger keep it."""
    secret = "sk-proj-" + "Q" * 30
    msgs = session()
    call = msgs[2]["tool_calls"][0]
    assert call["function"]["name"] == "send_email"
    call["function"]["arguments"] = json.dumps({"to": "ana@example.com", "api_key": secret})
    rec = Recorder()
    seen: list[Any] = []

    class Sink(rb.NullSink):
        def observe(self, report: Any, provider: str) -> None:
            seen.append(report)

    ledger = rb.SideEffectLedger()
    res = rb.Assembler(config(), summarizer=rec, sink=Sink()).assemble(msgs, ledger=ledger)
    assert [e.tool for e in res.report.ledger_added] == ["send_email"]
    for text in (
        str(res.report.ledger_added),
        repr(res.report),
        str(rec.requests[0].ledger),
        str(seen[0].ledger_added),
    ):
        assert secret not in text and "[REDACTED:openai_key]" in text
    note = next(m["content"] for m in res.messages if "side-effect-ledger" in str(m))
    assert secret in note
    assert secret in ledger.entries[0].args


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (ValueError("boom: contains sk-secret"), "exception:ValueError"),
        ("", "empty"),
        ("   ", "empty"),
        (42, "not_text"),
        ("half a pair \ud800 of surrogates", "not_text"),
        ("word " * 5000, "oversized"),
    ],
)
def test_a_failing_summarizer_falls_back_to_the_extractive_summary(
    answer: Any, reason: str
) -> None:
    rec = Recorder(answer)
    res = rb.Assembler(config(), summarizer=rec).assemble(session())
    s = res.report.summary
    assert res.report.summary_failed and s.failed and s.reason == reason
    assert s.fallback_used and res.report.summarized
    note = res.messages[summary_notes(res.messages)[0]]["content"]
    assert "## User goal" in note and "boom" not in note
    assert res.report.tokens_after <= res.report.budget


def test_fallback_none_drops_without_a_note_and_keeps_the_ledger() -> None:
    res = rb.Assembler(config(summary_fallback="none"), summarizer=Recorder("")).assemble(session())
    assert res.report.summary_failed and not res.report.summarized
    assert summary_notes(res.messages) == []
    assert any("send_email" in str(m.get("content")) for m in res.messages)


def test_fail_closed_raises_and_returns_nothing() -> None:
    asm = rb.Assembler(
        config(on_summary_failure="fail_closed"), summarizer=Recorder(RuntimeError("x"))
    )
    with pytest.raises(rb.SummaryError) as info:
        asm.assemble(session())
    assert info.value.reason == "exception:RuntimeError"


def test_a_slow_summarizer_times_out() -> None:
    def slow(_: rb.SummaryRequest) -> str:
        time.sleep(2)
        return "late"

    t = time.perf_counter()
    res = rb.Assembler(config(summary_timeout_ms=100), summarizer=slow).assemble(session())
    assert time.perf_counter() - t < 1.5
    assert res.report.summary.reason == "timeout" and res.report.summary.fallback_used


def test_long_text_is_cut_to_the_target() -> None:
    res = rb.Assembler(config(), summarizer=Recorder("fact " * 400)).assemble(session())
    s = res.report.summary
    assert s.cut and not s.failed
    body = res.messages[summary_notes(res.messages)[0]]["content"].split("\n\n", 1)[1]
    assert rb.count_text(body) <= s.target_tokens


def test_input_over_the_summarizer_window_is_chunked() -> None:
    rec = Recorder("part")
    res = rb.Assembler(config(summarizer_input_limit=400), summarizer=rec).assemble(session())
    s = res.report.summary
    assert s.chunks > 1 and s.calls == len(rec.requests) == s.chunks + 1
    mapped = "".join(r.text for r in rec.requests[:-1])
    assert mapped.count("### unit") == s.units


def test_iterative_summaries_update_the_previous_one_and_keep_a_fact() -> None:
    """A fact planted before the first compaction survives three compactions with the
    extractive summarizer, each one updating the note before it."""
    asm = rb.Assembler(config(), summarizer=rb.summarizers.extractive())
    history = session(fact=FACT)
    previous_notes = 0
    for round_ in range(3):
        res = asm.assemble(history)
        assert res.report.summarized
        notes = summary_notes(res.messages)
        assert len(notes) == 1, "one note, updated in place"
        assert FACT in res.messages[notes[0]]["content"], f"round {round_}"
        assert res.report.summary.replaced_previous == (previous_notes > 0)
        previous_notes = len(notes)
        history = list(res.messages[:-1])
        for i in range(100 + 20 * round_, 120 + 20 * round_):
            history += ring(i)
        history.append({"role": "user", "content": f"And now round {round_}?"})


def test_recorded_ledger_entries_reach_the_note_and_dropped_calls_reach_the_ledger() -> None:
    ledger = rb.SideEffectLedger()
    ledger.record("charge_card", "pay_1", args={"amount": 20}, idempotency_key="k-1", turn=1)
    asm = rb.Assembler(config())
    small = asm.assemble(session(rings=3), ledger=ledger)
    note = next(m["content"] for m in small.messages if "side-effect-ledger" in str(m))
    assert (
        'charge_card [ok] call_id="pay_1" args={"amount":20} idempotency_key="k-1" turn=1' in note
    )
    res = asm.assemble(session(), ledger=ledger)
    assert [e.tool for e in ledger] == ["charge_card", "send_email"]
    assert ledger.entries[1].call_id == "c0" and ledger.entries[1].turn == 1
    assert res.report.ledger_entries == 2


def test_async_summarizer_under_asyncio() -> None:
    async def summ(request: rb.SummaryRequest) -> str:
        await asyncio.sleep(0)
        return f"{len(request.units)} units summarized"

    asm = rb.Assembler(config(), summarizer=summ)
    res = asyncio.run(asm.assemble_async(session()))
    assert res.report.summarized
    assert "units summarized" in res.messages[summary_notes(res.messages)[0]]["content"]
    # The sync entry point runs an async summarizer too when no loop is running.
    assert asm.assemble(session()).report.summarized


def test_sync_assemble_inside_a_running_loop_needs_assemble_async() -> None:
    async def summ(_: rb.SummaryRequest) -> str:
        return "x"

    async def main() -> None:
        with pytest.raises(rb.ConfigError, match="assemble_async"):
            rb.Assembler(config(), summarizer=summ).assemble(session())

    asyncio.run(main())


def test_no_room_for_a_note_is_reported_not_silent() -> None:
    cfg = config(summary_target_tokens=3000, summary_max_tokens=3000, model_input_limit=4000)
    res = rb.Assembler(cfg, summarizer=Recorder()).assemble(session(rings=40))
    assert res.report.summary is not None and res.report.summary.reason == "no_room"
    assert not res.report.summarized and res.report.dropped_rings


@pytest.mark.parametrize("target", [None, 100, 4000])
def test_summary_max_tokens_caps_every_target(target: int | None) -> None:
    """The summarizer is never asked for more than ``summary_max_tokens``, even when
    ``summary_target_tokens`` asks for more; a longer answer is cut to the cap."""
    rec = Recorder(lambda request: "The agent read logs. " * 50)
    cfg = config(summary_max_tokens=100, summary_target_tokens=target)
    res = rb.Assembler(cfg, summarizer=rec).assemble(session())
    assert [r.target_tokens for r in rec.requests] == [100]
    assert res.report.summary is not None and res.report.summary.target_tokens == 100
    assert res.report.summary.cut
    (note,) = (res.messages[i]["content"] for i in summary_notes(res.messages))
    assert rb.count_text(note_body(note)) <= 100


@pytest.mark.parametrize(
    "provider", ["openai_responses", "anthropic", "gemini", "bedrock_converse"]
)
def test_every_provider_renders_the_note_and_reads_it_back(provider: str) -> None:
    native, system = from_canonical(provider, session())
    asm = rb.Assembler(config(), provider=provider, summarizer=rb.summarizers.extractive())
    res = asm.assemble(native, system=system)
    assert res.report.summarized and res.report.tokens_after <= res.report.budget
    assert rb.validate(res.messages, provider=provider, system=res.system) == []
    assert (
        rb.count_tokens(res.messages, provider=provider, system=res.system)
        == res.report.tokens_after
    )
    canon = read_canonical(adapter(provider), res.messages, res.system).messages
    assert sum(text_of(m).startswith(_core.SUMMARY_MARKER) for m in canon) == 1
    # Assembling the output again with the same budget changes nothing (idempotent).
    again = asm.assemble(res.messages, system=res.system)
    assert again.messages == res.messages and again.system == res.system


def test_no_text_reaches_the_logs_on_the_summary_path(caplog: pytest.LogCaptureFixture) -> None:
    """The summary path logs counts only: not the secret, not the summary, not the text of
    the summarizer's exception (which may quote the history)."""
    leaky = Recorder(RuntimeError(f"cannot summarize {SECRET} {FACT}"))
    with caplog.at_level("DEBUG", logger="ringbound"):
        res = rb.Assembler(config(), summarizer=leaky).assemble(session())
    assert res.report.summary_failed
    logged = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert caplog.records and SECRET not in logged and FACT not in logged and "locker" not in logged


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic"])
def test_each_notch_of_tighten_drops_more(provider: str) -> None:
    canonical = session(rings=20)
    native, system = (
        (canonical, None) if provider == "openai_chat" else from_canonical(provider, canonical)
    )
    asm = rb.Assembler(config(model_input_limit=6000), provider=provider)
    kept = []
    for notch in range(4):
        res = asm.assemble(native, system=system, tighten=notch)
        r = res.report
        assert r.tightened == notch and r.tokens_after <= r.budget
        assert rb.validate(res.messages, provider=provider, system=res.system) == []
        kept.append(r.tokens_after)
    assert kept == sorted(kept, reverse=True) and len(set(kept)) == 4
    with pytest.raises(rb.ConfigError):
        asm.assemble(native, system=system, tighten=-1)
    with pytest.raises(rb.BudgetExceededError):
        asm.assemble(native, system=system, tighten=200)
