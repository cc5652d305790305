"""What assembling a request body gives back (``BodyResult``), and that result for a body the
core wrote itself, whichever native path wrote it (OpenAI Chat's, or the other formats'
``items_body``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _core
from .assembly import Assembles
from .observability import tracing
from .plan_report import report_of
from .report import AssemblyReport
from .state import AssemblyState
from .translation import TranslationReport

__all__ = ["BodyResult", "budget_rule", "native_result"]


@dataclass(frozen=True)
class BodyResult:
    """An assembled request body.

    Attributes:
        body: The JSON body to send: every field of the input but the history, the system and
            the tools as it was (and in the native path, as the same bytes).
        report: What the assembly did.
        state: The checkpoint for the next turn when a ``state`` was given or the config is
            ``cache_stable``; None otherwise.
        provider: The body's format (the assembler's, or the one detected).
        path: ``native`` (the core read and wrote the body, the GIL released), ``items``
            (the history's items read by the core from the body's bytes, and the kept ones
            written back as those bytes; the other fields parsed and written in Python,
            the request written by the core from the items) or ``dict`` (parsed in Python,
            assembled by ``assemble``, serialized again).
        path_reason: Why the native path was not taken; None on the native path.
        model: The models-table entry the body's ``model`` picked (``Assembler.for_models``),
            else None.
    """

    body: bytes
    report: AssemblyReport
    state: AssemblyState | None = None
    provider: str = "openai_chat"
    path: str = "native"
    path_reason: str | None = None
    model: str | None = None
    #: What translating the body changed (``assemble_body(..., target=...)``), else None.
    translation: TranslationReport | None = None


def budget_rule(asm: Assembles) -> tuple[int, int, float, int]:
    """How the core sizes a body's budget by its output reserve, as ``asm``'s config does:
    ``(limit, margin, fill, default_reserve)``."""
    cfg = asm.config
    return (
        cfg.model_input_limit,
        cfg.margin_tokens,
        cfg.emergency_ratio,
        cfg.output_reserve_tokens,
    )


def native_result(
    asm: Assembles,
    data: bytes,
    got: tuple[bytes, _core.PlanReport, int, int],
    start: float,
    span: Any,
    entry: str | None,
    merged: int = 0,
) -> BodyResult:
    """The result of a body the core wrote: ``got`` is its ``(body, report, before, after)``,
    ``merged`` the neighbours it wrote as one item."""
    out, planned, before, after = got
    report = report_of(
        planned,
        asm._redactor,
        messages_before=before,
        messages_after=after,
        start=start,
        merged=merged,
    )
    tracing.assembled(report, data, asm.provider, asm._sink, span)
    return BodyResult(body=out, report=report, provider=asm.provider, model=entry)
