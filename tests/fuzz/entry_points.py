"""The entry points that take a caller's objects other than messages, for the atheris harness
(``api.py``): inputs that open with ``ENTRY_POINTS`` fuzz them (issue 36, finding 8's rest).

The bytes pick an entry point and put a hostile or malformed value (``arguments.argument``, or
one of the shapes below: nested 100,000 deep, a mapping that holds itself, bytes, a raising
property or ``model_dump``, a huge int past the interpreter's digit limit) where it reads the
caller's data: ``calibrate``'s records and coverage, ``read_usage`` and
``TokenLedger.observe_usage``, ``is_context_length_error``, ``AssemblyConfig.for_model`` and
the models table, ``load_usage``'s path, the token ledger's, calibrator's and account's
arguments, ``warmup``, ``with_context_retry``'s ``max_retries`` and a ``send`` that raises,
and ``PrometheusSink``'s namespace. Any exception that is not a ``RingboundError`` is a
finding; so is ``is_context_length_error`` raising anything at all, or answering other than
None or a ``ContextOverflow``, and the caller's records changed by ``calibrate``.
"""

from __future__ import annotations

from typing import Any

import atheris
from arguments import RaisingDict, RaisingList, RaisingMapping, RaisingStr, argument

import ringbound as rb
from ringbound import models

#: The prefix that sends an input here.
ENTRY_POINTS = b"ringbound-entry-points:"
#: Past the interpreter's digit limit for ``repr``.
HUGE = 10**5000


class RaisingProperty:
    """An SDK object whose attributes raise when read (an unread HTTP body)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"hostile {name}")


class RaisingDump:
    def model_dump(self, **kwargs: Any) -> Any:
        raise RuntimeError("hostile model_dump")


class RaisingInt(int):
    def __lt__(self, other: object) -> bool:
        raise RuntimeError("hostile __lt__")

    def __gt__(self, other: object) -> bool:
        raise RuntimeError("hostile __gt__")

    def __repr__(self) -> str:
        raise RuntimeError("hostile __repr__")


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def value(fdp: atheris.FuzzedDataProvider) -> Any:
    """One hostile or malformed value."""
    pick = fdp.ConsumeIntInRange(0, 9)
    if pick == 0:
        return nested(fdp.ConsumeIntInRange(1, 100_000))
    if pick == 1:
        loop: dict[str, Any] = {}
        loop["usage"] = loop
        return loop
    if pick == 2:
        return fdp.ConsumeBytes(8)
    if pick == 3:
        return RaisingProperty()
    if pick == 4:
        return RaisingDump()
    if pick == 5:
        return RaisingInt(fdp.ConsumeIntInRange(0, 10_000))
    if pick == 6:
        return HUGE
    if pick == 7:
        return [value(fdp) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return argument(fdp)


def usage(fdp: atheris.FuzzedDataProvider) -> Any:
    """A usage object with a hostile value somewhere in it."""
    bad = value(fdp)
    return [
        bad,
        {"usage": bad},
        {"prompt_tokens": bad},
        {"prompt_tokens": 5, "prompt_tokens_details": bad},
        {"input_tokens": bad, "cache_read_input_tokens": 1},
        {"input_tokens": 5, "iterations": bad},
        {"input_tokens": 5, "iterations": [bad]},
        {"promptTokenCount": bad},
        {"inputTokens": bad},
        RaisingDict(prompt_tokens=bad),
    ][fdp.ConsumeIntInRange(0, 9)]


def refusal(fdp: atheris.FuzzedDataProvider) -> Any:
    """An error, body or text with a hostile value where a refusal would say something."""
    bad = value(fdp)
    text = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 80))
    return [
        bad,
        {"error": bad},
        {"error": {"message": bad, "code": bad, "type": bad}},
        {"Error": bad, "ResponseMetadata": {"HTTPStatusCode": bad}},
        ValueError(bad),
        ValueError(text, bad),
        [text, bad],
        RaisingDict(error={"message": text}),
        RaisingStr(text),
        text,
    ][fdp.ConsumeIntInRange(0, 9)]


def calibrate(fdp: atheris.FuzzedDataProvider) -> None:
    bad = value(fdp)
    records: Any = [
        bad,
        [bad],
        [(1000, 1010), (bad, 10)],
        [(10, bad)],
        [{"estimate": 10, "usage": usage(fdp)}],
        [{"local_estimate": bad, "prompt_tokens": 10}],
        RaisingList([(1000, 1010)]),
        [RaisingMapping()],
    ][fdp.ConsumeIntInRange(0, 7)]
    coverage = value(fdp) if fdp.ConsumeBool() else 0.9
    before = list.copy(records) if type(records) is list else None
    try:
        rb.calibrate(records, coverage)
    finally:
        if before is not None:
            assert len(records) == len(before), "calibrate changed the caller's records"
            assert all(a is b for a, b in zip(records, before, strict=True)), "records changed"


def ledgers(fdp: atheris.FuzzedDataProvider) -> None:
    bad = value(fdp)
    pick = fdp.ConsumeIntInRange(0, 9)
    if pick == 0:
        rb.TokenLedger(bad)
    elif pick == 1:
        rb.TokenLedger(1000, hard_cap=bad, margin_tokens=0, model=None)
    elif pick == 2:
        rb.TokenLedger(1000, model=bad)
    elif pick == 3:
        rb.TokenLedger(1000).observe_usage(prompt_tokens=bad, local_estimate=10)
    elif pick == 4:
        rb.TokenLedger(1000).observe_usage(usage(fdp), local_estimate=10, token_ratio=bad)
    elif pick == 5:
        rb.TokenLedger(1000).observe_tool_result(bad, 10)
    elif pick == 6:
        rb.Calibrator(bad, window=value(fdp))
    elif pick == 7:
        rb.Calibrator().observe(bad, value(fdp), value(fdp))
    elif pick == 8:
        rb.Calibrator.from_dict({"version": 1, "coverage": 0.9, "window": 64, "models": bad})
    else:
        data = bad if fdp.ConsumeBool() else {"output": bad}
        for call in (
            lambda: rb.TokenAccount.from_dict(data),
            lambda: rb.TokenAccount().with_usage(bad),
            lambda: rb.Calibrator().figures(bad, prior_ratio=1.0),
            lambda: rb.Calibrator().figures("m", prior_ratio=bad),
        ):
            try:
                call()
            except rb.RingboundError:
                pass


def model_table(fdp: atheris.FuzzedDataProvider) -> None:
    bad = value(fdp)
    pick = fdp.ConsumeIntInRange(0, 5)
    if pick == 0:
        rb.AssemblyConfig.for_model(bad)
    elif pick == 1:
        key = ("output_reserve_tokens", "model_input_limit", "token_ratio", "encoding")[
            fdp.ConsumeIntInRange(0, 3)
        ]
        rb.AssemblyConfig.for_model("gpt-5", **{key: bad})
    elif pick == 2:
        models.find(bad)
        models.lookup(bad)
    elif pick == 3:
        models.resolve(bad, where="the fuzzed model", strict=fdp.ConsumeBool())
    else:
        field = ("name", "family", "max_output_tokens", "encoding", "aliases", "token_ratio")[
            fdp.ConsumeIntInRange(0, 5)
        ]
        fields = {"name": "m", "family": "openai", "max_output_tokens": 10, "context_window": 99}
        models.ModelInfo(**{**fields, field: bad})


def retry(fdp: atheris.FuzzedDataProvider) -> None:
    bad = value(fdp)
    messages = [{"role": "user", "content": "hi"}]
    if fdp.ConsumeBool():
        rb.with_context_retry(lambda res: "ok", rb.Assembler(), messages, max_retries=bad)
        return

    class Refused(Exception):
        pass

    def send(res: Any) -> Any:
        raise Refused(bad)

    try:
        rb.with_context_retry(send, rb.Assembler(), messages, max_retries=0)
    except Refused:
        pass  # the caller's own error from send, as documented


def run(fdp: atheris.FuzzedDataProvider) -> None:
    """One entry point; RingboundErrors are the expected refusals."""
    entry = fdp.ConsumeIntInRange(0, 8)
    try:
        if entry == 0:
            calibrate(fdp)
        elif entry == 1:
            rb.read_usage(usage(fdp))
        elif entry == 2:
            got = rb.is_context_length_error(refusal(fdp))
            assert got is None or isinstance(got, rb.ContextOverflow), type(got)
        elif entry == 3:
            model_table(fdp)
        elif entry == 4:
            # Hostile values only: a fuzzed plain path could name any file (``/dev/zero``).
            rb.load_usage(argument(fdp) if fdp.ConsumeBool() else value(fdp))
        elif entry == 5:
            ledgers(fdp)
        elif entry == 6:
            bad = value(fdp)
            rb.warmup(bad if fdp.ConsumeBool() else [bad], wait=False)
        elif entry == 7:
            retry(fdp)
        else:
            from prometheus_client import CollectorRegistry

            rb.PrometheusSink(CollectorRegistry(), namespace=value(fdp))
    except rb.RingboundError:
        pass
