"""Token counts and pairing checks without assembling: the same exact accounting the
assembler uses, for callers that only need the number or the verdict."""

from __future__ import annotations

import functools
from typing import Any

from . import _core
from .adapted import read_view
from .caller_values import shown
from .config import AssemblyConfig
from .core_config import core_config
from .errors import ConfigError, InvalidMessageError, PairingIssue
from .payload import check_tools, dump_messages, dump_tools, nesting_guard, snapshot
from .providers import adapter, check_provider, check_system
from .providers.base import tools_json

__all__ = ["count_text", "count_tokens", "validate"]

_DEFAULTS = AssemblyConfig()
ENCODINGS = ("o200k_base", "cl100k_base")


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

    The exact count is scaled by ``token_ratio`` as the Assembler scales it, for every
    provider: the default is the provider's documented ratio (1.0 for OpenAI; see each
    provider's page for Anthropic, Gemini and Bedrock). ``system`` is the top-level system of
    providers that have one.

    Example:
        >>> import ringbound as rb
        >>> rb.count_tokens([{"role": "user", "content": "hello world"}])  # 3 + 1 + 2, +3 priming
        9
    """
    provider = check_provider(provider)
    check_system(provider, system)
    encoding = check_encoding(encoding)
    tokenizer_backend = check_backend(tokenizer_backend)
    check_tools(tools)
    _check_ratio(token_ratio)
    messages = snapshot(messages)
    with nesting_guard():
        return _count(messages, provider, encoding, tools, tokenizer_backend, system, token_ratio)


def _count(
    messages: list[Any],
    provider: str,
    encoding: str,
    tools: list[Any] | None,
    tokenizer_backend: str | None,
    system: Any,
    token_ratio: float | None,
) -> int:
    if provider == "openai_chat":
        return _core.count(
            "openai_chat",
            dump_messages(messages),
            dump_tools(tools),
            encoding,
            tokenizer_backend,
            _DEFAULTS.max_messages,
            _DEFAULTS.max_request_bytes,
            None,
            "openai",
            1.0 if token_ratio is None else token_ratio,
        )
    native = adapter(provider)
    tools_payload = tools_json(native, tools) if tools else None
    ratio = token_ratio if token_ratio is not None else native.default_token_ratio
    core = _counting_core(encoding, tokenizer_backend, native.image_formula, ratio)
    # Read as an assembly with the same counting reads it, so that counting a request and then
    # assembling it read it once (the core keeps the reading of a whole request).
    view = read_view(native, messages, system, tools_payload, core, None)
    return view.count()  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=64)
def _counting_core(
    encoding: str, tokenizer_backend: str | None, image_formula: str, ratio: float
) -> Any:
    """The core config an assembler with these counting settings has (only its counting is
    read: nothing is planned with it)."""
    cfg = AssemblyConfig(encoding=encoding, tokenizer_backend=tokenizer_backend)
    return core_config(cfg, image_formula, ratio)


def _check_ratio(ratio: Any) -> None:
    """The config's rule for ``token_ratio``, so a wrong value is a ConfigError here too."""
    if ratio is not None:
        AssemblyConfig(token_ratio=ratio)


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
        raise InvalidMessageError(
            f"text must be a str, got {type(text).__name__}",
            index=None,
            reason=f"must be a str, got {type(text).__name__}",
        )
    encoding = check_encoding(encoding)
    tokenizer_backend = check_backend(tokenizer_backend)
    try:
        return _core.count_text(text, encoding, tokenizer_backend)
    except UnicodeEncodeError as e:
        raise InvalidMessageError(
            f"text is not valid Unicode ({e.reason} at position {e.start})",
            index=None,
            reason=e.reason,
        ) from None


def check_encoding(encoding: Any) -> str:
    """``encoding`` as a plain ``str`` if it names an encoding ringbound counts with, else
    ConfigError (the caller's object is never compared through its own ``__eq__``)."""
    name = str.__str__(encoding) if isinstance(encoding, str) else None
    if name not in ENCODINGS:
        raise ConfigError(
            f"encoding must be one of {', '.join(ENCODINGS)}, got {shown(encoding)}",
            key="encoding",
            reason="unknown encoding",
        )
    return name  # type: ignore[return-value]


def check_backend(backend: Any) -> str | None:
    """``tokenizer_backend`` as a plain ``str`` (or None) if the config takes it, else
    ConfigError: the core would refuse anything else with a TypeError."""
    if backend is None:
        return None
    return AssemblyConfig(tokenizer_backend=backend).tokenizer_backend


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
    provider = check_provider(provider)
    check_system(provider, system)
    messages = snapshot(messages)
    with nesting_guard():
        # A native provider's items as its SDK sends them (bytes, mappings), for the limits too.
        native = None if provider == "openai_chat" else adapter(provider)
        parts = dump_messages(messages) if native is None else native.native_parts(messages)  # type: ignore[attr-defined]
        _check_limits(len(messages), sum(map(len, parts)))
        if native is not None:
            return native.validate_parts(parts)  # type: ignore[attr-defined,no-any-return]
        return [PairingIssue(*t) for t in _core.validate("openai_chat", parts)]


def _check_limits(messages: int, size: int) -> None:
    """The limits an assembly applies (``max_messages``, ``max_request_bytes``), applied to a
    request that is only validated: a request the assembler would refuse is not valid."""
    for count, limit, what in (
        (messages, _DEFAULTS.max_messages, "messages, over max_messages"),
        (size, _DEFAULTS.max_request_bytes, "bytes, over max_request_bytes"),
    ):
        if count > limit:
            reason = f"the request has {count} {what} = {limit}"
            raise InvalidMessageError(reason, index=None, reason=reason)
