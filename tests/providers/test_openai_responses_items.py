"""OpenAI Responses items beyond function calls: compaction items kept verbatim (the latest one
whatever the budget, the items before it dropped first), the computer, shell, local_shell and
apply_patch call/output pairs kept and dropped together, and the core's validator checked
against the Python oracle of the old rules on generated sessions."""

from __future__ import annotations

import copy
import random
from typing import Any

import openai_responses_oracle as oracle
import orjson
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_openai_responses import (
    ADAPTER,
    assemble,
    call,
    config,
    count,
    kept,
    output,
    say,
    session,
    user,
    with_provider_items,
)

import ringbound as rb
from ringbound import _core

properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SEALED = "gAAAAABp" + "Q2xhdWRl" * 500


def compaction(cid: str = "cmp_1", sealed: str = SEALED) -> dict[str, Any]:
    return {"type": "compaction", "id": cid, "encrypted_content": sealed}


# Built-in tool pairs, each keyed by call_id ----------------------------------------------------


def computer(cid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {
            "type": "computer_call",
            "id": f"cu_{cid}",
            "call_id": cid,
            "action": {"type": "click", "button": "left", "x": 10, "y": 20},
            "pending_safety_checks": [],
            "status": "completed",
        },
        {
            "type": "computer_call_output",
            "call_id": cid,
            "output": {"type": "computer_screenshot", "image_url": gen.png_data_url(1024, 768)},
        },
    )


def shell(cid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {"type": "shell_call", "call_id": cid, "action": {"commands": ["cat app.log"]}},
        {
            "type": "shell_call_output",
            "call_id": cid,
            "output": [
                {
                    "stdout": "log line " * 60,
                    "stderr": "",
                    "outcome": {"type": "exit", "exit_code": 0},
                }
            ],
        },
    )


def local_shell(cid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {
            "type": "local_shell_call",
            "id": f"lsh_{cid}",
            "call_id": cid,
            "action": {"type": "exec", "command": ["cat", "app.log"], "env": {}},
            "status": "completed",
        },
        {"type": "local_shell_call_output", "call_id": cid, "output": "log line " * 60},
    )


def apply_patch(cid: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {
            "type": "apply_patch_call",
            "call_id": cid,
            "operation": {"type": "update_file", "path": "app.py", "diff": "-a\n+b\n" * 40},
            "status": "completed",
        },
        {"type": "apply_patch_call_output", "call_id": cid, "status": "completed", "output": "ok"},
    )


PAIRS = {
    "computer": computer,
    "shell": shell,
    "local_shell": local_shell,
    "apply_patch": apply_patch,
}


def pair_session(make: Any, rings: int = 8) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [user()]
    for k in range(rings):
        items += make(f"call_{k}")
    return [*items, say("Done.")]


# Compaction ---------------------------------------------------------------------------------


def compacted_session() -> list[dict[str, Any]]:
    """Eight rings, a compaction item standing for them, then four rings after it."""
    items = session(8)
    items.append(compaction())
    items.append(user("Now the second half of the logs."))
    for k in range(8, 12):
        items += [call(f"call_{k}"), output(f"call_{k}")]
    return [*items, say("Both halves read.")]


def test_a_compaction_item_is_counted_at_its_size_and_kept_verbatim() -> None:
    items = compacted_session()
    at = items.index(next(m for m in items if m.get("type") == "compaction"))
    without = items[:at] + items[at + 1 :]
    sealed = _core.count_text(SEALED, "o200k_base")
    assert count(items) - count(without) >= sealed
    res = assemble(items, config())
    assert res.messages == items
    assert res.messages[at] is items[at]


def test_items_before_the_latest_compaction_are_dropped_first() -> None:
    items = compacted_session()
    at = next(i for i, m in enumerate(items) if m.get("type") == "compaction")
    full = count(items)
    res = assemble(items, config(full - 1500))
    dropped = [i for i in range(len(items)) if i not in kept(items, res.messages)]
    assert dropped and all(i < at for i in dropped), dropped
    assert items[at] in res.messages
    assert res.report.tokens_after <= res.report.budget


def test_the_latest_compaction_item_is_kept_whatever_the_budget() -> None:
    items = compacted_session()
    older = compaction("cmp_0", "gAAAAABo" + "b2xkZXI=" * 200)
    items.insert(4, older)  # after the first ring
    latest = next(i for i, m in enumerate(items) if m.get("id") == "cmp_1")
    res = assemble(items, config(_core.count_text(SEALED, "o200k_base") + 1200))
    assert any(m is items[latest] for m in res.messages)
    assert not any(m is older for m in res.messages), "an older compaction item is droppable"
    assert res.report.tokens_after <= res.report.budget


def test_a_compaction_trigger_is_the_final_item_and_goes_with_the_one_before() -> None:
    items = [*session(4), {"type": "compaction_trigger"}]
    assert ADAPTER.validate(items) == []
    res = assemble(items, config(count(items) - 200))
    assert res.report.dropped_rings
    assert res.messages[-1] is items[-1]
    assert res.messages[-2] is items[-2]
    with pytest.raises(rb.InvalidMessageError) as info:
        assemble([{"type": "compaction_trigger"}, *items[:-1]], config())
    assert info.value.index == 0
    # OpenAI's own words.
    assert info.value.reason == "The 'compaction_trigger' item must be the final input item."
    with pytest.raises(rb.InvalidMessageError) as info:
        assemble([*items[:-1], {"type": "compaction_trigger", "id": "ct_1"}], config())
    assert info.value.index == len(items) - 1
    assert "may not carry an 'id'" in info.value.reason


def test_two_compaction_items_of_one_response_are_kept_as_one_group() -> None:
    """One compaction can answer with two items (gpt-5-mini does each time): both stand for
    what came before, so neither is dropped at any budget."""
    items = compacted_session()
    at = next(i for i, m in enumerate(items) if m.get("type") == "compaction")
    items.insert(at + 1, compaction("cmp_2", "gAAAAABq" + "c2Vjb25k" * 300))
    floor = count(items[at : at + 2]) + 900
    res = assemble(items, config(floor))
    assert [m for m in res.messages if m.get("type") == "compaction"] == items[at : at + 2]
    assert res.messages[:2] == items[at : at + 2] or items[at] in res.messages
    assert all(any(m is x for m in res.messages) for x in items[at : at + 2])
    assert res.report.tokens_after <= res.report.budget


@st.composite
def compacted_cases(draw: st.DrawFn) -> tuple[list[Any], gen.Case, list[int]]:
    """A generated Responses session with one to three compaction items, some side by side,
    between its units; the latest group's positions."""
    chat = draw(gen.sessions(max_units=8))
    items, _ = from_canonical("openai_responses", chat)
    items = with_provider_items(items, draw(gen.seeds))
    # Between turns: before a user message, or at the end.
    starts = [
        i for i in range(1, len(items) + 1) if i == len(items) or items[i].get("role") == "user"
    ]
    chosen = sorted(draw(st.lists(st.sampled_from(starts), min_size=1, max_size=3)))
    for n, at in enumerate(reversed(chosen)):
        items.insert(at, compaction(f"cmp_{n}", "gAAAAABr" + "c3VtbWFyeQ==" * 40))
    last = max(i for i, m in enumerate(items) if m.get("type") == "compaction")
    first = last
    while first > 0 and items[first - 1].get("type") == "compaction":
        first -= 1
    group = list(range(first, last + 1))
    full = count(items)
    budget = gen.budget_for(full, draw(gen.fractions))
    policy = {**draw(gen.policies()), "on_pairing_error": "synthesize_error_results"}
    return items, gen.Case(items, None, policy, budget, (), full), group


@properties
@given(compacted_cases())
def test_the_latest_compaction_group_is_kept_once_verbatim(
    data: tuple[list[Any], gen.Case, list[int]],
) -> None:
    items, case, group = data
    before = copy.deepcopy(items)
    try:
        res = assemble(items, case.config())
    except rb.BudgetExceededError as e:
        assert e.tokens > e.budget
        return
    for i in group:
        assert sum(1 for m in res.messages if m is items[i]) == 1, f"item {i} kept once"
    assert ADAPTER.validate(res.messages) == []
    assert res.report.tokens_after <= res.report.budget
    assert items == before


@pytest.mark.parametrize("check", ["validate", "assemble"])
def test_an_item_reference_is_refused_naming_its_type(check: str) -> None:
    items = [user(), {"type": "item_reference", "id": "msg_1"}]
    with pytest.raises(rb.InvalidMessageError) as info:
        ADAPTER.validate(items) if check == "validate" else assemble(items, config())
    assert info.value.index == 1
    assert info.value.reason.startswith("item type 'item_reference' is not supported")


# Built-in tool pairs ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_each_builtin_pair_is_kept_or_dropped_together(name: str) -> None:
    items = pair_session(PAIRS[name])
    assert ADAPTER.validate(items) == []
    res = assemble(items, config(count(items) // 2))
    ids = kept(items, res.messages)
    calls = {items[i]["call_id"] for i in ids if items[i].get("type") == f"{name}_call"}
    outputs = {items[i]["call_id"] for i in ids if items[i].get("type") == f"{name}_call_output"}
    assert calls == outputs and 0 < len(calls) < 8
    assert res.report.tokens_after <= res.report.budget
    assert ADAPTER.validate(res.messages) == []


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_stray_and_missing_builtin_outputs_are_reported(name: str) -> None:
    first, answer = PAIRS[name]("call_1")
    orphan = rb.validate([user(), answer], provider="openai_responses")
    assert [(i.kind, i.index, i.call_id) for i in orphan] == [("orphan_result", 1, "call_1")]
    assert f"{name}_call_output answers no {name}_call call_1" in orphan[0].message
    missing = rb.validate([user(), first, user("and?")], provider="openai_responses")
    assert [(i.kind, i.index) for i in missing] == [("missing_result", 1)]
    if name == "local_shell":
        assert missing[0].message.startswith("No tool output found for local shell call call_1.")
    with pytest.raises(rb.PairingError):
        assemble([user(), first, user("and?")], config())


@pytest.mark.parametrize("name", ["shell", "local_shell", "apply_patch"])
def test_a_missing_builtin_output_is_synthesized_in_its_own_shape(name: str) -> None:
    first, _ = PAIRS[name]("call_1")
    items = [user(), first]
    res = assemble(items, config(on_pairing_error="synthesize_error_results"))
    written = res.messages[-1]
    assert written["type"] == f"{name}_call_output" and written["call_id"] == "call_1"
    assert ADAPTER.validate(res.messages) == []


def test_a_missing_screenshot_cannot_be_synthesized() -> None:
    """Refused by the core, in the words the adapter used, on both paths (the adapter has no
    rendering of its own to refuse it)."""
    assert not hasattr(ADAPTER, "render")
    first, _ = computer("call_1")
    cfg = config(on_pairing_error="synthesize_error_results")
    with pytest.raises(rb.PairingError) as info:
        assemble([user(), first], cfg)
    assert str(info.value) == (
        "computer_call call_1 has no computer_call_output, and none can be synthesized: "
        "its output is a screenshot only the caller's computer can take"
    )
    assert [(i.kind, i.call_id, i.index, i.message) for i in info.value.issues] == [
        (
            "missing_result",
            "call_1",
            1,
            "ringbound: computer_call call_1 has no computer_call_output.",
        )
    ]
    body = orjson.dumps({"model": "gpt-5", "input": [user(), first]})
    with pytest.raises(rb.PairingError) as on_body:
        rb.Assembler(cfg, provider="openai_responses").assemble_body(body)
    assert on_body.value.issues == info.value.issues


def test_a_local_shell_output_may_name_its_call_by_id() -> None:
    first, answer = local_shell("call_1")
    answer = {"type": "local_shell_call_output", "id": "call_1", "output": "ok"}
    assert ADAPTER.validate([user(), first, answer]) == []


# The core's validator against the Python oracle ---------------------------------------------


def _both(items: list[Any]) -> tuple[Any, Any]:
    """What the core's validator and the Python oracle make of a request: the issues, or the
    type and index of the error."""

    def run(validate: Any) -> Any:
        try:
            return [(i.kind, i.call_id, i.index, i.message) for i in validate(items)]
        except rb.InvalidMessageError as e:
            return ("InvalidMessageError", e.index)

    return run(ADAPTER.validate), run(oracle.validate)


def _builtin_pairs(items: list[dict[str, Any]], rnd: random.Random) -> list[dict[str, Any]]:
    """Some function calls and their outputs turned into built-in tool pairs of one kind."""
    kinds: dict[str, Any] = {}
    out = []
    for m in items:
        cid = m.get("call_id")
        if m.get("type") == "function_call" and rnd.random() < 0.4:
            kinds[cid] = rnd.choice(list(PAIRS.values()))
            m = {**kinds[cid](cid)[0], "call_id": cid}
        elif m.get("type") == "function_call_output" and cid in kinds:
            m = {**kinds[cid](cid)[1], "call_id": cid}
        out.append(m)
    return out


@st.composite
def _edited(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A generated session in Responses' shape, with reasoning, built-in tool pairs and
    compaction items, and one to three edits that break pairing in every way: items deleted,
    swapped, copied or moved."""
    native, _ = from_canonical("openai_responses", draw(gen.sessions(images=False)))
    rnd = random.Random(draw(gen.seeds))
    items = _builtin_pairs(with_provider_items(native, rnd.randrange(1 << 30)), rnd)
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), compaction(f"cmp_{len(items)}"))
    items = copy.deepcopy(items)
    for _ in range(draw(st.integers(1, 3))):
        if not items:
            break
        k = draw(st.integers(0, len(items) - 1))
        op = draw(st.sampled_from(("delete", "swap", "copy", "move")))
        if op == "delete":
            del items[k]
        elif op == "swap":
            j = draw(st.integers(0, len(items) - 1))
            items[k], items[j] = items[j], items[k]
        elif op == "copy":
            items.insert(draw(st.integers(0, len(items))), copy.deepcopy(items[k]))
        else:
            items.insert(draw(st.integers(0, len(items) - 1)), items.pop(k))
    return items


@properties
@given(_edited())
def test_the_core_validator_agrees_with_the_python_oracle(items: list[dict[str, Any]]) -> None:
    core, reference = _both(items)
    assert core == reference


@properties
@given(gen.sessions(max_units=10), gen.seeds)
def test_both_accept_every_unbroken_session(chat: list[dict[str, Any]], seed: int) -> None:
    native, _ = from_canonical("openai_responses", chat)
    items = _builtin_pairs(with_provider_items(native, seed), random.Random(seed))
    assert _both(items) == ([], [])
