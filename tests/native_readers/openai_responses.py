"""The Python readers of OpenAI Responses input items and instructions, which
``ringbound.providers.openai_responses`` held until the core became the only reader. They stay
as the differential oracles for the core's reading (``tests/providers/test_system_read.py``,
``test_tools_read.py``), and the oracle's rendering
(``tests/providers/openai_responses_oracle.py``) reads through them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ringbound import _core
from ringbound.errors import InvalidMessageError
from ringbound.providers.base import UnreadableObject, as_mapping, guarded
from ringbound.providers.openai_responses import ITEM_TYPES

# OpenAI's 400 wordings, as quoted from the API in public issue threads (docs/providers/
# openai_responses.md lists the sources). Where OpenAI's wording for a case is not on record the
# message is ringbound's own and says so.
NO_FUNCTION_OUTPUT = "No tool output found for function call {id}."
NO_CUSTOM_OUTPUT = "No tool output found for custom tool call {id}."
NO_LOCAL_SHELL_OUTPUT = "No tool output found for local shell call {id}."
NO_COMPUTER_OUTPUT = "ringbound: computer_call {id} has no computer_call_output."
NO_FUNCTION_CALL = "No tool call found for function call output with call_id {id}."
NO_CUSTOM_CALL = "No tool call found for custom tool call output with call_id {id}."


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
    #: A built-in tool's call: its name, and the keys of what it is asked to do (the first
    #: one present is the call's arguments).
    builtin: tuple[str, tuple[str, ...]] | None = None


def _builtin(name: str, call: str, no_output: str | None, actions: tuple[str, ...]) -> _Family:
    """A built-in tool's call and output pair, keyed by ``call_id``."""
    output = f"{call}_output"
    return _Family(
        name,
        call,
        output,
        "call_id",
        "call_id",
        no_output or f"ringbound: {call} {{id}} has no {output}.",
        f"ringbound: {output} answers no {call} {{id}}.",
        (name, actions),
    )


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
_COMPUTER = _builtin("computer", "computer_call", NO_COMPUTER_OUTPUT, ("action", "actions"))
_SHELL = _builtin("shell", "shell_call", None, ("action",))
_LOCAL_SHELL = _builtin("local_shell", "local_shell_call", NO_LOCAL_SHELL_OUTPUT, ("action",))
_APPLY_PATCH = _builtin("apply_patch", "apply_patch_call", None, ("operation",))
_FAMILIES = (_FUNCTION, _CUSTOM, _MCP_APPROVAL, _COMPUTER, _SHELL, _LOCAL_SHELL, _APPLY_PATCH)
_BY_CALL = {f.call: f for f in _FAMILIES}
_BY_OUTPUT = {f.output: f for f in _FAMILIES}
_ROLES = ("user", "assistant", "system", "developer")
_DETAILS = ("low", "high", "auto")


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


@dataclass
class _Item:
    """One input item, checked, as its pairing needs it (the differential oracle under
    ``tests/providers`` walks these; the core reads and prices the content)."""

    index: int
    type: str
    #: ``user``, ``instruction``, ``model`` (produced by the model), ``output``,
    #: ``compaction`` or ``trigger``.
    kind: str
    #: The canonical tool call of a call item (paired or hosted).
    call: dict[str, Any] | None = None
    family: _Family | None = None
    #: The pairing key of a call or output item.
    key: str | None = None
    item_id: str | None = None


def _text_part(i: int, p: int, part: dict[str, Any], key: str = "text") -> None:
    _string(i, part, key, where=f"content[{p}].")


def _check_image(i: int, p: int, part: dict[str, Any], where: str) -> None:
    """An ``input_image``: an ``image_url`` or a ``file_id``, and a known ``detail``."""
    url = _string(i, part, "image_url", where=f"{where}[{p}].", required=False)
    file_id = _string(i, part, "file_id", where=f"{where}[{p}].", required=False)
    if url is None and file_id is None:
        raise _invalid(i, f"{where}[{p}] is an input_image with neither `image_url` nor `file_id`")
    detail = _get(part, "detail")
    if detail is not None and detail not in _DETAILS:
        raise _invalid(i, f"{where}[{p}].detail must be one of low, high, auto, got {detail!r}")


def _message(i: int, obj: dict[str, Any]) -> _Item:
    role = _get(obj, "role")
    if not isinstance(role, str):
        raise _invalid(i, f"`role` must be a string, got {_type_name(role)}")
    if role not in _ROLES:
        raise _invalid(
            i, f"unknown role '{role}' (expected one of user, assistant, system, developer)"
        )
    item = _Item(i, "message", {"user": "user", "assistant": "model"}.get(role, "instruction"))
    content = _get(obj, "content")
    if isinstance(content, str):
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
            _text_part(i, p, part)
        elif role == "assistant" and kind_of == "refusal":
            _text_part(i, p, part, "refusal")
        elif role != "assistant" and kind_of == "input_text":
            _text_part(i, p, part)
        elif role == "user" and kind_of == "input_image":
            _check_image(i, p, part, "content")
        elif role != "user" or kind_of != "input_file":
            raise _invalid(
                i, f"content[{p}] has type '{kind_of}', which role '{role}' cannot carry"
            )
    return item


def _check_output(i: int, output: Any, key: str) -> None:
    """A tool output: a string, or input_text / input_image / input_file parts."""
    if isinstance(output, str):
        return
    if not isinstance(output, list):
        raise _invalid(i, f"`{key}` must be a string or a list of parts, got {_type_name(output)}")
    for p, part in enumerate(output):
        if not isinstance(part, dict):
            raise _invalid(i, f"{key}[{p}] must be an object, got {_type_name(part)}")
        kind = _get(part, "type")
        if kind == "input_text":
            _string(i, part, "text", where=f"{key}[{p}].")
        elif kind == "input_image":
            _check_image(i, p, part, key)
        elif kind != "input_file":
            raise _invalid(
                i, f"{key}[{p}] has type {kind!r}; expected input_text, input_image, input_file"
            )


def _reasoning(i: int, obj: dict[str, Any]) -> _Item:
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
            _string(i, part, text_key, where=f"{key}[{p}].")
    _string(i, obj, "encrypted_content", required=False)
    return _Item(i, "reasoning", "model")


def _paired_call(i: int, obj: dict[str, Any], family: _Family) -> _Item:
    key = _string(i, obj, family.call_key)
    if not key:
        raise _invalid(i, f"`{family.call_key}` is empty")
    item = _Item(i, family.call, "model", family=family, key=key)
    if family.builtin is not None:
        # A built-in tool: its name, and what it is asked to do as compact JSON.
        tool, keys = family.builtin
        action = next((obj[k] for k in keys if _get(obj, k) is not None), None)
        if action is None:
            raise _invalid(i, f"missing `{keys[0]}`")
        item.call = {
            "id": key,
            "type": "function",
            "function": {"name": tool, "arguments": _compact(action)},
        }
        return item
    name = _string(i, obj, "name")
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
        _string(i, obj, "server_label")
    return item


def _output_key(obj: dict[str, Any], family: _Family) -> str:
    """The key an output names its call by: the API reads a local shell output's ``call_id``,
    which the SDK's type calls ``id``, so that one stands in when ``call_id`` is absent."""
    if family is _LOCAL_SHELL and _get(obj, "call_id") is None:
        return "id"
    return family.output_key


def _paired_output(i: int, obj: dict[str, Any], family: _Family) -> _Item:
    key_name = _output_key(obj, family)
    key = _string(i, obj, key_name)
    if not key:
        raise _invalid(i, f"`{key_name}` is empty")
    item = _Item(i, family.output, "output", family=family, key=key)
    if family is _COMPUTER:
        shot = _get(obj, "output")
        if not isinstance(shot, dict):
            raise _invalid(
                i, f"`output` must be a computer_screenshot object, got {_type_name(shot)}"
            )
        _check_image(i, 0, shot, "output")
        checks = _get(obj, "acknowledged_safety_checks")
        if checks is not None:
            _compact(checks)
    elif family is _SHELL:
        _check_shell_output(i, _get(obj, "output"))
    elif family is _APPLY_PATCH:
        _string(i, obj, "status")
        _string(i, obj, "output", required=False)
    elif family is _MCP_APPROVAL:
        approve = _get(obj, "approve")
        if not isinstance(approve, bool):
            raise _invalid(i, f"`approve` must be a boolean, got {_type_name(approve)}")
        _string(i, obj, "reason", required=False)
    else:
        output = _get(obj, "output")
        if output is None:
            raise _invalid(i, "missing `output`")
        _check_output(i, output, "output")
    return item


def _check_shell_output(i: int, chunks: Any) -> None:
    """A shell call's output chunks, each with a ``stdout`` and a ``stderr``."""
    if not isinstance(chunks, list):
        raise _invalid(i, f"`output` must be a list of output chunks, got {_type_name(chunks)}")
    for c, chunk in enumerate(chunks):
        if not isinstance(chunk, dict):
            raise _invalid(i, f"output[{c}] must be an object, got {_type_name(chunk)}")
        for key in ("stdout", "stderr"):
            _string(i, chunk, key, where=f"output[{c}].")


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
    # A hosted item is sent as it is: it must be JSON (an image's ``result`` is base64 text).
    _compact({k: v for k, v in obj.items() if v is not None and k != "result"})
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
    if kind == "item_reference":
        raise _invalid(
            i,
            "item type 'item_reference' is not supported: it names a stored item whose content "
            "and pairing ringbound cannot see; send the item itself",
        )
    if kind not in ITEM_TYPES:
        raise _invalid(
            i,
            f"item type '{kind}' is not supported (supported: {', '.join(ITEM_TYPES)}); "
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
    elif kind == "compaction":
        _string(i, obj, "encrypted_content")
        item = _Item(i, kind, "compaction")
    elif kind == "compaction_trigger":
        item = _Item(i, kind, "trigger")
    else:
        item = _hosted(i, obj, kind)
    if item.family is not _LOCAL_SHELL or _output_key(obj, item.family) != "id":
        item.item_id = _string(i, obj, "id", required=False)
    return item


def _parse_all(messages: Sequence[Any]) -> list[_Item]:
    return guarded(_parse_all_uncached, messages)


def _check_list(messages: Any) -> None:
    if isinstance(messages, (str, bytes, dict)) or not isinstance(messages, Sequence):
        raise InvalidMessageError(
            f"input must be a list of items, got {type(messages).__name__}",
            index=None,
            reason=f"must be a list, got {type(messages).__name__}",
        )


def _parse_all_uncached(messages: Sequence[Any]) -> list[_Item]:
    _check_list(messages)
    items = [_parse(i, m) for i, m in enumerate(messages)]
    trigger = next((it for it in items if it.kind == "trigger"), None)
    if trigger is not None and trigger.index != len(items) - 1:
        raise _invalid(trigger.index, _core.TRIGGER_NOT_LAST)
    if trigger is not None and trigger.item_id is not None:
        raise _invalid(trigger.index, _core.TRIGGER_WITH_ID)
    return items


def _instructions(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system
    raise InvalidMessageError(
        f"instructions must be a string, got {_type_name(system)}",
        index=None,
        reason=f"instructions must be a string, got {_type_name(system)}",
    )


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
