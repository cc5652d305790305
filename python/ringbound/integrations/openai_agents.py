"""OpenAI Agents SDK: ``call_model_input_filter`` for ``RunConfig``. It plans each model call's
Responses-shaped input with the agent's instructions and tools (function tools, hosted and MCP
tools, handoffs, as the Responses model sends them) counted inside the budget; the session the
runner keeps is not changed. Needs ``ringbound[openai-agents]``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from agents import Agent, Handoff, RunContextWrapper, handoff
from agents.models.openai_responses import Converter
from agents.run_config import CallModelData, ModelInputData

from ..config import AssemblyConfig
from ..ledgers.side_effects import SideEffectLedger
from ._base import assembler_for, check_ledger

__all__ = ["agent_tools", "call_model_input_filter"]


def call_model_input_filter(
    config: AssemblyConfig | None = None,
    *,
    ledger: SideEffectLedger | None = None,
    summarizer: Any = None,
    **kwargs: Any,
) -> Callable[[CallModelData[Any]], Awaitable[ModelInputData]]:
    """A filter for ``RunConfig(call_model_input_filter=...)`` fitting every model call of a
    run to the budget.

    The notes go into the instructions (``note_placement: top_level_system``, the default,
    which every model the SDK drives accepts), or are input items (``leading_system``,
    ``inline_system``, ``user``). Counting is the Responses API's (``openai_responses``).

    Args:
        config: The policy; ``AssemblyConfig()`` when None.
        ledger: The run's ``SideEffectLedger``: its entries go in the ledger note, and the
            side-effecting calls an assembly drops are added to it.
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    Raises:
        ConfigError: A value above is of the wrong kind.
    """
    asm = assembler_for(
        config,
        "top_level_system",
        provider="openai_responses",
        integration="call_model_input_filter",
        summarizer=summarizer,
        **kwargs,
    )
    checked = check_ledger(ledger)

    async def fit(data: CallModelData[Any]) -> ModelInputData:
        tools = await agent_tools(data.agent, data.context)
        res = await asm.assemble_async(
            list(data.model_data.input),
            tools,
            system=data.model_data.instructions,
            ledger=checked,
        )
        fit.last_report = res.report  # type: ignore[attr-defined]
        return ModelInputData(input=res.messages, instructions=res.system)

    fit.last_report = None  # type: ignore[attr-defined]
    return fit


async def agent_tools(agent: Agent[Any], context: Any = None) -> list[Any]:
    """The Responses ``tools`` the agent's model call sends: its enabled tools (MCP servers'
    included) and its handoffs, as the SDK's Responses model converts them."""
    tools = await agent.get_all_tools(RunContextWrapper(context=context))
    handoffs: list[Handoff[Any, Any]] = [
        h if isinstance(h, Handoff) else handoff(h) for h in agent.handoffs
    ]
    return list(Converter.convert_tools(tools, handoffs).tools)
