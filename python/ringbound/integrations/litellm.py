"""ringbound in front of every model of a LiteLLM proxy: ``RingboundHook`` is a LiteLLM
``CustomLogger`` whose pre-call hook assembles the request body of the chat, Anthropic messages
and Responses routes to the model's budget before the proxy sends it upstream.

Needs the ``litellm`` extra (``pip install 'ringbound[litellm]'``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

try:
    from fastapi import HTTPException
    from litellm.integrations.custom_logger import CustomLogger
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ringbound.integrations.litellm needs the LiteLLM proxy: pip install 'ringbound[litellm]'"
    ) from e

from ..assembler import Assembler
from ..config import AssemblyConfig
from ..errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    RingboundError,
    SummaryError,
)
from ..observability.metrics import MetricsSink

__all__ = [
    "PLACEMENTS",
    "ROUTES",
    "ConfigSource",
    "RingboundHook",
    "Route",
    "http_status",
    "placed",
]

#: What picks the config of a request from its ``model``: None leaves the request as it is.
ConfigSource = Callable[[str], "AssemblyConfig | None"]


@dataclass(frozen=True)
class Route:
    """Where one LiteLLM call type keeps what ringbound assembles.

    Attributes:
        provider: The ringbound provider that reads the body's history.
        history: The body field holding the history (``messages`` or ``input``).
        system: The body field holding the top-level system, or None for none.
    """

    provider: str
    history: str
    system: str | None


#: The call types the hook serves (the proxy's ``route_type`` of each route); every other
#: call type passes through untouched.
ROUTES: Mapping[str, Route] = {
    "acompletion": Route("openai_chat", "messages", None),
    "anthropic_messages": Route("anthropic", "messages", "system"),
    "aresponses": Route("openai_responses", "input", "instructions"),
}

#: Where each route's notes go unless the config names a ``note_placement``: after the
#: leading system messages on the chat route (LiteLLM turns a system message in mid-history
#: into user text when it translates the request for an Anthropic model), and into the
#: top-level system where the route has one (``system``, ``instructions``).
PLACEMENTS: Mapping[str, str] = {
    "openai_chat": "leading_system",
    "anthropic": "top_level_system",
    "openai_responses": "top_level_system",
}


def placed(config: AssemblyConfig, provider: str) -> AssemblyConfig:
    """``config`` with its route's default ``note_placement`` when it names none."""
    if config.note_placement is not None:
        return config
    return dataclasses.replace(config, note_placement=PLACEMENTS[provider])


#: Body fields that only make sense with ``tools``: sent without it, providers refuse them.
_TOOL_FIELDS = ("tool_choice", "parallel_tool_calls")
#: Responses fields that make the provider prepend history the body does not carry: ``input``
#: alone is then not the history, and its results answer calls ringbound cannot see.
_SERVER_HISTORY = ("previous_response_id", "conversation")
#: Assemblers kept at once; past it the oldest goes (a ``ConfigSource`` may build configs).
_MAX_ASSEMBLERS = 64


def http_status(error: RingboundError) -> int:
    """The HTTP status the proxy answers for ``error``.

    400 for what the request itself got wrong (malformed messages, broken pairing, a protected
    part over the budget), which resending it unchanged cannot fix; 503 for a summarizer that
    failed under ``on_summary_failure: fail_closed``, which a retry may get past; 500 for a
    gateway whose own configuration is wrong.

    Example:
        >>> import ringbound as rb
        >>> http_status(rb.PairingError("broken")), http_status(rb.ConfigError("bad"))
        (400, 500)
    """
    if isinstance(error, ConfigError):
        return 500
    if isinstance(error, SummaryError):
        return 503
    return 400


def _detail(error: RingboundError) -> dict[str, Any]:
    """The body LiteLLM turns into the error response: ``error`` becomes its message, and the
    whole dict its ``provider_specific_fields``, so clients can read the typed fields."""
    fields: dict[str, Any] = {"error": type(error).__name__}
    if isinstance(error, PairingError):
        fields["issues"] = [
            {"kind": i.kind, "call_id": i.call_id, "index": i.index} for i in error.issues
        ]
    elif isinstance(error, InvalidMessageError):
        fields["index"] = error.index
    elif isinstance(error, BudgetExceededError):
        fields.update(
            tokens=error.tokens, budget=error.budget, bucket_tokens=dict(error.bucket_tokens)
        )
    elif isinstance(error, ConfigError):
        fields["key"] = error.key
    elif isinstance(error, SummaryError):
        fields["reason"] = error.reason
    return {"error": f"ringbound: {error}", "ringbound": fields}


def _source(config: Any, default: AssemblyConfig | None) -> ConfigSource:
    """The callable behind ``config``: a config for every model, a mapping by model name, or
    a callable (a models table), each falling back to ``default``."""
    if default is not None and not isinstance(default, AssemblyConfig):
        raise ConfigError(
            f"default must be an AssemblyConfig or None, got {type(default).__name__}",
            key="default",
            reason="must be an AssemblyConfig",
        )
    if isinstance(config, AssemblyConfig):
        return lambda _model: config
    if isinstance(config, Mapping):
        table = dict(config)
        for model, cfg in table.items():
            if not isinstance(model, str) or not isinstance(cfg, AssemblyConfig):
                raise ConfigError(
                    f"config must map model names to AssemblyConfig, got "
                    f"{type(model).__name__} -> {type(cfg).__name__}",
                    key="config",
                    reason="must map str to AssemblyConfig",
                )
        return lambda model: table.get(model, default)
    if callable(config):

        def pick(model: str) -> AssemblyConfig | None:
            cfg = config(model)
            if cfg is None:
                return default
            if not isinstance(cfg, AssemblyConfig):
                raise ConfigError(
                    f"the config source returned {type(cfg).__name__} for model {model!r}; "
                    f"it must return an AssemblyConfig or None",
                    key="config",
                    reason="must return an AssemblyConfig or None",
                )
            return cfg

        return pick
    raise ConfigError(
        f"config must be an AssemblyConfig, a mapping of model name to AssemblyConfig, or a "
        f"callable model -> AssemblyConfig | None; got {type(config).__name__}",
        key="config",
        reason="must be an AssemblyConfig, a mapping or a callable",
    )


class RingboundHook(CustomLogger):  # type: ignore[misc]
    """A LiteLLM proxy callback that fits each request to its model's budget.

    On the chat (``/v1/chat/completions``), Anthropic messages (``/v1/messages``) and
    Responses (``/v1/responses``) routes, the pre-call hook assembles the body's history
    (``messages`` or ``input``) with its ``tools`` and top-level system (``system``,
    ``instructions``) under the config of the body's ``model``, and hands the proxy a new body:
    the assembled history, the system carrying the ledger note where the provider keeps it
    there, and every other field as it came. The proxy's own body and the messages in it are
    never modified. Requests with no config for their model, other call types, a Responses
    ``input`` that is a string, and Responses bodies continuing server-side history
    (``previous_response_id``, ``conversation``) pass through untouched.

    A ringbound error becomes an ``HTTPException`` the proxy answers as an OpenAI-shaped error
    (status from ``http_status``; ``provider_specific_fields.ringbound`` holds the error class
    and its fields). Each assembly reports to the metrics sink.

    Args:
        config: The config of every model (an ``AssemblyConfig``), a mapping of the proxy's
            ``model_name`` to its config, or a callable ``model -> AssemblyConfig | None``
            (a models table).
        default: The config of models the mapping or callable has none for; None leaves their
            requests untouched.
        summarizer: The summarizer of every assembly (sync or async), as for ``Assembler``.
        sink: Where each assembly's metrics go; the default sink when None.
        cache: The count cache, as for ``Assembler``.
        **kwargs: Passed to LiteLLM's ``CustomLogger``.

    Raises:
        ConfigError: ``config`` or ``default`` is not one of the accepted kinds.

    Example:
        >>> import ringbound as rb
        >>> hook = RingboundHook({"gpt-4o": rb.AssemblyConfig(model_input_limit=128_000)})
        >>> hook.config_for("gpt-4o").budget, hook.config_for("other") is None
        (118784, True)
    """

    def __init__(
        self,
        config: AssemblyConfig | Mapping[str, AssemblyConfig] | ConfigSource,
        *,
        default: AssemblyConfig | None = None,
        summarizer: Any = None,
        sink: MetricsSink | None = None,
        cache: Any = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._source = _source(config, default)
        self._summarizer = summarizer
        self._sink = sink
        self._cache = cache
        # Built once per (config, provider): building checks the config and compiles it for
        # the core. Keyed by the config's identity, which the entry keeps alive.
        self._assemblers: dict[tuple[int, str], tuple[AssemblyConfig, Assembler]] = {}
        # Fail at start-up, not on the first request, for a summarizer, sink or cache that
        # Assembler refuses.
        Assembler(AssemblyConfig(), summarizer=summarizer, sink=sink, cache=cache)

    def config_for(self, model: Any) -> AssemblyConfig | None:
        """The config requests for ``model`` are assembled under, or None to leave them be."""
        return self._source(model) if isinstance(model, str) else None

    def assembler(self, config: AssemblyConfig, provider: str) -> Assembler:
        """The Assembler for ``config`` on ``provider``'s wire format (built once)."""
        key = (id(config), provider)
        entry = self._assemblers.get(key)
        if entry is None or entry[0] is not config:
            if len(self._assemblers) >= _MAX_ASSEMBLERS:
                del self._assemblers[next(iter(self._assemblers))]
            asm = Assembler(
                placed(config, provider),
                provider=provider,
                summarizer=self._summarizer,
                sink=self._sink,
                cache=self._cache,
            )
            entry = (config, asm)
            self._assemblers[key] = entry
        return entry[1]

    async def async_pre_call_hook(
        self,
        user_api_key_dict: Any,
        cache: Any,
        data: dict[str, Any],
        call_type: str,
    ) -> dict[str, Any] | None:
        """The proxy's pre-call hook: the body to send, or None to send ``data`` as it is.

        Raises:
            fastapi.HTTPException: The assembly raised a ringbound error (status from
                ``http_status``).
        """
        route = ROUTES.get(call_type)
        if route is None or not isinstance(data, dict):
            return None
        history = data.get(route.history)
        if history is None or isinstance(history, str):
            return None
        if route.provider == "openai_responses" and any(
            data.get(k) is not None for k in _SERVER_HISTORY
        ):
            return None
        try:
            config = self.config_for(data.get("model"))
            if config is None:
                return None
            tools = data.get("tools")
            system = data.get(route.system) if route.system else None
            res = await self.assembler(config, route.provider).assemble_async(
                history, tools=tools, system=system
            )
        except RingboundError as e:
            raise HTTPException(status_code=http_status(e), detail=_detail(e)) from e
        body = dict(data)
        body[route.history] = res.messages
        if route.system is not None and res.system is not system:
            body[route.system] = res.system
        if tools is not None and res.tools is None:
            for key in ("tools", *_TOOL_FIELDS):
                body.pop(key, None)
        return body
