"""ringbound in front of every model of a LiteLLM proxy: ``RingboundHook`` is a LiteLLM
``CustomLogger`` whose pre-call hook assembles the request body of the chat, Anthropic messages
and Responses routes to the model's budget before the proxy sends it upstream. With no config,
each model is sized from what the proxy knows of it: the deployment's ``model_info``, LiteLLM's
model map (``get_model_info``), then ringbound's models table; the upstream provider from the
route (``anthropic/...``); the output reserve from the body's ``max_tokens``.

Needs the ``litellm`` extra (``pip install 'ringbound[litellm]'``)."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections import OrderedDict
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

from .. import cache_markers
from ..assembler import Assembler, AssemblyResult
from ..body import output_reserve
from ..config import AssemblyConfig
from ..errors import (
    BudgetExceededError,
    ConfigError,
    InvalidMessageError,
    PairingError,
    RingboundError,
    SummaryError,
)
from ..models import find
from ..observability.metrics import MetricsSink
from ..providers import adapter
from ..translation import TranslationReport, translate
from ._base import Target, afit_target, cache_options
from ._model import _SIZED, ModelFacts, positive, route_provider, sized

__all__ = [
    "PLACEMENTS",
    "ROUTES",
    "ConfigSource",
    "RingboundHook",
    "Route",
    "http_status",
    "placed",
    "upstream_facts",
]

_logger = logging.getLogger("ringbound")

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
#: The default of each field: what a fallback model's borrowed config resets (``_policy``).
_DEFAULTS = AssemblyConfig()
#: Stands for "no config given": every model is sized from what the proxy knows of it.
_DERIVE = object()


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


def _http_error(error: RingboundError, data: dict[str, Any]) -> HTTPException:
    """The HTTPException the proxy answers for ``error`` raised assembling ``data``."""
    status = http_status(error)
    if isinstance(error, ConfigError) and error.key == "model_input_limit" and output_reserve(data):
        status = 400  # the body's own max_tokens leaves no room: the client's to fix
    return HTTPException(status_code=status, detail=_detail(error))


def _with_result(
    data: dict[str, Any],
    route: Route,
    res: AssemblyResult,
    tools: Any,
    system: Any,
    options: dict[str, Any] | None,
) -> dict[str, Any]:
    """A new body: ``data`` with the assembled history and system, and every other field as
    it came (``data`` itself is never modified)."""
    body = dict(data)
    body[route.history] = res.messages
    if route.system is not None and res.system is not system:
        body[route.system] = res.system
    if tools is not None and res.tools is None:
        for key in ("tools", *_TOOL_FIELDS):
            body.pop(key, None)
    # LiteLLM passes the member on to OpenAI as it is, on the chat and responses routes.
    if options is not None:
        body["prompt_cache_options"] = options
    return body


@dataclass(frozen=True)
class _AttemptBody:
    """The body a fallback attempt started from, in its route's format: what ringbound
    translates when LiteLLM bridges the attempt to another format.

    Attributes:
        route: The route (and so the format) of the attempt's body.
        history: Its history (``messages`` or ``input``).
        system: Its top-level system, or None.
        tools: Its tools, or None.
    """

    route: Route
    history: Any
    system: Any
    tools: Any

    @staticmethod
    def of(data: dict[str, Any], route: Route) -> _AttemptBody:
        """The source held by the body ``data`` of ``route``."""
        system = data.get(route.system) if route.system else None
        return _AttemptBody(route, data.get(route.history), system, data.get("tools"))


#: Calls remembered at once; past it the oldest goes (a call is done in seconds, and a call
#: forgotten mid-fallback only loses ringbound's translation, LiteLLM's own is then sent).
_MAX_CALLS = 1024


class _Calls:
    """What the hook knows of each in-flight call, by LiteLLM's ``litellm_call_id`` (the same
    id on the pre-call hook and on every attempt and bridge call of one request)."""

    def __init__(self) -> None:
        self._calls: OrderedDict[str, list[Any]] = OrderedDict()

    def _slot(self, call_id: str) -> list[Any]:
        slot = self._calls.get(call_id)
        if slot is None:
            if len(self._calls) >= _MAX_CALLS:
                self._calls.popitem(last=False)
            slot = self._calls[call_id] = [None, None]
        return slot

    def requested(self, call_id: str, model: Any) -> None:
        """The pre-call hook saw the client ask for ``model``."""
        self._slot(call_id)[0] = model if isinstance(model, str) else None

    def started(self, call_id: str, source: _AttemptBody) -> None:
        """A fallback attempt started from ``source``."""
        self._slot(call_id)[1] = source

    def model(self, call_id: str, kwargs: dict[str, Any]) -> str | None:
        """The model the client asked for: as the pre-call hook saw it, else the proxy's copy
        of the client's body (a hook installed after the request began)."""
        slot = self._calls.get(call_id)
        if slot is not None and slot[0] is not None:
            return str(slot[0])
        request = kwargs.get("proxy_server_request")
        body = request.get("body") if isinstance(request, dict) else None
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) else None

    def source(self, call_id: str) -> _AttemptBody | None:
        """What the call's latest fallback attempt started from, if one did."""
        slot = self._calls.get(call_id)
        return None if slot is None else slot[1]


def _model_group(kwargs: dict[str, Any]) -> str | None:
    """The proxy's model name of the deployment an attempt goes to: the router writes it as
    ``model_group`` into the call's ``litellm_metadata`` (``metadata`` on older routes)."""
    for key in ("litellm_metadata", "metadata"):
        meta = kwargs.get(key)
        group = meta.get("model_group") if isinstance(meta, dict) else None
        if isinstance(group, str) and group:
            return group
    return None


def _log_translation(source: str, target: str, model: str, report: TranslationReport) -> None:
    """One INFO line per translated fallback, with what the translation dropped or changed."""
    if _logger.isEnabledFor(logging.INFO):
        changes = sorted({f"{c.action} {c.what}" for c in report.changes})
        _logger.info(
            "ringbound: fallback to %r: history translated %s -> %s (%s)",
            model,
            source,
            target,
            ", ".join(changes) or "nothing changed",
        )


def _source(config: Any, default: AssemblyConfig | None) -> ConfigSource:
    """The callable behind ``config``: a config for every model, a mapping by model name, or
    a callable (a models table), each falling back to ``default``."""
    if default is not None and not isinstance(default, AssemblyConfig):
        raise ConfigError(
            f"default must be an AssemblyConfig or None, got {type(default).__name__}",
            key="default",
            reason="must be an AssemblyConfig",
        )
    if config is None:
        return lambda _model: None
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
    never modified. Other call types, a Responses ``input`` that is a string, and Responses
    bodies continuing server-side history (``previous_response_id``, ``conversation``) pass
    through untouched.

    Each model is sized from what the proxy knows of it: its deployments' ``model_info``
    (``max_input_tokens``, ``max_output_tokens``), LiteLLM's model map for the deployment's
    model (``litellm.get_model_info``), then ringbound's models table; the upstream provider
    from the deployment's route (a Claude model behind the chat route is counted as
    Anthropic counts it); the output reserve from the body's ``max_tokens``
    (``max_completion_tokens``, ``max_output_tokens``) on every route. A config field set to
    anything but its default wins over the model's, except the reserve: the body's own wins,
    as in ``Assembler.assemble_body``. A model nothing knows is logged and counted
    (``ringbound.models.resolve``) and passed through untouched, or answered 500 under
    ``ringbound.models.set_strict(True)``.

    On a router fallback (``fallbacks`` in the proxy's config), LiteLLM calls
    ``async_pre_call_deployment_hook`` before the attempt on the fallback model: the body is
    refitted for that model (its window, its count), and where LiteLLM bridges it to another
    format (an Anthropic messages body to an OpenAI model), ringbound's translation of it
    replaces LiteLLM's. A fallback model without a config of its own takes the requested
    model's policy, sized for the fallback model.

    A ringbound error becomes an ``HTTPException`` the proxy answers as an OpenAI-shaped error
    (status from ``http_status``; ``provider_specific_fields.ringbound`` holds the error class
    and its fields). Each assembly reports to the metrics sink.

    Args:
        config: None (the default) to size every model from the proxy's knowledge; an
            ``AssemblyConfig`` for every model (its default fields still sized from the
            model); a mapping of the proxy's ``model_name`` to its config; or a callable
            ``model -> AssemblyConfig | None`` (a models table).
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
        config: AssemblyConfig | Mapping[str, AssemblyConfig] | ConfigSource | None = None,
        *,
        default: AssemblyConfig | None = None,
        summarizer: Any = None,
        sink: MetricsSink | None = None,
        cache: Any = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._derive = config is None
        self._source = _source(config, default)
        self._summarizer = summarizer
        self._sink = sink
        self._cache = cache
        # Built once per (config, model, route, reserve): building sizes the config, checks it
        # and compiles it for the core. Keyed by the config's identity, which the entry keeps
        # alive.
        self._assemblers: dict[tuple[Any, ...], tuple[Any, Assembler, Target | None]] = {}
        # What the proxy knows of each (model, reserve), read once: the router and LiteLLM's
        # model map are not read again on every request.
        self._facts: dict[tuple[Any, int | None], ModelFacts] = {}
        # What each in-flight call asked for and what its fallback attempt started from, by
        # LiteLLM's call id: the per-deployment hook sees one attempt at a time.
        self._calls = _Calls()
        # A fallback model's config made from the requested model's (``_policy``), by the
        # identity of the config it was made from, which the entry keeps alive.
        self._policies: dict[int, tuple[AssemblyConfig, AssemblyConfig]] = {}
        # Fail at start-up, not on the first request, for a summarizer, sink or cache that
        # Assembler refuses.
        Assembler(AssemblyConfig(), summarizer=summarizer, sink=sink, cache=cache)

    def config_for(self, model: Any) -> AssemblyConfig | None:
        """The config given for ``model`` (before sizing it from the model), or None: with
        no config at all every model is sized from the proxy's knowledge of it."""
        return self._source(model) if isinstance(model, str) else None

    def assembler(
        self, config: AssemblyConfig, provider: str, facts: ModelFacts | None = None
    ) -> Assembler:
        """The Assembler for ``config`` on ``provider``'s wire format (built once); with
        ``facts``, the config is first sized for that model."""
        return self._entry(config, provider, facts)[0]

    def _entry(
        self, config: AssemblyConfig | None, provider: str, facts: ModelFacts | None
    ) -> tuple[Assembler, Target | None]:
        key = (id(config), provider, facts)
        entry = self._assemblers.get(key)
        if entry is None or entry[0] is not config:
            if len(self._assemblers) >= _MAX_ASSEMBLERS:
                del self._assemblers[next(iter(self._assemblers))]
            cfg, target = _sized(config, provider, facts, self._sink)
            asm = Assembler(
                placed(cfg, provider),
                provider=provider,
                summarizer=self._summarizer,
                sink=self._sink,
                cache=self._cache,
            )
            entry = (config, asm, target)
            self._assemblers[key] = entry
        return entry[1], entry[2]

    def facts_for(self, model: Any, reserve: tuple[str, int] | None) -> ModelFacts:
        """``upstream_facts`` of ``model`` with the body's ``reserve``, read once."""
        key = (model if isinstance(model, str) else None, None if reserve is None else reserve[1])
        facts = self._facts.get(key)
        if facts is None:
            if len(self._facts) >= _MAX_ASSEMBLERS * 4:
                self._facts.clear()
            facts = upstream_facts(*key)
            self._facts[key] = facts
        return facts

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
        if isinstance(data.get("litellm_call_id"), str):
            self._calls.requested(data["litellm_call_id"], data.get("model"))
        return await self._fit(data, route, data.get("model"))

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        """LiteLLM's per-attempt hook: on a fallback, the body refitted for the fallback model
        (and, where LiteLLM bridges to another format, ringbound's translation); else None.

        The pre-call hook fits the body once, for the model the client named; the router then
        tries each deployment, and on a fallback (a 529 from Anthropic, say) calls this hook
        again, inside ``litellm.anthropic_messages``/``acompletion``/``aresponses``, with the
        fallback deployment's ``model``, ``model_info`` and model group. A fallback model with
        a smaller window or another tokenizer would otherwise get a body fitted for the first
        one, and a 400. See ``docs/integrations/litellm.md``, "Fallbacks".

        Raises:
            fastapi.HTTPException: The assembly raised a ringbound error.
        """
        route = ROUTES.get(getattr(call_type, "value", call_type))
        call_id = kwargs.get("litellm_call_id") if isinstance(kwargs, dict) else None
        if route is None or not isinstance(call_id, str):
            return None
        group = _model_group(kwargs)
        requested = self._calls.model(call_id, kwargs)
        if group is None or requested is None or group == requested:
            return None  # the model the pre-call hook fitted the body for
        source = self._calls.source(call_id)
        if source is not None and source.route != route:
            # LiteLLM's own bridge (Anthropic messages to chat or Responses): this call's body
            # is LiteLLM's translation of the one the fallback attempt started with.
            return await self._translated(kwargs, route, source, group, requested)
        self._calls.started(call_id, _AttemptBody.of(kwargs, route))
        return await self._fit(kwargs, route, group, fallback_from=requested)

    async def _fit(
        self,
        data: dict[str, Any],
        route: Route,
        model: Any,
        fallback_from: str | None = None,
    ) -> dict[str, Any] | None:
        """``data`` assembled for ``model`` on ``route``: a new body, or None to leave it.
        A fallback model with no config of its own takes the config of the model the client
        asked for (``fallback_from``): the policy is the client's, the window the model's."""
        history = data.get(route.history)
        if history is None or isinstance(history, str):
            return None
        if route.provider == "openai_responses" and any(
            data.get(k) is not None for k in _SERVER_HISTORY
        ):
            return None
        tools = data.get("tools")
        system = data.get(route.system) if route.system else None
        try:
            found = self._config_and_facts(data, model, route.provider, fallback_from)
            if found is None:
                return None
            asm, target = self._entry(found[0], route.provider, found[1])
            # Both cache lifetimes: refused as assemble_body refuses them, before any work.
            cache_markers.check_body(route.provider, data)
            res = await _assemble(asm, target, history, tools, system)
        except RingboundError as e:
            raise _http_error(e, data) from e
        options = cache_options(res, route.provider if target is None else target.provider, data)
        return _with_result(data, route, res, tools, system, options)

    async def _translated(
        self, kwargs: dict[str, Any], route: Route, source: _AttemptBody, model: str, requested: str
    ) -> dict[str, Any] | None:
        """The bridge call's body with ringbound's translation of the fallback attempt's
        ``source`` into this call's format, fitted for ``model`` as that format counts.

        LiteLLM's own translation carries provider-bound parts into the other format (an
        Anthropic thinking block and its signature become the chat message's
        ``thinking_blocks`` and ``reasoning_content``, the signature only Anthropic can
        verify); ringbound's drops them, keeps every call paired, and reports what it
        changed."""
        if route.history not in kwargs or isinstance(kwargs.get(route.history), str):
            return None
        try:
            found = self._config_and_facts(kwargs, model, route.provider, requested)
            if found is None:
                return None
            out = translate(
                source.history,
                source=source.route.provider,
                target=route.provider,
                system=source.system,
                tools=source.tools,
                # A fallback must go on: a part the target cannot carry becomes a short text
                # saying what was there (reported) rather than failing the whole request.
                unsupported="placeholder",
            )
            # A chat bridge call may still go to another provider (LiteLLM converts chat for
            # Claude or Gemini itself): the entry's target then counts it as that one does.
            asm, target = self._entry(found[0], route.provider, found[1])
            cache_markers.check_body(route.provider, kwargs)
            res = await _assemble(asm, target, out.messages, out.tools, out.system)
        except RingboundError as e:
            raise _http_error(e, kwargs) from e
        _log_translation(source.route.provider, route.provider, model, out.report)
        body = _with_result(kwargs, route, res, kwargs.get("tools"), None, None)
        if route.system is not None:
            body[route.system] = res.system  # the translated system, or none at all
        if out.tools is not None and res.tools is not None:
            body["tools"] = res.tools
        return body

    def _policy(self, config: AssemblyConfig | None) -> AssemblyConfig | None:
        """``config`` without what sizes it for its model (window, reserve, encoding, ratio),
        for a fallback model that has no config of its own: the requested model's window
        would let the body overflow the fallback's. Made once per config, so the Assembler
        built for it is reused."""
        if config is None:
            return None
        made = self._policies.get(id(config))
        if made is None or made[0] is not config:
            if len(self._policies) >= _MAX_ASSEMBLERS:
                self._policies.clear()
            bare = dataclasses.replace(config, **{f: getattr(_DEFAULTS, f) for f in _SIZED})
            made = self._policies[id(config)] = (config, bare)
        return made[1]

    def _config_and_facts(
        self,
        data: dict[str, Any],
        model: Any,
        provider: str,
        fallback_from: str | None = None,
    ) -> tuple[AssemblyConfig | None, ModelFacts] | None:
        """The config and model facts to assemble ``data`` (in ``provider``'s format) for
        ``model`` by, or None to leave the body as it is (no config for it, or a model nothing
        knows).

        Raises:
            ConfigError: Under strict models, a model nothing knows.
        """
        config = self.config_for(model)
        if config is None and fallback_from is not None:
            config = self._policy(self.config_for(fallback_from))
        if config is None and not self._derive:
            return None
        facts = self.facts_for(model, output_reserve(data))
        if config is None and not _knows(facts):
            _sized(None, provider, facts, self._sink)  # warns and counts, or refuses
            return None
        return config, facts


def upstream_facts(model: Any, reserve: int | None = None) -> ModelFacts:
    """What the proxy knows of the model a body names: its deployments (the running proxy's
    router; the smallest window when several serve the name), else LiteLLM's model map for the
    name itself; ``reserve`` is the body's own output reserve."""
    name = model if isinstance(model, str) else None
    best: ModelFacts | None = None
    for params, info in _deployments(name):
        upstream = params.get("model") if isinstance(params.get("model"), str) else name
        mapped = _model_map(upstream)
        window = positive(info.get("max_input_tokens")) or positive(mapped.get("max_input_tokens"))
        facts = ModelFacts(
            name=info.get("base_model") if isinstance(info.get("base_model"), str) else upstream,
            provider=route_provider(mapped.get("litellm_provider") or upstream, upstream or ""),
            input_limit=window,
            max_output_tokens=positive(info.get("max_output_tokens"))
            or positive(mapped.get("max_output_tokens")),
            output_reserve=reserve,
            where=f"the proxy's model {name!r} ({upstream})",
        )
        if best is None or (window or 0) < (best.input_limit or 1 << 62):
            best = facts
    if best is not None:
        return best
    mapped = _model_map(name)
    return ModelFacts(
        name=name,
        provider=route_provider(mapped.get("litellm_provider") or name, name or ""),
        input_limit=positive(mapped.get("max_input_tokens")),
        max_output_tokens=positive(mapped.get("max_output_tokens")),
        output_reserve=reserve,
        where="the body's model",
    )


def _deployments(name: str | None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The (litellm_params, model_info) of each deployment serving ``name`` in the running
    proxy; none outside a proxy (its server module is then not loaded, and not imported)."""
    server = sys.modules.get("litellm.proxy.proxy_server")
    router = getattr(server, "llm_router", None)
    if router is None or name is None:
        return []
    try:
        found = router.get_model_list(model_name=name) or []
    except Exception:  # the router's own lookup; a failure means "nothing known"
        return []
    out = []
    for d in found:
        params, info = d.get("litellm_params"), d.get("model_info")
        out.append(
            (params if isinstance(params, dict) else {}, info if isinstance(info, dict) else {})
        )
    return out


def _model_map(name: Any) -> dict[str, Any]:
    """LiteLLM's model map entry for ``name`` (empty when LiteLLM does not know it)."""
    if not isinstance(name, str) or not name:
        return {}
    import litellm

    if "/" not in name and name not in litellm.model_cost:
        return {}  # not mapped, and no route to guess it by (LiteLLM would print a notice)
    try:
        info = litellm.get_model_info(name)
    except Exception:  # LiteLLM raises its own errors for unmapped names
        return {}
    return dict(info) if isinstance(info, Mapping) else {}


def _knows(facts: ModelFacts) -> bool:
    """Whether the proxy or the models table knows the window of ``facts``' model."""
    return facts.input_limit is not None or (
        facts.name is not None and find(facts.name) is not None
    )


def _sized(
    config: AssemblyConfig | None, route: str, facts: ModelFacts | None, sink: Any
) -> tuple[AssemblyConfig, Target | None]:
    """The config for ``facts``' model on ``route``, and the target to count the planned chat
    request as when the upstream speaks another format than the route (else None)."""
    if facts is None:
        return (config if config is not None else AssemblyConfig()), None
    size = sized(config, facts, provider=facts.provider or route, request_wins=True, sink=sink)
    cfg, upstream = size.config, size.provider
    if upstream == route:
        return cfg, None
    if route == "openai_chat":
        target = Target(upstream)
        if cfg.token_ratio is None:
            cfg = dataclasses.replace(cfg, token_ratio=target.token_ratio)
        return cfg, target
    if cfg.token_ratio is None and route == "openai_responses" and upstream != "openai_chat":
        # Planned as Responses input for a model that counts more per token: its ratio.
        cfg = dataclasses.replace(cfg, token_ratio=adapter(upstream).default_token_ratio)
    return cfg, None


async def _assemble(
    asm: Assembler, target: Target | None, history: Any, tools: Any, system: Any
) -> AssemblyResult:
    """The assembly, tightened until the chat request fits as the upstream counts it."""
    if target is None:
        return await asm.assemble_async(history, tools=tools, system=system)
    return await afit_target(
        lambda n: asm.assemble_async(history, tools=tools, system=system, tighten=n),
        lambda res: (res.messages, res.tools),
        target,
        asm.config,
    )
