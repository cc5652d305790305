"""OpenAI Responses API: the ``input`` items of ``responses.create`` mapped onto the canonical
view. Calls pair with their outputs by ``call_id`` anywhere later in the list, so the items
from a call run to its last output become one tool ring; a ``reasoning`` item and the items of
its model turn become one canonical message, so neither ever travels without the other."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core import SYNTHESIZED_RESULT_TEXT
from ..errors import InvalidMessageError, PairingIssue
from .base import Canonical, PlanItem, Rendered, UnreadableObject, as_mapping, read_once

__all__ = ["ADAPTER", "OpenAIResponses"]

# OpenAI's 400 wordings, as quoted from the API in public issue threads (docs/providers/
# openai_responses.md lists the sources). Where OpenAI's wording for a case is not on record the
# message is ringbound's own and says so.
NO_FUNCTION_OUTPUT = "No tool output found for function call {id}."
NO_CUSTOM_OUTPUT = "No tool output found for custom tool call {id}."
NO_FUNCTION_CALL = "No tool call found for function call output with call_id {id}."
NO_CUSTOM_CALL = "No tool call found for custom tool call output with call_id {id}."
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


@dataclass(frozen=True)
class _Family:
    """A pair of item types answering each other: the call, its output and their key fields."""

    name: str
    call: str
    output: str
    call_key: str
    output_key: str
    no_output: str
    no_call: str


_FUNCTION = _Family(
    "function",
    "function_call",
    "function_call_output",
    "call_id",
    "call_id",
    NO_FUNCTION_OUTPUT,
    NO_FUNCTION_CALL,
)
_CUSTOM = _Family(
    "custom",
    "custom_tool_call",
    "custom_tool_call_output",
    "call_id",
    "call_id",
    NO_CUSTOM_OUTPUT,
    NO_CUSTOM_CALL,
)
_MCP_APPROVAL = _Family(
    "mcp_approval",
    "mcp_approval_request",
    "mcp_approval_response",
    "id",
    "approval_request_id",
    "ringbound: mcp_approval_request {id} has no mcp_approval_response.",
    "ringbound: mcp_approval_response answers no mcp_approval_request {id}.",
)
_FAMILIES = (_FUNCTION, _CUSTOM, _MCP_APPROVAL)
_BY_CALL = {f.call: f for f in _FAMILIES}
_BY_OUTPUT = {f.output: f for f in _FAMILIES}
#: Items the model produced that carry their own result (hosted tools): counted as the JSON
#: they are; an ``mcp_call`` also becomes a call and its result, so its side effect is ledgered.
_HOSTED = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
)
_SUPPORTED = ("message", "reasoning", *_BY_CALL, *_BY_OUTPUT, *_HOSTED)
_ROLES = ("user", "assistant", "system", "developer")
_DETAILS = ("low", "high", "auto")

#: Tokens every item costs beyond its texts: Chat framing (3) plus the role's one token. Items
#: folded into one canonical message are charged it each, so folding never lowers the count.
_ITEM_FRAMING = 4
#: OpenAI's image price when the size is unknown: the vision formula's maximum (a 768 x 2048
#: image, 8 tiles: 85 + 8 x 170), and the fixed price of ``detail: low``.
_IMAGE_TOKENS = {"low": 85, "high": 1445, "auto": 1445}
#: Opaque payloads (files) cost a token per three bytes, as the core prices them in Chat.
_BYTES_PER_TOKEN = 3


def _reserve(tokens: int) -> str:
    """A text costing exactly ``tokens`` tokens in o200k_base and cl100k_base (`` x`` is one
    token in both), standing for content the core cannot see in a tool result."""
    return " x" * tokens


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _invalid(i: int, reason: str) -> InvalidMessageError:
    return InvalidMessageError(f"input[{i}]: {reason}", index=i, reason=reason)


def _as_dict(i: int, raw: Any) -> dict[str, Any]:
    try:
        data = as_mapping(raw)
    except UnreadableObject as e:
        raise _invalid(i, str(e)) from None
    if data is None:
        raise _invalid(i, f"an input item must be an object, got {_type_name(raw)}")
    return data if isinstance(data, dict) else dict(data)


def _get(obj: dict[str, Any], key: str) -> Any:
    """A key, ``None`` when absent or null (SDKs write null for absent keys)."""
    return obj.get(key)


def _string(
    i: int, obj: dict[str, Any], key: str, *, where: str = "", required: bool = True
) -> Any:
    value = _get(obj, key)
    if value is None:
        if required:
            raise _invalid(i, f"missing `{where}{key}`")
        return None
    if not isinstance(value, str):
        raise _invalid(i, f"`{where}{key}` must be a string, got {_type_name(value)}")
    # A str subclass is read as its characters: its own __str__ may raise where it is quoted.
    return str.__str__(value)


#: ``json.dumps`` with any option builds a new encoder per call; one made once writes the same.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _compact(value: Any) -> str:
    try:
        return _COMPACT.encode(value)
    except Exception as e:  # not JSON, or the caller's own object raised while read
        reason = f"a value is not JSON ({type(e).__name__}: {e})"
        raise InvalidMessageError(reason, index=None, reason=reason) from None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else _compact(value)


@dataclass
class _Item:
    """One input item as the canonical view needs it."""

    index: int
    type: str
    #: ``user``, ``instruction``, ``model`` (produced by the model) or ``output``.
    kind: str
    role: str | None = None
    #: Texts the model reads, in order (for ``user`` items only the text parts).
    texts: list[str] = field(default_factory=list)
    #: Canonical content parts of a user or instruction message.
    parts: list[dict[str, Any]] = field(default_factory=list)
    #: The canonical tool call of a call item (paired or hosted).
    call: dict[str, Any] | None = None
    family: _Family | None = None
    #: The pairing key of a call or output item.
    key: str | None = None
    #: The result text of a hosted call that becomes a canonical call (``mcp_call``).
    result: str | None = None
    item_id: str | None = None


def _text_part(i: int, p: int, part: dict[str, Any], key: str = "text") -> str:
    return _string(i, part, key, where=f"content[{p}].")


def _image_part(i: int, p: int, part: dict[str, Any], where: str) -> tuple[str, str]:
    """(url, detail) of an ``input_image``; a file id stands in for the URL (size unknown)."""
    url = _string(i, part, "image_url", where=f"{where}[{p}].", required=False)
    file_id = _string(i, part, "file_id", where=f"{where}[{p}].", required=False)
    if url is None and file_id is None:
        raise _invalid(i, f"{where}[{p}] is an input_image with neither `image_url` nor `file_id`")
    detail = _get(part, "detail")
    if detail is None:
        detail = "auto"
    if detail not in _DETAILS:
        raise _invalid(i, f"{where}[{p}].detail must be one of low, high, auto, got {detail!r}")
    return (url if url is not None else f"file:{file_id}"), detail


def _file_tokens(part: dict[str, Any]) -> int:
    return math.ceil(len(_compact(part).encode()) / _BYTES_PER_TOKEN)


def _message(i: int, obj: dict[str, Any]) -> _Item:
    role = _get(obj, "role")
    if not isinstance(role, str):
        raise _invalid(i, f"`role` must be a string, got {_type_name(role)}")
    if role not in _ROLES:
        raise _invalid(
            i, f"unknown role '{role}' (expected one of user, assistant, system, developer)"
        )
    kind = {"user": "user", "assistant": "model"}.get(role, "instruction")
    item = _Item(i, "message", kind, role=role)
    content = _get(obj, "content")
    if isinstance(content, str):
        item.texts.append(content)
        item.parts.append({"type": "text", "text": content})
        return item
    if not isinstance(content, list):
        raise _invalid(
            i, f"`content` must be a string or a list of parts, got {_type_name(content)}"
        )
    for p, part in enumerate(content):
        if not isinstance(part, dict):
            raise _invalid(i, f"content[{p}] must be an object, got {_type_name(part)}")
        kind_of = _get(part, "type")
        if not isinstance(kind_of, str):
            raise _invalid(i, f"content[{p}] has no string `type`")
        if role == "assistant" and kind_of == "output_text":
            item.texts.append(_text_part(i, p, part))
        elif role == "assistant" and kind_of == "refusal":
            item.texts.append(_text_part(i, p, part, "refusal"))
        elif role != "assistant" and kind_of == "input_text":
            text = _text_part(i, p, part)
            item.texts.append(text)
            item.parts.append({"type": "text", "text": text})
        elif role == "user" and kind_of == "input_image":
            url, detail = _image_part(i, p, part, "content")
            item.parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
        elif role == "user" and kind_of == "input_file":
            body = {k: v for k, v in part.items() if k != "type" and v is not None}
            item.parts.append({"type": "file", "file": body})
        else:
            raise _invalid(
                i, f"content[{p}] has type '{kind_of}', which role '{role}' cannot carry"
            )
    return item


def _output_texts(i: int, output: Any, key: str) -> list[str]:
    """Texts of a tool output: a string, or input_text / input_image / input_file parts (images
    and files are reserved at their price, since a canonical tool message holds only text)."""
    if isinstance(output, str):
        return [output]
    if not isinstance(output, list):
        raise _invalid(i, f"`{key}` must be a string or a list of parts, got {_type_name(output)}")
    texts = []
    for p, part in enumerate(output):
        if not isinstance(part, dict):
            raise _invalid(i, f"{key}[{p}] must be an object, got {_type_name(part)}")
        kind = _get(part, "type")
        if kind == "input_text":
            texts.append(_string(i, part, "text", where=f"{key}[{p}]."))
        elif kind == "input_image":
            _, detail = _image_part(i, p, part, key)
            texts.append(_reserve(_IMAGE_TOKENS[detail]))
        elif kind == "input_file":
            texts.append(_reserve(_file_tokens(part)))
        else:
            raise _invalid(
                i, f"{key}[{p}] has type {kind!r}; expected input_text, input_image, input_file"
            )
    return texts


def _reasoning(i: int, obj: dict[str, Any]) -> _Item:
    item = _Item(i, "reasoning", "model")
    for key, text_key, part_type in (
        ("summary", "text", "summary_text"),
        ("content", "text", "reasoning_text"),
    ):
        parts = _get(obj, key)
        if parts is None:
            continue
        if not isinstance(parts, list):
            raise _invalid(i, f"`{key}` must be a list, got {_type_name(parts)}")
        for p, part in enumerate(parts):
            if not isinstance(part, dict) or _get(part, "type") != part_type:
                raise _invalid(i, f"{key}[{p}] must be a {part_type} part")
            item.texts.append(_string(i, part, text_key, where=f"{key}[{p}]."))
    # Encrypted reasoning is counted as the text it is: its BPE count exceeds the reasoning
    # tokens it seals, which is the safe side of the budget.
    encrypted = _string(i, obj, "encrypted_content", required=False)
    if encrypted:
        item.texts.append(encrypted)
    return item


def _paired_call(i: int, obj: dict[str, Any], family: _Family) -> _Item:
    key = _string(i, obj, family.call_key)
    if not key:
        raise _invalid(i, f"`{family.call_key}` is empty")
    name = _string(i, obj, "name")
    item = _Item(i, family.call, "model", family=family, key=key)
    if family is _CUSTOM:
        body = _string(i, obj, "input")
        item.call = {"id": key, "type": "custom", "custom": {"name": name, "input": body}}
    else:
        arguments = _string(i, obj, "arguments")
        item.call = {
            "id": key,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
    if family is _MCP_APPROVAL:
        item.texts.append(_string(i, obj, "server_label"))
    return item


def _paired_output(i: int, obj: dict[str, Any], family: _Family) -> _Item:
    key = _string(i, obj, family.output_key)
    if not key:
        raise _invalid(i, f"`{family.output_key}` is empty")
    item = _Item(i, family.output, "output", family=family, key=key)
    if family is _MCP_APPROVAL:
        approve = _get(obj, "approve")
        if not isinstance(approve, bool):
            raise _invalid(i, f"`approve` must be a boolean, got {_type_name(approve)}")
        reason = _string(i, obj, "reason", required=False)
        # The reason when there is one (so the error response ringbound writes counts exactly
        # as the core priced it), else the decision.
        item.texts.append(reason if reason else ("approved" if approve else "denied"))
    else:
        output = _get(obj, "output")
        if output is None:
            raise _invalid(i, "missing `output`")
        item.texts.extend(_output_texts(i, output, "output"))
    return item


def _hosted(i: int, obj: dict[str, Any], kind: str) -> _Item:
    item = _Item(i, kind, "model")
    if kind == "mcp_call":
        key = _string(i, obj, "id")
        name = _string(i, obj, "name")
        arguments = _string(i, obj, "arguments")
        item.key = key
        item.call = {
            "id": key,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        error, output = _get(obj, "error"), _get(obj, "output")
        # An error first, so the core reads the result as a failure.
        head = [] if error is None else [f"Error: {_as_text(error)}"]
        item.result = "\n".join(head + ([] if output is None else [_as_text(output)]))
        label = _get(obj, "server_label")
        if label is not None:
            item.texts.append(_as_text(label))
        return item
    body = {k: v for k, v in obj.items() if v is not None and k != "result"}
    item.texts.append(_compact(body))
    if kind == "image_generation_call" and _get(obj, "result") is not None:
        item.texts.append(_reserve(_IMAGE_TOKENS["high"]))
    return item


def _parse(i: int, raw: Any) -> _Item:
    obj = _as_dict(i, raw)
    kind = _get(obj, "type")
    if kind is None:
        if "role" not in obj:
            raise _invalid(i, "missing `type` (and no `role`: not a message)")
        kind = "message"
    if not isinstance(kind, str):
        raise _invalid(i, f"`type` must be a string, got {_type_name(kind)}")
    if kind not in _SUPPORTED:
        raise _invalid(
            i,
            f"item type '{kind}' is not supported (supported: {', '.join(_SUPPORTED)}); "
            "ringbound cannot count or pair what it cannot read",
        )
    if kind == "message":
        item = _message(i, obj)
    elif kind == "reasoning":
        item = _reasoning(i, obj)
    elif kind in _BY_CALL:
        item = _paired_call(i, obj, _BY_CALL[kind])
    elif kind in _BY_OUTPUT:
        item = _paired_output(i, obj, _BY_OUTPUT[kind])
    else:
        item = _hosted(i, obj, kind)
    item.item_id = _string(i, obj, "id", required=False)
    return item


def _parse_all(messages: Sequence[Any]) -> list[_Item]:
    return read_once("openai_responses", messages, _parse_all_uncached)


def _parse_all_uncached(messages: Sequence[Any]) -> list[_Item]:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"input must be a list of items, got {type(messages).__name__}",
            index=None,
            reason=f"must be a list, got {type(messages).__name__}",
        )
    return [_parse(i, m) for i, m in enumerate(messages)]


def _instructions(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system
    raise InvalidMessageError(
        f"instructions must be a string, got {_type_name(system)}",
        index=None,
        reason=f"instructions must be a string, got {_type_name(system)}",
    )


class _Walk:
    """One pass over the items building the canonical view and the pairing issues together, so
    that what the validator accepts is exactly what the canonical view pairs.

    A model turn (consecutive items the model produced) is one canonical assistant message. When
    it makes calls, the ring runs until each call has its output: outputs become tool messages,
    and model items met on the way (a late reasoning item, another call) fold into the ring. A
    user or instruction message ends a ring; calls still open there have no adjacent output."""

    def __init__(self, items: list[_Item], system: str | None) -> None:
        self.items = items
        self.messages: list[dict[str, Any]] = []
        self.spans: list[tuple[int, int]] = []
        self.folded: list[int] = []
        #: (index, rank, issue): sorted by index, then by rank within one item.
        self.found: list[tuple[int, int, PairingIssue]] = []
        self.called: dict[str, int] = {}
        self.answered: dict[str, int] = {}
        self.family: dict[str, _Family] = {}
        #: Calls whose ring ended without their output: call id -> call index.
        self.unanswered: dict[str, int] = {}
        self.later: dict[str, list[int]] = {}
        for it in items:
            if it.family is not None and it.kind == "model" and it.key is not None:
                self.later.setdefault(it.key, []).append(it.index)
        if system is not None:
            self._add({"role": "system", "content": system}, (-1, -1))
        self._check_ids()
        self._check_reasoning()
        i = 0
        while i < len(items):
            i = self._step(i)
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

    # -- building

    def _add(self, message: dict[str, Any], span: tuple[int, int]) -> None:
        self.messages.append(message)
        self.spans.append(span)
        self.folded.append(1)

    def _fold(self, item: _Item) -> None:
        """Item texts into the last canonical message, whose span grows to cover the item."""
        last = self.messages[-1]
        content = last.setdefault("content", [])
        if not isinstance(content, list):
            content = last["content"] = [{"type": "text", "text": content}]
        content.extend({"type": "text", "text": t} for t in item.texts)
        start, _ = self.spans[-1]
        self.spans[-1] = (start, item.index + 1)
        self.folded[-1] += 1

    def canonical(self) -> Canonical:
        for message, folded in zip(self.messages, self.folded, strict=True):
            if folded > 1:
                content = message.setdefault("content", [])
                content.append({"type": "text", "text": _reserve(_ITEM_FRAMING * (folded - 1))})
        return Canonical(self.messages, self.spans, [False] * len(self.messages))

    def issues(self) -> list[PairingIssue]:
        return [issue for _, _, issue in self.found]

    # -- checks

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

    # -- the walk

    def _step(self, i: int) -> int:
        it = self.items[i]
        if it.kind == "user":
            self._add({"role": "user", "content": it.parts}, (i, i + 1))
            return i + 1
        if it.kind == "instruction":
            self._add({"role": it.role, "content": it.parts}, (i, i + 1))
            return i + 1
        if it.kind == "output":
            self._output(it, {})
            return i + 1
        return self._turn(i)

    def _turn(self, i: int) -> int:
        items = self.items
        j = i
        while j < len(items) and items[j].kind == "model":
            j += 1
        turn = items[i:j]
        texts = [t for it in turn for t in it.texts]
        calls = [it for it in turn if it.call is not None]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": [{"type": "text", "text": t} for t in texts],
        }
        self._add(message, (i, j))
        self.folded[-1] = j - i
        if not calls:
            return j
        message["tool_calls"] = []
        open_calls: dict[str, int] = {}
        for it in calls:
            self._call(it, message, open_calls, (i, j))
        k = j
        while open_calls and k < len(items):
            it = items[k]
            if it.kind == "output":
                self._output(it, open_calls)
            elif it.kind == "model":
                if it.call is not None:
                    self._call(it, message, open_calls, (k, k + 1), fold=it)
                else:
                    self._fold(it)
            else:
                break
            k += 1
        for key, at in open_calls.items():
            self.unanswered[key] = at
        return k

    def _call(
        self,
        it: _Item,
        message: dict[str, Any],
        open_calls: dict[str, int],
        span: tuple[int, int],
        fold: _Item | None = None,
    ) -> None:
        """A call joins the ring's assistant message; a hosted call's result, or the texts of
        a call met inside the ring, go where the ring stands."""
        message["tool_calls"].append(it.call)
        if it.family is None:
            texts = [it.result or "", *(it.texts if fold is not None else ())]
            self._add(
                {
                    "role": "tool",
                    "tool_call_id": it.key,
                    "content": [{"type": "text", "text": t} for t in texts],
                },
                span,
            )
            return
        if fold is not None:
            self._fold(fold)
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
        self._add(
            {
                "role": "tool",
                "tool_call_id": key,
                "content": [{"type": "text", "text": t} for t in it.texts],
            },
            (it.index, it.index + 1),
        )
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


def _synthesized(family: _Family, key: str) -> dict[str, Any]:
    if family is _MCP_APPROVAL:
        # An unanswered approval is declined: the one answer that executes nothing.
        return {
            "type": "mcp_approval_response",
            "approval_request_id": key,
            "approve": False,
            "reason": SYNTHESIZED_RESULT_TEXT,
        }
    return {"type": family.output, "call_id": key, "output": SYNTHESIZED_RESULT_TEXT}


def _chat_texts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    return [p.get("text", p.get("refusal", "")) for p in content]


class OpenAIResponses:
    """The Responses API ``input`` list (``system`` is the ``instructions`` parameter)."""

    key = "openai_responses"
    image_formula = "openai"
    #: OpenAI publishes its tokenizers: the counts are exact o200k_base / cl100k_base.
    default_token_ratio = 1.0

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by the Responses API's rules, quoting OpenAI's wording."""
        return _Walk(_parse_all(messages), _instructions(system)).issues()

    def to_canonical(self, messages: Sequence[Any], *, system: Any = None) -> Canonical:
        """The canonical view; InvalidMessageError naming the input index on bad input."""
        return _Walk(_parse_all(messages), _instructions(system)).canonical()

    def render(
        self,
        messages: Sequence[Any],
        items: Sequence[PlanItem],
        canonical: Canonical,
        *,
        system: Any = None,
    ) -> Rendered:
        """The caller's own items the plan keeps, in order, plus new items for synthesized
        outputs, the ledger note and the summary note, and new copies of the items a rewrite
        changes; ``instructions`` returned as given."""
        replaced = _rewrites(messages, items, canonical)
        out: list[Any] = []
        last = -1
        families: dict[str, _Family] | None = None
        for item in items:
            if isinstance(item, int) or item[0] == "rewrite":
                k = item if isinstance(item, int) else item[1]
                start, end = canonical.spans[k]  # type: ignore[index]
                for i in range(max(start, last + 1), end):
                    out.append(replaced.get(i, messages[i]))
                    last = i
            elif item[0] == "synthesized":
                if families is None:
                    families = _call_families(messages)
                out.append(_synthesized(families.get(item[1], _FUNCTION), item[1]))
            else:
                out.append({"type": "message", "role": item[2], "content": item[1]})
        return Rendered(messages=out, system=system)

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """Function tools in Chat's shape; every other tool (custom, hosted, MCP) as given,
        which the core counts as the JSON it is."""
        out = []
        for i, raw in enumerate(tools):
            tool = raw if isinstance(raw, dict) else _tool_dict(i, raw)
            if tool.get("type") == "function" and "function" not in tool:
                function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
                if tool.get("strict") is not None:
                    function["strict"] = tool["strict"]
                out.append({"type": "function", "function": function})
            else:
                out.append(tool)
        return out

    def from_canonical(self, messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
        """Chat messages as Responses items: a leading system string becomes ``instructions``,
        assistant text an output message, each call a ``function_call`` (or
        ``custom_tool_call``), each tool message its output. Chat lets a call id recur in a
        later turn; Responses pairs by id across the request, so a recurring id is renamed
        (``id~2``) in its call and its outputs."""
        native: list[Any] = []
        system = None
        used: set[str] = set()
        block: dict[str, tuple[str, _Family]] = {}
        for k, m in enumerate(messages):
            role = m.get("role")
            content = m.get("content")
            if k == 0 and role == "system" and isinstance(content, str):
                system = content
            elif role in ("system", "developer", "user"):
                native.append(_chat_message(k, role, content))
            elif role == "assistant":
                texts = [t for t in _chat_texts(content) if t] + (
                    [m["refusal"]] if m.get("refusal") else []
                )
                if texts:
                    native.append(
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": t} for t in texts],
                        }
                    )
                block = {}
                for call in m.get("tool_calls") or ():
                    key = _unique(call["id"], used)
                    if call.get("type") == "custom":
                        body = call["custom"]
                        block.setdefault(call["id"], (key, _CUSTOM))
                        native.append(
                            {
                                "type": "custom_tool_call",
                                "call_id": key,
                                "name": body["name"],
                                "input": body["input"],
                            }
                        )
                    else:
                        body = call["function"]
                        block.setdefault(call["id"], (key, _FUNCTION))
                        native.append(
                            {
                                "type": "function_call",
                                "call_id": key,
                                "name": body["name"],
                                "arguments": body["arguments"],
                            }
                        )
            elif role == "tool":
                key, family = block.get(m["tool_call_id"], (m["tool_call_id"], _FUNCTION))
                output: Any = (
                    content
                    if isinstance(content, str)
                    else [{"type": "input_text", "text": t} for t in _chat_texts(content)]
                )
                native.append({"type": family.output, "call_id": key, "output": output})
            else:
                raise _invalid(k, f"role {role!r} has no Responses counterpart")
        return native, system


def _unique(key: str, used: set[str]) -> str:
    out, n = key, 1
    while out in used:
        n += 1
        out = f"{key}~{n}"
    used.add(out)
    return out


def _chat_message(k: int, role: str, content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": role, "content": content}
    parts = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == "image_url":
            image = part["image_url"]
            parts.append(
                {
                    "type": "input_image",
                    "image_url": image["url"],
                    "detail": image.get("detail") or "auto",
                }
            )
        elif kind == "file":
            parts.append({"type": "input_file", **part["file"]})
        else:
            raise _invalid(k, f"content part {kind!r} has no Responses counterpart")
    return {"type": "message", "role": role, "content": parts}


def _rewrites(
    messages: Sequence[Any], items: Sequence[PlanItem], canonical: Canonical
) -> dict[int, dict[str, Any]]:
    """New items for the plan's rewrites, by input index (several rewrites of one item apply
    in turn): a tool result's output becomes the text; a message's images become text parts."""
    out: dict[int, dict[str, Any]] = {}
    for item in items:
        if isinstance(item, int) or item[0] != "rewrite":
            continue
        _, k, kind, text = item  # type: ignore[misc]
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
            if family is not None and obj.get(family.output_key) == key:
                obj = dict(obj)
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


def _call_families(messages: Sequence[Any]) -> dict[str, _Family]:
    """Call id -> family, for writing a synthesized output of the right type."""
    out: dict[str, _Family] = {}
    for i, raw in enumerate(messages):
        obj = _as_dict(i, raw)
        family = _BY_CALL.get(obj.get("type"))  # type: ignore[arg-type]
        if family is not None and isinstance(obj.get(family.call_key), str):
            out.setdefault(obj[family.call_key], family)
    return out


def _tool_dict(i: int, raw: Any) -> dict[str, Any]:
    try:
        data = as_mapping(raw)
    except UnreadableObject:
        data = None
    if data is not None:
        return data if isinstance(data, dict) else dict(data)
    raise InvalidMessageError(
        f"tools[{i}]: a tool must be an object, got {_type_name(raw)}",
        index=None,
        reason=f"tools[{i}] must be an object",
    )


#: The adapter ``ringbound.providers.adapter("openai_responses")`` returns.
ADAPTER = OpenAIResponses()
