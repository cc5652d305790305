"""One flow, written once, run by a sync caller or awaited by an async one.

An assembly waits on things that may be sync or async: the summarizer, the session store, a
provider's count API. Each flow that waits is a generator: it yields an ``Effect`` (what it
needs done), is sent the effect's result, or has the effect's error raised where it waited,
and returns its own result. ``run`` performs each effect in the calling thread, ``arun``
awaits it; ``yield from`` nests one flow in another (a session's load and save around an
assembly, a count gate's recounts around it).

Errors are raised inside the flow, not around it, so its ``with`` blocks (the metrics and the
span of an assembly, a ledger kept whatever happens) see the error a direct call would have
raised, and a flow can catch the errors it handles (a lost compare-and-set, a stale state).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol, TypeVar

__all__ = ["Effect", "Flow", "arun", "run"]

T = TypeVar("T")


class Effect(Protocol):
    """Something a flow needs done, which knows how to do itself either way."""

    def run(self) -> Any:
        """The result, computed in the calling thread."""

    async def arun(self) -> Any:
        """The result, awaited (sync work goes to a worker thread where it may block)."""


Flow = Generator[Effect, Any, T]


def run(flow: Flow[T]) -> T:
    """The flow's result, each effect run in the calling thread."""
    reply: tuple[Any, BaseException | None] = (None, None)
    while True:
        done, value = _advance(flow, reply)
        if done:
            return value  # type: ignore[no-any-return]
        try:
            reply = (value.run(), None)
        except BaseException as e:  # raised inside the flow, where it waited
            reply = (None, e)


async def arun(flow: Flow[T]) -> T:
    """``run`` for async callers: each effect is awaited."""
    reply: tuple[Any, BaseException | None] = (None, None)
    while True:
        done, value = _advance(flow, reply)
        if done:
            return value  # type: ignore[no-any-return]
        try:
            reply = (await value.arun(), None)
        except BaseException as e:  # raised inside the flow, where it waited
            reply = (None, e)


def _advance(flow: Flow[Any], reply: tuple[Any, BaseException | None]) -> tuple[bool, Any]:
    """(True, the flow's result) once it returns, else (False, the next effect)."""
    value, error = reply
    try:
        return False, flow.send(value) if error is None else flow.throw(error)
    except StopIteration as stop:
        return True, stop.value
