"""The reference workload in each provider's native wire format, so the per-provider benchmarks
assemble the same conversation: same texts, same calls, same results. Each converter returns
``(system, items)``: the top-level system value (None where the format keeps it in the list)
and the list the provider's request carries."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Message = dict[str, Any]
Native = tuple[Any, list[Message]]


def _system_text(messages: list[Message]) -> tuple[str | None, list[Message]]:
    """Leading system messages as one text, and the rest."""
    k = 0
    while k < len(messages) and messages[k]["role"] == "system":
        k += 1
    text = "\n\n".join(m["content"] for m in messages[:k]) or None
    return text, messages[k:]


def _is_error(text: str) -> bool:
    return text.lstrip().lower().startswith(("error", "traceback", "exception"))


def _merged(items: list[Message], blocks: str) -> list[Message]:
    """Consecutive items of one role merged (these formats alternate user and assistant)."""
    out: list[Message] = []
    for item in items:
        if out and out[-1]["role"] == item["role"]:
            out[-1] = {**out[-1], blocks: out[-1][blocks] + item[blocks]}
        else:
            out.append(item)
    return out


def openai_chat(messages: list[Message]) -> Native:
    return None, messages


def openai_responses(messages: list[Message]) -> Native:
    items: list[Message] = []
    for m in messages:
        if m["role"] == "tool":
            output = {"call_id": m["tool_call_id"], "output": m["content"]}
            items.append({"type": "function_call_output", **output})
            continue
        if m.get("content"):
            items.append({"type": "message", "role": m["role"], "content": m["content"]})
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": fn["name"],
                    "arguments": fn["arguments"],
                }
            )
    return None, items


def anthropic(messages: list[Message]) -> Native:
    system, rest = _system_text(messages)
    items: list[Message] = []
    for m in rest:
        blocks: list[Message] = []
        if m["role"] == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            if _is_error(m["content"]):
                result["is_error"] = True
            items.append({"role": "user", "content": [result]})
            continue
        if m.get("content"):
            blocks.append({"type": "text", "text": m["content"]})
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": fn["name"],
                    "input": json.loads(fn["arguments"]),
                }
            )
        items.append({"role": m["role"], "content": blocks})
    return system, _merged(items, "content")


def gemini(messages: list[Message]) -> Native:
    system, rest = _system_text(messages)
    names: dict[str, str] = {}
    items: list[Message] = []
    for m in rest:
        if m["role"] == "tool":
            response = {
                "id": m["tool_call_id"],
                "name": names[m["tool_call_id"]],
                "response": {"output": m["content"]},
            }
            items.append({"role": "user", "parts": [{"functionResponse": response}]})
            continue
        parts: list[Message] = [{"text": m["content"]}] if m.get("content") else []
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            names[call["id"]] = fn["name"]
            parts.append(
                {
                    "functionCall": {
                        "id": call["id"],
                        "name": fn["name"],
                        "args": json.loads(fn["arguments"]),
                    }
                }
            )
        items.append({"role": "model" if m["role"] == "assistant" else "user", "parts": parts})
    instruction = None if system is None else {"parts": [{"text": system}]}
    return instruction, _merged(items, "parts")


def bedrock_converse(messages: list[Message]) -> Native:
    system, rest = _system_text(messages)
    items: list[Message] = []
    for m in rest:
        if m["role"] == "tool":
            result = {
                "toolUseId": m["tool_call_id"],
                "content": [{"text": m["content"]}],
                "status": "error" if _is_error(m["content"]) else "success",
            }
            items.append({"role": "user", "content": [{"toolResult": result}]})
            continue
        blocks: list[Message] = [{"text": m["content"]}] if m.get("content") else []
        for call in m.get("tool_calls") or ():
            fn = call["function"]
            use = {
                "toolUseId": call["id"],
                "name": fn["name"],
                "input": json.loads(fn["arguments"]),
            }
            blocks.append({"toolUse": use})
        items.append({"role": m["role"], "content": blocks})
    return None if system is None else [{"text": system}], _merged(items, "content")


CONVERTERS: dict[str, Callable[[list[Message]], Native]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic": anthropic,
    "gemini": gemini,
    "bedrock_converse": bedrock_converse,
}
