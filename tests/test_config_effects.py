"""Every configuration key changes what an assembly does: for each key, the same session is
assembled with the key at its default and at another value, and the outcomes differ. A key
that cannot change anything has no place in the config (``REMOVED_KEYS`` refuses it by name).
A new key without a case here fails ``test_every_key_has_a_case``."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import ringbound as rb

#: Keys another issue gives their meaning to, and keys that choose an implementation whose
#: result is the same by design (both back ends are exact BPE: only the speed differs, which
#: docs/token-accounting.md measures).
NOT_HERE = {
    "tokenizer_backend": "both back ends count exactly the same tokens; only speed differs",
    # Keys that act only with a part a single assembly here does not have (a counter, a
    # store); the test named shows each one changing what happens.
    "token_counter": "needs a provider counter: tests/counters/test_count_gate.py",
    "calibration_coverage": "needs provider counts: tests/counters/test_online_calibration.py",
    "on_store_error": "needs a failing store: tests/stores/test_session_store.py",
    "compact_on_cache_expiry": "needs time between turns: tests/test_state.py (now=)",
    "cache_lifetime_seconds": "needs time between turns: tests/test_state.py (now=)",
}
SECRET_WORD = "zebra-7741"


def call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def ring(i: int, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(i, name, args)]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": result},
    ]


def session() -> list[dict[str, Any]]:
    """A session with something for every stage: a side effect, a repeated read, an oversized
    result, an image, short error rings, a user message in the middle."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Email Ana the report, then go through the logs."},
    ]
    msgs += ring(0, "send_email", {"to": "ana@example.com", "body": "the report"}, "sent")
    msgs += ring(1, "read_file", {"path": "a.py"}, "def f():\n    return 1\n" * 20)
    msgs += ring(2, "read_log", {"day": 2}, f"day 2 {SECRET_WORD}: " + "disk full " * 900)
    msgs.append(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Here is the chart."},
                {"type": "image_url", "image_url": {"url": "https://example.com/c.png"}},
            ],
        }
    )
    msgs.append({"role": "assistant", "content": "I see the chart. " * 10})
    msgs += ring(3, "read_file", {"path": "a.py"}, "def f():\n    return 2\n" * 20)
    for i in range(4, 8):
        msgs += ring(i, "read_log", {"day": i}, "Error: not found")
    for i in range(8, 22):
        msgs += ring(i, "read_log", {"day": i}, f"day {i}: " + "all services up " * 40)
        if i == 12:
            msgs.append({"role": "user", "content": "Also check day 30."})
    return msgs


def slow(request: rb.SummaryRequest) -> str:
    time.sleep(0.05)
    return "The agent read logs."


def failing(request: rb.SummaryRequest) -> str:
    raise RuntimeError("model down")


def echo(request: rb.SummaryRequest) -> str:
    return request.text[:400]


def sees_raw(request: rb.SummaryRequest) -> str:
    """Says whether it was handed the caller's own, unredacted objects."""
    return "raw units" if request.raw_units is not None else "redacted units only"


class Counting:
    """A summarizer that answers briefly and counts its calls (each chunk is one)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: rb.SummaryRequest) -> str:
        self.calls += 1
        return "The agent read logs."


@dataclass
class Case:
    change: dict[str, Any]
    base: dict[str, Any] = field(default_factory=dict)
    messages: Callable[[], list[Any]] = session
    summarizer: Callable[[], Any] | None = None
    tools: list[Any] | None = None
    #: Assemble the first ``turns`` messages first, then everything with that state.
    turns: int | None = None


BASE = {"model_input_limit": 3_000, "output_reserve_tokens": 0, "safety_margin_tokens": 0}
BIG_TOOL = {
    "type": "function",
    "function": {"name": "big", "description": "x " * 3000, "parameters": {"type": "object"}},
}


def missing_result() -> list[Any]:
    msgs = session()
    del msgs[5]  # the result of c1
    return msgs


#: A budget the recent rings and user turns overfill: shrink_recent decides.
SMALL_SUFFIX = {"model_input_limit": 1_200, "recent_tool_rings": 3, "recent_user_turns": 2}


def big_newest() -> list[Any]:
    """The session ending in one huge result: the newest ring is cut, down to its floor."""
    msgs = session()
    msgs += ring(99, "read_log", {"day": 99}, "day 99: " + "disk full " * 2_000)
    return msgs


def multilingual() -> list[Any]:
    """o200k_base and cl100k_base split this text differently."""
    msgs = session()
    msgs[-1] = {**msgs[-1], "content": "日本語のテキストと Ελληνικά κείμενα " * 20}
    return msgs


CASES: dict[str, Case] = {
    "model_input_limit": Case({"model_input_limit": 2_500}),
    "output_reserve_tokens": Case({"output_reserve_tokens": 500}),
    "safety_margin_tokens": Case({"safety_margin_tokens": 500}),
    "recent_tool_rings": Case({"recent_tool_rings": 8}),
    "recent_user_turns": Case({"recent_user_turns": 0}),
    "summarize_trigger_ratio": Case(
        {"summarize_trigger_ratio": 0.4}, summarizer=lambda: rb.summarizers.extractive()
    ),
    "summary_max_tokens": Case({"summary_max_tokens": 20}, summarizer=lambda: echo),
    "summary_timeout_ms": Case({"summary_timeout_ms": 1}, summarizer=lambda: slow),
    "on_pairing_error": Case(
        {"on_pairing_error": "synthesize_error_results"}, messages=missing_result
    ),
    "on_still_over_budget": Case(
        {"on_still_over_budget": "drop_tools_schema_then_fail"}, tools=[BIG_TOOL]
    ),
    "pin": Case({"pin": ["side_effect_ledger"]}, base={"recent_user_turns": 0}),
    "encoding": Case({"encoding": "cl100k_base"}, messages=multilingual),
    "token_ratio": Case({"token_ratio": 1.5}),
    "side_effect_tools": Case({"side_effect_tools": ["send_email"]}),
    "ledger_fields": Case(
        {"ledger_fields": {"send_email": ["to"]}}, base={"side_effect_tools": ["send_email"]}
    ),
    "short_error_result_tokens": Case({"short_error_result_tokens": 0}),
    "max_held_error_rings": Case({"max_held_error_rings": 0}),
    "stages": Case({"stages": ["drop_plain_turns", "drop_error_rings"]}),
    # 200, not less: a cut must leave room for its recovery anchor, else the result is
    # dropped whole as it is at the default (the case at 64 differed only in the report's
    # byte bounds, which are estimates now).
    "max_tool_result_tokens": Case(
        {"max_tool_result_tokens": 200}, base={"model_input_limit": 5_000}
    ),
    "summary_target_tokens": Case({"summary_target_tokens": 20}, summarizer=lambda: echo),
    "summarizer_input_limit": Case({"summarizer_input_limit": 300}, summarizer=Counting),
    "on_summary_failure": Case({"on_summary_failure": "fail_closed"}, summarizer=lambda: failing),
    "summary_fallback": Case({"summary_fallback": "none"}, summarizer=lambda: failing),
    "redact_patterns": Case({"redact_patterns": [r"zebra-\d+"]}, summarizer=lambda: echo),
    "summary_raw_units": Case({"summary_raw_units": True}, summarizer=lambda: sees_raw),
    "note_placement": Case(
        {"note_placement": "leading_system"}, base={"side_effect_tools": ["send_email"]}
    ),
    "cache_stable": Case({"cache_stable": True}),
    # The second turn grows the request past 75% of the budget, not past 95%: compacted at
    # the default trigger, the first turn's cut reused at the higher one.
    "compact_trigger_ratio": Case(
        {"compact_trigger_ratio": 0.95},
        base={"cache_stable": True, "recent_tool_rings": 1, "recent_user_turns": 1},
        messages=lambda: session()[:47],
        turns=31,
    ),
    "min_result_tokens": Case(
        {"min_result_tokens": 3_000}, base={"recent_tool_rings": 1}, messages=big_newest
    ),
    "min_recent_tool_rings": Case({"min_recent_tool_rings": 3}, base=SMALL_SUFFIX),
    "min_recent_user_turns": Case({"min_recent_user_turns": 2}, base=SMALL_SUFFIX),
    "compact_target_ratio": Case(
        {"compact_target_ratio": 0.3},
        base={"cache_stable": True, "recent_tool_rings": 1, "recent_user_turns": 0},
    ),
    "cache_markers": Case({"cache_markers": "caller_only"}, base={"cache_stable": True}),
    "prompt_cache_mode": Case({"prompt_cache_mode": "explicit"}, base={"cache_stable": True}),
    "min_cache_tokens": Case(
        {"min_cache_tokens": 10**6}, base={"cache_stable": True, "prompt_cache_mode": "explicit"}
    ),
    "emergency_ratio": Case({"emergency_ratio": 0.5}),
    "max_messages": Case({"max_messages": 10}),
    "max_request_bytes": Case({"max_request_bytes": 1_000}),
}


def outcome(case: Case, values: dict[str, Any]) -> Any:
    """What an assembly did, as plain data: what was sent, what the report says, or the error."""
    cfg = rb.AssemblyConfig(**{**BASE, **case.base, **values})
    summarizer = case.summarizer() if case.summarizer is not None else None
    asm = rb.Assembler(cfg, summarizer=summarizer, cache=False)
    messages = case.messages()
    try:
        state = None
        if case.turns is not None:
            state = asm.assemble(messages[: case.turns], case.tools, state=None).state
        res = asm.assemble(messages, case.tools, state=state)
    except rb.RingboundError as e:
        return type(e).__name__, getattr(e, "key", None)
    report = dataclasses.replace(res.report, elapsed_s=0.0)
    calls = getattr(summarizer, "calls", None)
    state = res.state is not None
    return json.dumps(res.messages), res.tools is None, repr(report), state, calls, res.cache_key


def test_every_key_has_a_case() -> None:
    keys = {f.name for f in dataclasses.fields(rb.AssemblyConfig)}
    assert keys - set(NOT_HERE) == set(CASES)


@pytest.mark.parametrize("key", sorted(CASES))
def test_the_key_changes_the_outcome(key: str) -> None:
    case = CASES[key]
    default = rb.AssemblyConfig()
    assert all(value != getattr(default, k) for k, value in case.change.items() if k == key)
    assert outcome(case, {}) != outcome(case, case.change)


def test_the_tokenizer_backends_agree() -> None:
    """The one key whose effect is speed only: both back ends give the same assembly."""
    outcomes = {
        outcome(Case({}), {"tokenizer_backend": backend}) for backend in ("tiktoken", "bpe_openai")
    }
    assert len(outcomes) == 1
