"""Issue 36, finding 8: a store's options and session ids out of range or unreadable are a
``ConfigError`` naming the option and the value when the store is made or called, never an
``OverflowError`` or ``UnicodeEncodeError`` on a live request, and never a store that takes
them and then fails every save (a ttl past any expiry) or forgets every session (a ttl of a
nanosecond). No server is needed: nothing here connects."""

from __future__ import annotations

from typing import Any

import pytest

import ringbound as rb
from ringbound.stores.base import MAX_TIMEOUT_S, MAX_TTL_S, MIN_TIMEOUT_S, MIN_TTL_S

URL = "redis://127.0.0.1:1/0"
OUT_OF_RANGE = [float("inf"), float("-inf"), float("nan"), 1e300, 2**70, 1e-9, 0, -1, True, "60"]


@pytest.mark.parametrize("ttl_s", OUT_OF_RANGE)
def test_a_ttl_out_of_range_is_refused_by_both_stores(ttl_s: Any) -> None:
    for make in (lambda: rb.RedisStore(URL, ttl_s=ttl_s), lambda: rb.MemoryStore(ttl_s=ttl_s)):
        with pytest.raises(rb.ConfigError) as e:
            make()
        assert e.value.key == "ttl_s" and "ttl_s" in str(e.value)


@pytest.mark.parametrize("timeout_s", [*OUT_OF_RANGE, None])
def test_a_timeout_out_of_range_is_refused(timeout_s: Any) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.RedisStore(URL, timeout_s=timeout_s)
    assert e.value.key == "timeout_s" and "timeout_s" in str(e.value)


def test_the_bounds_themselves_are_accepted() -> None:
    for ttl_s in (MIN_TTL_S, MAX_TTL_S, None, 7 * 24 * 3600, 1.5):
        assert rb.RedisStore(URL, ttl_s=ttl_s).ttl_s == ttl_s
        assert rb.MemoryStore(ttl_s=ttl_s).ttl_s == ttl_s
    for timeout_s in (MIN_TIMEOUT_S, MAX_TIMEOUT_S, 0.5):
        assert rb.RedisStore(URL, timeout_s=timeout_s).timeout_s == timeout_s
    # The longest ttl is an expiry Redis keeps: milliseconds from now fit in 64 bits.
    assert MAX_TTL_S * 1000 + 2**41 < 2**63


def test_a_stateless_assembler_does_not_turn_a_bad_store_option_into_a_crash() -> None:
    """The option is refused when the store is made, before any assembly can take it."""
    with pytest.raises(rb.ConfigError):
        rb.Assembler(
            rb.AssemblyConfig(on_store_error="stateless"),
            store=rb.RedisStore(URL, timeout_s=float("inf")),
        )


@pytest.mark.parametrize("prefix", ["p\ud800", b"p", 7])
def test_a_prefix_that_is_not_utf8_text_is_refused(prefix: Any) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.RedisStore(URL, prefix=prefix)
    assert e.value.key == "prefix"


class HostileStr(str):
    def __hash__(self) -> int:
        raise RuntimeError("__hash__")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("__eq__")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__")


@pytest.mark.parametrize("session_id", ["s\ud800", HostileStr("\ud800"), object(), ""])
def test_a_bad_session_id_is_refused_before_the_store_is_called(session_id: Any) -> None:
    redis_store = rb.RedisStore(URL)
    memory = rb.MemoryStore()
    for call in (
        lambda: redis_store.get(session_id),
        lambda: redis_store.put(session_id, b"x", None),
        lambda: redis_store.delete(session_id),
        lambda: memory.get(session_id),
        lambda: memory.put(session_id, b"x", None),
        lambda: memory.delete(session_id),
    ):
        with pytest.raises(rb.ConfigError) as e:
            call()
        assert e.value.key == "session_id"


def test_a_str_subclass_session_id_is_kept_as_the_plain_str_it_holds() -> None:
    store = rb.MemoryStore()
    revision = store.put(HostileStr("s-1"), b"x", None)
    assert store.get("s-1") == rb.stores.Stored(revision, b"x")  # type: ignore[arg-type]
    assert rb.RedisStore(URL, prefix=HostileStr("p:")).key(HostileStr("s")) == "p:s"
