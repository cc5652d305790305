"""Plan walks that the Python renderings of the native providers share, moved here with them
from ``ringbound.providers.base``: the core writes every native request now, and those
renderings (``render`` in the ``*_oracle.py`` modules beside this one) are the tests'
differential oracle for what it writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ringbound._core import Insertion
from ringbound.providers.base import Canonical, PlanItem

__all__ = ["ItemFacts", "call_message", "facts_of", "kept_native", "plan_rewrites"]


@dataclass(frozen=True)
class ItemFacts:
    """What the core read of each native item (``NativeView.facts``), so that a rendering
    copies kept items into the request without reading them again.

    Attributes:
        roles: Each item's role in the provider's own word (None where it has none).
        blank_text: Whether it holds a whitespace-only text block (stripped when rendered).
        cache_markers: Its blocks carrying a prompt-cache marker (an upper bound).
    """

    roles: list[str | None]
    blank_text: list[bool]
    cache_markers: list[int]


def facts_of(canonical: Canonical) -> ItemFacts | None:
    """The facts of a view the core read; None for one without its reading (the general
    rendering, which reads each item itself)."""
    if canonical.view is None:
        return None
    return ItemFacts(*canonical.view.facts)


def _kept(item: PlanItem) -> int | None:
    """The canonical index an item keeps (as is or rewritten), else None."""
    if type(item) is int:
        return item
    if type(item) is Insertion.Rewrite:
        return item.index
    return None


def kept_native(items: Sequence[PlanItem], canonical: Canonical) -> list[int]:
    """Native indices the plan keeps (as they are or rewritten), in order, each once."""
    if canonical.view is not None:
        return canonical.view.kept_native(items)  # type: ignore[no-any-return]
    out: list[int] = []
    spans = canonical.spans
    following = 0  # indices below it are in ``out`` already, or were passed over
    for item in items:
        k = item if type(item) is int else _kept(item)
        if k is None:
            continue
        start, end = spans[k]
        start = max(start, following)
        if start < end:
            out.extend(range(start, end))
            following = end
    return out


def call_message(
    items: Sequence[PlanItem], j: int, canonical: Canonical, call_id: str
) -> int | None:
    """The canonical index of the kept message making call ``call_id``, whose synthesized
    result is plan item ``j``: the plan places it after its call message's own results, so
    the search reads back only over that ring. None when the call is not found there."""
    for item in reversed(items[:j]):
        if type(item) is int or type(item) is Insertion.Rewrite:
            k = item if type(item) is int else item.index
            calls = canonical.messages[k].get("tool_calls") or ()
            if any(c["id"] == call_id for c in calls):
                return k
    return None


def plan_rewrites(
    items: Sequence[PlanItem], canonical: Canonical
) -> dict[int, list[tuple[int, str, str]]]:
    """The plan's rewrites by native index: ``(canonical index, kind, text)`` in plan order.
    One native item may stand for several canonical messages, each rewritten on its own."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    for item in items:
        if type(item) is Insertion.Rewrite:
            start = canonical.spans[item.index][0]
            if start >= 0:
                out.setdefault(start, []).append((item.index, item.kind, item.text))
    return out
