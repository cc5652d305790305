"""The OpenAI Responses adapter: its pairing rules and OpenAI's wording, the canonical view it
builds (which must pair whenever the adapter accepts the input), rendering back into the
caller's own items, and the invariants of DESIGN §4 on generated sessions converted from Chat."""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import orjson
import pytest
import reference as ref
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_readers.openai_responses import NO_FUNCTION_OUTPUT

import ringbound as rb
from ringbound import _core
from ringbound.adapted import read_canonical
from ringbound.providers.openai_responses import ADAPTER

KEY = "openai_responses"
SYNTH = _core.SYNTHESIZED_RESULT_TEXT
properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Building blocks ----------------------------------------------------------------------------


def user(text: str = "Email Ana the report, then summarize the logs.") -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def reasoning(rid: str, text: str = "I should check the logs first.") -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": rid,
        "summary": [{"type": "summary_text", "text": text}],
        "encrypted_content": "gAAAAB" + "Zm9vYmFy" * 40,
    }


def call(cid: str, name: str = "read_log", args: str = '{"file": "app.log"}') -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{cid}",
        "call_id": cid,
        "name": name,
        "arguments": args,
    }


def output(cid: str, text: str = "log line " * 60) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": text}


def ring(cid: str, name: str = "read_log", *, think: bool = True) -> list[dict[str, Any]]:
    return [*([reasoning(f"rs_{cid}")] if think else []), call(cid, name), output(cid)]


def session(rings: int = 10, first: str = "send_email") -> list[dict[str, Any]]:
    """A goal, then ``rings`` tool rings with reasoning (the first calls ``first``), a reply."""
    items = [user()]
    for k in range(rings):
        items += ring(f"call_{k}", first if k == 0 else "read_log")
    return [*items, say("The logs show three timeouts.")]


#: The stages these tests were written for: whole units dropped, the caller's objects kept.
#: The rewriting stages are tested in test_rewrites.py.
DROP_STAGES = ("drop_rings", "drop_plain_turns", "drop_error_rings")


def config(budget: int = 100_000, **kw: Any) -> rb.AssemblyConfig:
    kw.setdefault("stages", DROP_STAGES)
    kw.setdefault("side_effect_tools", ["send_email"])
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **kw
    )


def assemble(
    items: list[Any],
    cfg: rb.AssemblyConfig,
    *,
    system: Any = None,
    tools: list[Any] | None = None,
    pinned: tuple[int, ...] = (),
) -> rb.AssemblyResult:
    return rb.Assembler(cfg, provider=KEY).assemble(items, tools, system=system, pinned=pinned)


def count(
    items: list[Any], *, system: Any = None, tools: Any = None, enc: str = "o200k_base"
) -> int:
    return rb.count_tokens(items, provider=KEY, system=system, tools=tools, encoding=enc)


def canonical_issues(
    items: list[Any], system: Any = None
) -> list[tuple[str, str | None, int, str]]:
    """What the core's OpenAI Chat validator says of the canonical view."""
    canonical = read_canonical(ADAPTER, items, system)
    return _core.validate("openai_chat", orjson.dumps(list(canonical.messages)))


#: The fields a cheap stage rewrites: a result's text, a message's images, an MCP call's error.
REWRITTEN_FIELDS = ("output", "reason", "content", "error")


def _rewrite_of(item: Any, new: Any) -> bool:
    def rest(m: Any) -> dict[str, Any]:
        return {k: v for k, v in m.items() if k not in REWRITTEN_FIELDS}

    return isinstance(item, dict) and isinstance(new, dict) and rest(item) == rest(new)


def origins(items: list[Any], out: list[Any], rewritten: Any = ()) -> list[int | None]:
    """For each output item, the caller's item it is (or, for an index in ``rewritten``, the
    item a cheap stage rewrote into it); None for an insertion."""
    where = {id(m): i for i, m in enumerate(items)}
    pending = sorted(set(rewritten))
    found: list[int | None] = []
    for m in out:
        i = where.get(id(m))
        if i is None:
            i = next((j for j in pending if _rewrite_of(items[j], m)), None)
            if i is not None:
                pending.remove(i)
        found.append(i)
    return found


def kept(items: list[Any], out: list[Any], rewritten: Any = ()) -> list[int]:
    return [i for i in origins(items, out, rewritten) if i is not None]


def added(items: list[Any], out: list[Any], rewritten: Any = ()) -> list[Any]:
    return [m for m, i in zip(out, origins(items, out, rewritten), strict=True) if i is None]


def kinds(issues: list[rb.PairingIssue]) -> list[tuple[str, int]]:
    return [(i.kind, i.index) for i in issues]


def rejected(items: list[Any], **kw: Any) -> rb.PairingError:
    with pytest.raises(rb.PairingError) as info:
        assemble(items, config(), **kw)
    assert kinds(info.value.issues) == kinds(ADAPTER.validate(items, system=kw.get("system")))
    return info.value


# The round-trip matrix ----------------------------------------------------------------------


def test_single_tool_round_trip() -> None:
    items = [user(), *ring("call_a"), say("Done.")]
    assert ADAPTER.validate(items) == []
    canonical = read_canonical(ADAPTER, items, None)
    # The reasoning item and its call are one assistant message spanning both items.
    assert [m["role"] for m in canonical.messages] == ["user", "assistant", "tool", "assistant"]
    assert canonical.spans == [(0, 1), (1, 3), (3, 4), (4, 5)]
    assert canonical.messages[1]["tool_calls"][0]["id"] == "call_a"
    assert canonical_issues(items) == []
    res = assemble(items, config())
    assert all(a is b for a, b in zip(res.messages, items, strict=True))
    assert res.report.tokens_after == count(items)


def test_two_parallel_tools_are_one_canonical_call_message() -> None:
    items = [
        user(),
        reasoning("rs_1"),
        call("call_a", "get_weather"),
        call("call_b", "search_flights"),
        output("call_b", "no flights"),
        output("call_a", "sunny"),
    ]
    assert ADAPTER.validate(items) == []
    canonical = read_canonical(ADAPTER, items, None)
    assert [m["role"] for m in canonical.messages] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in canonical.messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert canonical.spans[1] == (1, 4)
    assert canonical_issues(items) == []
    res = assemble(items, config())
    assert kept(items, res.messages) == list(range(len(items)))


def test_tool_then_user_follow_up() -> None:
    items = [user(), *ring("call_a"), say("Sent."), user("Now summarize the logs.")]
    assert ADAPTER.validate(items) == []
    res = assemble(items, config())
    assert kept(items, res.messages) == list(range(len(items)))
    assert res.report.dropped_rings == []


def test_dropped_middle_ring_keeps_objects_and_fits() -> None:
    items = session()
    budget = count(items) // 2
    cfg = config(budget, recent_tool_rings=2)
    res = assemble(items, cfg)
    assert res.report.dropped_rings, "the budget forces drops"
    assert res.report.tokens_after <= budget
    assert rb.validate(res.messages, provider=KEY) == []
    assert canonical_issues(res.messages) == []
    own = kept(items, res.messages)
    assert own == sorted(own) and own[0] == 0 and own[-1] == len(items) - 1
    # Every dropped span is a whole ring: its reasoning, its call and its output.
    for start, end in res.report.dropped_rings:
        assert [items[i]["type"] for i in range(start, end)] == [
            "reasoning",
            "function_call",
            "function_call_output",
        ]
    # The recount of what is sent is what the report says.
    assert count(res.messages) == res.report.tokens_after


def test_ledger_note_is_a_native_instruction_item() -> None:
    items = session()
    res = assemble(items, config(count(items) // 2, recent_tool_rings=1))
    (note,) = added(items, res.messages)
    assert note["type"] == "message" and note["role"] in ("system", "developer")
    assert note["content"].startswith(ref.MARKER)
    assert "send_email" in note["content"] and '"call_0"' in note["content"]
    assert res.messages.index(note) == 1, "the note follows the first user message"
    # Assembling the output again reads the note back and changes nothing.
    again = assemble(res.messages, config(count(items) // 2, recent_tool_rings=1))
    assert [id(m) for m in again.messages] == [id(m) for m in res.messages]


def test_ledger_note_takes_the_role_of_the_first_instruction() -> None:
    items = [{"role": "developer", "content": "Be brief."}, *session()]
    res = assemble(items, config(count(items) // 2, recent_tool_rings=1))
    (note,) = added(items, res.messages)
    assert note["role"] == "developer"


def test_instructions_are_counted_and_returned_as_given() -> None:
    items = session(3)
    rules = "You are a careful assistant. " * 20
    assert count(items, system=rules) > count(items)
    res = assemble(items, config(), system=rules)
    assert res.system is rules
    assert res.report.tokens_after == count(items, system=rules)
    with pytest.raises(rb.BudgetExceededError):
        assemble(items[:1], config(count(items[:1], system=rules) - 1), system=rules)


# Broken pairing, in OpenAI's words ----------------------------------------------------------


def test_unanswered_call_is_missing_result() -> None:
    items = [user(), reasoning("rs_1"), call("call_a"), user("hello?")]
    err = rejected(items)
    (issue,) = err.issues
    assert (issue.kind, issue.index, issue.call_id) == ("missing_result", 2, "call_a")
    assert issue.message.startswith("No tool output found for function call call_a.")


def test_orphan_output_is_rejected() -> None:
    items = [user(), output("call_zz")]
    (issue,) = rejected(items).issues
    assert (issue.kind, issue.index) == ("orphan_result", 1)
    assert issue.message.startswith(
        "No tool call found for function call output with call_id call_zz."
    )


def test_output_before_its_call_is_rejected() -> None:
    items = [user(), output("call_a"), call("call_a"), output("call_a", "again")]
    (issue,) = rejected(items).issues
    assert (issue.kind, issue.index) == ("result_before_call", 1)
    assert issue.message.startswith("No tool call found for function call output")


def test_duplicate_output_and_duplicate_item_id() -> None:
    items = [user(), call("call_a"), output("call_a"), output("call_a")]
    (issue,) = rejected(items).issues
    assert (issue.kind, issue.index) == ("duplicate_id", 3)
    assert issue.message.startswith("Duplicate function_call_output for call_id 'call_a'.")

    items = [user(), *ring("call_a"), *ring("call_b")]
    items[4]["id"] = items[1]["id"]  # a reasoning item sent twice
    (issue,) = rejected(items).issues
    assert (issue.kind, issue.index) == ("duplicate_id", 4)
    assert issue.message.startswith(
        "Duplicate item found with id rs_call_a. Remove duplicate items from your input"
    )


def test_call_id_reused_in_a_later_turn_is_a_duplicate() -> None:
    items = [user(), call("call_0"), output("call_0"), say("ok"), call("call_0"), output("call_0")]
    issues = ADAPTER.validate(items)
    assert kinds(issues)[0] == ("duplicate_id", 4)


def test_reasoning_without_its_following_item() -> None:
    for items, at in (
        ([user(), reasoning("rs_9")], 1),
        ([user(), reasoning("rs_9"), user("go on")], 1),
        ([user(), call("call_a"), reasoning("rs_9"), output("call_a")], 2),
    ):
        (issue,) = rejected(items).issues
        assert (issue.kind, issue.index) == ("reasoning_without_call", at)
        assert issue.message.startswith(
            "Item 'rs_9' of type 'reasoning' was provided without its required following item."
        )


def test_user_message_between_call_and_output_is_not_adjacent() -> None:
    items = [user(), call("call_a"), user("still there?"), output("call_a")]
    (issue,) = rejected(items).issues
    assert (issue.kind, issue.index) == ("result_not_adjacent", 3)


def test_custom_tool_wording() -> None:
    items = [
        user(),
        {
            "type": "custom_tool_call",
            "call_id": "call_c",
            "name": "apply_patch",
            "input": "*** Begin",
        },
    ]
    (issue,) = rejected(items).issues
    assert issue.message.startswith("No tool output found for custom tool call call_c.")
    # An output of the wrong family answers nothing.
    items.append(output("call_c"))
    assert kinds(ADAPTER.validate(items)) == [("missing_result", 1), ("orphan_result", 2)]


def test_validate_reports_every_issue_in_order() -> None:
    items = [
        user(),
        call("call_a"),  # never answered
        user("next"),
        output("call_x"),  # answers nothing
        reasoning("rs_end"),  # nothing follows
    ]
    assert kinds(ADAPTER.validate(items)) == [
        ("missing_result", 1),
        ("orphan_result", 3),
        ("reasoning_without_call", 4),
    ]
    assert ADAPTER.validate(items) == ADAPTER.validate(copy.deepcopy(items))


# Repair --------------------------------------------------------------------------------------


def test_trailing_unanswered_call_gets_a_synthesized_output() -> None:
    items = [*session(4), reasoning("rs_last"), call("call_last", "send_email")]
    cfg = config(on_pairing_error="synthesize_error_results")
    res = assemble(items, cfg)
    assert res.messages[-1] == {
        "type": "function_call_output",
        "call_id": "call_last",
        "output": SYNTH,
    }
    assert res.messages[-3] is items[-2] and res.messages[-2] is items[-1]
    assert res.report.repairs == ["call_last"]
    assert ADAPTER.validate(res.messages) == []
    assert count(res.messages) == res.report.tokens_after
    # Orphans still fail closed under the repair policy.
    with pytest.raises(rb.PairingError):
        assemble([*items, output("call_zz")], cfg)


def test_synthesized_outputs_match_the_call_family() -> None:
    items = [
        user(),
        {"type": "custom_tool_call", "call_id": "call_c", "name": "apply_patch", "input": "diff"},
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "mail",
            "name": "send_email",
            "arguments": "{}",
        },
    ]
    res = assemble(items, config(on_pairing_error="synthesize_error_results"))
    assert added(items, res.messages) == [
        {"type": "custom_tool_call_output", "call_id": "call_c", "output": SYNTH},
        {
            "type": "mcp_approval_response",
            "approval_request_id": "mcpr_1",
            "approve": False,
            "reason": SYNTH,
        },
    ]
    assert ADAPTER.validate(res.messages) == []
    assert count(res.messages) == res.report.tokens_after


# Provider-specific items --------------------------------------------------------------------


def test_reasoning_travels_with_its_call_under_every_budget() -> None:
    items = session(8)
    full = count(items)
    for budget in range(full // 4, full + 1, max(1, full // 25)):
        try:
            res = assemble(items, config(budget, recent_tool_rings=1))
        except rb.BudgetExceededError:
            continue
        out = res.messages
        for k, m in enumerate(out):
            if m.get("type") == "reasoning":
                assert out[k + 1]["type"] == "function_call"
                assert out[k + 1]["call_id"] == m["id"].removeprefix("rs_")
            if m.get("type") == "function_call":
                assert out[k - 1].get("type") == "reasoning"
        # Encrypted reasoning is the caller's object, untouched.
        for m in out:
            if m.get("type") == "reasoning":
                assert any(m is x for x in items)


def test_encrypted_reasoning_is_counted() -> None:
    items = [user(), *ring("call_a")]
    lighter = copy.deepcopy(items)
    del lighter[1]["encrypted_content"]
    assert count(items) - count(lighter) >= rb.count_text(items[1]["encrypted_content"])


def test_interleaved_model_items_fold_into_the_ring() -> None:
    """Outputs may come after other model items (a late reasoning item, a commentary message,
    another call): the whole stretch is one ring, and the canonical view still pairs."""
    items = [
        user(),
        reasoning("rs_1"),
        call("call_a"),
        call("call_b"),
        output("call_a"),
        reasoning("rs_2"),
        say("Now the second one."),
        call("call_c", "send_email"),
        output("call_c"),
        output("call_b"),
        say("All done."),
    ]
    assert ADAPTER.validate(items) == []
    assert canonical_issues(items) == []
    canonical = read_canonical(ADAPTER, items, None)
    assert [c["id"] for c in canonical.messages[1]["tool_calls"]] == ["call_a", "call_b", "call_c"]
    assert sum(1 for m in canonical.messages if m["role"] == "tool") == 3
    res = assemble(items, config(count(items) - 1, recent_tool_rings=0, recent_user_turns=0))
    assert kept(items, res.messages) == [0, 10]
    assert [tuple(s) for s in res.report.dropped_rings] == [(1, 10)]
    assert "call_c" in added(items, res.messages)[0]["content"]


def test_mcp_call_is_a_self_contained_ring() -> None:
    mcp = {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "mail",
        "name": "send_email",
        "arguments": '{"to": "ana@example.com"}',
        "output": "sent " * 200,
    }
    items = [user(), mcp, say("Sent."), user("Thanks, now the logs."), *session(3)[1:]]
    assert ADAPTER.validate(items) == []
    canonical = read_canonical(ADAPTER, items, None)
    assert canonical.messages[1]["tool_calls"][0]["id"] == "mcp_1"
    assert canonical.messages[2] == {
        "role": "tool",
        "tool_call_id": "mcp_1",
        "content": mcp["output"],
    }
    # One model turn (the call and the reply after it): its message and the call's result.
    assert canonical.spans[1] == canonical.spans[2] == (1, 3)
    res = assemble(items, config(count(items) - 10, recent_tool_rings=1))
    assert mcp not in res.messages
    note = added(items, res.messages)[0]
    assert '"mcp_1"' in note["content"]


def test_mcp_approval_pairs_by_request_id() -> None:
    items = [
        user(),
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "mail",
            "name": "send_email",
            "arguments": "{}",
        },
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "mail",
            "name": "send_email",
            "arguments": "{}",
            "output": "sent",
            "approval_request_id": "mcpr_1",
        },
    ]
    assert ADAPTER.validate(items) == []
    assert canonical_issues(items) == []
    res = assemble(items, config())
    assert len(res.messages) == len(items)
    assert all(a is b for a, b in zip(res.messages, items, strict=True))
    stray = [
        user(),
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_9", "approve": False},
    ]
    assert kinds(ADAPTER.validate(stray)) == [("orphan_result", 1)]


def test_a_model_turn_costs_what_its_items_cost_apart() -> None:
    """Items of one model turn share a canonical message, charged the framing of each item: so
    when a drop joins two turns into one, the recount of the output is still tokens_after."""
    a, b = say("First part of the answer."), say("Second part.")
    base = count([user()])
    assert count([user(), a, b]) - base == (count([user(), a]) - base) + (count([user(), b]) - base)
    items = [user(), a, user("An aside " * 30), b, user("Thanks.")]
    cfg = config(count(items) - 5, recent_user_turns=1, pin=["first_user_message"])
    res = assemble(items, cfg, pinned=(1,))
    assert kept(items, res.messages) == [0, 1, 3, 4]
    assert count(res.messages) == res.report.tokens_after
    again = assemble(res.messages, cfg)
    assert [id(m) for m in again.messages] == [id(m) for m in res.messages]


def test_hosted_tool_items_and_images_are_counted() -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "weather in Paris " * 20},
    }
    items = [user(), search, say("Sunny.")]
    assert ADAPTER.validate(items) == []
    assert count(items) > count([user(), say("Sunny.")]) + 20
    image = {"type": "input_image", "image_url": gen.png_data_url(1024, 1024), "detail": "high"}
    with_image = [{"role": "user", "content": [{"type": "input_text", "text": "look"}, image]}]
    without = [{"role": "user", "content": [{"type": "input_text", "text": "look"}]}]
    assert count(with_image) - count(without) == 765  # OpenAI's 1024 x 1024 high-detail price
    shot = [
        user(),
        call("call_s", "screenshot"),
        {
            "type": "function_call_output",
            "call_id": "call_s",
            "output": [{"type": "input_image", "file_id": "file_1", "detail": "low"}],
        },
    ]
    assert count(shot) - count([user(), call("call_s", "screenshot"), output("call_s", "")]) == 85


def test_tools_are_counted_in_openai_shape() -> None:
    tools = [
        {
            "type": "function",
            "name": "read_log",
            "description": "Read a log file.",
            "parameters": {"type": "object", "properties": {"file": {"type": "string"}}},
        },
        {"type": "web_search"},
    ]
    assert ADAPTER.tools_to_openai(tools)[0] == {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Read a log file.",
            "parameters": tools[0]["parameters"],
        },
    }
    items = session(2)
    assert count(items, tools=tools) > count(items)


def test_sdk_objects_are_read_through_model_dump_and_kept_as_they_are() -> None:
    pydantic = pytest.importorskip("pydantic")

    class FunctionCall(pydantic.BaseModel):
        type: str = "function_call"
        call_id: str
        name: str
        arguments: str
        id: str | None = None

    items: list[Any] = [user(), FunctionCall(call_id="call_a", name="f", arguments="{}")]
    items.append(output("call_a"))
    assert ADAPTER.validate(items) == []
    res = assemble(items, config())
    assert all(a is b for a, b in zip(res.messages, items, strict=True))


# Bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ("hello", "must be an object"),
        ({"content": "no role"}, "missing `type`"),
        ({"type": 3}, "`type` must be a string"),
        ({"type": "item_reference", "id": "msg_1"}, "not supported"),
        ({"type": "message", "role": "tool", "content": "x"}, "unknown role"),
        ({"role": "user", "content": 5}, "`content` must be a string or a list"),
        ({"role": "user", "content": [{"type": "output_text", "text": "x"}]}, "cannot carry"),
        ({"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}, "cannot carry"),
        ({"role": "user", "content": [{"type": "input_image", "detail": "low"}]}, "neither"),
        (
            {
                "role": "user",
                "content": [{"type": "input_image", "image_url": "u", "detail": "max"}],
            },
            "detail",
        ),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "missing `call_id`"),
        ({"type": "function_call", "call_id": "", "name": "f", "arguments": "{}"}, "empty"),
        (
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": {}},
            "must be a string",
        ),
        ({"type": "function_call_output", "call_id": "c"}, "missing `output`"),
        ({"type": "function_call_output", "call_id": "c", "output": [{"type": "x"}]}, "expected"),
        ({"type": "reasoning", "summary": "thinking"}, "`summary` must be a list"),
        (
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": 1}]},
            "must be a string",
        ),
        (
            {"type": "mcp_approval_response", "approval_request_id": "r", "approve": "yes"},
            "boolean",
        ),
        ({"type": "message", "role": "user", "content": "x", "id": 7}, "`id` must be a string"),
    ],
)
def test_bad_items_are_typed_errors_naming_the_item(item: Any, reason: str) -> None:
    items = [user(), item]
    for check in (
        lambda: ADAPTER.validate(items),
        lambda: read_canonical(ADAPTER, items, None),
        lambda: count(items),
        lambda: assemble(items, config()),
    ):
        with pytest.raises(rb.InvalidMessageError) as info:
            check()
        assert info.value.index == 1
        assert reason in info.value.reason


def test_bad_request_shapes_are_typed_errors() -> None:
    with pytest.raises(rb.InvalidMessageError) as info:
        read_canonical(ADAPTER, {"role": "user", "content": "x"}, None)  # type: ignore[arg-type]
    assert info.value.index is None
    with pytest.raises(rb.InvalidMessageError) as info:
        ADAPTER.validate([user()], system=["not", "a", "string"])
    assert info.value.index is None


# Conversion from Chat ------------------------------------------------------------------------


def chat_pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(call name, arguments, result text) of every answered Chat call, in result order."""
    out = []
    calls: dict[str, dict[str, Any]] = {}
    for m in messages:
        if m["role"] == "assistant":
            calls = {c["id"]: c for c in m.get("tool_calls") or ()}
        elif m["role"] == "tool":
            c = calls[m["tool_call_id"]]
            out.append((c["function"]["name"], c["function"]["arguments"], ref.texts(m)))
    return out


def canonical_pairs(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    calls = {c["id"]: c for m in messages for c in m.get("tool_calls") or ()}
    return [
        (
            calls[m["tool_call_id"]]["function"]["name"],
            calls[m["tool_call_id"]]["function"]["arguments"],
            ref.texts(m),
        )
        for m in messages
        if m["role"] == "tool"
    ]


def turns(messages: list[dict[str, Any]]) -> list[str]:
    """Roles, tool messages aside, consecutive assistant messages counted once."""
    out: list[str] = []
    for m in messages:
        if m["role"] != "tool" and not (m["role"] == "assistant" and out[-1:] == ["assistant"]):
            out.append(m["role"])
    return out


@properties
@given(gen.sessions())
def test_from_canonical_then_to_canonical_keeps_pairing_and_content(
    chat: list[dict[str, Any]],
) -> None:
    items, system = from_canonical("openai_responses", chat)
    assert ADAPTER.validate(items, system=system) == []
    canonical = read_canonical(ADAPTER, items, system)
    assert _core.validate("openai_chat", orjson.dumps(list(canonical.messages))) == []
    assert canonical_pairs(canonical.messages) == chat_pairs(chat)
    # Consecutive model messages are one model turn in Responses, hence one canonical message.
    assert turns(canonical.messages) == turns(
        [m for m in chat if m["role"] != "assistant" or ref.texts(m) or m.get("tool_calls")]
    )
    # The core's view holds a message's texts as one string (a model turn's, joined).
    every_text = "\u0000".join(t for m in canonical.messages for t in ref.texts(m))
    for m in chat:
        for t in ref.texts(m):
            assert t in every_text


# Generated sessions ----------------------------------------------------------------------------


def with_provider_items(items: list[Any], seed: int) -> list[Any]:
    """Adds what Chat has no word for: reasoning items before model turns (some with encrypted
    content), and now and then outputs interleaved with later model items of the same ring."""
    rnd = random.Random(seed)
    out: list[Any] = []
    k = 0
    while k < len(items):
        m = items[k]
        starts_turn = (m.get("type") == "function_call" or m.get("role") == "assistant") and (
            not out
            or out[-1].get("type") not in ("function_call", "message", "reasoning")
            or out[-1].get("role") not in (None, "assistant")
        )
        if starts_turn and rnd.random() < 0.6:
            out.append(reasoning(f"rs_{k}", f"step {k}"))
            if rnd.random() < 0.5:
                del out[-1]["encrypted_content"]
        out.append(m)
        k += 1
    # In some parallel rings, a call the first output does not answer moves after that output,
    # behind a commentary message: the ring then runs over later model items.
    for _ in range(2):
        runs = [
            j
            for j in range(len(out) - 3)
            if out[j].get("type") == "function_call"
            and out[j + 1].get("type") == "function_call"
            and out[j + 2].get("type") == "function_call_output"
        ]
        if not runs or rnd.random() < 0.5:
            break
        j = rnd.choice(runs)
        first = out[j + 2]["call_id"]
        moved = out.pop(j + 1 if out[j + 1]["call_id"] != first else j)
        at = j + 2  # right after the first output
        out[at:at] = [say("Next, the other one."), moved]
    return out


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Any], str | None, gen.Case]:
    chat = draw(gen.sessions(max_units=10))
    if draw(st.booleans()):
        chat = draw(gen.drop_some_results(chat))
    items, system = from_canonical("openai_responses", chat)
    items = with_provider_items(items, draw(gen.seeds))
    policy = {**draw(gen.policies()), "on_pairing_error": "synthesize_error_results"}
    names = sorted({i["name"] for i in items if i.get("type") == "function_call"})
    tools = (
        [
            {"type": "function", "name": n, "description": n, "parameters": {"type": "object"}}
            for n in names
        ]
        if names and draw(st.booleans())
        else None
    )
    full = count(items, system=system, tools=tools, enc=policy["encoding"])
    pinned: tuple[int, ...] = ()
    if draw(st.integers(0, 3)) == 0:
        pinned = tuple(draw(st.lists(st.integers(0, len(items) - 1), max_size=2, unique=True)))
    # Half the budgets near the session's size, where assemblies succeed and drop a few units.
    fraction = draw(st.one_of(gen.fractions, st.floats(min_value=0.6, max_value=1.1)))
    budget = gen.budget_for(full, fraction)
    return items, system, gen.Case(items, tools, policy, budget, pinned, full)


def run(
    items: list[Any], system: Any, case: gen.Case, **overrides: Any
) -> rb.AssemblyResult | Exception:
    try:
        return assemble(
            items, case.config(**overrides), system=system, tools=case.tools, pinned=case.pinned
        )
    except rb.BudgetExceededError as e:
        return e


def protected_natives(
    items: list[Any], system: Any, case: gen.Case, cfg: rb.AssemblyConfig
) -> set[int]:
    """Native items of the protected prefix and suffix, by the reference on the canonical view."""
    canonical = read_canonical(ADAPTER, items, system)
    pins = [
        k
        for k, (start, end) in enumerate(canonical.spans)
        if any(i in case.pinned for i in range(start, end))
    ]
    protected = ref.protected_indices(canonical.messages, cfg, pins)
    return {i for k in protected for i in range(*canonical.spans[k]) if i >= 0}


@properties
@given(cases(), st.sampled_from(gen.stage_prefixes()))
def test_invariants_after_every_stage(
    data: tuple[list[Any], str | None, gen.Case], stages: tuple[str, ...]
) -> None:
    """DESIGN §4 after a stage (each example draws how many stages run): output pairs (by this
    adapter and as canonical Chat), is the input in order minus whole units plus reported
    insertions, keeps the protected part as the caller's objects, fits (and recounts to
    tokens_after) or fails closed, is deterministic and idempotent, leaves the input untouched
    and ledgers every dropped side effect."""
    items, system, case = data
    snapshot = copy.deepcopy(items)
    cfg = case.config(stages=stages)
    res = run(items, system, case, stages=stages)
    assert items == snapshot
    if isinstance(res, rb.BudgetExceededError):
        assert res.tokens > case.budget and res.budget == case.budget
        return
    assert isinstance(res, rb.AssemblyResult)
    out = res.messages
    # 1. pairing
    assert ADAPTER.validate(out, system=res.system) == []
    assert canonical_issues(out, res.system) == []
    # 2. order, whole units (kept as they are or rewritten), reported insertions
    rewritten = {r.index for r in res.report.rewrites}
    own = kept(items, out, rewritten)
    assert own == sorted(set(own))
    assert rewritten <= set(own)
    dropped = {
        i for s, e in res.report.dropped_rings + res.report.dropped_turns for i in range(s, e)
    }
    assert dropped == set(range(len(items))) - set(own)
    extra = added(items, out, rewritten)
    notes = [m for m in extra if m.get("type") == "message"]
    outputs = [m for m in extra if m.get("type") != "message"]
    assert len(notes) <= 1
    assert all(n["content"].startswith(ref.MARKER) for n in notes)
    assert {o["call_id"] for o in outputs} <= set(res.report.repairs)
    assert all(o["output"] == SYNTH for o in outputs)
    # 3. protection (what the floors protect, once shrink_recent lowered the recent ones)
    assert res.system is system
    floors = cfg
    if any(s.stage == "shrink_recent" for s in res.report.stages):
        floors = dataclasses.replace(
            cfg,
            recent_tool_rings=min(cfg.recent_tool_rings, cfg.min_recent_tool_rings),
            recent_user_turns=min(cfg.recent_user_turns, cfg.min_recent_user_turns),
        )
    for i in protected_natives(items, system, case, floors):
        assert i in own, f"protected item {i} is missing"
    # 4. budget, exactly recounted
    assert res.report.tokens_after <= case.budget
    tools = None if res.report.tools_dropped else case.tools
    assert count(out, system=res.system, tools=tools, enc=cfg.encoding) == res.report.tokens_after
    # 5. deterministic, idempotent
    again = run(items, system, case, stages=stages)
    assert isinstance(again, rb.AssemblyResult) and again.messages == out
    assert kept(items, again.messages, rewritten) == own
    if not res.report.tools_dropped:
        twice = assemble(out, cfg, system=res.system, tools=case.tools)
        assert [id(m) for m in twice.messages] == [id(m) for m in out]
    # 9. the ledger
    if "side_effect_ledger" in cfg.pin:
        text = notes[0]["content"] if notes else ""
        for i in dropped:
            m = items[i]
            if m.get("type") == "function_call" and m["name"] in cfg.side_effect_tools:
                assert f'call_id="{m["call_id"]}"' in text or f'"{m["call_id"]}"' in text


@properties
@given(cases(), st.floats(min_value=1.0, max_value=2.0))
def test_monotone_in_budget(data: tuple[list[Any], str | None, gen.Case], factor: float) -> None:
    """A larger budget never keeps fewer of the caller's items."""
    items, system, case = data
    small = run(items, system, case)
    large = run(items, system, case.with_budget(int(case.budget * factor) + 1))
    if isinstance(small, rb.AssemblyResult):
        assert isinstance(large, rb.AssemblyResult)
        assert set(kept(items, small.messages)) <= set(kept(items, large.messages))


@properties
@given(gen.sessions(max_units=10), gen.seeds, st.data())
def test_accepted_input_has_a_pairing_canonical_view(
    chat: list[dict[str, Any]], seed: int, data: st.DataObject
) -> None:
    """Whatever the adapter accepts, the core's Chat validator accepts as canonical; deleting
    one output is exactly one missing_result at its call."""
    items, system = from_canonical("openai_responses", chat)
    items = with_provider_items(items, seed)
    assert ADAPTER.validate(items, system=system) == []
    assert canonical_issues(items, system) == []
    outputs = [i for i, m in enumerate(items) if m.get("type") == "function_call_output"]
    if not outputs:
        return
    gone = data.draw(st.sampled_from(outputs))
    cid = items[gone]["call_id"]
    broken = items[:gone] + items[gone + 1 :]
    at = next(i for i, m in enumerate(broken) if m.get("call_id") == cid)
    issues = ADAPTER.validate(broken, system=system)
    assert [(i.kind, i.index, i.call_id) for i in issues] == [("missing_result", at, cid)]
    assert NO_FUNCTION_OUTPUT.format(id=cid) in issues[0].message
