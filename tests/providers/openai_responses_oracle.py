"""The OpenAI Responses rules and rendering as the Python adapter had them before the core
took them over, kept apart from the package and run only by the tests. ``validate``, the
pairing rules, is a differential oracle for ``_core.validate("openai_responses", ...)``: it
reads items through the adapter's parser and walks them as the adapter's one-pass walk did,
recording only the issues; a ``compaction`` item ends a ring as a user message does.
``render``, the items a plan describes, is the oracle for the request the core writes
(``NativeView.written``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from native_readers.openai_responses import (
    _APPLY_PATCH,
    _BY_CALL,
    _BY_OUTPUT,
    _COMPUTER,
    _FUNCTION,
    _MCP_APPROVAL,
    _SHELL,
    NO_COMPUTER_OUTPUT,
    _as_dict,
    _Family,
    _instructions,
    _Item,
    _output_key,
    _parse_all,
)

from ringbound._core import SYNTHESIZED_RESULT_TEXT, Insertion
from ringbound.errors import PairingError, PairingIssue
from ringbound.providers.base import Canonical, PlanItem, Rendered

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


# --- rendering -------------------------------------------------------------------------------


def render(
    messages: Sequence[Any],
    items: Sequence[PlanItem],
    canonical: Canonical,
    *,
    system: Any = None,
) -> Rendered:
    """The request the plan describes, as the adapter rendered it (``OpenAIResponses.render``)
    before the core wrote it: the caller's own items the plan keeps, in order, plus new items
    for synthesized outputs, the ledger note and the summary note, and new copies of the
    items a rewrite changes; ``instructions`` returned as given.

    Raises:
        PairingError: A computer call's output would be synthesized (it is a screenshot).
    """
    replaced = _rewrites(messages, items, canonical)
    out: list[Any] = []
    last = -1
    families: dict[str, tuple[_Family, int]] | None = None
    for item in items:
        if type(item) is int or type(item) is Insertion.Rewrite:
            k = item if type(item) is int else item.index
            start, end = canonical.spans[k]
            for i in range(max(start, last + 1), end):
                out.append(replaced.get(i, messages[i]))
                last = i
        elif type(item) is Insertion.Synthesized:
            if families is None:
                families = _call_families(messages)
            family, at = families.get(item.call_id, (_FUNCTION, -1))
            out.append(_synthesized(family, item.call_id, at))
        else:  # the ledger or the summary note
            out.append({"type": "message", "role": item.role, "content": item.text})
    return Rendered(messages=out, system=system)


def _rewrites(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical
) -> dict[int, dict[str, Any]]:
    """New items for the plan's rewrites, by input index (several rewrites of one item apply
    in turn): a tool result's output becomes the text; a message's images become text parts."""
    out: dict[int, dict[str, Any]] = {}
    for item in items:
        if type(item) is not Insertion.Rewrite:
            continue
        k, kind, text = item.index, item.kind, item.text
        message = canonical.messages[k]
        start, end = canonical.spans[k]
        if kind == "media":
            i = start
            obj = out.get(i) or dict(_as_dict(i, messages[i]))
            content = obj.get("content")
            if isinstance(content, list):
                obj["content"] = [
                    {"type": "input_text", "text": text}
                    if isinstance(part, dict) and part.get("type") == "input_image"
                    else part
                    for part in content
                ]
            out[i] = obj
            continue
        key = message.get("tool_call_id")
        for i in range(start, end):
            obj = out.get(i) or _as_dict(i, messages[i])
            kind_of = obj.get("type")
            family = _BY_OUTPUT.get(kind_of)  # type: ignore[arg-type]
            if family is _COMPUTER:
                # A screenshot has no text to cut: kept as it is (the recount prices it).
                continue
            if family is not None and obj.get(_output_key(obj, family)) == key:
                obj = dict(obj)
                if family is _SHELL:
                    obj["output"] = _shell_chunks(obj.get("output"), text)
                else:
                    obj["reason" if family is _MCP_APPROVAL else "output"] = text
            elif kind_of == "mcp_call" and obj.get("id") == key:
                # The text already opens with the error an errored call reported.
                obj = {k2: v for k2, v in obj.items() if k2 != "error"}
                obj["output"] = text
            else:
                continue
            out[i] = obj
            break
    return out


def _call_families(messages: Sequence[Any]) -> dict[str, tuple[_Family, int]]:
    """Call id -> family and item, for writing a synthesized output of the right type."""
    out: dict[str, tuple[_Family, int]] = {}
    for i, raw in enumerate(messages):
        obj = _as_dict(i, raw)
        family = _BY_CALL.get(obj.get("type"))  # type: ignore[arg-type]
        if family is not None and isinstance(obj.get(family.call_key), str):
            out.setdefault(obj[family.call_key], (family, i))
    return out


def _synthesized(family: _Family, key: str, at: int) -> dict[str, Any]:
    """The output ringbound writes for call ``key`` (item ``at``), which had none."""
    if family is _MCP_APPROVAL:
        # An unanswered approval is declined: the one answer that executes nothing.
        return {
            "type": "mcp_approval_response",
            "approval_request_id": key,
            "approve": False,
            "reason": SYNTHESIZED_RESULT_TEXT,
        }
    if family is _COMPUTER:
        # A computer call's output is a screenshot: there is none to write for it.
        raise PairingError(
            f"computer_call {key} has no computer_call_output, and none can be synthesized: "
            "its output is a screenshot only the caller's computer can take",
            issues=[PairingIssue("missing_result", key, at, NO_COMPUTER_OUTPUT.format(id=key))],
        )
    if family is _SHELL:
        return {"type": family.output, "call_id": key, "output": _shell_chunks(None, "")}
    if family is _APPLY_PATCH:
        return {
            "type": family.output,
            "call_id": key,
            "status": "failed",
            "output": SYNTHESIZED_RESULT_TEXT,
        }
    return {"type": family.output, "call_id": key, "output": SYNTHESIZED_RESULT_TEXT}


def _shell_chunks(original: Any, stdout: str) -> list[dict[str, Any]]:
    """A shell output of one chunk: ``stdout`` (a cut text), or with no text the synthesized
    failure; the outcome of the original's last chunk when there is one."""
    outcome: Any = {"type": "exit", "exit_code": 1}
    if isinstance(original, list) and original and isinstance(original[-1], dict):
        outcome = original[-1].get("outcome", outcome)
    if not stdout:
        return [{"stdout": "", "stderr": SYNTHESIZED_RESULT_TEXT, "outcome": outcome}]
    return [{"stdout": stdout, "stderr": "", "outcome": outcome}]
