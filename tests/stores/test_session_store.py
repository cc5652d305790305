"""``assemble(..., session_id=...)`` against every store (MemoryStore, and RedisStore on a real
redis-server): replicas sharing a store make the requests one process passing its state back
makes; concurrent writers lose no ledger entry and never put an older checkpoint over a newer
one; an unreadable or foreign record means a fresh plan, said in the report; a failing store
is a StoreError or a stateless assembly, as ``on_store_error`` says, with a metric."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import prometheus_client
import pytest

import ringbound as rb
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session, turn_ends
from ringbound.stores.record import SessionRecord
from ringbound.stores.session import MAX_CONFLICTS

REPO = Path(__file__).resolve().parents[2]
SESSION = agent_session(turns=40)
ENDS, _ = turn_ends(SESSION)
CFG = rb.AssemblyConfig(
    model_input_limit=12_000,
    output_reserve_tokens=0,
    safety_margin_tokens=0,
    side_effect_tools=SIDE_EFFECT_TOOLS,
)


def record_of(store: rb.SessionStore, session_id: str) -> SessionRecord:
    stored = store.get(session_id)
    assert stored is not None
    return SessionRecord.from_bytes(stored.data)


def one_process_requests(cfg: rb.AssemblyConfig = CFG, summarizer: Any = None) -> list[Any]:
    """The requests of one process passing each turn's state to the next."""
    asm = rb.Assembler(dataclasses.replace(cfg, cache_stable=True), summarizer=summarizer)
    state, out = None, []
    ledger = rb.SideEffectLedger()
    for end in ENDS:
        res = asm.assemble(SESSION[:end], state=state, ledger=ledger)
        state = res.state if res.state is not None else state
        out.append(res.messages)
    return out


def test_replicas_sharing_a_store_send_what_one_process_sends(store: rb.SessionStore) -> None:
    replicas = [rb.Assembler(CFG, store=store) for _ in range(3)]
    expected = one_process_requests()
    states = []
    for turn, end in enumerate(ENDS):
        res = replicas[turn % 3].assemble(SESSION[:end], session_id="conv-1")
        assert res.messages == expected[turn]
        assert res.report.tokens_after <= CFG.budget
        outcome = res.report.store
        assert isinstance(outcome, rb.StoreOutcome)
        assert (outcome.loaded, outcome.saved) == ("new" if turn == 0 else "loaded", "saved")
        assert outcome.revision is not None and outcome.conflicts == 0
        states.append(res.report.state)
    assert states.count("reused") > len(ENDS) // 2 and "compacted" in states
    record = record_of(store, "conv-1")
    assert record.history == ENDS[-1] and record.state is not None
    assert record.summary == record.state.summary


def test_the_side_effect_ledger_outlives_the_replica(store: rb.SessionStore) -> None:
    first, second = rb.Assembler(CFG, store=store), rb.Assembler(CFG, store=store)
    added: list[rb.LedgerEntry] = []
    for turn, end in enumerate(ENDS):
        res = (first, second)[turn % 2].assemble(SESSION[:end], session_id="conv")
        added += res.report.ledger_added
    assert added, "the session drops side-effecting rings at this budget"
    assert record_of(store, "conv").ledger == tuple(added)
    # A caller's ledger receives the stored entries; what it records is stored too.
    mine = rb.SideEffectLedger()
    executed = mine.record("deploy", "call-by-the-executor", resource_id="release-9")
    res = first.assemble(SESSION, session_id="conv", ledger=mine)
    assert list(mine) == [executed, *added, *res.report.ledger_added]
    assert executed in record_of(store, "conv").ledger


def test_the_token_ledger_is_kept_per_session(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    tokens = rb.TokenLedger(CFG.budget)
    tokens.observe_tool_result("read_file", 8_000)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    asm.assemble(SESSION[: ENDS[3]], tools, session_id="t", token_ledger=tokens)
    asm.assemble(SESSION[: ENDS[3]], tools, session_id="u")
    kept = record_of(store, "t").tokens()
    assert kept is not None and kept.to_dict() == tokens.to_dict()
    assert record_of(store, "u").tokens() is None
    # Without one given, the next compaction leaves room for the worst read the stored
    # ledger has seen; a session without a ledger does not.
    for end in ENDS[4:11]:
        with_ledger = asm.assemble(SESSION[:end], tools, session_id="t")
        without = asm.assemble(SESSION[:end], tools, session_id="u")
    assert with_ledger.report.state == without.report.state == "compacted"
    assert with_ledger.report.tokens_after <= CFG.budget - 8_000 < without.report.tokens_after


class GatedStore(rb.SessionStore):
    """Another store, whose first ``get`` in each thread waits until ``n`` threads have read:
    every writer then holds the same revision, and all but one lose the compare-and-set."""

    def __init__(self, inner: rb.SessionStore, n: int) -> None:
        self.inner, self.barrier, self.seen = inner, threading.Barrier(n), threading.local()

    def get(self, session_id: str) -> rb.stores.Stored | None:
        got = self.inner.get(session_id)
        if not getattr(self.seen, "done", False):
            self.seen.done = True
            self.barrier.wait(timeout=30)
        return got

    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        return self.inner.put(session_id, data, expected)

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)


def test_concurrent_writers_lose_no_entry_and_keep_the_newest_state(
    store: rb.SessionStore,
) -> None:
    rb.Assembler(CFG, store=store).assemble(SESSION[: ENDS[20]], session_id="c")
    writers = 6
    gated = GatedStore(store, writers)
    # Each writer serves another turn of the session and executed a side effect of its own.
    histories = [ENDS[20 + k] for k in (3, 1, 5, 2, 5, 4)]
    outcomes: list[rb.StoreOutcome] = [None] * writers  # type: ignore[list-item]
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            ledger = rb.SideEffectLedger()
            ledger.record("send_email", f"call-{n}", args={"to": f"user{n}@example.com"})
            res = rb.Assembler(CFG, store=gated).assemble(
                SESSION[: histories[n]], session_id="c", ledger=ledger
            )
            outcomes[n] = res.report.store
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sum(o.conflicts for o in outcomes) >= writers - 1
    assert all(o.saved in ("saved", "merged") for o in outcomes)
    record = record_of(store, "c")
    calls = {e.call_id for e in record.ledger}
    assert {f"call-{n}" for n in range(writers)} <= calls
    # The longest history served wins, whatever order the writers finished in.
    assert record.history == max(histories)
    # ... and its checkpoint serves that history: the next request reuses the cut.
    again = rb.Assembler(CFG, store=store).assemble(SESSION[: max(histories)], session_id="c")
    assert (again.report.store.loaded, again.report.state) == ("loaded", "reused")


def test_a_late_request_for_an_older_turn_keeps_the_newer_state(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    for end in ENDS[:31]:
        asm.assemble(SESSION[:end], session_id="late")
    newer = record_of(store, "late")
    ledger = rb.SideEffectLedger()
    entry = ledger.record("deploy", "retry-of-turn-20")
    res = asm.assemble(SESSION[: ENDS[20]], session_id="late", ledger=ledger)
    assert res.report.store.saved == "merged"
    kept = record_of(store, "late")
    assert (kept.history, kept.state) == (newer.history, newer.state)
    assert kept.ledger == (*newer.ledger, entry)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00garbage", "not JSON"),
        (b'{"schema": "something.else", "version": 1}', "not a session record"),
        (
            orjson.dumps({"schema": "ringbound.SessionRecord", "version": 99, "history": 1}),
            "record version 99, this release reads 1",
        ),
        (
            orjson.dumps(
                {"schema": "ringbound.SessionRecord", "version": 1, "history": 3,
                 "state": {"format": "ringbound.AssemblyState", "version": 0},
                 "ledger": [], "token_ledger": None}
            ),
            "state: version 0, this release reads 1",
        ),
        (
            orjson.dumps(
                {"schema": "ringbound.SessionRecord", "version": 1, "history": 3,
                 "state": None, "ledger": [["deploy", 7]], "token_ledger": None}
            ),
            "a field is malformed (ValueError)",
        ),
        (
            orjson.dumps(
                {"schema": "ringbound.SessionRecord", "version": 1, "history": 3,
                 "state": None, "ledger": [], "token_ledger": {"version": 9}}
            ),
            "token ledger: token ledger version 9 is not one of (1, 2)",
        ),
    ],
)  # fmt: skip
def test_an_unreadable_record_means_a_fresh_plan_said_in_the_report(
    store: rb.SessionStore, data: bytes, why: str
) -> None:
    store.put("bad", data, expected=None)
    asm = rb.Assembler(CFG, store=store)
    res = asm.assemble(SESSION[: ENDS[25]], session_id="bad")
    assert res.report.store.loaded == f"unreadable: {why}"
    assert res.report.state == "new" and res.report.store.saved == "saved"
    fresh = rb.Assembler(CFG).assemble(SESSION[: ENDS[25]], state=None, token_ledger=None)
    assert res.report.tokens_after <= CFG.budget and fresh.messages is not None
    # The unreadable record was replaced: the next turn loads it.
    assert asm.assemble(SESSION[: ENDS[26]], session_id="bad").report.store.loaded == "loaded"


def test_a_record_of_another_conversation_is_stale_not_an_error(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    asm.assemble(SESSION[: ENDS[30]], session_id="reused-id")
    other = agent_session(turns=10, seed=1)
    res = asm.assemble(other, session_id="reused-id")
    assert res.report.store.loaded == "stale: another session"
    # Nothing of the other conversation applies: its ledger entries are not in the note.
    assert res.report.state == "new"
    assert res.report.ledger_entries == len(res.report.ledger_added)
    assert record_of(store, "reused-id").history == len(other)


class FailingStore(rb.SessionStore):
    """A store whose chosen operations fail as an unreachable server's would."""

    def __init__(self, inner: rb.SessionStore, fail: set[str]) -> None:
        self.inner, self.fail = inner, fail

    def _check(self, op: str) -> None:
        if op in self.fail:
            raise rb.StoreError("down", reason="ConnectionError: refused", op=op)

    def get(self, session_id: str) -> rb.stores.Stored | None:
        self._check("load")
        return self.inner.get(session_id)

    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        self._check("save")
        return self.inner.put(session_id, data, expected)

    def delete(self, session_id: str) -> None:
        self.inner.delete(session_id)


def sink_and_value() -> tuple[rb.PrometheusSink, Callable[..., float]]:
    registry = prometheus_client.CollectorRegistry()

    def value(name: str, **labels: str) -> float:
        got = registry.get_sample_value(name, {"provider": "openai_chat", **labels})
        return 0.0 if got is None else got

    return rb.PrometheusSink(registry), value


@pytest.mark.parametrize("op", ["load", "save"])
def test_a_failing_store_fails_closed_by_default(store: rb.SessionStore, op: str) -> None:
    sink, value = sink_and_value()
    asm = rb.Assembler(CFG, store=FailingStore(store, {op}), sink=sink)
    ledger = rb.SideEffectLedger()
    with pytest.raises(rb.StoreError) as e:
        asm.assemble(SESSION[: ENDS[25]], session_id="s", ledger=ledger)
    assert (e.value.op, e.value.reason) == (op, "ConnectionError: refused")
    assert value("context_assemble_store_error_total", op=op) == 1
    assert value("context_assemble_reject_total", reason="StoreError") == 1
    assert store.get("s") is None


def test_a_store_down_at_load_gives_a_stateless_assembly(store: rb.SessionStore) -> None:
    cfg = rb.AssemblyConfig(**{**CFG.to_dict(), "on_store_error": "stateless"})
    sink, value = sink_and_value()
    asm = rb.Assembler(cfg, store=FailingStore(store, {"load", "save"}), sink=sink)
    res = asm.assemble(SESSION[: ENDS[25]], session_id="s")
    outcome = res.report.store
    assert (outcome.loaded, outcome.saved, outcome.stateless) == ("failed", "not saved", True)
    assert outcome.error == "ConnectionError: refused"
    stateless = rb.Assembler(cfg).assemble(SESSION[: ENDS[25]])
    assert res.messages == stateless.messages and res.state is None
    assert value("context_assemble_store_error_total", op="load") == 1
    assert value("context_assemble_store_error_total", op="save") == 0


def test_a_store_down_at_save_returns_the_assembly_unsaved(store: rb.SessionStore) -> None:
    cfg = rb.AssemblyConfig(**{**CFG.to_dict(), "on_store_error": "stateless"})
    sink, value = sink_and_value()
    rb.Assembler(cfg, store=store).assemble(SESSION[: ENDS[20]], session_id="s")
    saved = store.get("s")
    asm = rb.Assembler(cfg, store=FailingStore(store, {"save"}), sink=sink)
    res = asm.assemble(SESSION[: ENDS[21]], session_id="s")
    assert (res.report.store.loaded, res.report.store.saved) == ("loaded", "not saved")
    assert res.report.state == "reused" and not res.report.store.stateless
    assert value("context_assemble_store_error_total", op="save") == 1
    assert store.get("s") == saved


class ConflictingStore(FailingStore):
    """Every write finds the revision moved on, as under a storm of replicas."""

    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        return None


@pytest.mark.parametrize("policy", ["fail_closed", "stateless"])
def test_a_compare_and_set_storm_is_bounded(store: rb.SessionStore, policy: str) -> None:
    cfg = rb.AssemblyConfig(**{**CFG.to_dict(), "on_store_error": policy})
    sink, value = sink_and_value()
    asm = rb.Assembler(cfg, store=ConflictingStore(store, set()), sink=sink)
    if policy == "fail_closed":
        with pytest.raises(rb.StoreError) as e:
            asm.assemble(SESSION[: ENDS[5]], session_id="s")
        assert (e.value.reason, e.value.op) == ("conflict", "save")
    else:
        res = asm.assemble(SESSION[: ENDS[5]], session_id="s")
        assert res.report.store.saved == "not saved"
        assert res.report.store.conflicts == MAX_CONFLICTS
        assert res.report.store.error == "conflict"
    assert value("context_assemble_store_error_total", op="conflict") == MAX_CONFLICTS


def test_assemble_async_keeps_the_same_session(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    expected = one_process_requests()

    async def run() -> list[Any]:
        return [(await asm.assemble_async(SESSION[:end], session_id="a")).messages for end in ENDS]

    assert asyncio.run(run()) == expected


def test_a_gateway_with_a_store_calls_the_summarizer_once_per_compaction(
    store: rb.SessionStore,
) -> None:
    """The issue's measurement: a stateless gateway summarizes on every over-budget request,
    one with a store only when it compacts."""
    calls = {"stateless": 0, "store": 0}

    def counting(way: str) -> Callable[[rb.SummaryRequest], str]:
        inner = rb.summarizers.extractive()

        def summarize(request: rb.SummaryRequest) -> str:
            calls[way] += 1
            return inner(request)

        return summarize

    cfg = rb.AssemblyConfig(**{**CFG.to_dict(), "model_input_limit": 16_000})
    stateless = rb.Assembler(cfg, summarizer=counting("stateless"))
    replicas = [rb.Assembler(cfg, summarizer=counting("store"), store=store) for _ in range(2)]
    over = compactions = 0
    for turn, end in enumerate(ENDS[-16:]):
        history = SESSION[:end]
        over += rb.count_tokens(history) > cfg.budget
        stateless.assemble(history)
        res = replicas[turn % 2].assemble(history, session_id="gw")
        compactions += res.report.state == "compacted" or res.report.state == "new"
    assert over == 16 and calls["stateless"] == 16
    assert calls["store"] <= compactions <= 4


def test_session_id_is_checked(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    history = SESSION[: ENDS[0]]
    for bad in ("", 5, "x\x00"):
        with pytest.raises(rb.ConfigError) as e:
            asm.assemble(history, session_id=bad)  # type: ignore[arg-type]
        assert e.value.key == "session_id"
    state = rb.Assembler(dataclasses.replace(CFG, cache_stable=True)).assemble(history).state
    with pytest.raises(rb.ConfigError) as e:
        asm.assemble(history, session_id="s", state=state)
    assert e.value.key == "state"
    for key, value in (("ledger", []), ("token_ledger", {})):
        with pytest.raises(rb.ConfigError) as e:
            asm.assemble(history, session_id="s", **{key: value})
        assert e.value.key == key
    assert store.get("s") is None


def test_store_and_policy_are_checked() -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler(CFG, store=object())  # type: ignore[arg-type]
    assert e.value.key == "store"
    with pytest.raises(rb.ConfigError) as e:
        rb.AssemblyConfig(on_store_error="retry")
    assert e.value.key == "on_store_error"
    assert isinstance(rb.Assembler(CFG).store, rb.MemoryStore)


def test_the_new_public_names_are_documented() -> None:
    docs = (REPO / "README.md").read_text() + (REPO / "docs" / "session-store.md").read_text()
    prose = re.sub(r"^```.*?^```", "", docs, flags=re.MULTILINE | re.DOTALL)
    spans = " ".join(re.findall(r"`([^`\n]+)`", prose))
    for name in [*rb.stores.__all__, "StoreError", "StoreOutcome", "on_store_error"]:
        assert re.search(rf"\b{name}\b", spans), name
    assert issubclass(rb.StoreError, rb.RingboundError)
    assert {"MemoryStore", "RedisStore", "SessionStore", "StoreError"} <= set(rb.__all__)


def test_a_refused_request_retried_tighter_saves_the_one_accepted(store: rb.SessionStore) -> None:
    asm = rb.Assembler(CFG, store=store)
    for end in ENDS[:20]:
        asm.assemble(SESSION[:end], session_id="r")
    refused: list[int] = []

    def send(res: rb.AssemblyResult) -> str:
        if not refused:  # the provider counts more than the local estimate, once
            refused.append(res.report.tokens_after)
            raise ValueError(
                f"This model's maximum context length is {res.report.tokens_after - 1} tokens. "
                f"However, your messages resulted in {res.report.tokens_after} tokens."
            )
        return "ok"

    out = rb.with_context_retry(send, asm, SESSION[: ENDS[20]], session_id="r")
    assert out.retries == 1 and out.result.report.tokens_after < refused[0]
    assert out.result.report.store.saved == "saved"
    assert record_of(store, "r").state == out.result.state
