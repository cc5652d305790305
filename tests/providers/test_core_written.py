"""The core writes the request a plan of the caller's objects sends (``NativeView.written``,
applied by ``list_ops.apply_ops``) for every plan the body path writes: kept items, results cut
or stubbed, images made text, blank text stripped, neighbours merged, the ledger note. The
adapters' general rendering is the oracle: the same items, system, merges and rewrites
reported, the same tokens as the request sent counts; the caller's list is never changed, and
its objects are in the request wherever it carries them unchanged."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any
from unittest import mock

import orjson
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.adapted import Counting, NativeRequest
from ringbound.errors import RingboundError
from ringbound.list_ops import apply_ops, shared
from ringbound.providers import PROVIDERS, adapter

NATIVE = PROVIDERS[1:]


def _json(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value))


def _planned(
    provider: str,
    native: list[Any],
    system: Any,
    fraction: float,
    notes: bool,
    cut: int | None,
    repair: bool = False,
) -> tuple[NativeRequest, Any, int] | None:
    wide = rb.Assembler(rb.AssemblyConfig(model_input_limit=10**7), provider=provider)
    try:
        request = NativeRequest(
            adapter(provider), native, None, system, [], repair, core=wide._core, cache=None
        )
        budget = max(50, int(request.view.count() * fraction))
        cfg = rb.AssemblyConfig(
            model_input_limit=budget,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            side_effect_tools=list(gen.TOOLS) if notes else [],
            **({"max_tool_result_tokens": cut} if cut is not None else {}),
            **({"on_pairing_error": "synthesize_error_results"} if repair else {}),
        )
        plan = request.plan(rb.Assembler(cfg, provider=provider)._core, None, budget)
    except RingboundError:
        return None
    return request, plan, budget


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gen.sessions(max_units=10, cheap=True),
    st.floats(0.2, 1.2),
    st.booleans(),
    st.sampled_from([None, *gen.MAX_TOOL_RESULT_TOKENS]),
)
def test_the_core_writes_what_the_adapter_renders(
    provider: str, chat: list[dict[str, Any]], fraction: float, notes: bool, cut: int | None
) -> None:
    native, system = from_canonical(provider, chat)
    before = copy.deepcopy((native, system))
    planned = _planned(provider, native, system, fraction, notes, cut)
    if planned is None:
        return
    request, plan, _ = planned
    written = request.written(plan.items, plan.report.tools_dropped)
    assert (native, system) == before
    if written is None:
        event("the adapter renders it")
        return
    out, tokens = written
    event(f"written by the core, merged={out.merged > 0}, rewrites={bool(plan.report.rewrites)}")
    general_view = dataclasses.replace(request.canonical, facts=None, view=None)
    general = adapter(provider).render(native, plan.items, general_view, system=system)
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert _json(out.system) == _json(general.system)
    assert (out.merged, out.rewrites) == (general.merged, general.rewrites)
    # What it costs is what the request sent counts.
    counting = Counting("o200k_base", None, adapter(provider).image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent
    # Kept items are the caller's own objects.
    ids = {id(m) for m in native}
    assert (
        sum(id(m) in ids for m in out.messages)
        >= len(out.messages) - out.merged - len(plan.report.rewrites) - len(out.rewrites) - 1
    )


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), gen.sessions(max_units=10, cheap=True), st.floats(0.2, 1.2), st.booleans())
def test_synthesized_results_are_written_as_the_adapter_renders_them(
    provider: str, data: st.DataObject, chat: list[dict[str, Any]], fraction: float, notes: bool
) -> None:
    """A session whose calls lost results, repaired: the core places the synthesized
    results where the provider puts them (Anthropic: the next turn, after its own results;
    Bedrock: the results turn behind them; Gemini: the next kept content when it is a
    user's; else a turn of their own; Responses: an output item where the plan puts it),
    writes what the adapter renders and counts the request as sent."""
    chat = data.draw(gen.drop_some_results(chat))
    native, system = from_canonical(provider, chat)
    before = copy.deepcopy((native, system))
    planned = _planned(provider, native, system, fraction, notes, None, repair=True)
    if planned is None:
        return
    request, plan, _ = planned
    try:
        general_view = dataclasses.replace(request.canonical, facts=None, view=None)
        general = adapter(provider).render(native, plan.items, general_view, system=system)
    except RingboundError:
        return
    synthesized = [i for i in plan.items if type(i) is _core.Insertion.Synthesized]
    written = request.written(plan.items, plan.report.tools_dropped)
    assert (native, system) == before
    if written is None:
        event(f"the adapter renders it, synthesized={bool(synthesized)}")
        return
    out, tokens = written
    event(f"written by the core, synthesized={bool(synthesized)}")
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert _json(out.system) == _json(general.system)
    assert out.merged == general.merged
    counting = Counting("o200k_base", None, adapter(provider).image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent
    assert rb.validate(list(out.messages), provider=provider, system=out.system) == []


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.sessions(max_units=12, cheap=True), st.floats(0.3, 0.9), st.floats(0.3, 0.9))
def test_a_note_replaces_the_one_an_earlier_assembly_left(
    provider: str, chat: list[dict[str, Any]], first: float, second: float
) -> None:
    """The next turn of a session whose system holds the ledger note an earlier assembly
    left, trimmed again: the core writes the new note in the old one's place (the caller's
    part of the system kept), as the adapter renders it, and what it costs is what the
    request sent counts."""
    native, system = from_canonical(provider, chat)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=max(50, int(full * first)),
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=list(gen.TOOLS),
    )
    try:
        res = rb.Assembler(cfg, provider=provider).assemble(native, system=system)
    except RingboundError:
        return
    if not res.report.ledger_entries:
        return
    planned = _planned(provider, list(res.messages), res.system, second, True, None)
    if planned is None:
        return
    request, plan, _ = planned
    written = request.written(plan.items, plan.report.tools_dropped)
    new_note = any(type(i) is _core.Insertion.LedgerNote for i in plan.items)
    event(f"note={new_note}, written by the core={written is not None}")
    if written is None:
        return
    out, tokens = written
    general_view = dataclasses.replace(request.canonical, facts=None, view=None)
    general = adapter(provider).render(
        request.messages, plan.items, general_view, system=request.system
    )
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert _json(out.system) == _json(general.system)
    counting = Counting("o200k_base", None, adapter(provider).image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent


def test_a_merge_holds_the_callers_block_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Written by the core (the adapter's rendering is not reached), the merged message holds
    the caller's block objects."""

    def not_reached(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the adapter rendered a plan the core writes")

    monkeypatch.setattr(type(adapter("anthropic")), "render", not_reached)
    first = {"type": "text", "text": "goal"}
    later = {"type": "text", "text": "and then this"}
    messages = [
        {"role": "user", "content": [first]},
        {"role": "assistant", "content": "x " * 400},
        {"role": "user", "content": [later]},
        {"role": "assistant", "content": "done"},
    ]
    before = copy.deepcopy(messages)
    res = rb.Assembler(
        rb.AssemblyConfig(
            model_input_limit=200,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            recent_user_turns=1,
        ),
        provider="anthropic",
    ).assemble(messages)
    assert messages == before
    assert res.report.merged == 1
    merged = res.messages[0]
    assert merged["content"][0] is first and merged["content"][1] is later
    assert res.messages[1] is messages[3]


def test_shared_keeps_only_plain_values_and_matches_in_order() -> None:
    a, b = {"t": 1}, {"t": 2}
    out = shared({"role": "user", "content": [{"t": 1}, {"t": 9}, {"t": 2}]}, [{"content": [a, b]}])
    assert out["content"][0] is a and out["content"][2] is b and out["content"][1] == {"t": 9}

    class Sdk:  # never read through its methods
        def __eq__(self, other: object) -> bool:
            raise AssertionError("read")

        __hash__ = object.__hash__

    sdk = Sdk()
    assert shared([{"t": 1}], [[sdk]]) == [{"t": 1}]


def test_apply_ops_keeps_and_builds() -> None:
    messages = [{"a": 1}, {"b": [1, 2]}]
    out = apply_ops(messages, [0, ((1,), b'{"b":[1,2],"c":3}'), ((), b'{"note":1}')])
    assert out[0] is messages[0]
    # The core's own list: the kept objects in place, the new items mapped where listed.
    ops = [messages[0], ((1,), b'{"b":[1,2],"c":3}')]
    assert apply_ops(messages, ops, [1]) == [messages[0], {"b": [1, 2], "c": 3}]
    assert ops[0] is messages[0]
    # A list is new (the caller's stays its own), its equal elements the caller's.
    assert out[1] == {"b": [1, 2], "c": 3} and out[1]["b"] is not messages[1]["b"]
    assert out[2] == {"note": 1}


def test_a_list_shortened_since_it_was_read_is_a_typed_error() -> None:
    with pytest.raises(rb.InvalidMessageError, match="changed while it was read"):
        apply_ops([{"a": 1}], [0, 1])


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.sessions(max_units=14), st.floats(0.3, 0.8), st.booleans())
def test_a_summary_is_written_by_the_core_as_the_adapter_renders_it(
    provider: str, chat: list[dict[str, Any]], fraction: float, notes: bool
) -> None:
    """A plan with a summary note (and maybe the ledger note) is written by the core: the
    note where the provider places it (in the system after the ledger note, or an input item
    for Responses), the request counted as sent; the adapters' general rendering is the
    oracle."""
    native, system = from_canonical(provider, chat)
    seen: list[bool] = []
    core_written = NativeRequest.written

    def checked(self: NativeRequest, items: Any, tools_dropped: bool) -> Any:
        got = core_written(self, items, tools_dropped)
        summary = any(type(i) is _core.Insertion.Summary for i in items)
        synthesized = any(type(i) is _core.Insertion.Synthesized for i in items)
        if summary and not synthesized:
            seen.append(got is not None)
        if got is not None and summary:
            general_view = dataclasses.replace(self.canonical, facts=None, view=None)
            general = self.adapter.render(self.messages, items, general_view, system=self.system)
            assert _json(list(got[0].messages)) == _json(list(general.messages))
            assert _json(got[0].system) == _json(general.system)
        return got

    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=max(300, int(full * fraction)),
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=list(gen.TOOLS) if notes else [],
        summary_max_tokens=200,
    )
    asm = rb.Assembler(cfg, provider=provider, summarizer=rb.summarizers.extractive())
    with mock.patch.object(NativeRequest, "written", checked):
        try:
            res = asm.assemble(native, system=system)
        except RingboundError:
            return
    if not res.report.summarized:
        return
    event(f"written by the core: {seen}")
    assert rb.count_tokens(res.messages, provider=provider, system=res.system) == (
        res.report.tokens_after
    )
    assert res.report.tokens_after <= res.report.budget


@pytest.mark.parametrize("provider", NATIVE)
def test_a_summary_plan_never_reaches_the_adapter(provider: str) -> None:
    """The summary assembly's own session, summarized: the core writes the request (the
    adapter's `render` patched to fail), counted exactly and read back with one summary."""
    from test_summary_assembly import config, session

    native, system = from_canonical(provider, session())

    def not_reached(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the adapter rendered a summary plan the core writes")

    asm = rb.Assembler(config(), provider=provider, summarizer=rb.summarizers.extractive())
    with mock.patch.object(type(adapter(provider)), "render", not_reached):
        res = asm.assemble(native, system=system)
    assert res.report.summarized
    assert rb.count_tokens(res.messages, provider=provider, system=res.system) == (
        res.report.tokens_after
    )
    assert rb.validate(res.messages, provider=provider, system=res.system) == []
