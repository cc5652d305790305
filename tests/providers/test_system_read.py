"""The core reads each provider's top-level system (``_core.read_system``: the caller's texts,
then each note an earlier assembly left in it); the Python readers the adapters had are its
oracle (``native_readers``): the same groups and cache markers for every system they accept, a
typed error naming the system for every one they refuse."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from native_readers.anthropic import _cache_markers, _system_parts
from native_readers.bedrock_converse import _system as _bedrock_system
from native_readers.gemini import _read_system
from native_readers.openai_responses import _instructions

import ringbound as rb
from ringbound._core import LEDGER_MARKER, NOTE_SEPARATOR, SUMMARY_MARKER
from ringbound.providers import adapter

_PIECE = st.sampled_from(
    ["", "Be brief.", "é 日本", NOTE_SEPARATOR, LEDGER_MARKER + " sent", SUMMARY_MARKER + " so far"]
)
_TEXT = st.lists(_PIECE, max_size=4).map("".join)
_ODD = st.one_of(st.none(), st.booleans(), st.integers(-9, 9), st.just([]), st.just({}))


def _oracle(provider: str, system: Any) -> tuple[list[list[str]], int]:
    """The groups and markers as the adapters read them in Python."""
    if provider == "anthropic":
        texts, note, summary = _system_parts(system)
        markers = _cache_markers(system) if isinstance(system, list) else 0
        return ([texts] if texts else []) + [[t] for t in (note, summary) if t is not None], markers
    if provider == "gemini":
        read = _read_system(system)
        return [read.texts] + [[t] for t in (read.note, read.summary) if t is not None], 0
    if provider == "bedrock_converse":
        read = _bedrock_system(system)
        return [read.texts] + [[t] for t in read.notes + read.summaries], 0
    instructions = _instructions(system)
    return ([] if instructions is None else [[instructions]]), 0


def _system(provider: str) -> st.SearchStrategy[Any]:
    if provider == "anthropic":
        block = st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "text", "image"]), "text": _TEXT | _ODD},
            optional={"cache_control": st.none() | st.just({"type": "ephemeral"})},
        )
        shaped = st.lists(block | _ODD, max_size=4)
    elif provider == "gemini":
        part = st.one_of(_TEXT, st.fixed_dictionaries({"text": _TEXT | _ODD}), _ODD)
        shaped = st.fixed_dictionaries(
            {}, optional={"parts": st.lists(part, max_size=4) | part, "role": st.just("user")}
        ) | st.fixed_dictionaries({"text": _TEXT})
    elif provider == "bedrock_converse":
        text = st.one_of(_TEXT, st.integers(0, 1))
        guarded = st.fixed_dictionaries({"text": st.fixed_dictionaries({"text": text})})
        block = st.one_of(
            st.fixed_dictionaries({"text": text}),
            st.just({"cachePoint": {"type": "default"}}),
            st.fixed_dictionaries({"guardContent": guarded | _ODD}),
        )
        odd = st.dictionaries(st.sampled_from(["text", "cachePoint", "video"]), _TEXT, max_size=2)
        good = st.one_of(
            st.fixed_dictionaries({"text": _TEXT}), st.just({"cachePoint": {"type": "default"}})
        )
        shaped = st.lists(good, max_size=3) | st.lists(st.one_of(block, odd, _ODD), max_size=3)
    else:
        shaped = _ODD
    # Hypothesis picks among the branches evenly: half the systems are of the provider's shape.
    return st.one_of(shaped, st.one_of(st.none(), _TEXT, _ODD))


@pytest.mark.parametrize(
    "provider", ["anthropic", "gemini", "bedrock_converse", "openai_responses"]
)
@settings(max_examples=300)
@given(data=st.data())
def test_the_cores_system_is_the_python_readers(provider: str, data: st.DataObject) -> None:
    system = data.draw(_system(provider), label="system")
    native = adapter(provider)
    try:
        texts, markers = _oracle(provider, system)
    except rb.InvalidMessageError:
        event("refused")
        with pytest.raises(rb.InvalidMessageError) as refused:
            native.system_texts(system)
        assert refused.value.index is None
        return
    event("read")
    assert native.system_texts(system) == texts
    assert native.system_markers(system) == markers
