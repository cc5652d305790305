"""With no ringbound config, LangChain integrations size each call from the model they wrap:
``create_agent`` runs its own loop with a fake model of each provider family (named as the
partner class, carrying a profile and ``max_tokens``), and every request must fit that model's
window, counted as that provider, less the request's own output reserve. Falling back to the
128k window or to OpenAI's count makes these requests overflow."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, convert_to_openai_messages
from langchain_core.tools import tool

import ringbound as rb
from ringbound import models
from ringbound.integrations._base import Target
from ringbound.integrations.langchain import RingboundMiddleware, pre_model_hook

from .fake_chat import FAMILY_FAKES, FamilyFakeModel, script

PROMPT = "You are the log auditor. Follow the audit rules to the letter."
TURNS = 26
#: A window small enough that the run must be trimmed, large enough that the default
#: 1,024-token margin cannot hide a request counted as the wrong provider (a third more).
WINDOW = 12_000
RESERVE = 1_000


@tool
def send_email(to: str) -> str:
    """Send the report by email."""
    return f"sent to {to}"


@tool
def read_log(day: int) -> str:
    """Read one day of logs."""
    return f"day {day}: " + " ".join(f"request {day}-{k} served in 12 ms;" for k in range(120))


def provider_tokens(provider: str, messages: list[Any], tools: list[dict[str, Any]]) -> int:
    """The request as ``provider`` receives it, counted with its own rules and ratio."""
    chat = convert_to_openai_messages(messages)
    assert rb.validate(chat) == []
    return Target(provider).count(chat, tools or None, rb.AssemblyConfig())


def run(model: FamilyFakeModel, middleware: RingboundMiddleware) -> list[int]:
    agent = create_agent(model, [send_email, read_log], system_prompt=PROMPT,
                         middleware=[middleware])  # fmt: skip
    out = agent.invoke({"messages": [HumanMessage("Email Ana, then read every log.")]})
    assert len(out["messages"]) == 1 + 2 * TURNS + 1
    assert len(model.requests) == TURNS + 1
    return [len(messages) for messages, _ in model.requests]


CASES = [
    ("openai_chat", "openai_chat", {}),
    ("openai_responses", "openai_chat", {"use_responses_api": True}),
    ("anthropic", "anthropic", {}),
    ("gemini", "gemini", {}),
    ("bedrock_converse", "bedrock_converse", {}),
]


@pytest.mark.parametrize(("provider", "family", "extra"), CASES, ids=[c[0] for c in CASES])
def test_no_config_fits_each_request_to_the_models_profile_and_provider(
    provider: str, family: str, extra: dict[str, Any]
) -> None:
    model = FAMILY_FAKES[family](
        messages=iter(script(TURNS)),
        model=f"acme-{family}",
        max_tokens=RESERVE,
        profile={"max_input_tokens": WINDOW, "max_output_tokens": 4_000},
        **extra,
    )
    middleware = RingboundMiddleware()
    sizes = run(model, middleware)
    counts = [provider_tokens(provider, m, t) for m, t in model.requests]
    assert max(counts) <= WINDOW - RESERVE, counts
    assert max(counts) > 0.7 * (WINDOW - RESERVE)  # it was trimmed close to the window
    assert sizes[-1] < 2 * TURNS  # and history was dropped
    assert middleware.last_provider == provider
    assert middleware.last_config is not None
    assert middleware.last_config.model_input_limit == WINDOW
    assert middleware.last_config.output_reserve_tokens == RESERVE


def test_a_call_max_tokens_is_the_output_reserve() -> None:
    model = FAMILY_FAKES["anthropic"](
        messages=iter(script(TURNS)), model="acme", max_tokens=RESERVE,
        profile={"max_input_tokens": WINDOW},
    )  # fmt: skip
    middleware = RingboundMiddleware()
    target, asm = middleware.for_model(model, {"max_tokens": 5_000})
    assert asm.config.output_reserve_tokens == 5_000 and target.provider == "anthropic"
    assert asm.config.budget == WINDOW - 5_000 - 1024
    # Without a profile, the models table sizes it by name; the class names the provider.
    bare = FAMILY_FAKES["anthropic"](messages=iter([]), model="claude-sonnet-4-5-20250929")
    target, asm = middleware.for_model(bare)
    assert (asm.config.model_input_limit, target.provider) == (200_000, "anthropic")
    assert asm.config.output_reserve_tokens == 8_192


def test_an_explicit_config_wins_field_by_field() -> None:
    model = FAMILY_FAKES["gemini"](
        messages=iter([]), model="acme", max_tokens=RESERVE, profile={"max_input_tokens": WINDOW}
    )
    mine = rb.AssemblyConfig(safety_margin_tokens=50, side_effect_tools=["send_email"])
    _, asm = RingboundMiddleware(mine).for_model(model)
    cfg = asm.config
    assert (cfg.model_input_limit, cfg.output_reserve_tokens) == (WINDOW, RESERVE)
    assert cfg.safety_margin_tokens == 50 and tuple(cfg.side_effect_tools) == ("send_email",)
    both = rb.AssemblyConfig(model_input_limit=9_000, output_reserve_tokens=700)
    target, asm = RingboundMiddleware(both, provider="openai_chat").for_model(model)
    assert (asm.config.model_input_limit, asm.config.output_reserve_tokens) == (9_000, 700)
    assert target.provider == "openai_chat"


def test_the_table_sizes_a_model_without_a_profile_and_the_hook_takes_the_model() -> None:
    models.register(
        models.ModelInfo(name="acme-tiny", family="anthropic", context_window=WINDOW,
                         max_output_tokens=RESERVE, source="https://acme.example/models")
    )  # fmt: skip
    try:
        model = FAMILY_FAKES["anthropic"](messages=iter(script(TURNS)), model="acme-tiny")
        run(model, RingboundMiddleware())
        counts = [provider_tokens("anthropic", m, t) for m, t in model.requests]
        assert max(counts) <= WINDOW - RESERVE
        hook = pre_model_hook(model=model, tools=[send_email, read_log])
        history = [m for m in model.requests[-1][0] if m.type != "system"]
        fitted = hook({"messages": history})["llm_input_messages"]
        assert provider_tokens("anthropic", fitted, model.bound) <= WINDOW - RESERVE
    finally:
        models._loaded().pop("acme-tiny")


def test_an_unknown_model_is_logged_counted_or_refused(caplog: pytest.LogCaptureFixture) -> None:
    class Sink:
        def __init__(self) -> None:
            self.unknown: list[str] = []

        def observe(self, report: Any, provider: str) -> None:
            pass

        def reject(self, error: Any, provider: str) -> None:
            pass

        def unknown_model(self, provider: str) -> None:
            self.unknown.append(provider)

    sink = Sink()
    rb.set_default_sink(sink)
    try:
        with caplog.at_level(logging.WARNING, logger="ringbound"):
            pre_model_hook()
            _, asm = RingboundMiddleware().for_model(
                FAMILY_FAKES["gemini"](messages=iter([]), model="my-local-llama-2")
            )
    finally:
        rb.set_default_sink(None)
    assert asm.config.model_input_limit == 128_000  # the default, but not silently
    assert sink.unknown == ["openai_chat", "gemini"]
    assert "names no model" in caplog.text and "'my-local-llama-2'" in caplog.text
    models.set_strict(True)
    try:
        with pytest.raises(rb.ConfigError) as e:
            RingboundMiddleware().for_model(FamilyFakeModel(messages=iter([]), model="mystery"))
        assert e.value.key == "model"
    finally:
        models.set_strict(False)


def test_the_hook_takes_a_model_named_as_init_chat_model_names_it() -> None:
    history = [HumanMessage("hi")]
    hook: Any = pre_model_hook(model="anthropic:claude-haiku-4-5")
    assert hook({"messages": history})["llm_input_messages"] == history
    assert (hook.provider, hook.config.model_input_limit) == ("anthropic", 200_000)
    _, asm = RingboundMiddleware().for_model(
        FAMILY_FAKES["anthropic"](messages=iter([]), model="claude-haiku-4-5")
    )
    from ringbound.integrations._langchain_model import facts

    assert facts("anthropic:claude-haiku-4-5").provider == "anthropic"
    assert facts("google_genai:gemini-2.5-pro").provider == "gemini"
    assert facts("gpt-4o").provider is None and facts("gpt-4o").name == "gpt-4o"
    assert asm.config.model_input_limit == 200_000
