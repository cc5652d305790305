"""The OpenAI Agents SDK through its own runner: ``Runner.run`` with a model implementing the
SDK's ``Model`` interface (answering from a script, recording every request) and
``call_model_input_filter`` in the ``RunConfig``, over enough turns that trimming happens."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from agents import Agent, ModelResponse, RunConfig, Runner, function_tool
from agents.models.interface import Model
from agents.models.openai_responses import Converter
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import ringbound as rb
from ringbound.integrations.openai_agents import agent_tools, call_model_input_filter

INSTRUCTIONS = "You are the log auditor. " + "Follow the audit rules to the letter. " * 60
TURNS = 14
CFG = rb.AssemblyConfig(
    model_input_limit=2_600,
    output_reserve_tokens=400,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)


@function_tool
def send_email(to: str) -> str:
    """Send the report by email."""
    return f"sent to {to}"


@function_tool
def read_log(day: int) -> str:
    """Read one day of logs."""
    return f"day {day}: " + "request served in 12 ms; " * 25


class ScriptedModel(Model):
    """The SDK's ``Model`` interface answering from a script: a side-effecting call, reads,
    then a final answer. Records what each request carried."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.requests: list[dict[str, Any]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.requests.append(
            {
                "instructions": system_instructions,
                "input": list(input),
                "tools": list(Converter.convert_tools(tools, handoffs).tools),
            }
        )
        i = len(self.requests) - 1
        if i < self.turns:
            name, args = (
                ("send_email", '{"to":"ana@example.com"}')
                if i == 0
                else (
                    "read_log",
                    f'{{"day":{i}}}',
                )
            )
            out: Any = ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{i}", name=name, arguments=args, id=f"fc_{i}"
            )
        else:
            out = ResponseOutputMessage(
                id="msg_final",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text="Done.", annotations=[])],
            )
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("these tests run the agent without streaming")


def run(cfg: rb.AssemblyConfig, placement: str | None = None) -> tuple[ScriptedModel, Any, Any]:
    model = ScriptedModel(TURNS)
    agent = Agent(
        name="auditor", instructions=INSTRUCTIONS, model=model, tools=[send_email, read_log]
    )
    cfg = dataclasses.replace(cfg, note_placement=placement)
    fit = call_model_input_filter(cfg)
    result = asyncio.run(
        Runner.run(
            agent,
            "Email Ana the report, then read the logs.",
            max_turns=TURNS + 2,
            run_config=RunConfig(call_model_input_filter=fit, tracing_disabled=True),
        )
    )
    return model, result, fit


def noted(request: dict[str, Any]) -> bool:
    texts = [request["instructions"] or ""] + [
        i.get("content") for i in request["input"] if isinstance(i.get("content"), str)
    ]
    return any("[ringbound:side-effect-ledger]" in t and "send_email" in t for t in texts)


def test_a_run_fits_every_model_call_counting_instructions_and_tools() -> None:
    model, result, fit = run(CFG)
    assert result.final_output == "Done."
    assert len(model.requests) == TURNS + 1
    counts = []
    for r in model.requests:
        assert r["instructions"].startswith(INSTRUCTIONS)
        assert [t["name"] for t in r["tools"]] == ["send_email", "read_log"]
        tokens = rb.count_tokens(
            r["input"], provider="openai_responses", tools=r["tools"], system=r["instructions"]
        )
        assert tokens <= CFG.budget, (tokens, CFG.budget)
        assert rb.validate(r["input"], provider="openai_responses") == []
        counts.append(tokens)
    assert max(counts) > 0.8 * CFG.budget
    flags = [noted(r) for r in model.requests]
    assert True in flags, "trimming never happened"
    first = flags.index(True)
    assert all(flags[first:]) and not any(flags[:first])
    # The notes went into the instructions, never into the input.
    assert "[ringbound" in model.requests[-1]["instructions"]
    assert not any("[ringbound" in str(i) for r in model.requests for i in r["input"])
    assert fit.last_report.dropped_rings
    # The runner's own history is whole: every call and output of the run.
    kinds = [i.get("type") for i in result.to_input_list()]
    assert kinds.count("function_call") == kinds.count("function_call_output") == TURNS


@pytest.mark.parametrize("placement", ["leading_system", "user"])
def test_notes_can_be_input_items(placement: str) -> None:
    model, _, _ = run(CFG, placement)
    last = model.requests[-1]
    assert "[ringbound" not in last["instructions"]
    role = "user" if placement == "user" else "system"
    notes = [i for i in last["input"] if str(i.get("content", "")).startswith("[ringbound")]
    assert [n["role"] for n in notes] == [role]
    for r in model.requests:
        assert (
            rb.count_tokens(
                r["input"], provider="openai_responses", tools=r["tools"], system=r["instructions"]
            )
            <= CFG.budget
        )


def test_the_tools_counted_are_the_ones_sent() -> None:
    agent = Agent(name="a", instructions="x", tools=[send_email, read_log])
    tools = asyncio.run(agent_tools(agent))
    assert [t["name"] for t in tools] == ["send_email", "read_log"]
    assert tools[0]["parameters"]["properties"]["to"]["type"] == "string"


def test_a_bad_ledger_is_a_config_error() -> None:
    with pytest.raises(rb.ConfigError) as e:
        call_model_input_filter(CFG, ledger={})  # type: ignore[arg-type]
    assert e.value.key == "ledger"
