"""Provider adapters: the core reads each wire format, checks its own pairing rules and maps it
onto the canonical view it plans; an adapter renders the plan back into the provider's items.
``openai_chat`` is the canonical format itself and takes the direct path."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..errors import ConfigError, InvalidMessageError
from .base import Adapter

__all__ = ["PROVIDERS", "adapter", "check_provider", "check_system"]

#: Provider keys this release speaks; every key but ``openai_chat`` names a module here.
PROVIDERS = ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse")


def check_provider(provider: str) -> str:
    """Returns ``provider`` if supported, else raises ConfigError naming the supported ones."""
    if provider not in PROVIDERS:
        raise ConfigError(
            f"provider {provider!r} is not supported; supported: {', '.join(PROVIDERS)}",
            key="provider",
            reason=f"must be one of {', '.join(PROVIDERS)}",
        )
    return provider


def check_system(provider: str, system: Any) -> None:
    """InvalidMessageError when ``system`` goes to a provider without a top-level system:
    OpenAI Chat carries its rules as a message, so a ``system=`` would be neither sent by the
    caller's client nor counted."""
    if system is not None and provider == "openai_chat":
        reason = (
            "provider openai_chat has no top-level system: send it as the first message, "
            "{'role': 'system', 'content': ...}, where it is counted and kept"
        )
        raise InvalidMessageError(reason, index=None, reason=reason)


def adapter(provider: str) -> Adapter:
    """The adapter of a provider other than ``openai_chat``."""
    check_provider(provider)
    if provider == "openai_chat":
        raise ValueError("openai_chat is the canonical format and needs no adapter")
    module: Any = import_module(f"{__name__}.{provider}")
    return module.ADAPTER
