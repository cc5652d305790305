"""Prompt-cache markers placed where cache-stable assembly knows the request is stable.

Anthropic and Bedrock Converse cache only up to blocks the request marks (``cache_control``,
``cachePoint``), at most four per request. A cache-stable assembly (``ringbound.state``) knows
where the request stops changing: the caller's system (before the ledger and summary notes,
which change with the history), the end of the previous request on a turn that reuses its cut,
and the newest message, which the next turn's request begins with. ``place`` adds a marker at
each of these, newest first, while the caller's own markers plus ringbound's stay within the
limit; the caller's are kept where they are. Markers cost nothing in counting: the adapters
never count them, and they are placed after the plan.

Each provider's rules (docs/providers/*.md quote them): no marker goes where the prefix is
below the model's minimum cacheable length (``min_cache_tokens``); on Anthropic a 5-minute
marker never goes before a caller's 1-hour one, and a body's top-level ``cache_control``
(automatic caching) counts among the four and marks the last block itself.

OpenAI caches prefixes on its own; ``prompt_cache_key`` (a request-body field, not a message
field) routes one conversation to one cache: ``cache_key`` derives it from the conversation.
From GPT-5.6 on, with ``prompt_cache_mode``, ringbound also writes ``prompt_cache_breakpoint``
on content blocks where Anthropic would get markers, and ``prompt_cache_options``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any

from ._core import LEDGER_MARKER
from .cache_lifetime import OPENAI_TTL
from .errors import InvalidBodyError
from .providers.base import as_mapping, guarded, is_summary_note, split_system_note
from .report import AssemblyReport
from .state import fingerprint

__all__ = [
    "MODES",
    "CacheMarker",
    "apply",
    "body_fields",
    "cache_key",
    "check_body",
    "options_for",
    "place",
    "session_key",
    "unmarked",
]

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
#: The block field OpenAI's explicit caching reads, and the value it takes.
BREAKPOINT = "prompt_cache_breakpoint"
EXPLICIT = {"mode": "explicit"}
#: "With implicit, OpenAI creates one implicit breakpoint and writes up to the latest three
#: explicit breakpoints in the request": one of the four is OpenAI's own.
IMPLICIT_ROOM = 3
#: The shortest prefix cached when the config and the models table name none (Anthropic's
#: and OpenAI's documented floor for most models).
DEFAULT_MIN_TOKENS = 1024
#: Content blocks that take a breakpoint: Chat's parts, and Responses' input parts (not
#: the assistant's ``output_text``).
_OPENAI_MARKABLE = ("text", "image_url", "input_audio", "file", "input_text", "input_image",
                    "input_file")  # fmt: skip
#: The request body's top-level fields of an ``assemble_body`` call (``body_fields``).
_body: ContextVar[Mapping[str, Any] | None] = ContextVar("ringbound_body", default=None)
#: Tokens of the prefix a marker would end, by its ``why`` and what the prefix holds:
#: ``("messages", messages up to the marked one)`` or ``("system", system up to the mark)``.
Sizer = Callable[[str, tuple[str, Any]], int]


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


@contextlib.contextmanager
def body_fields(body: Mapping[str, Any]) -> Iterator[None]:
    """The request body's top-level fields for the assembly run inside (``assemble_body``):
    a top-level ``cache_control`` counts among Anthropic's four markers, and an OpenAI body's
    ``prompt_cache_options`` is kept."""
    token = _body.set(body)
    try:
        yield
    finally:
        _body.reset(token)


def check_body(provider: str, body: Mapping[str, Any]) -> None:
    """Refuses an OpenAI body that sets both cache lifetimes: "``prompt_cache_options.ttl``
    supersedes ``prompt_cache_retention``... Setting both on the same request is rejected by
    OpenAI" (the API refuses it; ringbound says so before it is sent).

    Raises:
        InvalidBodyError: ``prompt_cache_options.ttl`` together with ``prompt_cache_retention``.
    """
    if provider not in KEYED:
        return
    options = body.get("prompt_cache_options")
    ttl = options.get("ttl") if isinstance(options, Mapping) else None
    if ttl is not None and body.get("prompt_cache_retention") is not None:
        reason = (
            "prompt_cache_options.ttl cannot be combined with prompt_cache_retention: "
            "set prompt_cache_options.ttl on GPT-5.6 and later, prompt_cache_retention on "
            "earlier models"
        )
        raise InvalidBodyError(reason, reason=reason)


def options_for(config: Any, body: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``prompt_cache_options`` to send, or None to send none (or keep the body's)."""
    if config.prompt_cache_mode is None or (body is not None and "prompt_cache_options" in body):
        return None
    if body is not None and body.get("prompt_cache_retention") is not None:
        return {"mode": config.prompt_cache_mode}  # the ttl with retention is refused
    return {"mode": config.prompt_cache_mode, "ttl": OPENAI_TTL}


def apply(
    provider: str,
    config: Any,
    canonical: Sequence[Any],
    messages: list[Any],
    system: Any,
    tools: Sequence[Any] | None,
    report: AssemblyReport,
    *,
    stable: int | None,
    size: Sizer | None = None,
) -> tuple[list[Any], Any, str | None, dict[str, Any] | None, AssemblyReport]:
    """A cache-stable result's messages, system, ``cache_key``, ``prompt_cache_options`` and
    report under ``config`` (``cache_markers``, ``prompt_cache_mode``, ``min_cache_tokens``);
    ``stable`` and ``size`` as in ``place``."""
    if config.cache_markers != "auto":
        return messages, system, None, None, report
    body = _body.get()
    key = options = None
    if provider in KEYED:
        key = cache_key(canonical)
        if config.prompt_cache_mode is None:
            return messages, system, key, None, report
        options = options_for(config, body)
    elif provider not in MARKED:
        return messages, system, None, None, report
    given = body.get("prompt_cache_options") if body is not None else None
    mode = given.get("mode") if isinstance(given, Mapping) else None
    least = config.min_cache_tokens
    # The caller's objects are read here, maybe for the first time (rendering copies the kept
    # ones unread): what they raise while read is a malformed message.
    messages, system, placed = guarded(
        lambda m: place(
            provider,
            m,
            system,
            tools,
            stable,
            min_tokens=DEFAULT_MIN_TOKENS if least is None else least,
            size=size,
            top_level=body.get("cache_control") if body is not None else None,
            mode=mode or config.prompt_cache_mode,
        ),
        messages,
    )
    return messages, system, key, options, replace(report, cache_markers=placed)


def place(
    provider: str,
    messages: list[Any],
    system: Any,
    tools: Sequence[Any] | None,
    stable: int | None,
    *,
    min_tokens: int = 0,
    size: Sizer | None = None,
    top_level: Any = None,
    mode: str | None = None,
) -> tuple[list[Any], Any, list[CacheMarker]]:
    """The request with ringbound's markers: messages that carry one are new copies.

    Args:
        provider: ``anthropic``, ``bedrock_converse``, ``openai_chat`` or
            ``openai_responses`` (``prompt_cache_breakpoint``).
        messages: The rendered messages (not modified).
        system: The rendered top-level system (not modified).
        tools: The tools sent: their markers count against the limit.
        stable: How many leading messages repeat the previous request (a reused cut), or
            None.
        min_tokens: No marker goes where ``size`` says the prefix is shorter.
        size: The tokens of the prefix a marker would end (``Sizer``).
        top_level: Anthropic: the body's top-level ``cache_control`` (automatic caching),
            which marks the last block itself and counts among the four.
        mode: OpenAI: ``prompt_cache_options.mode``; ``implicit`` leaves one of the four to
            OpenAI's own breakpoint.
    """
    openai = provider in KEYED
    bedrock = provider == "bedrock_converse"
    out = list(messages)
    if openai:
        room = (IMPLICIT_ROOM if mode != "explicit" else LIMIT) - _openai_markers(out)
    else:
        room = LIMIT - _caller_markers(bedrock, out, system, tools) - (top_level is not None)
    # Anthropic reads markers in order (tools, system, messages) and refuses a 1-hour one
    # after a 5-minute one: ringbound's (5-minute) go after the caller's last 1-hour one.
    after = -2 if openai or bedrock else _last_long(out, system, top_level)
    placed: list[CacheMarker] = []
    wanted: list[tuple[int, str]] = []
    if out and top_level is None:
        wanted.append((len(out) - 1, "last"))
    if stable is not None and 0 < stable < len(out):
        wanted.append((stable - 1, "stable_cut"))
    if openai and out and _is_leading_system(out[0]):
        wanted.append((0, "prefix"))

    def big_enough(why: str, part: Any) -> bool:
        return min_tokens <= 0 or size is None or size(why, part) >= min_tokens

    for at, why in wanted:
        if room <= 0:
            break
        i = at
        marked = _mark_openai(provider, out[i]) if openai else _mark_message(bedrock, out[i])
        # OpenAI matches a breakpoint "without a content-block lookback limit": when the
        # block is a call or an assistant's output, the newest input block before it serves.
        while openai and marked is None and i > 0:
            i -= 1
            marked = _mark_openai(provider, out[i])
        if i < after or any(m.where == "message" and m.index == i for m in placed):
            continue
        # Moved back, the prefix is no longer the one ``why`` names: it is counted.
        if marked is not None and big_enough(why if i == at else "", ("messages", out[: i + 1])):
            out[i] = marked
            placed.append(CacheMarker("message", i, why))
            room -= 1
    # After a caller's 1-hour system block is fine: the marked block is the caller's last.
    if not openai and room > 0 and system is not None and after < 0:
        at = _system_mark(bedrock, system)
        if at is not None:
            marked_system, index = at
            part = system if isinstance(system, str) else system[: index + 1]
            if big_enough("prefix", ("system", part)):
                system = marked_system
                placed.append(CacheMarker("system", index, "prefix"))
    placed.sort(key=lambda m: (m.where == "message", m.index))
    return out, system, placed


def _last_long(messages: Sequence[Any], system: Any, top_level: Any) -> int:
    """Where the caller's last 1-hour Anthropic marker is: a message index, -1 for the
    system, -2 for none (or only on tools, which come first anyway)."""
    if _is_long(top_level) and messages:
        return len(messages) - 1
    for i in range(len(messages) - 1, -1, -1):
        data = as_mapping(messages[i])
        content = data.get("content") if data is not None else None
        if isinstance(content, list) and any(_is_long(_control(b)) for b in content):
            return i
    if isinstance(system, list) and any(_is_long(_control(b)) for b in system):
        return -1
    return -2


def _control(block: Any) -> Any:
    data = as_mapping(block)
    return data.get("cache_control") if data is not None else None


def _is_long(control: Any) -> bool:
    return isinstance(control, Mapping) and control.get("ttl") == "1h"


def _is_leading_system(message: Any) -> bool:
    """An OpenAI request's first message when it is the caller's instructions (not a note)."""
    if not isinstance(message, Mapping) or message.get("role") not in ("system", "developer"):
        return False
    content = message.get("content")
    return not (isinstance(content, str) and _is_note_block({"text": content}))


def _openai_markers(messages: Sequence[Any]) -> int:
    count = 0
    for m in messages:
        data = as_mapping(m)
        if data is None:
            continue
        for key in ("content", "output"):
            blocks = data.get(key)
            if isinstance(blocks, list):
                count += sum(
                    (b := as_mapping(x)) is not None and b.get(BREAKPOINT) is not None
                    for x in blocks
                )
    return count


def _mark_openai(provider: str, message: Any) -> dict[str, Any] | None:
    """A copy of an OpenAI message whose last input block carries a breakpoint, or None
    when it has none (an assistant's output, a call) or already carries one."""
    if not isinstance(message, Mapping):
        return None
    responses = provider == "openai_responses"
    if responses and message.get("type") == "function_call_output":
        # Its output may be a string or a list of input blocks: the string as one block.
        output = message.get("output")
        if not isinstance(output, str) or not output:
            return None
        block = {"type": "input_text", "text": output, BREAKPOINT: dict(EXPLICIT)}
        return {**message, "output": [block]}
    if responses and message.get("type", "message") != "message":
        return None
    if responses and message.get("role") == "assistant":
        return None  # its blocks are output_text, which takes no breakpoint
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        kind = "input_text" if responses else "text"
        return {**message, "content": [{"type": kind, "text": content, BREAKPOINT: EXPLICIT}]}
    if not isinstance(content, list) or not content:
        return None
    block = content[-1]
    if not isinstance(block, Mapping) or block.get("type") not in _OPENAI_MARKABLE:
        return None
    if block.get(BREAKPOINT) is not None:
        return None
    return {**message, "content": [*content[:-1], {**block, BREAKPOINT: dict(EXPLICIT)}]}


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
        # The notes joined in change with the history: they become blocks of their own after
        # the marked one, as a list system carries them. The request costs the same (the notes
        # are read apart from the caller's text either way), and its cached prefix no longer
        # ends in a note that the next turn rewrites.
        base, note, summary = split_system_note(system)
        if not base:
            return None
        notes = [{"type": "text", "text": t} for t in (note, summary) if t]
        return [{"type": "text", "text": base, "cache_control": EPHEMERAL}, *notes], 0
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
    shorthand; OpenAI's ``prompt_cache_breakpoint`` dropped too). A marker moving from one
    turn to the next changes no cached prefix."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list):
        return value
    return [_unmarked_item(v) for v in value if not (isinstance(v, Mapping) and "cachePoint" in v)]


def _unmarked_item(item: Any) -> Any:
    if not isinstance(item, Mapping):
        return item
    out = {k: v for k, v in item.items() if k not in ("cache_control", BREAKPOINT)}
    if out.get("type") == "input_text" and "role" not in out:
        out["type"] = "text"  # a Responses string is one input_text block, marked or not
    output = out.get("output")
    if out.get("type") == "function_call_output" and isinstance(output, list):
        blocks = [_unmarked_item(b) for b in output]
        if (
            len(blocks) == 1
            and isinstance(blocks[0], Mapping)
            and set(blocks[0]) == {"type", "text"}
        ):
            out["output"] = blocks[0]["text"]  # the string ringbound marked, as it was
    content = out.get("content")
    if "role" in out and (isinstance(content, (str, list))):
        out["content"] = unmarked(content)
    return out
