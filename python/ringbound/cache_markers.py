"""Prompt-cache markers placed where cache-stable assembly knows the request is stable.

Anthropic and Bedrock Converse cache only up to blocks the request marks (``cache_control``,
``cachePoint``), at most four per request. A cache-stable assembly (``ringbound.state``) knows
where the request stops changing: the caller's system (before the ledger and summary notes,
which change with the history), the end of the previous request on a turn that reuses its cut,
and the newest message, which the next turn's request begins with. ``place`` adds a marker at
each of these, newest first, while the caller's own markers plus ringbound's stay within the
limit; the caller's are kept where they are. Markers cost nothing in counting: the adapters
never count them, and they are placed after the plan.

OpenAI caches prefixes on its own; ``prompt_cache_key`` (a request-body field, not a message
field) routes one conversation to one cache: ``cache_key`` derives it from the conversation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ._core import LEDGER_MARKER
from .providers.base import as_mapping, guarded, is_summary_note
from .report import AssemblyReport
from .state import fingerprint

__all__ = ["MODES", "CacheMarker", "apply", "cache_key", "place", "session_key", "unmarked"]

#: ``cache_markers`` values: ringbound places markers (``auto``), only the caller's are sent
#: (``caller_only``), or no cache feature at all: no markers of ringbound's and no
#: ``cache_key`` (``off``; the caller's markers are the caller's and stay).
MODES = ("auto", "caller_only", "off")
#: Anthropic's and Bedrock's limit on markers in one request.
LIMIT = 4
EPHEMERAL = {"type": "ephemeral"}
CACHE_POINT = {"cachePoint": {"type": "default"}}
#: Providers whose caching needs markers in the request.
MARKED = ("anthropic", "bedrock_converse")
#: Providers that take a ``prompt_cache_key``.
KEYED = ("openai_chat", "openai_responses")
_UNMARKABLE = ("thinking", "redacted_thinking")


@dataclass(frozen=True)
class CacheMarker:
    """A cache marker ringbound placed in the request.

    Attributes:
        where: ``system`` (the caller's system, before the notes) or ``message``.
        index: The position in ``res.messages`` (``message``), or in the system's block
            list (``system``).
        why: ``prefix`` (tools and system), ``stable_cut`` (the end of the previous
            request, which this one repeats), or ``last`` (the newest message, which the
            next turn's request repeats).
    """

    where: str
    index: int
    why: str


def cache_key(canonical: Sequence[Any]) -> str:
    """The ``prompt_cache_key`` of a conversation: a hash of its opening messages (the system
    and the first user message), which every turn of it repeats."""
    return f"ringbound-{fingerprint(canonical[:2])[:24]}"


def session_key(session_id: str) -> str:
    """The ``prompt_cache_key`` of a conversation the caller names (``session_id``): the same
    on every replica and every turn, whatever the messages."""
    digest = hashlib.blake2b(session_id.encode("utf-8", "surrogatepass"), digest_size=12)
    return f"ringbound-{digest.hexdigest()}"


def apply(
    provider: str,
    mode: str,
    canonical: Sequence[Any],
    messages: list[Any],
    system: Any,
    tools: Sequence[Any] | None,
    report: AssemblyReport,
    *,
    stable: int | None,
) -> tuple[list[Any], Any, str | None, AssemblyReport]:
    """A cache-stable result's messages, system, ``cache_key`` and report under ``mode``
    (the ``cache_markers`` key); ``stable`` as in ``place``."""
    if mode != "auto":
        return messages, system, None, report
    if provider in KEYED:
        return messages, system, cache_key(canonical), report
    if provider not in MARKED:
        return messages, system, None, report
    # The caller's objects are read here, maybe for the first time (rendering copies the kept
    # ones unread): what they raise while read is a malformed message.
    messages, system, placed = guarded(
        lambda m: place(provider, m, system, tools, stable), messages
    )
    return messages, system, None, replace(report, cache_markers=placed)


def place(
    provider: str,
    messages: list[Any],
    system: Any,
    tools: Sequence[Any] | None,
    stable: int | None,
) -> tuple[list[Any], Any, list[CacheMarker]]:
    """The request with ringbound's markers: messages that carry one are new copies.

    Args:
        provider: ``anthropic`` or ``bedrock_converse``.
        messages: The rendered messages (not modified).
        system: The rendered top-level system (not modified).
        tools: The tools sent: their markers count against the limit.
        stable: How many leading messages repeat the previous request (a reused cut), or
            None.
    """
    bedrock = provider == "bedrock_converse"
    room = LIMIT - _caller_markers(bedrock, messages, system, tools)
    out = list(messages)
    placed: list[CacheMarker] = []
    wanted: list[tuple[int, str]] = []
    if out:
        wanted.append((len(out) - 1, "last"))
    if stable is not None and 0 < stable < len(out):
        wanted.append((stable - 1, "stable_cut"))
    for i, why in wanted:
        if room <= 0:
            break
        marked = _mark_message(bedrock, out[i])
        if marked is not None:
            out[i] = marked
            placed.append(CacheMarker("message", i, why))
            room -= 1
    if room > 0 and system is not None:
        at = _system_mark(bedrock, system)
        if at is not None:
            system, index = at
            placed.append(CacheMarker("system", index, "prefix"))
    placed.sort(key=lambda m: (m.where == "message", m.index))
    return out, system, placed


def _caller_markers(
    bedrock: bool, messages: Sequence[Any], system: Any, tools: Sequence[Any] | None
) -> int:
    blocks: list[Any] = list(tools or ())
    if isinstance(system, list):
        blocks.extend(system)
    for m in messages:
        # SDK objects count too (read as the SDK sends them); ringbound marks only dicts.
        data = as_mapping(m)
        content = data.get("content") if data is not None else None
        if isinstance(content, list):
            blocks.extend(content)
    return sum(_is_marker(bedrock, b) for b in blocks)


def _is_marker(bedrock: bool, obj: Any) -> bool:
    block = as_mapping(obj)
    if block is None:
        return False
    if bedrock:
        return "cachePoint" in block
    return block.get("cache_control") is not None


def _mark_message(bedrock: bool, message: Any) -> dict[str, Any] | None:
    """A copy of ``message`` ending in a marker, or None when it cannot carry one or
    already does (the caller's)."""
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        if bedrock or not content:
            return None
        return {
            **message,
            "content": [{"type": "text", "text": content, "cache_control": EPHEMERAL}],
        }
    if not isinstance(content, list) or not content:
        return None
    if bedrock:
        if _is_marker(True, content[-1]):
            return None
        return {**message, "content": [*content, dict(CACHE_POINT)]}
    # A marker goes on the last block that takes one: thinking blocks do not.
    for k in range(len(content) - 1, -1, -1):
        block = content[k]
        if not isinstance(block, Mapping):
            return None
        if block.get("type") in _UNMARKABLE:
            continue
        if block.get("cache_control") is not None:
            return None
        blocks = list(content)
        blocks[k] = {**block, "cache_control": EPHEMERAL}
        return {**message, "content": blocks}
    return None


def _system_mark(bedrock: bool, system: Any) -> tuple[Any, int] | None:
    """The system with a marker after the caller's part (the notes that follow change with
    the history), and the marked block's index; None when there is no place for one."""
    if isinstance(system, str):
        if bedrock or not system:
            return None
        # A string with notes joined in is marked whole: its prefix is the whole text.
        return [{"type": "text", "text": system, "cache_control": EPHEMERAL}], 0
    if not isinstance(system, list) or not system:
        return None
    base = len(system)
    while base > 0 and _is_note_block(system[base - 1]):
        base -= 1
    if base == 0:
        return None
    if bedrock:
        if _is_marker(True, system[base - 1]):
            return None
        return [*system[:base], dict(CACHE_POINT), *system[base:]], base
    block = system[base - 1]
    if not isinstance(block, Mapping) or block.get("cache_control") is not None:
        return None
    blocks = list(system)
    blocks[base - 1] = {**block, "cache_control": EPHEMERAL}
    return blocks, base - 1


def _is_note_block(block: Any) -> bool:
    text = block.get("text") if isinstance(block, Mapping) else None
    return isinstance(text, str) and (text.startswith(LEDGER_MARKER) or is_summary_note(text))


def unmarked(value: Any) -> Any:
    """Messages (or a system) as a provider's cache compares them: without ``cache_control``
    keys or ``cachePoint`` blocks, and string content as its one text block (Anthropic's
    shorthand). A marker moving from one turn to the next changes no cached prefix."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list):
        return value
    return [_unmarked_item(v) for v in value if not (isinstance(v, Mapping) and "cachePoint" in v)]


def _unmarked_item(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    out = {k: v for k, v in item.items() if k != "cache_control"}
    content = out.get("content")
    if "role" in out and (isinstance(content, (str, list))):
        out["content"] = unmarked(content)
    return out
