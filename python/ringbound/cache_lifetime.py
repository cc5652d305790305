"""Cache lifetime: when a conversation's last request was assembled, and how long the provider
keeps what that request cached.

A prompt cache entry expires a while after the request that wrote or last read it (Anthropic:
five minutes by default, an hour with ``ttl: "1h"``; OpenAI's explicit caching: the request's
``prompt_cache_options.ttl``, 30 minutes). Once it has, the next request writes its whole
prefix again whatever it holds, so a compaction that is due anyway costs no cache write it
would not pay: with ``compact_on_cache_expiry`` the assembler runs it then, down to the
low-water mark, instead of right after a write it would throw away.

``assemble(..., now=...)`` sets the clock for tests and replays; otherwise it is the wall clock.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from .errors import ConfigError

__all__ = ["LIFETIMES", "check_now", "clock", "current", "expired", "lifetime"]

#: Seconds a provider's cache entry outlives the request that last used it, when the config
#: names none (``cache_lifetime_seconds``). Anthropic and Bedrock: the 5-minute default of
#: the markers ringbound writes. OpenAI without ``prompt_cache_options``: the upper end of
#: the "5 to 10 minutes of inactivity" of in-memory retention.
LIFETIMES = {"anthropic": 300.0, "bedrock_converse": 300.0, "openai_chat": 600.0}
LIFETIMES["openai_responses"] = LIFETIMES["openai_chat"]
#: OpenAI's explicit caching: ``prompt_cache_options.ttl`` is ``30m`` ("currently the only
#: supported value").
OPENAI_TTL = "30m"
OPENAI_TTL_SECONDS = 1800.0
#: The latest instant ``now`` may name: far beyond any real clock, and exact as a float.
_NOW_MAX = float(2**40)

_now: ContextVar[float | None] = ContextVar("ringbound_now", default=None)


def check_now(now: Any) -> float | None:
    """``now`` as seconds since the epoch, or None for the wall clock.

    Raises:
        ConfigError: Not a finite number of seconds in [0, 2**40].
    """
    if now is None:
        return None
    if isinstance(now, bool) or not isinstance(now, (int, float)):
        raise _bad_now(f"must be seconds since the epoch (a number), got {type(now).__name__}")
    # An int subclass or a huge int is read as its plain value, never through its own methods.
    try:
        value = int.__index__(now) if isinstance(now, int) else float.__float__(now)
        value = float(value)
    except OverflowError:
        raise _bad_now("must be at most 2**40 seconds") from None
    if not math.isfinite(value) or not 0 <= value <= _NOW_MAX:
        raise _bad_now(f"must be a finite number of seconds in [0, 2**40], got {value!r}")
    return value


@contextlib.contextmanager
def clock(now: Any) -> Iterator[None]:
    """The clock of one ``assemble`` call: ``now`` when given, else the wall clock."""
    token = _now.set(check_now(now))
    try:
        yield
    finally:
        _now.reset(token)


def current() -> float:
    """The time of the assembly running now."""
    value = _now.get()
    return time.time() if value is None else value


def lifetime(provider: str, config: Any) -> float | None:
    """Seconds ``provider``'s cache keeps a prefix after its last use, under ``config``; None
    when it is not known (then nothing is timed against it)."""
    if config.cache_lifetime_seconds is not None:
        return float(config.cache_lifetime_seconds)
    if provider in ("openai_chat", "openai_responses") and config.prompt_cache_mode is not None:
        return OPENAI_TTL_SECONDS
    return LIFETIMES.get(provider)


def expired(assembled_at: float | None, now: float, provider: str, config: Any) -> bool:
    """Whether the cache the request assembled at ``assembled_at`` wrote has expired by
    ``now``. A clock that went backwards (a replay out of order) is not an expiry."""
    span = lifetime(provider, config)
    return assembled_at is not None and span is not None and now - assembled_at >= span


def _bad_now(reason: str) -> ConfigError:
    return ConfigError(f"now {reason}", key="now", reason=reason)
