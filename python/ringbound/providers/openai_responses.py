"""OpenAI Responses API: the ``input`` items of ``responses.create``. The core reads them,
checks their pairing and maps them onto the canonical view, each part at its real cost
(``rust/src/providers/openai_responses``): calls pair with their outputs by ``call_id`` anywhere
later in the list, a ``reasoning`` item never travels without its model turn, a ``compaction``
item is kept verbatim and the latest one pinned (docs/providers/openai_responses.md). The core
also writes the items a plan describes; this module reads what the core needs from Python, and
the Python rendering it had is the tests' oracle for the core's writing
(``tests/providers/openai_responses_oracle.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._core import RESPONSES_ITEM_TYPES
from ..errors import InvalidMessageError
from .base import NativeAdapter, UnreadableObject, as_mapping

__all__ = ["ADAPTER", "OpenAIResponses"]


#: Every input item type read, in the order the refusal lists them: the core's list (one home,
#: rust/src/providers/openai_responses/parse/mod.rs). Its hosted tools' items
#: (``RESPONSES_HOSTED``), which carry their own result, are counted as the JSON they are; an
#: ``mcp_call`` also becomes a call and its result, so its side effect is ledgered.
ITEM_TYPES = RESPONSES_ITEM_TYPES


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


def _instructions(system: Any) -> str | None:
    if system is None or isinstance(system, str):
        return system
    raise InvalidMessageError(
        f"instructions must be a string, got {_type_name(system)}",
        index=None,
        reason=f"instructions must be a string, got {_type_name(system)}",
    )


class OpenAIResponses(NativeAdapter):
    """The Responses API ``input`` list (``system`` is the ``instructions`` parameter)."""

    key = "openai_responses"
    image_formula = "openai"
    #: OpenAI publishes its tokenizers: the counts are exact o200k_base / cl100k_base.
    default_token_ratio = 1.0
    items_field = "input"

    def system_texts(self, system: Any) -> list[list[str]]:
        """``instructions`` as the core counts it: one system message (the ledger and summary
        notes are input items of their own)."""
        instructions = _instructions(system)
        return [] if instructions is None else [[instructions]]

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
