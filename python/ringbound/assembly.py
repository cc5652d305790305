"""One assembly's inputs and result, and what the stages around the core read of the assembler
that runs them.

An ``assemble`` call becomes one ``AssemblyInputs``, handed whole from stage to stage (the
session's load and save, the count gate, the routing of notes and framework messages, the
planning): a stage that changes an input passes on a copy with that field replaced. The
stages sit below ``ringbound.assembler``, which composes them: they name the assembler they
are handed by ``Assembles``, never by importing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from . import _core
from .config import AssemblyConfig
from .flow import Flow
from .ledgers.side_effects import SideEffectLedger
from .ledgers.tokens import TokenLedger
from .observability.metrics import MetricsSink
from .report import AssemblyReport
from .state import AssemblyState
from .summary.redact import Redactor
from .translation import TranslationReport

__all__ = ["Assembles", "AssemblyInputs", "AssemblyResult"]


# Not compared or hashed (``eq=False``): the fields hold the caller's objects, whose own
# ``__eq__`` and ``__hash__`` are not ours to call.
@dataclass(frozen=True, eq=False)
class AssemblyInputs:
    """What one ``assemble`` call was given, unchecked: each stage checks what it reads, so
    a bad argument raises the error it always raised, where it always did."""

    messages: Any
    tools: Any = None
    system: Any = None
    pinned: Iterable[int] | None = ()
    ledger: SideEffectLedger | None = None
    tighten: int = 0
    state: AssemblyState | None = None
    token_ledger: TokenLedger | None = None
    #: The conversation whose stored checkpoint and ledgers the assembly uses (the session
    #: stage takes it off before passing the inputs on).
    session_id: str | None = None
    #: Cache-stable whatever the config says (a session's assemblies are).
    stateful: bool = False


@dataclass(frozen=True)
class AssemblyResult:
    """An assembled request.

    Attributes:
        messages: The list to send. Kept messages are the caller's own objects (same
            identity, unmodified); insertions are new dicts.
        tools: The tools to send: the caller's list, or None if it was dropped to fit
            (``on_still_over_budget: drop_tools_schema_then_fail``) or none was given.
        report: What the assembly did.
    """

    messages: list[Any]
    tools: list[Any] | None
    report: AssemblyReport
    #: The checkpoint for the next turn (``cache_stable`` assembly, or when a state was
    #: given); None otherwise.
    state: AssemblyState | None = None
    #: The top-level system to send, for providers that have one (Anthropic ``system``,
    #: Gemini ``systemInstruction``, Bedrock ``system``, Responses ``instructions``): the
    #: caller's value, or a new one carrying the side-effect ledger note.
    system: Any = None
    #: OpenAI's ``prompt_cache_key`` for this conversation (cache-stable assembly with
    #: ``cache_markers: auto``; see ``ringbound.cache_markers``): put it in the request body.
    cache_key: str | None = None
    #: OpenAI's ``prompt_cache_options`` for the request body (``prompt_cache_mode``), or
    #: None; ``assemble_body`` writes it (or keeps the body's own).
    cache_options: dict[str, Any] | None = None
    #: What translating the session changed (``assemble(..., target=...)``), else None.
    translation: TranslationReport | None = None


class Assembles(Protocol):
    """An assembler as the stages around the core read it (``ringbound.Assembler`` is the
    one): its policy and provider, what it plans and counts with, where it reports, and its
    flows. The body path, the count gate and the session flow are handed one."""

    config: AssemblyConfig
    provider: str
    #: Whether each request's format is detected (``provider=None``).
    _detect: bool
    #: The provider's adapter (None for OpenAI Chat, which the core reads itself).
    _adapter: Any
    _core: _core.CoreConfig
    _cache: Any
    _ratio: float
    _redactor: Redactor
    _sink: MetricsSink | None
    _tracer: Any
    _summarizer: Any
    #: The count gate (``ringbound.counters.gate.CountGate``), or None.
    _gate: Any
    #: Notes placed apart from where the core puts them (``ringbound.routing``).
    _placed: bool
    #: Whether assemblies with a token ledger are recorded in it.
    _accounts: bool
    #: The assemblers for bodies of other providers and models (``ringbound.body.Variants``).
    _variants: Any

    def _entry(self, inputs: AssemblyInputs) -> Flow[AssemblyResult]:
        """The whole assembly of ``inputs``: detection, session, gate, routing, the core."""
        ...

    def _flow(self, inputs: AssemblyInputs) -> Flow[AssemblyResult]:
        """One assembly of ``inputs`` without its session: gate, routing, the core."""
        ...
