"""The summary stage: when an assembly drops units (or stays above the summarize trigger with
middle left), the dropped units become one summary note right after the protected prefix.

The core never calls back into Python, so the stage is three steps: the core plans with room
reserved for the note (at the low-water mark ``summarize_trigger_ratio x budget`` when it can,
so the next turns append without another summary), this module turns the dropped units into a
``SummaryRequest`` (redacted text, the earlier summary to update, the target size), and after
the caller's summarizer has answered, the note is written into the reserved place. Sync and
async assemblies share everything but the call itself.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _core, low_water
from .._core import Insertion, Plan, PlanReport
from ..adapted import NativeRequest
from ..config import AssemblyConfig
from ..errors import BudgetExceededError
from ..report import LedgerEntry, StageRecord, SummaryRecord
from .redact import Redactor, redacted_entry, redacted_value
from .request import (
    SummaryOutcome,
    SummaryRequest,
    note_body,
    note_text,
    summary_target,
    unit_blocks,
)

__all__ = ["Draft", "draft", "due", "filler", "record", "trigger_goal"]

#: The smallest summary target: the template alone takes about this much.
MIN_SUMMARY_TOKENS = 64
#: Tokens a note's first line and its message framing may take beyond the body.
_NOTE_SLACK = 16
_COUNTS = re.compile(r"summary of (\d+) earlier messages \((\d+) units\)")


@dataclass(frozen=True)
class Draft:
    """A plan with room for the summary note, and what the summarizer is to be asked."""

    first: Plan
    start_budget: int
    reserve: int
    request: SummaryRequest
    unit_texts: list[str]
    #: Units and messages the note stands for, earlier summaries included (its first line).
    units: int
    messages: int
    #: Units this assembly summarizes.
    new_units: int
    #: Canonical messages the note stands for, earlier summaries included.
    canonical_span: tuple[int, int]
    span: tuple[int, int]
    replaced_previous: bool
    redactions: dict[str, int] = field(default_factory=dict)
    #: Core configs by budget for planning the request again once the note is written.
    core_for: Callable[[int], Any] | None = None


@dataclass(frozen=True)
class Skipped:
    """The stage had units to summarize but no room for a note even at the full budget."""

    units: int
    span: tuple[int, int]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and "text" in p)
    return ""


def _redacted(redactor: Redactor, text: str, counts: dict[str, int]) -> str:
    out, found = redactor.redact(text)
    for kind, n in found.items():
        counts[kind] = counts.get(kind, 0) + n
    return out


def trigger_goal(cfg: AssemblyConfig, budget: int) -> int:
    """The low-water mark a summary compacts to: ``summarize_trigger_ratio`` of the budget."""
    return max(1, math.floor(cfg.summarize_trigger_ratio * budget))


def due(report: PlanReport, goal: int) -> bool:
    """Whether a plan leaves work for the summary stage: it dropped units, or it still sits
    above ``goal`` with middle left."""
    if report.canonical_dropped:
        return True
    return report.tokens_after > goal and report.bucket_tokens["middle"] > 0


def draft(
    native: NativeRequest,
    first_report: PlanReport,
    *,
    budget: int,
    cfg: AssemblyConfig,
    core_for: Callable[[int], Any],
    cache: Any,
    recorded: list[tuple[Any, ...]] | None,
    ledger: Sequence[Any],
    count: Callable[[str], int],
    token_ratio: float,
    redactor: Redactor,
    goal: int | None = None,
    previous: tuple[str, tuple[int, int]] | None = None,
    low_for: Callable[[int], Any] | None = None,
) -> Draft | Skipped | None:
    """The summary plan, or None when there is nothing to summarize.

    ``first_report`` is the report of the plan without a summary: the stage runs when it dropped
    units, or when it still sits above the trigger with middle left. ``goal`` is the
    low-water mark (default ``summarize_trigger_ratio`` of the budget). ``previous`` is an
    earlier note that the request itself does not hold (a cache-stable state's) and the span
    of canonical messages it covers: those units are dropped again but not summarized again.
    ``low_for`` (a cache-stable compaction) gives core configs with the middle's stages only:
    the note's room is then made at ``goal``, else as low as the middle goes, and at the full
    budget only when that is over it (``ringbound.low_water``), so the request with its
    summary sits at the low-water mark whenever the protected part allows.
    """
    if goal is None:
        goal = trigger_goal(cfg, budget)
    if not due(first_report, goal):
        return None
    # Below a few dozen tokens not even the template fits: a summary that small is none.
    # summary_max_tokens caps every target, a configured one too.
    upper = min(
        cfg.summary_max_tokens,
        cfg.summary_target_tokens or max(MIN_SUMMARY_TOKENS, int(0.05 * cfg.model_input_limit)),
    )
    reserve = math.ceil(
        (upper + _NOTE_SLACK + count(note_text("", units=0, messages=0))) * token_ratio
    )
    plan = None
    if low_for is not None:
        try:
            plan, start, core_for = low_water.lowest(
                lambda core: native.plan(core, cache, budget, reserve=reserve, recorded=recorded),
                goal,
                budget,
                low_for,
                core_for,
            )
        except BudgetExceededError:
            plan = None
    else:
        for start in dict.fromkeys((goal, budget)):
            try:
                plan = native.plan(
                    core_for(start), cache, budget, reserve=reserve, recorded=recorded
                )
                break
            except BudgetExceededError:
                continue
    canon = native.canonical.messages
    if plan is None:
        spans = first_report.canonical_dropped
        native_spans = native.native_spans(spans)
        return Skipped(units=len(spans), span=_hull(native_spans)) if spans else None
    planned = plan.report
    spans = planned.canonical_dropped
    if previous is not None:
        covered_start, covered_end = previous[1]
        spans = [(s, e) for s, e in spans if not covered_start <= s < covered_end]
    if not spans:
        return None
    counts: dict[str, int] = {}
    blocks = [
        _redacted(redactor, block, counts) for block in unit_blocks([canon[s:e] for s, e in spans])
    ]
    text = "\n\n".join(blocks)
    previous_index = planned.summary_notes[0] if planned.summary_notes else None
    earlier_note = (
        _text(canon[previous_index]["content"])
        if previous_index is not None
        else (previous[0] if previous is not None else None)
    )
    previous_body = None if earlier_note is None else note_body(earlier_note)
    earlier = None if earlier_note is None else _COUNTS.search(earlier_note)
    first_user = next((m for m in canon if m.get("role") == "user"), None)
    goal_text = (
        None if first_user is None else _redacted(redactor, _text(first_user["content"]), counts)
    )
    native_spans = native.native_spans(spans)
    natives = [list(native.messages[s:e]) for s, e in native_spans]
    request = SummaryRequest(
        # The same secrets as in ``text``: counted once, there.
        units=[redacted_value(unit, redactor, {}) for unit in natives],
        raw_units=natives if cfg.summary_raw_units else None,
        text=text,
        previous_summary=None
        if previous_body is None
        else _redacted(redactor, previous_body, counts),
        target_tokens=min(
            upper,
            max(
                cfg.summary_target_tokens or MIN_SUMMARY_TOKENS,
                summary_target(
                    count(text),
                    cfg.model_input_limit,
                    cfg.summary_max_tokens,
                    cfg.summary_target_tokens,
                ),
            ),
        ),
        ledger=[
            redacted_entry(e, redactor)
            for e in [*ledger, *(LedgerEntry(*e) for e in planned.ledger_added)]
        ],
        goal=goal_text,
        provider=native.adapter.key,
    )
    messages = sum(e - s for s, e in spans)
    units = len(spans)
    if earlier is not None:
        messages += int(earlier.group(1))
        units += int(earlier.group(2))
    return Draft(
        first=plan,
        start_budget=start,
        reserve=reserve,
        request=request,
        unit_texts=blocks,
        units=units,
        messages=messages,
        new_units=len(spans),
        canonical_span=_hull(spans if previous is None else [*spans, previous[1]]),
        span=_hull(native_spans),
        replaced_previous=earlier_note is not None,
        redactions=counts,
        core_for=core_for,
    )


def _hull(spans: Sequence[tuple[int, int]]) -> tuple[int, int]:
    return (min(s for s, _ in spans), max(e for _, e in spans)) if spans else (0, 0)


def filler(note: str | None) -> Callable[[list[Any]], list[Any]]:
    """Writes the note into the reserved place of a plan's items (or leaves the place out
    when there is no note)."""

    def fill(items: Sequence[Any]) -> list[Any]:
        out = []
        for item in items:
            if type(item) is Insertion.Summary:
                if note is not None:
                    out.append(Insertion.Summary(text=note, role=item.role))
            else:
                out.append(item)
        return out

    return fill


def note_reserve(note: str, count: Callable[[str], int], token_ratio: float) -> int:
    """Room for a note of known text: its tokens and a message's framing."""
    return math.ceil((count(note) + _NOTE_SLACK) * token_ratio)


def note_for(d: Draft, outcome: SummaryOutcome) -> str | None:
    """The note text for an outcome, or None when there is no summary to insert."""
    if outcome.text is None:
        return None
    return note_text(outcome.text, units=d.units, messages=d.messages)


def record(
    d: Draft | Skipped,
    outcome: SummaryOutcome | None,
    note: str | None,
    count: Callable[[str], int],
) -> tuple[SummaryRecord, StageRecord | None]:
    """The report's summary record and the stage record of the summary stage."""
    if isinstance(d, Skipped):
        return (
            SummaryRecord(units=d.units, span=d.span, tokens=0, target_tokens=0, reason="no_room"),
            None,
        )
    assert outcome is not None
    tokens = 0 if note is None else count(note)
    summary = SummaryRecord(
        units=d.new_units,
        span=d.span,
        tokens=tokens,
        target_tokens=d.request.target_tokens,
        replaced_previous=d.replaced_previous,
        calls=outcome.calls,
        chunks=outcome.chunks,
        cut=outcome.cut,
        failed=outcome.failed,
        reason=outcome.reason,
        fallback_used=outcome.fallback_used,
        redactions=dict(d.redactions),
    )
    stage = None if note is None else StageRecord("summarize", d.new_units, -tokens)
    return summary, stage


def counter(encoding: str) -> tuple[Callable[[str], int], Callable[..., str]]:
    """Exact count and token-exact cut in the assembly's encoding."""

    def count(text: str) -> int:
        return _core.count_text(text, encoding)

    def cut(text: str, max_tokens: int, *, from_end: bool = False) -> str:
        return _core.cut_text(text, max_tokens, encoding, from_end)

    return count, cut
