"""The OpenAI Responses pairing rules as the Python adapter checked them before the core did: a
differential oracle for ``_core.validate("openai_responses", ...)``. Kept apart from the
package and run only by the tests. It reads items through the adapter's parser and walks them
as the adapter's one-pass walk did, recording only the issues; a ``compaction`` item ends a
ring as a user message does."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ringbound.errors import PairingIssue
from ringbound.providers.openai_responses import (
    _MCP_APPROVAL,
    _Family,
    _instructions,
    _Item,
    _parse_all,
)

# OpenAI's 400 wordings (sources in docs/providers/openai_responses.md).
DUPLICATE_ITEM = (
    "Duplicate item found with id {id}. Remove duplicate items from your input and try again."
)
DUPLICATE_OUTPUT = (
    "Duplicate function_call_output for call_id '{id}'. Each function_call must have exactly "
    "one matching function_call_output"
)
REASONING_ALONE = (
    "Item '{id}' of type 'reasoning' was provided without its required following item."
)


def validate(messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
    """Pairing issues by the Responses API's rules, in item order, quoting OpenAI's wording."""
    _instructions(system)
    return _Rules(_parse_all(messages)).issues()


class _Rules:
    """A model turn and the items up to its calls' last output are one ring; a user,
    instruction or compaction item ends a ring, and calls still open there have no adjacent
    output."""

    def __init__(self, items: list[_Item]) -> None:
        self.items = items
        self.found: list[tuple[int, int, PairingIssue]] = []
        self.called: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.family: dict[str, _Family] = {}
        self.unanswered: dict[str, int] = {}
        self.later: dict[str, list[int]] = {}
        for it in items:
            if it.family is not None and it.kind == "model" and it.key is not None:
                self.later.setdefault(it.key, []).append(it.index)
        self._check_ids()
        self._check_reasoning()
        i = 0
        while i < len(items):
            it = items[i]
            if it.kind == "output":
                self._output(it, {})
                i += 1
            elif it.kind == "model":
                i = self._turn(i)
            else:
                i += 1
        for key, at in self.unanswered.items():
            family = self.family[key]
            self._issue(
                "missing_result",
                key,
                at,
                family.no_output.format(id=key)
                + f" ringbound: input[{at}] ({family.call}) has no {family.output} after it.",
                rank=1,
            )
        self.found.sort(key=lambda t: (t[0], t[1]))

    def issues(self) -> list[PairingIssue]:
        return [issue for _, _, issue in self.found]

    def _issue(self, kind: str, key: str | None, at: int, message: str, rank: int = 0) -> None:
        self.found.append((at, rank, PairingIssue(kind, key, at, message)))

    def _check_ids(self) -> None:
        seen: dict[str, int] = {}
        for it in self.items:
            if it.item_id is None:
                continue
            if it.item_id in seen:
                self._issue(
                    "duplicate_id",
                    it.item_id,
                    it.index,
                    DUPLICATE_ITEM.format(id=it.item_id)
                    + f" ringbound: input[{seen[it.item_id]}] and input[{it.index}] share it.",
                )
            else:
                seen[it.item_id] = it.index

    def _check_reasoning(self) -> None:
        items = self.items
        for it in items:
            if it.type != "reasoning":
                continue
            j = it.index + 1
            while j < len(items) and items[j].type == "reasoning":
                j += 1
            if j < len(items) and items[j].kind == "model":
                continue
            after = (
                "it is the last item"
                if j >= len(items)
                else f"input[{j}] ({items[j].type}) follows it, not an item of its model turn"
            )
            self._issue(
                "reasoning_without_call",
                it.item_id,
                it.index,
                REASONING_ALONE.format(id=it.item_id or "")
                + f" ringbound: {after}; a reasoning item is kept or dropped with the item it"
                " precedes.",
            )

    def _turn(self, i: int) -> int:
        items = self.items
        j = i
        while j < len(items) and items[j].kind == "model":
            j += 1
        calls = [it for it in items[i:j] if it.call is not None]
        if not calls:
            return j
        open_calls: dict[str, int] = {}
        for it in calls:
            self._call(it, open_calls)
        k = j
        while open_calls and k < len(items):
            it = items[k]
            if it.kind == "output":
                self._output(it, open_calls)
            elif it.kind == "model" and it.call is not None:
                self._call(it, open_calls)
            elif it.kind not in ("model", "trigger"):
                break
            k += 1
        for key, at in open_calls.items():
            self.unanswered[key] = at
        return k

    def _call(self, it: _Item, open_calls: dict[str, int]) -> None:
        if it.family is None:
            return
        key = it.key
        assert key is not None
        if key in self.called:
            if it.family is _MCP_APPROVAL:  # its id is an item id: reported as a duplicate item
                return
            self._issue(
                "duplicate_id",
                key,
                it.index,
                f"ringbound: call id '{key}' of input[{it.index}] is already the id of "
                f"input[{self.called[key]}]; the Responses API pairs outputs by call id, so "
                "ids must be unique in a request.",
            )
            return
        self.called[key] = it.index
        self.family[key] = it.family
        open_calls[key] = it.index

    def _output(self, it: _Item, open_calls: dict[str, int]) -> None:
        key = it.key
        assert key is not None and it.family is not None
        family = self.family.get(key)
        if key in open_calls and family is it.family:
            del open_calls[key]
            self.answered[key] = it.index
            return
        i = it.index
        if key in self.answered and family is it.family:
            self._issue(
                "duplicate_id",
                key,
                i,
                DUPLICATE_OUTPUT.format(id=key)
                + f" ringbound: input[{self.answered[key]}] already answers it.",
            )
        elif key in self.unanswered and family is it.family:
            at = self.unanswered.pop(key)
            self.answered[key] = i
            self._issue(
                "result_not_adjacent",
                key,
                i,
                f"ringbound: input[{i}] answers {it.family.call} input[{at}], but a user or "
                "instruction message stands between them; ringbound keeps a call and its output "
                "in one ring, so only model items and other outputs may come between.",
            )
        elif any(c > i for c in self.later.get(key, ())):
            self._issue(
                "result_before_call",
                key,
                i,
                it.family.no_call.format(id=key)
                + f" ringbound: the {it.family.call} comes later, at input"
                f"[{min(c for c in self.later[key] if c > i)}].",
            )
        else:
            self._issue(
                "orphan_result",
                key,
                i,
                it.family.no_call.format(id=key)
                + f" ringbound: no {it.family.call} before input[{i}] has this id.",
            )
