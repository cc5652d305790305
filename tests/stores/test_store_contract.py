"""The SessionStore contract, run against every store (``make_store`` is MemoryStore and
RedisStore on a real redis-server): records round-trip, ``put`` writes only over the revision
it names, revisions never come back, sessions are isolated, records expire, and concurrent
read-modify-write loops lose no update."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import orjson
import pytest

import ringbound as rb
from ringbound.stores.base import MAX_SESSION_ID

StoreFactory = Callable[..., rb.SessionStore]


def test_an_unknown_session_has_no_record(store: rb.SessionStore) -> None:
    assert store.get("never-written") is None


def test_a_record_round_trips_byte_for_byte(store: rb.SessionStore) -> None:
    data = bytes(range(256)) * 4096  # every byte value, 1 MiB
    revision = store.put("s", data, expected=None)
    assert isinstance(revision, str) and revision
    assert store.get("s") == rb.stores.Stored(revision, data)


def test_put_writes_only_over_the_revision_it_names(store: rb.SessionStore) -> None:
    first = store.put("s", b"one", expected=None)
    assert first is not None
    assert store.put("s", b"again from scratch", expected=None) is None
    assert store.put("s", b"a guess", expected="not-a-revision") is None
    assert store.get("s") == rb.stores.Stored(first, b"one")
    second = store.put("s", b"two", expected=first)
    assert second is not None and second != first
    assert store.put("s", b"lost update", expected=first) is None
    assert store.get("s") == rb.stores.Stored(second, b"two")


def test_a_revision_is_never_reused_after_delete(store: rb.SessionStore) -> None:
    old = store.put("s", b"old", expected=None)
    store.delete("s")
    store.delete("s")  # deleting nothing is not an error
    assert store.get("s") is None
    new = store.put("s", b"new", expected=None)
    assert new is not None and new != old
    # A replica still holding the revision it read before the delete cannot write.
    assert store.put("s", b"stale writer", expected=old) is None
    assert store.get("s") == rb.stores.Stored(new, b"new")


@pytest.mark.parametrize(
    "ids",
    [
        ["a", "a:b", "A", "a "],
        ["{tag}x", "{tag}y", "{tag}"],
        ["ü 空白", "\n", "x" * MAX_SESSION_ID],
    ],
)
def test_sessions_are_isolated(store: rb.SessionStore, ids: list[str]) -> None:
    revisions = {i: store.put(i, i.encode(), expected=None) for i in ids}
    for i in ids:
        assert store.get(i) == rb.stores.Stored(revisions[i], i.encode())  # type: ignore[arg-type]
    store.delete(ids[0])
    assert store.get(ids[0]) is None
    assert all(store.get(i) is not None for i in ids[1:])


def test_a_record_expires_ttl_after_its_last_write(make_store: StoreFactory) -> None:
    store = make_store(ttl_s=1)  # the shortest a store takes (MIN_TTL_S)
    first = store.put("s", b"x", expected=None)
    time.sleep(0.6)
    assert store.put("s", b"y", expected=first) is not None  # re-arms the expiry
    time.sleep(0.6)
    assert store.get("s") is not None
    time.sleep(0.7)
    assert store.get("s") is None
    assert store.put("s", b"z", expected=first) is None
    assert store.put("s", b"z", expected=None) is not None


def test_concurrent_read_modify_write_loses_no_update(store: rb.SessionStore) -> None:
    threads, rounds = 8, 25
    start = threading.Barrier(threads)
    conflicts = [0] * threads

    def bump(n: int) -> None:
        start.wait()
        for _ in range(rounds):
            while True:
                stored = store.get("counter")
                value = 0 if stored is None else orjson.loads(stored.data)["value"]
                body = orjson.dumps({"value": value + 1})
                if store.put("counter", body, None if stored is None else stored.revision):
                    break
                conflicts[n] += 1

    workers = [threading.Thread(target=bump, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stored = store.get("counter")
    assert stored is not None and orjson.loads(stored.data)["value"] == threads * rounds


def test_the_async_methods_keep_the_same_rules(store: rb.SessionStore) -> None:
    async def run() -> None:
        first = await store.aput("s", b"one", None)
        assert first is not None
        assert await store.aput("s", b"lost", None) is None
        assert await store.aget("s") == rb.stores.Stored(first, b"one")
        await store.adelete("s")
        assert await store.aget("s") is None

    asyncio.run(run())


@pytest.mark.parametrize("session_id", [None, "", 5, b"s", "x" * (MAX_SESSION_ID + 1), "a\x00b"])
def test_a_bad_session_id_is_a_config_error(store: rb.SessionStore, session_id: object) -> None:
    for call in (
        lambda: store.get(session_id),  # type: ignore[arg-type]
        lambda: store.put(session_id, b"x", None),  # type: ignore[arg-type]
        lambda: store.delete(session_id),  # type: ignore[arg-type]
    ):
        with pytest.raises(rb.ConfigError) as e:
            call()
        assert e.value.key == "session_id"


@pytest.mark.parametrize(
    ("data", "expected", "key"), [("text", None, "data"), (b"x", 5, "expected")]
)
def test_bad_put_arguments_are_config_errors(
    store: rb.SessionStore, data: object, expected: object, key: str
) -> None:
    with pytest.raises(rb.ConfigError) as e:
        store.put("s", data, expected)  # type: ignore[arg-type]
    assert e.value.key == key
    assert store.get("s") is None
