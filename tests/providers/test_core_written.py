"""The core writes the request a plan of the caller's objects sends (``NativeView.written``,
applied by ``list_ops.apply_ops``) for every plan the body path writes: kept items, results cut
or stubbed, images made text, blank text stripped, neighbours merged, the ledger note. The
adapters' general rendering, kept in the tests (``render`` of each ``*_oracle.py``, through
``oracle_render``), is the oracle: the same items, system, merges and rewrites reported, the
same tokens as the request sent counts; the caller's list is never changed, and its objects
are in the request wherever it carries them unchanged."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any
from unittest import mock

import oracle_render
import orjson
import pytest
import strategies as gen
from anthropic_oracle import OMITTED_TURNS_TEXT
from canonical_writers import from_canonical
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.adapted import Counting, NativeRequest
from ringbound.errors import RingboundError
from ringbound.list_ops import apply_ops, shared
from ringbound.payload import native_default
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
    general_view = dataclasses.replace(request.canonical, view=None)
    general = oracle_render.render(provider, native, plan.items, general_view, system=system)
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
        general_view = dataclasses.replace(request.canonical, view=None)
        general = oracle_render.render(provider, native, plan.items, general_view, system=system)
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


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(1, 80),
    st.integers(1, 80),
    st.sampled_from(["string", "blocks", "two messages"]),
    st.floats(0.2, 0.9),
)
def test_results_for_a_turn_whose_next_was_dropped_join_the_user_turn_after(
    between: int, later: int, shape: str, fraction: float
) -> None:
    """An Anthropic call whose result was lost, the turns after it dropped up to a kept user
    turn: the synthesized result opens that turn (the adapter's merge of the results turn
    with it); where only the user turn between was dropped, the results turn parts the
    assistant turns it left neighbours. Written by the core, counted as sent and paired."""
    call = {"type": "tool_use", "id": "toolu_x", "name": "read_file", "input": {"p": "a"}}
    text = {"type": "text", "text": "next " * later}
    after: list[dict[str, Any]] = {
        "string": [{"role": "user", "content": text["text"]}],
        "blocks": [{"role": "user", "content": [text]}],
        "two messages": [{"role": "user", "content": [text]}, {"role": "user", "content": "and"}],
    }[shape]
    native = [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading."}, call]},
        {"role": "user", "content": "go on " * between},
        {"role": "assistant", "content": "reply " * between},
        *after,
    ]
    written = _anthropic_written(
        native, [1], fraction, on_pairing_error="synthesize_error_results", recent_user_turns=1
    )
    if written is None:
        return
    # Joined to the user turn after it, or parting the assistant turns the drop made
    # neighbours (no merge then).
    event(f"joined={written[2][0].merged > 0}")
    _as_the_adapter_renders(*written)


def _with_block_after(system: Any) -> Any:
    """A system of blocks or parts with one more text of the caller's after the rest."""
    more = {"text": "Answer in French from now on."}
    if isinstance(system, list):
        return [*system, {"type": "text", **more} if "type" in system[0] else more]
    if isinstance(system, dict) and isinstance(system.get("parts"), list):
        return {**system, "parts": [*system["parts"], more]}
    return system


@pytest.mark.parametrize("provider", NATIVE)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gen.sessions(max_units=12, cheap=True),
    st.floats(0.3, 0.9),
    st.floats(0.3, 0.9),
    st.booleans(),
)
def test_a_note_replaces_the_one_an_earlier_assembly_left(
    provider: str, chat: list[dict[str, Any]], first: float, second: float, added: bool
) -> None:
    """The next turn of a session whose system holds the ledger note an earlier assembly
    left (and, where drawn, a block the caller added after it since), trimmed again: the
    core writes the new note in the old one's place (the caller's part of the system kept),
    as the adapter renders it, and what it costs is what the request sent counts."""
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
    system = _with_block_after(res.system) if added else res.system
    planned = _planned(provider, list(res.messages), system, second, True, None)
    if planned is None:
        return
    request, plan, _ = planned
    written = request.written(plan.items, plan.report.tools_dropped)
    new_note = any(type(i) is _core.Insertion.LedgerNote for i in plan.items)
    event(f"note={new_note}, a block after it={system is not res.system}")
    assert written is not None
    out, tokens = written
    general_view = dataclasses.replace(request.canonical, view=None)
    general = oracle_render.render(
        provider, request.messages, plan.items, general_view, system=request.system
    )
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert _json(out.system) == _json(general.system)
    counting = Counting("o200k_base", None, adapter(provider).image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent


def _anthropic_written(
    native: list[Any], pins: list[int], fraction: float, **config: Any
) -> tuple[NativeRequest, Any, Any] | None:
    """An Anthropic request of `native` (no system) with `pins`, planned to `fraction` of
    its size with the most recent ring protected (and `config`), and what the core writes of
    the plan (never nothing, `native` unchanged); None where the protected part does not
    fit."""
    before = copy.deepcopy(native)
    repair = config.get("on_pairing_error") == "synthesize_error_results"
    wide = rb.Assembler(rb.AssemblyConfig(model_input_limit=10**7), provider="anthropic")
    request = NativeRequest(
        adapter("anthropic"), native, None, None, pins, repair, core=wide._core, cache=None
    )
    budget = max(50, int(request.view.count() * fraction))
    cfg = rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=config.pop("recent_tool_rings", 0 if repair else 1),
        **config,
    )
    try:
        plan = request.plan(rb.Assembler(cfg, provider="anthropic")._core, None, budget)
    except RingboundError:
        return None
    written = request.written(plan.items, plan.report.tools_dropped)
    assert native == before
    assert written is not None
    return request, plan, written


def _as_the_adapter_renders(request: NativeRequest, plan: Any, written: Any) -> None:
    """The core's writing of `plan` is the adapter's rendering of it (items, system,
    merges), costs what the request sent counts, and pairs."""
    out, tokens = written
    provider = request.adapter.key
    general_view = dataclasses.replace(request.canonical, view=None)
    general = oracle_render.render(
        provider, request.messages, plan.items, general_view, system=request.system
    )
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert (_json(out.system), out.merged) == (_json(general.system), general.merged)
    counting = Counting("o200k_base", None, request.adapter.image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent
    assert rb.validate(list(out.messages), provider=provider, system=out.system) == []


@st.composite
def _thinking_sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Anthropic sessions of plain exchanges (the first one's assistant turn pinned) and tool
    rings, the rings' assistant turns opening with thinking where drawn: drops bring
    assistant turns together."""
    thinking = {"type": "thinking", "thinking": "Weighing the next step.", "signature": "c2ln"}
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read the files, then report."}]
    for k in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 60))
        if k == 0 or draw(st.booleans()):
            out += [
                {"role": "assistant", "content": [{"type": "text", "text": "Noted. " * size}]},
                {"role": "user", "content": "go on " * size},
            ]
            continue
        cid = f"toolu_{k:02d}"
        call = {"type": "tool_use", "id": cid, "name": "read_file", "input": {"path": "a"}}
        first = [thinking] if draw(st.booleans()) else []
        out += [
            {"role": "assistant", "content": [*first, call]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": cid, "content": "data " * size}],
            },
        ]
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_thinking_sessions(), st.floats(0.25, 0.6), st.sets(st.integers(1, 12), max_size=2))
def test_a_thinking_turn_behind_another_is_parted_as_the_adapter_parts_it(
    native: list[dict[str, Any]], fraction: float, pinned: set[int]
) -> None:
    """Where a drop brings an assistant turn next to a later one that opens with thinking
    (the earlier one pinned, what stood between dropped), the core places the adapter's user
    turn between them (merging would put other blocks before the thinking): the same request
    as the adapter renders, counted as sent."""
    # The first assistant turn pinned: what follows it drops first.
    pins = sorted(i for i in {1, *pinned} if i < len(native))
    written = _anthropic_written(native, pins, fraction, recent_user_turns=0)
    if written is None:
        return
    event(f"parted={OMITTED_TURNS_TEXT in [m['content'] for m in written[2][0].messages]}")
    _as_the_adapter_renders(*written)


def _marked(native: list[Any], marks: list[bool]) -> list[Any]:
    """Anthropic messages whose first block carries a ``cache_control`` where `marks` says so
    (a string content made one text block)."""
    out = []
    for k, message in enumerate(native):
        if k < len(marks) and marks[k]:
            content = message["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            first = {**blocks[0], "cache_control": {"type": "ephemeral"}}
            message = {**message, "content": [first, *blocks[1:]]}
        out.append(message)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gen.sessions(max_units=10, cheap=True),
    st.lists(st.booleans(), min_size=24, max_size=24),
    st.floats(0.2, 1.2),
    st.booleans(),
    st.integers(0, 2),
)
def test_more_cache_markers_than_anthropic_allows_are_refused_as_the_adapter_refuses(
    chat: list[dict[str, Any]], marks: list[bool], fraction: float, notes: bool, in_system: int
) -> None:
    """Anthropic refuses a request with more than 4 ``cache_control`` blocks, the system's
    included: the core refuses the request it writes in the adapter's words, naming the same
    message, and writes the same request where it stays within the limit."""
    native, system = from_canonical("anthropic", chat)
    native = _marked(native, marks)
    system = [
        {"type": "text", "text": f"rule {k}", "cache_control": {"type": "ephemeral"}}
        for k in range(in_system)
    ] or system
    planned = _planned("anthropic", native, system, fraction, notes, None)
    if planned is None:
        return
    request, plan, _ = planned
    general_view = dataclasses.replace(request.canonical, view=None)
    try:
        general = oracle_render.render("anthropic", native, plan.items, general_view, system=system)
    except rb.InvalidMessageError as refused:
        with pytest.raises(rb.InvalidMessageError) as core:
            request.written(plan.items, plan.report.tools_dropped)
        event("refused")
        assert (str(core.value), core.value.index) == (str(refused), refused.index)
        return
    written = request.written(plan.items, plan.report.tools_dropped)
    assert written is not None
    event("written")
    out, _ = written
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert _json(out.system) == _json(general.system)


def _sdk_system(provider: str, system: Any) -> Any:
    """The system as the provider's SDK objects: Anthropic text blocks, a Gemini content."""
    if provider == "anthropic":
        from anthropic.types import TextBlock

        texts = [system] if isinstance(system, str) else [b["text"] for b in system or []]
        return [TextBlock(type="text", text=t) for t in texts] or None
    from google.genai import types

    return types.Content.model_validate(system) if system is not None else None


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.sessions(max_units=10, cheap=True), st.floats(0.2, 1.0))
def test_a_note_in_a_system_of_sdk_objects_is_written_by_the_core(
    provider: str, chat: list[dict[str, Any]], fraction: float
) -> None:
    """A system of the provider's SDK objects gets the ledger note from the core as one of
    plain JSON does: the request the adapter renders, the caller's objects kept (a Gemini
    content rebuilt as its own type), what it costs counted as sent."""
    native, system = from_canonical(provider, chat)
    system = _sdk_system(provider, system)
    planned = _planned(provider, native, system, fraction, True, None)
    if planned is None:
        return
    request, plan, _ = planned
    written = request.written(plan.items, plan.report.tools_dropped)
    assert written is not None
    out, tokens = written
    noted = any(type(i) is _core.Insertion.LedgerNote for i in plan.items)
    event(f"a note={noted}")
    general_view = dataclasses.replace(request.canonical, view=None)
    general = oracle_render.render(provider, native, plan.items, general_view, system=system)
    assert _json(list(out.messages)) == _json(list(general.messages))
    assert type(out.system) is type(general.system)
    if isinstance(system, list):
        assert [type(b) for b in out.system] == [type(b) for b in general.system]
        assert all(a is b for a, b in zip(out.system, system, strict=False))
    elif system is not None and out.system is not system:
        # A Gemini content: its own parts kept as the caller's objects, the note a part.
        assert all(a is b for a, b in zip(out.system.parts, system.parts, strict=False))
        assert [type(p) for p in out.system.parts] == [type(p) for p in general.system.parts]
    assert orjson.dumps(out.system, default=native_default) == orjson.dumps(
        general.system, default=native_default
    )
    counting = Counting("o200k_base", None, adapter(provider).image_formula, 1.0, None)
    tools = None if plan.report.tools_dropped else request.tools_payload
    sent = request.count(out, tools, counting)
    assert (plan.report.tokens_after if tokens is None else tokens) == sent


def test_a_merge_holds_the_callers_block_objects() -> None:
    """Written by the core (the adapter has no rendering to reach: were the assembly to ask
    it for one, it would fail), the merged message holds the caller's block objects."""
    assert not hasattr(adapter("anthropic"), "render")
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
            general_view = dataclasses.replace(self.canonical, view=None)
            general = oracle_render.render(
                self.adapter.key, self.messages, items, general_view, system=self.system
            )
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
    adapter has no `render` to fall back on: reaching for it would fail the assembly), counted
    exactly and read back with one summary."""
    from test_summary_assembly import config, session

    native, system = from_canonical(provider, session())
    assert not hasattr(adapter(provider), "render")
    asm = rb.Assembler(config(), provider=provider, summarizer=rb.summarizers.extractive())
    res = asm.assemble(native, system=system)
    assert res.report.summarized
    assert rb.count_tokens(res.messages, provider=provider, system=res.system) == (
        res.report.tokens_after
    )
    assert rb.validate(res.messages, provider=provider, system=res.system) == []
