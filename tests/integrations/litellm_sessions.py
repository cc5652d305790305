"""Long agent sessions as request bodies of the three routes the LiteLLM hook serves: a goal, an
email sent early (a side effect the ledger note must keep once its ring is dropped), then
enough log reads that trimming happens under a small budget."""

from __future__ import annotations

import json
from typing import Any

SYSTEM = "You are the log auditor. Never resend an email that was already sent."
GOAL = "Email Ana that the audit started, then read every day's log and report anomalies."
EMAIL = {"to": "ana@example.com", "subject": "Audit started"}


def _tool_name(i: int) -> str:
    return "send_email" if i == 0 else "read_log"


def _args(i: int) -> dict[str, Any]:
    return EMAIL if i == 0 else {"day": i}


def _result(i: int) -> str:
    if i == 0:
        return "sent: message id m-1"
    return f"day {i}: " + " ".join(f"event-{i}-{k} ok" for k in range(40))


def _function(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": {"day": {"type": "integer"}}},
    }


FUNCTIONS = [_function("send_email", "Send an email."), _function("read_log", "Read a log.")]


def chat_body(model: str, turns: int, *, broken: bool = False) -> dict[str, Any]:
    """A Chat Completions body; ``broken`` leaves the first call without its result."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": GOAL},
    ]
    for i in range(turns):
        cid = f"call_{i:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": _tool_name(i), "arguments": json.dumps(_args(i))},
                    }
                ],
            }
        )
        if not (broken and i == 0):
            messages.append({"role": "tool", "tool_call_id": cid, "content": _result(i)})
    return {
        "model": model,
        "messages": messages,
        "tools": [{"type": "function", "function": f} for f in FUNCTIONS],
        "tool_choice": "auto",
        "temperature": 0.25,
        "top_p": 0.9,
        "max_tokens": 256,
        "seed": 7,
        "user": "auditor-7",
    }


def anthropic_body(model: str, turns: int, *, broken: bool = False) -> dict[str, Any]:
    """An Anthropic Messages body; ``broken`` answers a call id no ``tool_use`` has."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": GOAL}]
    for i in range(turns):
        cid = f"toolu_{i:03d}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i}."},
                    {"type": "tool_use", "id": cid, "name": _tool_name(i), "input": _args(i)},
                ],
            }
        )
        answered = "toolu_999" if broken and i == 0 else cid
        result = {"type": "tool_result", "tool_use_id": answered, "content": _result(i)}
        messages.append({"role": "user", "content": [result]})
    return {
        "model": model,
        "system": SYSTEM,
        "messages": messages,
        "tools": [
            {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
            for f in FUNCTIONS
        ],
        "tool_choice": {"type": "auto"},
        "max_tokens": 256,
        "temperature": 0.25,
        "stop_sequences": ["END-OF-AUDIT"],
    }


def responses_body(model: str, turns: int, *, broken: bool = False) -> dict[str, Any]:
    """A Responses body; ``broken`` leaves the first call without its output."""
    items: list[dict[str, Any]] = [{"role": "user", "content": GOAL}]
    for i in range(turns):
        cid = f"call_{i:03d}"
        items.append(
            {
                "type": "function_call",
                "call_id": cid,
                "name": _tool_name(i),
                "arguments": json.dumps(_args(i)),
            }
        )
        if not (broken and i == 0):
            items.append({"type": "function_call_output", "call_id": cid, "output": _result(i)})
    return {
        "model": model,
        "instructions": SYSTEM,
        "input": items,
        "tools": [{"type": "function", **f} for f in FUNCTIONS],
        "tool_choice": "auto",
        "temperature": 0.25,
        "max_output_tokens": 256,
        "store": False,
    }
