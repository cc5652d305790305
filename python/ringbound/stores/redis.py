"""A session store on Redis (or Valkey, which speaks the same protocol), for gateways with
several replicas: one hash per session holding the record and its revision, replaced by a Lua
script that compares the revision and writes in one step. Every call has a timeout; a failure
is a ``StoreError``, never a hang."""

from __future__ import annotations

import os
from typing import Any

from ..caller_values import is_utf8, shown
from ..errors import ConfigError, StoreError
from .base import (
    MAX_TIMEOUT_S,
    MAX_TTL_S,
    MIN_TIMEOUT_S,
    MIN_TTL_S,
    SessionStore,
    Stored,
    check_put,
    check_seconds,
    check_session_id,
)

__all__ = ["RedisStore"]

# Writes only while the stored revision is the one the writer read ('' = no record), then
# (re)arms the expiry. One key, so it runs on one node of a cluster.
_COMPARE_AND_SET = """
local current = redis.call('HGET', KEYS[1], 'rev')
if current == false then current = '' end
if current ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'data', ARGV[3])
if ARGV[4] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"""


class RedisStore(SessionStore):
    """Sessions in Redis or Valkey, shared by every replica that points at the same server.

    Needs the ``redis`` extra (``pip install 'ringbound[redis]'``, redis-py).

    Args:
        url_or_client: A ``redis://`` / ``rediss://`` / ``unix://`` URL, or a redis-py client
            (``redis.Redis`` or ``redis.cluster.RedisCluster``) made with a ``socket_timeout``.
        prefix: Put before every session id to make its key (``{prefix}{session_id}``).
        ttl_s: Seconds a session lives after its last write, from 1 to ten years
            (``MIN_TTL_S``, ``MAX_TTL_S``); None: no expiry.
        timeout_s: Timeout of every call (connect and read) of a client made from a URL,
            from 0.001 to 3600 seconds.

    Raises:
        ConfigError: redis-py is not installed, an argument is out of range, or a client
            was given without a socket timeout.
    """

    def __init__(
        self,
        url_or_client: Any,
        *,
        prefix: str = "ringbound:session:",
        ttl_s: float | None = 7 * 24 * 3600,
        timeout_s: float = 0.5,
    ) -> None:
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError:
            raise ConfigError(
                "RedisStore needs redis-py: pip install 'ringbound[redis]'",
                key="store",
                reason="redis-py is not installed",
            ) from None
        if not isinstance(prefix, str) or not is_utf8(str.__str__(prefix)):
            raise ConfigError(
                f"prefix must be a UTF-8 string, got {shown(prefix)}",
                key="prefix",
                reason="must be a UTF-8 string",
            )
        ttl_s = check_seconds("ttl_s", ttl_s, MIN_TTL_S, MAX_TTL_S, optional=True)
        timeout_s = check_seconds(
            "timeout_s", timeout_s, MIN_TIMEOUT_S, MAX_TIMEOUT_S, optional=False
        )
        self.prefix = str.__str__(prefix)
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self._ttl_ms = "0" if ttl_s is None else str(max(1, round(ttl_s * 1000)))
        self._errors: tuple[type[BaseException], ...] = (redis.RedisError, OSError)
        if isinstance(url_or_client, str):
            try:
                # One reconnect on a dropped connection (a restarted server), none on a
                # timeout: a slow server costs one timeout, not several.
                self.client = redis.Redis.from_url(
                    url_or_client,
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                    retry=Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                )
            except ValueError as e:
                raise ConfigError(
                    f"not a Redis URL: {e}", key="url_or_client", reason="not a Redis URL"
                ) from None
        elif callable(getattr(url_or_client, "register_script", None)):
            self.client = url_or_client
            self._check_client_timeout()
        else:
            raise ConfigError(
                f"url_or_client must be a Redis URL or a redis-py client, got "
                f"{type(url_or_client).__name__}",
                key="url_or_client",
                reason="must be a URL or a redis-py client",
            )
        self._owned = isinstance(url_or_client, str)
        self._cas = self.client.register_script(_COMPARE_AND_SET)

    def close(self) -> None:
        """Closes the connections of a client this store made from a URL (a client given
        stays the caller's to close)."""
        if self._owned:
            self.client.close()

    def __enter__(self) -> RedisStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_client_timeout(self) -> None:
        pools = [getattr(self.client, "connection_pool", None)]
        nodes = getattr(self.client, "get_nodes", None)
        if pools[0] is None and callable(nodes):
            pools = [
                getattr(getattr(n, "redis_connection", None), "connection_pool", None)
                for n in nodes()
            ]
        for pool in pools:
            kwargs = getattr(pool, "connection_kwargs", None)
            if isinstance(kwargs, dict) and kwargs.get("socket_timeout") is None:
                raise ConfigError(
                    "the Redis client has no socket_timeout: a dead server would hang the "
                    "request; make it with socket_timeout=... (or pass a URL)",
                    key="url_or_client",
                    reason="client without socket_timeout",
                )

    def __repr__(self) -> str:
        return f"RedisStore(prefix={self.prefix!r}, ttl_s={self.ttl_s}, timeout_s={self.timeout_s})"

    def key(self, session_id: str) -> str:
        """The Redis key of a session."""
        return self.prefix + check_session_id(session_id)

    def _failed(self, op: str, e: BaseException) -> StoreError:
        reason = f"{type(e).__name__}: {e}"
        return StoreError(f"the Redis session store failed to {op}: {reason}", reason=reason, op=op)

    def get(self, session_id: str) -> Stored | None:
        key = self.key(session_id)
        try:
            revision, data = self.client.hmget(key, ["rev", "data"])
        except self._errors as e:
            raise self._failed("load", e) from None
        if revision is None or data is None:
            return None
        # A client made with decode_responses=True answers str; the record is UTF-8 JSON.
        if isinstance(data, str):
            data = data.encode()
        return Stored(revision.decode() if isinstance(revision, bytes) else str(revision), data)

    def put(self, session_id: str, data: bytes, expected: str | None) -> str | None:
        key = self.key(session_id)
        check_put(data, expected)
        revision = os.urandom(12).hex()
        try:
            written = self._cas(keys=[key], args=[expected or "", revision, data, self._ttl_ms])
        except self._errors as e:
            raise self._failed("save", e) from None
        return revision if written == 1 else None

    def delete(self, session_id: str) -> None:
        key = self.key(session_id)
        try:
            self.client.delete(key)
        except self._errors as e:
            raise self._failed("delete", e) from None
