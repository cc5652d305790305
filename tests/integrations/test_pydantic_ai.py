"""Pydantic AI through its own agent loop: ``Agent.run`` with a ``FunctionModel`` answering
from a script and recording every request, fitted by ``RingboundHistory`` or by
``history_processor`` in ``ProcessHistory``, over enough turns that trimming happens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from canonical_writers import from_canonical
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import RunContext
from pydantic_ai.usage import RunUsage

import ringbound as rb
from ringbound.integrations._pydantic_ai_messages import to_chat
from ringbound.integrations.pydantic_ai import RingboundHistory, history_processor, tool_schema

INSTRUCTIONS = ("You are the log auditor. " + "Follow the audit rules to the letter. " * 60).strip()
TURNS = 14
CFG = rb.AssemblyConfig(
    model_input_limit=2_400,
    output_reserve_tokens=400,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)
LEDGER = "[ringbound:side-effect-ledger]"
#: The run context Pydantic AI gives a processor, for calling one directly.
CTX: RunContext[None] = RunContext(
    deps=None, model=FunctionModel(lambda m, i: None), usage=RunUsage()
)


class Script:
    """A FunctionModel function: a side-effecting call, reads, then a final answer; records
    each request's messages, tools and instructions."""

    def __init__(self) -> None:
        self.requests: list[tuple[list[ModelMessage], AgentInfo]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append((list(messages), info))
        i = len(self.requests) - 1
        if i == 0:
            return ModelResponse(
                parts=[ToolCallPart("send_email", {"to": "ana@example.com"}, f"call_{i}")]
            )
        if i < TURNS:
            return ModelResponse(parts=[ToolCallPart("read_log", {"day": i}, f"call_{i}")])
        return ModelResponse(parts=[TextPart("All logs read; the email went out.")])


def make_agent(script: Script, **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), instructions=INSTRUCTIONS, **kwargs)

    @agent.tool_plain
    def send_email(to: str) -> str:
        """Send the report by email."""
        return f"sent to {to}"

    @agent.tool_plain
    def read_log(day: int) -> str:
        """Read one day of logs."""
        return f"day {day}: " + "request served in 12 ms; " * 25

    return agent


def request_tokens(messages: list[ModelMessage], info: AgentInfo) -> int:
    """What the request costs as OpenAI Chat: the instructions, the history, the tools."""
    head = [{"role": "system", "content": info.instructions}] if info.instructions else []
    chat = [*head, *to_chat(messages).messages]
    assert rb.validate(chat) == []
    tools = [tool_schema(t) for t in [*info.function_tools, *info.output_tools]]
    return rb.count_tokens(chat, tools=tools or None)


def noted(messages: list[ModelMessage]) -> bool:
    first = messages[0]
    assert isinstance(first, ModelRequest)
    return any(
        isinstance(p, SystemPromptPart)
        and p.content.startswith(LEDGER)
        and "send_email" in p.content
        for p in first.parts
    )


def check(script: Script) -> list[int]:
    assert len(script.requests) == TURNS + 1
    counts = [request_tokens(m, info) for m, info in script.requests]
    assert max(counts) <= CFG.budget, (counts, CFG.budget)
    assert max(counts) > 0.8 * CFG.budget
    flags = [noted(m) for m, _ in script.requests]
    assert True in flags, "trimming never happened"
    first = flags.index(True)
    assert all(flags[first:]) and not any(flags[:first])
    for messages, info in script.requests:
        assert info.instructions == INSTRUCTIONS
        assert [t.name for t in info.function_tools] == ["send_email", "read_log"]
        goal = messages[0].parts[-1]  # type: ignore[union-attr]
        assert isinstance(goal, UserPromptPart) and goal.content.startswith("Email Ana")
    return counts


def test_the_capability_fits_every_request_and_keeps_the_history() -> None:
    script = Script()
    capability = RingboundHistory(CFG)
    agent = make_agent(script, capabilities=[capability])
    result = asyncio.run(agent.run("Email Ana the report, then read the logs."))
    assert result.output.startswith("All logs read")
    check(script)
    # The run's history keeps every call and return, and no note.
    history = result.all_messages()
    returns = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == TURNS
    assert not any(noted([m]) for m in history if isinstance(m, ModelRequest))
    assert capability.last_report.dropped_rings


def test_history_processor_in_process_history_fits_every_request() -> None:
    script = Script()
    # A processor sees no tools: give it the schemas the model receives.
    processor = history_processor(CFG, tools=_schemas(make_agent(Script())))
    agent = make_agent(script, capabilities=[ProcessHistory(processor)])
    result = asyncio.run(agent.run("Email Ana the report, then read the logs."))
    assert result.output.startswith("All logs read")
    check(script)


def _schemas(agent: Agent[None, str]) -> list[dict[str, Any]]:
    """The tool schemas ``agent`` sends, as a first request shows them."""
    seen: list[AgentInfo] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    with agent.override(model=FunctionModel(answer)):
        asyncio.run(agent.run("list your tools"))
    return [tool_schema(t) for t in seen[0].function_tools]


def test_a_request_kept_in_part_is_a_copy_and_notes_join_the_first_request() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart("rules"), UserPromptPart("Email Ana, read logs.")])
    ]
    for i in range(TURNS):
        name = "send_email" if i == 0 else "read_log"
        history += [
            ModelResponse(parts=[ToolCallPart(name, {"day": i}, f"call_{i}")]),
            ModelRequest(parts=[ToolReturnPart(name, "log " * 120, f"call_{i}")]),
        ]
    out = asyncio.run(history_processor(CFG)(CTX, history))
    assert out[0] is not history[0]
    assert [type(p) for p in out[0].parts] == [SystemPromptPart, SystemPromptPart, UserPromptPart]
    assert out[0].parts[0] is history[0].parts[0] and out[0].parts[2] is history[0].parts[1]
    assert out[0].parts[1].content.startswith(LEDGER)
    assert all(m is history[history.index(m)] for m in out[1:])
    assert rb.count_tokens(to_chat(out).messages) <= CFG.budget
    # Idempotent: the note is recognized, nothing more is dropped or added.
    again = asyncio.run(history_processor(CFG)(CTX, out))
    assert len(again) == len(out) and all(a is b for a, b in zip(again, out, strict=True))


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(rb.InvalidMessageError) as e:
        asyncio.run(history_processor(CFG)(CTX, [{"role": "user", "content": "hi"}]))  # type: ignore[list-item]
    assert e.value.index == 0
    with pytest.raises(rb.ConfigError) as c:
        history_processor(CFG, tools=[42])  # type: ignore[list-item]
    assert c.value.key == "tools"
    with pytest.raises(rb.ConfigError) as c:
        RingboundHistory(rb.AssemblyConfig(note_placement="top_level_system"))
    assert c.value.key == "note_placement"


def test_provider_fits_the_history_as_that_provider_counts_it() -> None:
    history: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Read the logs.")])]
    for i in range(TURNS):
        history += [
            ModelResponse(parts=[ToolCallPart("read_log", {"day": i}, f"call_{i}")]),
            ModelRequest(parts=[ToolReturnPart("read_log", "log line " * 60, f"call_{i}")]),
        ]

    def as_claude(messages: list[ModelMessage]) -> int:
        native, system = from_canonical("anthropic", to_chat(messages).messages)
        return rb.count_tokens(native, provider="anthropic", system=system)

    fitted = asyncio.run(history_processor(CFG, provider="anthropic")(CTX, history))
    assert as_claude(fitted) <= CFG.budget
    as_openai = asyncio.run(history_processor(CFG)(CTX, history))
    assert as_claude(as_openai) > CFG.budget
    with pytest.raises(rb.ConfigError) as e:
        history_processor(CFG, provider="claude")
    assert e.value.key == "provider"
