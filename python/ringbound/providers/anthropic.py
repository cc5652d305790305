"""Anthropic Messages API: the core reads the request, checks Anthropic's own pairing rules
(quoting its 400 wording) and maps it onto the canonical view, each part at its real cost
(``rust/src/providers/anthropic``); this module renders the core's plan back into messages that
alternate, with the ledger note in the top-level ``system``.

The API combines consecutive same-role messages into one turn, so a *turn* (a run of same-role
messages) is the native item here: the core maps it to one canonical assistant message, or one
canonical tool message per ``tool_result`` plus one user message for the rest, all in one group.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from .. import _core
from .._core import ANTHROPIC_OMITTED_TURNS_TEXT, LEDGER_MARKER, SYNTHESIZED_RESULT_TEXT, Insertion
from ..errors import InvalidMessageError, PairingIssue
from ..payload import dump_messages
from .base import (
    Canonical,
    PlanItem,
    Rendered,
    UnreadableObject,
    as_mapping,
    call_message,
    is_summary_note,
    join_system_note,
    kept_native,
    read_once,
    split_system_note,
)

__all__ = ["ADAPTER", "AnthropicAdapter"]

# Anthropic's 400 wording for too many breakpoints (sources in docs/providers/anthropic.md).
_CACHE_MARKERS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."

#: Anthropic's limit on ``cache_control`` breakpoints in one request.
MAX_CACHE_MARKERS = 4


@dataclass(frozen=True)
class _Msg:
    """One native message: its role and content blocks, read as plain dicts."""

    role: str
    blocks: list[dict[str, Any]]


def _invalid(i: int | None, reason: str) -> InvalidMessageError:
    prefix = f"messages[{i}]: " if i is not None else ""
    return InvalidMessageError(prefix + reason, index=i, reason=reason)


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _plain(obj: Any) -> dict[str, Any] | None:
    """A dict view of a message or block (SDK pydantic objects through ``model_dump``)."""
    try:
        data = as_mapping(obj)
    except UnreadableObject:
        return None
    if data is None:
        return None
    return data if isinstance(data, dict) else dict(data)


def _need_str(i: int, d: Mapping[str, Any], key: str, where: str, *, empty: bool = True) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise _invalid(i, f"{where}.{key} must be a string, got {_type_name(v)}")
    if not empty and not v:
        raise _invalid(i, f"{where}.{key} is empty")
    return v


def _check_source(i: int, block: Mapping[str, Any], where: str, kinds: tuple[str, ...]) -> None:
    source = block.get("source")
    if not isinstance(source, Mapping):
        raise _invalid(i, f"{where}.source must be an object, got {_type_name(source)}")
    kind = source.get("type")
    if kind not in kinds:
        raise _invalid(i, f"{where}.source.type must be one of {', '.join(kinds)}, got {kind!r}")
    if kind == "base64":
        _need_str(i, source, "media_type", f"{where}.source")
        _need_str(i, source, "data", f"{where}.source")
    elif kind == "url":
        _need_str(i, source, "url", f"{where}.source")
    elif kind == "file":
        _need_str(i, source, "file_id", f"{where}.source")
    elif kind == "text":
        _need_str(i, source, "data", f"{where}.source")
    elif kind == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return
        if not isinstance(inner, list):
            raise _invalid(i, f"{where}.source.content must be a string or a list of blocks")
        for k, sub in enumerate(inner):
            _check_nested(i, sub, f"{where}.source.content[{k}]")


def _check_nested(i: int, obj: Any, where: str) -> dict[str, Any]:
    """A block inside a tool_result or a document: text, image, document, search_result."""
    block = _plain(obj)
    if block is None:
        raise _invalid(i, f"{where} must be an object, got {_type_name(obj)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _invalid(i, f"{where} has no string `type`")
    if kind == "text":
        _need_str(i, block, "text", where)
    elif kind == "image":
        _check_source(i, block, where, ("base64", "url", "file"))
    elif kind == "document":
        _check_source(i, block, where, ("base64", "text", "content", "url", "file"))
    return block


def _check_block(i: int, b: int, role: str, obj: Any) -> dict[str, Any]:
    where = f"content[{b}]"
    block = _plain(obj)
    if block is None:
        raise _invalid(i, f"{where} must be an object, got {_type_name(obj)}")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _invalid(i, f"{where} has no string `type`")
    if kind in ("tool_use", "thinking", "redacted_thinking") and role != "assistant":
        raise _invalid(i, f"{where} is a `{kind}` block, which only an assistant message carries")
    if kind in ("tool_result", "image", "document") and role != "user":
        raise _invalid(i, f"{where} is a `{kind}` block, which only a user message carries")
    if kind == "text":
        _need_str(i, block, "text", where)
    elif kind == "tool_use":
        _need_str(i, block, "id", where, empty=False)
        _need_str(i, block, "name", where)
        if not isinstance(block.get("input"), Mapping):
            raise _invalid(
                i, f"{where}.input must be an object, got {_type_name(block.get('input'))}"
            )
    elif kind == "tool_result":
        _need_str(i, block, "tool_use_id", where, empty=False)
        content = block.get("content")
        if isinstance(content, list):
            for k, sub in enumerate(content):
                _check_nested(i, sub, f"{where}.content[{k}]")
        elif content is not None and not isinstance(content, str):
            raise _invalid(
                i,
                f"{where}.content must be a string or a list of blocks, got {_type_name(content)}",
            )
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise _invalid(i, f"{where}.is_error must be a boolean, got {_type_name(is_error)}")
    elif kind == "thinking":
        _need_str(i, block, "thinking", where)
    elif kind == "redacted_thinking":
        _need_str(i, block, "data", where)
    elif kind in ("image", "document"):
        _check_nested(i, block, where)
    return block


def _read_message(i: int, obj: Any) -> _Msg:
    msg = _plain(obj)
    if msg is None:
        raise _invalid(i, f"a message must be an object, got {_type_name(obj)}")
    role = msg.get("role")
    if role == "system":
        raise _invalid(
            i,
            "role 'system' is not a message role in Anthropic's API: pass the system prompt "
            "as the top-level `system` parameter",
        )
    if role not in ("user", "assistant"):
        got = "missing `role`" if role is None else f"got {role!r}"
        raise _invalid(i, f"`role` must be 'user' or 'assistant' ({got})")
    if "content" not in msg:
        raise _invalid(i, "missing `content`")
    content = msg["content"]
    if isinstance(content, str):
        return _Msg(role, [{"type": "text", "text": content}])
    if not isinstance(content, (list, tuple)):
        raise _invalid(
            i, f"`content` must be a string or a list of blocks, got {_type_name(content)}"
        )
    return _Msg(role, [_check_block(i, b, role, blk) for b, blk in enumerate(content)])


def _read(messages: Any) -> list[_Msg]:
    return read_once("anthropic", messages, _read_uncached)


def _read_uncached(messages: Any) -> list[_Msg]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise _invalid(
            None, f"messages must be a list of message objects, got {type(messages).__name__}"
        )
    return [_read_message(i, m) for i, m in enumerate(messages)]


def _turn_of(roles: Sequence[str | None]) -> list[int]:
    """The turn of each message (``_turns``' index), without making the turns."""
    out: list[int] = []
    t, role = -1, object()
    for r in roles:
        if r != role:
            t, role = t + 1, r
        out.append(t)
    return out


def _role(message: Any) -> Any:
    """A message's role, read without reading its blocks (the core has checked them)."""
    return message.get("role") if type(message) is dict else (_plain(message) or {}).get("role")


# --- system -----------------------------------------------------------------------------------


def _is_note(text: Any) -> bool:
    return isinstance(text, str) and text.startswith(LEDGER_MARKER)


def _system_blocks(system: Any) -> list[dict[str, Any]] | None:
    """The system as text blocks (None for a string or no system); InvalidMessageError if it
    is neither a string nor a list of text blocks."""
    if system is None or isinstance(system, str):
        return None
    if isinstance(system, (bytes, Mapping)) or not isinstance(system, Sequence):
        raise _invalid(
            None, f"system must be a string or a list of text blocks, got {_type_name(system)}"
        )
    out = []
    for k, obj in enumerate(system):
        block = _plain(obj)
        if block is None or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise _invalid(None, f"system[{k}] must be a text block {{type: text, text: str}}")
        out.append(block)
    return out


def _is_any_note(text: Any) -> bool:
    return _is_note(text) or is_summary_note(text)


def _system_parts(system: Any) -> tuple[list[str], str | None, str | None]:
    """The caller's system texts, and the ledger note and the summary note an earlier assembly
    left in it."""
    blocks = _system_blocks(system)
    if blocks is None:
        if not system:
            return [], None, None
        base, note, summary = split_system_note(system)
        return ([base] if base else []), note, summary
    texts = [b["text"] for b in blocks if not _is_any_note(b["text"])]
    notes = [b["text"] for b in blocks if _is_note(b["text"])]
    summaries = [b["text"] for b in blocks if is_summary_note(b["text"])]
    return texts, (notes[-1] if notes else None), (summaries[-1] if summaries else None)


#: ``json.dumps`` with any option builds a new encoder per call; one made once writes the same.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _compact(value: Any) -> str:
    try:
        return _COMPACT.encode(value)
    except Exception as e:  # not JSON, or the caller's own object raised while read
        reason = f"a value is not JSON ({type(e).__name__}: {e})"
        raise InvalidMessageError(reason, index=None, reason=reason) from None


def _without_cache_control(block: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _blank(block: Any) -> bool:
    """Whether a block is text of only whitespace, which Anthropic refuses ("text content
    blocks must contain non-whitespace text"): stripped from the request, never counted."""
    data = _plain(block) or {}
    text = data.get("text")
    return data.get("type") == "text" and isinstance(text, str) and not text.strip()


def _without_blank_text(message: Any) -> Any:
    """The message without its whitespace-only text blocks: a new message holding the
    caller's other block objects, or the message itself when it has none, or nothing else (a
    message of blank text alone has nothing to keep and is left to the caller)."""
    blocks = _blocks_of(message)
    kept = [b for b in blocks if not _blank(b)]
    if len(kept) == len(blocks) or not kept:
        return message
    msg = dict(_plain(message) or {})
    msg["content"] = kept
    return msg


# --- rendering ----------------------------------------------------------------------------


def _blocks_of(message: Any) -> list[Any]:
    """A message's content as a list of blocks (the caller's block objects when it has them)."""
    msg = _plain(message) or {}
    content = msg.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or ())


def _synthesized_block(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id,
        "is_error": True,
        "content": SYNTHESIZED_RESULT_TEXT,
    }


def _with_results(message: Any, call_ids: Sequence[str]) -> dict[str, Any]:
    """A new user message: the caller's, with synthesized results after its leading results
    (tool_result blocks must open the message)."""
    blocks = _blocks_of(message)
    lead = 0
    while lead < len(blocks) and (_plain(blocks[lead]) or {}).get("type") == "tool_result":
        lead += 1
    added = [_synthesized_block(c) for c in call_ids]
    msg = dict(_plain(message) or {})
    msg["content"] = blocks[:lead] + added + blocks[lead:]
    return msg


def _rewrites(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical
) -> dict[int, dict[str, Any]]:
    """New messages for the plan's rewrites, by native index. A canonical message stands for a
    whole turn, so a rewrite changes, in each message of its turn, only the ``tool_result``
    block answering its call (``truncated``, ``deduped``) or the images (``media``)."""
    out: dict[int, dict[str, Any]] = {}
    for item in items:
        if type(item) is not Insertion.Rewrite:
            continue
        k, kind, text = item.index, item.kind, item.text
        key = canonical.messages[k].get("tool_call_id")
        start, end = canonical.spans[k]
        for i in range(max(start, 0), end):
            current = out.get(i, messages[i])
            blocks = _blocks_of(current)
            if kind == "media":
                new = [_without_media(b, text) for b in blocks]
            else:
                new = [_result_as_text(b, text) if _answers(b, key) else b for b in blocks]
            if any(a is not b for a, b in zip(new, blocks, strict=True)):
                msg = dict(_plain(current) or {})
                msg["content"] = new
                out[i] = msg
    return out


def _answers(block: Any, call_id: Any) -> bool:
    data = _plain(block) or {}
    return data.get("type") == "tool_result" and data.get("tool_use_id") == call_id


def _result_as_text(block: Any, text: str) -> dict[str, Any]:
    """A tool_result whose content is ``text`` (its images kept, as they are counted apart)."""
    out = dict(_plain(block) or {})
    content = out.get("content")
    images = [
        b for b in (content if isinstance(content, list) else ()) if _block_type(b) == "image"
    ]
    out["content"] = [{"type": "text", "text": text}, *images] if images else text
    return out


def _block_type(block: Any) -> Any:
    return (_plain(block) or {}).get("type")


def _without_media(block: Any, text: str) -> Any:
    """The block with each image (and each document priced as page images) a text block
    ``text``; the block itself when it holds none."""
    data = _plain(block)
    if data is None:
        return block
    kind = data.get("type")
    source = data.get("source")
    source_kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "image" or (kind == "document" and source_kind in ("base64", "url", "file")):
        out: dict[str, Any] = {"type": "text", "text": text}
        if data.get("cache_control") is not None:
            out["cache_control"] = data["cache_control"]
        return out
    if kind == "tool_result" and isinstance(data.get("content"), list):
        inner = data["content"]
        new = [_without_media(b, text) for b in inner]
        if any(a is not b for a, b in zip(new, inner, strict=True)):
            return {**data, "content": new}
    if kind == "document" and source_kind == "content" and isinstance(source, Mapping):
        inner = source.get("content")
        if isinstance(inner, list):
            new = [_without_media(b, text) for b in inner]
            if any(a is not b for a, b in zip(new, inner, strict=True)):
                return {**data, "source": {**source, "content": new}}
    return block


def _cache_markers(blocks: Sequence[Any]) -> int:
    return sum(1 for b in blocks if (_plain(b) or {}).get("cache_control") is not None)


def _call_turns(
    messages: Sequence[Any], roles: Sequence[str], turn_of: list[int]
) -> dict[str, int]:
    """The turn of each ``tool_use`` id of the assistant messages."""
    return {
        block.get("id"): turn_of[i]
        for i, m in enumerate(messages)
        if roles[i] == "assistant"
        for block in map(_plain, _blocks_of(m))
        if block is not None and block.get("type") == "tool_use"
    }


def _synthesized_call_turns(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical, turn_of: list[int]
) -> dict[str, int]:
    """The turn of each call whose result the plan synthesizes, found where the plan places
    the result (``call_message``): the calls' messages alone are read, not every assistant
    message. Where one is not found there, every assistant message is read."""
    out: dict[str, int] = {}
    for j, item in enumerate(items):
        if type(item) is Insertion.Synthesized:
            k = call_message(items, j, canonical, item.call_id)
            if k is None:
                roles = [_role(m) for m in messages]
                return _call_turns(messages, roles, turn_of)
            out[item.call_id] = turn_of[canonical.spans[k][0]]
    return out


#: The user turn placed between two assistant turns that cannot be merged.
OMITTED_TURNS_TEXT = ANTHROPIC_OMITTED_TURNS_TEXT


def _opens_with_thinking(message: Any) -> bool:
    blocks = _blocks_of(message)
    first = blocks[0] if blocks else None
    return isinstance(first, dict) and first.get("type") in ("thinking", "redacted_thinking")


class _Out(NamedTuple):
    """One message of the rendered request: where it comes from and whether it is new."""

    role: str
    turn: int
    message: Any
    origin: int | None
    changed: bool


class AnthropicAdapter:
    """The Anthropic Messages API (``/v1/messages``)."""

    key = "anthropic"
    image_formula = "anthropic"
    notes_as_counted = True
    results_as_counted = True
    #: Claude tokens per o200k token: Claude's tokenizer (Claude 3 to 4.6) measured at +16%
    #: (English), +21% (math), +30% (Python) against GPT-4o's o200k; the top of that range.
    default_token_ratio = 1.3
    items_field = "messages"

    # -- validation --------------------------------------------------------------------------

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by Anthropic's rules, in message order, quoting its 400 wording:
        checked in the core (``_core.validate``), which also drops what the API ignores
        before the latest ``compaction`` block.

        Raises:
            InvalidMessageError: A message (or ``system``) is malformed.
        """
        _system_blocks(system)
        issues = _core.validate(self.key, self.native_parts(messages))
        return [PairingIssue(*issue) for issue in issues]

    def native_parts(self, messages: Sequence[Any]) -> list[bytes]:
        """The messages as JSON arrays for the core's Anthropic parser."""
        try:
            return dump_messages(messages)
        except InvalidMessageError:
            # Mappings other than dicts (orjson writes dicts and SDK objects only): sent as
            # the blocks the adapter reads them as, or refused naming the message.
            read = _read(messages)
            return dump_messages([{"role": m.role, "content": m.blocks} for m in read])

    def system_texts(self, system: Any) -> list[list[str]]:
        """The system as the core counts it: the caller's texts, then the ledger note and the
        summary note an earlier assembly appended, one system message each."""
        texts, note, summary = _system_parts(system)
        return ([texts] if texts else []) + [[t] for t in (note, summary) if t is not None]

    def system_markers(self, system: Any) -> int:
        """The ``cache_control`` markers a system sent as it is carries: they count against
        the request's 4 (the core's native body path checks the kept items' against the
        rest)."""
        return _cache_markers(system) if isinstance(system, list) else 0

    # -- rendering ---------------------------------------------------------------------------

    def render(
        self,
        messages: Sequence[Any],
        items: Sequence[PlanItem],
        canonical: Canonical,
        *,
        system: Any = None,
    ) -> Rendered:
        """The request the plan describes: the caller's messages where kept (new copies where
        a rewrite changes a result or an image), synthesized results inside the next user
        message, same-role neighbours merged, the ledger and summary notes in the system.

        Raises:
            InvalidMessageError: The request would carry more than 4 ``cache_control``
                breakpoints (Anthropic rejects it; ringbound never moves one, and adds its own
                only within the limit: ``ringbound.cache_markers``).
        """
        facts = canonical.facts
        roles = facts.roles if facts is not None else [_role(m) for m in messages]

        note: str | None = None
        summary: str | None = None
        synthesized: list[str] = []
        spans = canonical.spans
        # Kept messages need nothing here: only insertions and kept system texts are read.
        for item in [it for it in items if type(it) is not int or spans[it][0] < 0]:
            if type(item) is int:
                if spans[item] == (-1, -1):
                    msg = canonical.messages[item]
                    if _is_note(msg.get("content")):
                        note = msg["content"]
                    elif is_summary_note(msg.get("content")):
                        summary = msg["content"]
            elif type(item) is Insertion.Synthesized:
                synthesized.append(item.call_id)
            elif type(item) is Insertion.LedgerNote:
                note = item.text
            elif type(item) is Insertion.Summary:
                summary = item.text

        replaced = _rewrites(messages, items, canonical)
        kept = kept_native(items, canonical)
        turn_of = _turn_of(roles)
        kept_set = set(kept)
        into: dict[int, list[str]] = {}
        after: dict[int, list[str]] = {}
        call_turn = (
            _synthesized_call_turns(messages, items, canonical, turn_of) if synthesized else {}
        )
        for cid in synthesized:
            # Turns number the messages in order: the next turn opens where the call's ends.
            nxt = bisect_left(turn_of, call_turn[cid] + 1)
            if nxt in kept_set:
                into.setdefault(nxt, []).append(cid)
            else:
                after.setdefault(nxt - 1, []).append(cid)

        out: list[_Out] = []
        stripped: list[tuple[int, str, int]] = []
        for i in kept:
            message = replaced.get(i, messages[i])
            cleaned = (
                _without_blank_text(message) if facts is None or facts.blank_text[i] else message
            )
            if cleaned is not message:
                # Never counted, so stripping them saves nothing the plan counted.
                stripped.append((i, "blank_text", 0))
                message = cleaned
            if i in into:
                out.append(_Out("user", turn_of[i], _with_results(message, into[i]), i, True))
            else:
                out.append(_Out(roles[i], turn_of[i], message, i, False))
            if i in after:
                blocks = [_synthesized_block(c) for c in after[i]]
                out.append(_Out("user", -1 - i, {"role": "user", "content": blocks}, None, False))

        rendered, merged = self._merge(out)
        system_out = self._system(system, note, summary)
        in_system = _cache_markers(system_out) if isinstance(system_out, list) else 0
        if facts is None or (
            MAX_CACHE_MARKERS < sum(facts.cache_markers) + in_system
            and MAX_CACHE_MARKERS < sum(facts.cache_markers[i] for i in kept) + in_system
        ):
            # The core's figures bound what the rendering carries: only then read it.
            self._check_cache_markers(rendered, system_out)
        return Rendered(
            messages=[o.message for o in rendered],
            system=system_out,
            merged=merged,
            rewrites=stripped,
        )

    @staticmethod
    def _merge(out: Sequence[_Out]) -> tuple[list[_Out], int]:
        """Same-role neighbours from different turns (dropping what stood between them made
        them neighbours) become one new message; neighbours of one turn stay as they are."""
        groups: list[list[_Out]] = []
        for o in out:
            if groups and groups[-1][-1].role == o.role:
                if o.role == "assistant" and _opens_with_thinking(o.message):
                    # Merged behind other blocks, thinking would no longer open the turn,
                    # which Anthropic rejects: a placeholder user turn keeps them apart.
                    gap = {"role": "user", "content": OMITTED_TURNS_TEXT}
                    groups.append([_Out("user", -(10**9) - len(groups), gap, None, True)])
                    groups.append([o])
                    continue
                groups[-1].append(o)
            else:
                groups.append([o])
        rendered: list[_Out] = []
        merged = 0
        for group in groups:
            if len(group) == 1 or len({o.turn for o in group}) == 1:
                rendered.extend(group)
                merged += sum(o.changed for o in group)
                continue
            blocks = [b for o in group for b in _blocks_of(o.message)]
            message = {"role": group[0].role, "content": blocks}
            rendered.append(_Out(group[0].role, group[0].turn, message, None, True))
            merged += 1
        return rendered, merged

    @staticmethod
    def _system(system: Any, note: str | None, summary: str | None) -> Any:
        """The system to send: the caller's, with the ledger note and then the summary note
        appended (text blocks when the system is a list of blocks); the caller's own object
        when nothing changes."""
        blocks = _system_blocks(system)
        if blocks is None:
            if system is None:
                return join_system_note("", note, summary) or None
            base, _, _ = split_system_note(system)
            out = join_system_note(base, note, summary)
            return system if out == system else out
        notes = [k for k, b in enumerate(blocks) if _is_any_note(b["text"])]
        wanted = [t for t in (note, summary) if t is not None]
        if [blocks[k]["text"] for k in notes] == wanted and notes == list(
            range(len(blocks) - len(notes), len(blocks))
        ):
            return system
        kept = [obj for k, obj in enumerate(system) if k not in notes]
        kept.extend({"type": "text", "text": t} for t in wanted)
        return kept

    @staticmethod
    def _check_cache_markers(rendered: Sequence[_Out], system: Any) -> None:
        count = _cache_markers(system) if isinstance(system, list) else 0
        first_over: int | None = None
        for o in rendered:
            count += _cache_markers(_blocks_of(o.message))
            if count > MAX_CACHE_MARKERS and first_over is None:
                first_over = o.origin
        if count > MAX_CACHE_MARKERS:
            reason = (
                _CACHE_MARKERS.format(n=count)
                + " (ringbound: the request keeps the caller's cache_control breakpoints and "
                "adds its own only within the limit; remove some before assembling)"
            )
            raise InvalidMessageError(
                (f"messages[{first_over}]: " if first_over is not None else "") + reason,
                index=first_over,
                reason=reason,
            )

    # -- tools and conversion ----------------------------------------------------------------

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """Anthropic tool definitions as OpenAI functions; server tools (``type`` other than
        ``custom``) by their definition. The core adds the tool-use system prompt Anthropic
        adds whenever tools are given.

        Raises:
            InvalidMessageError: ``tools`` is not a list of tool objects.
        """
        if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
            raise _invalid(
                None, f"tools must be a list of tool objects, got {type(tools).__name__}"
            )
        out = []
        for k, obj in enumerate(tools):
            tool = _plain(obj)
            if tool is None or not isinstance(tool.get("name"), str):
                raise _invalid(None, f"tools[{k}] must be an object with a string `name`")
            schema = tool.get("input_schema")
            if isinstance(schema, Mapping):
                description = tool.get("description")
                function = {
                    "name": tool["name"],
                    "description": description if isinstance(description, str) else "",
                    "parameters": schema,
                }
            else:
                function = {
                    "name": tool["name"],
                    "description": _compact(_without_cache_control(tool)),
                }
            out.append({"type": "function", "function": function})
        return out


#: The adapter ``ringbound.providers.adapter("anthropic")`` returns.
ADAPTER = AnthropicAdapter()
