"""Where a drop brings neighbours of one role together, Anthropic, Gemini and Bedrock Converse
send them merged. For a plan that only keeps items, the core writes those merges itself and
counts the request as sent (``NativeView.sent``), from the items it read and the merged items
alone, instead of reading the adapter's rendering again. Its figure must be what counting the
sent request from scratch gives (``count_tokens``), for the caller's dicts and SDK objects,
and asking it again (the same reading, another plan) must not give an earlier plan's answer."""

from __future__ import annotations

from typing import Any

import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_api import session

import ringbound as rb
from ringbound import _core, adapted
from ringbound.errors import RingboundError

MERGING = ("anthropic", "gemini", "bedrock_converse")
NATIVE = ("openai_responses", *MERGING)


def plain_turns(turns: int = 10) -> list[dict[str, Any]]:
    """A chat of plain turns then a ring: dropping an assistant turn leaves two user turns
    together."""
    pad = "word " * 150
    chat: list[dict[str, Any]] = [{"role": "user", "content": "fix the parser"}]
    for k in range(turns):
        chat.append({"role": "assistant", "content": f"thoughts {k} {pad}"})
        chat.append({"role": "user", "content": f"and also {k}"})
    return chat + session(rings=1)[1:]


def config(budget: int, **kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **kw
    )


def sent_tokens(provider: str, res: rb.AssemblyResult) -> int:
    """The request ``res`` sends, counted from scratch."""
    return rb.count_tokens(list(res.messages), provider=provider, system=res.system)


@pytest.fixture
def no_recount(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if the adapter's rendering is read again."""

    def refuse(*_: Any) -> int:
        raise AssertionError("the rendering was counted again")

    monkeypatch.setattr(adapted.NativeRequest, "count", refuse)


@pytest.mark.parametrize("provider", MERGING)
@pytest.mark.parametrize("fraction", [0.8, 0.5, 0.25])
def test_merged_neighbours_are_counted_by_the_core_as_sent(
    provider: str, fraction: float, no_recount: None
) -> None:
    native, system = from_canonical(provider, plain_turns())
    full = rb.count_tokens(native, provider=provider, system=system)
    budget = int(full * fraction)
    res = rb.Assembler(config(budget), provider=provider).assemble(native, system=system)
    assert res.report.merged > 0
    assert res.report.tokens_after == sent_tokens(provider, res) <= budget


@pytest.mark.parametrize("provider", MERGING)
@pytest.mark.parametrize("fraction", [0.6, 0.4])
def test_cut_results_beside_merged_neighbours_are_counted_by_the_core_as_sent(
    provider: str, fraction: float, no_recount: None
) -> None:
    """Plain turns dropped (their neighbours merged) and the recent rings' results cut in
    one plan: the core writes the cut results into their items and the merges, and counts
    that request."""
    chat = plain_turns() + session(rings=6, result="log line " * 400)[2:]
    native, system = from_canonical(provider, chat)
    full = rb.count_tokens(native, provider=provider, system=system)
    budget = int(full * fraction)
    cfg = config(budget, max_tool_result_tokens=200, min_result_tokens=100, recent_tool_rings=6)
    res = rb.Assembler(cfg, provider=provider).assemble(native, system=system)
    assert res.report.merged > 0 and res.report.truncated_results
    assert res.report.tokens_after == sent_tokens(provider, res) <= budget


def test_sdk_objects_merged_are_counted_as_sent(no_recount: None) -> None:
    """Gemini's SDK contents: the merged items are serialized as the adapter serializes
    them, the others come from the reading."""
    types = pytest.importorskip("google.genai.types")
    native, system = from_canonical("gemini", plain_turns())
    objects = [types.Content.model_validate(c) for c in native]
    full = rb.count_tokens(native, provider="gemini", system=system)
    res = rb.Assembler(config(full // 2), provider="gemini").assemble(objects, system=system)
    assert res.report.merged > 0
    assert res.report.tokens_after == sent_tokens("gemini", res)


@pytest.mark.parametrize("provider", MERGING)
def test_another_plan_of_the_same_reading_gets_its_own_count(provider: str) -> None:
    """The same items at several budgets and back, read once: each result is what a reading
    made afresh gives (the core keeps only the last answer per reading, by the items kept)."""
    native, system = from_canonical(provider, plain_turns())
    full = rb.count_tokens(native, provider=provider, system=system)
    for budget in [full * 3 // 4, full // 2, full * 2 // 5, full // 2, full * 3 // 4]:
        res = rb.Assembler(config(budget), provider=provider).assemble(native, system=system)
        _core.cache_clear()
        fresh = rb.Assembler(config(budget), provider=provider).assemble(native, system=system)
        assert res.report.merged > 0
        assert res.messages == fresh.messages
        assert res.report.tokens_after == fresh.report.tokens_after == sent_tokens(provider, res)


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.sessions(max_units=10, cheap=True), st.floats(0.15, 1.1), st.booleans())
def test_tokens_after_is_the_count_of_the_request_sent(
    provider: str, chat: list[dict[str, Any]], fraction: float, notes: bool
) -> None:
    """However the plan was counted (as planned: kept, rewritten, the ledger note; by the
    core as sent: merged; or its rendering read again), ``tokens_after`` is the count of what
    goes out, within the budget. Results are cut small so that the cheap rewrites (cut,
    deduplicated, media) are common."""
    native, system = from_canonical(provider, chat)
    try:
        full = rb.count_tokens(native, provider=provider, system=system)
        budget = max(60, int(full * fraction))
        cfg = config(
            budget,
            side_effect_tools=list(gen.TOOLS) if notes else [],
            max_tool_result_tokens=60,
            min_result_tokens=20,
        )
        res = rb.Assembler(cfg, provider=provider).assemble(native, system=system)
    except RingboundError:
        return
    for kind in sorted({r.kind for r in res.report.rewrites}):
        event(f"rewritten: {kind}")
    event(f"merged: {res.report.merged > 0}")
    assert res.report.tokens_after == sent_tokens(provider, res) <= budget


def test_a_gemini_result_cut_is_the_text_under_its_key(no_recount: None) -> None:
    """Gemini's response is an object: the cut is of the text under its key (not of the
    object's JSON, which would go out as JSON inside a string), counted as the object the
    adapter writes, and an older error result superseded is counted as the error Gemini
    reads."""
    big = "\n".join(f'line {i}: some "quoted" output value' for i in range(200))
    contents: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"text": "read the file"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {}}}]},
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "read_file", "response": {"output": big}}}],
        },
        {"role": "model", "parts": [{"text": "done"}]},
        {"role": "user", "parts": [{"text": "thanks, now summarize"}]},
    ]
    res = rb.Assembler(config(900), provider="gemini").assemble(contents)
    assert [r.kind for r in res.report.rewrites] == ["truncated"]
    text = res.messages[2]["parts"][0]["functionResponse"]["response"]["output"]
    assert text.startswith('line 0: some "quoted" output value\nline 1')
    assert "expand_message" in text and text.endswith('line 199: some "quoted" output value')
    assert res.report.tokens_after == sent_tokens("gemini", res) <= 900
