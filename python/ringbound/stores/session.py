"""``assemble(..., session_id=...)``: load the session's record, assemble with its checkpoint
and ledgers, save by compare-and-set. A replica that loses the compare-and-set reads the
record that won, merges its ledger entries into it and plans again from it (or, when the
winner saw a longer history, keeps the winner's checkpoint and only adds its entries), so no
ledger entry is lost and no older checkpoint replaces a newer one.

The steps are written once, as a flow (``ringbound.flow``) that yields the loads and saves
and nests the assembly's own flow; ``Assembler.assemble`` runs it, ``assemble_async`` awaits
it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import cache_markers
from ..assembly import Assembles, AssemblyInputs, AssemblyResult
from ..errors import ConfigError, StaleStateError, StoreError
from ..flow import Flow
from ..ledgers.side_effects import SideEffectLedger
from ..ledgers.tokens import TokenLedger
from ..observability import tracing
from ..observability.metrics import get_default_sink
from ..state import AssemblyState
from .base import SessionStore, Stored, check_session_id
from .record import SessionRecord, UnreadableRecord

__all__ = ["MAX_CONFLICTS", "StoreOutcome", "session_flow"]

logger = logging.getLogger("ringbound")

#: Compare-and-set attempts lost in a row before the session counts as failed: each loss
#: means another replica wrote in between, so this many is a storm, not bad luck.
MAX_CONFLICTS = 8


@dataclass(frozen=True)
class StoreOutcome:
    """What the session store did for one assembly (``report.store``).

    Attributes:
        session_id: The session.
        loaded: ``new`` (no record), ``loaded``, ``unreadable: <why>`` (a corrupt record or
            one of another version: planned afresh and replaced), ``stale: <why>`` (its
            checkpoint is of another conversation or provider: planned afresh) or ``failed``
            (the store failed; see ``error``).
        saved: ``saved`` (this assembly's checkpoint and ledgers), ``merged`` (a checkpoint
            from a longer history was already stored: it was kept and this assembly's ledger
            entries added to it) or ``not saved`` (see ``error``).
        conflicts: Compare-and-sets lost to other replicas (each one re-read the record;
            ``replanned`` of them assembled again from the winner's checkpoint).
        replanned: Assemblies run again after a lost compare-and-set.
        revision: The revision written, or None.
        stateless: Whether the assembly ran without the stored state because the store
            failed (``on_store_error: stateless``).
        error: Why the store failed (``StoreError.reason``), or None.
    """

    session_id: str
    loaded: str
    saved: str
    conflicts: int = 0
    replanned: int = 0
    revision: str | None = None
    stateless: bool = False
    error: str | None = None


@dataclass(frozen=True)
class _Get:
    """The session's stored record (or None)."""

    store: SessionStore
    session_id: str

    def run(self) -> Stored | None:
        return self.store.get(self.session_id)

    async def arun(self) -> Stored | None:
        return await self.store.aget(self.session_id)


@dataclass(frozen=True)
class _Put:
    """A compare-and-set of the session's record: the new revision, or None if lost."""

    store: SessionStore
    session_id: str
    data: bytes
    expected: str | None

    def run(self) -> str | None:
        return self.store.put(self.session_id, self.data, self.expected)

    async def arun(self) -> str | None:
        return await self.store.aput(self.session_id, self.data, self.expected)


#: One assembly's flow: (state, ledger, token ledger, cache-stable) -> the assembly.
_Assembly = Callable[
    [AssemblyState | None, SideEffectLedger | None, TokenLedger | None, bool],
    Flow[AssemblyResult],
]


def _steps(
    asm: Assembles,
    store: SessionStore,
    session_id: str,
    history: int,
    assembly: _Assembly,
    ledger: SideEffectLedger | None,
    token_ledger: TokenLedger | None,
) -> Flow[tuple[AssemblyResult, StoreOutcome]]:
    policy = asm.config.on_store_error

    def failed(e: StoreError) -> StoreError:
        if policy == "fail_closed":
            raise e
        return e

    unread: StoreError | None = None
    try:
        stored: Stored | None = yield _Get(store, session_id)
    except StoreError as e:
        unread = failed(e)
    if unread is not None:
        result = yield from assembly(None, ledger, token_ledger, False)
        return result, StoreOutcome(
            session_id, "failed", "not saved", stateless=True, error=unread.reason
        )
    conflicts = replanned = 0
    # Entries this replica holds beyond the stored ones: the caller's, and what its
    # assemblies added. They go into every record it writes, whoever won before.
    carried: tuple[Any, ...] = tuple(ledger or ())
    loaded: str | None = None
    result: Any = None
    while True:
        record, status = _read(stored)
        loaded = loaded or status
        if result is None or record.history <= history:
            # First pass, or the winner of a compare-and-set saw no longer a history than
            # this one: plan (again) from its checkpoint.
            replanned += result is not None
            work = record.side_effect_ledger()
            work.extend(carried)
            tokens = token_ledger if token_ledger is not None else record.tokens()
            stale: StaleStateError | None = None
            try:
                result = yield from assembly(record.state, work, tokens, True)
            except StaleStateError as e:
                if record.state is None:
                    raise
                stale = e
            if stale is not None:
                # A checkpoint of another conversation under this id: nothing of it applies.
                loaded = f"stale: {stale.reason}"
                record = SessionRecord()
                work = SideEffectLedger(carried)
                tokens = token_ledger
                result = yield from assembly(None, work, tokens, True)
            carried = work.entries
        if record.history > history:
            # A replica already saved a longer history: keep its checkpoint, add ours.
            out, saved = record.merged(carried), "merged"
            if token_ledger is not None:
                out = dataclasses.replace(out, token_ledger=token_ledger.to_dict())
        else:
            out = SessionRecord(
                history=history,
                state=result.state,
                ledger=carried,
                token_ledger=None if tokens is None else tokens.to_dict(),
            )
            saved = "saved"
        try:
            expected = None if stored is None else stored.revision
            revision = yield _Put(store, session_id, out.to_bytes(), expected)
            if revision is None:
                _count(asm, "conflict")
                conflicts += 1
                if conflicts >= MAX_CONFLICTS:
                    raise StoreError(
                        f"lost {conflicts} compare-and-sets in a row on the session",
                        reason="conflict",
                        op="save",
                    )
                stored = yield _Get(store, session_id)
                continue
        except StoreError as e:
            error = failed(e)
            if ledger is not None:
                ledger.extend(carried)
            return result, StoreOutcome(
                session_id, loaded, "not saved", conflicts, replanned, error=error.reason
            )
        if ledger is not None:
            ledger.extend(carried)
        return result, StoreOutcome(session_id, loaded, saved, conflicts, replanned, revision)


def _read(stored: Stored | None) -> tuple[SessionRecord, str]:
    if stored is None:
        return SessionRecord(), "new"
    try:
        return SessionRecord.from_bytes(stored.data), "loaded"
    except UnreadableRecord as e:
        return SessionRecord(), f"unreadable: {e.reason}"


def _check(session_id: Any, state: Any, ledger: Any, token_ledger: Any) -> str:
    if state is not None:
        raise ConfigError(
            "pass either state= or session_id=: with a session id the state is the stored one",
            key="state",
            reason="not with session_id",
        )
    if ledger is not None and not isinstance(ledger, SideEffectLedger):
        raise ConfigError(
            f"ledger must be a ringbound.SideEffectLedger, got {type(ledger).__name__}",
            key="ledger",
            reason="must be a SideEffectLedger",
        )
    if token_ledger is not None and not isinstance(token_ledger, TokenLedger):
        raise ConfigError(
            f"token_ledger must be a ringbound.TokenLedger, got {type(token_ledger).__name__}",
            key="token_ledger",
            reason="must be a TokenLedger",
        )
    return check_session_id(session_id)


def _finish(
    asm: Assembles, session_id: str, done: tuple[AssemblyResult, StoreOutcome]
) -> AssemblyResult:
    result, outcome = done
    if outcome.error is not None and outcome.error != "conflict":
        _count(asm, "load" if outcome.loaded == "failed" else "save")
    report = dataclasses.replace(result.report, store=outcome)
    # A named conversation routes to one OpenAI cache by its name, on every replica.
    key = result.cache_key
    if key is not None:
        key = cache_markers.session_key(session_id)
    return dataclasses.replace(result, report=report, cache_key=key)


def _count(asm: Assembles, op: str) -> None:
    """``sink.store_error(op, provider)``, for sinks that have it (PrometheusSink does)."""
    sink = asm._sink if asm._sink is not None else get_default_sink()
    method = getattr(sink, "store_error", None)
    if not callable(method):
        return
    try:
        method(op, asm.provider)
    except Exception as e:
        logger.warning(
            "metrics sink %s.store_error raised %s; the assembly is not affected",
            type(sink).__name__,
            type(e).__name__,
        )


def _rejected(asm: Assembles, e: StoreError) -> None:
    if e.reason != "conflict":
        _count(asm, e.op)
    tracing.rejected(e, asm.provider, asm._sink, None)


def session_flow(
    asm: Assembles, store: SessionStore, inputs: AssemblyInputs
) -> Flow[AssemblyResult]:
    """``Assembler.assemble`` with a session id (``inputs.session_id``), as a flow (see the
    module's docstring): the session's steps around the assembly of ``inputs``, and its
    report."""
    ledger, token_ledger = inputs.ledger, inputs.token_ledger
    session_id = _check(inputs.session_id, inputs.state, ledger, token_ledger)

    def assembly(
        state: AssemblyState | None,
        work: SideEffectLedger | None,
        tokens: TokenLedger | None,
        stateful: bool,
    ) -> Flow[AssemblyResult]:
        return asm._flow(
            dataclasses.replace(
                inputs,
                state=state,
                ledger=work,
                token_ledger=tokens,
                session_id=None,
                stateful=stateful,
            )
        )

    history = _history(inputs.messages)
    steps = _steps(asm, store, session_id, history, assembly, ledger, token_ledger)
    try:
        done = yield from steps
    except StoreError as e:
        _rejected(asm, e)
        raise
    return _finish(asm, session_id, done)


def _history(messages: Any) -> int:
    """The history's length, as records compare it (the assembly checks the messages)."""
    try:
        return len(messages)
    except TypeError:
        return 0
