"""``Assembler.assemble`` with LangChain message lists: planned in the chat shape, given back
as the caller's own objects, rewritten ones as copies, notes and repairs as new messages."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool

import ringbound as rb

LEDGER = "[ringbound:side-effect-ledger]"
CFG = rb.AssemblyConfig(
    model_input_limit=1_200,
    output_reserve_tokens=500,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)


def session(n: int = 12, result: str = "log line " * 40) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [
        SystemMessage("You are careful."),
        HumanMessage("Email Ana the report, then read the logs."),
    ]
    for i in range(n):
        name = "send_email" if i == 0 else "read_log"
        msgs += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": name, "args": {"day": i}}]),
            ToolMessage(result, tool_call_id=f"c{i}"),
        ]
    return msgs


def test_kept_messages_are_the_callers_and_the_note_follows_the_system() -> None:
    msgs = session()
    before = copy.deepcopy(msgs)
    res = rb.Assembler(CFG).assemble(msgs)
    assert msgs == before
    originals = {id(m) for m in msgs}
    assert res.messages[0] is msgs[0] and res.messages[2] is msgs[1]
    note = res.messages[1]
    assert isinstance(note, SystemMessage) and note.content.startswith(LEDGER)
    assert all(id(m) in originals for m in res.messages if m is not note)
    chat = convert_to_openai_messages(res.messages)
    assert rb.validate(chat) == []
    assert rb.count_tokens(chat) <= CFG.budget
    assert res.report.tokens_after == rb.count_tokens(chat)


def test_tools_are_counted_as_langchain_binds_them() -> None:
    @tool
    def read_log(day: int) -> str:
        """Read one day of logs."""
        return ""

    msgs = session(4)
    asm = rb.Assembler(rb.AssemblyConfig(model_input_limit=100_000))
    with_tools = asm.assemble(msgs, [read_log])
    without = asm.assemble(msgs)
    schema = {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Read one day of logs.",
            "parameters": {
                "type": "object",
                "properties": {"day": {"type": "integer"}},
                "required": ["day"],
            },
        },
    }
    assert with_tools.tools == [read_log]
    assert with_tools.report.tokens_after - without.report.tokens_after == (
        rb.count_tokens(convert_to_openai_messages(msgs), tools=[schema])
        - rb.count_tokens(convert_to_openai_messages(msgs))
    )
    with pytest.raises(rb.ConfigError) as e:
        asm.assemble(msgs, [42])
    assert e.value.key == "tools"


def test_a_truncated_result_is_a_copy_of_the_callers_message() -> None:
    msgs = session(6, result="line of a very long log " * 400)
    cfg = rb.AssemblyConfig(model_input_limit=20_000, max_tool_result_tokens=200)
    res = rb.Assembler(cfg).assemble(msgs)
    assert res.report.rewrites
    for r in res.report.rewrites:
        original = msgs[r.index]
        copy_ = next(m for m in res.messages if isinstance(m, ToolMessage) and m.id is None
                     and m.tool_call_id == original.tool_call_id)  # fmt: skip
        assert copy_ is not original and type(copy_) is ToolMessage
        assert len(copy_.content) < len(original.content)
        assert original.content == "line of a very long log " * 400
    assert rb.validate(convert_to_openai_messages(res.messages)) == []


def test_missing_results_are_synthesized_as_tool_messages() -> None:
    msgs = session(3)
    del msgs[3]  # the result of c0
    cfg = dataclasses.replace(CFG, on_pairing_error="synthesize_error_results")
    res = rb.Assembler(cfg).assemble(msgs)
    assert res.report.repairs == ["c0"]
    (made,) = [m for m in res.messages if isinstance(m, ToolMessage) and m.tool_call_id == "c0"]
    assert made.status == "error"
    assert rb.validate(convert_to_openai_messages(res.messages)) == []
    with pytest.raises(rb.PairingError):
        rb.Assembler(CFG).assemble(msgs)


def test_content_blocks_and_images_are_read() -> None:
    image = "data:image/png;base64," + "iVBORw0KGgo=" * 3
    msgs: list[BaseMessage] = [
        HumanMessage([{"type": "text", "text": "What is this?"},
                      {"type": "image_url", "image_url": {"url": image}}]),
        AIMessage([{"type": "text", "text": "Let me look."}],
                  tool_calls=[{"id": "c1", "name": "zoom", "args": {}}]),
        ToolMessage([{"type": "text", "text": "zoomed"}], tool_call_id="c1"),
    ]  # fmt: skip
    res = rb.Assembler(rb.AssemblyConfig(model_input_limit=100_000)).assemble(msgs)
    assert all(a is b for a, b in zip(res.messages, msgs, strict=True))
    assert res.report.tokens_after == rb.count_tokens(convert_to_openai_messages(msgs))


@pytest.mark.parametrize(
    ("placement", "kind", "at"),
    [("leading_system", SystemMessage, 1), ("inline_system", SystemMessage, 2),
     ("user", HumanMessage, 2)],
)  # fmt: skip
def test_notes_go_where_note_placement_says_and_come_back_as_themselves(
    placement: str, kind: type, at: int
) -> None:
    asm = rb.Assembler(dataclasses.replace(CFG, note_placement=placement))
    res = asm.assemble(session())
    assert type(res.messages[at]) is kind and res.messages[at].content.startswith(LEDGER)
    again = asm.assemble(res.messages)
    assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))
    assert again.report.ledger_added == []


def test_the_async_path_gives_the_same_result() -> None:
    msgs = session()
    sync = rb.Assembler(CFG).assemble(msgs)
    res = asyncio.run(rb.Assembler(CFG).assemble_async(msgs))
    assert [id(m) for m in res.messages[2:]] == [id(m) for m in sync.messages[2:]]
    assert res.messages[1].content == sync.messages[1].content


def test_bad_input_is_a_typed_error_naming_the_message() -> None:
    msgs: list[Any] = [HumanMessage("hi"), {"role": "user", "content": "a dict"}]
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.Assembler(CFG).assemble(msgs)
    assert e.value.index == 1
    two = HumanMessage([
        {"type": "tool_result", "tool_use_id": "a", "content": "x"},
        {"type": "tool_result", "tool_use_id": "b", "content": "y"},
    ])  # fmt: skip
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.Assembler(CFG).assemble([HumanMessage("hi"), two])
    assert e.value.index == 1
    with pytest.raises(rb.ConfigError) as c:
        rb.Assembler(CFG, provider="anthropic").assemble([HumanMessage("hi")])
    assert c.value.key == "provider"
