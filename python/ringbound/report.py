"""What an assembly did, in numbers: tokens before and after, which stages ran, which units were
dropped, what was repaired. Carries counts and indices only, never message text, so a report
can be logged as is."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AssemblyReport", "LedgerEntry", "StageRecord"]


@dataclass(frozen=True)
class StageRecord:
    """One stage that changed the request.

    Attributes:
        stage: Stage name (``drop_rings``, ``drop_plain_turns``, ``drop_error_rings``,
            ``drop_tools_schema``; ``merge_ledger_notes`` when the input held several ledger
            notes, which become one at the first one's place).
        units: Units (rings, turns, or the schema) it removed.
        tokens_saved: Tokens the request shrank by in this stage, ledger growth included.
    """

    stage: str
    units: int
    tokens_saved: int


@dataclass(frozen=True)
class LedgerEntry:
    """A side-effecting call recorded in the ledger note.

    Attributes:
        tool: Tool name.
        call_id: The call's id.
        args: The identifying arguments, as canonical JSON.
        status: ``ok``, ``error`` or ``not_completed``.
    """

    tool: str
    call_id: str
    args: str
    status: str


@dataclass(frozen=True)
class AssemblyReport:
    """The record of one assembly.

    Attributes:
        tokens_before: Tokens of the request as given (messages, framing, tools schema). An
            upper bound when ``tokens_before_exact`` is False: units the plan certainly drops
            are sized from their bytes instead of being tokenized.
        tokens_after: Tokens of the assembled request; never above ``budget``.
        budget: The budget it had to fit.
        dropped_rings: ``(start, end)`` index spans of the caller's messages dropped as
            whole tool rings.
        dropped_turns: Spans of plain turns dropped.
        truncated_results: Indices of tool results cut by ``truncate_oversized_results``
            (that stage is not part of this release, so the list is empty).
        summarized: Whether a summary replaced dropped units (no summarizer in this release).
        summary_failed: Whether a summarizer failed (no summarizer in this release).
        stages: Stages that changed the request, in the order they ran.
        repairs: Call ids that received a synthesized error result.
        ledger_added: Ledger entries this assembly added.
        ledger_entries: Entries in the ledger note of the assembled request.
        bucket_tokens: Tokens of each bucket after assembly: prefix, middle, suffix, tools,
            insertions, framing.
        tools_dropped: Whether the tools schema was dropped to fit.
        merged: Native messages returned as new objects because a provider rule required it
            (Anthropic, Gemini and Bedrock merge same-role neighbours after drops, and add a
            synthesized result to an existing turn).
        messages_before: Messages given.
        messages_after: Messages in the assembled request.
        elapsed_s: Wall time of the assembly.
        tokens_before_exact: Whether ``tokens_before`` (and the stages' ``tokens_saved``)
            are exact counts rather than upper bounds.
    """

    tokens_before: int
    tokens_after: int
    budget: int
    dropped_rings: list[tuple[int, int]] = field(default_factory=list)
    dropped_turns: list[tuple[int, int]] = field(default_factory=list)
    truncated_results: list[int] = field(default_factory=list)
    summarized: bool = False
    summary_failed: bool = False
    stages: list[StageRecord] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    ledger_added: list[LedgerEntry] = field(default_factory=list)
    ledger_entries: int = 0
    bucket_tokens: dict[str, int] = field(default_factory=dict)
    tools_dropped: bool = False
    merged: int = 0
    messages_before: int = 0
    messages_after: int = 0
    elapsed_s: float = 0.0
    tokens_before_exact: bool = True

    @property
    def changed(self) -> bool:
        """Whether the assembled request differs from the input."""
        return (
            bool(self.stages or self.repairs or self.merged)
            or self.messages_before != self.messages_after
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, ready for JSON."""
        return dataclasses.asdict(self)
