"""Issue 36, the rest of finding 8: the public entry points that take a caller's objects besides
messages (``calibrate``, ``load_usage``, ``read_usage``, ``is_context_length_error``,
``AssemblyConfig.for_model``, the models table, ``Calibrator``, ``TokenLedger``,
``TokenAccount``, ``warmup`` and ``with_context_retry``'s arguments) answer hostile values with a
typed ``RingboundError``, or, for ``is_context_length_error``, with its documented answer (None
when the value is not a refusal it can read); never the caller's own exception, a
``TypeError``, ``OverflowError``, ``RecursionError`` or ``UnicodeEncodeError``. The caller's
values are never changed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_hostile_arguments import (
    Boom,
    RaisingDict,
    RaisingList,
    RaisingMapping,
    RaisingObject,
    RaisingStr,
)

import ringbound as rb
from ringbound import models


class RaisingInt(int):
    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __hash__(self) -> int:
        raise Boom("__hash__")

    def __lt__(self, other: object) -> bool:
        raise Boom("__lt__")

    def __le__(self, other: object) -> bool:
        raise Boom("__le__")

    def __gt__(self, other: object) -> bool:
        raise Boom("__gt__")

    def __ge__(self, other: object) -> bool:
        raise Boom("__ge__")

    def __repr__(self) -> str:
        raise Boom("__repr__")

    def __add__(self, other: object) -> int:
        raise Boom("__add__")

    __radd__ = __add__


class RaisingFloat(float):
    def __lt__(self, other: object) -> bool:
        raise Boom("__lt__")

    def __le__(self, other: object) -> bool:
        raise Boom("__le__")

    def __gt__(self, other: object) -> bool:
        raise Boom("__gt__")

    def __repr__(self) -> str:
        raise Boom("__repr__")

    def is_integer(self) -> bool:
        raise Boom("is_integer")


class RaisingAttribute:
    """An SDK-like object whose every attribute raises (an unread HTTP body's property)."""

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"__getattr__ {name}")


class RaisingProperties:
    @property
    def usage(self) -> Any:
        raise Boom("usage")

    @property
    def usage_metadata(self) -> Any:
        raise Boom("usage_metadata")


class RaisingDump:
    def model_dump(self, **kwargs: Any) -> Any:
        raise Boom("model_dump")


class HostileDump:
    def model_dump(self, **kwargs: Any) -> Any:
        return RaisingDict(prompt_tokens=3)


class RaisingIterable:
    def __iter__(self) -> Iterator[Any]:
        raise Boom("__iter__")


class RaisingNext:
    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        raise Boom("__next__")


class RaisingArgs(Exception):
    @property  # type: ignore[override]
    def args(self) -> Any:
        raise Boom("args")


class RaisingException(Exception):
    def __str__(self) -> str:
        raise Boom("__str__")

    def __getattr__(self, name: str) -> Any:
        raise Boom(f"__getattr__ {name}")


class HashableRaising(RaisingObject):
    def __hash__(self) -> int:
        return 1


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def recursive() -> dict[str, Any]:
    loop: dict[str, Any] = {}
    loop["usage"] = loop
    return loop


SURROGATE = "x\ud800"
HUGE = 10**5000  # past the interpreter's digits limit: its repr raises

#: Values that are not what an argument takes, or whose methods raise.
HOSTILE: dict[str, Any] = {
    "raising object": RaisingObject(),
    "raising attribute": RaisingAttribute(),
    "raising mapping": RaisingMapping(),
    "raising dict": RaisingDict(a=1),
    "raising list": RaisingList([1, 2]),
    "raising str": RaisingStr("gpt-4o"),
    "raising int": RaisingInt(5),
    "raising float": RaisingFloat(3.0),
    "raising iterable": RaisingIterable(),
    "raising next": RaisingNext(),
    "surrogate": SURROGATE,
    "2**70": 2**70,
    "huge int": HUGE,
    "inf": float("inf"),
    "nan": float("nan"),
    "bytes": b"\xff\xfe",
    "deep": nested(100_000),
    "recursive": recursive(),
    "raising key": {HashableRaising(): 1},
    "raising model_dump": RaisingDump(),
    "hostile model_dump": HostileDump(),
    "raising properties": RaisingProperties(),
}

#: Usage objects that are wrong inside.
BAD_USAGE: dict[str, Any] = {
    "count raising": {"prompt_tokens": RaisingInt(4)},
    "count huge": {"prompt_tokens": HUGE},
    "count 2**70": {"input_tokens": 2**70, "output_tokens": 1},
    "count inf": {"prompt_tokens": float("inf")},
    "count surrogate": {"usage": {"prompt_tokens": SURROGATE}},
    "details raising": {"prompt_tokens": 5, "prompt_tokens_details": RaisingMapping()},
    "details raising dict": {"prompt_tokens": 5, "prompt_tokens_details": RaisingDict(a=1)},
    "iterations raising list": {"input_tokens": 5, "iterations": RaisingList([1])},
    "iteration raising mapping": {"input_tokens": 5, "iterations": [RaisingMapping()]},
    "iteration raising dict": {"input_tokens": 5, "iterations": [RaisingDict(type="x")]},
    "inner raising dict": {"usage": RaisingDict(prompt_tokens=1)},
    "inner deep": {"usage": nested(10_000)},
}

ANY_VALUE = {**HOSTILE, **BAD_USAGE}


def refused_typed(call: Callable[[], Any], error: type[rb.RingboundError]) -> None:
    """``call`` raises ``error``, or returns."""
    try:
        call()
    except error:
        pass


#: Values no usage reading can take.
UNREADABLE = {
    name
    for name in ANY_VALUE
    if name not in ("raising int", "count raising", "details raising dict", "inner raising dict")
    and name not in ("iteration raising dict", "hostile model_dump", "raising dict")
}


@pytest.mark.parametrize("name", sorted(ANY_VALUE))
def test_read_usage_refuses_hostile_values_with_a_config_error(name: str) -> None:
    value = ANY_VALUE[name]
    for call in (
        lambda: rb.read_usage(value),
        lambda: rb.read_usage({"usage": value}),
        lambda: rb.TokenLedger(1000).observe_usage(value),
        lambda: rb.read_usage({"prompt_tokens": value}),
        lambda: rb.read_usage({"input_tokens": value, "cache_read_input_tokens": 1}),
    ):
        try:
            got = call()
        except rb.ConfigError as e:
            assert e.key == "usage"
        else:  # a subclass read as the value it holds
            assert name not in UNREADABLE or name in ("raising str",), name
            assert got is not None and all(
                type(v) is int for v in (got.input_tokens, got.cached_tokens, got.output_tokens)
            )


def test_read_usage_reads_subclasses_as_their_values() -> None:
    usage = RaisingDict()
    dict.__setitem__(usage, "prompt_tokens", RaisingInt(40))
    dict.__setitem__(usage, "completion_tokens", 2)
    got = rb.read_usage(usage)
    assert (got.shape, got.prompt_tokens, type(got.prompt_tokens)) == ("openai_chat", 40, int)


@pytest.mark.parametrize("name", sorted(ANY_VALUE))
def test_calibrate_refuses_hostile_records_with_a_config_error(name: str) -> None:
    value = ANY_VALUE[name]
    for records in (
        value,
        [value],
        [(10, value)],
        [(value, 10)],
        [{"estimate": 10, "usage": value}],
        [{"local_estimate": value, "prompt_tokens": 10}],
    ):
        before = list.copy(records) if isinstance(records, list) else None
        try:
            cal = rb.calibrate(records)
        except rb.ConfigError as e:
            assert e.key in ("records", "usage", "local_estimate", "prompt_tokens")
        else:  # a subclass read as the value it holds
            assert all(type(v) is int for pair in cal.records for v in pair)
        if before is not None:
            assert records == before
    for records in ([value], [(value, 10)], [(10, value)]):
        # A list subclass is read as the pair it stores, a float subclass as its number.
        readable = ("raising iterable", "raising next", "raising float", "raising list")
        if name in UNREADABLE and name not in readable:
            with pytest.raises(rb.ConfigError):
                rb.calibrate(records)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_calibrate_refuses_a_hostile_coverage_with_a_config_error(name: str) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.calibrate([(10, 11)], coverage=HOSTILE[name])
    assert e.value.key == "coverage"


def test_calibrate_reads_records_as_stored() -> None:
    class ChangingList(list[Any]):
        def __iter__(self) -> Iterator[Any]:
            for i, item in enumerate(list(list.__iter__(self))):
                if i == 1:
                    self.append((1, 1))
                yield item

    records = ChangingList([(1000, 1012), (2000, 2050)])
    pair = RaisingList([RaisingInt(4000), 4040])
    cal = rb.calibrate([*records, pair, {"estimate": RaisingFloat(500.0), "reported": 505}])
    assert cal.n == 4 and len(records) == 3
    assert cal.records[2] == (4000, 4040) and type(cal.records[2][0]) is int
    assert rb.calibrate(RaisingList([(1000, 1012)])).n == 1


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_load_usage_refuses_a_hostile_path_with_a_config_error(name: str) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.load_usage(HOSTILE[name])
    assert e.value.key == "path"


def some_refusal(value: Any) -> list[Any]:
    """Places ``is_context_length_error`` reads a refusal from, holding ``value``."""
    return [
        value,
        {"error": value},
        {"error": {"message": value, "code": value, "type": value}},
        {"Error": value, "ResponseMetadata": value},
        [value, value],
        (value,),
        ValueError(value),
        ValueError("prompt is too long", value),
    ]


@pytest.mark.parametrize("name", sorted(ANY_VALUE))
def test_is_context_length_error_answers_hostile_values(name: str) -> None:
    for err in some_refusal(ANY_VALUE[name]):
        got = rb.is_context_length_error(err)
        assert got is None or isinstance(got, rb.ContextOverflow)


@pytest.mark.parametrize(
    "err",
    [RaisingArgs("x"), RaisingException("x"), RaisingAttribute(), RaisingStr("x")],
    ids=["args", "exception", "attribute", "str"],
)
def test_is_context_length_error_answers_hostile_exceptions(err: Any) -> None:
    assert rb.is_context_length_error(err) is None


def test_is_context_length_error_still_reads_a_refusal_beside_hostile_parts() -> None:
    text = "prompt is too long: 208310 tokens > 200000 maximum"
    body = RaisingDict()
    dict.__setitem__(body, "error", {"message": RaisingStr(text), "code": RaisingObject()})
    for err in (body, [RaisingObject(), text], ValueError(text, RaisingMapping())):
        got = rb.is_context_length_error(err)
        assert got is not None and got.prompt_tokens == 208310, err


def test_is_context_length_error_reads_a_deep_json_string_as_text() -> None:
    deep = '{"error": {"message": "prompt is too long"}, "x": ' + "[" * 100_000
    for err in (deep, deep.encode(), ValueError(deep)):
        got = rb.is_context_length_error(err)
        assert got is not None and got.provider == "anthropic"


def test_with_context_retry_raises_the_send_error_even_when_it_holds_hostile_values() -> None:
    def send(res: Any) -> Any:
        raise ValueError(RaisingMapping())

    with pytest.raises(ValueError):
        rb.with_context_retry(send, rb.Assembler(), [{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_with_context_retry_refuses_hostile_max_retries(name: str) -> None:
    messages = [{"role": "user", "content": "hi"}]
    try:
        out = rb.with_context_retry(
            lambda res: "ok", rb.Assembler(), messages, max_retries=HOSTILE[name]
        )
    except rb.ConfigError as e:
        assert e.key == "max_retries"
    else:  # an int, or a subclass read as the int it holds
        assert name in ("2**70", "huge int", "raising int") and out.response == "ok"


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_for_model_refuses_hostile_names_with_a_config_error(name: str) -> None:
    value = HOSTILE[name]
    if name == "raising str":  # read as the plain text it holds
        assert rb.AssemblyConfig.for_model(value).model_input_limit == 128_000
        return
    for call in (
        lambda: rb.AssemblyConfig.for_model(value),
        lambda: models.lookup(value),
        lambda: models.resolve(value, where="the test's model", strict=True),
    ):
        with pytest.raises(rb.ConfigError) as e:
            call()
        assert e.value.key == "model"
    assert models.find(value) is None


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_for_model_refuses_hostile_overrides_with_a_config_error(name: str) -> None:
    value = HOSTILE[name]
    for key in ("output_reserve_tokens", "model_input_limit", "token_ratio", "encoding"):
        try:
            cfg = rb.AssemblyConfig.for_model("gpt-5", **{key: value})
        except rb.ConfigError as e:
            assert e.key == key
        else:  # a subclass is kept as the plain value it holds
            assert type(cfg.to_dict()[key]) in (int, float, str), (name, key)


def model_info(**fields: Any) -> models.ModelInfo:
    return models.ModelInfo(
        **{
            "name": "m",
            "family": "openai",
            "max_output_tokens": 10,
            "context_window": 100,
            **fields,
        }
    )


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_model_info_refuses_hostile_fields_with_a_config_error(name: str) -> None:
    value = HOSTILE[name]
    for field in ("name", "family", "max_output_tokens", "encoding", "aliases", "token_ratio"):
        try:
            info = model_info(**{field: value})
        except rb.ConfigError as e:
            assert e.key == "models"
        else:  # a subclass is kept as the plain value it holds
            assert type(getattr(info, field)) in (str, int, float)


def test_model_info_keeps_subclasses_as_plain_values() -> None:
    info = model_info(
        name=RaisingStr("my-model"),
        family=RaisingStr("openai"),
        max_output_tokens=RaisingInt(10),
        aliases=RaisingList([RaisingStr("Mine")]),
        token_ratio=RaisingFloat(1.1),
    )
    assert (info.name, info.family, info.max_output_tokens, info.aliases) == (
        "my-model",
        "openai",
        10,
        ("mine",),
    )
    assert type(info.name) is str and type(info.max_output_tokens) is int


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_ledger_and_calibrator_arguments_are_config_errors(name: str) -> None:
    value = HOSTILE[name]
    for call in (
        lambda: rb.TokenLedger(value),
        lambda: rb.TokenLedger(1000, hard_cap=value),
        lambda: rb.TokenLedger(1000, margin_tokens=value),
        lambda: rb.TokenLedger(1000, model=value),
        lambda: rb.TokenLedger(1000).observe_usage(prompt_tokens=value, local_estimate=10),
        lambda: rb.TokenLedger(1000).observe_usage(prompt_tokens=10, local_estimate=value),
        lambda: rb.TokenLedger(1000).observe_tool_result(value, 10),
        lambda: rb.TokenLedger(1000).observe_tool_result("t", value),
        lambda: rb.Calibrator(value),
        lambda: rb.Calibrator(window=value),
        lambda: rb.Calibrator().observe(value, 10, 10),
        lambda: rb.Calibrator().observe("m", value, 10),
        lambda: rb.Calibrator().observe("m", 10, value),
        lambda: rb.Calibrator.from_dict(value),
        lambda: rb.Calibrator.from_dict({"version": 1, "models": value}),
        lambda: rb.TokenAccount.from_dict(value),
        lambda: rb.TokenAccount.from_dict({"output": value}),
        lambda: rb.TokenAccount().with_usage(value),
        lambda: rb.Calibrator().figures(value, prior_ratio=1.0),
        lambda: rb.Calibrator().figures("m", prior_ratio=value),
        lambda: rb.Calibrator().error(value, 100, 1.0),
        lambda: rb.Calibrator().samples(value),
    ):
        refused_typed(call, rb.ConfigError)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_warmup_refuses_hostile_encodings_with_a_config_error(name: str) -> None:
    value = HOSTILE[name]
    for encodings in (value, [value]):
        with pytest.raises(rb.ConfigError) as e:
            rb.warmup(encodings, wait=False)
        assert e.value.key in ("encodings", "encoding")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_prometheus_namespace_is_a_config_error(name: str) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.PrometheusSink(namespace=HOSTILE[name])
    assert e.value.key == "namespace"
    with pytest.raises(rb.ConfigError):
        rb.PrometheusSink(namespace="not-a-name")
