"""What an assembly did, in numbers: tokens before and after, which stages ran, which units were
dropped, what was repaired. Carries counts and indices only, never message text, so a report
can be logged as is."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .ledgers.account import TokenAccount

__all__ = [
    "AssemblyReport",
    "LedgerEntry",
    "ProviderCount",
    "RewriteRecord",
    "StageRecord",
    "SummaryRecord",
]


@dataclass(frozen=True)
class StageRecord:
    """One stage that changed the request.

    Attributes:
        stage: Stage name (``dedupe_superseded_reads``, ``truncate_oversized_results``,
            ``degrade_media``, ``drop_rings``, ``drop_plain_turns``, ``drop_referenced_rings``,
            ``drop_citing_turns``, ``drop_error_rings``,
            ``summarize``, ``truncate_protected_results``, ``shrink_recent``,
            ``drop_tools_schema``; ``merge_ledger_notes`` when the input held
            several ledger notes, which become one at the first one's place).
        units: Messages it rewrote, or units (rings, turns, the schema) it removed; for
            ``summarize``, the units the summary stands for.
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
        status: ``ok``, ``error`` or ``not_completed`` (or what the execution layer recorded).
        idempotency_key: The key the effect is deduplicated by, when known (recorded, or the
            call's ``idempotency_key`` argument).
        resource_id: What the effect created or changed, when the execution layer said.
        turn: The conversation turn of the call (1 = the first user message).
    """

    tool: str
    call_id: str
    args: str = "{}"
    status: str = "ok"
    idempotency_key: str | None = None
    resource_id: str | None = None
    turn: int | None = None


@dataclass(frozen=True)
class RewriteRecord:
    """A message kept with new content: by a cheap stage, or by the provider's rendering.

    Attributes:
        index: The caller's message (native index; for providers whose items hold several
            results, the item holding the rewritten one).
        kind: ``truncated`` (head and tail kept, with a recovery anchor), ``deduped`` (an
            older result of the same read), ``media`` (images replaced by a placeholder) or
            ``blank_text`` (whitespace-only text blocks a provider refuses, stripped).
        tokens_saved: Tokens the rewrite saved.
    """

    index: int
    kind: str
    tokens_saved: int


@dataclass(frozen=True)
class SummaryRecord:
    """What the summary stage did. Carries counts, never text.

    Attributes:
        units: Units the summary stands for (dropped in this assembly).
        span: ``(start, end)`` of the caller's messages those units came from.
        tokens: Tokens of the summary note in the request (0 when none was inserted).
        target_tokens: The size the summarizer was asked for.
        replaced_previous: Whether an earlier summary note was updated.
        calls: Summarizer calls made (several when the input was chunked).
        chunks: Chunks the input was split into for the summarizer's window (1 = no split).
        cut: Whether the summarizer's text was cut to the target.
        failed: Whether the caller's summarizer failed.
        reason: Why it failed: ``timeout``, ``empty``, ``oversized``, ``not_text``,
            ``exception:<type>``; None when it did not.
        fallback_used: Whether the deterministic fallback wrote the summary.
        redactions: Secrets removed before any text reached the summarizer, per kind.
    """

    units: int
    span: tuple[int, int]
    tokens: int
    target_tokens: int
    replaced_previous: bool = False
    calls: int = 0
    chunks: int = 0
    cut: bool = False
    failed: bool = False
    reason: str | None = None
    fallback_used: bool = False
    redactions: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ProviderCount:
    """How the assembled request's size was settled with the provider (``token_counter``,
    ``Assembler(counter=...)``, ``token_ratio``/``safety_margin_tokens: auto``).

    Attributes:
        mode: The ``token_counter`` in force.
        counter: The counter's name (``openai``, ``anthropic``, ``gemini``, ``bedrock``), or
            None without one.
        model: The calibration key (the counter's or the token ledger's model).
        checked: Whether the provider was asked to count this request.
        tokens: The provider's count of the request returned; None when not asked or when
            it did not answer.
        local_tokens: ringbound's estimate of the same request (``tokens_after``).
        rechecks: Times the request was tightened and counted again because the provider
            counted it over the budget (at most 2; then ``BudgetExceededError``).
        failed: Whether the counter failed or timed out, so the local estimate was used.
        reason: Why: ``timeout``, ``exception:<type>`` or ``malformed``; None otherwise.
        token_ratio: The ratio the request was counted with.
        safety_margin_tokens: The margin the budget kept.
        calibration_samples: Samples the ratio and margin rest on (0: the conservative start).
        elapsed_s: Time spent waiting for the provider.
    """

    mode: str
    counter: str | None
    model: str
    checked: bool
    tokens: int | None
    local_tokens: int
    rechecks: int = 0
    failed: bool = False
    reason: str | None = None
    token_ratio: float = 1.0
    safety_margin_tokens: int = 0
    calibration_samples: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class AssemblyReport:
    """The record of one assembly.

    Attributes:
        tokens_before: Tokens of the request as given (messages, framing, tools schema). An
            estimate when ``tokens_before_exact`` is False: units the plan certainly drops
            are sized from their bytes at a rate counted on a sample of them instead of
            being tokenized (``rb.count_tokens`` gives the exact figure).
        tokens_after: Tokens of the assembled request; never above ``budget``.
        budget: The budget it had to fit.
        dropped_rings: ``(start, end)`` index spans of the caller's messages dropped as
            whole tool rings.
        dropped_turns: Spans of plain turns dropped.
        truncated_results: Indices of tool results cut by ``truncate_oversized_results``.
        rewrites: Every message a cheap stage rewrote (truncated, deduped, media).
        summarized: Whether this assembly wrote a summary note (a cache-stable turn that
            reuses the previous note does not: it made no summary).
        summary_failed: Whether the caller's summarizer failed (the fallback, if any, wrote
            the note; see ``summary``).
        summary: What the summary stage did, or None when it did not run.
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
            are exact counts rather than estimates.
        tightened: Notches the assembly was tightened by (``assemble(..., tighten=n)``);
            ``budget`` is then the tightened one.
        state: Cache-stable assembly only: ``new`` (no state given), ``reused`` (the
            previous cut made again), ``compacted`` (it no longer fit under the trigger), or
            ``stale: <why>`` (the history changed; planned afresh).
        store: With ``session_id``: what the session store did (``ringbound.stores
            .StoreOutcome``: loaded, saved, conflicts, or why the assembly was stateless);
            None otherwise.
        provider_count: How the size was settled with the provider (a counter, or a learned
            ratio or margin); None when the configured numbers were used as they are.
        token_account: With ``token_ledger=``: the session's reconciled account after this
            assembly (estimated, provider-counted, reported, billed tokens).
        cache_markers: Cache-stable assembly: the prompt-cache markers ringbound placed
            (``ringbound.cache_markers.CacheMarker``); the caller's own are not listed.
    """

    tokens_before: int
    tokens_after: int
    budget: int
    dropped_rings: list[tuple[int, int]] = field(default_factory=list)
    dropped_turns: list[tuple[int, int]] = field(default_factory=list)
    truncated_results: list[int] = field(default_factory=list)
    rewrites: list[RewriteRecord] = field(default_factory=list)
    summarized: bool = False
    summary_failed: bool = False
    summary: SummaryRecord | None = None
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
    tightened: int = 0
    state: str | None = None
    store: Any = None
    provider_count: ProviderCount | None = None
    token_account: TokenAccount | None = None
    cache_markers: list[Any] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the assembled request differs from the input."""
        return (
            bool(self.stages or self.repairs or self.merged or self.summarized)
            or self.messages_before != self.messages_after
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, ready for JSON."""
        return dataclasses.asdict(self)
