"""Pydantic AI: ``history_processor`` for ``ProcessHistory``, and ``RingboundHistory``, a
capability that also counts each request's tools and instructions. Each model request is
planned from the history in the chat shape; the notes are system prompt parts of the first
request (``note_placement: leading_system``, the default: every model Pydantic AI drives
accepts them there). Needs ``ringbound[pydantic-ai]``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest
from pydantic_ai.tools import RunContext, ToolDefinition

from ..assembler import Assembler
from ..config import AssemblyConfig
from ..errors import ConfigError
from ..ledgers.side_effects import SideEffectLedger
from . import _pydantic_ai_messages
from ._base import Target, afit_target, assembler_for, check_ledger

__all__ = ["RingboundHistory", "history_processor", "tool_schema"]

_ALLOWED = ("leading_system", "user", "inline_system")


def history_processor(
    config: AssemblyConfig | None = None,
    *,
    tools: Sequence[ToolDefinition | dict[str, Any]] | None = None,
    provider: str = "openai_chat",
    ledger: SideEffectLedger | None = None,
    summarizer: Any = None,
    **kwargs: Any,
) -> Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """A history processor (``Agent(capabilities=[ProcessHistory(history_processor(cfg))])``)
    fitting the history to the budget before each model request.

    A processor sees only the messages: pass the agent's ``tools`` to count them, or use
    ``RingboundHistory``, which reads each request's tools and instructions itself. The
    instructions of the last request are counted. ``ProcessHistory`` keeps what the processor
    returns as the run's history; the notes in it are recognized on the next request.

    Args:
        config: The policy; ``AssemblyConfig()`` when None.
        tools: Tool definitions (or chat ``tools`` dicts) the model receives.
        provider: The provider of the agent's model, whose count must fit: ``openai_chat``
            (default), ``anthropic``, ``gemini``, ``bedrock_converse`` or
            ``openai_responses``. The history is planned with the provider's ``token_ratio``
            (unless the config sets one), then tightened until it fits as the provider counts
            it.
        ledger: The run's ``SideEffectLedger``: its entries go in the ledger note, and the
            side-effecting calls an assembly drops are added to it.
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    Raises:
        ConfigError: A value above is of the wrong kind.
    """
    target = Target(provider)
    asm = _assembler(config, summarizer, target, kwargs)
    schemas = [tool_schema(t) for t in tools or ()]
    checked = check_ledger(ledger)

    async def process(messages: list[ModelMessage]) -> list[ModelMessage]:
        return await _fit(asm, target, messages, schemas, _last_instructions(messages), checked)

    return process


@dataclass
class RingboundHistory(AbstractCapability[Any]):
    """A capability (``Agent(capabilities=[RingboundHistory(cfg)])``) fitting each model
    request to the budget, counting the request's function and output tools and its
    instructions. Only the request is changed: the run's history keeps every message.

    Attributes:
        config: The policy; ``AssemblyConfig()`` when None.
        provider: The provider of the agent's model (see ``history_processor``).
        ledger: The run's ``SideEffectLedger`` (see ``history_processor``).
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
    """

    config: AssemblyConfig | None = None
    provider: str = "openai_chat"
    ledger: SideEffectLedger | None = None
    summarizer: Any = None
    assembler: Assembler = field(init=False, repr=False)
    target: Target = field(init=False, repr=False)
    #: The report of the last request's assembly.
    last_report: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.target = Target(self.provider)
        self.assembler = _assembler(self.config, self.summarizer, self.target, {})
        check_ledger(self.ledger)

    async def before_model_request(self, ctx: RunContext[Any], request_context: Any) -> Any:
        """Fits ``request_context.messages`` to the budget."""
        params = request_context.model_request_parameters
        tools = [tool_schema(t) for t in [*params.function_tools, *params.output_tools]]
        instructions = (
            InstructionPart.join(params.instruction_parts)
            if params.instruction_parts is not None
            else _last_instructions(request_context.messages)
        )
        request_context.messages = await _fit(
            self.assembler,
            self.target,
            request_context.messages,
            tools,
            instructions,
            self.ledger,
            self,
        )
        return request_context

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a config and callables, not a spec


def tool_schema(tool: ToolDefinition | dict[str, Any]) -> dict[str, Any]:
    """A tool definition in the chat ``tools`` shape, as it is counted.

    Raises:
        ConfigError: ``tool`` is neither a ``ToolDefinition`` nor a dict.
    """
    if isinstance(tool, dict):
        return tool
    if not isinstance(tool, ToolDefinition):
        raise ConfigError(
            f"tools must hold ToolDefinitions or dicts, got {type(tool).__name__}",
            key="tools",
            reason="must hold ToolDefinitions or dicts",
        )
    function: dict[str, Any] = {"name": tool.name, "parameters": tool.parameters_json_schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _assembler(
    config: AssemblyConfig | None, summarizer: Any, target: Target, kwargs: dict[str, Any]
) -> Any:
    return assembler_for(
        config,
        "leading_system",
        allowed=_ALLOWED,
        integration="Pydantic AI",
        target=target,
        summarizer=summarizer,
        **kwargs,
    )


def _last_instructions(messages: Sequence[ModelMessage]) -> str | None:
    for m in reversed(messages):
        if isinstance(m, ModelRequest):
            return m.instructions
    return None


async def _fit(
    asm: Any,
    target: Target,
    messages: list[ModelMessage],
    tools: list[dict[str, Any]],
    instructions: str | None,
    ledger: SideEffectLedger | None,
    into: Any = None,
) -> list[ModelMessage]:
    """The history fitted: the instructions lead the chat view as a system message (they are
    sent first), and come off again after planning."""
    chat = _pydantic_ai_messages.to_chat(messages)
    head = [] if not instructions else [{"role": "system", "content": instructions}]
    planned = [*head, *chat.messages]
    res = await afit_target(
        lambda n: asm.assemble_async(planned, tools or None, ledger=ledger, tighten=n),
        lambda res: (res.messages, tools),
        target,
        asm.config,
    )
    if into is not None:
        into.last_report = res.report
    out = res.messages[len(head) :]
    report = res.report
    if head:
        report = _without_head(report)
    return _pydantic_ai_messages.from_chat(out, messages, chat, report)


def _without_head(report: Any) -> Any:
    """The report's rewrites indexed in the chat view without the instructions message."""
    return replace(report, rewrites=[replace(r, index=r.index - 1) for r in report.rewrites])
