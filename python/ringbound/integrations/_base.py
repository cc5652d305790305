"""What every integration does the same way: an ``Assembler`` whose notes go where the
framework's target accepts them, the count of a request as the model behind the framework
counts it, and the checks of the arguments it was given."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ..assembler import Assembler, AssemblyResult
from ..config import AssemblyConfig
from ..counting import count_tokens
from ..errors import ConfigError
from ..ledgers.side_effects import SideEffectLedger
from ..providers import adapter, check_provider
from ..translation import translate

__all__ = [
    "Target",
    "afit_target",
    "assembler_for",
    "cache_options",
    "check_ledger",
    "fit_target",
]

#: The providers that take ``prompt_cache_options`` (OpenAI's explicit prompt caching).
_CACHE_OPTIONS = ("openai_chat", "openai_responses")


def assembler_for(
    config: AssemblyConfig | None,
    default_placement: str,
    *,
    provider: str = "openai_chat",
    allowed: tuple[str, ...] | None = None,
    integration: str,
    target: Target | None = None,
    **kwargs: Any,
) -> Assembler:
    """An Assembler for ``config`` with ``note_placement`` defaulting to ``default_placement``
    and, for a ``target`` other than OpenAI Chat, ``token_ratio`` defaulting to its ratio.

    Raises:
        ConfigError: ``config`` is not an AssemblyConfig, or its ``note_placement`` is not one
            of ``allowed``.
    """
    cfg = config if config is not None else AssemblyConfig()
    if not isinstance(cfg, AssemblyConfig):
        raise ConfigError(
            f"config must be an AssemblyConfig, got {type(cfg).__name__}", key="config"
        )
    if cfg.note_placement is None:
        cfg = dataclasses.replace(cfg, note_placement=default_placement)
    elif allowed is not None and cfg.note_placement not in allowed:
        raise ConfigError(
            f"config `note_placement` must be one of {', '.join(allowed)} for {integration}; "
            f"got {cfg.note_placement!r}",
            key="note_placement",
            reason=f"must be one of {', '.join(allowed)} for {integration}",
        )
    if target is not None and cfg.token_ratio is None:
        cfg = dataclasses.replace(cfg, token_ratio=target.token_ratio)
    return Assembler(cfg, provider=provider, **kwargs)


class Target:
    """The provider whose model a chat-shaped integration drives: a request planned in the
    chat shape is counted as that provider will receive it (its message shape, its token
    ratio, its fixed costs such as Anthropic's tool-use system prompt).

    Args:
        provider: ``openai_chat`` (the chat shape itself), ``openai_responses``,
            ``anthropic``, ``gemini`` or ``bedrock_converse``.

    Raises:
        ConfigError: An unknown provider.
    """

    def __init__(self, provider: str) -> None:
        self.provider = check_provider(provider)
        self._adapter = None if provider == "openai_chat" else adapter(provider)
        #: The provider's tokens per counted token when the config sets none.
        self.token_ratio = 1.0 if self._adapter is None else self._adapter.default_token_ratio

    def count(
        self, chat: list[dict[str, Any]], tools: Sequence[Any] | None, cfg: AssemblyConfig
    ) -> int:
        """Tokens of the chat-shaped request ``chat`` with chat ``tools``, as the provider
        counts them."""
        if self._adapter is None:
            return count_tokens(
                chat, encoding=cfg.encoding, tools=list(tools or ()) or None,
                tokenizer_backend=cfg.tokenizer_backend, token_ratio=cfg.token_ratio,
            )  # fmt: skip
        # The core's writer: the provider's shape with its own id and turn rules, the tools
        # as it writes them for the provider (``rb.translate``). Gemini is counted without the
        # sentinel signature a translation adds: the framework writes the request itself and
        # sends the signatures Gemini gave it, which the chat shape lacks.
        native = translate(
            chat,
            source="openai_chat",
            target=self.provider,
            tools=list(tools or ()) or None,
            gemini_sentinel=False,
        )
        return count_tokens(
            native.messages,
            provider=self.provider,
            encoding=cfg.encoding,
            tools=native.tools,
            tokenizer_backend=cfg.tokenizer_backend,
            system=native.system,
            token_ratio=cfg.token_ratio,
        )


def fit_target(
    assemble: Callable[[int], AssemblyResult],
    request: Callable[[AssemblyResult], tuple[list[dict[str, Any]], Sequence[Any] | None]],
    target: Target,
    cfg: AssemblyConfig,
    planned_as: str = "openai_chat",
) -> AssemblyResult:
    """``assemble(notches)`` tightened one notch at a time until the request it makes, as
    ``request(result)`` gives it in the chat shape, fits the budget as ``target`` counts it.
    A plan made for the target's own format (``planned_as``) is counted as the target already.

    Raises:
        BudgetExceededError: No tighter plan exists (from ``assemble``).
    """
    notches = 0
    res = assemble(notches)
    if target.provider == planned_as:
        return res  # the plan's own count is the target's
    while target.count(*request(res), cfg) > cfg.budget:
        notches += 1
        res = assemble(notches)
    return res


async def afit_target(
    assemble: Callable[[int], Awaitable[AssemblyResult]],
    request: Callable[[AssemblyResult], tuple[list[dict[str, Any]], Sequence[Any] | None]],
    target: Target,
    cfg: AssemblyConfig,
    planned_as: str = "openai_chat",
) -> AssemblyResult:
    """``fit_target`` for an async ``assemble``."""
    notches = 0
    res = await assemble(notches)
    if target.provider == planned_as:
        return res
    while target.count(*request(res), cfg) > cfg.budget:
        notches += 1
        res = await assemble(notches)
    return res


def check_ledger(ledger: Any) -> SideEffectLedger | None:
    """``ledger`` if it is a SideEffectLedger or None; ConfigError otherwise."""
    if ledger is not None and not isinstance(ledger, SideEffectLedger):
        raise ConfigError(
            f"ledger must be a ringbound.SideEffectLedger, got {type(ledger).__name__}",
            key="ledger",
            reason="must be a SideEffectLedger",
        )
    return ledger


def cache_options(
    res: AssemblyResult, provider: str | None, given: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The ``prompt_cache_options`` a request built from ``res`` should carry: the assembly's
    (``prompt_cache_mode`` under ``cache_stable``), for a model that speaks OpenAI's format,
    and None when the request already names its own (``given``: its other parameters);
    without the ``ttl`` beside a ``prompt_cache_retention``, which OpenAI refuses with it."""
    if res.cache_options is None or provider not in _CACHE_OPTIONS:
        return None
    given = given or {}
    if given.get("prompt_cache_options") is not None:
        return None
    if given.get("prompt_cache_retention") is not None:
        return {k: v for k, v in res.cache_options.items() if k != "ttl"}
    return dict(res.cache_options)
