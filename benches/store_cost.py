"""What a session store costs per turn: a gateway serving the generated 300-turn coding
session turn by turn, assembled three ways in one run: one process passing ``res.state`` and
its side-effect ledger back (the anchor: no store), ``session_id`` on a ``MemoryStore``, and
``session_id`` on a ``RedisStore`` over loopback. Per turn, the three are timed in rotating
order and the store's cost is the paired difference with the anchor; the bare load + save of
that turn's record is timed too. p50 and p99 over the turns and rounds; markdown on stdout.

    python benches/store_cost.py [--url redis://127.0.0.1:6379/0] [--turns 300] [--rounds 3]
                                 [--appendfsync off|always|everysec|no]

Without ``--url`` it starts a redis-server of its own (the Debian package) on a free loopback
port (without an append-only file unless ``--appendfsync`` asks for one, so the numbers are
the store's and the network's, not the disk's), and stops it at the end."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ringbound as rb
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session, turn_ends
from ringbound.stores.record import SessionRecord

WAYS = ("state passed (anchor)", "MemoryStore", "RedisStore")


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered) - 1e-9) - 1)]


def measure(
    url: str, turns: int = 300, limit: int = 30_000, rounds: int = 3, back_to_back: int = 2000
) -> dict[str, Any]:
    """Per-turn wall times (seconds) of each way, the paired store overheads, and the bare
    load + save round of each store."""
    session = agent_session(turns)
    ends, _ = turn_ends(session)
    cfg = rb.AssemblyConfig(
        model_input_limit=limit,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=SIDE_EFFECT_TOOLS,
    )
    times: dict[str, list[float]] = {w: [] for w in WAYS}
    overhead: dict[str, list[float]] = {w: [] for w in WAYS[1:]}
    round_trip: dict[str, list[float]] = {w: [] for w in WAYS[1:]}
    record_bytes: list[int] = []
    #: One PING of the same client: a bare round trip, the floor of any Redis call.
    ping: list[float] = []
    #: Load + save of the last turn's record back to back, nothing else running between them.
    tight: dict[str, list[float]] = {}
    redis_store = rb.RedisStore(url, prefix=f"bench:{os.getpid()}:", ttl_s=3600, timeout_s=1)
    try:
        for r in range(rounds):
            anchor = rb.Assembler(dataclasses.replace(cfg, cache_stable=True))
            stores: dict[str, rb.SessionStore] = {
                "MemoryStore": rb.MemoryStore(),
                "RedisStore": redis_store,
            }
            with_store = {w: rb.Assembler(cfg, store=s) for w, s in stores.items()}
            state, ledger = None, rb.SideEffectLedger()
            sid = f"round-{r}"
            for n, end in enumerate(ends):
                history = session[:end]
                took: dict[str, float] = {}
                # Rotate the order so no way always runs on the caches another one warmed.
                for k in range(len(WAYS)):
                    way = WAYS[(n + k) % len(WAYS)]
                    start = time.perf_counter()
                    if way == WAYS[0]:
                        res = anchor.assemble(history, state=state, ledger=ledger)
                        state = res.state
                    else:
                        res = with_store[way].assemble(history, session_id=sid)
                        assert res.report.store.saved == "saved"
                    took[way] = time.perf_counter() - start
                    assert res.report.tokens_after <= cfg.budget
                for way, t in took.items():
                    times[way].append(t)
                for way in overhead:
                    overhead[way].append(took[way] - took[WAYS[0]])
                for way, store in stores.items():
                    start = time.perf_counter()
                    stored = store.get(sid)
                    assert stored is not None
                    record = SessionRecord.from_bytes(stored.data)
                    assert store.put(sid, record.to_bytes(), stored.revision) is not None
                    round_trip[way].append(time.perf_counter() - start)
                    if way == "RedisStore":
                        record_bytes.append(len(stored.data))
                start = time.perf_counter()
                redis_store.client.ping()
                ping.append(time.perf_counter() - start)
            if r == rounds - 1:
                for way, store in stores.items():
                    tight[way] = _tight_loop(store, sid, back_to_back)
            redis_store.delete(sid)
    finally:
        redis_store.close()
    return {
        "turns": len(ends),
        "rounds": rounds,
        "budget": cfg.budget,
        "times": times,
        "overhead": overhead,
        "round_trip": round_trip,
        "record_bytes": record_bytes,
        "ping": ping,
        "tight": tight,
    }


def _tight_loop(store: rb.SessionStore, sid: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        stored = store.get(sid)
        assert stored is not None
        record = SessionRecord.from_bytes(stored.data)
        assert store.put(sid, record.to_bytes(), stored.revision) is not None
        out.append(time.perf_counter() - start)
    return out


def table(m: dict[str, Any]) -> str:
    us = 1e6
    lines = [
        f"agent_session({m['turns']}) turn by turn at a {m['budget']:,}-token budget, "
        f"{m['rounds']} rounds ({m['turns'] * m['rounds']} turns per way); "
        f"Python {platform.python_version()}, {platform.machine()}",
        "",
        "| way | p50 per turn (µs) | p99 per turn (µs) | store cost p50 (µs) | "
        "store cost p99 (µs) | load + save alone p50 / p99 (µs) | back to back p50 / p99 (µs) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for way in WAYS:
        t = m["times"][way]
        row = f"| {way} | {quantile(t, 0.5) * us:,.0f} | {quantile(t, 0.99) * us:,.0f} |"
        if way in m["overhead"]:
            o, rt, tl = m["overhead"][way], m["round_trip"][way], m["tight"][way]
            row += (
                f" {quantile(o, 0.5) * us:,.0f} | {quantile(o, 0.99) * us:,.0f} |"
                f" {quantile(rt, 0.5) * us:,.0f} / {quantile(rt, 0.99) * us:,.0f} |"
                f" {quantile(tl, 0.5) * us:,.0f} / {quantile(tl, 0.99) * us:,.0f} |"
            )
        else:
            row += " (anchor) | | | |"
        lines.append(row)
    sizes, ping = m["record_bytes"], m["ping"]
    lines += [
        "",
        f"Redis PING round trip (the anchor of a Redis call): p50 {quantile(ping, 0.5) * us:,.0f}"
        f" µs, p99 {quantile(ping, 0.99) * us:,.0f} µs; a turn's load + save is two round "
        "trips (HMGET, then the compare-and-set script).",
        f"Record size: median {statistics.median(sizes):,.0f} bytes, max {max(sizes):,} bytes.",
        "Store cost: the turn's time with session_id minus the anchor's time for the same turn "
        "(paired), so it includes the record's decoding, encoding, and the round trips. "
        "Load + save alone: the same turn's get, decode, encode and compare-and-set, after its "
        f"assemblies; back to back: {len(next(iter(m['tight'].values()))):,} of them in a row on "
        "the last record.",
    ]
    return "\n".join(lines)


def _redis_server() -> Callable[[], Any]:
    """tests/stores/redis_server.py's RedisServer, loaded by path (it is test tooling)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "stores" / "redis_server.py"
    spec = importlib.util.spec_from_file_location("redis_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["redis_server"] = module
    spec.loader.exec_module(module)
    return module  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a Redis or Valkey URL; default: start a redis-server")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--appendfsync",
        choices=("off", "always", "everysec", "no"),
        default="off",
        help="the append-only file of the redis-server it starts: off (none, the default), "
        "or its fsync policy",
    )
    args = parser.parse_args()
    server = None
    url = args.url
    with tempfile.TemporaryDirectory() as workdir:
        if url is None:
            helper: Any = _redis_server()
            fsync = None if args.appendfsync == "off" else args.appendfsync
            server = helper.RedisServer(helper.need_redis(), Path(workdir), fsync)
            server.start()
            url = server.url
        try:
            print(table(measure(url, turns=args.turns, rounds=args.rounds)))
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
