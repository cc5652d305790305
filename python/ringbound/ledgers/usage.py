"""What a provider reported for one response, read from the SDKs' own usage objects or their
JSON: OpenAI Chat and Responses ``usage``, Anthropic ``usage`` (cache reads and writes, and the
``iterations`` of server-side compaction), Gemini ``usageMetadata``, Bedrock ``usage``. One
record for all of them, so the token ledger reconciles them with ringbound's estimates."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..caller_values import plain_dict, plain_int, plain_items, plain_str, shown
from ..errors import ConfigError

__all__ = ["Usage", "read_usage"]


@dataclass(frozen=True)
class Usage:
    """One response's usage, in provider tokens.

    Attributes:
        shape: Which SDK shape it was read from: ``openai_chat``, ``openai_responses``,
            ``anthropic``, ``gemini`` or ``bedrock``.
        prompt_tokens: The size of the request as sent (uncached + cached + cache-write
            input), what ringbound's estimate is compared with; None when the usage does not
            say (Anthropic compacted the context server-side before answering).
        input_tokens: Input billed at the full rate (not read from or written to a cache),
            over every iteration.
        cached_tokens: Input read from the provider's prompt cache.
        cache_write_tokens: Input written to the prompt cache (Anthropic, Bedrock).
        output_tokens: Output billed, reasoning and thinking included.
        compaction_iterations: Server-side compactions within the response (Anthropic
            ``usage.iterations`` entries of type ``compaction``); their tokens are in the
            totals above, unlike the top-level usage of the SDK.
    """

    shape: str
    prompt_tokens: int | None
    input_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    compaction_iterations: int = 0


#: Larger than any count a provider reports, and exact as a float (a ratio is taken of it).
MAX_COUNT = 2**53
#: How many ``usage`` wrappers (a response holding a usage) are read into.
_MAX_WRAPPING = 4


def _unreadable(what: str) -> ConfigError:
    return ConfigError(f"usage: {what}", key="usage", reason="not a usage object")


def _attr(obj: Any, name: str) -> Any:
    """An SDK object's attribute: what its property raises is a usage we cannot read."""
    try:
        return getattr(obj, name, None)
    except Exception:
        raise _unreadable(f"reading {type(obj).__name__}.{name} failed") from None


def _plain(obj: Any) -> Any:
    """An SDK object's usage as plain data, or ``obj`` itself; a mapping as a plain dict read
    as stored (what the caller's own methods raise is a usage we cannot read)."""
    dump = _attr(obj, "model_dump")
    if callable(dump):
        try:
            obj = dump(mode="json", exclude_none=True, by_alias=False)
        except Exception:
            raise _unreadable(f"{type(obj).__name__}.model_dump failed") from None
    if isinstance(obj, Mapping):
        data = plain_dict(obj)
        if data is None:
            raise _unreadable(f"the {type(obj).__name__} could not be read")
        return data
    return obj


def _int(data: Mapping[str, Any], *keys: str) -> int:
    """The first of ``keys`` present, as a count (0 when none is)."""
    for key in keys:
        value = data.get(key)
        if value is None:
            continue
        count = plain_int(value)
        if count is None or not 0 <= count < MAX_COUNT:
            raise ConfigError(
                f"usage field {key} must be a non-negative integer below 2**53, got {shown(value)}",
                key="usage",
                reason=f"{key} is not a count",
            )
        return count
    return 0


def _has(data: Mapping[str, Any], *keys: str) -> bool:
    return any(data.get(k) is not None for k in keys)


def _openai_details(details: Any) -> tuple[int, int]:
    """Cached and cache-write tokens of OpenAI's ``*_tokens_details`` (part of the input)."""
    if not isinstance(details, Mapping):
        return 0, 0
    details = _plain(details)
    return _int(details, "cached_tokens"), _int(details, "cache_write_tokens")


def _anthropic(data: Mapping[str, Any]) -> Usage:
    def sizes(d: Mapping[str, Any]) -> tuple[int, int, int]:
        return (
            _int(d, "input_tokens"),
            _int(d, "cache_read_input_tokens"),
            _int(d, "cache_creation_input_tokens"),
        )

    uncached, read, write = sizes(data)
    output = _int(data, "output_tokens")
    prompt: int | None = uncached + read + write
    given = data.get("iterations")
    iterations = [] if given is None else plain_items(given)
    if iterations is None:
        raise ConfigError("usage iterations must be a list", key="usage", reason="iterations")
    compactions = 0
    first_message_seen = False
    for item in iterations:
        item = _plain(item)
        if not isinstance(item, Mapping):
            raise ConfigError("usage iterations hold objects", key="usage", reason="iterations")
        kind = plain_str(item.get("type"))
        if kind == "compaction":
            # A compaction's own tokens are outside the top-level usage, and its input is
            # the summarizing call's, not the size of the context it closed.
            compactions += 1
            u, r, w = sizes(item)
            uncached, read, write = uncached + u, read + r, write + w
            output += _int(item, "output_tokens")
            if not first_message_seen:
                prompt = None
        elif kind == "message" and not first_message_seen:
            first_message_seen = True
            if prompt is not None:
                # The first sampling read the request as sent; later ones (a server-side
                # tool loop) read it plus what the loop added.
                prompt = sum(sizes(item))
    return Usage("anthropic", prompt, uncached, read, write, output, compactions)


def read_usage(usage: Any) -> Usage:
    """A ``Usage`` from an SDK usage object, a response carrying one, or their JSON.

    Args:
        usage: OpenAI ``CompletionUsage`` / ``ResponseUsage``, Anthropic ``Usage`` /
            ``BetaUsage``, google-genai ``GenerateContentResponseUsageMetadata``, a Bedrock
            Converse ``usage`` dict, any of their JSON (snake or camel case for Gemini), or a
            whole response (object or dict) with ``usage`` / ``usage_metadata`` /
            ``usageMetadata``.

    Raises:
        ConfigError: The value is none of these, or a count is not a non-negative integer.

    Example:
        >>> u = read_usage({"input_tokens": 50, "cache_read_input_tokens": 1000,
        ...                 "cache_creation_input_tokens": 20, "output_tokens": 7})
        >>> u.shape, u.prompt_tokens, u.cached_tokens
        ('anthropic', 1070, 1000)
    """
    return _read(usage, 0)


def _read(usage: Any, wrapping: int) -> Usage:
    if wrapping > _MAX_WRAPPING:
        raise _unreadable(f"no usage counts within {_MAX_WRAPPING} levels of wrapping")
    data = _plain(usage)
    if not isinstance(data, Mapping):
        for attr in ("usage", "usage_metadata"):
            inner = _attr(usage, attr)
            if inner is not None:
                return _read(inner, wrapping + 1)
        raise ConfigError(
            f"usage must be an SDK usage object or a mapping, got {type(usage).__name__}",
            key="usage",
            reason="not a usage object",
        )
    if _has(data, "prompt_tokens"):
        prompt = _int(data, "prompt_tokens")
        cached, write = _openai_details(data.get("prompt_tokens_details"))
        return Usage(
            "openai_chat",
            prompt,
            max(0, prompt - cached - write),
            cached,
            write,
            _int(data, "completion_tokens"),
        )
    if _has(data, "promptTokenCount", "prompt_token_count"):
        prompt = _int(data, "promptTokenCount", "prompt_token_count")
        cached = _int(data, "cachedContentTokenCount", "cached_content_token_count")
        output = _int(data, "candidatesTokenCount", "candidates_token_count") + _int(
            data, "thoughtsTokenCount", "thoughts_token_count"
        )
        return Usage("gemini", prompt, max(0, prompt - cached), cached, 0, output)
    if _has(data, "inputTokens"):
        uncached = _int(data, "inputTokens")
        read = _int(data, "cacheReadInputTokens")
        write = _int(data, "cacheWriteInputTokens")
        return Usage(
            "bedrock", uncached + read + write, uncached, read, write, _int(data, "outputTokens")
        )
    if _has(data, "input_tokens"):
        if _has(data, "input_tokens_details", "total_tokens") and not _has(
            data, "cache_read_input_tokens", "cache_creation_input_tokens", "iterations"
        ):
            prompt = _int(data, "input_tokens")
            cached, write = _openai_details(data.get("input_tokens_details"))
            return Usage(
                "openai_responses",
                prompt,
                max(0, prompt - cached - write),
                cached,
                write,
                _int(data, "output_tokens"),
            )
        return _anthropic(data)
    for key in ("usage", "usage_metadata", "usageMetadata"):
        if data.get(key) is not None:
            return _read(data[key], wrapping + 1)
    keys = sorted(shown(k, 40) for k in data)
    raise ConfigError(
        f"no usage counts found (keys {', '.join(keys[:20])})",
        key="usage",
        reason="not a usage object",
    )
