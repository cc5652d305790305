"""Issue 36, finding 13b: a body whose ``metadata`` is nested 100,000 deep is assembled by the
native path with ``provider="openai_chat"``; with the provider detected (``provider=None``) it
was refused as "not valid JSON" because detection parsed the whole body. Both now agree: the
body's provider is told from its members read one level deep (``ringbound.body_members``)."""

from __future__ import annotations

import json
import random

import orjson
import pytest

import ringbound as rb
from ringbound.body_members import MAX_STEPS, TOO_DEEP, shallow_members

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def with_metadata(body: dict, metadata: str) -> bytes:
    return (json.dumps(body)[:-1] + ', "metadata": ' + metadata + "}").encode()


@pytest.mark.parametrize("metadata", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_a_deep_metadata_is_assembled_alike_named_and_detected(metadata: str) -> None:
    body = with_metadata(CHAT, metadata)
    named = rb.Assembler(provider="openai_chat").assemble_body(body)
    detected = rb.Assembler(provider=None).assemble_body(body)
    assert detected.body == named.body
    assert detected.report.tokens_after == named.report.tokens_after


@pytest.mark.parametrize(
    "body",
    [
        {"model": "claude-x", "max_tokens": 9, "system": "s", "messages": [CHAT["messages"][0]]},
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        {"model": "gpt-4o", "input": [{"role": "user", "content": "hi"}]},
    ],
    ids=["anthropic", "gemini", "responses"],
)
def test_a_deep_body_of_a_parsed_format_is_refused_alike(body: dict) -> None:
    """Formats whose assembly parses the body refuse it with the provider named, and so
    detected: the refusal is the same either way."""
    data = with_metadata(body, DEEP_ARRAY)
    provider = rb.detect_provider(body)
    for asm in (rb.Assembler(provider=provider), rb.Assembler(provider=None)):
        with pytest.raises(rb.InvalidBodyError, match="not valid JSON"):
            asm.assemble_body(data)


def test_a_deep_history_is_refused_alike_named_and_detected() -> None:
    data = b'{"model": "gpt-4o", "messages": ' + DEEP_ARRAY.encode() + b"}"
    for asm in (rb.Assembler(provider="openai_chat"), rb.Assembler(provider=None)):
        with pytest.raises(rb.RingboundError):
            asm.assemble_body(data)


def test_shallow_members_reads_what_the_parser_reads() -> None:
    rng = random.Random(36)

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 4 or roll < 0.3:
            return rng.choice([1, -2.5, "s", '"]}[{\\', True, None, ""])
        if roll < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "b]", "{c"]): value(depth + 1) for _ in range(rng.randint(0, 3))}

    for _ in range(500):
        obj = {rng.choice(["k", "messages", "m]", "{x"]): value(0) for _ in range(4)}
        for separators in ((",", ":"), (" ,\n", " :\t")):
            data = json.dumps(obj, separators=separators).encode()
            assert shallow_members(data) == orjson.loads(data)


def test_shallow_members_marks_only_the_deep_value() -> None:
    members = shallow_members(with_metadata(CHAT, DEEP_OBJECT))
    assert members == {**CHAT, "metadata": TOO_DEEP}


@pytest.mark.parametrize(
    "data",
    [b'{"a":1,}', b'{"a" 1}', b'{"a":1}x', b"[1]", b"{", b'{"a":[1}', b'{"a":1,"a":2}', b'{"a":}'],
)
def test_shallow_members_refuses_what_is_not_one_object(data: bytes) -> None:
    assert shallow_members(data) is None


def test_the_scan_gives_up_on_a_body_that_would_take_too_long() -> None:
    """A hostile body (millions of levels or strings in one value) costs a bounded scan and
    is refused as the parser refused it."""
    body = b'{"m":' + b'{"a":' * (MAX_STEPS + 10) + b"1" + b"}" * (MAX_STEPS + 11)
    assert shallow_members(body) is None
