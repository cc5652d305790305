"""Bedrock Converse's pairing rules as the Python adapter checked them before the core did: a
differential oracle for ``_core.validate("bedrock_converse", ...)``. Kept apart from the
package and run only by the tests. Strays are classified as the shared classifier does: the
latest earlier call of the id first, then a later one (the adapter used to look later first)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ringbound.errors import PairingIssue
from ringbound.providers.bedrock_converse import (
    EXPECTED_RESULTS,
    _Call,
    _Result,
    _system,
    _Turn,
    _turns,
)

# Bedrock's ValidationException texts, verbatim (sources in docs/providers/bedrock_converse.md).
START_WITH_USER = (
    "A conversation must start with a user message. Try again with a conversation that starts "
    "with a user message."
)
ALTERNATE = (
    "A conversation must alternate between user and assistant roles. Make sure the conversation "
    "alternates between user and assistant roles and try again."
)
MIXED_TURN = (
    "messages.{n}.content: Conversation blocks and tool result blocks cannot be provided in the "
    "same turn."
)
TOO_MANY_RESULTS = (
    "The number of toolResult blocks at messages.{n}.content exceeds the number of toolUse "
    "blocks of previous turn."
)
DUPLICATE_USES = "The toolUse blocks at messages.{n}.content contain duplicate Ids: {ids}"
DUPLICATE_RESULTS = "The toolResult blocks at messages.{n}.content contain duplicate Ids: {ids}"
EMPTY_ERROR_RESULT = (
    "The content field at messages.{n}.content.{b}.toolResult cannot be empty when status value "
    "is error."
)


def validate(messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
    """Issues by Bedrock's rules, in message order, each quoting its ValidationException."""
    turns = _turns(messages)
    _system(system)
    callers: dict[str, list[int]] = {}
    for i, turn in enumerate(turns):
        for call in turn.calls:
            callers.setdefault(call.id, []).append(i)
    issues: list[PairingIssue] = []
    for i, turn in enumerate(turns):
        if i == 0 and turn.role != "user":
            issues.append(
                PairingIssue(
                    "first_message_not_user",
                    None,
                    0,
                    f"{START_WITH_USER} ringbound: messages[0] is an {turn.role} message",
                )
            )
        if i > 0 and turn.role == turns[i - 1].role:
            issues.append(
                PairingIssue(
                    "roles_not_alternating",
                    None,
                    i,
                    f"{ALTERNATE} ringbound: messages[{i - 1}] and messages[{i}] are both "
                    f"{turn.role} messages",
                )
            )
        if turn.role == "assistant":
            issues.extend(_call_issues(turns, i))
        else:
            issues.extend(_result_issues(turns, i, callers))
    return issues


def _call_issues(turns: list[_Turn], i: int) -> list[PairingIssue]:
    turn = turns[i]
    issues: list[PairingIssue] = []
    seen: set[str] = set()
    unique: list[_Call] = []
    for call in turn.calls:
        if call.id in seen:
            issues.append(
                PairingIssue(
                    "duplicate_id",
                    call.id,
                    i,
                    f"{DUPLICATE_USES.format(n=i, ids=call.id)} ringbound: messages[{i}] "
                    f"calls `{call.id}` more than once",
                )
            )
        else:
            seen.add(call.id)
            unique.append(call)
    following = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].role == "user" else None
    answered = {r.id for r in following.results} if following else set()
    missing = [c for c in unique if c.id not in answered]
    ids = ", ".join(c.id for c in missing)
    for call in missing:
        where = (
            f"messages[{i + 1}] has no toolResult for it"
            if following
            else "no user message follows"
            if i + 1 == len(turns)
            else f"messages[{i + 1}] is not a user message"
        )
        issues.append(
            PairingIssue(
                "missing_result",
                call.id,
                i,
                f"{EXPECTED_RESULTS.format(n=i + 1, ids=ids)} ringbound: messages[{i}] "
                f"calls `{call.id}` ({call.name}) and {where}",
            )
        )
    if missing and following and not following.results:
        # The results could only go into messages[i + 1], which holds other content: a
        # synthesized result cannot be sent there, so this is not a repairable gap.
        issues.append(
            PairingIssue(
                "unrepairable_missing_result",
                missing[0].id,
                i + 1,
                f"{EXPECTED_RESULTS.format(n=i + 1, ids=ids)} ringbound: messages[{i + 1}] "
                "holds other content, and conversation blocks and tool result blocks "
                "cannot be provided in the same turn, so no result can be synthesized "
                "there; add a tool-result turn (and a reply) before it",
            )
        )
    return issues


def _result_issues(turns: list[_Turn], i: int, callers: dict[str, list[int]]) -> list[PairingIssue]:
    turn = turns[i]
    issues: list[PairingIssue] = []
    if turn.results and turn.conversation:
        issues.append(
            PairingIssue(
                "results_mixed_with_content",
                None,
                i,
                f"{MIXED_TURN.format(n=i)} ringbound: messages[{i}] holds toolResult blocks "
                "and other content; send the other content in a later user turn",
            )
        )
    previous = turns[i - 1] if i > 0 and turns[i - 1].role == "assistant" else None
    expected = [c.id for c in previous.calls] if previous else []
    too_many = len(turn.results) > len(expected)
    seen: set[str] = set()
    for result in turn.results:
        if result.id in seen:
            issues.append(
                PairingIssue(
                    "duplicate_id",
                    result.id,
                    i,
                    f"{DUPLICATE_RESULTS.format(n=i, ids=result.id)} ringbound: "
                    f"messages[{i}] answers `{result.id}` more than once",
                )
            )
            continue
        seen.add(result.id)
        if result.id not in expected:
            issues.append(_stray(turn, i, result, expected, too_many, callers))
        if result.error and result.empty:
            issues.append(
                PairingIssue(
                    "empty_error_result",
                    result.id,
                    i,
                    f"{EMPTY_ERROR_RESULT.format(n=i, b=result.block)} ringbound: the "
                    f"error result for `{result.id}` has no content",
                )
            )
    return issues


def _stray(
    turn: _Turn,
    i: int,
    result: _Result,
    expected: list[str],
    too_many: bool,
    callers: dict[str, list[int]],
) -> PairingIssue:
    """The issue of a result its previous turn did not call for."""
    if too_many:
        wording = TOO_MANY_RESULTS.format(n=i)
    else:
        found = ", ".join(r.id for r in turn.results if r.id not in expected)
        wording = (
            EXPECTED_RESULTS.format(
                n=i, ids=", ".join(e for e in expected if e not in {r.id for r in turn.results})
            )
            + f", but found: {found}"
        )
    earlier = [a for a in callers.get(result.id, ()) if a < i]
    later = [a for a in callers.get(result.id, ()) if a > i]
    if earlier:
        return PairingIssue(
            "result_not_adjacent",
            result.id,
            i,
            f"{wording} ringbound: messages[{i}] answers `{result.id}` of "
            f"messages[{earlier[-1]}], but results belong in the user turn right after the call",
        )
    if later:
        return PairingIssue(
            "result_before_call",
            result.id,
            i,
            f"{wording} ringbound: messages[{i}] answers `{result.id}`, which is only called "
            f"later, by messages[{later[0]}]",
        )
    return PairingIssue(
        "orphan_result",
        result.id,
        i,
        f"{wording} ringbound: messages[{i}] answers `{result.id}`, which no assistant message "
        "calls",
    )
