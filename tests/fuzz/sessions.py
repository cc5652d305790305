"""Small sessions in the five providers' formats for the atheris harness to mutate: the first
turns of a real tau-bench session (``../shared/corpus/tau-bench``, MIT), cut down and carried
over into each provider's shape, with one tool call and its result."""

from __future__ import annotations

from typing import Any

USER = "I need to change my flight to a later one on the same day, reservation 8JX2WO."
THINK = "Let me look up the reservation first."
RESULT = '{"reservation_id": "8JX2WO", "origin": "JFK", "destination": "SEA", "cabin": "economy"}'
REPLY = "Your reservation is JFK to SEA in economy; which later flight would you like?"
ARGS = {"reservation_id": "8JX2WO"}

SESSIONS: dict[str, list[dict[str, Any]]] = {
    "openai_chat": [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_reservation_details",
                        "arguments": '{"reservation_id": "8JX2WO"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": RESULT},
        {"role": "assistant", "content": REPLY},
    ],
    "openai_responses": [
        {"role": "user", "content": USER},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_reservation_details",
            "arguments": '{"reservation_id": "8JX2WO"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": RESULT},
        {"role": "assistant", "content": [{"type": "output_text", "text": REPLY}]},
    ],
    "anthropic": [
        {"role": "user", "content": USER},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": THINK},
                {"type": "tool_use", "id": "toolu_1", "name": "get_reservation", "input": ARGS},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULT}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": REPLY}]},
    ],
    "gemini": [
        {"role": "user", "parts": [{"text": USER}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_reservation", "args": ARGS}}]},
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_reservation", "response": {"result": RESULT}}}
            ],
        },
        {"role": "model", "parts": [{"text": REPLY}]},
    ],
    "bedrock_converse": [
        {"role": "user", "content": [{"text": USER}]},
        {
            "role": "assistant",
            "content": [
                {"text": THINK},
                {"toolUse": {"toolUseId": "t1", "name": "get_reservation", "input": ARGS}},
            ],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": RESULT}]}}],
        },
        {"role": "assistant", "content": [{"text": REPLY}]},
    ],
}

TOOLS: dict[str, list[dict[str, Any]]] = {
    "openai_chat": [
        {
            "type": "function",
            "function": {
                "name": "get_reservation_details",
                "parameters": {"type": "object", "properties": {"reservation_id": {}}},
            },
        }
    ],
    "openai_responses": [
        {"type": "function", "name": "get_reservation_details", "parameters": {"type": "object"}}
    ],
    "anthropic": [{"name": "get_reservation", "input_schema": {"type": "object"}}],
    "gemini": [{"functionDeclarations": [{"name": "get_reservation"}]}],
    "bedrock_converse": [
        {"toolSpec": {"name": "get_reservation", "inputSchema": {"json": {"type": "object"}}}}
    ],
}
