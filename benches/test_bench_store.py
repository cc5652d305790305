"""The session store's cost per turn, as a smoke test in the default run (a short session, one
round, on a redis-server of its own); ``python benches/store_cost.py`` gives the numbers of
docs/session-store.md. The pytest-benchmark group times one turn's load + save."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import store_cost

import ringbound as rb
from ringbound.cli.simulate import agent_session


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    helper: Any = store_cost._redis_server()
    server = helper.RedisServer(helper.need_redis(), Path(tmp_path_factory.mktemp("redis")))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def test_store_cost_measures_every_way(redis_url: str) -> None:
    m = store_cost.measure(redis_url, turns=30, limit=8_000, rounds=1, back_to_back=50)
    assert m["turns"] == 30
    for way in store_cost.WAYS:
        assert len(m["times"][way]) == 30 and min(m["times"][way]) > 0
    assert set(m["overhead"]) == set(m["round_trip"]) == {"MemoryStore", "RedisStore"}
    assert min(m["record_bytes"]) > 0 and len(m["ping"]) == 30
    assert {len(v) for v in m["tight"].values()} == {50}
    assert "| RedisStore |" in store_cost.table(m)


@pytest.mark.benchmark(group="store")
@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_load_and_save_one_turn(benchmark: Any, redis_url: str, kind: str) -> None:
    store = rb.MemoryStore() if kind == "memory" else rb.RedisStore(redis_url, prefix="b:")
    asm = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=8_000, output_reserve_tokens=0), store=store
    )
    asm.assemble(agent_session(30), session_id="s")

    def load_and_save() -> str | None:
        stored = store.get("s")
        assert stored is not None
        return store.put("s", stored.data, stored.revision)

    assert benchmark(load_and_save) is not None
    if isinstance(store, rb.RedisStore):
        store.close()
