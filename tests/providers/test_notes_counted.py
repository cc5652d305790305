"""The ledger note costs, as written, what the core counted for it, so a plan whose only
insertion is that note is sent at the plan's count. Held to it here: on generated sessions,
in each provider's format, a plan whose only insertion is the note is rendered (by the
adapters' Python rendering, which the tests keep: ``oracle_render``) and counted again as the
provider receives it, and the count is the plan's; then the rendered request, its note now in
the system (or in the history), is assembled again under a tighter budget, and the same
holds. Likewise for results synthesized for unanswered calls, wherever the adapter placed
them, when nothing is merged."""

from __future__ import annotations

import dataclasses
from typing import Any

import oracle_render
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_api import session

import ringbound as rb
from ringbound._core import Insertion
from ringbound.adapted import NativeRequest
from ringbound.errors import RingboundError
from ringbound.providers import PROVIDERS, adapter

#: The providers the core writes: each one's note and synthesized results, as its adapter's
#: rendering (the oracle) writes them, cost what the core counted.
EXACT = PROVIDERS[1:]
RESULTS_EXACT = PROVIDERS[1:]
STAGES = ("drop_rings", "drop_plain_turns")


def config(budget: int) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=list(gen.TOOLS),
        stages=STAGES,
    )


def note_only_plan(provider: str, messages: list[Any], system: Any, fraction: float) -> Any:
    """The request read, planned at ``fraction`` of its tokens and rendered, when the plan's
    only insertion is the ledger note and nothing was merged; else None."""
    wide = rb.Assembler(config(10**7), provider=provider)
    try:
        request = NativeRequest(
            adapter(provider), messages, None, system, [], False, core=wide._core, cache=None
        )
        budget = max(50, int(request.view.count() * fraction))
        asm = rb.Assembler(config(budget), provider=provider)
        plan = request.plan(asm._core, None, budget)
    except RingboundError:
        return None
    if not any(type(i) is Insertion.LedgerNote for i in plan.items):
        return None
    if any(type(i) is not int and type(i) is not Insertion.LedgerNote for i in plan.items):
        return None
    rendered = oracle_render.rendered(request, plan.items)
    if rendered.merged:
        return None
    recount = request.count(rendered, None, asm._counting())
    return plan.report.tokens_after, recount, rendered


def test_the_claim_is_made_where_it_holds() -> None:
    assert set(EXACT) == {"anthropic", "bedrock_converse", "gemini", "openai_responses"}
    assert set(RESULTS_EXACT) == set(EXACT)


@pytest.mark.parametrize("provider", EXACT)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(gen.sessions(images=False, max_units=10), st.floats(0.3, 0.8), st.floats(0.6, 0.95))
def test_a_note_only_plan_costs_what_the_core_counted(
    provider: str, chat: list[dict[str, Any]], fraction: float, again: float
) -> None:
    native, system = from_canonical(provider, chat)
    first = note_only_plan(provider, native, system, fraction)
    assume(first is not None)
    planned, recount, rendered = first
    assert recount == planned
    # The next turn: the request as sent, note included, trimmed again.
    second = note_only_plan(provider, list(rendered.messages), rendered.system, again)
    if second is not None:
        assert second[1] == second[0]


@st.composite
def unanswered(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A session with some results taken away: rings of drawn sizes, or a generated session
    (parallel calls, reused ids, cheap rewrites)."""
    if draw(st.booleans()):
        chat = session(rings=draw(st.integers(2, 12)), result="log " * draw(st.integers(3, 120)))
    else:
        chat = draw(gen.sessions(images=False, max_units=10, cheap=True))
    results = sum(1 for m in chat if m["role"] == "tool")
    drop = iter(draw(st.lists(st.booleans(), min_size=results, max_size=results)))
    return [m for m in chat if m["role"] != "tool" or not next(drop)]


@pytest.mark.parametrize("provider", RESULTS_EXACT)
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(unanswered(), st.sampled_from([1.0, 0.8, 0.6, 0.4]), st.booleans())
def test_synthesized_results_cost_what_the_core_counted(
    provider: str, chat: list[dict[str, Any]], fraction: float, notes: bool
) -> None:
    """Results taken away, the rest planned with the repair policy and results cut small: a
    plan that keeps, rewrites and synthesizes (and may bring the note) costs, as rendered,
    what it counted wherever nothing was merged (a merge is counted as sent, or again)."""
    native, system = from_canonical(provider, chat)
    cfg = rb.AssemblyConfig(
        model_input_limit=10**7,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=["send_email", *gen.TOOLS] if notes else [],
        on_pairing_error="synthesize_error_results",
        max_tool_result_tokens=60,
        min_result_tokens=20,
    )
    try:
        request = NativeRequest(
            adapter(provider),
            native,
            None,
            system,
            [],
            True,
            core=rb.Assembler(cfg, provider=provider)._core,
            cache=None,
        )
        budget = max(50, int(request.view.count() * fraction))
        asm = rb.Assembler(dataclasses.replace(cfg, model_input_limit=budget), provider=provider)
        plan = request.plan(asm._core, None, budget)
    except RingboundError:
        assume(False)
        return
    synthesized = [i for i in plan.items if type(i) is Insertion.Synthesized]
    assume(synthesized)
    rendered = oracle_render.rendered(request, plan.items)
    event("merged" if rendered.merged else f"{len(synthesized)} synthesized")
    if not rendered.merged:
        assert request.count(rendered, None, asm._counting()) == plan.report.tokens_after
    # Whichever way the assembly counts it, it reports what goes out.
    res = asm.assemble(native, system=system)
    sent = rb.count_tokens(list(res.messages), provider=provider, system=res.system)
    assert res.report.tokens_after == sent <= budget
