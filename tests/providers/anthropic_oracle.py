"""The Anthropic adapter's Python rules and rendering as they were before the core took them
over, kept apart from the package and run only by the tests: ``validate``, the pairing rules,
a differential oracle for ``_core.validate("anthropic", ...)``, never told about
``compaction`` blocks (sessions given to it have none) nor about whitespace-only text; and
``render``, the request a plan describes, the oracle for the request the core writes
(``NativeView.written``)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from native_readers.anthropic import (
    _cache_markers,
    _is_any_note,
    _is_note,
    _Msg,
    _plain,
    _read,
    _system_blocks,
)
from render_oracle_base import call_message, facts_of, kept_native

from ringbound._core import ANTHROPIC_OMITTED_TURNS_TEXT, SYNTHESIZED_RESULT_TEXT, Insertion
from ringbound.errors import InvalidMessageError, PairingIssue
from ringbound.providers.base import (
    Canonical,
    PlanItem,
    Rendered,
    is_summary_note,
    join_system_note,
    split_system_note,
)


class _Turn(NamedTuple):
    """Consecutive messages of one role, ``[start, end)``: one turn to the API."""

    role: str
    start: int
    end: int


def _turns(roles: Sequence[str]) -> list[_Turn]:
    """The turns of messages of these roles."""
    out: list[_Turn] = []
    start, role = 0, None
    for i, r in enumerate(roles):
        if r != role:
            if i:
                out.append(_Turn(role, start, i))
            start, role = i, r
    if roles:
        out.append(_Turn(role, start, len(roles)))
    return out


# Anthropic's 400 wordings, as the API returns them (sources in docs/providers/anthropic.md).
_MISSING = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
_UNEXPECTED = (
    "messages.{i}.content.{b}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
_NOT_FIRST = (
    "messages.{i}: Did not find {n} `tool_result` block(s) at the beginning of this message. "
    "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
    "blocks."
)
_DUPLICATE_USE = "messages.{i}.content.{b}: `tool_use` ids must be unique"
_DUPLICATE_RESULT = (
    "messages.{i}.content.{b}: each tool_use must have a single result. Found multiple "
    "tool_result blocks with id: {id}"
)

#: Records an issue: (message index, rank within the message, kind, call id, message).
_Add = Callable[[int, int, str, str | None, str], None]


def validate(messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
    """Pairing issues by Anthropic's rules, in message order, quoting its 400 wording.

    Raises:
        InvalidMessageError: A message (or ``system``) is malformed.
    """
    _system_blocks(system)
    msgs = _read(messages)
    turns = _turns([m.role for m in msgs])
    uses: dict[str, list[int]] = {}
    for i, m in enumerate(msgs):
        for block in m.blocks:
            if block["type"] == "tool_use":
                uses.setdefault(block["id"], []).append(i)
    found: list[tuple[int, int, int, PairingIssue]] = []

    def add(i: int, rank: int, kind: str, call_id: str | None, message: str) -> None:
        found.append((i, rank, len(found), PairingIssue(kind, call_id, i, message)))

    seen: dict[str, int] = {}
    for t, turn in enumerate(turns):
        if turn.role == "assistant":
            _check_calls(msgs, turns, t, seen, add)
        else:
            _check_results(msgs, turns, t, uses, add)
    found.sort(key=lambda f: (f[0], f[1], f[2]))
    return [f[3] for f in found]


def _check_calls(
    msgs: Sequence[_Msg], turns: Sequence[_Turn], t: int, seen: dict[str, int], add: _Add
) -> None:
    """Duplicate ids, and calls the next turn does not answer."""
    turn = turns[t]
    nxt = turns[t + 1] if t + 1 < len(turns) else None
    answered: set[str] = set()
    if nxt is not None:
        answered = {
            b["tool_use_id"]
            for m in msgs[nxt.start : nxt.end]
            for b in m.blocks
            if b["type"] == "tool_result"
        }
    for i in range(turn.start, turn.end):
        for b, block in enumerate(msgs[i].blocks):
            if block["type"] != "tool_use":
                continue
            cid = block["id"]
            if cid in seen:
                add(
                    i,
                    b,
                    "duplicate_id",
                    cid,
                    _DUPLICATE_USE.format(i=i, b=b)
                    + f" (ringbound: call {cid!r} was already made in messages[{seen[cid]}])",
                )
                continue
            seen[cid] = i
            if cid not in answered:
                where = (
                    f"messages[{nxt.start}:{nxt.end}]" if nxt is not None else "no message after it"
                )
                add(
                    i,
                    len(msgs[i].blocks) + b,
                    "missing_result",
                    cid,
                    _MISSING.format(i=i, ids=cid)
                    + f" (ringbound: call {cid!r} has no result in the next turn, {where})",
                )


def _check_results(
    msgs: Sequence[_Msg], turns: Sequence[_Turn], t: int, uses: dict[str, list[int]], add: _Add
) -> None:
    """Results that answer no call of the previous turn, answer one twice, or do not
    open the turn."""
    turn = turns[t]
    prev = turns[t - 1] if t > 0 else None
    calls: dict[str, int] = {}
    if prev is not None:
        for i in range(prev.start, prev.end):
            for block in msgs[i].blocks:
                if block["type"] == "tool_use":
                    calls.setdefault(block["id"], i)
    answered: dict[str, int] = {}
    leading = True
    late: list[tuple[int, int, str]] = []
    for i in range(turn.start, turn.end):
        for b, block in enumerate(msgs[i].blocks):
            if block["type"] != "tool_result":
                leading = False
                continue
            rid = block["tool_use_id"]
            if rid in calls:
                if rid in answered:
                    add(
                        i,
                        b,
                        "duplicate_id",
                        rid,
                        _DUPLICATE_RESULT.format(i=i, b=b, id=rid)
                        + f" (ringbound: call {rid!r} was already answered in "
                        f"messages[{answered[rid]}])",
                    )
                else:
                    answered[rid] = i
                    if not leading:
                        late.append((i, b, rid))
                continue
            # The call a result belongs to is the latest of its id before it (the rule of the
            # core's one stray classifier); only without one is it answered before its call.
            made = uses.get(rid, [])
            earlier = [u for u in made if u < i]
            if earlier:
                kind, detail = (
                    "result_not_adjacent",
                    (f"its call is in messages[{earlier[-1]}], not in the turn right before"),
                )
            elif made:
                kind, detail = (
                    "result_before_call",
                    (f"its call is made later, in messages[{min(made)}]"),
                )
            else:
                kind, detail = "orphan_result", "no tool_use block has this id"
            add(
                i,
                b,
                kind,
                rid,
                _UNEXPECTED.format(i=i, b=b, id=rid)
                + f" (ringbound: result for {rid!r}: {detail})",
            )
    for i, b, rid in late:
        add(
            i,
            b,
            "result_not_adjacent",
            rid,
            _NOT_FIRST.format(i=turn.start, n=len(late))
            + f" (ringbound: the result for {rid!r} comes after other content of the turn "
            f"messages[{turn.start}:{turn.end}]; tool_result blocks must open it)",
        )


# --- rendering -------------------------------------------------------------------------------


# Anthropic's 400 wording for too many breakpoints (sources in docs/providers/anthropic.md).
_CACHE_MARKERS = "A maximum of 4 blocks with cache_control may be provided. Found {n}."

#: Anthropic's limit on ``cache_control`` breakpoints in one request.
MAX_CACHE_MARKERS = 4

#: The user turn placed between two assistant turns that cannot be merged.
OMITTED_TURNS_TEXT = ANTHROPIC_OMITTED_TURNS_TEXT


class _Out(NamedTuple):
    """One message of the rendered request: where it comes from and whether it is new."""

    role: str
    turn: int
    message: Any
    origin: int | None
    changed: bool


def render(
    messages: Sequence[Any],
    items: Sequence[PlanItem],
    canonical: Canonical,
    *,
    system: Any = None,
) -> Rendered:
    """The request the plan describes, as the adapter rendered it (``AnthropicAdapter.render``)
    before the core wrote it: the caller's messages where kept (new copies where a rewrite
    changes a result or an image), synthesized results inside the next user message,
    same-role neighbours merged, the ledger and summary notes in the system.

    Raises:
        InvalidMessageError: The request would carry more than 4 ``cache_control``
            breakpoints (Anthropic rejects it; ringbound never moves one, and adds its own
            only within the limit: ``ringbound.cache_markers``).
    """
    facts = facts_of(canonical)
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
    call_turn = _synthesized_call_turns(messages, items, canonical, turn_of) if synthesized else {}
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
        cleaned = _without_blank_text(message) if facts is None or facts.blank_text[i] else message
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

    rendered, merged = _merge(out)
    system_out = _system(system, note, summary)
    in_system = _cache_markers(system_out) if isinstance(system_out, list) else 0
    if facts is None or (
        MAX_CACHE_MARKERS < sum(facts.cache_markers) + in_system
        and MAX_CACHE_MARKERS < sum(facts.cache_markers[i] for i in kept) + in_system
    ):
        # The core's figures bound what the rendering carries: only then read it.
        _check_cache_markers(rendered, system_out)
    return Rendered(
        messages=[o.message for o in rendered],
        system=system_out,
        merged=merged,
        rewrites=stripped,
    )


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


def _opens_with_thinking(message: Any) -> bool:
    blocks = _blocks_of(message)
    first = blocks[0] if blocks else None
    return isinstance(first, dict) and first.get("type") in ("thinking", "redacted_thinking")
