"""The run of a caller's summarizer: sync or async, under a timeout, a window guard (map →
reduce over chunks) and a failure policy. Never silent: every failure is a reason in the
outcome, or a SummaryError under ``fail_closed``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, SummaryError
from .request import (
    POLICIES,
    WINDOW_CUT_MARK,
    SummaryOutcome,
    SummaryRequest,
    split_units,
)

__all__ = ["CountFn", "CutFn", "Summarizer", "arun", "run"]

#: Reduce rounds before the joined part summaries are cut instead of summarized again.
_MAX_REDUCE_DEPTH = 4

Summarizer = Callable[[SummaryRequest], Any]
CountFn = Callable[[str], int]
#: ``cut(text, max_tokens, *, from_end=False)``: the longest prefix (suffix) within the limit.
CutFn = Callable[..., str]


class _Failure(Exception):
    """One summarizer call failed; carries the reason word, never the exception's text."""

    def __init__(self, reason: str, cause: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


@dataclass
class _Attempt:
    """The running record of one summarizer over the whole input (all its calls)."""

    text: str | None = None
    reason: str | None = None
    cause: BaseException | None = None
    calls: int = 0
    chunks: int = 1
    cut: bool = False


@dataclass(frozen=True)
class _Job:
    """Everything an attempt needs besides the summarizer."""

    request: SummaryRequest
    blocks: list[str]
    count: CountFn
    cut: CutFn
    target: int
    input_limit: int | None
    timeout_s: float | None


def run(
    summarizer: Summarizer,
    request: SummaryRequest,
    *,
    count: CountFn,
    cut: CutFn,
    target: int,
    input_limit: int | None = None,
    timeout_s: float | None = None,
    policy: str = "fallback",
    fallback: Summarizer | None = None,
    unit_texts: Sequence[str] | None = None,
) -> SummaryOutcome:
    """Runs ``summarizer`` on ``request`` and checks what it returns.

    A sync summarizer runs in a daemon thread when ``timeout_s`` is set, and is abandoned,
    not stopped, once the time is up: Python cannot kill a thread, so a summarizer that
    hangs keeps its thread until it returns (a daemon thread does not hold up interpreter
    exit). With ``timeout_s=None`` it runs in the calling thread. An async summarizer runs
    under ``asyncio.run`` and is cancelled on timeout; inside a running event loop use
    ``arun`` instead (ConfigError here).

    Args:
        summarizer: ``callable(SummaryRequest) -> str`` or an async one.
        request: The request; its ``target_tokens`` is set to ``target``.
        count: Tokens of a text.
        cut: ``cut(text, max_tokens, *, from_end=False)``: the longest prefix (suffix with
            ``from_end``) of at most ``max_tokens`` tokens.
        target: Token target of the summary.
        input_limit: Tokens the summarizer accepts per call, or None. Larger inputs are
            split into chunks that are summarized apart, then summarized together.
        timeout_s: Time allowed for all calls of one summarizer together, or None.
        policy: ``fallback`` (failure gives an outcome with ``failed=True``) or
            ``fail_closed`` (failure raises SummaryError).
        fallback: Summarizer run the same way when ``summarizer`` fails under ``fallback``.
        unit_texts: The text of each unit (``unit_blocks``, redacted), to split the input
            along unit boundaries; by default ``request.text`` is split at its
            ``### unit <n>`` headers.

    Raises:
        SummaryError: The summarizer failed and ``policy`` is ``fail_closed``; ``reason``
            says why, the original exception (if any) is its ``__cause__``.
        ConfigError: Unknown policy, or an async summarizer inside a running event loop.
    """
    job = _job(request, count, cut, target, input_limit, timeout_s, policy, unit_texts)
    loop_running = _loop_running()
    for s in (summarizer, fallback):
        if s is not None and loop_running and _is_async(s):
            raise _async_in_loop()
    primary = _attempt_sync(summarizer, job, loop_running)
    if primary.text is not None:
        return _success(primary)
    if policy == "fail_closed":
        _raise_closed(primary)
    second = None if fallback is None else _attempt_sync(fallback, job, loop_running)
    return _failure(primary, second)


async def arun(
    summarizer: Summarizer,
    request: SummaryRequest,
    *,
    count: CountFn,
    cut: CutFn,
    target: int,
    input_limit: int | None = None,
    timeout_s: float | None = None,
    policy: str = "fallback",
    fallback: Summarizer | None = None,
    unit_texts: Sequence[str] | None = None,
) -> SummaryOutcome:
    """``run`` for async callers: an async summarizer is awaited (and cancelled on timeout);
    a sync one runs in a daemon thread so it cannot block the event loop, and is abandoned
    on timeout. Same arguments, result and errors as ``run``."""
    job = _job(request, count, cut, target, input_limit, timeout_s, policy, unit_texts)
    primary = await _attempt_async(summarizer, job)
    if primary.text is not None:
        return _success(primary)
    if policy == "fail_closed":
        _raise_closed(primary)
    second = None if fallback is None else await _attempt_async(fallback, job)
    return _failure(primary, second)


def _job(
    request: SummaryRequest,
    count: CountFn,
    cut: CutFn,
    target: int,
    input_limit: int | None,
    timeout_s: float | None,
    policy: str,
    unit_texts: Sequence[str] | None,
) -> _Job:
    if policy not in POLICIES:
        raise ConfigError(
            f"summary policy must be one of {', '.join(POLICIES)}, got {policy!r}",
            key="on_summary_failure",
        )
    if target < 1:
        raise ValueError(f"target must be at least 1, got {target}")
    blocks = list(unit_texts) if unit_texts is not None else split_units(request.text)
    return _Job(
        request=dataclasses.replace(request, target_tokens=target),
        blocks=blocks,
        count=count,
        cut=cut,
        target=target,
        input_limit=input_limit,
        timeout_s=timeout_s,
    )


def _success(a: _Attempt) -> SummaryOutcome:
    return SummaryOutcome(
        text=a.text,
        failed=False,
        reason=None,
        calls=a.calls,
        chunks=a.chunks,
        cut=a.cut,
        fallback_used=False,
    )


def _failure(primary: _Attempt, second: _Attempt | None) -> SummaryOutcome:
    used = second is not None and second.text is not None
    return SummaryOutcome(
        text=second.text if used else None,
        failed=True,
        reason=primary.reason,
        calls=primary.calls + (second.calls if second else 0),
        chunks=max(primary.chunks, second.chunks if second else 0),
        cut=bool(used and second.cut),
        fallback_used=used,
    )


def _raise_closed(a: _Attempt) -> None:
    err = SummaryError(
        f"the summarizer failed ({a.reason}) and on_summary_failure is fail_closed",
        reason=a.reason or "",
    )
    raise err from a.cause


def _async_in_loop() -> ConfigError:
    return ConfigError(
        "the summarizer is async and an event loop is running in this thread: "
        "call assemble_async instead of assemble",
        key="summarizer",
    )


# The plan of calls, written once for both drivers: it yields each request to send and
# receives the checked answer; it returns the final body.
def _steps(job: _Job, attempt: _Attempt) -> Generator[SummaryRequest, str, str]:
    request, limit, count = job.request, job.input_limit, job.count
    if limit is None or count(request.text) <= limit:
        return (yield request)
    groups = _chunks(job.blocks, count, job.cut, limit)
    attempt.chunks = len(groups)
    if len(groups) == 1:  # one unit, cut to fit: it is the whole input, no reduce needed
        return (yield dataclasses.replace(request, text=groups[0][2]))
    aligned = len(job.blocks) == len(request.units)
    parts = []
    for start, end, text in groups:
        units = request.units[start:end] if aligned else request.units
        chunk = dataclasses.replace(request, units=list(units), text=text, previous_summary=None)
        parts.append((yield chunk))
    for depth in range(_MAX_REDUCE_DEPTH + 1):
        blocks = [f"### part {i}\n{p}" for i, p in enumerate(parts, 1)]
        text = "\n\n".join(blocks)
        if count(text) <= limit:
            break
        groups = _chunks(blocks, count, job.cut, limit)
        if depth == _MAX_REDUCE_DEPTH or len(groups) >= len(blocks):
            text = job.cut(text, limit)
            break
        parts = []
        for _, _, group in groups:
            parts.append((yield dataclasses.replace(request, text=group, previous_summary=None)))
    return (yield dataclasses.replace(request, text=text))


def _chunks(
    blocks: Sequence[str], count: CountFn, cut: CutFn, limit: int
) -> list[tuple[int, int, str]]:
    """Consecutive blocks packed into texts of at most ``limit`` tokens, as ``(start, end,
    text)``; a block alone over the limit is cut head + tail to fit."""
    sep = "\n\n"
    sep_tokens = count(sep)
    out: list[tuple[int, int, str]] = []
    start, size = 0, 0
    for i, block in enumerate(blocks):
        n = count(block)
        if i > start and size + sep_tokens + n > limit:
            out.extend(_verified(blocks, start, i, count, limit))
            start, size = i, 0
        if n > limit:
            out.append((i, i + 1, _fit(block, count, cut, limit)))
            start, size = i + 1, 0
            continue
        size += n + (sep_tokens if i > start else 0)
    if start < len(blocks):
        out.extend(_verified(blocks, start, len(blocks), count, limit))
    return out


def _verified(
    blocks: Sequence[str], start: int, end: int, count: CountFn, limit: int
) -> list[tuple[int, int, str]]:
    # Tokens of a join can exceed the sum of the parts' tokens (rarely, at the seams), so
    # the packed text is counted once more and halved if it went over.
    text = "\n\n".join(blocks[start:end])
    if end - start == 1 or count(text) <= limit:
        return [(start, end, text)]
    mid = (start + end) // 2
    return _verified(blocks, start, mid, count, limit) + _verified(blocks, mid, end, count, limit)


def _fit(text: str, count: CountFn, cut: CutFn, limit: int) -> str:
    """Head and tail of ``text`` around a mark, within ``limit`` tokens."""
    mark = f"\n{WINDOW_CUT_MARK}\n"
    room = limit - count(mark)
    out = text
    for _ in range(4):
        if room < 2:
            break
        head = cut(text, room // 2)
        tail = cut(text, room - room // 2, from_end=True)
        out = head + mark + tail
        excess = count(out) - limit
        if excess <= 0:
            return out
        room -= excess
    return cut(out, limit)


def _accept(raw: Any, job: _Job, attempt: _Attempt) -> str:
    """The checked body of one answer; raises _Failure for an unusable one."""
    if not isinstance(raw, str):
        raise _Failure("not_text")
    body = raw.strip()
    if not body:
        raise _Failure("empty")
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: no provider accepts it, so the answer cannot go in a request.
        raise _Failure("not_text") from None
    n = job.count(body)
    if n > 4 * job.target:
        raise _Failure("oversized")
    if n > job.target:
        attempt.cut = True
        body = job.cut(body, job.target)
    return body


def _attempt_sync(summarizer: Summarizer, job: _Job, loop_running: bool) -> _Attempt:
    if _is_async(summarizer):
        # One loop for all calls: async clients are bound to the loop they first ran on.
        return asyncio.run(_attempt_async(summarizer, job))
    attempt = _Attempt()
    deadline = _deadline(job.timeout_s)
    steps = _steps(job, attempt)
    try:
        request = next(steps)
        while True:
            attempt.calls += 1
            raw = _call_sync(summarizer, request, deadline, loop_running)
            request = steps.send(_accept(raw, job, attempt))
    except StopIteration as stop:
        attempt.text = stop.value
    except _Failure as failure:
        attempt.reason, attempt.cause = failure.reason, failure.cause
    finally:
        steps.close()
    return attempt


async def _attempt_async(summarizer: Summarizer, job: _Job) -> _Attempt:
    attempt = _Attempt()
    deadline = _deadline(job.timeout_s)
    steps = _steps(job, attempt)
    try:
        request = next(steps)
        while True:
            attempt.calls += 1
            raw = await _call_async(summarizer, request, deadline)
            request = steps.send(_accept(raw, job, attempt))
    except StopIteration as stop:
        attempt.text = stop.value
    except _Failure as failure:
        attempt.reason, attempt.cause = failure.reason, failure.cause
    finally:
        steps.close()
    return attempt


def _call_sync(
    summarizer: Summarizer, request: SummaryRequest, deadline: float | None, loop_running: bool
) -> Any:
    remaining = _remaining(deadline)
    if remaining is None:
        try:
            raw = summarizer(request)
        except Exception as exc:
            raise _exception_failure(exc) from None
    else:
        raw = _wait_thread(_start_thread(summarizer, request), remaining)
    if inspect.isawaitable(raw):
        # A sync callable that returned a coroutine (an async function behind a wrapper).
        if loop_running:
            _discard(raw)
            raise _async_in_loop()
        return asyncio.run(_await(raw, _remaining_for(raw, deadline)))
    return raw


async def _call_async(summarizer: Summarizer, request: SummaryRequest, deadline: float | None):
    remaining = _remaining(deadline)
    if _is_async(summarizer):
        try:
            awaitable = summarizer(request)
        except Exception as exc:
            raise _exception_failure(exc) from None
        return await _await(awaitable, remaining)
    future = asyncio.wrap_future(_start_thread(summarizer, request))
    raw = await _await(future, remaining)
    if inspect.isawaitable(raw):
        return await _await(raw, _remaining_for(raw, deadline))
    return raw


async def _await(awaitable: Awaitable[Any], timeout: float | None) -> Any:
    """The awaitable's result within ``timeout``; cancelled (and abandoned) past it."""
    future = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({future}, timeout=timeout)
    except asyncio.CancelledError:
        future.cancel()
        raise
    if not done:
        future.cancel()
        future.add_done_callback(_retrieve)
        raise _Failure("timeout", TimeoutError(f"no answer within {timeout:.3f} s"))
    if future.cancelled():
        raise _Failure("exception:CancelledError")
    exc = future.exception()
    if exc is not None:
        raise _exception_failure(exc)
    return future.result()


def _start_thread(summarizer: Summarizer, request: SummaryRequest) -> concurrent.futures.Future:
    # A thread per call rather than a pool: a hung summarizer would hold a pool worker
    # forever and starve later calls, and pool threads are joined at interpreter exit.
    future: concurrent.futures.Future = concurrent.futures.Future()
    context = contextvars.copy_context()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(summarizer, request)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=work, name="ringbound-summarizer", daemon=True).start()
    return future


def _wait_thread(future: concurrent.futures.Future, timeout: float) -> Any:
    done, _ = concurrent.futures.wait([future], timeout=timeout)
    if not done:
        raise _Failure("timeout", TimeoutError(f"no answer within {timeout:.3f} s"))
    exc = future.exception()
    if exc is not None:
        raise _exception_failure(exc)
    return future.result()


def _exception_failure(exc: BaseException) -> _Failure:
    """The failure for an exception a summarizer raised; anything that is not an
    ``Exception`` (SystemExit from its thread, ...) is not a summarizer failure and goes on."""
    if not isinstance(exc, Exception):
        raise exc
    return _Failure(f"exception:{type(exc).__name__}", exc)


def _retrieve(future: asyncio.Future) -> None:
    # An abandoned task's late exception is expected; retrieving it keeps asyncio from
    # logging "exception was never retrieved" (with the exception's text) later.
    if not future.cancelled():
        future.exception()


def _discard(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()


def _deadline(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else time.monotonic() + timeout_s


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise _Failure("timeout", TimeoutError("no time left for another summarizer call"))
    return left


def _remaining_for(awaitable: Any, deadline: float | None) -> float | None:
    """``_remaining``, closing ``awaitable`` when no time is left so it is not left
    never-awaited."""
    try:
        return _remaining(deadline)
    except _Failure:
        _discard(awaitable)
        raise


def _is_async(fn: Any) -> bool:
    # ``type(fn).__call__``: an object whose class has ``async def __call__`` is async too.
    return inspect.iscoroutinefunction(fn) or (
        callable(fn) and inspect.iscoroutinefunction(type(fn).__call__)
    )


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
