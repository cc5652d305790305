"""Gemini's pairing rules as the Python adapter checked them before the core did: a
differential oracle for ``_core.validate("gemini", ...)``. Kept apart from the package,
run only by the tests, and never told about ``thoughtSignature`` (sessions given to it are
unsigned). Strays are classified as the shared classifier does: the latest earlier call of
the response's id (or name) first, then a later one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringbound.errors import PairingIssue
from ringbound.providers.gemini import (
    ALTERNATE,
    CALL_TURN_POSITION,
    COUNT_MISMATCH,
    RESPONSE_TURN_POSITION,
    _Call,
    _match,
    _read,
    _read_system,
    _Response,
    _Turn,
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
