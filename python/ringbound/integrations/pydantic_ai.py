"""Pydantic AI: ``history_processor`` for ``ProcessHistory``, and ``RingboundHistory``, a
capability that also counts each request's tools and instructions. Each model request is
planned from the history in the chat shape; the notes are system prompt parts of the first
request (``note_placement: leading_system``, the default: every model Pydantic AI drives
accepts them there). With no config, each request is sized from the run's model: its
``context_window``, else the models table by its name; the provider from its ``system``; the
output reserve from the run's ``max_tokens``. Needs ``ringbound[pydantic-ai]``."""

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
from ._model import ModelFacts, positive, sized

__all__ = ["RingboundHistory", "history_processor", "tool_schema"]

_ALLOWED = ("leading_system", "user", "inline_system")
#: Pydantic AI's ``Model.system`` values and the wire format each speaks; OpenAI's depends
#: on the model class (Responses or Chat Completions).
_SYSTEMS = {
    "openai": "openai_chat",
    "azure": "openai_chat",
    "anthropic": "anthropic",
    "google-gla": "gemini",
    "google-vertex": "gemini",
    "google": "gemini",
    "bedrock": "bedrock_converse",
}
#: Assemblers a processor keeps, one per model and ``max_tokens`` it has seen.
_MAX_SIZED = 32


def history_processor(
    config: AssemblyConfig | None = None,
    *,
    tools: Sequence[ToolDefinition | dict[str, Any]] | None = None,
    provider: str | None = None,
    ledger: SideEffectLedger | None = None,
    summarizer: Any = None,
    **kwargs: Any,
) -> Callable[[RunContext[Any], list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """A history processor (``Agent(capabilities=[ProcessHistory(history_processor(cfg))])``)
    fitting the history to the budget before each model request.

    A processor sees only the messages: pass the agent's ``tools`` to count them, or use
    ``RingboundHistory``, which reads each request's tools and instructions itself. The
    instructions of the last request are counted. ``ProcessHistory`` keeps what the processor
    returns as the run's history; the notes in it are recognized on the next request.

    The processor takes the ``RunContext`` (Pydantic AI passes it), whose model sizes the
    budget: ``model.context_window`` (its profile's), else the models table by
    ``model.model_name``; the provider from ``model.system`` (and the OpenAI model class);
    the output reserve from the run's ``max_tokens``. A model neither knows is logged and
    counted (``ringbound.models.resolve``).

    Args:
        config: The policy; its fields left at their defaults are sized from the model.
        tools: Tool definitions (or chat ``tools`` dicts) the model receives.
        provider: The provider whose count must fit, when the model's system does not say it
            (``openai_chat`` then): ``openai_chat``, ``anthropic``, ``gemini``,
            ``bedrock_converse`` or ``openai_responses``. The history is planned with the
            provider's ``token_ratio`` (unless the config sets one), then tightened until it
            fits as the provider counts it.
        ledger: The run's ``SideEffectLedger``: its entries go in the ledger note, and the
            side-effecting calls an assembly drops are added to it.
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    Raises:
        ConfigError: A value above is of the wrong kind.
    """
    for_model = _Sizer(config, provider, summarizer, kwargs)
    schemas = [tool_schema(t) for t in tools or ()]
    checked = check_ledger(ledger)

    async def process(ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        target, asm = for_model(ctx.model, ctx.model_settings)
        instructions = _last_instructions(messages)
        return await _fit(asm, target, messages, schemas, instructions, checked)

    process.for_model = for_model  # type: ignore[attr-defined]
    return process


class _Sizer:
    """The target and assembler for requests to a Pydantic AI model, built once per model
    and ``max_tokens``."""

    def __init__(
        self, config: AssemblyConfig | None, provider: str | None, summarizer: Any,
        kwargs: dict[str, Any],
    ) -> None:  # fmt: skip
        self.config = config
        self.provider = None if provider is None else Target(provider).provider
        self.summarizer = summarizer
        self.kwargs = kwargs
        # Checks the config and the Assembler's arguments now, not at the first request.
        _assembler(config, summarizer, None, kwargs)
        self._made: dict[tuple[int, ModelFacts], tuple[Any, Target, Assembler]] = {}
        #: The config and provider of the last request.
        self.last: tuple[AssemblyConfig, str] | None = None

    def __call__(self, model: Any, settings: Any = None) -> tuple[Target, Assembler]:
        facts = model_facts(model, settings)
        key = (id(model), facts)
        entry = self._made.get(key)
        if entry is None or entry[0] is not model:
            size = sized(self.config, facts, provider=self.provider)
            target = Target(size.provider)
            entry = (model, target, _assembler(size.config, self.summarizer, target, self.kwargs))
            if len(self._made) >= _MAX_SIZED:
                self._made.clear()
            self._made[key] = entry
        self.last = (entry[2].config, entry[1].provider)
        return entry[1], entry[2]


def model_facts(model: Any, settings: Any = None) -> ModelFacts:
    """What a Pydantic AI ``Model`` says about itself: its name, its ``context_window``, the
    provider its ``system`` (and class) speaks, and the ``max_tokens`` of ``settings`` (the
    run's model settings) or of its own."""
    reserve = None
    for source in (settings, getattr(model, "settings", None)):
        if isinstance(source, dict) and (reserve := positive(source.get("max_tokens"))):
            break
    system = getattr(model, "system", None)
    provider = _SYSTEMS.get(system) if isinstance(system, str) else None
    if provider == "openai_chat" and "Responses" in type(model).__name__:
        provider = "openai_responses"
    name = getattr(model, "model_name", None)
    return ModelFacts(
        name=name if isinstance(name, str) else None,
        provider=provider,
        input_limit=positive(getattr(model, "context_window", None)),
        output_reserve=reserve,
        where=f"the Pydantic AI model {type(model).__name__}",
    )


@dataclass
class RingboundHistory(AbstractCapability[Any]):
    """A capability (``Agent(capabilities=[RingboundHistory(cfg)])``) fitting each model
    request to the budget, counting the request's function and output tools and its
    instructions. Only the request is changed: the run's history keeps every message.

    Attributes:
        config: The policy; its fields left at their defaults are sized from the run's model
            (see ``history_processor``).
        provider: The provider whose count must fit, when the model's system does not say it
            (see ``history_processor``).
        ledger: The run's ``SideEffectLedger`` (see ``history_processor``).
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
    """

    config: AssemblyConfig | None = None
    provider: str | None = None
    ledger: SideEffectLedger | None = None
    summarizer: Any = None
    for_model: _Sizer = field(init=False, repr=False)
    #: The report of the last request's assembly.
    last_report: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.for_model = _Sizer(self.config, self.provider, self.summarizer, {})
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
        target, asm = self.for_model(request_context.model, request_context.model_settings)
        request_context.messages = await _fit(
            asm,
            target,
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
    config: AssemblyConfig | None, summarizer: Any, target: Target | None, kwargs: dict[str, Any]
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
