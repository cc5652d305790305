"""Fixtures of the session-store tests: a real ``redis-server`` on a free loopback port with a
temporary directory, started and stopped by the tests, and the ``store`` fixture that runs
one contract suite against MemoryStore and RedisStore alike.

A missing ``redis-server`` or redis-py fails the Redis tests (see ``redis_server.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from redis_server import RedisServer, need_redis

import ringbound as rb


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server shared by the tests that do not kill it."""
    server = RedisServer(need_redis(), tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own, for tests that kill, pause or restart it."""
    server = RedisServer(need_redis(), tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


StoreFactory = Callable[..., rb.SessionStore]


@pytest.fixture(params=["memory", "redis"])
def make_store(request: pytest.FixtureRequest) -> StoreFactory:
    """Builds stores of one kind; every store of one test shares its sessions (a Redis one
    under a prefix of the test's own), as replicas pointing at one server do."""
    if request.param == "memory":
        shared = rb.MemoryStore()
        made: dict[Any, rb.MemoryStore] = {}

        def memory(ttl_s: float | None = None) -> rb.SessionStore:
            if ttl_s is None:
                return shared
            return made.setdefault(ttl_s, rb.MemoryStore(ttl_s=ttl_s))

        return memory
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"test:{uuid.uuid4().hex}:"

    def redis_store(ttl_s: float | None = None) -> rb.SessionStore:
        return rb.RedisStore(server.url, prefix=prefix, ttl_s=ttl_s)

    return redis_store


@pytest.fixture
def store(make_store: StoreFactory) -> rb.SessionStore:
    return make_store()
