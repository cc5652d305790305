"""Bedrock Converse's rules and rendering as the Python adapter had them before the core took
them over, kept apart from the package and run only by the tests: ``validate``, the pairing
rules, a differential oracle for ``_core.validate("bedrock_converse", ...)``, and ``render``,
the request a plan describes, the oracle for the request the core writes
(``NativeView.written``). Strays are classified as the shared classifier does: the latest
earlier call of the id first, then a later one (the adapter used to look later first)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from native_readers.bedrock_converse import _Call, _Result, _system, _Turn, _turns
from render_oracle_base import facts_of, plan_rewrites

from ringbound._core import LEDGER_MARKER, SYNTHESIZED_RESULT_TEXT, Insertion
from ringbound.errors import PairingError, PairingIssue
from ringbound.providers.base import Canonical, PlanItem, Rendered, is_summary_note

# Bedrock's ValidationException texts, verbatim (sources in docs/providers/bedrock_converse.md).
EXPECTED_RESULTS = "Expected toolResult blocks at messages.{n}.content for the following Ids: {ids}"
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


# --- rendering -------------------------------------------------------------------------------


def render(
    messages: Sequence[Any],
    items: Sequence[PlanItem],
    canonical: Canonical,
    *,
    system: Any = None,
) -> Rendered:
    """The planned request, as the adapter rendered it (``BedrockConverseAdapter.render``)
    before the core wrote it: kept messages are the caller's objects (new copies where a
    rewrite changes a result or an image); a synthesized result joins the user turn after
    its call (a new object) or opens one; the ledger note and then the summary note are
    system text blocks; same-role neighbours left by drops are merged into new objects.

    Raises:
        PairingError: A synthesized result would share a user turn with other content.
    """
    replaced = {
        i: _rewritten(messages[i], rewrites, canonical)
        for i, rewrites in plan_rewrites(items, canonical).items()
    }
    facts = facts_of(canonical)
    roles = facts.roles if facts is not None else None
    entries: list[_Entry] = []
    emitted: set[int] = set()
    note: str | None = None
    summary: str | None = None
    for item in items:
        if type(item) is int or type(item) is Insertion.Rewrite:
            k: int = item if type(item) is int else item.index
            start = canonical.spans[k][0]
            if start < 0 and is_summary_note(canonical.messages[k]["content"]):
                summary = summary or canonical.messages[k]["content"]
            if start >= 0 and start not in emitted:
                emitted.add(start)
                message = replaced.get(start, messages[start])
                role = roles[start] if roles is not None else message["role"]
                entries.append(_Entry(role, [(start, message)]))
        elif type(item) is Insertion.Synthesized:
            block = synthesized_result(item.call_id)
            if entries and entries[-1].role == "user":
                entries[-1].pieces.append(block)
            else:
                entries.append(_Entry("user", [block]))
        elif type(item) is Insertion.LedgerNote:
            note = item.text
        elif type(item) is Insertion.Summary:
            summary = item.text
    merged: list[_Entry] = []
    for entry in entries:
        if merged and merged[-1].role == entry.role:
            merged[-1].absorb(entry)
        else:
            merged.append(entry)
    out = [entry.build() for entry in merged]
    return Rendered(
        messages=out,
        system=_system_with_notes(system, note, summary),
        merged=sum(entry.merged() for entry in merged),
    )


def synthesized_result(call_id: str) -> dict[str, Any]:
    """The error result inserted for a call that has none (``synthesize_error_results``)."""
    return {
        "toolResult": {
            "toolUseId": call_id,
            "status": "error",
            "content": [{"text": SYNTHESIZED_RESULT_TEXT}],
        }
    }


@dataclass
class _Entry:
    """One output message being built, in order: caller messages (``(index, object)``) and
    blocks added to them."""

    role: str
    pieces: list[tuple[int, Any] | dict[str, Any]]

    def blocks(self) -> list[Any]:
        out: list[Any] = []
        for piece in self.pieces:
            if isinstance(piece, tuple):
                out.extend(piece[1]["content"])
            else:
                out.append(piece)
        return out

    def absorb(self, other: _Entry) -> None:
        """Merges the next same-role entry; a tool-result turn takes only tool results."""
        mine, theirs = self.blocks(), other.blocks()
        if self.role == "user" and any(map(_is_result, mine + theirs)):
            if not all(map(_is_result, mine + theirs)):
                raise _unmergeable(self, other)
        self.pieces.extend(other.pieces)

    def build(self) -> Any:
        if len(self.pieces) == 1 and isinstance(self.pieces[0], tuple):
            return self.pieces[0][1]
        return {"role": self.role, "content": self.blocks()}

    def merged(self) -> bool:
        """A new object holding caller content: merged messages, or a block added to one."""
        return len(self.pieces) > 1 and any(isinstance(p, tuple) for p in self.pieces)


def _unmergeable(results: _Entry, after: _Entry) -> PairingError:
    """A synthesized result would share a user turn with the user message after its call,
    which Bedrock refuses: repairing is impossible, so the assembly fails closed."""
    ids = [b["toolResult"]["toolUseId"] for b in results.blocks() if _is_result(b)]
    at = next((p[0] for p in after.pieces if isinstance(p, tuple)), -1)
    wording = EXPECTED_RESULTS.format(n=at, ids=", ".join(ids))
    issues = [
        PairingIssue(
            "missing_result",
            call_id,
            at - 1,
            f"{wording} ringbound: a synthesized result cannot join messages[{at}], which "
            "holds other content (Bedrock: conversation blocks and tool result blocks cannot "
            "be provided in the same turn); add the missing toolResult blocks yourself",
        )
        for call_id in ids
    ]
    return PairingError(
        "tool call pairing cannot be repaired in Bedrock's shape"
        + "".join(f"\n  messages[{i.index}]: {i.message}" for i in issues),
        issues=issues,
    )


def _is_result(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("toolResult") is not None


def _block_text(block: Any) -> Any:
    return block.get("text") if isinstance(block, Mapping) else None


def _system_with_notes(system: Any, note: str | None, summary: str | None) -> Any:
    """The caller's system, or a new block list whose ledger note is ``note`` (None: the
    ledger note it has stays) and whose summary note is ``summary`` (None: none)."""
    blocks = list(system) if system is not None else []
    summaries = [b for b in blocks if is_summary_note(_block_text(b))]
    if note is None and [_block_text(b) for b in summaries] == ([summary] if summary else []):
        return system
    blocks = [b for b in blocks if not is_summary_note(_block_text(b))]
    if note is not None:
        at = [
            b
            for b, block in enumerate(blocks)
            if isinstance(_block_text(block), str) and _block_text(block).startswith(LEDGER_MARKER)
        ]
        if not at:
            blocks.append({"text": note})
        else:
            blocks[at[0]] = {"text": note}
            blocks = [b for k, b in enumerate(blocks) if k not in at[1:]]
    if summary is not None:
        blocks.append({"text": summary})
    return blocks or None


def _rewritten(
    message: Mapping[str, Any], rewrites: Sequence[tuple[int, str, str]], canonical: Canonical
) -> dict[str, Any]:
    """A new message: the toolResult answering each rewritten tool message holds the text
    (status kept), or each image became a text block."""
    blocks = list(message["content"])
    for k, kind, text in rewrites:
        if kind == "media":
            blocks = [_without_media(block, text) for block in blocks]
            continue
        key = canonical.messages[k].get("tool_call_id")
        blocks = [
            _result_as_text(block, text)
            if _is_result(block) and block["toolResult"].get("toolUseId") == key
            else block
            for block in blocks
        ]
    return {**message, "content": blocks}


def _is_image(block: Any) -> bool:
    if not isinstance(block, Mapping):
        return False
    guard = block.get("guardContent")
    return block.get("image") is not None or (
        isinstance(guard, Mapping) and guard.get("image") is not None
    )


def _result_as_text(block: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A toolResult whose content is ``text`` (its images kept, as they are counted apart)."""
    result = block["toolResult"]
    images = [b for b in result.get("content") or () if _is_image(b)]
    return {**block, "toolResult": {**result, "content": [{"text": text}, *images]}}


def _without_media(block: Any, text: str) -> Any:
    """The block with each image (inside a toolResult too) a text block ``text``."""
    if _is_image(block):
        return {"text": text}
    if _is_result(block):
        result = block["toolResult"]
        content = list(result.get("content") or ())
        if any(map(_is_image, content)):
            new = [{"text": text} if _is_image(b) else b for b in content]
            return {**block, "toolResult": {**result, "content": new}}
    return block
