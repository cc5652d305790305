"""Differential tests: the Rust plan against the pure-Python reference of ``tests/reference.py``
on generated sessions, policies and budgets. Kept messages must be the very objects the
reference keeps, insertions equal dicts, the report the same numbers, errors the same type."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import reference as ref
import strategies as gen
from hypothesis import HealthCheck, Phase, assume, event, find, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.config import STAGES

#: Two warnings hypothesis itself raises only while reporting a failure: libcst (imported to
#: suggest an explicit example) trips a DeprecationWarning of mypy_extensions, and a session
#: with several KB of tool output makes an "overly large repr". Under filterwarnings=error
#: either would turn the report of a failing property into a pytest INTERNALERROR.
pytestmark = [
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]
properties = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(call: Any) -> Any:
    """What ``call()`` returned, or the ringbound error it raised."""
    try:
        return call()
    except rb.RingboundError as e:
        return e


def assert_same_error(got: Exception, expected: Exception) -> None:
    assert type(got) is type(expected), f"library {got!r}, reference {expected!r}"
    if isinstance(got, rb.BudgetExceededError):
        assert (got.tokens, got.budget) == (expected.tokens, expected.budget)  # type: ignore[attr-defined]
        assert got.bucket_tokens == expected.bucket_tokens  # type: ignore[attr-defined]
    if isinstance(got, rb.PairingError):
        kinds = Counter((i.kind, i.call_id) for i in got.issues)
        assert kinds == Counter((i.kind, i.call_id) for i in expected.issues)  # type: ignore[attr-defined]


def assert_same_messages(messages: list[Any], got: list[Any], plan: ref.Plan) -> None:
    """Kept items are the caller's objects at the reference's indices; insertions are equal."""
    expected = ref.materialize(messages, plan.items)
    assert len(got) == len(expected), (
        f"library kept {len(got)} messages, reference {len(expected)}: {plan.items}"
    )
    mine = {id(m) for m in messages}
    for k, (item, m, e) in enumerate(zip(plan.items, got, expected, strict=True)):
        if isinstance(item, int):
            assert m is messages[item], f"output[{k}] is not the caller's messages[{item}]"
        else:
            assert id(m) not in mine and m == e, f"output[{k}]: {m!r} != {e!r}"


def assert_same_report(report: rb.AssemblyReport, plan: ref.Plan) -> None:
    """The report's numbers are the reference's. Stage savings and tokens_before are compared
    when the library counted them exactly (it may size certainly-dropped units from bytes)."""
    exact = report.tokens_before_exact
    assert report.tokens_after == plan.tokens_after
    assert [tuple(s) for s in report.dropped_rings] == plan.dropped_rings
    assert [tuple(s) for s in report.dropped_turns] == plan.dropped_turns
    stages = [(s.stage, s.units, s.tokens_saved if exact else None) for s in report.stages]
    assert stages == [(n, u, saved if exact else None) for n, u, saved in plan.stages]
    assert report.repairs == plan.repairs
    assert report.bucket_tokens == plan.buckets
    assert report.tools_dropped == plan.tools_dropped
    assert report.ledger_entries == plan.ledger_entries
    added = [
        (e.tool, e.call_id, e.args, e.status, e.idempotency_key, e.resource_id, e.turn)
        for e in report.ledger_added
    ]
    assert added == [
        (e.tool, e.call_id, e.args, e.status, e.idempotency_key, e.resource_id, e.turn)
        for e in plan.ledger_added
    ]
    rewrites = [(r.index, r.kind, r.tokens_saved if exact else None) for r in report.rewrites]
    assert rewrites == [(i, kind, saved if exact else None) for i, kind, saved in plan.rewrites]
    assert report.truncated_results == [i for i, kind, _ in plan.rewrites if kind == "truncated"]


def check_against_reference(
    messages: list[Any],
    cfg: rb.AssemblyConfig,
    tools: list[Any] | None = None,
    pinned: tuple[int, ...] = (),
) -> Any:
    """Assembles with the library and the reference and asserts they agree; returns the
    library's result (or error)."""
    got = outcome(lambda: rb.Assembler(cfg).assemble(messages, tools, pinned=pinned))
    expected = outcome(lambda: ref.plan(messages, cfg, tools, pinned))
    if isinstance(got, Exception) or isinstance(expected, Exception):
        assert_same_error(got, expected)
        return got
    assert_same_messages(messages, got.messages, expected)
    assert_same_report(got.report, expected)
    return got


@properties
@given(gen.cases(missing_results=True, stage_prefix=True))
def test_assembly_matches_the_reference(case: gen.Case) -> None:
    """Generated sessions, policies and budgets (5%-120% of the session): same plan."""
    check_against_reference(case.messages, case.config(), case.tools, case.pinned)


@properties
@given(gen.cases(missing_results=True), st.lists(st.sampled_from(STAGES), unique=True))
def test_any_stage_order_matches_the_reference(case: gen.Case, stages: list[str]) -> None:
    """Stages in any order and any subset run as configured, each only while over budget."""
    check_against_reference(case.messages, case.config(stages=stages), case.tools, case.pinned)


@properties
@given(gen.cases(missing_results=True, stage_prefix=True, cheap=True))
def test_cheap_stages_match_the_reference(case: gen.Case) -> None:
    """Sessions that repeat reads (the same arguments written another way), hold huge results
    and images, under small max_tool_result_tokens: the same rewrites, texts and savings."""
    res = check_against_reference(case.messages, case.config(), case.tools, case.pinned)
    for r in [] if isinstance(res, Exception) else res.report.rewrites:
        event(f"rewrite: {r.kind}")


@properties
@given(
    gen.cases(missing_results=True, cheap=True),
    st.lists(st.sampled_from(STAGES), unique=True),
)
def test_cheap_stages_in_any_order_match_the_reference(case: gen.Case, stages: list[str]) -> None:
    """The cheap stages anywhere in the order (after drops, between them, some left out)."""
    check_against_reference(case.messages, case.config(stages=stages), case.tools, case.pinned)


@pytest.mark.parametrize("kind", ["deduped", "truncated", "media"])
def test_the_generated_cases_exercise_every_rewrite(kind: str) -> None:
    """The cheap strategies do reach each rewrite: hypothesis finds a case the reference
    rewrites that way (the first one found: shrinking it would only cost time), and the
    library agrees on it."""

    def rewrites_so(case: gen.Case) -> bool:
        try:
            plan = ref.plan(case.messages, case.config(), case.tools, case.pinned)
        except rb.RingboundError:
            return False
        return any(k == kind for _, k, _ in plan.rewrites)

    case = find(
        gen.cases(cheap=True),
        rewrites_so,
        settings=settings(
            max_examples=500,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )
    check_against_reference(case.messages, case.config(), case.tools, case.pinned)


@pytest.mark.parametrize("stage", ref.DEGRADE_STAGES)
def test_the_generated_cases_exercise_every_degrading_stage(stage: str) -> None:
    """The strategies reach each stage that degrades the protected suffix (the middle
    exhausted, still over budget), and the library agrees with the reference on the case."""

    def degrades(case: gen.Case) -> bool:
        try:
            plan = ref.plan(case.messages, case.config(), case.tools, case.pinned)
        except rb.RingboundError:
            return False
        return any(s == stage for s, _, _ in plan.stages)

    case = find(
        gen.cases(cheap=True),
        degrades,
        settings=settings(
            max_examples=500,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )
    check_against_reference(case.messages, case.config(), case.tools, case.pinned)


@properties
@given(
    gen.cases(pins=False),
    st.lists(gen.tool_ring(), min_size=1, max_size=4),
    gen.fractions,
)
def test_reassembly_with_an_earlier_note_matches_the_reference(
    case: gen.Case, new_rings: list[list[dict[str, Any]]], fraction: float
) -> None:
    """The output of one assembly, plus new rings, assembled again: the earlier ledger note is
    read back, kept where it stands and extended, as the reference does it."""
    cfg = case.config(pin=("first_user_message", "side_effect_ledger"))
    first = outcome(lambda: rb.Assembler(cfg).assemble(case.messages, case.tools))
    assume(not isinstance(first, Exception))
    later = [*first.messages, *(m for ring in new_rings for m in ring)]
    budget = gen.budget_for(rb.count_tokens(later, encoding=cfg.encoding), fraction)
    check_against_reference(later, case.config(pin=cfg.pin, model_input_limit=budget))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
entries = st.lists(
    st.builds(
        ref.Entry,
        tool=st.sampled_from(gen.TOOLS) | st.text(max_size=12),
        call_id=st.text(min_size=1, max_size=16),
        args=json_values.map(ref.canonical),
        status=st.sampled_from(("ok", "error", "not_completed")),
    ),
    min_size=1,
    max_size=5,
    unique_by=lambda e: (e.tool, e.call_id),
)


@properties
@given(entries)
def test_the_reference_renders_the_note_byte_for_byte(note_entries: list[ref.Entry]) -> None:
    """A note rendered by the reference is read back by the library as the same entries and,
    unchanged, returned as the caller's own object: both renderings agree to the byte."""
    text = ref.render(note_entries)
    assert text is not None
    assert ref.parse_note({"role": "system", "content": text}) == note_entries
    note = {"role": "system", "content": text}
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "goal"},
        note,
        {"role": "user", "content": "next"},
    ]
    res = rb.Assembler(rb.AssemblyConfig()).assemble(messages)
    assert res.report.ledger_entries == len(note_entries)
    assert res.messages[2] is note


@properties
@given(gen.text, st.integers(0, 40), st.booleans(), st.sampled_from(("o200k_base", "cl100k_base")))
def test_the_cut_the_reference_borrows_fits_and_keeps_an_end(
    text: str, max_tokens: int, from_end: bool, encoding: str
) -> None:
    """``_core.cut_text`` (the cut truncation makes, which the reference calls rather than
    re-implements): a prefix (or suffix) of the text within max_tokens, the text itself when
    it fits."""
    piece = _core.cut_text(text, max_tokens, encoding, from_end)
    assert (text.endswith if from_end else text.startswith)(piece)
    assert _core.count_text(piece, encoding) <= max_tokens
    if _core.count_text(text, encoding) <= max_tokens:
        assert piece == text


def test_the_cut_is_at_most_two_tokens_short_of_the_longest() -> None:
    """The longest suffix of "d 确认 ERROR" within 5 tokens is " 确认 ERROR" (5 tokens); the
    cut keeps "认 ERROR" (2)."""
    text, encoding = "d 确认 ERROR", "o200k_base"
    fits = [
        _core.count_text(text[k:], encoding)
        for k in range(len(text) + 1)
        if _core.count_text(text[k:], encoding) <= 5
    ]
    piece = _core.cut_text(text, 5, encoding, True)
    assert max(fits) - _core.count_text(piece, encoding) <= 2


def test_the_reference_uses_the_library_constants() -> None:
    """The fixed texts the reference re-implements are the library's own."""
    assert ref.MARKER == _core.LEDGER_MARKER
    assert ref.SYNTHESIZED_RESULT_TEXT == _core.SYNTHESIZED_RESULT_TEXT
    assert ref.SUMMARY_MARKER == _core.SUMMARY_MARKER
    assert ref.MEDIA_PLACEHOLDER == _core.MEDIA_PLACEHOLDER


def test_the_reference_on_a_worked_example() -> None:
    """The oracle itself, on a session small enough to plan by hand: the oldest middle ring
    (a sent email) goes first and lands in the note, right after the pinned goal."""
    call = {"id": "c1", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sent " * 200},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    cfg = rb.AssemblyConfig(
        model_input_limit=150,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=0,
        recent_user_turns=1,
        side_effect_tools=["send_email"],
    )
    plan = ref.plan(messages, cfg)
    assert plan.items[:2] == [0, 1] and plan.items[3:] == [4, 5]
    assert plan.items[2][0] == "ledger"
    assert plan.items[2][1].endswith('- send_email [ok] call_id="c1" args={} turn=1')
    assert plan.dropped_rings == [(2, 4)]
    assert [s[:2] for s in plan.stages] == [("drop_rings", 1)]


def test_the_reference_on_a_worked_example_of_the_cheap_stages() -> None:
    """Two reads of a.py (the same arguments written two ways) and a huge log: just over
    budget, the older read becomes the stub and nothing else changes; further under, the log
    is cut to its head, the anchor and its tail, within max_tool_result_tokens."""

    def ring(call_id: str, name: str, arguments: str, result: str) -> list[dict[str, Any]]:
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ]

    log = "".join(f"line {i}: ok\n" for i in range(400))
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "goal"},
        *ring("r1", "read_file", '{"path": "a.py", "lines": 10}', "file contents " * 100),
        *ring("r2", "read_log", "{}", log),
        *ring("r3", "read_file", '{ "lines": 10,\n "path": "a.py" }', "file contents " * 100),
        {"role": "user", "content": "next"},
    ]
    full = rb.count_tokens(messages)
    kw = {"output_reserve_tokens": 0, "safety_margin_tokens": 0, "max_tool_result_tokens": 300}
    cfg = rb.AssemblyConfig(model_input_limit=full - 10, recent_tool_rings=1, **kw)
    plan = ref.plan(messages, cfg)
    assert plan.items == [
        0,
        1,
        2,
        ("rewrite", 3, "deduped", ref.dedupe_stub("read_file")),
        *range(4, 9),
    ]
    assert [s[:2] for s in plan.stages] == [("dedupe_superseded_reads", 1)]
    cfg = rb.AssemblyConfig(model_input_limit=full - 400, recent_tool_rings=1, **kw)
    plan = ref.plan(messages, cfg)
    kinds = [(i, kind) for i, kind, _ in plan.rewrites]
    assert kinds == [(3, "deduped"), (5, "truncated")]
    text = plan.items[5][3]
    assert text.startswith("line 0: ok\n") and text.endswith("line 399: ok\n")
    assert _core.content_id(log) in text
    cut = ref.rewritten(messages[5], "truncated", text)
    assert ref.message_tokens(cut, cfg.encoding) <= 300
    check_against_reference(messages, cfg)
