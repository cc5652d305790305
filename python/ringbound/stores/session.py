"""``assemble(..., session_id=...)``: load the session's record, assemble with its checkpoint
and ledgers, save by compare-and-set. A replica that loses the compare-and-set reads the
record that won, merges its ledger entries into it and plans again from it (or, when the
winner saw a longer history, keeps the winner's checkpoint and only adds its entries), so no
ledger entry is lost and no older checkpoint replaces a newer one.

The steps are written once, as a generator that yields what it needs done (load, save,
assemble); a sync and an async driver run them."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import cache_markers
from ..errors import ConfigError, StaleStateError, StoreError
from ..ledgers.side_effects import SideEffectLedger
from ..ledgers.tokens import TokenLedger
from ..observability import tracing
from ..observability.metrics import get_default_sink
from ..state import AssemblyState
from .base import SessionStore, Stored, check_session_id
from .record import SessionRecord, UnreadableRecord

if TYPE_CHECKING:
    from ..assembler import Assembler, AssemblyResult

__all__ = ["MAX_CONFLICTS", "StoreOutcome", "assemble", "assemble_async"]

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
    pass


@dataclass(frozen=True)
class _Put:
    data: bytes
    expected: str | None


@dataclass(frozen=True)
class _Run:
    state: AssemblyState | None
    ledger: SideEffectLedger | None
    token_ledger: TokenLedger | None
    stateful: bool


_Step = Generator[Any, Any, "tuple[AssemblyResult, StoreOutcome]"]


def _steps(
    session_id: str,
    history: int,
    ledger: SideEffectLedger | None,
    token_ledger: TokenLedger | None,
    policy: str,
) -> _Step:
    def failed(e: StoreError) -> StoreError:
        if policy == "fail_closed":
            raise e
        return e

    try:
        stored: Stored | None = yield _Get()
    except StoreError as e:
        error = failed(e)
        result = yield _Run(None, ledger, token_ledger, stateful=False)
        return result, StoreOutcome(
            session_id, "failed", "not saved", stateless=True, error=error.reason
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
            try:
                result = yield _Run(record.state, work, tokens, stateful=True)
            except StaleStateError as e:
                if record.state is None:
                    raise
                # A checkpoint of another conversation under this id: nothing of it applies.
                loaded = f"stale: {e.reason}"
                record = SessionRecord()
                work = SideEffectLedger(carried)
                tokens = token_ledger
                result = yield _Run(None, work, tokens, stateful=True)
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
            revision = yield _Put(out.to_bytes(), None if stored is None else stored.revision)
            if revision is None:
                conflicts += 1
                if conflicts >= MAX_CONFLICTS:
                    raise StoreError(
                        f"lost {conflicts} compare-and-sets in a row on the session",
                        reason="conflict",
                        op="save",
                    )
                stored = yield _Get()
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
    asm: Assembler, session_id: str, done: tuple[AssemblyResult, StoreOutcome]
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


def _count(asm: Assembler, op: str) -> None:
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


def _rejected(asm: Assembler, e: StoreError) -> None:
    if e.reason != "conflict":
        _count(asm, e.op)
    tracing.rejected(e, asm.provider, asm._sink, None)


def assemble(
    asm: Assembler,
    store: SessionStore,
    session_id: Any,
    messages: Any,
    tools: Any,
    system: Any,
    pinned: Iterable[int] | None,
    ledger: Any,
    tighten: int,
    state: Any,
    token_ledger: Any,
) -> AssemblyResult:
    """``Assembler.assemble`` with a session id (see the module's docstring)."""
    session_id = _check(session_id, state, ledger, token_ledger)
    steps = _steps(session_id, _history(messages), ledger, token_ledger, asm.config.on_store_error)
    reply: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as stop:
                return _finish(asm, session_id, stop.value)
            reply = error = None
            try:
                if isinstance(op, _Get):
                    reply = store.get(session_id)
                elif isinstance(op, _Put):
                    reply = store.put(session_id, op.data, op.expected)
                    if reply is None:
                        _count(asm, "conflict")
                elif op.stateful:
                    reply = asm._routed(
                        messages,
                        tools,
                        system,
                        pinned,
                        op.ledger,
                        tighten,
                        op.state,
                        op.token_ledger,
                        stateful=True,
                    )
                else:
                    reply = asm.assemble(
                        messages,
                        tools,
                        system=system,
                        pinned=pinned,
                        ledger=op.ledger,
                        tighten=tighten,
                        token_ledger=op.token_ledger,
                    )
            except (StoreError, StaleStateError) as e:
                error = e
    except StoreError as e:
        _rejected(asm, e)
        raise


async def assemble_async(
    asm: Assembler,
    store: SessionStore,
    session_id: Any,
    messages: Any,
    tools: Any,
    system: Any,
    pinned: Iterable[int] | None,
    ledger: Any,
    tighten: int,
    state: Any,
    token_ledger: Any,
) -> AssemblyResult:
    """``Assembler.assemble_async`` with a session id: the same steps, awaited."""
    session_id = _check(session_id, state, ledger, token_ledger)
    steps = _steps(session_id, _history(messages), ledger, token_ledger, asm.config.on_store_error)
    reply: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                op = steps.send(reply) if error is None else steps.throw(error)
            except StopIteration as stop:
                return _finish(asm, session_id, stop.value)
            reply = error = None
            try:
                if isinstance(op, _Get):
                    reply = await store.aget(session_id)
                elif isinstance(op, _Put):
                    reply = await store.aput(session_id, op.data, op.expected)
                    if reply is None:
                        _count(asm, "conflict")
                elif op.stateful:
                    reply = await asm._arouted(
                        messages,
                        tools,
                        system,
                        pinned,
                        op.ledger,
                        tighten,
                        op.state,
                        op.token_ledger,
                        stateful=True,
                    )
                else:
                    reply = await asm.assemble_async(
                        messages,
                        tools,
                        system=system,
                        pinned=pinned,
                        ledger=op.ledger,
                        tighten=tighten,
                        token_ledger=op.token_ledger,
                    )
            except (StoreError, StaleStateError) as e:
                error = e
    except StoreError as e:
        _rejected(asm, e)
        raise


def _history(messages: Any) -> int:
    """The history's length, as records compare it (the assembly checks the messages)."""
    try:
        return len(messages)
    except TypeError:
        return 0
