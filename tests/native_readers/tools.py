"""The Python readers of each provider's tool definitions, which the adapters held until the
core read them (``_core.tools_as_openai``): the differential oracle for the core's reading
(``tests/providers/test_tools_read.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from native_readers.anthropic import _compact, _plain, _without_cache_control
from native_readers.anthropic import _invalid as _a_invalid
from native_readers.bedrock_converse import _invalid as _b_invalid
from native_readers.bedrock_converse import _list, _member
from native_readers.gemini import _function, _tool_error, _tool_view
from native_readers.openai_responses import _tool_dict
from ringbound.errors import InvalidMessageError
from ringbound.providers.gemini import _get


def anthropic(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """Anthropic tool definitions as OpenAI functions; server tools (``type`` other than
    ``custom``) by their definition. The core adds the tool-use system prompt Anthropic
    adds whenever tools are given.

    Raises:
        InvalidMessageError: ``tools`` is not a list of tool objects.
    """
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise _a_invalid(None, f"tools must be a list of tool objects, got {type(tools).__name__}")
    out = []
    for k, obj in enumerate(tools):
        tool = _plain(obj)
        if tool is None or not isinstance(tool.get("name"), str):
            raise _a_invalid(None, f"tools[{k}] must be an object with a string `name`")
        schema = tool.get("input_schema")
        if isinstance(schema, Mapping):
            description = tool.get("description")
            function = {
                "name": tool["name"],
                "description": description if isinstance(description, str) else "",
                "parameters": schema,
            }
        else:
            function = {
                "name": tool["name"],
                "description": _compact(_without_cache_control(tool)),
            }
        out.append({"type": "function", "function": function})
    return out


def gemini(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``tools[].functionDeclarations`` as OpenAI function tools; built-in tools (Google
    Search, code execution, ...) as a function named after the tool, so they are counted."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise InvalidMessageError(
            f"tools must be a list of Tool objects, got {type(tools).__name__}",
            index=None,
            reason=f"tools must be a list, got {type(tools).__name__}",
        )
    out: list[dict[str, Any]] = []
    for t, raw in enumerate(tools):
        tool = _tool_view(raw, f"tools[{t}]")
        for key, value in tool.items():
            if value is None:
                continue
            if key not in ("functionDeclarations", "function_declarations"):
                out.append(_function(key, "", value if isinstance(value, Mapping) else {}))
                continue
            if not isinstance(value, (list, tuple)):
                raise _tool_error(f"tools[{t}].{key} must be a list")
            for d, raw_decl in enumerate(value):
                decl = _tool_view(raw_decl, f"tools[{t}].{key}[{d}]")
                name = decl.get("name")
                if not isinstance(name, str) or not name:
                    raise _tool_error(f"tools[{t}].{key}[{d}].name must be a non-empty string")
                params = _get(decl, "parametersJsonSchema", "parameters_json_schema")
                if params is None:
                    params = decl.get("parameters")
                description = decl.get("description")
                out.append(
                    _function(
                        name,
                        description if isinstance(description, str) else "",
                        params if isinstance(params, Mapping) else {},
                    )
                )
    return out


def bedrock_converse(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``toolConfig.tools`` entries (``toolSpec``; ``cachePoint`` entries skipped) as
    OpenAI function tools."""
    out: list[dict[str, Any]] = []
    for t, tool in enumerate(_list(None, tools, "tools")):
        kind, spec = _member(None, tool, f"tools[{t}]")
        if kind == "cachePoint":
            continue
        if kind != "toolSpec":
            raise _b_invalid(None, f"tools[{t}] has type {kind}; expected toolSpec or cachePoint")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise _b_invalid(None, f"tools[{t}].toolSpec needs a string `name`")
        schema = spec.get("inputSchema")
        parameters = schema.get("json") if isinstance(schema, Mapping) else None
        if not isinstance(parameters, Mapping):
            raise _b_invalid(None, f"tools[{t}].toolSpec.inputSchema.json must be an object")
        function: dict[str, Any] = {"name": spec["name"], "parameters": dict(parameters)}
        if spec.get("description") is not None:
            if not isinstance(spec["description"], str):
                raise _b_invalid(None, f"tools[{t}].toolSpec.description must be a string")
            function["description"] = spec["description"]
        out.append({"type": "function", "function": function})
    return out


def openai_responses(tools: Sequence[Any]) -> list[dict[str, Any]]:
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


#: Each provider's reader, by key.
READERS = {
    "anthropic": anthropic,
    "gemini": gemini,
    "bedrock_converse": bedrock_converse,
    "openai_responses": openai_responses,
}
