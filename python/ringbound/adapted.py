"""Assembling a provider's native request through its adapter: validate by the provider's own
rules, plan the canonical view in the core, render the plan back into native items."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from . import _core
from .errors import BudgetExceededError, InvalidMessageError, PairingError
from .payload import dump_tools
from .providers.base import Adapter, Canonical, Rendered

__all__ = ["Counting", "NativePlan", "native_spans", "plan_native"]


@dataclass(frozen=True)
class NativePlan:
    rendered: Rendered
    raw: dict[str, Any]
    canonical: Canonical
    #: The serialized canonical messages the core planned from.
    payload: bytes


def _canonical_pins(pinned: Sequence[int], canonical: Canonical) -> list[int]:
    wanted = set(pinned)
    return [
        k
        for k, (start, end) in enumerate(canonical.spans)
        if any(i in wanted for i in range(start, end))
    ]


def native_spans(spans: Sequence[tuple[int, int]], canonical: Canonical) -> list[tuple[int, int]]:
    """Canonical index spans of dropped units as spans of the caller's native items."""
    out = []
    for start, end in spans:
        natives = [i for k in range(start, end) for i in range(*canonical.spans[k]) if i >= 0]
        if natives:
            out.append((min(natives), max(natives) + 1))
    return out


@dataclass(frozen=True)
class Counting:
    """How the assembler counts, to recount a rendered request the same way."""

    encoding: str
    tokenizer_backend: str | None
    image_formula: str
    token_ratio: float
    cache: Any

    def count(self, canonical: Canonical, tools_payload: bytes | None) -> int:
        return _core.count_openai_chat(
            orjson.dumps(canonical.messages),
            tools_payload,
            self.encoding,
            self.tokenizer_backend,
            2**63,
            2**63,
            self.cache,
            self.image_formula,
            self.token_ratio,
        )


def _as_planned(items: Sequence[Any], rendered: Rendered, system: Any) -> bool:
    """Whether the rendering is exactly what the core counted: only kept items (no insertion,
    no merge) and the caller's own system. Then there is nothing to recount."""
    return (
        rendered.merged == 0
        and rendered.system is system
        and all(isinstance(item, int) for item in items)
    )


#: Times a plan is tightened when its rendering costs more than the plan counted.
_MAX_TIGHTENINGS = 3


def plan_native(
    adapter: Adapter,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    system: Any,
    core_for: Callable[[int], Any],
    budget: int,
    counting: Counting,
    pinned: Sequence[int],
    repair: bool,
) -> NativePlan:
    """Plans a native request; PairingError quotes the provider's wording.

    The core counts the canonical view, but a provider's rendering of the plan can cost a
    little more than its canonical insertions (a synthesized result added to an existing turn,
    merged neighbours, the ledger note moved into the system). The rendered request is
    therefore counted again as the provider will receive it; if it is over budget, the plan
    is made again with the budget tightened by the difference.
    """
    issues = adapter.validate(messages, system=system)
    if issues and not (repair and all(i.kind == "missing_result" for i in issues)):
        raise PairingError(
            f"tool call pairing is broken ({len(issues)} issue{'s' if len(issues) != 1 else ''})"
            + "".join(f"\n  messages[{i.index}]: {i.message}" for i in issues),
            issues=issues,
        )
    canonical = adapter.to_canonical(messages, system=system)
    payload = orjson.dumps(canonical.messages)
    tools_payload = dump_tools(adapter.tools_to_openai(tools)) if tools else None
    pins = _canonical_pins(pinned, canonical)
    groups = canonical.groups()
    binds = canonical.binds_next or [False] * len(canonical.messages)
    plan_budget = budget
    for _ in range(_MAX_TIGHTENINGS + 1):
        try:
            items, raw = _core.plan_openai_chat(
                payload, tools_payload, core_for(plan_budget), pins, counting.cache, groups, binds
            )
        except BudgetExceededError as e:
            e.budget = budget
            raise
        except InvalidMessageError as e:
            # The core names canonical indices; the caller knows its native ones.
            if e.index is not None and 0 <= e.index < len(canonical.spans):
                e.index = canonical.spans[e.index][0] if canonical.spans[e.index][0] >= 0 else None
            raise
        rendered = adapter.render(messages, items, canonical, system=system)
        if _as_planned(items, rendered, system):
            actual = raw["tokens_after"]
            break
        kept_tools = None if raw["tools_dropped"] else tools_payload
        actual = counting.count(
            adapter.to_canonical(rendered.messages, system=rendered.system), kept_tools
        )
        if actual <= budget:
            break
        plan_budget -= actual - budget
        if plan_budget < 1:
            break
    if actual > budget:
        raise BudgetExceededError(
            f"the rendered request needs {actual} tokens but the budget is {budget}",
            tokens=actual,
            budget=budget,
            bucket_tokens=raw["bucket_tokens"],
        )
    raw = dict(raw)
    raw["budget"] = budget
    raw["tokens_after"] = actual
    raw["dropped_rings"] = native_spans(raw["dropped_rings"], canonical)
    raw["dropped_turns"] = native_spans(raw["dropped_turns"], canonical)
    return NativePlan(rendered=rendered, raw=raw, canonical=canonical, payload=payload)
