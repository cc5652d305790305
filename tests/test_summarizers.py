"""The ready-made summarizers: the extractive one (deterministic, keeps early facts through
repeated compactions) and the Chat-Completions one (against fake clients, no network)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringbound import _core
from ringbound.report import LedgerEntry
from ringbound.summary.request import (
    TEMPLATE_HEADINGS,
    SummaryRequest,
    note_body,
    note_text,
    units_text,
)
from ringbound.summary.runner import arun, run
from ringbound.summary.summarizers import extractive, openai_compatible

COUNT = functools.partial(_core.count_text, encoding="o200k_base")
CUT = functools.partial(_core.cut_text, encoding="o200k_base")


def request(
    units: list[list[dict[str, Any]]],
    *,
    previous: str | None = None,
    target: int = 2000,
    ledger: list[Any] = (),  # type: ignore[assignment]
    goal: str | None = "Sort out my order",
) -> SummaryRequest:
    return SummaryRequest(
        units=[[object()] for _ in units],
        text=units_text(units),
        previous_summary=previous,
        target_tokens=target,
        ledger=list(ledger),
        goal=goal,
        provider="openai_chat",
    )


def call(name: str, args: str, cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


RING = [
    {"role": "user", "content": "My order 7 arrived broken.\nCan you refund it?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [call("lookup", '{"id": 7}', "a")],
    },
    {"role": "tool", "tool_call_id": "a", "content": "Error: timeout"},
    {"role": "assistant", "content": None, "tool_calls": [call("refund", '{"id": 7}', "b")]},
    {"role": "tool", "tool_call_id": "b", "content": "refunded 20 EUR"},
    {"role": "assistant", "content": "Refund issued.\nAnything else?"},
]


def filler(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Question {i} about shipping zones and customs forms."},
        {"role": "assistant", "content": f"Answer {i}: zone B, form CN22, about five days."},
    ]


def sections(body: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current = ""
    for line in body.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        elif line:
            out[current].append(line)
    return out


def test_extractive_fills_the_template() -> None:
    ledger = [LedgerEntry("send_email", "x1", '{"to":"a@b.c"}', "ok")]
    body = extractive()(request([RING], ledger=ledger))
    got = sections(body)
    assert tuple(got) == TEMPLATE_HEADINGS
    assert got["User goal"] == ["Sort out my order"]
    # Calls of tools the ledger does not name are lookups, not side effects.
    assert got["Decisions"] == [
        "- user: My order 7 arrived broken.",
        "- assistant: Anything else?",
        '- looked up lookup({"id": 7}) → error',
        '- looked up refund({"id": 7}) → ok',
    ]
    assert got["Tools already executed (side effects)"] == ['- send_email({"to":"a@b.c"}) → ok']
    assert got["Open questions"] == ["- Can you refund it?"]


def test_extractive_is_deterministic() -> None:
    req = request([RING, filler(1), filler(2)], previous="## Decisions\n- earlier fact")
    assert extractive()(req) == extractive()(req)


def test_extractive_marks_a_call_without_result() -> None:
    unit = [{"role": "assistant", "content": None, "tool_calls": [call("charge", "{}", "z")]}]
    assert "- looked up charge({}) → no result" in extractive()(request([unit]))


def test_extractive_clips_long_lines() -> None:
    unit = [{"role": "user", "content": "x" * 500}]
    body = extractive(max_line_chars=50)(request([unit]))
    line = next(li for li in body.splitlines() if li.startswith("- user: "))
    assert len(line) == 2 + 50 and line.endswith("…")


def test_extractive_carries_free_text_previous_summaries() -> None:
    body = extractive()(request([filler(1)], previous="The customer is Ada.\nShe paid twice."))
    assert "- The customer is Ada." in body and "- She paid twice." in body


def test_extractive_drops_middle_lines_to_fit() -> None:
    previous = "## Decisions\n" + "\n".join(f"- old {i} " + "o" * 40 for i in range(20))
    units = [filler(i) for i in range(40)]
    body = extractive()(request(units, previous=previous, target=300))
    assert len(body) <= 300 * 3
    decisions = sections(body)["Decisions"]
    assert decisions[0].startswith("- old 0 ")  # the earliest line
    assert decisions[-1] == "- assistant: Answer 39: zone B, form CN22, about five days."
    assert any("lines omitted to fit" in d for d in decisions)


@given(st.integers(0, 25), st.integers(1, 25), st.integers(2000, 4000))
def test_a_planted_fact_survives_three_compactions(where: int, first: int, target: int) -> None:
    # Once a fact is in a summary it is an earlier line, and earlier lines are the last to
    # go: later rounds are too long for the target and must drop lines.
    fact = "The warehouse code is QX-4417."
    planted = [{"role": "user", "content": fact}, {"role": "assistant", "content": "Noted."}]
    previous = None
    summarize = extractive()
    for round_, n in enumerate([first, 60, 60]):
        units = [filler(100 * round_ + i) for i in range(n)]
        if round_ == 0:
            units.insert(min(where, len(units)), planted)
        out = run(summarize, request(units, previous=previous), count=COUNT, cut=CUT, target=target)
        assert not out.failed and not out.cut
        note = note_text(out.text, units=len(units), messages=2 * len(units))
        previous = note_body(note)
    assert fact in previous
    assert "lines omitted to fit" in previous
    assert previous.count("lines omitted to fit") <= 2  # one per section at most


def test_a_planted_fact_survives_map_reduce() -> None:
    fact = "The warehouse code is QX-4417."
    units = [filler(i) for i in range(30)]
    units.insert(3, [{"role": "user", "content": fact}])
    req = request(units, previous="## Decisions\n- the customer is Ada")
    out = run(extractive(), req, count=COUNT, cut=CUT, target=400, input_limit=150)
    assert out.chunks > 1 and not out.failed
    assert fact in out.text
    assert "the customer is Ada" in out.text


# --- openai_compatible --------------------------------------------------------------------


class FakeCompletions:
    def __init__(self, content: Any = "model summary", as_dict: bool = False) -> None:
        self.content = content
        self.as_dict = as_dict
        self.calls: list[dict[str, Any]] = []

    def create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if self.as_dict:
            return {"choices": [{"message": {"content": self.content}}]}
        message = SimpleNamespace(content=self.content, role="assistant")
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


class FakeAsyncCompletions(FakeCompletions):
    async def create(self, **kwargs: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return FakeCompletions.create(self, **kwargs)


def client(completions: FakeCompletions) -> Any:
    return SimpleNamespace(chat=SimpleNamespace(completions=completions))


def test_openai_compatible_sends_the_prompt_and_the_text() -> None:
    fake = FakeCompletions()
    summarize = openai_compatible(client(fake), "gpt-4o-mini")
    assert not inspect.iscoroutinefunction(summarize)
    req = request([RING], previous="## Decisions\n- keep me", target=321)
    assert summarize(req) == "model summary"
    (sent,) = fake.calls
    assert sent["model"] == "gpt-4o-mini"
    assert sent["max_tokens"] == 321 and sent["temperature"] == 0
    system, user = sent["messages"]
    assert system["role"] == "system" and user == {"role": "user", "content": req.text}
    for heading in TEMPLATE_HEADINGS:
        assert f"## {heading}" in system["content"]
    assert "321 tokens" in system["content"]
    assert "Never drop a side effect" in system["content"]
    assert "- keep me" in system["content"]
    assert "Sort out my order" in system["content"]


def test_openai_compatible_options() -> None:
    fake = FakeCompletions(as_dict=True)
    summarize = openai_compatible(
        client(fake), "m", system_prompt="Be terse.", max_tokens=99, temperature=0.3
    )
    assert summarize(request([RING])) == "model summary"
    (sent,) = fake.calls
    assert sent["messages"][0]["content"].startswith("Be terse.")
    assert "Never drop a side effect" not in sent["messages"][0]["content"]
    assert (sent["max_tokens"], sent["temperature"]) == (99, 0.3)


def test_openai_compatible_none_content_is_empty_and_fails_the_run() -> None:
    summarize = openai_compatible(client(FakeCompletions(content=None)), "m")
    assert summarize(request([RING])) == ""
    out = run(summarize, request([RING]), count=COUNT, cut=CUT, target=100)
    assert (out.failed, out.reason) == (True, "empty")


def test_openai_compatible_with_an_async_client() -> None:
    fake = FakeAsyncCompletions()
    summarize = openai_compatible(client(fake), "m")
    assert inspect.iscoroutinefunction(summarize)
    out = asyncio.run(arun(summarize, request([RING]), count=COUNT, cut=CUT, target=100))
    assert out.text == "model summary"
    assert run(summarize, request([RING]), count=COUNT, cut=CUT, target=100).text == (
        "model summary"
    )
    assert len(fake.calls) == 2


def test_openai_compatible_sees_through_a_sync_looking_decorator() -> None:
    # The openai SDK decorates AsyncCompletions.create with a plain-def wrapper.
    fake = FakeAsyncCompletions()
    inner = fake.create

    @functools.wraps(inner)
    def create(**kwargs: Any) -> Any:
        return inner(**kwargs)

    wrapped = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    summarize = openai_compatible(wrapped, "m")
    assert inspect.iscoroutinefunction(summarize)
    assert asyncio.run(summarize(request([RING]))) == "model summary"


@pytest.mark.parametrize("width", [0, 7])
def test_extractive_rejects_tiny_line_widths(width: int) -> None:
    with pytest.raises(ValueError):
        extractive(max_line_chars=width)
