"""``note_placement``: every placement keeps what ``inline_system`` keeps, costs no more, puts
the notes only where it says, and is idempotent (notes placed earlier are read back)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import strategies as gen
from hypothesis import HealthCheck, given, settings

import ringbound as rb

LEDGER = "[ringbound:side-effect-ledger]"
PLACED = ("leading_system", "user", "top_level_system")
#: Raised by hypothesis itself while reporting a failure (see tests/test_invariants.py).
pytestmark = [
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]
properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def is_note(m: Any) -> bool:
    text = m.get("content")
    return isinstance(text, str) and text.startswith((LEDGER, "[ringbound:summary]"))


def caller_view(messages: list[Any], case: gen.Case) -> list[Any]:
    """The messages but the notes: the caller's by identity, new ones (rewrites, synthesized
    results) by value."""
    ids = {id(m) for m in case.messages}
    return [id(m) if id(m) in ids else m for m in messages if not is_note(m)]


def assemble(case: gen.Case, placement: str) -> Any:
    cfg = case.config(note_placement=placement)
    try:
        return rb.Assembler(cfg).assemble(case.messages, case.tools, pinned=case.pinned)
    except rb.BudgetExceededError as e:
        return e


@properties
@given(gen.cases(missing_results=True, repair=True))
def test_every_placement_keeps_what_inline_keeps_and_places_only_the_notes(case: gen.Case) -> None:
    given_ = copy.deepcopy(case.messages)
    inline = assemble(case, "inline_system")
    for placement in PLACED:
        res = assemble(case, placement)
        assert case.messages == given_
        if isinstance(inline, Exception):
            assert isinstance(res, rb.BudgetExceededError)
            continue
        assert caller_view(res.messages, case) == caller_view(inline.messages, case)
        assert res.report.tokens_after == inline.report.tokens_after
        assert res.report.dropped_rings == inline.report.dropped_rings
        assert rb.validate(res.messages) == []
        inline_notes = [m["content"] for m in inline.messages if is_note(m)]
        notes = [m for m in res.messages if is_note(m)]
        sent = res.messages
        if placement == "top_level_system":
            assert notes == []
            assert (res.system or "") == "\n\n".join(inline_notes)
            if res.system:
                sent = [{"role": "system", "content": res.system}, *res.messages]
        else:
            assert [m["content"] for m in notes] == inline_notes
        if placement == "user":
            assert all(m["role"] == "user" for m in notes)
        if placement == "leading_system" and notes:
            lead = 0
            while res.messages[lead]["role"] in ("system", "developer") and not is_note(
                res.messages[lead]
            ):
                lead += 1
            assert res.messages[lead : lead + len(notes)] == notes
        assert rb.count_tokens(sent, encoding=case.policy["encoding"], tools=res.tools) <= (
            case.budget
        )


@properties
@given(gen.cases(missing_results=True, repair=True))
def test_every_placement_is_idempotent(case: gen.Case) -> None:
    for placement in PLACED:
        res = assemble(case, placement)
        if isinstance(res, Exception):
            continue
        asm = rb.Assembler(case.config(note_placement=placement))
        again = asm.assemble(res.messages, res.tools, system=res.system)
        assert len(again.messages) == len(res.messages)
        assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))
        assert again.system == res.system
        assert again.report.stages == [] and again.report.ledger_added == []


def session(n: int = 12) -> list[dict[str, Any]]:
    call = lambda i, name: {  # noqa: E731
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": f'{{"day": {i}}}'},
    }
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Email Ana the report, then summarize the logs."},
    ]
    for i in range(n):
        msgs += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(i, "send_email" if i == 0 else "read")],
            },
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "log line " * 40},
        ]
    return msgs


CFG = rb.AssemblyConfig(
    model_input_limit=1_200,
    output_reserve_tokens=500,
    safety_margin_tokens=100,
    side_effect_tools=["send_email"],
)


def test_a_note_in_the_system_carries_its_entries_over() -> None:
    """Assembling the output of a top_level_system assembly, with more history after it: the
    entries of the note in ``system`` stay in the new note, and the report's indices are the
    caller's."""
    asm = rb.Assembler(dataclasses.replace(CFG, note_placement="top_level_system"))
    first = asm.assemble(session()[1:], system="You are careful.")
    assert 'call_id="call_0"' in first.system
    more = [
        *first.messages,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_x", "type": "function",
             "function": {"name": "send_email", "arguments": '{"to": "bob"}'}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "sent " * 200},
        *session(6)[4:],
    ]  # fmt: skip
    second = asm.assemble(more, system=first.system, pinned=[len(more) - 1])
    assert 'call_id="call_0"' in second.system and 'call_id="call_x"' in second.system
    assert second.system.count(LEDGER) == 1
    assert second.messages[-1] is more[-1]
    assert all(0 <= a < b <= len(more) for a, b in second.report.dropped_rings)
    assert second.report.messages_before == len(more)


def test_openai_responses_notes_go_to_the_instructions_or_the_items() -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Email Ana, then read the logs."}]
    for i in range(12):
        items += [
            {"type": "function_call", "call_id": f"c{i}", "arguments": f'{{"day": {i}}}',
             "name": "send_email" if i == 0 else "read"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": "log line " * 40},
        ]  # fmt: skip
    for placement, where in (
        ("top_level_system", None),
        ("user", "user"),
        ("leading_system", "system"),
    ):
        cfg = dataclasses.replace(CFG, note_placement=placement)
        res = rb.Assembler(cfg, provider="openai_responses").assemble(items, system="Be brief.")
        notes = [i for i in res.messages if str(i.get("content", "")).startswith(LEDGER)]
        if where is None:
            assert notes == [] and res.system.startswith("Be brief.\n\n" + LEDGER)
        else:
            assert [n["role"] for n in notes] == [where] and res.system == "Be brief."
        assert rb.validate(res.messages, provider="openai_responses") == []


def test_a_wrong_placement_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.AssemblyConfig(note_placement="middle")
    assert e.value.key == "note_placement"
    with pytest.raises(rb.ConfigError) as e:
        rb.AssemblyConfig.from_dict({"note_placement": 3})
    assert e.value.key == "note_placement"
    # Anthropic has no system role in its messages: the top-level system is its only place.
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler(rb.AssemblyConfig(note_placement="leading_system"), provider="anthropic")
    assert e.value.key == "note_placement"
    rb.Assembler(rb.AssemblyConfig(note_placement="top_level_system"), provider="anthropic")
    # A system that is not a string cannot take the notes: refused, not replaced.
    top = rb.Assembler(dataclasses.replace(CFG, note_placement="top_level_system"))
    with pytest.raises(rb.ConfigError) as e:
        top.assemble(session(), system=[{"type": "text", "text": "rules"}])
    assert e.value.key == "note_placement"
