"""The core reads the caller's message objects: it keys JSON-native messages by a walk of their
contents and serializes only the messages its cache misses. Whatever it reads, the plan must be
the one it makes from the same messages serialized, cold or warm: subclasses, tuples and
strings around the walk's copy limit included. A message changed in place must be read again,
never served a stale count. Values JSON cannot hold are still refused with their index, and a
list another thread changes mid-assembly must not crash it."""

from __future__ import annotations

import copy
import enum
import threading
from collections import OrderedDict
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import Case, cases

import ringbound as rb
from ringbound import _core
from ringbound.payload import dump_messages, dump_tools

#: Warnings hypothesis raises only while reporting a failure (see test_invariants).
pytestmark = [
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

#: The walk copies strings up to this long and holds longer ones (py/objects.rs).
COPIED_STR_BYTES = 64


def config(budget: int, **values: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **values
    )


def plan(
    messages: list[Any], asm: rb.Assembler, cache: Any, *, objects: bool, case: Case | None = None
) -> Any:
    payload = None if objects else dump_messages(messages)
    tools = None if case is None else dump_tools(case.tools)
    pins = [] if case is None else sorted({p for p in case.pinned if p < len(messages)})
    planned = _core.plan(payload, asm._core, pins, tools_json=tools, cache=cache, messages=messages)
    return planned.items, planned.report


def new_cache() -> Any:
    return _core.CountCache(10_000, 1 << 30)


def fresh_report(messages: list[Any], cfg: rb.AssemblyConfig) -> rb.AssemblyReport:
    return rb.Assembler(cfg, cache=False).assemble(messages).report


def same_report(a: rb.AssemblyReport, b: rb.AssemblyReport) -> bool:
    keys = ("tokens_after", "dropped_rings", "dropped_turns", "rewrites", "stages")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(cheap=True))
def test_reading_objects_plans_what_reading_their_json_plans(case: Case) -> None:
    """Each path with its own cache through the same turns: cold, warm (every message
    found), then the history one message shorter (the last plan's decisions may have
    left some messages uncounted; both paths must agree on which)."""
    asm = rb.Assembler(case.config())
    snapshot = copy.deepcopy(case.messages)
    caches = {False: new_cache(), True: new_cache()}
    for messages in (case.messages, case.messages, case.messages[:-1]):
        try:
            expected = plan(messages, asm, caches[False], objects=False, case=case)
        except rb.RingboundError as e:
            with pytest.raises(type(e)):
                plan(messages, asm, caches[True], objects=True, case=case)
        else:
            assert plan(messages, asm, caches[True], objects=True, case=case) == expected
    assert case.messages == snapshot


def test_messages_found_uncounted_are_counted_and_cut_when_needed_later() -> None:
    """A first plan under a small budget drops most rings without counting them; the next
    ones, with room for all of it or with results to cut, must count those messages and read
    their texts (serializing them again), exactly as a cold assembly does."""
    long_result = "line of a long log with numbers 12345 and words\n" * 60
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for i in range(30):
        args = f'{{"n": {i}}}'
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": args}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": long_result + str(i)},
        ]
    snapshot = copy.deepcopy(messages)
    cache = rb.CountCache()
    first = rb.Assembler(config(3_000, stages=("drop_rings",)), cache=cache).assemble(messages)
    assert not first.report.tokens_before_exact
    for cfg in (config(200_000), config(20_000, max_tool_result_tokens=200)):
        res = rb.Assembler(cfg, cache=cache).assemble(messages)
        assert res.report.tokens_after <= cfg.budget
        assert same_report(res.report, fresh_report(messages, cfg))
    # Cut results are new dicts with the other fields kept; the caller's are untouched.
    assert res.report.truncated_results
    for i in res.report.truncated_results:
        cut = next(m for m in res.messages if m.get("tool_call_id") == messages[i]["tool_call_id"])
        assert cut is not messages[i] and cut["content"] != messages[i]["content"]
        assert {k: v for k, v in cut.items() if k != "content"} == {
            k: v for k, v in messages[i].items() if k != "content"
        }
    assert messages == snapshot


def test_a_message_changed_in_place_is_read_again() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hi " * 10},
        {"role": "assistant", "content": "hi"},
    ]
    asm = rb.Assembler(config(100_000), cache=rb.CountCache())
    before = asm.assemble(messages).report.tokens_after
    messages[1]["content"] += "and tell me about the weather " * 30
    messages[2]["name"] = "helper"
    after = asm.assemble(messages).report
    assert after.tokens_after > before
    assert same_report(after, fresh_report(messages, config(100_000)))


class Role(str, enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def test_subclasses_and_tuples_read_like_their_json() -> None:
    call = OrderedDict(id="c1", type="function", function={"name": "read", "arguments": '{"n": 1}'})
    messages = [
        OrderedDict(role=Role.USER, content="Read file one."),
        {"role": Role.ASSISTANT, "content": None, "tool_calls": (call,)},
        {"role": Role.TOOL, "tool_call_id": "c1", "content": "x" * 500},
    ]
    as_json = [
        {"role": "user", "content": "Read file one."},
        {"role": "assistant", "content": None, "tool_calls": [dict(call)]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 500},
    ]
    cache = rb.CountCache()
    for _ in range(2):  # cold, then found
        report = rb.Assembler(config(100_000), cache=cache).assemble(messages).report
        assert same_report(report, fresh_report(as_json, config(100_000)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from("ab "),
            st.integers(COPIED_STR_BYTES - 3, COPIED_STR_BYTES + 3) | st.integers(0, 4),
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from(("content", "name", "parts")),
)
def test_messages_that_differ_anywhere_get_their_own_counts(
    pieces: list[tuple[str, int]], shape: str
) -> None:
    """One cache sees a message, then each of its near neighbours (text moved between
    fields, a string one byte longer or shorter across the copy limit): each must get its
    own exact count, never the cached one of a message it merely resembles."""
    texts = [c * n for c, n in pieces]

    def message(texts: list[str]) -> dict[str, Any]:
        if shape == "content":
            return {"role": "user", "content": "".join(texts)}
        if shape == "name":
            return {"role": "user", "content": texts[0], "name": "n" + "".join(texts[1:])}
        return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}

    neighbours = [
        texts,
        [*texts[:-1], texts[-1] + "a"],
        [*texts[:-1], texts[-1][:-1]],
        [texts[0] + "".join(texts[1:])],
        ["", *texts],
    ]
    cache = rb.CountCache()
    for t in neighbours:
        messages = [message(t)]
        report = rb.Assembler(config(100_000), cache=cache).assemble(messages).report
        assert report.tokens_after == fresh_report(messages, config(100_000)).tokens_after


def test_dicts_beside_sdk_objects_are_still_keyed_by_their_contents() -> None:
    """An agent that appends the SDK's reply object to a history of dicts: the objects are
    serialized (and keyed by their JSON), the dicts still by their contents, so the next turn
    finds them without serializing them. (A dict keyed by its JSON would be found again by a
    count from JSON; one keyed by its contents is not.)"""
    from pydantic import BaseModel

    class Reply(BaseModel):
        role: str
        content: str

    dicts = [{"role": "user", "content": f"question {i} " * 20} for i in range(3)]
    messages = [dicts[0], Reply(role="assistant", content="answer"), dicts[1], dicts[2]]
    cache = rb.CountCache()
    rb.Assembler(config(100_000), cache=cache).assemble(messages)
    assert len(cache) == 4
    _core.count("openai_chat", dump_messages([dicts[0]]), None, "o200k_base", cache=cache)
    assert len(cache) == 5
    report = rb.Assembler(config(100_000), cache=cache).assemble(messages).report
    assert same_report(report, fresh_report(messages, config(100_000)))
    assert len(cache) == 5


#: JSON-native values from small domains, so that two drawn values are often near each other:
#: strings on both sides of the copy limit, numbers whose JSON differs by a sign or a point,
#: tuples beside lists, keys in another order, lists that split one string into two.
_leaves = (
    st.none()
    | st.booleans()
    | st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63)])
    | st.sampled_from([0.0, -0.0, 1.0, 1.5, 1e300])
    | st.builds(
        lambda c, n: c * n,
        # Letters, a two-byte one, and the encoding's own tag bytes, so that a string can
        # look like the start of the next value.
        st.sampled_from("ab\u00e9sS{[ntf"),
        st.sampled_from([0, 1, 2, COPIED_STR_BYTES - 1, COPIED_STR_BYTES, COPIED_STR_BYTES + 1]),
    )
)
json_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.tuples(st.sampled_from(["a", "as"]), st.sampled_from(["b", "sb", "ssb"])).map(list)
        | st.dictionaries(st.sampled_from(["a", "b", "ab", "a" * 70]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=1_000, deadline=None)
@given(json_values, json_values)
@example(["a", "sb"], ["as", "b"])  # one string's end read as the next one's tag
@example({"a": "b"}, {"ab": ""})
def test_values_with_different_json_never_share_a_key(a: Any, b: Any) -> None:
    """The rule the cache's correctness rests on: an object key stands for one JSON text. Equal
    contents give equal keys (a tuple is a list to JSON, and to the key)."""
    key_a, key_b = _core._object_key(a), _core._object_key(b)
    assert key_a is not None and key_b is not None
    assert key_a == _core._object_key(copy.deepcopy(a))
    if orjson.dumps(a) != orjson.dumps(b):
        assert key_a != key_b
    elif key_a != key_b:
        # Same JSON from different values: allowed (each is cached on its own), but only
        # where JSON forgets a difference the key keeps.
        assert repr(a) != repr(b)


@settings(max_examples=1_000, deadline=None)
@given(json_values)
@example({"a": "\u00e9" * 70, "b": [1.5, -0.0, 1e300, None, True]})
@example({"a": 'quote " backslash \\ newline \n tab \t bell \x07' * 3})
def test_a_missed_message_is_written_from_its_walk_as_the_serializer_writes_it(
    value: Any,
) -> None:
    """A message the cache misses is parsed from JSON its walk writes, with the GIL released
    (``Encoding::json``), not serialized again: that JSON must read back as what the
    serializer writes, long strings (held, not copied, by the walk) and escapes included."""
    message = {"role": "user", "content": value}
    written = _core._walked_json(message)
    assert written is not None
    assert orjson.loads(written) == orjson.loads(orjson.dumps(message))


def test_what_is_not_json_native_is_keyed_by_its_json() -> None:
    deep: Any = []
    for _ in range(70):
        deep = [deep]
    for value in ({1: "int key"}, {"n": 2**64}, {"s": "\ud800"}, {"x": {1, 2}}, deep, object()):
        assert _core._object_key({"role": "user", "content": value}) is None
        assert _core._walked_json({"role": "user", "content": value}) is None
    # A float JSON cannot carry is written by the serializer (as null).
    assert _core._walked_json({"role": "user", "content": [float("nan")]}) is None


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"role": "user", "content": "x", 1: "not a str key"}, "key must be str"),
        ({"role": "user", "content": "lone \ud800 surrogate"}, "surrogate"),
        ({"role": "user", "content": "x", "n": 2**70}, "64-bit"),
        ({"role": "user", "content": {1, 2}}, "set"),
    ],
)
def test_values_json_cannot_hold_are_refused_with_their_index(bad: Any, reason: str) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    asm = rb.Assembler(config(100_000))
    asm.assemble(messages)  # the good ones are now found in the cache
    with pytest.raises(rb.InvalidMessageError) as info:
        asm.assemble([*messages, bad])
    assert info.value.index == 2
    assert str(info.value).startswith("messages[2]: cannot be serialized as JSON")
    assert reason in str(info.value)


@pytest.mark.parametrize("depth", [70, 150])
def test_nesting_deeper_than_the_walk_goes_is_left_to_the_serializer(depth: int) -> None:
    """Past 64 levels the walk gives up and the message is serialized: still accepted at 70,
    refused by the parser's own limit (128) at 150, as before."""
    deep: Any = "leaf"
    for _ in range(depth):
        deep = [deep]
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi", "extra": deep}]}]
    asm = rb.Assembler(config(100_000))
    if depth > 128:
        with pytest.raises(rb.InvalidMessageError):
            asm.assemble(messages)
    else:
        assert same_report(asm.assemble(messages).report, fresh_report(messages, config(100_000)))


def test_a_list_changed_by_another_thread_during_assembly_does_not_crash() -> None:
    """The walk holds the long strings it will hash with the GIL released; a thread that
    replaces them meanwhile (dropping the last other reference) must not make it read freed
    memory. Results are whatever snapshot each assembly saw, but always a valid request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Start."}]
    for i in range(40):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " * 50},
        ]
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for m in messages[2::2]:
                m["content"] = f"replaced {n} " * 50

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        asm = rb.Assembler(config(2_000))
        for _ in range(200):
            res = asm.assemble(messages)
            assert rb.validate(res.messages) == []
    finally:
        stop.set()
        thread.join()
