"""Token counts and pairing checks without assembling: the same exact accounting the
assembler uses, for callers that only need the number or the verdict."""

from __future__ import annotations

from typing import Any

from . import _core
from .config import AssemblyConfig
from .errors import InvalidMessageError, PairingIssue
from .payload import check_message_list, dump_messages, dump_tools
from .providers import adapter, check_provider, check_system

__all__ = ["count_text", "count_tokens", "validate"]

_DEFAULTS = AssemblyConfig()


def count_tokens(
    messages: list[Any],
    provider: str = "openai_chat",
    encoding: str = "o200k_base",
    tools: list[Any] | None = None,
    *,
    tokenizer_backend: str | None = None,
    system: Any = None,
    token_ratio: float | None = None,
) -> int:
    """Tokens a request costs: every message with its framing, reply priming, tools schema.

    For providers without a public tokenizer (Anthropic, Gemini, Bedrock) the exact count of
    the canonical view is scaled by ``token_ratio`` (default: the provider's documented
    ratio); ``system`` is the top-level system of providers that have one.

    Example:
        >>> import ringbound as rb
        >>> rb.count_tokens([{"role": "user", "content": "hello world"}])  # 3 + 1 + 2, +3 priming
        9
    """
    check_provider(provider)
    check_system(provider, system)
    if provider == "openai_chat":
        return _core.count_openai_chat(
            dump_messages(messages),
            dump_tools(tools),
            encoding,
            tokenizer_backend,
            _DEFAULTS.max_messages,
            _DEFAULTS.max_request_bytes,
        )
    native = adapter(provider)
    check_message_list(messages)
    canonical = native.to_canonical(messages, system=system)
    return _core.count_openai_chat(
        dump_messages(canonical.messages),
        dump_tools(native.tools_to_openai(tools)) if tools else None,
        encoding,
        tokenizer_backend,
        _DEFAULTS.max_messages,
        _DEFAULTS.max_request_bytes,
        None,
        native.image_formula,
        token_ratio if token_ratio is not None else native.default_token_ratio,
    )


def count_text(
    text: str, encoding: str = "o200k_base", *, tokenizer_backend: str | None = None
) -> int:
    """Exact BPE token count of one text (no message framing).

    Example:
        >>> import ringbound as rb
        >>> rb.count_text("hello world")
        2
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    try:
        return _core.count_text(text, encoding, tokenizer_backend)
    except UnicodeEncodeError as e:
        raise InvalidMessageError(
            f"text is not valid Unicode ({e.reason} at position {e.start})",
            index=None,
            reason=e.reason,
        ) from None


def validate(
    messages: list[Any], provider: str = "openai_chat", *, system: Any = None
) -> list[PairingIssue]:
    """Every tool-call pairing issue of a conversation by the provider's own rules; empty when
    it is safe to send.

    Example:
        >>> import ringbound as rb
        >>> call = {"id": "call_1", "type": "function",
        ...         "function": {"name": "f", "arguments": "{}"}}
        >>> [i.kind for i in rb.validate([
        ...     {"role": "user", "content": "go"},
        ...     {"role": "assistant", "content": None, "tool_calls": [call]},
        ... ])]
        ['missing_result']
    """
    check_provider(provider)
    check_system(provider, system)
    if provider != "openai_chat":
        check_message_list(messages)
        return adapter(provider).validate(messages, system=system)
    return [PairingIssue(*t) for t in _core.validate_openai_chat(dump_messages(messages))]
