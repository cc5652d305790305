"""Provider adapters: each wire format mapped onto the canonical view the core plans, checked
by its own pairing rules, and rendered back. ``openai_chat`` is the canonical format itself and
takes the direct path."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..errors import ConfigError
from .base import Adapter

__all__ = ["PROVIDERS", "adapter", "check_provider"]

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


def adapter(provider: str) -> Adapter:
    """The adapter of a provider other than ``openai_chat``."""
    check_provider(provider)
    if provider == "openai_chat":
        raise ValueError("openai_chat is the canonical format and needs no adapter")
    module: Any = import_module(f"{__name__}.{provider}")
    return module.ADAPTER
