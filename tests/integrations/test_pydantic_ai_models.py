"""With no ringbound config, the Pydantic AI capability and history processor size each
request from the run's model: ``Agent.run`` drives a ``FunctionModel`` standing for each
provider family (its ``system`` and class as Pydantic AI's own models report them, a
``context_window`` in its profile, ``max_tokens`` in its settings), and every request must fit
that window, counted as that provider, less the request's own output reserve."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import ringbound as rb
from ringbound import models
from ringbound.integrations._base import Target
from ringbound.integrations._pydantic_ai_messages import to_chat
from ringbound.integrations.pydantic_ai import RingboundHistory, history_processor, tool_schema

TURNS = 26
WINDOW = 12_000
RESERVE = 1_000
INSTRUCTIONS = "You are the log auditor. Follow the audit rules to the letter."
#: Pydantic AI's ``system`` of each family (OpenAI's Responses model is told by its class).
SYSTEMS = {
    "openai_chat": "openai",
    "openai_responses": "openai",
    "anthropic": "anthropic",
    "gemini": "google-gla",
    "bedrock_converse": "bedrock",
}


def family_model(provider: str, script: Any, **kwargs: Any) -> FunctionModel:
    """A FunctionModel reporting ``provider``'s system, named as its Pydantic AI class."""
    name = "OpenAIResponsesModel" if provider == "openai_responses" else "FamilyModel"
    cls = type(name, (FunctionModel,), {"system": property(lambda self: SYSTEMS[provider])})
    return cls(script, **kwargs)  # type: ignore[no-any-return]


class Script:
    """Reads the logs one call at a time, then answers; records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[list[ModelMessage], AgentInfo]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append((list(messages), info))
        i = len(self.requests) - 1
        if i < TURNS:
            return ModelResponse(parts=[ToolCallPart("read_log", {"day": i}, f"call_{i}")])
        return ModelResponse(parts=[TextPart("All logs read.")])


def make_agent(model: FunctionModel, **kwargs: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, instructions=INSTRUCTIONS, **kwargs)

    @agent.tool_plain
    def read_log(day: int) -> str:
        """Read one day of logs."""
        return f"day {day}: " + " ".join(f"request {day}-{k} served in 12 ms;" for k in range(120))

    return agent


def provider_tokens(provider: str, messages: list[ModelMessage], info: AgentInfo) -> int:
    head = [{"role": "system", "content": info.instructions}] if info.instructions else []
    chat = [*head, *to_chat(messages).messages]
    assert rb.validate(chat) == []
    tools = [tool_schema(t) for t in [*info.function_tools, *info.output_tools]]
    return Target(provider).count(chat, tools or None, rb.AssemblyConfig())


def check(provider: str, script: Script) -> None:
    assert len(script.requests) == TURNS + 1
    counts = [provider_tokens(provider, m, info) for m, info in script.requests]
    assert max(counts) <= WINDOW - RESERVE, counts
    assert max(counts) > 0.7 * (WINDOW - RESERVE)
    assert len(script.requests[-1][0]) < 2 * TURNS  # history was dropped


@pytest.mark.parametrize("provider", list(SYSTEMS))
@pytest.mark.parametrize("how", ["capability", "processor"])
def test_no_config_fits_each_request_to_the_models_window_and_provider(
    provider: str, how: str
) -> None:
    script = Script()
    model = family_model(
        provider, script, model_name=f"acme-{provider}",
        profile={"context_window": WINDOW}, settings={"max_tokens": RESERVE},
    )  # fmt: skip
    if how == "capability":
        fit: Any = RingboundHistory()
        sizer = fit.for_model
    else:
        schemas = [{"type": "function", "function": {
            "name": "read_log", "description": "Read one day of logs.",
            "parameters": {"type": "object", "properties": {"day": {"type": "integer"}},
                           "required": ["day"], "additionalProperties": False}}}]  # fmt: skip
        processor = history_processor(tools=schemas)
        fit, sizer = ProcessHistory(processor), processor.for_model
    result = asyncio.run(make_agent(model, capabilities=[fit]).run("Read every log."))
    assert result.output == "All logs read."
    check(provider, script)
    config, counted_as = sizer.last
    assert counted_as == provider
    assert (config.model_input_limit, config.output_reserve_tokens) == (WINDOW, RESERVE)


def test_the_table_sizes_a_model_without_a_window_and_names_its_provider() -> None:
    models.register(
        models.ModelInfo(name="acme-tiny-gemini", family="gemini", context_window=None,
                         max_input_tokens=WINDOW - RESERVE, max_output_tokens=RESERVE,
                         source="https://acme.example/models")
    )  # fmt: skip
    try:
        script = Script()
        model = FunctionModel(script, model_name="acme-tiny-gemini")  # system: "function"
        capability = RingboundHistory()
        asyncio.run(make_agent(model, capabilities=[capability]).run("Read every log."))
        check("gemini", script)
        assert capability.for_model.last[1] == "gemini"
    finally:
        models._loaded().pop("acme-tiny-gemini")


def test_an_explicit_config_wins_and_an_unknown_model_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = family_model(
        "anthropic", Script(), model_name="acme", profile={"context_window": WINDOW}
    )
    mine = rb.AssemblyConfig(output_reserve_tokens=700, side_effect_tools=["send_email"])
    target, asm = RingboundHistory(mine).for_model(model, {"max_tokens": 2_000})
    assert (asm.config.model_input_limit, asm.config.output_reserve_tokens) == (WINDOW, 700)
    assert target.provider == "anthropic"
    target, asm = RingboundHistory(provider="gemini").for_model(model, {"max_tokens": 2_000})
    assert target.provider == "gemini" and asm.config.output_reserve_tokens == 2_000
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        RingboundHistory().for_model(FunctionModel(Script(), model_name="my-local-llama-3"))
    assert "'my-local-llama-3' is not in the models table" in caplog.text
    models.set_strict(True)
    try:
        with pytest.raises(rb.ConfigError):
            RingboundHistory().for_model(FunctionModel(Script(), model_name="my-local-llama-3"))
    finally:
        models.set_strict(False)
