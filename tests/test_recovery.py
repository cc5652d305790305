"""Recovery: the ``expand_message`` tool in every provider's tools shape, and ``recover``
finding the full text of a truncated tool result from its anchor in the original history."""

from __future__ import annotations

import copy
import json
from typing import Any

import pydantic
import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound import _core
from ringbound.errors import ConfigError, RingboundError
from ringbound.providers import PROVIDERS, adapter
from ringbound.summary.recovery import (
    EXPAND_MESSAGE,
    AnchorNotFoundError,
    InvalidAnchorError,
    Recovered,
    expand_message_tool,
    recover,
)

BIG = "".join(f"line {i}: ok\n" for i in range(300))
OTHER = "".join(f"row {i}: fine\n" for i in range(300))


def truncated(full: str) -> str:
    """A result cut as the core cuts it: head, the anchor naming the original, tail."""
    return (
        full[:40]
        + "\n[ringbound: 2500 of 2600 tokens of this tool result were cut. To read them, call "
        + 'expand_message with {"message_id": "'
        + _core.content_id(full)
        + '"}]\n'
        + full[-40:]
    )


def call(cid: str, name: str = "read_log") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}


def chat_history() -> list[dict[str, Any]]:
    """An OpenAI Chat history whose call id ``c1`` recurs in a later turn (legal in Chat)."""
    return [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Read the log."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": BIG},
        {"role": "assistant", "content": "Read. Again?"},
        {"role": "user", "content": "Read the other one."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": OTHER}]},
        {"role": "assistant", "content": "Done."},
    ]


# The tool ----------------------------------------------------------------------------------


def test_expand_message_tool_in_each_providers_shape() -> None:
    chat = expand_message_tool()
    assert chat["type"] == "function" and chat["function"]["name"] == EXPAND_MESSAGE
    schema = chat["function"]["parameters"]
    assert schema["required"] == ["message_id"]
    assert schema["properties"]["message_id"]["type"] == "string"
    assert "full original text" in chat["function"]["description"]
    assert expand_message_tool("openai_responses")["parameters"] == schema
    assert expand_message_tool("anthropic")["input_schema"] == schema
    assert expand_message_tool("gemini")["parameters"] == schema
    bedrock = expand_message_tool("bedrock_converse")
    assert bedrock["toolSpec"]["inputSchema"]["json"] == schema


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if p != "openai_chat"])
def test_expand_message_tool_reads_as_the_chat_tool(provider: str) -> None:
    tool = expand_message_tool(provider)
    tools = [{"functionDeclarations": [tool]}] if provider == "gemini" else [tool]
    function = adapter(provider).tools_to_openai(tools)[0]["function"]
    assert function == expand_message_tool()["function"]


def test_expand_message_tool_is_a_new_object_each_time() -> None:
    tool = expand_message_tool("anthropic")
    tool["input_schema"]["required"].append("x")
    assert expand_message_tool("anthropic")["input_schema"]["required"] == ["message_id"]


# recover on OpenAI Chat --------------------------------------------------------------------


def test_a_truncated_text_recovers_the_exact_original() -> None:
    history = chat_history()
    found = recover(history, truncated(BIG))
    assert found == Recovered(index=3, call_id="c1", text=BIG, content=BIG)
    assert found.content is history[3]["content"]


def test_a_recurring_call_id_resolves_to_the_result_whose_text_matches() -> None:
    history = chat_history()
    found = recover(history, truncated(OTHER))
    assert (found.index, found.call_id, found.text) == (7, "c1", OTHER)
    assert found.content is history[7]["content"]
    assert recover(history, truncated(BIG)).index == 3


@pytest.mark.parametrize(
    "anchor",
    [
        _core.content_id(BIG),
        f"  {_core.content_id(BIG)}\n",
        {"message_id": _core.content_id(BIG)},
        json.dumps({"message_id": _core.content_id(BIG)}),
        truncated(BIG),
    ],
    ids=["id", "padded-id", "arguments", "arguments-json", "truncated-text"],
)
def test_every_anchor_form_names_the_result(anchor: Any) -> None:
    assert recover(chat_history(), anchor).text == BIG


def test_sdk_messages_are_read_and_their_content_returned() -> None:
    class Message(pydantic.BaseModel):
        role: str
        content: Any = None
        tool_call_id: str | None = None
        tool_calls: list[dict[str, Any]] | None = None

    history = [Message(**m) for m in chat_history()]
    found = recover(history, {"message_id": _core.content_id(OTHER)})
    assert found.index == 7 and found.text == OTHER
    assert found.content is history[7].content


def test_an_unknown_id_is_not_found() -> None:
    with pytest.raises(AnchorNotFoundError, match="rb-0000000000000000") as e:
        recover(chat_history(), "rb-0000000000000000")
    assert e.value.message_id == "rb-0000000000000000"
    assert isinstance(e.value, LookupError) and isinstance(e.value, RingboundError)


def test_a_changed_history_finds_nothing_rather_than_the_wrong_result() -> None:
    history = chat_history()
    anchor = truncated(BIG)
    history[3] = {**history[3], "content": BIG + "one more line\n"}
    with pytest.raises(AnchorNotFoundError):
        recover(history, anchor)


@pytest.mark.parametrize(
    "anchor",
    [
        "no anchor here",
        "rb-123",
        {"message_id": "rb-XYZ"},
        {"id": "rb-0000000000000000"},
        '{"message_id": 7}',
        truncated(BIG) + truncated(OTHER),
        42,
        None,
    ],
    ids=["text", "short-id", "bad-id", "wrong-key", "json-not-str", "two-ids", "int", "none"],
)
def test_a_malformed_anchor_is_refused(anchor: Any) -> None:
    with pytest.raises(InvalidAnchorError) as e:
        recover(chat_history(), anchor)
    assert isinstance(e.value, ValueError) and isinstance(e.value, RingboundError)


def test_the_same_anchor_twice_in_a_text_is_one_anchor() -> None:
    assert recover(chat_history(), truncated(BIG) + "\n" + truncated(BIG)).text == BIG


# recover on every provider -----------------------------------------------------------------


def full_text(provider: str, text: str) -> str:
    """The full text the core sees for a plain result ``text`` in the provider's shape:
    Gemini's result is the compact JSON of its ``response`` object."""
    if provider == "gemini":
        return json.dumps({"output": text}, ensure_ascii=False, separators=(",", ":"))
    return text


def native(provider: str) -> tuple[list[Any], Any]:
    return native_of(provider, chat_history())


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("text", [BIG, OTHER], ids=["first", "second"])
def test_every_provider_recovers_the_original_of_a_truncated_result(
    provider: str, text: str
) -> None:
    messages, system = native(provider)
    before = copy.deepcopy((messages, system))
    full = full_text(provider, text)
    found = recover(messages, truncated(full), provider, system=system)
    assert (messages, system) == before
    assert found.text == full
    escaped = json.dumps(text)[1:-1]
    holding = [i for i, m in enumerate(messages) if escaped in json.dumps(m)]
    assert holding == [found.index]
    assert escaped in json.dumps(found.content)


@pytest.mark.parametrize(
    ("provider", "where"),
    [
        ("anthropic", lambda m, i: m[i]["content"][0]["content"]),
        ("bedrock_converse", lambda m, i: m[i]["content"][0]["toolResult"]["content"]),
        ("gemini", lambda m, i: m[i]["parts"][0]["functionResponse"]["response"]),
        ("openai_responses", lambda m, i: m[i]["output"]),
    ],
)
def test_the_content_returned_is_the_callers_own_object(provider: str, where: Any) -> None:
    messages, system = native(provider)
    found = recover(messages, truncated(full_text(provider, OTHER)), provider, system=system)
    assert found.content is where(messages, found.index)


def test_an_error_result_is_found_by_the_text_the_core_cut() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "run", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "is_error": True,
                    "content": [{"type": "text", "text": BIG}],
                }
            ],
        },
    ]
    # The core cuts a flagged result's own text; the flag marks it an error.
    found = recover(messages, truncated(BIG), "anthropic")
    assert (found.index, found.call_id, found.text) == (2, "t1", BIG)


def test_an_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        recover(chat_history(), _core.content_id(BIG), "cohere")
    with pytest.raises(ConfigError):
        expand_message_tool("cohere")


# End to end: the anchor an assembly writes ----------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_anchor_an_assembly_writes_recovers_the_original(provider: str) -> None:
    huge = "".join(f"line {i}: ok\n" for i in range(3000))
    chat: list[dict[str, Any]] = [{"role": "user", "content": "Summarize the logs."}]
    for i in range(8):  # the huge result is old enough to be in the middle
        chat += [
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}")]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": huge if i == 1 else f"day {i}"},
        ]
    chat.append({"role": "user", "content": "Thanks."})
    messages, system = native_of(provider, chat)
    cfg = rb.AssemblyConfig(
        model_input_limit=8_000,
        output_reserve_tokens=500,
        stages=("truncate_oversized_results",),
        max_tool_result_tokens=1_000,
    )
    res = rb.Assembler(cfg, provider=provider).assemble(messages, system=system)
    assert [r.kind for r in res.report.rewrites] == ["truncated"]
    dumped = json.loads(json.dumps(res.messages))
    shortened = next(t for t in strings(dumped) if "expand_message" in t)
    found = recover(messages, shortened, provider, system=system)
    assert found.text == full_text(provider, huge)


def native_of(provider: str, chat: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    if provider == "openai_chat":
        return chat, None
    return from_canonical(provider, chat)


def strings(value: Any) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []
