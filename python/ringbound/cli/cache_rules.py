"""A provider's prompt cache, replayed request by request (``ringbound simulate --provider``).

- ``anthropic`` and ``bedrock_converse``: only marked prefixes are cached. A request reads the
  longest prefix, up to and including one of its marked blocks, that an earlier request wrote
  (identical content: markers are not content, ``ringbound.cache_markers.unmarked``); it writes
  every marked prefix of at least 1,024 tokens (the smallest Claude caches), paying
  ``WRITE_FACTOR`` for the written tokens beyond the read ones. A request without markers (the
  stateless and ``trim_messages`` ways) is marked as a careful caller would: on the system and
  on the last message (``ringbound.cache_markers.place``).
- ``openai``: automatic prefix caching of the prefix shared with the previous request, from
  1,024 tokens on, in steps of 128.
- ``openai_explicit`` (GPT-5.6 and later, ``prompt_cache_mode``): as the marked rules, the
  marks being ``prompt_cache_breakpoint`` blocks ("Exact matching at eligible cache
  breakpoints", writes at 1.25x); in ``implicit`` mode OpenAI's own breakpoint on the latest
  message too.

With a ``lifetime`` (``simulate(think_time=...)``), an entry is gone once that many seconds
have passed since the request that last wrote or read it (Anthropic: "refreshed for no
additional cost each time the cached content is used"); OpenAI's prefix is served only when
the previous request came within it. ``min_tokens``: the smallest prefix cached (the model's
minimum cacheable length).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ..cache_markers import BREAKPOINT, MARKED, place, unmarked

__all__ = ["RULES", "WRITE_FACTOR", "PromptCache", "rules_for"]

#: The caching rules a provider's requests are replayed under.
RULES = {
    "anthropic": "anthropic",
    "bedrock_converse": "bedrock_converse",
    "openai_chat": "openai",
    "openai_responses": "openai",
}
#: Price of a token written to a marked cache, relative to an uncached one.
WRITE_FACTOR = 1.25
#: The smallest prefix a provider caches.
MIN_TOKENS = 1024
#: OpenAI caches in steps of this many tokens beyond the minimum.
STEP = 128

Counter = Callable[[list[Any], Any, Any], int]


def rules_for(provider: str, config: Any = None) -> str | None:
    """The caching rules ``simulate --provider`` replays ``provider`` under (``config``: its
    ``prompt_cache_mode``), or None (the shared prefix, no rules)."""
    rules = RULES.get(provider)
    if rules == "openai" and getattr(config, "prompt_cache_mode", None) is not None:
        return "openai_explicit"
    return rules


def _dump(obj: Any) -> bytes:
    return orjson.dumps(obj, default=lambda o: o.model_dump() if hasattr(o, "model_dump") else o)


class PromptCache:
    """What a provider's cache serves of each request of one replay."""

    def __init__(
        self,
        rules: str,
        provider: str,
        count: Counter,
        *,
        lifetime: float | None = None,
        min_tokens: int = MIN_TOKENS,
        mode: str | None = None,
    ) -> None:
        self.rules, self.provider, self.count = rules, provider, count
        self.lifetime, self.min_tokens, self.mode = lifetime, min_tokens, mode
        #: Each entry's key, and when it was last written or read.
        self.entries: dict[bytes, float] = {}
        self.last: float | None = None

    @property
    def write_factor(self) -> float:
        return WRITE_FACTOR if self.rules in (*MARKED, "openai_explicit") else 1.0

    def serve(
        self, messages: list[Any], tools: Any, system: Any, shared: int, now: float = 0.0
    ) -> tuple[int, int]:
        """``(read, written)`` tokens of the request sent at ``now``; ``shared``: the tokens
        of its prefix equal to the previous request's."""
        last, self.last = self.last, now
        if self.rules == "openai":
            if self._gone(last, now):
                return 0, 0
            least = self.min_tokens
            return (0 if shared < least else shared - (shared - least) % STEP), 0
        if not self._has_markers(messages, tools, system):
            messages, system, _ = place(
                self.provider, list(messages), system, tools, None, mode=self.mode
            )
        rules = self.rules
        items = [unmarked(list(tools or ())), unmarked(system), *unmarked(list(messages))]
        marked = [0] if any(_marks(rules, t) for t in tools or ()) else []
        if isinstance(system, list) and any(_marks(rules, b) for b in system):
            marked.append(1)
        marked += [2 + i for i, m in enumerate(messages) if _message_marked(rules, m)]
        if self.rules == "openai_explicit" and self.mode != "explicit" and messages:
            # "OpenAI places a cache breakpoint on the latest message" in implicit mode.
            marked = sorted({*marked, 1 + len(messages)})
        # OpenAI matches any breakpoint an earlier request wrote ("up to the latest 80
        # breakpoints in the conversation, without a content-block lookback limit");
        # Anthropic and Bedrock only at the request's own markers.
        anywhere = self.rules == "openai_explicit"
        h = hashlib.blake2b(digest_size=16)
        keys: dict[int, bytes] = {}
        for k, item in enumerate(items if anywhere else items[: max(marked, default=-1) + 1]):
            h.update(_dump(item))
            if anywhere or k in marked:
                keys[k] = h.copy().digest()
        read = written = 0
        if anywhere:
            hits = [k for k in keys if k not in marked and self._live(keys[k], now)]
            if hits:
                k = max(hits)
                self.entries[keys[k]] = now
                read = self.count(
                    list(messages[: max(0, k - 1)]), tools, system if k >= 1 else None
                )
        for k in marked:
            tokens = self.count(list(messages[: max(0, k - 1)]), tools, system if k >= 1 else None)
            if keys[k] in self.entries and not self._gone(self.entries[keys[k]], now):
                read = max(read, tokens)
                self.entries[keys[k]] = now
            elif tokens >= self.min_tokens:
                self.entries[keys[k]] = now
                written = max(written, tokens)
        return read, max(0, written - read)

    def _live(self, key: bytes, now: float) -> bool:
        return key in self.entries and not self._gone(self.entries[key], now)

    def _gone(self, used: float | None, now: float) -> bool:
        return self.lifetime is not None and used is not None and now - used >= self.lifetime

    def _has_markers(self, messages: list[Any], tools: Any, system: Any) -> bool:
        rules = self.rules
        return (
            any(_message_marked(rules, m) for m in messages)
            or (isinstance(system, list) and any(_marks(rules, b) for b in system))
            or any(_marks(rules, t) for t in tools or ())
        )


def _marks(rules: str, block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    if rules == "bedrock_converse":
        return "cachePoint" in block
    key = BREAKPOINT if rules == "openai_explicit" else "cache_control"
    return block.get(key) is not None


def _message_marked(rules: str, message: Any) -> bool:
    if not isinstance(message, Mapping):
        return False
    blocks = [*_listed(message.get("content")), *_listed(message.get("output"))]
    return any(_marks(rules, b) for b in blocks)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
