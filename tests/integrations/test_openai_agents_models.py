"""With no ringbound config, ``call_model_input_filter`` sizes each call from the agent's
model: ``Runner.run`` drives a model of each provider family (the SDK's own Responses and Chat
Completions model classes, and its ``LitellmModel`` routed to Anthropic, Gemini and Bedrock),
each answering from a script, and every request must fit the model's window (from the models
table), counted as that provider, less the agent's ``max_tokens``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from agents import Agent, ModelResponse, ModelSettings, RunConfig, Runner, function_tool
from agents.extensions.models.litellm_model import LitellmModel
from agents.models.chatcmpl_converter import Converter as ChatConverter
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import Converter, OpenAIResponsesModel
from agents.usage import Usage
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import ringbound as rb
from ringbound import models
from ringbound.integrations._base import Target
from ringbound.integrations.openai_agents import call_model_input_filter, model_facts

TURNS = 26
WINDOW = 12_000
RESERVE = 1_000
INSTRUCTIONS = "You are the log auditor. Follow the audit rules to the letter."
#: The table entries of the test models, one per family, each with the test's window.
ENTRIES = {
    "acme-tiny-gpt": "openai",
    "acme-tiny-claude": "anthropic",
    "acme-tiny-gemini": "gemini",
    "acme-tiny-nova": "bedrock",
}


@function_tool
def read_log(day: int) -> str:
    """Read one day of logs."""
    return f"day {day}: " + " ".join(f"request {day}-{k} served in 12 ms;" for k in range(120))


class Scripted:
    """``get_response`` from a script (reads, then an answer), recording each request."""

    requests: list[dict[str, Any]]

    async def get_response(
        self, system_instructions: str | None, input: Any, model_settings: Any,
        tools: list[Any], output_schema: Any, handoffs: list[Any], tracing: Any, **kw: Any,
    ) -> ModelResponse:  # fmt: skip
        sent = list(Converter.convert_tools(tools, handoffs).tools)
        self.requests.append({"instructions": system_instructions, "input": list(input),
                              "tools": sent})  # fmt: skip
        i = len(self.requests) - 1
        if i < TURNS:
            out: Any = ResponseFunctionToolCall(
                type="function_call", call_id=f"call_{i}", name="read_log",
                arguments=f'{{"day":{i}}}', id=f"fc_{i}",
            )  # fmt: skip
        else:
            text = ResponseOutputText(type="output_text", text="Done.", annotations=[])
            out = ResponseOutputMessage(id="m", type="message", role="assistant",
                                        status="completed", content=[text])  # fmt: skip
        return ModelResponse(output=[out], usage=Usage(), response_id=None)


class ResponsesModel(Scripted, OpenAIResponsesModel):
    pass


class ChatModel(Scripted, OpenAIChatCompletionsModel):
    pass


class RoutedModel(Scripted, LitellmModel):
    pass


def client() -> AsyncOpenAI:
    return AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")  # never called


def make(provider: str) -> Scripted:
    model: Scripted
    if provider == "openai_responses":
        model = ResponsesModel("acme-tiny-gpt", client())
    elif provider == "openai_chat":
        model = ChatModel("acme-tiny-gpt", client())
    else:
        route = {"anthropic": "anthropic/acme-tiny-claude", "gemini": "gemini/acme-tiny-gemini",
                 "bedrock_converse": "bedrock/acme-tiny-nova"}[provider]  # fmt: skip
        model = RoutedModel(route, api_key="unused")
    model.requests = []
    return model


@pytest.fixture(autouse=True)
def tiny_models() -> Iterator[None]:
    for name, family in ENTRIES.items():
        models.register(models.ModelInfo(name=name, family=family, context_window=WINDOW,
                                         max_output_tokens=4_000,
                                         source="https://acme.example/models"))  # fmt: skip
    try:
        yield
    finally:
        for name in ENTRIES:
            models._loaded().pop(name)


def provider_tokens(provider: str, request: dict[str, Any]) -> int:
    """The request as ``provider`` receives it: the Responses input as is, else as the SDK
    converts it to chat messages, then in the provider's shape."""
    if provider == "openai_responses":
        return rb.count_tokens(request["input"], provider="openai_responses",
                               tools=request["tools"], system=request["instructions"])  # fmt: skip
    chat = [{"role": "system", "content": request["instructions"]},
            *ChatConverter.items_to_messages(request["input"])]  # fmt: skip
    assert rb.validate(chat) == []
    tools = [{"type": "function", "function": {k: t[k] for k in ("name", "description",
              "parameters")}} for t in request["tools"]]  # fmt: skip
    return Target(provider).count(chat, tools, rb.AssemblyConfig())


PROVIDERS = ["openai_responses", "openai_chat", "anthropic", "gemini", "bedrock_converse"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_config_fits_each_call_to_the_models_window_and_provider(provider: str) -> None:
    model = make(provider)
    agent = Agent(name="auditor", instructions=INSTRUCTIONS, model=model,  # type: ignore[arg-type]
                  tools=[read_log], model_settings=ModelSettings(max_tokens=RESERVE))  # fmt: skip
    fit = call_model_input_filter()
    run = RunConfig(call_model_input_filter=fit, tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, "Read every log.", run_config=run, max_turns=TURNS + 2))
    assert result.final_output == "Done."
    assert len(model.requests) == TURNS + 1
    counts = [provider_tokens(provider, r) for r in model.requests]
    assert max(counts) <= WINDOW - RESERVE, counts
    assert max(counts) > 0.7 * (WINDOW - RESERVE)
    assert len(model.requests[-1]["input"]) < 2 * TURNS
    assert fit.last_provider == provider
    cfg = fit.last_config
    assert (cfg.model_input_limit, cfg.output_reserve_tokens) == (WINDOW, RESERVE)


def test_what_the_filter_reads_from_model_names() -> None:
    assert model_facts("litellm/anthropic/claude-sonnet-4-5").provider == "anthropic"
    assert model_facts("gpt-4o").provider == "openai_responses"
    assert model_facts("claude-sonnet").provider == "anthropic"
    assert model_facts(None).name is not None  # the SDK's default model
    assert model_facts("gpt-4o", ModelSettings(max_tokens=321)).output_reserve == 321


def test_an_explicit_config_and_model_win_and_an_unknown_model_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fit: Any = call_model_input_filter(rb.AssemblyConfig(output_reserve_tokens=700))
    target, asm = fit.for_model(make("anthropic"), ModelSettings(max_tokens=2_000))
    assert (asm.config.model_input_limit, asm.config.output_reserve_tokens) == (WINDOW, 700)
    assert target.provider == "anthropic"
    fit = call_model_input_filter(model="litellm/gemini/acme-tiny-gemini")
    assert fit.for_model(None)[0].provider == "gemini"
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        call_model_input_filter().for_model("my-local-llama-4")  # type: ignore[attr-defined]
    assert "'my-local-llama-4' is not in the models table" in caplog.text
    models.set_strict(True)
    try:
        with pytest.raises(rb.ConfigError):
            call_model_input_filter().for_model("my-local-llama-4")  # type: ignore[attr-defined]
    finally:
        models.set_strict(False)
