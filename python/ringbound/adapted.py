"""Assembling a provider's native request through its adapter: validate by the provider's own
rules, plan the canonical view in the core, render the plan back into native items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from . import _core
from .errors import PairingError
from .payload import dump_tools
from .providers.base import Adapter, Canonical, Rendered

__all__ = ["NativePlan", "native_spans", "plan_native"]


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


def plan_native(
    adapter: Adapter,
    messages: Sequence[Any],
    tools: Sequence[Any] | None,
    system: Any,
    core_config: Any,
    pinned: Sequence[int],
    cache: Any,
    repair: bool,
) -> NativePlan:
    """Plans a native request; PairingError quotes the provider's wording."""
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
    items, raw = _core.plan_openai_chat(
        payload,
        tools_payload,
        core_config,
        _canonical_pins(pinned, canonical),
        cache,
        canonical.groups(),
        canonical.binds_next or [False] * len(canonical.messages),
    )
    rendered = adapter.render(messages, items, canonical, system=system)
    raw = dict(raw)
    raw["dropped_rings"] = native_spans(raw["dropped_rings"], canonical)
    raw["dropped_turns"] = native_spans(raw["dropped_turns"], canonical)
    return NativePlan(rendered=rendered, raw=raw, canonical=canonical, payload=payload)
