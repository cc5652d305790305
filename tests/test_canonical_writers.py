"""The core's writer of OpenAI Chat sessions (``rb.translate(source="openai_chat")``) against
the Python writers kept in ``canonical_writers``: on the shared generator's sessions both give,
for every provider but Chat, the same texts in the same order, the same calls (names,
arguments) and each result paired with the same call, and both outputs pass ``rb.validate``.

What they are allowed to differ in, as docs/translation.md and the provider pages say:

- call ids (the core hashes an id the target refuses, or one that recurs; the Python writers
  renamed or hashed them their own way): calls and results are compared by the call's place;
- the system: the core gives blocks where the Python writer joined a string, and for OpenAI
  Responses it takes every leading system and developer message into ``instructions`` where
  the Python writer took the first system string only; Bedrock's Python writer put a system
  message from later in the conversation into ``system``, the core sends it as user text;
- the fixed turns a writer inserts for the target's turn rules (``(session start)``...), and
  blank text, which the core leaves out (reported ``dropped blank_text``);
- Bedrock's wrapping of arguments that are not a JSON object (``{"input": raw}`` then,
  ``{"arguments": raw}`` now), Anthropic's ``is_error`` on an error-looking result (the core
  sets it, the Python writer did not), Gemini's sentinel ``thoughtSignature`` on call steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import strategies as gen
from canonical_writers import BRIDGE_TEXT, GEMINI_OPENING_TEXT, OPENING_TEXT, from_canonical
from hypothesis import given

import ringbound as rb

PROVIDERS = ("anthropic", "bedrock_converse", "gemini", "openai_responses")
#: The turns a writer adds for a target's rules, left out of the comparison.
FILLERS = frozenset({BRIDGE_TEXT, OPENING_TEXT, GEMINI_OPENING_TEXT})
#: The keys a writer wraps arguments that are not a JSON object in.
WRAPPED = {"anthropic": ("arguments",), "bedrock_converse": ("input", "arguments"), "gemini": ()}


def _text_of(content: Any) -> str:
    """The text of a result's content, whatever the provider's shape (a string, text blocks)."""
    if isinstance(content, str):
        return content
    out = []
    for block in content or ():
        if isinstance(block, dict):
            out.append(block.get("text", ""))
    return "".join(out)


def _system_texts(provider: str, system: Any) -> list[str]:
    if system is None:
        return []
    if isinstance(system, str):
        return [system]
    if provider == "gemini":
        return [p["text"] for p in system["parts"]]
    return [b["text"] for b in system]


def _arguments(provider: str, value: Any) -> Any:
    """A call's arguments as the JSON value the model wrote, or the raw text it wrote when that
    was not a JSON object (each writer wraps it in a key of its own)."""
    if provider == "openai_responses":
        try:
            parsed = json.loads(value)
        except ValueError:
            return ("raw", value)
        return parsed if isinstance(parsed, dict) else ("raw", value)
    if isinstance(value, dict) and len(value) == 1:
        ((key, raw),) = value.items()
        if key in WRAPPED[provider] and isinstance(raw, str):
            return ("raw", raw)
    return value


def _events(provider: str, messages: list[Any]) -> Iterator[tuple[Any, ...]]:
    """The output as events in order: ``("text", role, text)``, ``("image", role)``,
    ``("call", name, arguments, id)``, ``("result", id, text)``; roles as user/assistant."""
    for m in messages:
        if provider == "openai_responses":
            kind = m.get("type", "message")
            if kind == "message":
                content = m["content"]
                role = m["role"]
                if isinstance(content, str):
                    yield ("text", role, content)
                    continue
                for part in content:
                    if part["type"] in ("input_text", "output_text"):
                        yield ("text", role, part["text"])
                    else:
                        yield ("image", role)
            elif kind == "function_call":
                yield ("call", m["name"], _arguments(provider, m["arguments"]), m["call_id"])
            elif kind == "function_call_output":
                yield ("result", m["call_id"], _text_of(m["output"]))
            else:
                raise AssertionError(f"unexpected item {m!r}")
            continue
        if provider == "gemini":
            role = "assistant" if m["role"] == "model" else "user"
            for part in m["parts"]:
                if "text" in part:
                    yield ("text", role, part["text"])
                elif "functionCall" in part:
                    call = part["functionCall"]
                    yield ("call", call["name"], _arguments(provider, call["args"]), call["id"])
                elif "functionResponse" in part:
                    resp = part["functionResponse"]
                    body = resp["response"]
                    yield ("result", resp["id"], body.get("output", body.get("error")))
                else:
                    yield ("image", role)
            continue
        role = m["role"]
        for block in m["content"]:
            if provider == "anthropic":
                kind = block["type"]
                if kind == "text":
                    yield ("text", role, block["text"])
                elif kind == "tool_use":
                    yield ("call", block["name"], _arguments(provider, block["input"]), block["id"])
                elif kind == "tool_result":
                    yield ("result", block["tool_use_id"], _text_of(block.get("content")))
                else:
                    yield ("image", role)
            elif "text" in block:
                yield ("text", role, block["text"])
            elif "toolUse" in block:
                use = block["toolUse"]
                yield ("call", use["name"], _arguments(provider, use["input"]), use["toolUseId"])
            elif "toolResult" in block:
                result = block["toolResult"]
                yield ("result", result["toolUseId"], _text_of(result["content"]))
            else:
                yield ("image", role)


def _reading(provider: str, messages: list[Any], system: Any, late: set[str]) -> dict[str, Any]:
    """What both writers must agree on: the leading system text, the conversation's events with
    calls and results by the call's place, and where the late system texts went."""
    events = list(_events(provider, messages))
    system_texts = _system_texts(provider, system)
    # Responses: leading system/developer messages are the instructions too.
    while events and events[0][0] == "text" and events[0][1] in ("system", "developer"):
        system_texts.append(events.pop(0)[2])
    out: list[tuple[Any, ...]] = []
    placed: list[str] = []
    calls: dict[str, int] = {}
    ordinal = 0
    for event in events:
        if event[0] == "text" and (event[2] in FILLERS or not event[2].strip()):
            continue
        if event[0] == "text" and event[2] in late:
            placed.append(event[2])
            continue
        if event[0] == "call":
            calls[event[3]] = ordinal  # a recurring id answers its latest call
            out.append(("call", ordinal, event[1], event[2]))
            ordinal += 1
        elif event[0] == "result":
            text = event[2] if event[2].strip() else ""  # a blank result: no text block
            out.append(("result", calls.get(event[1]), text))
        else:
            out.append(event)
    leading = [t for t in system_texts if t not in late]
    placed += [t for t in system_texts if t in late]
    return {"system": "\n\n".join(leading), "events": out, "late": sorted(placed)}


def _late_system_texts(chat: list[dict[str, Any]]) -> set[str]:
    """The texts of system/developer messages after the conversation started."""
    first = next((k for k, m in enumerate(chat) if m["role"] not in ("system", "developer")), 0)
    return {m["content"] for m in chat[first:] if m["role"] in ("system", "developer")}


@pytest.mark.parametrize("provider", PROVIDERS)
@given(chat=gen.sessions())
def test_the_core_writes_what_the_python_writer_wrote(provider: str, chat: list[Any]) -> None:
    late = _late_system_texts(chat)
    oracle, oracle_system = from_canonical(provider, chat)
    core = rb.translate(chat, source="openai_chat", target=provider)
    assert rb.validate(oracle, provider=provider, system=oracle_system) == []
    assert rb.validate(core.messages, provider=provider, system=core.system) == []
    want = _reading(provider, oracle, oracle_system, late)
    got = _reading(provider, core.messages, core.system, late)
    assert got == want
    # Every result answers a call, and every call is answered once, in both.
    results = [e[1] for e in got["events"] if e[0] == "result"]
    assert None not in results
    assert sorted(results) == list(range(sum(e[0] == "call" for e in got["events"])))


def test_the_comparison_sees_a_result_moved_to_another_call() -> None:
    """The reading is strict enough to fail: swapping which call two results answer (same
    texts, same calls) is a difference."""
    chat = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for k in (1, 2)
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
    ]
    swapped = [*chat[:2], {**chat[2], "content": "two"}, {**chat[3], "content": "one"}]
    for provider in PROVIDERS:
        core = rb.translate(chat, source="openai_chat", target=provider)
        other, other_system = from_canonical(provider, swapped)
        assert _reading(provider, core.messages, core.system, set()) != _reading(
            provider, other, other_system, set()
        ), provider
