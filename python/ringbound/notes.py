"""Where the side-effect ledger note and the summary note go (``note_placement``).

The core writes a note as an instruction message after the user's goal (``inline_system``).
Some targets refuse a system message there (ChatAnthropic: "Received multiple non-consecutive
system messages"), so the notes can instead join the leading instruction messages, go into the
request's top-level system, or be user messages. Before planning, notes placed earlier are put
back in the form the core reads, so assembling the output again changes nothing; after
planning, the core's notes are moved. Every placement costs at most what the core counted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ._core import LEDGER_MARKER, SUMMARY_MARKER
from .config import PLACEMENTS
from .errors import ConfigError
from .providers.base import as_mapping, join_system_note, split_system_note
from .report import AssemblyReport

__all__ = [
    "PLACEMENTS",
    "Placement",
    "check_placement",
    "finish",
    "is_note",
    "place",
    "prepare",
]

#: Providers whose messages carry the notes; the others put them in their top-level system.
IN_MESSAGES = ("openai_chat", "openai_responses")
_INSTRUCTION = ("system", "developer")


def check_placement(placement: str | None, provider: str) -> str:
    """The placement an assembler for ``provider`` uses; ConfigError when it cannot."""
    if placement is None:
        return "inline_system" if provider in IN_MESSAGES else "top_level_system"
    if provider not in IN_MESSAGES and placement != "top_level_system":
        raise ConfigError(
            f"config `note_placement` must be top_level_system (or null) for {provider}, "
            f"whose notes go in its top-level system; got {placement!r}",
            key="note_placement",
            reason=f"must be top_level_system for {provider}",
        )
    return placement


def is_note(message: Any) -> bool:
    """Whether a chat message or Responses item is a ledger or summary note ringbound wrote
    (a dict: ringbound writes its notes as dicts, and SDK objects are not read here)."""
    if not isinstance(message, dict):
        return False
    text = message.get("content")
    return isinstance(text, str) and text.startswith((LEDGER_MARKER, SUMMARY_MARKER))


@dataclass
class Placement:
    """One assembly's notes between ``prepare`` and ``place``."""

    placement: str
    #: The caller's messages as the core reads them (a new list only when notes were put back).
    messages: list[Any]
    system: Any
    pinned: Any
    #: Note messages ``prepare`` put in front of the caller's messages (top-level notes).
    front: int = 0
    #: The caller's user-role notes, by the identity of the instruction copy the core read.
    originals: dict[int, Any] = dataclasses.field(default_factory=dict)
    #: For ``openai_chat``, which has no top-level system: the caller's ``system`` string,
    #: planned as a leading system message (so it is counted and kept) and lifted out again.
    lifted: Any = None
    base: str | None = None


def prepare(
    messages: list[Any], system: Any, pinned: Any, placement: str, provider: str
) -> Placement:
    """Puts notes an earlier assembly placed back where the core recognizes them: user-role
    notes become instruction messages, notes in a top-level system string lead the messages."""
    job = Placement(placement, messages, system, pinned)
    if placement == "user":
        listed = None
        for i, m in enumerate(messages):
            if is_note(m) and m.get("role") == "user":
                listed = list(messages) if listed is None else listed
                copy = dict(m, role="system")
                job.originals[id(copy)] = m
                listed[i] = copy
        if listed is not None:
            job.messages = listed
    elif placement == "top_level_system" and system is not None and not isinstance(system, str):
        raise ConfigError(
            f"note_placement top_level_system joins the notes to a system string; got a "
            f"{type(system).__name__}",
            key="note_placement",
            reason="top_level_system needs system to be a string or None",
        )
    elif placement == "top_level_system" and isinstance(system, str):
        base, ledger, summary = split_system_note(system)
        front: list[Any] = [
            {"type": "message", "role": "system", "content": t}
            if provider == "openai_responses"
            else {"role": "system", "content": t}
            for t in (ledger, summary)
            if t
        ]
        if provider == "openai_chat" and base:
            # The core would refuse a top-level system for a format without one; as the
            # leading system message it is counted in the budget and never dropped.
            job.lifted = {"role": "system", "content": base}
            job.base = base
            front.insert(0, job.lifted)
            base = ""
        if front:
            job.messages = [*front, *messages]
            job.system = base or None
            job.front = len(front)
            if pinned:
                job.pinned = [p + len(front) for p in pinned]
    return job


def place(job: Placement, out: list[Any], system: Any) -> tuple[list[Any], Any]:
    """The core's output with the notes where ``job.placement`` wants them: the messages and
    the top-level system to send."""
    if job.originals:
        out = [job.originals.get(id(m), m) for m in out]
    if job.lifted is not None:
        out = [m for m in out if m is not job.lifted]
        system = job.base
    if job.placement == "inline_system":
        return out, system
    notes = [m for m in out if is_note(m)]
    if not notes:
        return out, system
    rest = [m for m in out if not is_note(m)]
    if job.placement == "leading_system":
        lead = 0
        while lead < len(rest) and _role(rest[lead]) in _INSTRUCTION:
            lead += 1
        return [*rest[:lead], *notes, *rest[lead:]], system
    if job.placement == "user":
        return [
            _with_role(m, "user") if is_note(m) and _role(m) != "user" else m for m in out
        ], system
    texts = [m["content"] for m in notes]
    ledger = next((t for t in texts if t.startswith(LEDGER_MARKER)), None)
    summary = next((t for t in texts if t.startswith(SUMMARY_MARKER)), None)
    base = system if isinstance(system, str) else ""
    return rest, join_system_note(base, ledger, summary)


def finish(job: Placement, result: Any, given: int) -> Any:
    """An ``AssemblyResult`` of the messages ``prepare`` gave, as the caller's: notes placed,
    the report's indices those of the caller's ``given`` messages."""
    out, system = place(job, result.messages, result.system)
    report = _shift(result.report, job.front, given)
    report = dataclasses.replace(report, messages_after=len(out))
    return dataclasses.replace(result, messages=out, system=system, report=report)


def _shift(report: AssemblyReport, front: int, given: int) -> AssemblyReport:
    """The report with indices of the caller's messages again, when ``prepare`` put ``front``
    note messages before them."""
    if not front:
        return report

    def spans(s: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(max(a - front, 0), max(b - front, 0)) for a, b in s]

    return dataclasses.replace(
        report,
        dropped_rings=spans(report.dropped_rings),
        dropped_turns=spans(report.dropped_turns),
        truncated_results=[i - front for i in report.truncated_results],
        rewrites=[dataclasses.replace(r, index=r.index - front) for r in report.rewrites],
        messages_before=given,
    )


def _role(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("role")
    data = as_mapping(message)
    return None if data is None else data.get("role")


def _with_role(message: dict[str, Any], role: str) -> dict[str, Any]:
    return dict(message, role=role)
