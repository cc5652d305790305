"""The binding's one planning call, ``_core.plan``, and the ``Plan`` it returns: a frozen
record with typed items (indices, ``Insertion`` variants) and a typed ``PlanReport``, the same
for every provider; and the binding's independence from the façade's module layout."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from canonical_writers import from_canonical
from test_api import session

import ringbound as rb
from ringbound import _core
from ringbound._core import Insertion
from ringbound.adapted import NativeRequest
from ringbound.payload import dump_messages
from ringbound.providers import adapter

RUST = Path(__file__).resolve().parents[1] / "rust" / "src"


def core(budget: int, **values: object) -> _core.CoreConfig:
    cfg = rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **values
    )
    return rb.Assembler(cfg)._core


def test_the_binding_imports_nothing_from_the_facade() -> None:
    """Everything the binding calls of the package is handed to it (``_core._bind``)."""
    sources = [RUST / "py.rs", *sorted((RUST / "py").glob("*.rs"))]
    imports = [
        (f.name, m)
        for f in sources
        for m in re.findall(r'import\(\s*(?:py,\s*)?"(ringbound[^"]*)"', f.read_text("utf-8"))
    ]
    assert imports == []


def test_a_chat_plan_has_typed_insertions_and_a_typed_report() -> None:
    """A dropped side-effect ring gives a ledger note; a call without its result gets a
    synthesized one: both as ``Insertion`` variants, matched by type and by pattern."""
    messages = session(rings=12)
    del messages[next(i for i, m in enumerate(messages) if m.get("tool_call_id") == "call_11")]
    payload = dump_messages(messages)
    full = _core.count("openai_chat", payload, None, "o200k_base")
    cfg = core(
        full // 2, side_effect_tools=["send_email"], on_pairing_error="synthesize_error_results"
    )
    plan = _core.plan(payload, cfg, [])
    assert isinstance(plan.items, list)
    assert all(type(i) is int or isinstance(i, Insertion) for i in plan.items)
    notes = [i for i in plan.items if type(i) is Insertion.LedgerNote]
    assert len(notes) == 1 and "send_email" in notes[0].text and notes[0].role == "system"
    synthesized = [i.call_id for i in plan.items if type(i) is Insertion.Synthesized]
    assert synthesized == ["call_11"] == plan.report.repairs
    match notes[0]:
        case Insertion.LedgerNote(text=text, role=role):
            assert (text, role) == (notes[0].text, "system")
    report = plan.report
    assert report.tokens_after <= report.budget == full // 2
    assert report.canonical_dropped == sorted(report.dropped_rings + report.dropped_turns)
    assert report.canonical_dropped and report.ledger_entries == 1
    assert sum(report.bucket_tokens.values()) == report.tokens_after
    assert [e[0] for e in report.ledger_added] == ["send_email"]


def test_a_plan_and_its_report_are_frozen_and_compare_by_value() -> None:
    payload = dump_messages(session(rings=12))
    cfg = core(3_000)
    a, b = _core.plan(payload, cfg, []), _core.plan(payload, cfg, [])
    with pytest.raises(AttributeError):
        a.report.tokens_after = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.items = []  # type: ignore[misc]
    assert a.report == b.report and a.items == b.items
    assert a.report.with_budget(5_000).budget == 5_000 != a.report.budget
    assert a.with_budget(5_000).report == a.report.with_budget(5_000)
    assert Insertion.Summary(text="", role="user") == Insertion.Summary(text="", role="user")
    assert Insertion.Summary(text="", role="user") != Insertion.LedgerNote(text="", role="user")


def test_rendered_books_what_the_rendering_cost_to_the_insertions() -> None:
    payload = dump_messages(session(rings=12))
    report = _core.plan(payload, core(3_000), []).report
    out = report.rendered(3_000, report.tokens_after + 7, [(2, 4)], [], [(3, "truncated", 9)])
    assert out.tokens_after == report.tokens_after + 7
    assert out.bucket_tokens["insertions"] == report.bucket_tokens["insertions"] + 7
    assert (out.dropped_rings, out.rewrites) == ([(2, 4)], [(3, "truncated", 9)])
    # The canonical spans stay those the core planned.
    assert out.canonical_dropped == report.canonical_dropped
    lower = report.rendered(3_000, 0, [], [], [])
    assert lower.bucket_tokens["insertions"] == 0


@pytest.mark.parametrize(
    "provider", ["anthropic", "openai_responses", "gemini", "bedrock_converse"]
)
def test_every_provider_plans_through_the_same_call(provider: str) -> None:
    """A native request read once (``NativeView``) is planned by ``_core.plan`` like chat
    JSON: same record types, spans in canonical indices, the request counted the same."""
    chat = session(rings=10)
    native, system = from_canonical(provider, chat)
    asm = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=100_000, output_reserve_tokens=0), provider=provider
    )
    request = NativeRequest(
        adapter(provider), native, None, system, [], False, core=asm._core, cache=asm._cache
    )
    full = request.view.count()
    tight = core(full * 2 // 3, side_effect_tools=["send_email"])
    plan = _core.plan(request.view, tight, [])
    assert isinstance(plan, _core.Plan) and isinstance(plan.report, _core.PlanReport)
    assert plan.report.canonical_dropped
    assert all(type(i) is int or isinstance(i, Insertion) for i in plan.items)
    assert any(type(i) is Insertion.LedgerNote for i in plan.items)
    # The one count of native JSON agrees with the reading the assembler plans from.
    ad = adapter(provider)
    counted = _core.count(
        provider,
        orjson.dumps(native),
        None,
        "o200k_base",
        image_formula=ad.image_formula,
        token_ratio=ad.default_token_ratio,
        system=ad.system_texts(system),
    )
    assert counted == full
    with pytest.raises(rb.ConfigError, match="system"):
        _core.count("openai_chat", orjson.dumps(chat), None, "o200k_base", system=[["rules"]])
