"""Gemini's rules, canonical view and rendering as the Python adapter had them before the core
took them over, kept apart from the package and run only by the tests: ``validate``, the
pairing rules, a differential oracle for ``_core.validate("gemini", ...)``, never told about
``thoughtSignature`` (sessions given to it are unsigned); ``to_canonical``, the canonical view;
and ``render``, the request a plan describes, the oracle for the request the core writes
(``NativeView.written``). Strays are classified as the shared classifier does: the latest
earlier call of the response's id (or name) first, then a later one."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from native_readers.gemini import _Call, _read, _read_system, _read_turn, _Response, _Turn
from render_oracle_base import call_message, facts_of

from ringbound._core import (
    GEMINI_SIGNATURE_FIELDS,
    LEDGER_MARKER,
    SYNTHESIZED_RESULT_TEXT,
    Insertion,
)
from ringbound.errors import PairingIssue
from ringbound.providers.base import (
    Canonical,
    PlanItem,
    Rendered,
    as_mapping,
    is_summary_note,
    join_system_note,
    split_system_note,
)
from ringbound.providers.gemini import (
    ALTERNATE,
    CALL_TURN_POSITION,
    COUNT_MISMATCH,
    RESPONSE_TURN_POSITION,
    _get,
    _parts_of,
    _view,
    response_position,
)


def validate(messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
    """Pairing issues by Gemini's turn rules, each opening with Gemini's 400 wording.

    Raises:
        InvalidMessageError: A content (or ``system``) is malformed.
    """
    _read_system(system)
    return _pair(_read(messages)).issues


@dataclass
class _Pairing:
    issues: list[PairingIssue]
    #: The call each response of a response turn answers, by (content index, part position).
    answers: dict[tuple[int, int], _Call]


def _describe(call: _Call) -> str:
    ident = f", id {call.native_id!r}" if call.native_id is not None else ""
    return f"`{call.name}` (parts[{call.pos}]{ident})"


def _describe_response(r: _Response) -> str:
    ident = f", id {r.native_id!r}" if r.native_id is not None else ""
    return f"`{r.name}` (parts[{r.pos}]{ident})"


def _pair(turns: list[_Turn]) -> _Pairing:
    """Gemini's pairing: a call turn (model content with functionCall parts) follows a user
    turn or a response turn, and the user content right after it answers each of its calls
    (by id when the response has one, else by name, in order)."""
    found: list[tuple[int, int, PairingIssue]] = []
    answers: dict[tuple[int, int], _Call] = {}
    open_calls: list[tuple[_Turn, _Call, str]] = []  # (call turn, call, where it went unanswered)
    strays: list[tuple[_Turn, _Response]] = []

    def issue(kind: str, call_id: str | None, index: int, rank: int, text: str) -> None:
        found.append((index, rank, PairingIssue(kind, call_id, index, text)))

    for k, turn in enumerate(turns):
        prev = turns[k - 1] if k else None
        if turn.role == "model":
            if prev is None:
                if turn.calls:
                    issue(
                        "call_turn_misplaced",
                        None,
                        turn.index,
                        0,
                        f"{CALL_TURN_POSITION} ringbound: contents[{turn.index}] calls "
                        "functions but opens the conversation",
                    )
                else:
                    issue(
                        "first_turn_not_user",
                        None,
                        turn.index,
                        0,
                        f"{ALTERNATE} ringbound: contents[{turn.index}] is a model turn; the "
                        "history must start with a user turn",
                    )
            elif turn.calls and prev.role == "model" and not prev.calls:
                issue(
                    "call_turn_misplaced",
                    None,
                    turn.index,
                    0,
                    f"{CALL_TURN_POSITION} ringbound: contents[{turn.index}] calls functions "
                    f"right after the model turn contents[{prev.index}]",
                )
            nxt = turns[k + 1] if k + 1 < len(turns) else None
            if turn.calls and (nxt is None or nxt.role != "user"):
                after = (
                    "the end of the conversation"
                    if nxt is None
                    else f"the model turn contents[{nxt.index}]"
                )
                open_calls.extend((turn, call, f"is followed by {after}") for call in turn.calls)
            continue
        if prev is None or prev.role != "model" or not prev.calls:
            strays.extend((turn, r) for r in turn.responses)
            continue
        used = [False] * len(prev.calls)
        for r in turn.responses:
            m = _match(prev.calls, used, r)
            if m is not None:
                used[m] = True
                answers[(turn.index, r.pos)] = prev.calls[m]
                continue
            same = [
                c
                for c in prev.calls
                if (c.native_id == r.native_id if r.native_id is not None else c.name == r.name)
            ]
            kind = "duplicate_id" if same else "orphan_result"
            why = "a second response for" if same else "no call of"
            issue(
                kind,
                r.native_id,
                turn.index,
                1 + r.pos,
                f"{COUNT_MISMATCH} ringbound: contents[{turn.index}] response "
                f"{_describe_response(r)} is {why} the call turn contents[{prev.index}]",
            )
        for call, answered in zip(prev.calls, used, strict=True):
            if not answered:
                open_calls.append(
                    (
                        prev,
                        call,
                        f"is not answered by the response turn contents[{turn.index}] "
                        f"({sum(used)} of {len(prev.calls)} function call parts answered)",
                    )
                )

    claimed: set[int] = set()
    for turn, r in strays:
        _classify_stray(turns, turn, r, open_calls, claimed, issue)

    for n, (turn, call, why) in enumerate(open_calls):
        if n not in claimed:
            issue(
                "missing_result",
                call.native_id,
                turn.index,
                1 + call.pos,
                f"{COUNT_MISMATCH} ringbound: call {_describe(call)} of contents[{turn.index}] "
                f"has no function response: the call turn {why}",
            )

    found.sort(key=lambda t: (t[0], t[1]))
    return _Pairing(issues=[t[2] for t in found], answers=answers)


def _classify_stray(
    turns: list[_Turn],
    turn: _Turn,
    r: _Response,
    open_calls: list[tuple[_Turn, _Call, str]],
    claimed: set[int],
    issue: Any,
) -> None:
    """A response outside a response turn: a late answer to an unanswered call (not adjacent),
    a second answer (duplicate), an answer before its call, or an answer to nothing."""

    def same(c: _Call) -> bool:
        return c.native_id == r.native_id if r.native_id is not None else c.name == r.name

    head = (
        f"{RESPONSE_TURN_POSITION} ringbound: contents[{turn.index}] response "
        f"{_describe_response(r)}"
    )
    earlier = [(t, c) for t in turns[: turn.index] for c in t.calls if same(c)]
    if earlier:
        caller, call = earlier[-1]
        for n, (_, c, _) in enumerate(open_calls):
            if c is call and n not in claimed:
                claimed.add(n)
                issue(
                    "result_not_adjacent",
                    r.native_id,
                    turn.index,
                    1 + r.pos,
                    f"{head} answers the call turn contents[{caller.index}] but does not follow it",
                )
                return
        issue(
            "duplicate_id",
            r.native_id,
            turn.index,
            1 + r.pos,
            f"{head} answers a call of contents[{caller.index}] that already has a response",
        )
        return
    later = [t for t in turns[turn.index + 1 :] for c in t.calls if same(c)]
    if later:
        issue(
            "result_before_call",
            r.native_id,
            turn.index,
            1 + r.pos,
            f"{head} answers a call made only later, by contents[{later[0].index}]",
        )
        return
    issue(
        "orphan_result",
        r.native_id,
        turn.index,
        1 + r.pos,
        f"{head} answers no call",
    )


# --- the canonical view and rendering --------------------------------------------------------


#: Part fields that travel with the part they sign, whatever it becomes.
_SIGNATURE_FIELDS = GEMINI_SIGNATURE_FIELDS


@dataclass(frozen=True)
class _GeminiCanonical(Canonical):
    """The canonical view plus what rendering needs to map the plan back."""

    #: The contents read, by index (only when a plan synthesizes responses: placing them reads
    #: the call turns and the turns after them).
    turns: Sequence[_Turn] | Mapping[int, _Turn] = ()
    #: Every content's role, ``user`` or ``model``.
    roles: Sequence[str] = ()
    #: Canonical index of the ledger note an earlier assembly left in the system instruction.
    note: int | None = None
    #: Canonical index of the summary note an earlier assembly left there.
    summary: int | None = None
    #: Part position of the functionResponse of each canonical tool message, by canonical index.
    responses_at: Mapping[int, int] = field(default_factory=dict)
    #: Calls of each canonical assistant message, by canonical index.
    calls_at: Mapping[int, tuple[_Call, ...]] = field(default_factory=dict)


def to_canonical(messages: Sequence[Any], *, system: Any = None) -> Canonical:
    """The canonical view as the adapter built it in Python (``GeminiAdapter.to_canonical``),
    where the core's reading now stands: a system message (always, so the first user turn can
    be glued to it and never trimmed: Gemini needs a user turn first), then per content its
    messages."""
    sys = _read_system(system)
    turns = _read(messages)
    answers = _answers(turns)
    out: list[dict[str, Any]] = []
    spans: list[tuple[int, int]] = []
    binds: list[bool] = []
    calls_at: dict[int, tuple[_Call, ...]] = {}

    def add(message: dict[str, Any], span: tuple[int, int], glue: bool = False) -> None:
        out.append(message)
        spans.append(span)
        binds.append(glue)

    content = [{"type": "text", "text": t} for t in sys.texts]
    add({"role": "system", "content": content or ""}, (-1, -1), glue=True)
    note = summary = None
    if sys.note is not None:
        note = len(out)
        add({"role": "system", "content": sys.note}, (-1, -1), glue=True)
    if sys.summary is not None:
        summary = len(out)
        add({"role": "system", "content": sys.summary}, (-1, -1), glue=True)
    responses_at: dict[int, int] = {}
    for turn in turns:
        span = (turn.index, turn.index + 1)
        texts = [{"type": "text", "text": t} for t in turn.texts]
        if turn.role == "model":
            if turn.media:
                # Canonical assistant messages carry no images: the turn's media go in a
                # user message of the same native item, so they are priced as images.
                add({"role": "user", "content": turn.media}, span)
            message: dict[str, Any] = {"role": "assistant", "content": texts or None}
            if turn.calls:
                calls_at[len(out)] = tuple(turn.calls)
                message["tool_calls"] = [
                    {
                        "id": c.cid,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in turn.calls
                ]
            add(message, span)
            continue
        for r in turn.responses:
            call = answers.get((turn.index, r.pos))
            result: dict[str, Any] = {
                "role": "tool",
                "tool_call_id": call.cid if call else f"gemini_orphan_{turn.index}_{r.pos}",
                "content": r.content,
            }
            if not r.synthesized:
                result["name"] = r.name
            responses_at[len(out)] = r.pos
            add(result, span)
        if texts or turn.media or not turn.responses:
            add({"role": "user", "content": texts + turn.media}, span)
    return _GeminiCanonical(
        messages=out,
        spans=spans,
        binds_next=binds,
        turns=tuple(turns),
        roles=tuple(t.role for t in turns),
        note=note,
        summary=summary,
        calls_at=calls_at,
        responses_at=responses_at,
    )


def _answers(turns: list[_Turn]) -> dict[tuple[int, int], _Call]:
    """The call each response of a response turn answers, by (content index, part position):
    how the canonical view pairs them. The rules themselves are checked in the core."""
    answers: dict[tuple[int, int], _Call] = {}
    for k, turn in enumerate(turns):
        prev = turns[k - 1] if k else None
        if turn.role != "user" or prev is None or prev.role != "model" or not prev.calls:
            continue
        used = [False] * len(prev.calls)
        for r in turn.responses:
            m = _match(prev.calls, used, r)
            if m is not None:
                used[m] = True
                answers[(turn.index, r.pos)] = prev.calls[m]
    return answers


def _match(calls: list[_Call], used: list[bool], r: _Response) -> int | None:
    """The call a response answers: same id; else (no id on one side) same name, in order."""
    if r.native_id is not None:
        for m, c in enumerate(calls):
            if not used[m] and c.native_id == r.native_id:
                return m
    for m, c in enumerate(calls):
        if not used[m] and c.native_id is None and c.name == r.name:
            return m
    if r.native_id is None:
        for m, c in enumerate(calls):
            if not used[m] and c.name == r.name:
                return m
    return None


def render(
    messages: Sequence[Any],
    items: Sequence[PlanItem],
    canonical: Canonical,
    *,
    system: Any = None,
) -> Rendered:
    """The request the plan describes, as the adapter rendered it (``GeminiAdapter.render``)
    before the core wrote it: the contents the plan keeps (the caller's objects; new copies
    where a rewrite changes a response or an image), synthesized responses in the user turn
    after their call turn, same-role neighbours that trimming brought together merged into
    new contents, and the ledger and summary notes in the system instruction."""
    if not isinstance(canonical, _GeminiCanonical):
        # The plan's own needs are read; a synthesized response whose call is not where
        # the plan puts it (never, for the core's plans) reads every content again.
        canonical = _for_render(messages, items, canonical) or to_canonical(messages, system=system)
    turns = canonical.turns
    replaced = _rewrites(messages, items, canonical)
    entries: list[_Entry] = []
    call_turn: dict[str, tuple[int, _Call]] = {}
    pending: dict[int, list[_Call]] = {}
    before = {
        kind: canonical.messages[at]["content"] if at is not None else None
        for kind, at in (("ledger", canonical.note), ("summary", canonical.summary))
    }
    notes: dict[str, str | None] = dict.fromkeys(before)
    for item in items:
        if type(item) is int or type(item) is Insertion.Rewrite:
            k: int = item if type(item) is int else item.index
            start, _ = canonical.spans[k]
            if start < 0:
                if k in (canonical.note, canonical.summary):
                    kind = "ledger" if k == canonical.note else "summary"
                    notes[kind] = notes[kind] or before[kind]
                continue
            if not entries or entries[-1].first != start:
                obj = replaced.get(start, messages[start])
                entries.append(_Entry(obj, canonical.roles[start], start, start))
            for call in canonical.calls_at.get(k, ()):
                call_turn[call.cid] = (len(entries) - 1, call)
        elif type(item) is Insertion.Synthesized:
            at, call = call_turn[item.call_id]
            pending.setdefault(at, []).append(call)
        elif type(item) is Insertion.LedgerNote:
            notes["ledger"] = item.text
        elif type(item) is Insertion.Summary:
            notes["summary"] = item.text

    for at in sorted(pending, reverse=True):
        _answer(entries, at, pending[at], turns)

    merged_out: list[_Entry] = []
    for entry in entries:
        prev = merged_out[-1] if merged_out else None
        adjacent = (
            prev is not None
            and prev.last is not None
            and entry.first is not None
            and entry.first == prev.last + 1
        )
        if prev is not None and prev.role == entry.role and not adjacent:
            parts = _parts_of(prev.obj) + _parts_of(entry.obj)
            merged_out[-1] = _Entry(
                _with_parts(prev.obj, parts, prev.role),
                prev.role,
                prev.first,
                entry.last if entry.last is not None else prev.last,
                changed=True,
            )
        else:
            merged_out.append(entry)
    merged = sum(1 for e in merged_out if e.changed and e.first is not None)
    out_system = (
        system if notes == before else _system_with_notes(system, notes["ledger"], notes["summary"])
    )
    return Rendered(messages=[e.obj for e in merged_out], system=out_system, merged=merged)


def _answer(entries: list[_Entry], at: int, calls: list[_Call], turns: Sequence[_Turn]) -> None:
    """Puts synthesized error responses for ``calls`` (of the call turn at ``at``) into the
    user turn after it: after its own responses in a new object, or in a new user turn."""
    call_entry = entries[at]
    call_obj = call_entry.obj
    sample = next(iter(_parts_of(call_obj)), None)
    snake = turns[call_entry.first].snake if call_entry.first is not None else False
    key = "function_response" if snake else "functionResponse"
    parts = []
    for call in calls:
        body: dict[str, Any] = {
            "name": call.name,
            "response": {"error": SYNTHESIZED_RESULT_TEXT},
        }
        if call.native_id is not None:
            body["id"] = call.native_id
        parts.append(_like(sample, {key: body}))
    nxt = at + 1
    if nxt < len(entries) and entries[nxt].role == "user":
        target = entries[nxt]
        existing = _parts_of(target.obj)
        after = 0
        if target.first is not None and turns[target.first].responses:
            after = turns[target.first].responses[-1].pos + 1
        new_parts = existing[:after] + parts + existing[after:]
        entries[nxt] = _Entry(
            _with_parts(target.obj, new_parts, "user"),
            "user",
            target.first,
            target.last,
            changed=True,
        )
    else:
        copy = None if isinstance(call_obj, Mapping) else getattr(call_obj, "model_copy", None)
        fresh = (
            copy(update={"role": "user", "parts": parts})
            if callable(copy)
            else {"role": "user", "parts": parts}
        )
        entries.insert(nxt, _Entry(fresh, "user", None, None))


def _system_with_notes(system: Any, note: str | None, summary: str | None) -> Any:
    """The caller's system instruction with the ledger and summary notes replaced (a new
    object): the ledger note, then the summary note, after the caller's own parts."""
    notes = [t for t in (note, summary) if t]
    if isinstance(system, str):
        return join_system_note(split_system_note(system)[0], note, summary)
    if system is None:
        return {"parts": [{"text": t} for t in notes]} if notes else None
    if isinstance(system, Mapping):
        parts = system.get("parts")
        parts = list(parts) if isinstance(parts, (list, tuple)) else [parts] if parts else []
        base = [p for p in parts if not _is_note_part(p)]
        return {**system, "parts": base + [{"text": t} for t in notes]}
    parts = list(getattr(system, "parts", None) or [])
    base = [p for p in parts if not _is_note_part(p)]
    extra = [_like(parts[0] if parts else None, {"text": t}) for t in notes]
    copy = getattr(system, "model_copy", None)
    if callable(copy):
        return copy(update={"parts": base + extra})
    return {"parts": [_view(p, "part", None) for p in base] + [{"text": t} for t in notes]}


def _is_note_part(part: Any) -> bool:
    text = part if isinstance(part, str) else _view(part, "part", None).get("text")
    return isinstance(text, str) and (text.startswith(LEDGER_MARKER) or is_summary_note(text))


def _like(sample: Any, part: dict[str, Any]) -> Any:
    """A new part of the same kind as ``sample`` (an SDK Part object, or a dict)."""
    validate = getattr(type(sample), "model_validate", None) if sample is not None else None
    return validate(part) if callable(validate) else part


@dataclass
class _Entry:
    obj: Any
    role: str
    first: int | None  # native index of the first content it holds (None: a new content)
    last: int | None
    changed: bool = False


def _with_parts(obj: Any, parts: list[Any], role: str) -> Any:
    if isinstance(obj, Mapping):
        return {**obj, "parts": parts}
    copy = getattr(obj, "model_copy", None)
    if callable(copy):
        return copy(update={"parts": parts})
    return {"role": role, "parts": parts}


def _role_of(content: Any) -> str:
    """A content's role as the core reads it ('function' and none are the user's)."""
    role = content.get("role") if isinstance(content, Mapping) else getattr(content, "role", None)
    return "model" if role == "model" else "user"


class _TurnsRead(Mapping[int, _Turn]):
    """Contents read when first asked for, by index."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self._messages = messages
        self._read: dict[int, _Turn] = {}

    def __getitem__(self, i: int) -> _Turn:
        turn = self._read.get(i)
        if turn is None:
            turn = self._read[i] = _read_turn(i, self._messages[i])
        return turn

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._messages)))

    def __len__(self) -> int:
        return len(self._messages)


def _for_render(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical
) -> _GeminiCanonical | None:
    """What rendering needs of the core's canonical view, read from the contents only where the
    plan needs it: every content's role; the functionResponse position of each result a
    rewrite changes; for each response the plan synthesizes, the call turn it answers (its
    calls under the core's ids, in order) and, through ``turns``, the contents placing it
    reads. None when a synthesized response's call is not where the plan puts it."""
    facts = facts_of(canonical)
    roles = facts.roles if facts is not None else [_role_of(m) for m in messages]
    responses_at: dict[int, int] = {}
    calls_at: dict[int, tuple[_Call, ...]] = {}
    turns = _TurnsRead(messages)
    for j, item in enumerate(items):
        if type(item) is Insertion.Rewrite:
            k = item.index
            at = response_position(messages, canonical, k)
            if at is not None:
                responses_at[k] = at
        elif type(item) is Insertion.Synthesized:
            k = call_message(items, j, canonical, item.call_id)
            if k is None:
                return None
            if k not in calls_at:
                calls = turns[canonical.spans[k][0]].calls
                ids = [c["id"] for c in canonical.messages[k]["tool_calls"]]
                if len(ids) != len(calls):
                    return None
                for call, cid in zip(calls, ids, strict=True):
                    call.cid = cid
                calls_at[k] = tuple(calls)
    return _GeminiCanonical(
        **vars(canonical),
        roles=roles,
        responses_at=responses_at,
        calls_at=calls_at,
        turns=turns,
        **_notes_at(canonical),
    )


def _notes_at(canonical: Canonical) -> dict[str, int | None]:
    """Canonical indices of the ledger and summary notes an earlier assembly left in the
    system instruction."""
    out: dict[str, int | None] = {"note": None, "summary": None}
    for k, (start, _) in enumerate(canonical.spans):
        if start >= 0:
            break
        text = canonical.messages[k].get("content")
        if isinstance(text, str) and text.startswith(LEDGER_MARKER):
            out["note"] = k
        elif is_summary_note(text):
            out["summary"] = k
    return out


def _rewrites(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: _GeminiCanonical
) -> dict[int, Any]:
    """New contents for the plan's rewrites, by native index (several rewrites of one content
    apply in turn): a functionResponse whose response holds the text, or images made text."""
    out: dict[int, Any] = {}
    for item in items:
        if type(item) is not Insertion.Rewrite:
            continue
        k, kind, text = item.index, item.kind, item.text
        i = canonical.spans[k][0]
        current = out.get(i, messages[i])
        parts = _parts_of(current)
        if kind == "media":
            new = _without_media(i, parts, text)
        else:
            at = canonical.responses_at[k]
            new = list(parts)
            new[at] = _response_as_text(i, parts[at], text)
        out[i] = _with_parts(current, new, canonical.roles[i])
    return out


def _response_as_text(index: int, part: Any, text: str) -> Any:
    """A functionResponse part whose response is ``text``, under the key the original used:
    ``error`` for an error response, its one key, else ``output``."""
    view = _view(part, "a part", index)
    key = _response_key(view)
    body = _view(view[key], "a functionResponse", index)
    response = body.get("response") or {}
    keys = list(_view(response, "a response", index))
    field_name = keys[0] if len(keys) == 1 else "output"
    return _like(part, {**view, key: {**body, "response": {field_name: text}}})


def _response_key(part: Mapping[str, Any]) -> str:
    """The spelling of a part's functionResponse field (REST camelCase or SDK snake_case)."""
    return "function_response" if part.get("function_response") is not None else "functionResponse"


def _image_blob(part: Mapping[str, Any]) -> bool:
    blob = _get(part, "inlineData", "inline_data")
    if blob is None:
        blob = _get(part, "fileData", "file_data")
    if blob is None:
        return False
    mime = _get(as_mapping(blob) or {}, "mimeType", "mime_type")
    return isinstance(mime, str) and mime.startswith("image/")


def _without_media(index: int, parts: list[Any], text: str) -> list[Any]:
    """The parts with each image a text part ``text`` (a thought signature stays on its part).
    Images inside a functionResponse leave it, and their texts close the content."""
    new: list[Any] = []
    moved: list[Any] = []
    for part in parts:
        view = _view(part, "a part", index)
        if _image_blob(view):
            keep = {k: view[k] for k in _SIGNATURE_FIELDS if view.get(k) is not None}
            new.append(_like(part, {"text": text, **keep}))
            continue
        key = _response_key(view)
        body = _view(view[key], "a functionResponse", index) if key in view else {}
        inner = body.get("parts") or []
        kept = [p for p in inner if not _image_blob(_view(p, "a part", index))]
        if len(kept) == len(inner):
            new.append(part)
            continue
        moved.extend(_like(part, {"text": text}) for _ in range(len(inner) - len(kept)))
        body = {k: v for k, v in body.items() if k != "parts"}
        new.append(_like(part, {**view, key: {**body, **({"parts": kept} if kept else {})}}))
    return new + moved
