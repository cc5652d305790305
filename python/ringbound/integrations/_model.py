"""What an integration knows of the model it wraps, and the config that follows from it: the
window and output cap from the framework's own model data, then from the models table; the
wire format from the model's class, route or system; the output reserve from the request's
own ``max_tokens``. A config the user gives wins, field by field."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .. import models
from ..body import no_budget
from ..config import AssemblyConfig
from ..errors import ConfigError

__all__ = [
    "FAMILY_PROVIDER",
    "ROUTE_PROVIDER",
    "ModelFacts",
    "Sized",
    "positive",
    "provider_family",
    "route_provider",
    "sized",
]

#: The wire format each family of the models table speaks when nothing says otherwise.
FAMILY_PROVIDER = {
    "openai": "openai_chat",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "bedrock": "bedrock_converse",
}
#: The fields a model sizes; every other field is the user's (or its default).
_SIZED = ("model_input_limit", "output_reserve_tokens", "encoding", "token_ratio")
_DEFAULTS = AssemblyConfig()


@dataclass(frozen=True)
class ModelFacts:
    """What the framework says about the model behind a request.

    Attributes:
        name: The model's name as the framework spells it (looked up in the models table).
        provider: The ringbound provider whose count the request must fit, when the model's
            class, route or system says it.
        input_limit: The framework's own input window (a LangChain profile's
            ``max_input_tokens``, Pydantic AI's ``context_window``, LiteLLM's
            ``max_input_tokens``), counted as shared with the output.
        max_output_tokens: The most the model may write, from the framework.
        output_reserve: The request's own ``max_tokens`` (or its spelling), when it has one.
        where: What named the model, for messages (``"the LangChain model"``).
    """

    name: str | None = None
    provider: str | None = None
    input_limit: int | None = None
    max_output_tokens: int | None = None
    output_reserve: int | None = None
    where: str = "the model"


@dataclass(frozen=True)
class Sized:
    """A config sized for a model, and the provider to count its requests as.

    Attributes:
        config: The config: the user's fields, the model's where the user left the default.
        provider: The provider the requests are counted as.
        model: The models-table entry that sized it, or None.
        known: False when neither the framework nor the table knew the window (the config's
            own ``model_input_limit`` is then used, with a warning and a metric).
    """

    config: AssemblyConfig
    provider: str
    model: models.ModelInfo | None
    known: bool


#: LiteLLM's provider names (``litellm_provider``, the route's first segment) and the wire
#: format the upstream receives; Vertex AI serves Claude and Gemini, told apart by the name.
ROUTE_PROVIDER = {
    "openai": "openai_chat",
    "azure": "openai_chat",
    "azure_ai": "openai_chat",
    "text-completion-openai": "openai_chat",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "vertex_ai": "gemini",
    "vertex_ai_beta": "gemini",
    "bedrock": "bedrock_converse",
    "bedrock_converse": "bedrock_converse",
}


def route_provider(route: Any, name: Any = "") -> str | None:
    """The wire format of a LiteLLM provider name (or of a route such as
    ``anthropic/claude-sonnet-4-5``, by its first segment), or None when unknown."""
    if not isinstance(route, str):
        return None
    head = route.split("/", 1)[0].lower() if "/" in route or not name else route.lower()
    provider = ROUTE_PROVIDER.get(head)
    text = f"{route} {name}".lower()
    if provider == "gemini" and "claude" in text:
        return "anthropic"  # Claude on Vertex AI takes Anthropic's messages
    return provider


def positive(value: Any) -> int | None:
    """``value`` when it is a positive int (not a bool), else None: frameworks leave limits
    unset as None, 0 or a missing key."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def provider_family(provider: str) -> str:
    """The family of a wire format (``openai_responses`` is ``openai``)."""
    return {"bedrock_converse": "bedrock", "openai_responses": "openai"}.get(
        provider, provider.split("_")[0]
    )


def sized(
    config: AssemblyConfig | None,
    facts: ModelFacts,
    *,
    provider: str | None = None,
    default_provider: str = "openai_chat",
    request_wins: bool = False,
    sink: Any = None,
) -> Sized:
    """The config for requests to the model ``facts`` describes.

    The window is the framework's (``facts.input_limit``), else the table entry's for the
    reserve; the reserve is the request's ``max_tokens``, else the config's when the user set
    one, else what the model can write (at most 8192 and a quarter of the window). A field of
    ``config`` that differs from ``AssemblyConfig()``'s default wins over all of it, except
    that with ``request_wins`` the request's ``max_tokens`` is the reserve whatever the config
    says (a gateway's body, as ``assemble_body`` reads it). An explicit ``provider`` wins over
    the model's.

    Raises:
        ConfigError: ``config`` is not an AssemblyConfig; the model is unknown and strictness
            is on (``ringbound.models.set_strict``); the reserve leaves no budget.
    """
    if config is not None and not isinstance(config, AssemblyConfig):
        raise ConfigError(
            f"config must be an AssemblyConfig, got {type(config).__name__}", key="config"
        )
    base = config if config is not None else _DEFAULTS
    given = {k for k in _SIZED if getattr(base, k) != getattr(_DEFAULTS, k)}
    info = models.find(facts.name) if facts.name else None
    wire = provider or facts.provider
    if wire is None:
        wire = FAMILY_PROVIDER[info.family] if info is not None else default_provider
    window_known = "model_input_limit" in given or facts.input_limit is not None
    if info is None and not window_known:
        # Neither the framework nor the table knows the window: say so (or refuse).
        models.resolve(facts.name, where=facts.where, provider=wire, sink=sink)
    values = base.to_dict()
    reserve = facts.output_reserve
    if "output_reserve_tokens" in given and not request_wins:
        reserve = base.output_reserve_tokens
    if reserve is None:
        if "output_reserve_tokens" in given:
            reserve = base.output_reserve_tokens
        elif facts.input_limit is not None or info is None:
            cap = facts.max_output_tokens or (info.max_output_tokens if info else None)
            window = facts.input_limit or base.model_input_limit
            reserve = max(1, min(models.DEFAULT_OUTPUT_RESERVE, cap or window, window // 4))
        else:
            reserve = info.default_reserve()
    values["output_reserve_tokens"] = reserve
    if "model_input_limit" not in given:
        if facts.input_limit is not None:
            values["model_input_limit"] = facts.input_limit
        elif info is not None:
            values["model_input_limit"] = info.input_limit(reserve)
    if info is not None:
        if "encoding" not in given:
            values["encoding"] = info.encoding
        if "token_ratio" not in given and info.token_ratio is not None:
            values["token_ratio"] = info.token_ratio
    if reserve == facts.output_reserve:
        limit, margin = values["model_input_limit"], base.margin_tokens
        if limit - reserve - margin <= 0:
            raise no_budget("max_tokens", reserve, limit, margin)
    out = dataclasses.replace(base, **{k: values[k] for k in _SIZED})
    return Sized(out, wire, info, info is not None or window_known)
