"""What a LangChain chat model says about itself: its name, its provider (from its class, as
LangChain's partner packages name them), its profile's window and output cap, and the
``max_tokens`` its requests carry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._model import ModelFacts, positive

__all__ = ["facts"]

#: Partner classes by name (the packages are optional, so they are not imported): the wire
#: format each sends. ChatOpenAI's depends on ``use_responses_api`` (below).
_CLASSES = {
    "ChatAnthropic": "anthropic",
    "ChatAnthropicVertex": "anthropic",
    "ChatOpenAI": "openai_chat",
    "AzureChatOpenAI": "openai_chat",
    "BaseChatOpenAI": "openai_chat",
    "ChatGoogleGenerativeAI": "gemini",
    "ChatVertexAI": "gemini",
    "ChatBedrockConverse": "bedrock_converse",
}
#: The same by ``_llm_type``, for subclasses and wrappers that keep it.
_LLM_TYPES = {
    "anthropic-chat": "anthropic",
    "openai-chat": "openai_chat",
    "azure-openai-chat": "openai_chat",
    "chat-google-generative-ai": "gemini",
    "vertexai": "gemini",
    "amazon_bedrock_converse_chat": "bedrock_converse",
}
_NAME_FIELDS = ("model_name", "model", "model_id", "deployment_name")
_RESERVE_FIELDS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def facts(model: Any, settings: Mapping[str, Any] | None = None) -> ModelFacts:
    """The facts of ``model`` (a ``BaseChatModel``, a ``RunnableBinding`` around one, or an
    ``init_chat_model`` name such as ``anthropic:claude-sonnet-4-5``);
    ``settings`` are the call's own model settings (``ModelRequest.model_settings``), whose
    ``max_tokens`` wins over the model's."""
    if isinstance(model, str):
        return _from_spec(model)
    kwargs: dict[str, Any] = {}
    while hasattr(model, "bound") and not hasattr(model, "profile"):
        kwargs = {**getattr(model, "kwargs", {}), **kwargs}  # bind(max_tokens=...) too
        model = model.bound
    name = next(
        (v for f in _NAME_FIELDS if isinstance(v := getattr(model, f, None), str) and v), None
    )
    profile = getattr(model, "profile", None)
    profile = profile if isinstance(profile, Mapping) else {}
    reserve = None
    for source in (settings or {}, kwargs, model):
        for field in _RESERVE_FIELDS:
            value = (
                source.get(field) if isinstance(source, Mapping) else getattr(source, field, None)
            )
            if (reserve := positive(value)) is not None:
                break
        if reserve is not None:
            break
    return ModelFacts(
        name=name,
        provider=_provider(model),
        input_limit=positive(profile.get("max_input_tokens")),
        max_output_tokens=positive(profile.get("max_output_tokens")),
        output_reserve=reserve,
        where=f"the LangChain model {type(model).__name__}",
    )


#: ``init_chat_model``'s ``provider:model`` prefixes and the wire format each sends.
_SPEC_PROVIDERS = {
    "anthropic": "anthropic",
    "openai": "openai_chat",
    "azure_openai": "openai_chat",
    "google_genai": "gemini",
    "google_vertexai": "gemini",
    "bedrock_converse": "bedrock_converse",
}


def _from_spec(spec: str) -> ModelFacts:
    """The facts of a model named as ``init_chat_model`` and ``create_agent`` take it
    (``anthropic:claude-sonnet-4-5``): the provider from the prefix, the rest from the table."""
    prefix, _, name = spec.partition(":")
    if not name:
        prefix, name = "", spec
    return ModelFacts(
        name=name, provider=_SPEC_PROVIDERS.get(prefix), where=f"the LangChain model {spec!r}"
    )


def _provider(model: Any) -> str | None:
    for cls in type(model).__mro__:
        provider = _CLASSES.get(cls.__name__)
        if provider is not None:
            break
    else:
        try:
            provider = _LLM_TYPES.get(model._llm_type)
        except Exception:  # a model's own property; not ours to let fail the call
            provider = None
    if provider == "openai_chat" and getattr(model, "use_responses_api", None) is True:
        return "openai_responses"
    return provider
