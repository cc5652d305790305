"""RedisStore on a real redis-server: several processes serving one session round robin send
what one process sends (the same cached-prefix fraction), a server killed mid-run and
restarted, a paused server that every call times out on, expiry, and the client checks."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import prometheus_client
import pytest
import redis

import ringbound as rb
from ringbound.cli.session import Session
from ringbound.cli.simulate import (
    SIDE_EFFECT_TOOLS,
    STATEFUL,
    STATELESS,
    Turn,
    Way,
    _Meter,
    agent_session,
    simulate,
    turn_ends,
)
from ringbound.stores.record import SessionRecord

HERE = Path(__file__).resolve().parent
TURNS, LIMIT = 60, 12_000
CFG = rb.AssemblyConfig(
    model_input_limit=LIMIT,
    output_reserve_tokens=0,
    safety_margin_tokens=0,
    side_effect_tools=SIDE_EFFECT_TOOLS,
)


class Replica:
    """``replica.py`` in a process of its own."""

    def __init__(self, url: str) -> None:
        package = Path(rb.__file__).resolve().parent.parent
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), str(HERE)])}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "replica.py"), url, str(TURNS), str(LIMIT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )

    def serve(self, end: int) -> dict[str, Any]:
        self.send({"session": "round-robin", "end": end})
        return self.receive()

    def send(self, request: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(request) + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"replica exited with {self.proc.wait()}"
        return orjson.loads(line)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def test_processes_serving_one_session_round_robin_cache_like_one_process(
    redis_server: Any,
) -> None:
    session = agent_session(turns=TURNS)
    ends, _ = turn_ends(session)
    sim = simulate(Session(session, None, True), CFG, langchain=False)
    one, stateless = sim.way(STATEFUL), sim.way(STATELESS)
    replicas = [Replica(redis_server.url) for _ in range(3)]
    try:
        served = [replicas[n % 3].serve(end) for n, end in enumerate(ends)]
    finally:
        for r in replicas:
            r.close()
    assert len({s["pid"] for s in served}) == 3
    assert [s["loaded"] for s in served] == ["new"] + ["loaded"] * (len(ends) - 1)
    meter, turns, before = _Meter("openai_chat", CFG.budget, CFG.encoding), [], 0
    for n, (end, s) in enumerate(zip(ends, served, strict=True), 1):
        measured = meter.measure(s["messages"], None, None)
        compacted = s["compactions"] > before
        before = s["compactions"]
        turns.append(Turn(turn=n, history=end, compacted=compacted, state=s["state"], **measured))
    many = Way("3 processes", tuple(turns))
    # Each turn's request is the one a single process passing its state sends, so the
    # cached-prefix fraction is the same, and as high as cache-stable assembly makes it.
    assert [t.tokens for t in many.turns] == [t.tokens for t in one.turns]
    assert many.cached_after_first_compaction == one.cached_after_first_compaction
    assert many.cached_after_first_compaction is not None
    assert stateless.cached_after_first_compaction is not None
    assert many.cached_after_first_compaction > stateless.cached_after_first_compaction + 0.1
    assert many.compactions == one.compactions and many.broken == many.reuse_breaks == 0


def test_processes_writing_one_session_at_once_lose_no_entry(redis_server: Any) -> None:
    session = agent_session(turns=TURNS)
    ends, _ = turn_ends(session)
    replicas = [Replica(redis_server.url) for _ in range(4)]
    store = rb.RedisStore(redis_server.url, prefix="replicas:")
    conflicts = 0
    try:
        for wave in range(5):
            # Four processes serve four turns of one session at the same moment.
            served = ends[10 + 4 * wave : 14 + 4 * wave]
            for n, (r, end) in enumerate(zip(replicas, served, strict=True)):
                r.send({"session": "at-once", "end": end, "executed": f"wave{wave}-replica{n}"})
            answers = [r.receive() for r in replicas]
            conflicts += sum(a["conflicts"] for a in answers)
            assert all(a["saved"] in ("saved", "merged") for a in answers)
            stored = store.get("at-once")
            assert stored is not None
            record = SessionRecord.from_bytes(stored.data)
            calls = {e.call_id for e in record.ledger}
            assert {f"wave{w}-replica{n}" for w in range(wave + 1) for n in range(4)} <= calls
            assert record.history == max(served)
    finally:
        for r in replicas:
            r.close()
        store.close()
    # Not asserted: how often the processes collided (that is the scheduler's), only that
    # nothing was lost when they did.
    print(f"{conflicts} compare-and-sets lost in 5 waves of 4 processes")


def test_a_server_killed_mid_run_and_restarted(own_redis_server: Any) -> None:
    session = agent_session(turns=40)
    ends, _ = turn_ends(session)
    registry = prometheus_client.CollectorRegistry()
    sink = rb.PrometheusSink(registry)
    store = rb.RedisStore(own_redis_server.url, timeout_s=0.5)
    strict = rb.Assembler(CFG, store=store, sink=sink)
    lenient = rb.Assembler(dataclasses.replace(CFG, on_store_error="stateless"), store=store)
    for end in ends[:20]:
        strict.assemble(session[:end], session_id="k")
    before = store.get("k")
    assert before is not None
    own_redis_server.kill()
    started = time.monotonic()
    with pytest.raises(rb.StoreError) as e:
        strict.assemble(session[: ends[20]], session_id="k")
    assert e.value.op == "load" and "ConnectionError" in e.value.reason
    res = lenient.assemble(session[: ends[20]], session_id="k")
    assert time.monotonic() - started < 5
    assert res.report.store.stateless and res.report.store.loaded == "failed"
    assert res.report.tokens_after <= CFG.budget
    assert (
        registry.get_sample_value(
            "context_assemble_store_error_total", {"provider": "openai_chat", "op": "load"}
        )
        == 1
    )
    own_redis_server.start()
    # The record written before the crash is back (append-only file), and the run goes on
    # from it: the cut is reused, not planned anew.
    assert store.get("k") == before
    res = strict.assemble(session[: ends[21]], session_id="k")
    assert res.report.store.loaded == "loaded" and res.report.state in ("reused", "compacted")
    for end in ends[22:]:
        assert strict.assemble(session[:end], session_id="k").report.store.saved == "saved"


def test_every_call_times_out_on_a_paused_server(own_redis_server: Any) -> None:
    store = rb.RedisStore(own_redis_server.url, timeout_s=0.2)
    store.put("p", b"x", expected=None)
    own_redis_server.pause()
    try:
        for call in (
            lambda: store.get("p"),
            lambda: store.put("p", b"y", None),
            lambda: store.delete("p"),
        ):
            started = time.monotonic()
            with pytest.raises(rb.StoreError) as e:
                call()
            assert time.monotonic() - started < 1.0
            assert e.value.reason.startswith("TimeoutError")
    finally:
        own_redis_server.resume()


def test_a_record_expires_in_redis(redis_server: Any) -> None:
    store = rb.RedisStore(redis_server.url, prefix="ttl:", ttl_s=30)
    session = agent_session(turns=5)
    rb.Assembler(CFG, store=store).assemble(session, session_id="e")
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert 29_000 < client.pttl("ttl:e") <= 30_000
        client.pexpire("ttl:e", 50)
        time.sleep(0.2)
        assert store.get("e") is None
        res = rb.Assembler(CFG, store=store).assemble(session, session_id="e")
        assert res.report.store.loaded == "new"
        assert rb.RedisStore(redis_server.url, prefix="ttl:", ttl_s=None).put("forever", b"x", None)
        assert client.pttl("ttl:forever") == -1
    finally:
        client.close()


def test_a_client_may_be_given_if_it_has_a_timeout(redis_server: Any) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.RedisStore(redis.Redis.from_url(redis_server.url, socket_timeout=None))
    assert e.value.key == "url_or_client"
    client = redis.Redis.from_url(redis_server.url, socket_timeout=1, decode_responses=True)
    store = rb.RedisStore(client, prefix="client:")
    revision = store.put("s", b'{"json": true}', None)
    assert store.get("s") == rb.stores.Stored(revision, b'{"json": true}')  # type: ignore[arg-type]
    client.close()


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"url_or_client": "http://nope"}, "url_or_client"),
        ({"url_or_client": 42}, "url_or_client"),
        ({"url_or_client": "redis://127.0.0.1:1", "ttl_s": 0}, "ttl_s"),
        ({"url_or_client": "redis://127.0.0.1:1", "timeout_s": None}, "timeout_s"),
        ({"url_or_client": "redis://127.0.0.1:1", "prefix": b"p"}, "prefix"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.RedisStore(**kwargs)
    assert e.value.key == key


def test_a_key_of_another_type_is_a_store_error(redis_server: Any) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.set("other:s", "a string someone else wrote")
    store = rb.RedisStore(redis_server.url, prefix="other:")
    with pytest.raises(rb.StoreError) as e:
        store.get("s")
    assert e.value.reason.startswith("ResponseError: WRONGTYPE")
    client.close()
