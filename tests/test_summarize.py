"""The summarization orchestration: units as text, the note, the target, and running a
caller's summarizer (sync and async) under timeouts, the window guard and both policies."""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringbound import _core
from ringbound.errors import ConfigError, SummaryError
from ringbound.summary.request import (
    TEMPLATE_HEADINGS,
    SummaryOutcome,
    SummaryRequest,
    note_body,
    note_text,
    split_units,
    summary_target,
    template,
    unit_blocks,
    units_text,
)
from ringbound.summary.runner import arun, run


def wcount(text: str) -> int:
    """Tokens = words: easy to reason about in tests."""
    return len(text.split())


def wcut(text: str, n: int, *, from_end: bool = False) -> str:
    words = list(re.finditer(r"\S+", text))
    if len(words) <= n:
        return text
    if n <= 0:
        return ""
    return text[words[-n].start() :] if from_end else text[: words[n - 1].end()]


def make_request(
    text: str = "### unit 1\nuser: hello",
    *,
    units: list[list[Any]] | None = None,
    previous: str | None = None,
    target: int = 50,
) -> SummaryRequest:
    return SummaryRequest(
        units=units if units is not None else [["native-1"]],
        text=text,
        previous_summary=previous,
        target_tokens=target,
        ledger=[],
        goal="refund order 7",
        provider="openai_chat",
    )


RUN = {"count": wcount, "cut": wcut, "target": 50}


class Recorder:
    """A sync summarizer answering ``answer`` and keeping every request it got."""

    def __init__(self, answer: Any = "a short summary") -> None:
        self.answer = answer
        self.requests: list[SummaryRequest] = []
        self.threads: list[str] = []

    def __call__(self, request: SummaryRequest) -> Any:
        self.requests.append(request)
        self.threads.append(threading.current_thread().name)
        return self.answer


def raising(request: SummaryRequest) -> str:
    raise RuntimeError("upstream said: sk-secret-in-exception-text")


def sleeping(request: SummaryRequest) -> str:
    time.sleep(1.0)
    return "too late"


async def async_ok(request: SummaryRequest) -> str:
    await asyncio.sleep(0)
    return "async summary"


# --- units as text ------------------------------------------------------------------------


def _ring() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Where is order 1?\nIt was due Monday."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"id": 1}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "track", "arguments": {"id": 1}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "in transit"},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "Error: db down"}],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see photo"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
    ]


def test_units_text_renders_roles_calls_and_named_results() -> None:
    text = units_text([[{"role": "user", "content": "hi"}], _ring()])
    assert text == (
        "### unit 1\n"
        "user: hi\n"
        "\n"
        "### unit 2\n"
        "user: Where is order 1?\n"
        "  It was due Monday.\n"
        'assistant → lookup({"id": 1})\n'
        'assistant → track({"id": 1})\n'
        "tool track: in transit\n"
        "tool lookup [error]: Error: db down\n"
        "user: see photo\n"
        "  [image]"
    )
    assert "base64" not in text


def test_units_text_is_its_blocks_joined() -> None:
    units = [_ring(), [{"role": "assistant", "content": "done"}]]
    assert units_text(units) == "\n\n".join(unit_blocks(units))
    assert split_units(units_text(units)) == unit_blocks(units)


_CONTENT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["user", "assistant"]), _CONTENT), min_size=1, max_size=4
        ),
        min_size=1,
        max_size=5,
    )
)
def test_unit_text_splits_back_into_its_blocks(raw) -> None:
    units = [[{"role": r, "content": c} for r, c in unit] for unit in raw]
    assert split_units(units_text(units)) == unit_blocks(units)


# --- target, note, template ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("summarized", "limit", "max_tokens", "expected"),
    [
        (1_000, 128_000, 10_000, 2_000),  # floor of 2000
        (50_000, 1_000_000, 100_000, 10_000),  # a fifth
        (50_000, 128_000, 100_000, 6_400),  # 5 % of the window
        (50_000, 128_000, 1_024, 1_024),  # summary_max_tokens
        (1_000, 8_000, 100_000, 400),  # the upper bound wins over the floor
    ],
)
def test_summary_target(summarized: int, limit: int, max_tokens: int, expected: int) -> None:
    assert summary_target(summarized, limit, max_tokens) == expected


@given(st.integers(0, 10**7), st.integers(20, 10**7), st.integers(1, 10**6))
def test_summary_target_is_clamped(summarized: int, limit: int, max_tokens: int) -> None:
    target = summary_target(summarized, limit, max_tokens)
    upper = min(int(0.05 * limit), max_tokens)
    assert 1 <= target <= max(upper, 1)
    assert target == upper or target == max(round(0.2 * summarized), 2000)
    assert summary_target(summarized, limit, max_tokens, configured=123) == min(123, max_tokens)


@given(st.text())
def test_note_body_inverts_note_text(body: str) -> None:
    note = note_text(body, units=3, messages=7)
    assert note.startswith(_core.SUMMARY_MARKER + " Machine-generated summary of 7 earlier")
    assert "(3 units)" in note.splitlines()[0]
    assert note_body(note) == body


def test_note_body_of_other_text_is_none() -> None:
    assert note_body("hello") is None
    assert note_body(" " + note_text("x", units=1, messages=1)) is None


def test_template_has_every_heading_in_order() -> None:
    text = template("ship it", ["a", "b"], ["send_email({}) → ok"], [])
    heads = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert tuple(heads) == TEMPLATE_HEADINGS
    assert "- send_email({}) → ok" in text
    assert text.endswith(
        "## Do not repeat\nDo not repeat completed side-effecting tools without new user intent."
    )
    assert "## Open questions\n(none)" in text


# --- running: success and checks ----------------------------------------------------------


def test_success_returns_the_body() -> None:
    rec = Recorder("  the summary  \n")
    out = run(rec, make_request(target=7), **{**RUN, "target": 10})
    assert out == SummaryOutcome("the summary", False, None, 1, 1, False, False)
    assert rec.requests[0].target_tokens == 10  # the target wins over the request's
    assert rec.requests[0].text == "### unit 1\nuser: hello"


def test_without_timeout_a_sync_summarizer_runs_in_the_calling_thread() -> None:
    rec = Recorder()
    run(rec, make_request(), **RUN)
    assert rec.threads == [threading.current_thread().name]


def test_with_timeout_a_sync_summarizer_runs_in_a_worker_thread() -> None:
    rec = Recorder()
    run(rec, make_request(), **RUN, timeout_s=5)
    assert rec.threads == ["ringbound-summarizer"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty"),
        (" \n\t ", "empty"),
        (None, "not_text"),
        (b"bytes", "not_text"),
        (42, "not_text"),
        ("word " * 201, "oversized"),  # over 4 x 50
    ],
)
def test_unusable_answers_fail(answer: Any, reason: str) -> None:
    out = run(Recorder(answer), make_request(), **RUN)
    assert (out.text, out.failed, out.reason, out.fallback_used) == (None, True, reason, False)


def test_long_answer_is_cut_to_the_target() -> None:
    out = run(Recorder("word " * 120), make_request(), **RUN)
    assert out.cut and not out.failed
    assert wcount(out.text) == 50


def test_answer_of_exactly_four_targets_is_cut_not_failed() -> None:
    out = run(Recorder("word " * 200), make_request(), **RUN)
    assert out.cut and wcount(out.text) == 50


def test_unknown_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        run(Recorder(), make_request(), **RUN, policy="ignore")


# --- running: failure policies ------------------------------------------------------------


def test_exception_under_fallback_uses_the_fallback() -> None:
    fallback = Recorder("extractive text")
    out = run(raising, make_request(), **RUN, fallback=fallback)
    assert out.text == "extractive text"
    assert out.failed and out.fallback_used
    assert out.reason == "exception:RuntimeError"
    assert out.calls == 2
    assert "secret" not in repr(out)


def test_exception_under_fallback_without_fallback_gives_no_text() -> None:
    out = run(raising, make_request(), **RUN)
    assert (out.text, out.failed, out.fallback_used, out.calls) == (None, True, False, 1)


def test_failing_fallback_gives_no_text() -> None:
    out = run(raising, make_request(), **RUN, fallback=Recorder(""))
    assert (out.text, out.failed, out.fallback_used, out.reason) == (
        None,
        True,
        False,
        "exception:RuntimeError",
    )
    assert out.calls == 2


def test_fail_closed_raises_summary_error_without_the_exception_text() -> None:
    fallback = Recorder()
    with pytest.raises(SummaryError) as info:
        run(raising, make_request(), **RUN, policy="fail_closed", fallback=fallback)
    err = info.value
    assert err.reason == "exception:RuntimeError"
    assert "exception:RuntimeError" in str(err)
    assert "secret" not in str(err)
    assert isinstance(err.__cause__, RuntimeError)
    assert fallback.requests == []


@pytest.mark.parametrize(("answer", "reason"), [("", "empty"), (None, "not_text")])
def test_fail_closed_names_the_check_that_failed(answer: Any, reason: str) -> None:
    with pytest.raises(SummaryError) as info:
        run(Recorder(answer), make_request(), **RUN, policy="fail_closed")
    assert info.value.reason == reason
    assert info.value.__cause__ is None


def test_sync_timeout_stops_waiting() -> None:
    start = time.perf_counter()
    out = run(sleeping, make_request(), **RUN, timeout_s=0.05, fallback=Recorder("fb"))
    assert time.perf_counter() - start < 0.8
    assert (out.reason, out.text, out.fallback_used) == ("timeout", "fb", True)


def test_sync_timeout_under_fail_closed_chains_a_timeout_error() -> None:
    with pytest.raises(SummaryError) as info:
        run(sleeping, make_request(), **RUN, timeout_s=0.05, policy="fail_closed")
    assert info.value.reason == "timeout"
    assert isinstance(info.value.__cause__, TimeoutError)


# --- running: async -----------------------------------------------------------------------


def test_sync_run_drives_an_async_summarizer_without_a_loop() -> None:
    out = run(async_ok, make_request(), **RUN, timeout_s=5)
    assert out.text == "async summary" and not out.failed


def test_sync_run_inside_a_running_loop_rejects_an_async_summarizer() -> None:
    async def main() -> None:
        run(async_ok, make_request(), **RUN)

    with pytest.raises(ConfigError, match="assemble_async"):
        asyncio.run(main())


def test_sync_run_inside_a_running_loop_rejects_a_wrapped_async_summarizer() -> None:
    def wrapped(request: SummaryRequest) -> Any:
        return async_ok(request)  # looks sync, returns a coroutine

    async def main() -> None:
        run(wrapped, make_request(), **RUN)

    with pytest.raises(ConfigError, match="assemble_async"):
        asyncio.run(main())


def test_sync_run_awaits_a_wrapped_async_summarizer_without_a_loop() -> None:
    out = run(lambda r: async_ok(r), make_request(), **RUN)
    assert out.text == "async summary"


def test_arun_awaits_an_async_summarizer() -> None:
    out = asyncio.run(arun(async_ok, make_request(), **RUN, timeout_s=5))
    assert out == SummaryOutcome("async summary", False, None, 1, 1, False, False)


def test_arun_detects_an_object_with_async_call() -> None:
    class Summarizer:
        async def __call__(self, request: SummaryRequest) -> str:
            return "from __call__"

    assert asyncio.run(arun(Summarizer(), make_request(), **RUN)).text == "from __call__"
    assert run(Summarizer(), make_request(), **RUN).text == "from __call__"


def test_arun_cancels_an_async_summarizer_on_timeout() -> None:
    cancelled = []

    async def slow(request: SummaryRequest) -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    async def main() -> SummaryOutcome:
        out = await arun(slow, make_request(), **RUN, timeout_s=0.05)
        await asyncio.sleep(0.01)  # let the cancellation land
        return out

    start = time.perf_counter()
    out = asyncio.run(main())
    assert time.perf_counter() - start < 1.0
    assert (out.reason, out.text) == ("timeout", None)
    assert cancelled == [True]


def test_arun_runs_a_sync_summarizer_off_the_loop_thread() -> None:
    rec = Recorder()

    async def main() -> SummaryOutcome:
        return await arun(rec, make_request(), **RUN)

    assert asyncio.run(main()).text == "a short summary"
    assert rec.threads == ["ringbound-summarizer"]


def test_arun_abandons_a_sync_summarizer_on_timeout() -> None:
    start = time.perf_counter()
    out = asyncio.run(arun(sleeping, make_request(), **RUN, timeout_s=0.05))
    assert time.perf_counter() - start < 0.8
    assert out.reason == "timeout"


def test_arun_fail_closed_on_an_async_exception() -> None:
    async def boom(request: SummaryRequest) -> str:
        raise KeyError("secret key text")

    with pytest.raises(SummaryError) as info:
        asyncio.run(arun(boom, make_request(), **RUN, policy="fail_closed"))
    assert info.value.reason == "exception:KeyError"
    assert "secret" not in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)


def test_arun_uses_an_async_fallback() -> None:
    out = asyncio.run(arun(raising, make_request(), **RUN, fallback=async_ok))
    assert (out.text, out.fallback_used, out.reason) == (
        "async summary",
        True,
        "exception:RuntimeError",
    )


# --- window guard: map -> reduce ----------------------------------------------------------


def _units(sizes: list[int]) -> tuple[list[list[Any]], str]:
    """Units whose text opens with a unique word ``u<i>`` followed by filler words."""
    blocks = [
        "\n".join([f"### unit {i}", f"user: u{i} " + " ".join(["w"] * n)])
        for i, n in enumerate(sizes, 1)
    ]
    return [[f"native-{i}"] for i in range(1, len(sizes) + 1)], "\n\n".join(blocks)


def test_map_reduce_splits_and_reduces() -> None:
    units, text = _units([30] * 10)
    rec = Recorder("part summary")
    req = make_request(text, units=units, previous="earlier summary body")
    out = run(rec, req, **RUN, input_limit=100)
    assert out.chunks > 1
    assert out.calls == out.chunks + 1 == len(rec.requests)
    assert out.text == "part summary"
    maps, final = rec.requests[:-1], rec.requests[-1]
    assert all(r.previous_summary is None for r in maps)
    assert final.previous_summary == "earlier summary body"
    assert final.units == units
    # Each map call carries exactly the native items of the units in its text.
    for r in maps:
        numbers = [int(n) for n in re.findall(r"^### unit (\d+)$", r.text, re.M)]
        assert r.units == [[f"native-{n}"] for n in numbers]
    assert final.text == "\n\n".join(
        f"### part {i}\npart summary" for i in range(1, out.chunks + 1)
    )
    for i in range(1, 11):
        assert any(re.search(rf"\bu{i}\b", r.text) for r in maps)


@given(
    st.lists(st.integers(1, 120), min_size=1, max_size=12),
    st.integers(20, 150),
    st.integers(1, 30),
)
def test_every_call_fits_and_every_unit_is_seen(sizes, limit, answer_words) -> None:
    units, text = _units(sizes)
    rec = Recorder(" ".join(["s"] * answer_words))
    out = run(rec, make_request(text, units=units), **{**RUN, "target": 30}, input_limit=limit)
    assert not out.failed
    assert all(wcount(r.text) <= limit for r in rec.requests)
    for i in range(1, len(sizes) + 1):
        assert any(re.search(rf"\bu{i}\b", r.text) for r in rec.requests)
    if out.chunks > 1:
        assert out.calls >= out.chunks + 1
    else:
        assert out.calls == 1


def test_a_unit_over_the_window_is_cut_head_and_tail() -> None:
    units, text = _units([20, 500, 20])
    text = text.replace("\n\n### unit 3", " TAIL\n\n### unit 3")
    rec = Recorder("ok")
    run(rec, make_request(text, units=units), **RUN, input_limit=100)
    cut_calls = [r for r in rec.requests if "cut to fit the summarizer's window" in r.text]
    assert len(cut_calls) == 1
    big = cut_calls[0].text
    assert wcount(big) <= 100
    assert big.startswith("### unit 2\nuser: u2 ")
    assert big.endswith(" w TAIL")
    assert cut_calls[0].units == [["native-2"]]


def test_reduce_recurses_when_the_parts_do_not_fit() -> None:
    units, text = _units([40] * 12)
    rec = Recorder(" ".join(["s"] * 30))
    out = run(rec, make_request(text, units=units), **RUN, input_limit=80)
    assert out.chunks == 12
    assert out.calls > out.chunks + 1
    assert all(wcount(r.text) <= 80 for r in rec.requests)
    assert not out.failed


def test_unit_texts_override_splitting() -> None:
    rec = Recorder("ok")
    req = make_request("alpha beta gamma delta", units=[["a"], ["b"]])
    run(rec, req, **RUN, input_limit=3, unit_texts=["alpha beta", "gamma delta"])
    assert [r.text for r in rec.requests[:2]] == ["alpha beta", "gamma delta"]
    assert [r.units for r in rec.requests[:2]] == [[["a"]], [["b"]]]


def test_a_failing_map_call_stops_the_attempt() -> None:
    answers = iter(["ok", ""])

    def second_fails(request: SummaryRequest) -> str:
        return next(answers)

    units, text = _units([30] * 6)
    out = run(second_fails, make_request(text, units=units), **RUN, input_limit=70)
    assert (out.failed, out.reason, out.calls) == (True, "empty", 2)


def test_the_timeout_covers_all_calls_together() -> None:
    def slowish(request: SummaryRequest) -> str:
        time.sleep(0.03)
        return "ok"

    units, text = _units([30] * 10)
    out = run(slowish, make_request(text, units=units), **RUN, input_limit=40, timeout_s=0.1)
    assert out.reason == "timeout"
    assert out.calls < 11


def test_map_reduce_with_real_token_counts() -> None:
    count = functools.partial(_core.count_text, encoding="o200k_base")
    cut = functools.partial(_core.cut_text, encoding="o200k_base")
    units, text = _units([150] * 6)
    rec = Recorder("summary")
    out = run(
        rec, make_request(text, units=units), count=count, cut=cut, target=50, input_limit=200
    )
    assert out.chunks > 1 and out.calls == out.chunks + 1
    assert all(count(r.text) <= 200 for r in rec.requests)
    units, text = _units([20, 900])
    rec = Recorder("summary")
    run(rec, make_request(text, units=units), count=count, cut=cut, target=50, input_limit=200)
    assert any("cut to fit" in r.text and count(r.text) <= 200 for r in rec.requests)
