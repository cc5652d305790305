"""The core reads each provider's tool definitions as the OpenAI tools it counts
(``_core.tools_as_openai``); the Python readers the adapters had are its oracle
(``native_readers.tools``): the same tools for every list they accept, a typed error for every
list they refuse (worded by the core, which names JSON's kinds where Python named its types)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from native_readers.tools import READERS

import ringbound as rb
from ringbound.providers import adapter

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_SCHEMA = st.fixed_dictionaries(
    {"type": st.just("object")}, optional={"properties": st.dictionaries(_TEXT, _JSON, max_size=2)}
)
_MAYBE = st.one_of(_JSON, _SCHEMA)


def _tool(provider: str) -> st.SearchStrategy[Any]:
    """A tool of the provider's shape, mostly well formed, sometimes not."""
    if provider == "anthropic":
        good = st.fixed_dictionaries(
            {"name": _TEXT},
            optional={
                "input_schema": _MAYBE,
                "description": _JSON,
                "type": st.sampled_from(["custom", "web_search_20250305", "bash_20250124"]),
                "cache_control": st.just({"type": "ephemeral"}),
                "max_uses": st.integers(0, 9),
            },
        )
    elif provider == "gemini":
        declaration = st.fixed_dictionaries(
            {"name": _TEXT},
            optional={
                "description": _JSON,
                "parameters": _MAYBE,
                "parametersJsonSchema": _MAYBE,
                "parameters_json_schema": _MAYBE,
            },
        )
        good = st.dictionaries(
            st.sampled_from(["functionDeclarations", "function_declarations", "googleSearch"]),
            st.lists(declaration, max_size=2) | _JSON,
            max_size=2,
        )
    elif provider == "bedrock_converse":
        spec = st.fixed_dictionaries(
            {"name": _TEXT, "inputSchema": st.fixed_dictionaries({"json": _MAYBE})},
            optional={"description": _JSON},
        )
        good = st.one_of(
            st.fixed_dictionaries({"toolSpec": spec}),
            st.just({"cachePoint": {"type": "default"}}),
            st.dictionaries(
                st.sampled_from(["toolSpec", "cachePoint", "other"]), _JSON, max_size=2
            ),
        )
    else:
        good = st.fixed_dictionaries(
            {"type": st.sampled_from(["function", "custom", "web_search", "mcp"])},
            optional={
                "name": _TEXT,
                "description": _JSON,
                "parameters": _MAYBE,
                "strict": st.none() | st.booleans(),
                "function": _JSON,
            },
        )
    return st.one_of(good, good, good, _JSON)


@pytest.mark.parametrize("provider", sorted(READERS))
@settings(max_examples=300)
@given(data=st.data())
def test_the_cores_tools_are_the_python_readers(provider: str, data: st.DataObject) -> None:
    tools = data.draw(st.lists(_tool(provider), max_size=4), label="tools")
    try:
        expected = READERS[provider](tools)
    except rb.InvalidMessageError:
        event("refused")
        with pytest.raises(rb.InvalidMessageError):
            adapter(provider).tools_to_openai(tools)
        return
    event("read")
    # The oracle's output as JSON gives it, as the core's does.
    assert adapter(provider).tools_to_openai(tools) == json.loads(json.dumps(expected))
