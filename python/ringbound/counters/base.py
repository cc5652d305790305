"""What every provider counter shares: a deadline on each call, sync and async clients, and one
error type for whatever went wrong. A provider module says only how to build the SDK call from
an assembled request and where the count is in the answer."""

from __future__ import annotations

import asyncio
import inspect
import math
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import orjson

from ..errors import ConfigError, CounterError

__all__ = ["DEFAULT_TIMEOUT_S", "Counter", "plain"]

#: Seconds a count may take before the assembler falls back to its local estimate. A count
#: API answers in about 100-300 ms from the same region; two seconds covers a slow tail.
DEFAULT_TIMEOUT_S = 2.0

# Sync counts through an SDK without a per-call timeout (boto3) run on these threads, so the
# deadline holds whatever the SDK does inside. The HTTP SDKs take the timeout per call and run
# in the caller's thread: on a loaded machine the hand-off to a pool thread cost more than the
# call itself (docs/calibration.md).
_POOL_THREADS = 16
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="ringbound-count")
        return _pool


def _dump(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def plain(value: Any) -> Any:
    """``value`` as plain JSON data, SDK objects (pydantic models) dumped the way the SDK sends
    them, at any depth. One orjson round trip: a walk in Python cost more than the SDK call
    it prepared. The caller's objects are never modified.

    Raises:
        CounterError: Something in ``value`` is not JSON (``reason`` ``malformed``).
    """
    try:
        return orjson.loads(orjson.dumps(value, default=_dump))
    except TypeError as e:
        raise CounterError(
            f"the request holds a value that is not JSON ({e})", reason="malformed"
        ) from None


def _timeout_reason(error: BaseException) -> bool:
    # SDKs name their timeouts differently (APITimeoutError, httpx.ReadTimeout,
    # botocore ReadTimeoutError); none of them share a base class ringbound could import.
    return isinstance(error, TimeoutError) or "Timeout" in type(error).__name__


class Counter:
    """The provider's own input-token count of an assembled request, through its official SDK.

    Subclasses (one per provider, built by ``ringbound.counters.openai`` and the others) set
    ``formats`` and implement ``_request``, ``_call``/``_acall`` and ``_tokens``.

    Attributes:
        client: The SDK client given.
        model: The model the count is for (counts differ between models).
        timeout_s: Seconds one count may take; past it, ``CounterError(reason="timeout")``.
        formats: Request formats (``Assembler`` provider keys) this counter reads.
        is_async: Whether the client is the SDK's async one (then only ``acount`` works).
    """

    formats: tuple[str, ...] = ()
    #: The name of the counter in reports and metrics.
    name: str = ""
    #: Whether the SDK enforces ``timeout_s`` on each call itself (then a sync count runs in
    #: the caller's thread); otherwise a pool thread is waited for at most ``timeout_s``.
    sdk_deadline: bool = True

    def __init__(self, client: Any, *, model: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError(
                f"model must be a non-empty string, got {model!r}",
                key="model",
                reason="must be a non-empty string",
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout < math.inf
        ):
            raise ConfigError(
                f"timeout must be a positive number of seconds, got {timeout!r}",
                key="timeout",
                reason="must be a positive number of seconds",
            )
        self.client = client
        self.model = model
        self.timeout_s = float(timeout)
        self._sdk = self._prepare(client)
        method = self._method()
        if not callable(method):
            raise ConfigError(
                f"{type(client).__name__} is not a {self.name} SDK client",
                key="counter",
                reason=f"needs the official {self.name} client",
            )
        self.is_async = inspect.iscoroutinefunction(method)

    def __repr__(self) -> str:
        return f"ringbound.counters.{self.name}(model={self.model!r}, timeout={self.timeout_s})"

    def _prepare(self, client: Any) -> Any:
        """The client the counts go through (the one given, or a copy with other options)."""
        return client

    def _method(self) -> Any:
        """The SDK's bound count method (its coroutine function for an async client)."""
        raise NotImplementedError

    def _target(self) -> Callable[..., Any]:
        """What a count calls with ``_request``'s keyword arguments: ``_method`` unless a
        provider needs another entry of the same client."""
        return self._method()  # type: ignore[no-any-return]

    def _request(
        self, messages: list[Any], tools: list[Any] | None, system: Any, fmt: str
    ) -> dict[str, Any]:
        """The keyword arguments of the SDK call for a request in format ``fmt``."""
        raise NotImplementedError

    def _tokens(self, answer: Any) -> Any:
        """The input-token count in the SDK's answer."""
        raise NotImplementedError

    def check_format(self, fmt: str) -> str:
        """``fmt`` if this counter reads it, else ConfigError naming the formats it reads."""
        if fmt not in self.formats:
            raise ConfigError(
                f"the {self.name} counter reads {', '.join(self.formats)} requests, not {fmt}",
                key="counter",
                reason=f"reads {', '.join(self.formats)}",
            )
        return fmt

    def count(
        self,
        messages: list[Any],
        *,
        tools: list[Any] | None = None,
        system: Any = None,
        format: str | None = None,
    ) -> int:
        """The provider's input tokens of a request, waiting at most ``timeout_s``.

        Args:
            messages: The messages in the provider's format (dicts or SDK objects).
            tools: The tools parameter, in the provider's format.
            system: The top-level system (Anthropic ``system``, Gemini
                ``systemInstruction``, Bedrock ``system``, Responses ``instructions``).
            format: The request's format (an ``Assembler`` provider key); the first of
                ``formats`` when None.

        Raises:
            CounterError: The call failed, timed out, or answered without a count.
            ConfigError: The client is async (use ``acount``) or ``format`` is not read.
        """
        if self.is_async:
            raise ConfigError(
                f"the {self.name} counter wraps an async client: use acount or assemble_async",
                key="counter",
                reason="async client",
            )
        kwargs = self._request(
            messages, tools, system, self.check_format(format or self.formats[0])
        )
        if self.sdk_deadline:
            try:
                answer = self._target()(**kwargs)
            except Exception as e:
                raise self._failed(e) from None
            return self._checked(answer)
        future = _executor().submit(self._target(), **kwargs)
        try:
            answer = future.result(self.timeout_s)
        except FutureTimeout:
            future.cancel()
            raise self._timed_out() from None
        except Exception as e:
            raise self._failed(e) from None
        return self._checked(answer)

    async def acount(
        self,
        messages: list[Any],
        *,
        tools: list[Any] | None = None,
        system: Any = None,
        format: str | None = None,
    ) -> int:
        """``count`` for async callers: an async client is awaited, a sync one runs in a worker
        thread; either way the deadline is ``timeout_s``. Same arguments and errors."""
        kwargs = self._request(
            messages, tools, system, self.check_format(format or self.formats[0])
        )
        call: Callable[..., Any] = self._target()
        try:
            if self.is_async:
                answer = await asyncio.wait_for(call(**kwargs), self.timeout_s)
            else:
                answer = await asyncio.wait_for(asyncio.to_thread(call, **kwargs), self.timeout_s)
        except asyncio.TimeoutError:
            raise self._timed_out() from None
        except Exception as e:
            raise self._failed(e) from None
        return self._checked(answer)

    def _timed_out(self) -> CounterError:
        return CounterError(
            f"the {self.name} count API did not answer within {self.timeout_s:g} s",
            reason="timeout",
        )

    def _failed(self, error: Exception) -> CounterError:
        if _timeout_reason(error):
            return self._timed_out()
        kind = type(error).__name__
        return CounterError(
            f"the {self.name} count API failed ({kind})", reason=f"exception:{kind}"
        )

    def _checked(self, answer: Any) -> int:
        try:
            tokens = self._tokens(answer)
        except (AttributeError, KeyError, TypeError):
            tokens = None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise CounterError(
                f"the {self.name} count API answered without a token count", reason="malformed"
            )
        return tokens
