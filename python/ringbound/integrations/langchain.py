"""LangChain and LangGraph: ``RingboundMiddleware`` for LangChain v1 ``create_agent`` and
``pre_model_hook`` for LangGraph graphs. Both plan each model call from the whole history, the
system prompt and the bound tools, and change only what the model receives: the agent's state
keeps every message. Needs ``ringbound[langchain]``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import BaseMessage, SystemMessage

from ..assembler import Assembler, AssemblyResult
from ..config import AssemblyConfig
from ..errors import ConfigError
from ..ledgers.side_effects import SideEffectLedger
from ..providers.base import join_system_note
from . import _langchain_messages, _langchain_model
from ._base import Target, afit_target, assembler_for, cache_options, check_ledger, fit_target
from ._model import ModelFacts, sized

__all__ = ["RingboundMiddleware", "pre_model_hook"]


#: Assemblers a middleware keeps, one per model and ``max_tokens`` it has seen.
_MAX_SIZED = 32


class RingboundMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Fits every model call of a ``create_agent`` agent to the budget of the model it calls.

    With no config, each call is sized from the agent's model: the window and output cap from
    its LangChain profile (``max_input_tokens``, ``max_output_tokens``), else from the models
    table by its name; the provider from its class (ChatAnthropic, ChatOpenAI with or without
    ``use_responses_api``, ChatGoogleGenerativeAI, ChatBedrockConverse); the output reserve
    from the call's ``max_tokens`` (its settings, or the model's). A model neither knows is
    logged and counted (``ringbound.models.resolve``). A config field set to anything but its
    default wins over the model's.

    The system prompt and the tools bound for the call count inside the budget; the notes go
    into the system message (``note_placement: top_level_system``, the default, which every
    chat model accepts), or where ``note_placement`` says. The agent's state is not changed:
    the next call plans again from the whole history.

    Args:
        config: The policy; its fields left at their defaults are sized from the model.
        provider: The provider whose count must fit the budget, when the model's class does
            not say it (``openai_chat`` then): ``openai_chat``, ``anthropic``, ``gemini``,
            ``bedrock_converse`` or ``openai_responses``. The request is planned in the chat
            shape with the provider's ``token_ratio`` (unless the config sets one), then
            tightened until it fits as the provider counts it.
        ledger: The run's ``SideEffectLedger``: its entries go in the ledger note, and the
            side-effecting calls an assembly drops are added to it.
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    Example:
        ``create_agent(model, tools, system_prompt=..., middleware=[RingboundMiddleware(cfg)])``
    """

    def __init__(
        self,
        config: AssemblyConfig | None = None,
        *,
        provider: str | None = None,
        ledger: SideEffectLedger | None = None,
        summarizer: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._config = config
        self._provider = None if provider is None else Target(provider).provider
        self._kwargs = dict(kwargs, summarizer=summarizer)
        # Checks the config and the Assembler's arguments now, not at the first call.
        assembler_for(config, "top_level_system", integration="RingboundMiddleware", **self._kwargs)
        self._sized: dict[tuple[int, ModelFacts], tuple[Any, Target, Assembler]] = {}
        self.ledger = check_ledger(ledger)
        #: The report of the last model call's assembly.
        self.last_report: Any = None
        #: The config and provider the last model call was sized with.
        self.last_config: AssemblyConfig | None = None
        self.last_provider: str | None = None

    def for_model(self, model: Any, settings: Any = None) -> tuple[Target, Assembler]:
        """The target and assembler for calls to ``model`` with call ``settings`` (built once
        per model and ``max_tokens``)."""
        facts = _langchain_model.facts(model, settings)
        key = (id(model), facts)
        entry = self._sized.get(key)
        if entry is None or entry[0] is not model:
            size = sized(self._config, facts, provider=self._provider)
            target = Target(size.provider)
            asm = assembler_for(
                size.config,
                "top_level_system",
                integration="RingboundMiddleware",
                target=target,
                **self._kwargs,
            )
            if len(self._sized) >= _MAX_SIZED:
                self._sized.clear()
            entry = (model, target, asm)
            self._sized[key] = entry
        self.last_config, self.last_provider = entry[2].config, entry[1].provider
        return entry[1], entry[2]

    def wrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], ModelResponse],  # type: ignore[type-arg]
    ) -> Any:
        """Calls the model with the request fitted to the budget."""
        messages, tools = _inputs(request)
        target, asm = self.for_model(request.model, request.model_settings)
        res = fit_target(
            lambda n: asm.assemble(messages, tools, ledger=self.ledger, tighten=n),
            lambda res: self._sent(request, res),
            target,
            asm.config,
        )
        return handler(self._fitted(request, res, target.provider))

    async def awrap_model_call(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],  # type: ignore[type-arg]
    ) -> Any:
        """``wrap_model_call`` for async agents (an async summarizer is awaited)."""
        messages, tools = _inputs(request)
        target, asm = self.for_model(request.model, request.model_settings)
        res = await afit_target(
            lambda n: asm.assemble_async(messages, tools, ledger=self.ledger, tighten=n),
            lambda res: self._sent(request, res),
            target,
            asm.config,
        )
        return await handler(self._fitted(request, res, target.provider))

    def _split(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        res: AssemblyResult,
    ) -> tuple[SystemMessage | None, list[BaseMessage]]:
        """The system message and the messages the model receives."""
        messages = list(res.messages)
        system = request.system_message
        if system is not None:
            # A leading system message is always kept: it is the caller's, first.
            messages = messages[1:]
        if res.system:
            system = _with_notes(system, res.system)
        return system, messages

    def _sent(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        res: AssemblyResult,
    ) -> tuple[list[dict[str, Any]], list[Any] | None]:
        """The request the model receives, in the chat shape (to count it as the target)."""
        system, messages = self._split(request, res)
        chat = _langchain_messages.to_chat([*([] if system is None else [system]), *messages])
        tools = None if res.tools is None else _langchain_messages.tools_to_chat(res.tools)
        return chat, tools

    def _fitted(
        self,
        request: ModelRequest,  # type: ignore[type-arg]
        res: AssemblyResult,
        provider: str,
    ) -> ModelRequest:  # type: ignore[type-arg]
        self.last_report = res.report
        system, messages = self._split(request, res)
        return request.override(
            messages=messages,
            system_message=system,
            tools=request.tools if res.tools is not None else [],
            model_settings=_with_cache_options(request, res, provider),
        )


def pre_model_hook(
    config: AssemblyConfig | None = None,
    *,
    model: Any = None,
    prompt: str | SystemMessage | None = None,
    tools: Sequence[Any] | None = None,
    provider: str | None = None,
    ledger: SideEffectLedger | None = None,
    summarizer: Any = None,
    **kwargs: Any,
) -> Callable[[Any], dict[str, list[BaseMessage]]]:
    """A LangGraph ``pre_model_hook``: ``state -> {"llm_input_messages": [...]}``, the history
    fitted to the budget for the model node, the state left as it is.

    The model node sends ``prompt`` first, then these messages, with ``tools`` bound: pass the
    same ones here so they count. The notes follow the prompt (``note_placement:
    leading_system``, the default; ChatAnthropic accepts system messages only there), or are
    user messages (``user``).

    Args:
        config: The policy; its fields left at their defaults are sized from ``model`` (see
            ``RingboundMiddleware``). ``drop_tools_schema_then_fail`` is refused: a hook
            cannot unbind the model's tools.
        model: The chat model the model node calls: a hook does not see it, so pass it to
            size the budget from it. Without it (and without a window in ``config``) the
            default window is used, with a warning and a metric.
        prompt: The system prompt the model node sends before the messages.
        tools: The tools bound to the model.
        provider: The provider whose count must fit, when the model's class does not say it
            (see ``RingboundMiddleware``).
        ledger: The run's ``SideEffectLedger`` (see ``RingboundMiddleware``).
        summarizer: Writes the summary of what was dropped (see ``Assembler``).
        **kwargs: ``sink``, ``tracer``, ``cache`` for the ``Assembler``.

    The hook's ``config`` and ``provider`` attributes say what it was sized with.

    Raises:
        ConfigError: A value above is of the wrong kind.
    """
    facts = (
        _langchain_model.facts(model)
        if model is not None
        else ModelFacts(where="pre_model_hook (no model= given)")
    )
    size = sized(config, facts, provider=None if provider is None else Target(provider).provider)
    target = Target(size.provider)
    asm = assembler_for(
        size.config,
        "leading_system",
        allowed=("leading_system", "user", "inline_system"),
        integration="pre_model_hook",
        target=target,
        summarizer=summarizer,
        **kwargs,
    )
    if asm.config.on_still_over_budget == "drop_tools_schema_then_fail":
        raise ConfigError(
            "config `on_still_over_budget` must be fail_closed for pre_model_hook: a hook "
            "cannot unbind the model's tools",
            key="on_still_over_budget",
            reason="must be fail_closed for pre_model_hook",
        )
    if prompt is None:
        head: list[BaseMessage] = []
    elif isinstance(prompt, str):
        head = [SystemMessage(content=prompt)]
    elif isinstance(prompt, SystemMessage):
        head = [prompt]
    else:
        raise ConfigError(
            f"prompt must be a string or a SystemMessage, got {type(prompt).__name__}",
            key="prompt",
            reason="must be a string or a SystemMessage",
        )
    checked = check_ledger(ledger)
    chat_tools = _langchain_messages.tools_to_chat(tools)

    def hook(state: Any) -> dict[str, list[BaseMessage]]:
        messages = [*head, *(state["messages"] if isinstance(state, dict) else state.messages)]
        res = fit_target(
            lambda n: asm.assemble(messages, tools, ledger=checked, tighten=n),
            lambda res: (_langchain_messages.to_chat(res.messages), chat_tools),
            target,
            asm.config,
        )
        return {"llm_input_messages": list(res.messages[len(head) :])}

    hook.config = asm.config  # type: ignore[attr-defined]
    hook.provider = target.provider  # type: ignore[attr-defined]
    return hook


def _inputs(request: ModelRequest) -> tuple[list[Any], list[Any]]:  # type: ignore[type-arg]
    """The messages to plan (the system message first) and the tools bound for the call."""
    system = request.system_message
    head = [] if system is None else [system]
    return [*head, *request.messages], list(request.tools)


def _with_cache_options(
    request: ModelRequest,  # type: ignore[type-arg]
    res: AssemblyResult,
    provider: str,
) -> dict[str, Any]:
    """The call's settings with the assembly's ``prompt_cache_options`` in ``extra_body``,
    where ChatOpenAI sends what the OpenAI SDK has no argument for. The call's ``extra_body``
    replaces the model's, so the model's own is carried over. The settings as they were when
    there are none to send, the call or the model names its own (also in ``model_kwargs``),
    or an ``extra_body`` is not a mapping."""
    settings = request.model_settings
    layers = [
        _mapping(getattr(request.model, "extra_body", None)),
        _mapping(settings.get("extra_body")),
    ]
    if any(layer is None for layer in layers):
        return settings
    extra = {**layers[0], **layers[1]}
    given = {**(_mapping(getattr(request.model, "model_kwargs", None)) or {}), **settings, **extra}
    options = cache_options(res, provider, given)
    if options is None:
        return settings
    return {**settings, "extra_body": {**extra, "prompt_cache_options": options}}


def _mapping(value: Any) -> Mapping[str, Any] | None:
    """``value`` when it is a mapping, ``{}`` for None, else None (left alone)."""
    if value is None:
        return {}
    return value if isinstance(value, Mapping) else None


def _with_notes(system: SystemMessage | None, notes: str) -> SystemMessage:
    """The system message with the notes after its text (a new message)."""
    if system is None:
        return SystemMessage(content=notes)
    content = system.content
    if isinstance(content, str):
        return system.model_copy(update={"content": join_system_note(content, notes)})
    return system.model_copy(update={"content": [*content, {"type": "text", "text": notes}]})
