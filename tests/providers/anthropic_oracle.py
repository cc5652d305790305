"""The Anthropic pairing rules as the Python adapter checked them before the core did: a
differential oracle for ``_core.validate("anthropic", ...)``. Kept apart from the
package, run only by the tests, and never told about ``compaction`` blocks (sessions given to
it have none) nor about whitespace-only text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ringbound.errors import PairingIssue
from ringbound.providers.anthropic import _Msg, _read, _system_blocks


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
