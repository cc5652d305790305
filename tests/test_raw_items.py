"""The history of a body kept as its own bytes (``ringbound.raw_items``): items made only when
asked for, read as the JSON they are, and written back as one slice per kept stretch."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.raw_items import RawItem, RawItems, items_json

ITEMS: list[dict[str, Any]] = [
    {"role": ("user", "assistant")[i % 2], "content": f"step {i}", "n": [i, {"deep": 'é\\"' * i}]}
    for i in range(7)
]


def history(option: int = 0) -> RawItems:
    """The items as a body's history, split as the gateway path splits it."""
    data = orjson.dumps({"model": "m", "messages": ITEMS}, option=option)
    split = _core.split_body(data, "messages", 1 << 30)
    assert split is not None
    _, array, spans = split
    return RawItems(array, spans)


def test_items_are_made_once_when_asked_for_and_read_as_their_json() -> None:
    items = history(orjson.OPT_INDENT_2)
    assert len(items) == len(ITEMS)
    assert items[0] is items[0] and items[-1] is items[len(ITEMS) - 1]
    assert [dict(m) for m in items] == ITEMS
    assert items[2:5] == [items[2], items[3], items[4]]
    assert isinstance(items[1], RawItem) and items[1]["content"] == "step 1"
    assert orjson.loads(items[3].raw) == ITEMS[3]
    with pytest.raises(IndexError):
        items[len(ITEMS)]


@given(
    picks=st.lists(st.one_of(st.integers(0, len(ITEMS) - 1), st.just(-1)), min_size=0, max_size=12),
    indent=st.booleans(),
)
def test_items_json_is_the_json_of_the_list_whatever_is_kept(
    picks: list[int], indent: bool
) -> None:
    """Any choice of kept items, in any order, repeated or not, between inserted messages:
    the array written is the JSON of that list."""
    items = history(orjson.OPT_INDENT_2 if indent else 0)
    listed = [{"role": "user", "content": "note"} if k < 0 else items[k] for k in picks]
    out = items_json(listed)
    if not any(k >= 0 for k in picks):
        assert out is None
        return
    assert out is not None
    assert orjson.loads(out) == [
        {"role": "user", "content": "note"} if k < 0 else ITEMS[k] for k in picks
    ]


@given(
    kept=st.sets(st.integers(0, len(ITEMS) - 1)).map(sorted),
    indent=st.booleans(),
)
def test_kept_items_are_written_as_slices_and_read_as_the_items(
    kept: list[int], indent: bool
) -> None:
    """What a rendering keeps as it is (``RawItems.take``): the items at those indices, no
    object made for the ones not read, and their array written from the body's bytes."""
    items = history(orjson.OPT_INDENT_2 if indent else 0)
    taken = items.take(kept)
    assert len(taken) == len(kept)
    assert items._made == [None] * len(ITEMS)
    out = items_json(taken)
    assert out is not None and orjson.loads(out) == [ITEMS[k] for k in kept]
    if kept == list(range(len(ITEMS))):
        assert out is items.source
    assert [dict(m) for m in taken] == [ITEMS[k] for k in kept]
    assert taken[1:] == [items[k] for k in kept[1:]]


def test_the_whole_history_in_order_is_its_own_bytes() -> None:
    items = history(orjson.OPT_INDENT_2)
    assert items_json(items) is items.source
    assert items_json(list(items)) is items.source
    assert items_json(list(items)[1:]) == items.source[items.spans[1][0] : items.spans[-1][1]].join(
        [b"[", b"]"]
    )


def test_a_wrong_spans_hint_reads_the_same_request() -> None:
    """``read_native``'s spans only save a split: spans that do not fit are ignored."""
    items = history()
    config = rb.Assembler(rb.AssemblyConfig(model_input_limit=100_000))._core
    plain = _core.read_native("anthropic", items.source, [], None, config)
    for spans in (list(reversed(items.spans)), [(0, len(items.source) + 1)], items.spans):
        _core.cache_clear()
        hinted = _core.read_native("anthropic", items.source, [], None, config, None, spans)
        assert hinted.count() == plain.count()
        assert [hinted.message(k) for k in range(len(hinted))] == [
            plain.message(k) for k in range(len(plain))
        ]
