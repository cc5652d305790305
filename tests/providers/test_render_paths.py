"""A plan that keeps items as they are is written without a Python step per item: from a body,
the kept items go back as a view of its bytes; and the adapters' Python rendering (kept in the
tests as the core's oracle, ``oracle_render``) places the results it synthesizes from the calls
alone. (The core's writing against that general rendering: ``test_core_written.py``.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import gemini_oracle
import oracle_render
import orjson
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_api import session

import ringbound as rb
from ringbound import _core
from ringbound.adapted import NativeRequest
from ringbound.errors import RingboundError
from ringbound.providers import PROVIDERS, adapter
from ringbound.raw_items import KeptItems, RawItems, items_json

NATIVE = PROVIDERS[1:]


@pytest.mark.parametrize("provider", NATIVE)
def test_a_body_history_kept_as_it_is_stays_bytes(provider: str) -> None:
    """From a body, the kept items go back as a view of the body's bytes (``KeptItems``),
    written as the slices of the body they were, and no item object is made for them."""
    native, system = from_canonical(provider, session(rings=30))
    array = orjson.dumps(native)
    split = _core.split_body(orjson.dumps({"h": native}), "h", 1 << 30)
    assert split is not None
    items = RawItems(split[1], split[2])
    wide = rb.Assembler(rb.AssemblyConfig(model_input_limit=10**6), provider=provider)
    request = NativeRequest(
        adapter(provider), items, None, system, [], False, core=wide._core, cache=None
    )
    full = request.view.count()
    for budget in (full, full * 2 // 3):
        cfg = rb.AssemblyConfig(
            model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0
        )
        plan = request.plan(rb.Assembler(cfg, provider=provider)._core, None, budget)
        written = request.written(plan.items, plan.report.tools_dropped)
        assert written is not None
        out = written[0]
        assert type(out.messages) is KeptItems
        written = items_json(out.messages)
        assert written is not None
        kept = orjson.loads(written)
        assert len(kept) == len(out.messages)
        # The kept items are the input's in order (equal items may recur: match in order).
        rest = iter(native)
        assert all(any(m == n for n in rest) for m in kept)
        if budget == full:
            assert written == array
    assert items._made == [None] * len(items)


class _WithoutCalls(Sequence[dict[str, Any]]):
    """Canonical messages with no tool calls: no call is found where the plan places its
    synthesized result, so an adapter reads every message to place it."""

    def __init__(self, messages: Sequence[dict[str, Any]]) -> None:
        self._messages = messages

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, k: Any) -> Any:
        return {key: v for key, v in self._messages[k].items() if key != "tool_calls"}


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gen.sessions(images=False, max_units=10), st.lists(st.booleans(), max_size=30))
def test_synthesized_results_are_placed_from_the_calls_alone(
    provider: str, chat: list[dict[str, Any]], drop: list[bool]
) -> None:
    """Placing the results a plan synthesizes reads only the call messages the plan places
    them after (``call_message``; Gemini also the contents after them); reading every
    message (Gemini: ``to_canonical``; Anthropic: every assistant message, which it does when
    no call is found there) places them the same way."""
    results = iter(drop)
    chat = [m for m in chat if m["role"] != "tool" or not next(results, False)]
    native, system = from_canonical(provider, chat)
    cfg = rb.AssemblyConfig(model_input_limit=10**7, on_pairing_error="synthesize_error_results")
    asm = rb.Assembler(cfg, provider=provider)
    try:
        request = NativeRequest(
            adapter(provider), native, None, system, [], True, core=asm._core, cache=None
        )
        plan = request.plan(asm._core, None, 10**7)
    except RingboundError:
        return
    if not any(type(i) is _core.Insertion.Synthesized for i in plan.items):
        return
    event(f"{sum(type(i) is _core.Insertion.Synthesized for i in plan.items)} synthesized")
    if provider == "gemini":
        read = gemini_oracle.to_canonical(native, system=system)
    else:
        messages = _WithoutCalls(request.canonical.messages)
        read = dataclasses.replace(request.canonical, messages=messages)
    lazily = oracle_render.rendered(request, plan.items)
    fully = oracle_render.render(provider, native, plan.items, read, system=system)
    assert orjson.dumps(lazily.messages) == orjson.dumps(fully.messages)
    assert lazily.merged == fully.merged
