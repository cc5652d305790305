"""An adapter that says its ledger note costs, as rendered, what the core counted for it
(``notes_as_counted``) spares the request a recount when that note is the plan's only
insertion. Held to it here: on generated sessions, in each such provider's format, a plan
whose only insertion is the note is rendered and counted again as the provider receives it,
and the count is the plan's; then the rendered request, its note now in the system (or in
the history), is assembled again under a tighter budget, and the same holds."""

from __future__ import annotations

from typing import Any

import pytest
import strategies as gen
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound._core import Insertion
from ringbound.adapted import NativeRequest
from ringbound.errors import RingboundError
from ringbound.providers import PROVIDERS, adapter

EXACT = [p for p in PROVIDERS[1:] if adapter(p).notes_as_counted]
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
    rendered = request.render(plan.items)
    if rendered.merged:
        return None
    recount = request.count(rendered, None, asm._counting())
    return plan.report.tokens_after, recount, rendered


def test_the_claim_is_made_where_it_holds() -> None:
    assert set(EXACT) == {"anthropic", "bedrock_converse", "gemini", "openai_responses"}


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
    native, system = adapter(provider).from_canonical(chat)
    first = note_only_plan(provider, native, system, fraction)
    assume(first is not None)
    planned, recount, rendered = first
    assert recount == planned
    # The next turn: the request as sent, note included, trimmed again.
    second = note_only_plan(provider, list(rendered.messages), rendered.system, again)
    if second is not None:
        assert second[1] == second[0]
