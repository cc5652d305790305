"""Regression tests of the reliability campaign (issue 18), one per root cause it found: huge
ints, wrong argument types, values JSON cannot hold, hostile objects, deep nesting, hostile
image headers, oversized requests, and a list changed by another thread while it is being
assembled. Every public entry point answers bad input with a ringbound error, never a
TypeError, IndexError, OverflowError or a crash."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import random
import struct
import threading
import time
import zlib
from typing import Any

import pytest

import ringbound as rb

PROVIDERS = ["openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse"]
HELLO = {
    "openai_chat": [{"role": "user", "content": "hi"}],
    "openai_responses": [{"role": "user", "content": "hi"}],
    "anthropic": [{"role": "user", "content": "hi"}],
    "gemini": [{"role": "user", "parts": [{"text": "hi"}]}],
    "bedrock_converse": [{"role": "user", "content": [{"text": "hi"}]}],
}


def carrying(provider: str, value: Any) -> list[dict[str, Any]]:
    """A one-message request whose tool call arguments hold ``value``."""
    if provider == "openai_chat":
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call], "extra": value},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": value}]
    if provider == "anthropic":
        use = {"type": "tool_use", "id": "c1", "name": "f", "input": {"v": value}}
        return [{"role": "user", "content": "go"}, {"role": "assistant", "content": [use]}]
    if provider == "gemini":
        call = {"functionCall": {"name": "f", "args": {"v": value}}}
        return [{"role": "user", "parts": [{"text": "go"}]}, {"role": "model", "parts": [call]}]
    use = {"toolUse": {"toolUseId": "c1", "name": "f", "input": {"v": value}}}
    return [{"role": "user", "content": [{"text": "go"}]}, {"role": "assistant", "content": [use]}]


def typed(call: Any) -> None:
    """Runs ``call``; a ringbound error is a fine answer, anything else fails the test."""
    try:
        call()
    except rb.RingboundError:
        pass


@pytest.mark.parametrize(
    "key", ["max_messages", "model_input_limit", "max_request_bytes", "recent_tool_rings"]
)
@pytest.mark.parametrize("value", [2**65, 10**20, 2**40 + 1])
def test_huge_ints_in_config_are_config_errors(key: str, value: int) -> None:
    with pytest.raises(rb.ConfigError, match=key):
        rb.AssemblyConfig(**{key: value})


@pytest.mark.parametrize("args", [(2**70, 1), (1, 2**70), (1.5, 1), (True, 1), (-1, 1), ("7", 1)])
def test_count_cache_sizes_are_config_errors(args: tuple[Any, Any]) -> None:
    with pytest.raises(rb.ConfigError, match=r"max_entries|max_bytes"):
        rb.CountCache(*args)


@pytest.mark.parametrize(
    "change",
    [
        {"rewrites": [[2**70, "truncated"]]},
        {"rewrites": [[-1, "truncated"]]},
        {"rewrites": [["0", "truncated"]]},
        {"rewrites": [[0, 5]]},
        {"dropped": [2**70]},
        {"budget": 2**70},
        {"messages": -1},
        {"summary_span": [0, 2**70]},
        {"summary_span": [3, 1]},
        {"ledger": [5]},
    ],
)
def test_a_corrupt_state_with_huge_or_wrong_values_is_stale(change: dict[str, Any]) -> None:
    asm = rb.Assembler(rb.AssemblyConfig(cache_stable=True))
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    good = asm.assemble(msgs).state
    assert good is not None
    doc = json.loads(good.to_bytes())
    doc.update(change)
    with pytest.raises(rb.StaleStateError):
        state = rb.AssemblyState.from_bytes(json.dumps(doc))
        asm.assemble(msgs, state=state)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("tools", [5, "tools", b"x", {"type": "function"}, 1.5])
def test_tools_that_are_not_a_list_are_invalid_messages(provider: str, tools: Any) -> None:
    for cfg in (rb.AssemblyConfig(), rb.AssemblyConfig(cache_stable=True)):
        with pytest.raises(rb.InvalidMessageError, match="tools must be a list"):
            rb.Assembler(cfg, provider=provider).assemble(HELLO[provider], tools=tools)
    with pytest.raises(rb.InvalidMessageError, match="tools must be a list"):
        rb.count_tokens(HELLO[provider], provider=provider, tools=tools)


@pytest.mark.parametrize("encoding", [None, "p50k_base", "\ud800", 5])
def test_count_tokens_with_a_wrong_encoding_is_a_config_error(encoding: Any) -> None:
    with pytest.raises(rb.ConfigError, match="encoding"):
        rb.count_tokens(HELLO["openai_chat"], encoding=encoding)


@pytest.mark.parametrize("ratio", ["x", None.__class__, -1, 0, 100, float("nan"), True])
def test_count_tokens_with_a_wrong_ratio_is_a_config_error(ratio: Any) -> None:
    with pytest.raises(rb.ConfigError, match="token_ratio"):
        rb.count_tokens(HELLO["anthropic"], provider="anthropic", token_ratio=ratio)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "value",
    [
        b"bytes",
        {1, 2},
        datetime.datetime(2026, 1, 1),
        decimal.Decimal("1.5"),
        {1: "non-str key"},
        object(),
    ],
    ids=["bytes", "set", "datetime", "decimal", "int-key", "object"],
)
def test_values_json_cannot_hold_are_invalid_messages(provider: str, value: Any) -> None:
    msgs = carrying(provider, value)
    typed(lambda: rb.Assembler(provider=provider).assemble(msgs))
    typed(lambda: rb.count_tokens(msgs, provider=provider))
    typed(lambda: rb.validate(msgs, provider=provider))


class RaisingAttribute:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("hostile __getattr__")


class RaisingMapping(dict):  # type: ignore[type-arg]
    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("hostile get")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("hostile __getitem__")


class RaisingList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("hostile __iter__")


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


HOSTILE = {
    "getattr": RaisingAttribute(),
    "mapping": RaisingMapping(role="user", content="x"),
    "list": RaisingList([1]),
    "deep": nested(10_000),
    "surrogate": "\ud800",
    "huge-int": 2**70,
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_objects_are_invalid_messages(provider: str, kind: str) -> None:
    value = HOSTILE[kind]
    for msgs in (
        [value],
        [{"role": "user", "content": value}],
        carrying(provider, value),
        RaisingList(HELLO[provider]),
    ):
        typed(lambda m=msgs: rb.Assembler(provider=provider).assemble(m))
        # Cache-stable results carry markers: the kept messages are read there, after a
        # rendering that copied them unread.
        stable = rb.Assembler(rb.AssemblyConfig(cache_stable=True), provider=provider)
        typed(lambda m=msgs, a=stable: a.assemble(m))
        typed(lambda m=msgs: rb.count_tokens(m, provider=provider))
        typed(lambda m=msgs: rb.validate(m, provider=provider))


@pytest.mark.parametrize(
    ("history", "anchor"),
    [
        (5, "rb-0123456789abcdef"),
        (None, "rb-0123456789abcdef"),
        (
            [{"role": "tool", "tool_call_id": "c", "content": [{"type": "text"}]}],
            "rb-0123456789abcdef",
        ),
        ([{"role": "tool", "tool_call_id": "c", "content": "\ud800"}], "rb-0123456789abcdef"),
        ([{"role": "tool", "tool_call_id": "c", "content": 7}], "rb-0123456789abcdef"),
        ([{"role": "user", "content": "x"}], 5),
        ([{"role": "user", "content": "x"}], None),
        ([{"role": "user", "content": "x"}], {"message_id": 5}),
        ([{"role": "user", "content": "x"}], "\ud800"),
    ],
)
def test_recover_with_wrong_types_is_typed(history: Any, anchor: Any) -> None:
    with pytest.raises(rb.RingboundError):
        rb.recover(history, anchor)


def png(width: int, height: int) -> str:
    """A data payload holding only a PNG signature and an IHDR chunk claiming this size."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    raw = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + crc
    return base64.b64encode(raw).decode()


def test_a_hostile_image_header_costs_the_most_not_the_least() -> None:
    """A header claiming 50,331,648 pixels a side wrapped Gemini's tile product to 0 in 32
    bits, so the request counted 13 tokens; it now costs more than any budget."""
    claimed = png(50_331_648, 50_331_648)
    honest = png(1024, 1024)

    def gemini(data: str) -> list[dict[str, Any]]:
        return [
            {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": data}}]}
        ]

    assert rb.count_tokens(gemini(claimed), provider="gemini") > 10**9
    assert rb.count_tokens(gemini(claimed), provider="gemini") > rb.count_tokens(
        gemini(honest), provider="gemini"
    )
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(provider="gemini").assemble(gemini(claimed))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_validate_applies_max_request_bytes(provider: str) -> None:
    big = "x" * (rb.AssemblyConfig().max_request_bytes + 1)
    msgs = {
        "openai_chat": [{"role": "user", "content": big}],
        "openai_responses": [{"role": "user", "content": big}],
        "anthropic": [{"role": "user", "content": big}],
        "gemini": [{"role": "user", "parts": [{"text": big}]}],
        "bedrock_converse": [{"role": "user", "content": [{"text": big}]}],
    }[provider]
    with pytest.raises(rb.InvalidMessageError, match="max_request_bytes"):
        rb.validate(msgs, provider=provider)


def ring(i: int) -> list[dict[str, Any]]:
    args = f'{{"page": {i}}}'  # distinct, so no older read is a duplicate to stub
    call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": args}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " + "word " * 30},
    ]


def test_a_list_changed_by_another_thread_is_read_once() -> None:
    """Threads share one Assembler (and its cache) while another thread inserts and deletes
    in the list they assemble. Each assembly works on the list as it was when it began: the
    answer is a typed error or a request that pairs, fits and holds only the list's own
    objects, in the list's order. Before, the output was built from the list as it was later:
    IndexErrors, broken pairing and requests over the budget."""
    shared: list[dict[str, Any]] = [{"role": "user", "content": "Read everything."}]
    for i in range(40):
        shared += ring(i)
    every = {id(m): m for m in shared}
    cfg = rb.AssemblyConfig(
        model_input_limit=2_000, output_reserve_tokens=0, safety_margin_tokens=0
    )
    asm = rb.Assembler(cfg)
    stop = time.monotonic() + 3.0
    failures: list[str] = []
    served = [0]
    rng = random.Random(18)
    lock = threading.Lock()

    def mutate() -> None:
        # Whole rings in and out at ring boundaries: the list is a valid session at every
        # instant, so an assembly that reads it once always has one to assemble.
        n = 40
        while time.monotonic() < stop:
            at = 1 + 2 * rng.randrange(max(1, (len(shared) - 1) // 2))
            if rng.random() < 0.5 and len(shared) > 3:
                del shared[at : at + 2]
            else:
                new = ring(n := n + 1)
                with lock:
                    every.update((id(m), m) for m in new)
                shared[at:at] = new

    def assemble() -> None:
        while time.monotonic() < stop:
            try:
                res = asm.assemble(shared)
            except Exception as e:  # the list is valid at every instant: no error is right
                failures.append(f"{type(e).__name__}: {e}")
                return
            served[0] += 1
            if rb.validate(res.messages) != []:
                failures.append("broken pairing")
            if res.report.tokens_after > cfg.budget:
                failures.append("over budget")
            with lock:
                foreign = [m for m in res.messages if id(m) not in every]
            if len(foreign) != len(res.report.rewrites):
                failures.append(f"{len(foreign)} messages that are not the caller's")

    threads = [threading.Thread(target=mutate)] + [
        threading.Thread(target=assemble) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:5]
    assert served[0] > 10


def test_a_compaction_that_cannot_reach_the_trigger_is_reused_by_the_same_history() -> None:
    """cache_stable with a summarizer: when the protected part and the summary alone sit
    above the compaction trigger (here 95% of the budget), the state the assembly returns
    makes the same request again. Before, the next call with the same history saw a request
    above the trigger, compacted again and changed the prefix: not idempotent."""

    def read(i: int) -> list[dict[str, Any]]:
        args = f'{{"page": {i}}}'
        call = {"id": f"c{i}", "type": "function", "function": {"name": "read", "arguments": args}}
        return [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"page {i}: " + "lorem " * 75},
        ]

    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful. " * 40},
        {"role": "user", "content": "Read all pages and report. " * 10},
    ]
    for i in range(12):
        history += read(i)
    # The protected part and the summary take 548 tokens: above the trigger of each budget.
    for budget in (600, 650, 700):
        cfg = rb.AssemblyConfig(
            model_input_limit=budget,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            cache_stable=True,
            recent_tool_rings=2,
            summary_max_tokens=64,
        )
        asm = rb.Assembler(cfg, summarizer=rb.summarizers.extractive())
        first = asm.assemble(history)
        assert first.report.summarized
        assert first.report.tokens_after > cfg.compact_trigger_ratio * cfg.budget
        again = asm.assemble(history, state=first.state)
        assert again.report.state == "reused"
        assert again.messages == first.messages
        assert again.state == first.state


def test_an_anchor_mapping_whose_get_raises_is_an_invalid_anchor() -> None:
    history = [{"role": "user", "content": "x"}]
    with pytest.raises(rb.InvalidAnchorError, match="hostile get"):
        rb.recover(history, RaisingMapping(message_id="rb-0123456789abcdef"))


@pytest.mark.parametrize("kind", ["mapping", "list"])
def test_detect_provider_on_a_body_that_raises_while_read_is_an_invalid_message(
    kind: str,
) -> None:
    body = [HOSTILE[kind]] if kind == "mapping" else {"messages": HOSTILE[kind]}
    with pytest.raises(rb.InvalidMessageError, match="raised RuntimeError"):
        rb.detect_provider(body)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tools_whose_iteration_raises_are_invalid_messages(provider: str) -> None:
    tools = RaisingList([{"type": "function", "function": {"name": "f"}}])
    with pytest.raises(rb.InvalidMessageError, match="tools cannot be read"):
        rb.count_tokens(HELLO[provider], provider=provider, tools=tools)
    with pytest.raises(rb.InvalidMessageError, match="tools cannot be read"):
        rb.Assembler(provider=provider).assemble(HELLO[provider], tools)


def test_a_list_whose_iteration_raises_reaches_the_summarizer_redacted() -> None:
    seen: list[Any] = []

    def summarize(request: Any) -> str:
        seen.append(request.units)
        return "summary"

    cfg = rb.AssemblyConfig(model_input_limit=400, output_reserve_tokens=0, safety_margin_tokens=0)
    parts = RaisingList([{"type": "text", "text": "key sk-abcdefghijklmnopqrstuvwx " * 20}])
    msgs = [{"role": "user", "content": "goal"}]
    msgs += [{"role": "user", "content": parts}, {"role": "assistant", "content": "ok"}] * 3
    msgs += [{"role": "user", "content": "now"}]
    rb.Assembler(cfg, summarizer=summarize).assemble(msgs)
    assert seen, "the summarizer was not called"
    assert "[REDACTED:openai_key]" in json.dumps(seen) and "sk-abc" not in json.dumps(seen)


@pytest.mark.parametrize("provider", ["openai_responses", "anthropic", "bedrock_converse"])
def test_a_tool_whose_mapping_raises_is_an_invalid_message(provider: str) -> None:
    """An atheris finding: a tool given as a mapping whose get/__getitem__ raises let its
    RuntimeError out of the openai_responses, anthropic and bedrock_converse adapters."""
    tools = [RaisingMapping(type="function", name="f")]
    with pytest.raises(rb.InvalidMessageError, match="tool"):
        rb.count_tokens(HELLO[provider], provider=provider, tools=tools)
    with pytest.raises(rb.InvalidMessageError, match="tool"):
        rb.Assembler(provider=provider).assemble(HELLO[provider], tools=tools)


class HostileStr(str):
    """A str subclass whose own conversions raise (an atheris finding)."""

    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("hostile __format__")


def stray_results(provider: str, call_id: str) -> list[dict[str, Any]]:
    """A request whose tool result answers ``call_id``, which no call made: validation quotes
    the id in the issue it reports."""
    if provider == "openai_chat":
        return [
            {"role": "user", "content": "go"},
            {"role": "tool", "tool_call_id": call_id, "content": "ok"},
        ]
    if provider == "openai_responses":
        return [
            {"role": "user", "content": "go"},
            {"type": "function_call_output", "call_id": call_id, "output": "ok"},
        ]
    if provider == "anthropic":
        result = {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}
        return [{"role": "user", "content": [result]}]
    if provider == "gemini":
        response = {"functionResponse": {"id": call_id, "name": call_id, "response": {}}}
        return [{"role": "user", "parts": [response]}]
    result = {"toolResult": {"toolUseId": call_id, "content": [{"text": "ok"}]}}
    return [{"role": "user", "content": [{"text": "go"}]}, {"role": "user", "content": [result]}]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_finding_str_subclass_id_quoted_in_a_pairing_issue(provider: str) -> None:
    """An atheris finding: a toolUseId given as a str subclass whose __str__ raises was quoted
    in Bedrock's pairing issue with an f-string, and its RuntimeError left ``validate``. An id
    is read as its characters in every adapter."""
    msgs = stray_results(provider, HostileStr("t1"))
    issues = rb.validate(msgs, provider=provider)
    assert any("t1" in i.message for i in issues), issues
    with pytest.raises(rb.PairingError):
        rb.Assembler(provider=provider).assemble(msgs)


@pytest.mark.parametrize("part", ["plain", "raising mapping"])
def test_finding_recover_reads_a_content_list_whose_iteration_raises_as_stored(part: str) -> None:
    """An atheris finding: ``recover`` iterated a tool result's content list through the list's
    own ``__iter__``, and a subclass's RuntimeError left it. The parts are read as stored, as
    the core reads them, so the anchor still finds the original text."""
    text = "the original result " * 10
    block = {"type": "text", "text": text}
    content = RaisingList([block if part == "plain" else RaisingMapping(block)])
    history = [{"role": "tool", "tool_call_id": "c1", "content": content}]
    found = rb.recover(history, rb._core.content_id(text))
    assert found.text == text and found.index == 0


def test_finding_recover_reads_a_message_whose_get_raises_as_stored() -> None:
    """An atheris finding (issue 18, exploring run): ``recover`` read an OpenAI Chat message's
    role, content and call id through the message's own ``get``, and a dict subclass's
    RuntimeError left it. A dict is read as stored, as the core reads it; a mapping that is
    not a dict and raises is a malformed message."""
    text = "the original result " * 10
    history = [RaisingMapping({"role": "tool", "tool_call_id": "c1", "content": text})]
    found = rb.recover(history, rb._core.content_id(text))
    assert found.text == text and found.index == 0 and found.call_id == "c1"
    assert found.content == text
