"""Assemblies that need a step around the core: a framework's message list (LangChain) is
planned in the chat shape and comes back as the framework's messages, and notes whose
``note_placement`` is not where the core puts them are put back before planning and moved
after it (``ringbound.notes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import notes
from .assembly import AssemblyInputs, AssemblyResult
from .errors import ConfigError
from .flow import Flow

__all__ = ["assemble", "framework_of"]


def framework_of(message: Any) -> str | None:
    """The framework whose message ``message`` is, or None for a provider's own format."""
    return "langchain" if type(message).__module__.startswith("langchain_core.") else None


@dataclass
class _Request:
    """One call's arguments as the core takes them, and how to give its result back."""

    messages: list[Any]
    tools: Any
    job: notes.Placement
    given: int
    #: The caller's LangChain messages, their chat shape, and the caller's tools.
    framework: Any = None
    chat: Any = None
    caller_tools: Any = None

    @classmethod
    def of(
        cls,
        messages: list[Any],
        tools: Any,
        system: Any,
        pinned: Any,
        placement: str | None,
        provider: str,
    ) -> _Request:
        """``placement`` is the config's ``note_placement`` (None: the target's default;
        ``leading_system`` for a LangChain list, which ChatAnthropic accepts too)."""
        framework = caller_tools = None
        if messages and framework_of(messages[0]) == "langchain":
            if provider != "openai_chat":
                raise ConfigError(
                    f"LangChain messages are planned in the openai_chat shape; this assembler "
                    f"speaks {provider}",
                    key="provider",
                    reason="must be openai_chat for LangChain messages",
                )
            from .integrations import _langchain_messages

            framework, caller_tools = messages, tools
            messages = _langchain_messages.to_chat(messages)
            tools = _langchain_messages.tools_to_chat(tools)
            placement = placement or "leading_system"
        placement = notes.check_placement(placement, provider)
        if placement == "inline_system":
            job = notes.Placement(placement, messages, system, pinned)
        else:
            job = notes.prepare(messages, system, pinned, placement, provider)
        return cls(
            messages=job.messages,
            tools=tools,
            job=job,
            given=len(messages),
            framework=framework,
            chat=messages,
            caller_tools=caller_tools,
        )

    def finish(self, result: Any) -> Any:
        result = notes.finish(self.job, result, self.given)
        if self.framework is None:
            return result
        from .integrations import _langchain_messages

        return _langchain_messages.result(result, self.framework, self.chat, self.caller_tools)


def assemble(
    run: Callable[[AssemblyInputs], Flow[AssemblyResult]],
    inputs: AssemblyInputs,
    placement: str | None,
    provider: str,
) -> Flow[Any]:
    """``Assembler.assemble`` through ``run`` (the assembler's own flow), with the steps
    around it; ``placement`` is the config's ``note_placement``."""
    req = _Request.of(
        inputs.messages, inputs.tools, inputs.system, inputs.pinned, placement, provider
    )
    job = req.job
    result = yield from run(
        dataclasses.replace(
            inputs, messages=req.messages, tools=req.tools, system=job.system, pinned=job.pinned
        )
    )
    return req.finish(result)
