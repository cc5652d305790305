"""Provider adapters: the core reads each wire format, checks its own pairing rules, maps it
onto the canonical view it plans and writes the request the plan describes in the provider's
items; an adapter reads what the core needs from Python (the system, tools, SDK objects).
``openai_chat`` is the canonical format itself and takes the direct path."""

from __future__ import annotations

from importlib import import_module
from typing import Any, NoReturn

from ..caller_values import is_utf8, shown
from ..errors import ConfigError, InvalidMessageError, RingboundError
from .base import Adapter

__all__ = ["PROVIDERS", "adapter", "check_provider", "check_system"]

#: Provider keys this release speaks; every key but ``openai_chat`` names a module here.
PROVIDERS = ("openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse")


def check_provider(provider: str) -> str:
    """``provider`` as a plain ``str`` if supported, else ConfigError naming the supported
    ones (a str subclass, an enum's member say, is read as the text it holds)."""
    key = str.__str__(provider) if isinstance(provider, str) else None
    if key not in PROVIDERS:
        raise ConfigError(
            f"provider {shown(provider)} is not supported; supported: {', '.join(PROVIDERS)}",
            key="provider",
            reason=f"must be one of {', '.join(PROVIDERS)}",
        )
    return key  # type: ignore[return-value]


def check_system(provider: str, system: Any) -> None:
    """InvalidMessageError unless ``system`` is a top-level system the provider takes: every
    entry point (assemble, count_tokens, validate, recover, a body's system) passes here, so a
    system the core cannot read is refused the same way everywhere.

    OpenAI Chat has none: it carries its rules as a message, so a ``system=`` would be neither
    sent by the caller's client nor counted. For the others the system is read as the core
    reads it; what the caller's objects raise while read (a mapping whose ``get`` raises) and
    text that is not UTF-8 (a lone surrogate) are malformed input, as inside a message."""
    if system is None:
        return
    if check_provider(provider) == "openai_chat":
        reason = (
            "provider openai_chat has no top-level system: send it as the first message, "
            "{'role': 'system', 'content': ...}, where it is counted and kept"
        )
        raise InvalidMessageError(reason, index=None, reason=reason)
    try:
        texts = adapter(provider).system_texts(system)  # type: ignore[attr-defined]
    except RingboundError:
        raise
    except RecursionError:
        _invalid_system("it is nested too deeply to read")
    except Exception as e:
        _invalid_system(f"it could not be read ({type(e).__name__})")
    if not all(is_utf8(text) for group in texts for text in group):
        _invalid_system("its text is not valid UTF-8 (a lone surrogate)")


def _invalid_system(why: str) -> NoReturn:
    reason = f"the system is malformed: {why}"
    raise InvalidMessageError(f"system: {reason}", index=None, reason=reason) from None


def adapter(provider: str) -> Adapter:
    """The adapter of a provider other than ``openai_chat``."""
    check_provider(provider)
    if provider == "openai_chat":
        raise ValueError("openai_chat is the canonical format and needs no adapter")
    module: Any = import_module(f"{__name__}.{provider}")
    return module.ADAPTER
