"""Translation between providers (``rb.translate``) over all 20 ordered pairs.

Sessions come from the shared generator (``strategies.sessions``: parallel calls, error
results, images, reused ids, an agent that acts before the user speaks), written in the
source's shape by its adapter's ``from_canonical`` (code independent of the core's writer),
then given provider-bound items (thinking with signatures, ``redacted_thinking``, encrypted
reasoning, Gemini thought signatures, Bedrock reasoning) and compaction. The output must pass
the target's validator and its oracle, carry every text and result of the source, carry no
provider-bound payload, report every drop, leave the input as it was, and be the same every
time.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Iterator
from typing import Any

import anthropic_oracle
import bedrock_converse_oracle
import gemini_oracle
import openai_responses_oracle
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound.providers import PROVIDERS

PAIRS = [(a, b) for a in PROVIDERS for b in PROVIDERS if a != b]
ORACLES: dict[str, Any] = {
    "anthropic": anthropic_oracle,
    "bedrock_converse": bedrock_converse_oracle,
    "gemini": gemini_oracle,
    "openai_responses": openai_responses_oracle,
}
#: What marks a provider-bound payload in the sessions below: none may reach a target.
BOUND_MARKS = ("SIG-", "ENC-", "RED-")
BOUND_KINDS = {"signature", "redacted_thinking", "encrypted_content", "thought_signature"}


def native(provider: str, chat: list[dict[str, Any]]) -> tuple[list[Any], Any]:
    """A Chat session in ``provider``'s shape, by its adapter (not by the core's writer)."""
    if provider == "openai_chat":
        return copy.deepcopy(chat), None
    if provider == "openai_responses":
        # The Responses adapter writes no top-level system: leading system messages stay items.
        messages, system = from_canonical(provider, chat)
        return messages, system
    return from_canonical(provider, chat)


def with_bound_items(
    provider: str, items: list[Any], rnd: random.Random, compaction: bool
) -> tuple[list[Any], int, int, int | None]:
    """``items`` with provider-bound items added: ``(items, bound payloads added, readable
    reasonings added, index of the item from which the source's provider reads)``."""
    items = copy.deepcopy(items)
    bound = thoughts = 0
    start: int | None = None
    if provider == "anthropic":
        for k, m in enumerate(items):
            if m["role"] != "assistant" or not isinstance(m["content"], list):
                continue
            blocks = [{"type": "thinking", "thinking": f"THINK-{k}", "signature": f"SIG-{k}"}]
            bound, thoughts = bound + 1, thoughts + 1
            if rnd.random() < 0.3:
                blocks.append({"type": "redacted_thinking", "data": f"RED-{k}"})
                bound += 1
            m["content"][:0] = blocks
        assistants = [k for k, m in enumerate(items) if m["role"] == "assistant"]
        if compaction and assistants:
            start = rnd.choice(assistants)
            m = items[start]
            content = m["content"] if isinstance(m["content"], list) else []
            kept = [b for b in content if b.get("type") not in ("thinking", "redacted_thinking")]
            # What the compaction replaces is not read, so not reported as a bound item.
            bound -= sum(1 for i in items[: start + 1] for _ in _bound_blocks(i))
            thoughts -= sum(1 for i in items[: start + 1] for _ in _thinking_blocks(i))
            m["content"] = [{"type": "compaction", "content": f"SUMMARY-{start}"}, *kept]
    elif provider == "openai_responses":
        out: list[Any] = []
        for k, item in enumerate(items):
            opens = item.get("type") == "function_call" or item.get("role") == "assistant"
            if opens and not (out and _is_assistant_item(out[-1])):
                out.append(
                    {
                        "type": "reasoning",
                        "id": f"rs_{k}",
                        "summary": [{"type": "summary_text", "text": f"THINK-{k}"}],
                        "encrypted_content": f"ENC-{k}",
                    }
                )
                bound, thoughts = bound + 1, thoughts + 1
            out.append(item)
        items = out
        users = [k for k, it in enumerate(items) if it.get("role") == "user"]
        if compaction and users:
            at = rnd.choice(users)
            before = items[:at]
            bound -= sum(1 for it in before if it.get("type") == "reasoning")
            thoughts -= sum(1 for it in before if it.get("type") == "reasoning")
            items.insert(at, {"type": "compaction", "encrypted_content": "ENC-compaction"})
            start = at
    elif provider == "gemini":
        for k, c in enumerate(items):
            if c["role"] != "model":
                continue
            c["parts"].insert(
                0, {"text": f"THINK-{k}", "thought": True, "thoughtSignature": f"SIG-t{k}"}
            )
            bound, thoughts = bound + 1, thoughts + 1
            call = next((p for p in c["parts"] if "functionCall" in p), None)
            if call is not None:
                call["thoughtSignature"] = f"SIG-c{k}"
                bound += 1
    elif provider == "bedrock_converse":
        for k, m in enumerate(items):
            if m["role"] != "assistant":
                continue
            text = {"text": f"THINK-{k}", "signature": f"SIG-{k}"}
            m["content"].insert(0, {"reasoningContent": {"reasoningText": text}})
            bound, thoughts = bound + 1, thoughts + 1
            if rnd.random() < 0.3:
                m["content"].insert(1, {"reasoningContent": {"redactedContent": "UkVELQ=="}})
                bound += 1
    return items, bound, thoughts, start


def _bound_blocks(m: Any) -> Iterator[Any]:
    content = m.get("content") if isinstance(m, dict) else None
    for b in content if isinstance(content, list) else ():
        if isinstance(b, dict) and b.get("type") == "thinking":
            yield b
        if isinstance(b, dict) and b.get("type") == "redacted_thinking":
            yield b


def _thinking_blocks(m: Any) -> Iterator[Any]:
    content = m.get("content") if isinstance(m, dict) else None
    for b in content if isinstance(content, list) else ():
        if isinstance(b, dict) and b.get("type") == "thinking":
            yield b


def _is_assistant_item(item: Any) -> bool:
    return item.get("type") in ("function_call", "reasoning") or item.get("role") == "assistant"


#: How a tool result opens in each of the five shapes, as JSON.
RESULT_MARKS = (
    '"role": "tool"',
    '"function_call_output"',
    '"tool_result"',
    '"functionResponse"',
    '"toolResult"',
)
TEXT_KEYS = ("text", "content", "output", "error", "refusal", "thinking")


def texts(value: Any) -> Iterator[str]:
    """Every text of items in any of the five shapes (tool outputs included)."""
    if isinstance(value, dict):
        for key, v in value.items():
            if key in TEXT_KEYS and isinstance(v, str):
                yield v
            elif key not in ("arguments", "input", "args", "signature", "data", "source"):
                yield from texts(v)
    elif isinstance(value, list):
        for v in value:
            yield from texts(v)


def calls(value: Any) -> Iterator[str]:
    """The names of the calls of items in any of the five shapes, in order."""
    if isinstance(value, dict):
        if isinstance(value.get("name"), str) and any(
            k in value for k in ("arguments", "input", "args")
        ):
            yield value["name"]
        for v in value.values():
            yield from calls(v)
    elif isinstance(value, list):
        for v in value:
            yield from calls(v)


def results(value: Any) -> int:
    """How many tool results items in any of the five shapes hold."""
    text = json.dumps(value)
    return sum(text.count(m) for m in RESULT_MARKS)


def check_valid(target: str, out: rb.Translation) -> None:
    assert rb.validate(out.messages, provider=target, system=out.system) == []
    if target in ORACLES:
        assert ORACLES[target].validate(out.messages, system=out.system) == []


def written(out: rb.Translation) -> str:
    return "\x00".join([*texts(out.messages), *texts({"text": out.system}), *texts(out.system)])


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda p: p)
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    chat=gen.sessions(max_units=6),
    seed=st.integers(0, 2**16),
    compaction=st.booleans(),
    reasoning=st.sampled_from(("drop", "text")),
)
def test_every_pair_writes_a_valid_request_with_everything_reported(
    source: str,
    target: str,
    chat: list[dict[str, Any]],
    seed: int,
    compaction: bool,
    reasoning: str,
) -> None:
    items, system = native(source, chat)
    items, bound, thoughts, start = with_bound_items(source, items, random.Random(seed), compaction)
    given_items, given_system = copy.deepcopy(items), copy.deepcopy(system)
    summarized: list[int] = []

    def summarizer(before: list[Any]) -> str:
        summarized.append(len(before))
        return "SUMMARY-of-the-compacted-history"

    run = lambda: rb.translate(  # noqa: E731
        items,
        source=source,
        target=target,
        system=system,
        reasoning=reasoning,
        summarizer=summarizer,
    )
    out = run()
    assert items == given_items and system == given_system, "the input was changed"
    check_valid(target, out)

    text = json.dumps([out.messages, out.system])
    assert not any(mark in text for mark in BOUND_MARKS), "a provider-bound payload crossed"
    drops = [c for c in out.report.changes if c.action == "dropped"]
    assert sum(c.what in BOUND_KINDS for c in drops) == bound
    made_text = sum(c.action == "as_text" and c.what == "reasoning" for c in out.report.changes)
    dropped_thoughts = sum(c.what == "reasoning" for c in drops)
    assert (made_text, dropped_thoughts) == (
        (thoughts, 0) if reasoning == "text" else (0, thoughts)
    )

    # Every text and result the source's provider reads is in the output.
    read = items if start is None else items[start:]
    want = [t for t in texts(read) if t.strip() and not t.startswith("THINK-")]
    want += [t for t in texts({"text": system}) if t.strip()] + [
        t for t in texts(system) if t.strip()
    ]
    got = written(out)
    missing = [t for t in want if t not in got]
    assert not missing, missing[:3]
    if start is not None and source == "openai_responses":
        assert summarized and "SUMMARY-of-the-compacted-history" in got
    assert results(out.messages) == results(read)
    assert list(calls(out.messages)) == list(calls(read))
    images = set(re.findall(r"iVBOR[A-Za-z0-9+/=]+", json.dumps(read)))
    assert all(image in text for image in images), "an image was lost"

    assert run() == out, "not deterministic"


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=lambda p: p)
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chat=gen.sessions(max_units=6))
def test_a_round_trip_gives_back_the_texts_and_calls(
    a: str, b: str, chat: list[dict[str, Any]]
) -> None:
    items, system = native(a, chat)
    there = rb.translate(items, source=a, target=b, system=system, gemini_sentinel=False)
    back = rb.translate(
        there.messages, source=b, target=a, system=there.system, gemini_sentinel=False
    )
    check_valid(a, back)
    got = written(back)
    want = [t for t in [*texts(items), *texts(system or [])] if t.strip()]
    assert [t for t in want if t not in got] == []
    assert list(calls(back.messages)) == list(calls(items))
    assert results(back.messages) == results(items) or a in ("anthropic", "bedrock_converse")


#: Where a body keeps its top-level system, for the sources that have one.
SYSTEM_KEYS = {
    "openai_responses": "instructions",
    "anthropic": "system",
    "gemini": "systemInstruction",
    "bedrock_converse": "system",
}


def _translated_items(
    items: list[Any], system: Any, source: str, target: str, reasoning: str
) -> object:
    """``translate``'s messages, system, tools and report, or the error's type and text."""
    try:
        return rb.translate(items, source=source, target=target, system=system,
                            reasoning=reasoning)  # fmt: skip
    except rb.RingboundError as e:
        return type(e).__name__, str(e)


def _translated(body: bytes, source: str, target: str, reasoning: str) -> object:
    """``translate_body``'s bytes and report, or the error's type and text."""
    try:
        return rb.translate_body(body, source=source, target=target, reasoning=reasoning)
    except rb.RingboundError as e:
        return type(e).__name__, str(e)


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda p: p)
@settings(max_examples=8, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    chat=gen.sessions(max_units=5),
    seed=st.integers(0, 2**16),
    reasoning=st.sampled_from(("drop", "text")),
)
def test_a_session_translated_turn_after_turn_is_the_translation_from_scratch(
    source: str, target: str, chat: list[dict[str, Any]], seed: int, reasoning: str
) -> None:
    """``translate_body`` and ``translate`` resume a growing session from where its last turn
    left off (issue 34); each turn's output and report must be those of a translation with the
    caches empty, and a prefix that breaks pairing must fail the same way."""
    from ringbound import _core

    items, system = native(source, chat)
    items, _, _, _ = with_bound_items(source, items, random.Random(seed), compaction=False)
    bodies = []
    for k in range(1, len(items) + 1):
        body: dict[str, Any] = {"model": "m", "max_tokens": 50}
        body[_core.history_field(source)] = items[:k]
        if system is not None:
            body[SYSTEM_KEYS[source]] = system
        bodies.append(json.dumps(body).encode())
    cold = []
    for body in bodies:
        _core.cache_clear()
        cold.append(_translated(body, source, target, reasoning))
    _core.cache_clear()
    warm = [_translated(body, source, target, reasoning) for body in bodies]
    for k, (a, b) in enumerate(zip(cold, warm, strict=True)):
        assert a == b, f"turn {k}"
    # The objects path resumes from the same checkpoints: each turn as from scratch.
    turns = [items[:k] for k in range(1, len(items) + 1)]
    cold = []
    for turn in turns:
        _core.cache_clear()
        cold.append(_translated_items(turn, system, source, target, reasoning))
    _core.cache_clear()
    warm = [_translated_items(turn, system, source, target, reasoning) for turn in turns]
    for k, (a, b) in enumerate(zip(cold, warm, strict=True)):
        assert a == b, f"turn {k} (objects)"
