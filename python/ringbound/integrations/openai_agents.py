"""OpenAI Agents SDK: ``call_model_input_filter`` for ``RunConfig``. It plans each model call's
Responses-shaped input with the agent's instructions and tools (function tools, hosted and MCP
tools, handoffs, as the Responses model sends them) counted inside the budget; the session the
runner keeps is not changed. With no config, each call is sized from the agent's model: the
models table by its name, the provider from its class or LiteLLM route, the output reserve
from its ``max_tokens``. Needs ``ringbound[openai-agents]``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, Handoff, RunContextWrapper, handoff
from agents.models.chatcmpl_converter import Converter as ChatConverter
from agents.models.default_models import get_default_model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import Converter, OpenAIResponsesModel
from agents.run_config import CallModelData, ModelInputData

from ..assembler import Assembler
from ..config import AssemblyConfig
from ..ledgers.side_effects import SideEffectLedger
from ..models import find
from ._base import Target, afit_target, assembler_for, check_ledger
from ._model import FAMILY_PROVIDER, ModelFacts, positive, route_provider, sized

__all__ = ["agent_tools", "call_model_input_filter", "model_facts"]

#: Assemblers a filter keeps, one per model and ``max_tokens`` it has seen.
_MAX_SIZED = 32
#: The prefix the SDK's ``MultiProvider`` routes through LiteLLM (``litellm/anthropic/...``).
_LITELLM = "litellm/"


def call_model_input_filter(
    config: AssemblyConfig | None = None,
    *,
    model: Any = None,
    provider: str | None = None,
    ledger: SideEffectLedger | None = None,
    summarizer: Any = None,
    **kwargs: Any,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A filter for ``RunConfig(call_model_input_filter=...)`` fitting every model call of a
    run to the budget of the agent's model.

    With no config, each call is sized from the agent's ``model`` (a name, or a Model
    instance): the window from the models table by its name; the provider from its class
    (``OpenAIResponsesModel``, ``OpenAIChatCompletionsModel``) or its LiteLLM route
    (``LitellmModel("anthropic/...")``, ``"litellm/anthropic/..."``); the output reserve from
    the agent's ``model_settings.max_tokens``. A model the table does not know is logged and
    counted (``ringbound.models.resolve``). A non-Responses target is counted as the SDK
    sends it: the input converted to chat messages by the SDK's own converter, then to the
    provider's shape.

    The notes go into the instructions (``note_placement: top_level_system``, the default,
    which every model the SDK drives accepts), or are input items (``leading_system``,
    ``inline_system``, ``user``).

    Args:
        config: The policy; its fields left at their defaults are sized from the model.
        model: The model the run uses when ``RunConfig(model=...)`` overrides the agent's
            (the filter sees only the agent); None for the agent's own.
        provider: The provider whose count must fit, when the model does not say it.
        ledger: The run's ``SideEffectLedger``: its entries go in the ledger note, and the
            side-effecting calls an assembly drops are added to it.
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    Raises:
        ConfigError: A value above is of the wrong kind.
    """
    explicit = None if provider is None else Target(provider).provider
    options = dict(kwargs, summarizer=summarizer)
    # Checks the config and the Assembler's arguments now, not at the first call.
    assembler_for(config, "top_level_system", provider="openai_responses",
                  integration="call_model_input_filter", **options)  # fmt: skip
    checked = check_ledger(ledger)
    made: dict[tuple[int, ModelFacts], tuple[Any, Target, Assembler]] = {}

    def for_model(agent_model: Any, settings: Any = None) -> tuple[Target, Assembler]:
        """The target and assembler for calls to ``agent_model`` (built once per model)."""
        if model is not None:
            agent_model = model
        facts = model_facts(agent_model, settings)
        key = (id(agent_model), facts)
        entry = made.get(key)
        if entry is None or entry[0] is not agent_model:
            size = sized(config, facts, provider=explicit, default_provider="openai_responses")
            target = Target(size.provider)
            asm = assembler_for(
                size.config,
                "top_level_system",
                provider="openai_responses",
                integration="call_model_input_filter",
                target=None if target.provider == "openai_responses" else target,
                **options,
            )
            if len(made) >= _MAX_SIZED:
                made.clear()
            entry = (agent_model, target, asm)
            made[key] = entry
        fit.last_config, fit.last_provider = entry[2].config, entry[1].provider  # type: ignore[attr-defined]
        return entry[1], entry[2]

    async def fit(data: CallModelData[Any]) -> ModelInputData:
        agent = data.agent
        target, asm = for_model(agent.model, agent.model_settings)
        tools = await agent_tools(agent, data.context)
        items = list(data.model_data.input)
        res = await afit_target(
            lambda n: asm.assemble_async(
                items, tools, system=data.model_data.instructions, ledger=checked, tighten=n
            ),
            lambda res: (_as_chat(res.messages, res.system), _chat_tools(tools)),
            target,
            asm.config,
            planned_as="openai_responses",
        )
        fit.last_report = res.report  # type: ignore[attr-defined]
        return ModelInputData(input=res.messages, instructions=res.system)

    fit.last_report = None  # type: ignore[attr-defined]
    fit.last_config = None  # type: ignore[attr-defined]
    fit.last_provider = None  # type: ignore[attr-defined]
    fit.for_model = for_model  # type: ignore[attr-defined]
    return fit


def model_facts(model: Any, settings: Any = None) -> ModelFacts:
    """What an agent's model says about itself: its name (the SDK's default model when
    None), the provider its class or LiteLLM route speaks, and ``settings.max_tokens``."""
    reserve = positive(getattr(settings, "max_tokens", None))
    if model is None:
        model = get_default_model()
    provider: str | None = None
    if isinstance(model, str):
        name = model
        if name.startswith(_LITELLM):
            name = name[len(_LITELLM) :]
            provider = route_provider(name) or "openai_chat"
    else:
        name = getattr(model, "model", None)
        name = name if isinstance(name, str) else None
        if isinstance(model, OpenAIResponsesModel):
            provider = "openai_responses"
        elif isinstance(model, OpenAIChatCompletionsModel):
            provider = "openai_chat"
        elif type(model).__name__ == "LitellmModel" and name is not None:
            provider = route_provider(name) or "openai_chat"
    if provider is None and name is not None:
        info = find(name)
        if info is not None:
            # The SDK sends OpenAI models the Responses API unless told otherwise.
            provider = (
                "openai_responses" if info.family == "openai" else FAMILY_PROVIDER[info.family]
            )
    return ModelFacts(
        name=name,
        provider=provider,
        output_reserve=reserve,
        where="the agent's model"
        if isinstance(model, str)
        else f"the agent's {type(model).__name__}",
    )


def _as_chat(items: list[Any], instructions: Any) -> list[dict[str, Any]]:
    """The input as a Chat Completions model sends it (the SDK's own converter)."""
    head = [{"role": "system", "content": instructions}] if isinstance(instructions, str) else []
    return [*head, *ChatConverter.items_to_messages(items)]  # type: ignore[list-item]


def _chat_tools(tools: list[Any]) -> list[dict[str, Any]]:
    """The function tools in the chat shape (hosted tools have none: they are not sent)."""
    out = []
    for t in tools:
        if isinstance(t, dict) and t.get("type") == "function":
            fn = {k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None}
            out.append({"type": "function", "function": fn})
    return out


async def agent_tools(agent: Agent[Any], context: Any = None) -> list[Any]:
    """The Responses ``tools`` the agent's model call sends: its enabled tools (MCP servers'
    included) and its handoffs, as the SDK's Responses model converts them."""
    tools = await agent.get_all_tools(RunContextWrapper(context=context))
    handoffs: list[Handoff[Any, Any]] = [
        h if isinstance(h, Handoff) else handoff(h) for h in agent.handoffs
    ]
    return list(Converter.convert_tools(tools, handoffs).tools)
