"""The Bedrock Converse adapter: its own rules (quoting Bedrock's ValidationException texts),
round trips through the core, repairs, the ledger note in ``system``, typed errors on bad input,
and the invariants of DESIGN §4 on generated sessions converted with ``from_canonical``."""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from typing import Any

import bedrock_converse_oracle
import pytest
import strategies as gen
from bedrock_converse_oracle import synthesized_result
from canonical_writers import BRIDGE_TEXT, OPENING_TEXT, from_canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.adapted import read_canonical
from ringbound.providers import adapter
from ringbound.providers.bedrock_converse import ADAPTER

#: See tests/test_invariants.py: a failing property imports libcst, which warns.
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
KEY = "bedrock_converse"
SYNTH = _core.SYNTHESIZED_RESULT_TEXT
MARKER = _core.LEDGER_MARKER
properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Driving the adapter ---------------------------------------------------------------------------


def config(budget: int = 100_000, **kwargs: Any) -> rb.AssemblyConfig:
    kwargs.setdefault("output_reserve_tokens", 0)
    kwargs.setdefault("safety_margin_tokens", 0)
    return rb.AssemblyConfig(model_input_limit=budget, **kwargs)


def assemble(
    messages: list[Any],
    cfg: rb.AssemblyConfig | None = None,
    *,
    system: Any = None,
    tools: list[Any] | None = None,
    pinned: tuple[int, ...] = (),
) -> rb.AssemblyResult:
    asm = rb.Assembler(cfg or config(), provider=KEY)
    return asm.assemble(messages, tools, system=system, pinned=pinned)


def count(messages: list[Any], *, system: Any = None, tools: Any = None) -> int:
    return rb.count_tokens(messages, provider=KEY, system=system, tools=tools)


# Sessions ----------------------------------------------------------------------------------------


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": t} for t in texts]}


def reply(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def use(call_id: str, name: str = "read_log", **args: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": args or {"q": call_id}}}


def result(call_id: str, text: str = "ok", status: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"toolUseId": call_id, "content": [{"text": text}]}
    if status:
        block["status"] = status
    return {"toolResult": block}


def calls(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def results(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def ring(call_id: str, name: str = "read_log", size: int = 60) -> list[dict[str, Any]]:
    return [calls(use(call_id, name)), results(result(call_id, "log line " * size))]


SYSTEM = [{"text": "You are a careful travel agent."}, {"cachePoint": {"type": "default"}}]


def session(rings: int = 6, side_effect_first: bool = True) -> list[dict[str, Any]]:
    """The goal, rings with long results (the first one sends an email), a final answer."""
    msgs = [user("Email Ana the report, then summarize the logs.")]
    for k in range(rings):
        name = "send_email" if k == 0 and side_effect_first else "read_log"
        msgs += ring(f"t{k}", name)
    return [*msgs, reply("All done.")]


def identical(out: list[Any], messages: list[Any]) -> bool:
    return len(out) == len(messages) and all(a is b for a, b in zip(out, messages, strict=True))


def issues(messages: list[Any], system: Any = None) -> list[tuple[str, int]]:
    return [(i.kind, i.index) for i in ADAPTER.validate(messages, system=system)]


# Round trips -----------------------------------------------------------------------------------


ROUND_TRIPS = {
    "single tool": [user("weather?"), calls(use("t1")), results(result("t1")), reply("sunny")],
    "two parallel tools": [
        user("weather in two cities?"),
        calls({"text": "Checking both."}, use("a1", city="Paris"), use("a2", city="Oslo")),
        results(result("a2", "cold"), result("a1", "mild")),
        reply("Paris is mild, Oslo cold."),
    ],
    "tool then a user follow-up": [
        user("find the order"),
        calls(use("t1")),
        results(result("t1", "order #4521")),
        reply("Found #4521."),
        user("refund it"),
    ],
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_round_trip_at_a_large_budget_returns_the_callers_objects(name: str) -> None:
    messages = ROUND_TRIPS[name]
    snapshot = copy.deepcopy(messages)
    res = assemble(messages, system=SYSTEM)
    assert identical(res.messages, messages)
    assert res.system is SYSTEM
    assert res.report.merged == 0
    assert ADAPTER.validate(res.messages, system=res.system) == []
    assert rb.validate(res.messages, provider=KEY, system=res.system) == []
    assert res.report.tokens_after == count(messages, system=SYSTEM)
    assert messages == snapshot


def test_parallel_results_become_adjacent_tool_messages_in_canonical_form() -> None:
    canonical = read_canonical(ADAPTER, ROUND_TRIPS["two parallel tools"], SYSTEM)
    roles = [m["role"] for m in canonical.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in canonical.messages[2]["tool_calls"]] == ["a1", "a2"]
    assert json.loads(canonical.messages[2]["tool_calls"][0]["function"]["arguments"]) == {
        "city": "Paris"
    }
    assert [m["tool_call_id"] for m in canonical.messages[3:5]] == ["a2", "a1"]
    assert canonical.spans == [(-1, -1), (0, 1), (1, 2), (2, 3), (2, 3), (3, 4)]
    assert rb.validate(canonical.messages) == []


def test_a_dropped_middle_ring_leaves_a_valid_request_of_the_callers_objects() -> None:
    messages = session()
    full = count(messages, system=SYSTEM)
    cfg = config(full - 100, recent_tool_rings=2)
    res = assemble(messages, cfg, system=SYSTEM)
    assert res.report.tokens_after <= cfg.budget
    assert res.report.dropped_rings == [(1, 3)]
    assert res.messages == [messages[0], *messages[3:]]
    assert all(any(m is k for k in messages) for m in res.messages)
    assert ADAPTER.validate(res.messages, system=res.system) == []
    assert count(res.messages, system=res.system) <= res.report.tokens_after


def test_the_ledger_note_is_a_system_block_naming_the_dropped_side_effect() -> None:
    messages = session()
    cfg = config(count(messages, system=SYSTEM) - 100, side_effect_tools=["send_email"])
    res = assemble(messages, cfg, system=SYSTEM)
    assert res.report.dropped_rings[0] == (1, 3)
    assert res.system[:2] == SYSTEM and res.system[0] is SYSTEM[0]
    note = res.system[2]["text"]
    assert note.startswith(MARKER)
    assert 'send_email [ok] call_id="t0"' in note
    assert not any(MARKER in json.dumps(m) for m in res.messages)
    assert res.report.tokens_after <= cfg.budget
    assert count(res.messages, system=res.system) <= res.report.tokens_after
    # The next assembly reads the note back from the system and returns it as is.
    again = assemble(res.messages, cfg, system=res.system)
    assert again.system is res.system
    assert identical(again.messages, res.messages)


def test_a_second_drop_updates_the_note_block_in_place() -> None:
    messages = session(rings=8)
    tools = ["send_email", "read_log"]
    cfg = config(count(messages, system=SYSTEM) - 100, side_effect_tools=tools)
    first = assemble(messages, cfg, system=SYSTEM)
    later = [*first.messages, user("and the rest"), *ring("t9"), reply("more")]
    tighter = config(count(later, system=first.system) - 400, side_effect_tools=tools)
    second = assemble(later, tighter, system=first.system)
    assert len(second.system) == 3
    note = second.system[2]["text"]
    assert 'call_id="t0"' in note and 'call_id="t1"' in note


def test_without_a_system_the_note_becomes_the_system() -> None:
    messages = session()
    cfg = config(count(messages) - 100, side_effect_tools=["send_email"])
    res = assemble(messages, cfg)
    assert len(res.system) == 1 and res.system[0]["text"].startswith(MARKER)


def test_drops_merge_same_role_neighbours_into_new_objects() -> None:
    long = "filler " * 80
    messages = [
        user("goal"),
        reply("first thoughts " + long),
        user("also this " + long),
        *ring("t1", size=5),
        reply("done"),
    ]
    # Dropping the reply leaves two user turns: one new user message holds both.
    cfg = config(count(messages) - 50, stages=("drop_plain_turns",), recent_user_turns=0)
    res = assemble(messages, cfg)
    assert res.report.dropped_turns == [(1, 2)]
    assert res.report.merged == 1
    head = res.messages[0]
    assert head["role"] == "user" and head is not messages[0]
    assert head["content"][0] is messages[0]["content"][0]
    assert head["content"][1] is messages[2]["content"][0]
    assert identical(res.messages[1:], messages[3:])
    assert ADAPTER.validate(res.messages) == []
    assert messages[0] == user("goal")
    # Pinning the reply drops the user turn instead: the reply and the call merge.
    res = assemble(messages, cfg, pinned=(1,))
    assert res.report.dropped_turns == [(2, 3)]
    merged = res.messages[1]
    assert merged["role"] == "assistant" and merged is not messages[1]
    assert merged["content"] == messages[1]["content"] + messages[3]["content"]
    assert ADAPTER.validate(res.messages) == []


def test_a_reply_after_tool_results_travels_with_its_ring() -> None:
    """Results next to a user text turn can be neither sent apart nor merged in Bedrock: a
    tool-result turn holds the plain reply after it, and the reply the user turn after it,
    so a kept results turn is followed by an assistant turn whatever else is dropped (the
    latest rings are protected where they stand; a held error ring stays while later rings
    go)."""
    long = "filler " * 80
    messages = [
        user("goal"),
        *ring("t1", size=5),
        reply("interim " + long),
        user("keep going " + long),
        *ring("t2", size=5),
        reply("done"),
    ]
    canonical = read_canonical(ADAPTER, messages, None)
    assert canonical.binds_next[canonical.spans.index((2, 3))]
    assert canonical.binds_next[canonical.spans.index((3, 4))]
    # The first ring goes with its reply and the user turn after them.
    cfg = config(
        count(messages) - 50, stages=("drop_rings",), recent_tool_rings=1, recent_user_turns=0
    )
    res = assemble(messages, cfg)
    assert res.report.dropped_rings == [(1, 5)]
    assert ADAPTER.validate(res.messages) == []
    # Protected, the ring keeps them: only plain turns may go, and there are none to take.
    cfg = config(count(messages) - 50, stages=("drop_plain_turns",), recent_user_turns=0)
    with pytest.raises(rb.BudgetExceededError):
        assemble(messages, cfg)


def test_the_first_user_message_is_kept_even_unpinned() -> None:
    """Bedrock wants a user turn first: the goal is glued to the system, so the oldest plain
    turn dropped is the reply after it, and the two user turns left merge."""
    messages = [user("goal"), reply("long " * 100), user("now this"), reply("fine")]
    cfg = config(count(messages) - 10, pin=(), recent_user_turns=0, stages=("drop_plain_turns",))
    res = assemble(messages, cfg)
    assert res.report.dropped_turns == [(1, 2)]
    assert res.messages[0]["content"] == messages[0]["content"] + messages[2]["content"]
    assert res.messages[0]["content"][0] is messages[0]["content"][0]
    assert ADAPTER.validate(res.messages) == []


# Broken pairing and the other rules ------------------------------------------------------------


def rejected(messages: list[Any], system: Any = None) -> rb.PairingError:
    with pytest.raises(rb.PairingError) as info:
        assemble(messages, system=system)
    return info.value


def test_an_unanswered_call_is_rejected_with_bedrocks_wording() -> None:
    err = rejected([user("go"), calls(use("t1"), use("t2")), user("hello?")])
    assert [(i.kind, i.call_id, i.index) for i in err.issues] == [
        ("missing_result", "t1", 1),
        ("missing_result", "t2", 1),
        ("unrepairable_missing_result", "t1", 2),
    ]
    for issue in err.issues:
        assert issue.message.startswith(
            "Expected toolResult blocks at messages.2.content for the following Ids: t1, t2 "
            "ringbound: "
        )


def test_a_partially_answered_call_names_only_the_missing_id() -> None:
    err = rejected([user("go"), calls(use("t1"), use("t2")), results(result("t2"))])
    assert [(i.kind, i.call_id, i.index) for i in err.issues] == [("missing_result", "t1", 1)]
    assert "for the following Ids: t1 " in err.issues[0].message


def test_an_orphan_result_is_rejected_with_bedrocks_wording() -> None:
    err = rejected([user("go"), calls(use("t1")), results(result("t1"), result("zz"))])
    assert [(i.kind, i.call_id, i.index) for i in err.issues] == [("orphan_result", "zz", 2)]
    assert err.issues[0].message.startswith(
        "The number of toolResult blocks at messages.2.content exceeds the number of toolUse "
        "blocks of previous turn."
    )
    err = rejected([user("go"), calls(use("t1")), results(result("zz"))])
    assert [(i.kind, i.index) for i in err.issues] == [("missing_result", 1), ("orphan_result", 2)]
    assert err.issues[1].message.startswith(
        "Expected toolResult blocks at messages.2.content for the following Ids: t1, but found: zz"
    )


def test_misplaced_results_are_classified() -> None:
    late = [user("go"), calls(use("t1")), user("wait"), reply("ok"), results(result("t1"))]
    assert ("result_not_adjacent", 4) in issues(late)
    early = [user("go"), reply("x"), results(result("t1")), calls(use("t1")), results(result("t1"))]
    assert ("result_before_call", 2) in issues(early)


def test_duplicate_ids_are_rejected_with_bedrocks_wording() -> None:
    err = rejected([user("go"), calls(use("t1"), use("t1")), results(result("t1"))])
    assert [(i.kind, i.call_id, i.index) for i in err.issues] == [("duplicate_id", "t1", 1)]
    assert err.issues[0].message.startswith(
        "The toolUse blocks at messages.1.content contain duplicate Ids: t1"
    )
    err = rejected([user("go"), calls(use("t1")), results(result("t1"), result("t1"))])
    assert [(i.kind, i.index) for i in err.issues] == [("duplicate_id", 2)]
    assert err.issues[0].message.startswith(
        "The toolResult blocks at messages.2.content contain duplicate Ids: t1"
    )


def test_an_id_may_recur_in_a_later_turn() -> None:
    messages = [user("go"), *ring("t1"), *ring("t1"), reply("done")]
    assert ADAPTER.validate(messages) == []


def test_structure_rules_quote_bedrock() -> None:
    cases = {
        "first_message_not_user": (
            [reply("hi"), user("go")],
            0,
            "A conversation must start with a user message. Try again with a conversation that "
            "starts with a user message.",
        ),
        "roles_not_alternating": (
            [user("a"), user("b")],
            1,
            "A conversation must alternate between user and assistant roles. Make sure the "
            "conversation alternates between user and assistant roles and try again.",
        ),
        "results_mixed_with_content": (
            [user("go"), calls(use("t1")), results(result("t1"), {"text": "and also"})],
            2,
            "messages.2.content: Conversation blocks and tool result blocks cannot be provided "
            "in the same turn.",
        ),
        "empty_error_result": (
            [
                user("go"),
                calls(use("t1")),
                results({"toolResult": {"toolUseId": "t1", "status": "error", "content": []}}),
            ],
            2,
            "The content field at messages.2.content.0.toolResult cannot be empty when status "
            "value is error.",
        ),
    }
    for kind, (messages, index, wording) in cases.items():
        found = ADAPTER.validate(messages)
        assert [(i.kind, i.index) for i in found] == [(kind, index)], kind
        assert found[0].message.startswith(wording + " ringbound: "), kind
        with pytest.raises(rb.PairingError):
            assemble(messages, config(on_pairing_error="synthesize_error_results"))


def test_validation_is_deterministic_and_in_message_order() -> None:
    messages = [
        reply("x"),
        calls(use("a"), use("a")),
        results(result("b"), {"text": "t"}),
        calls(use("c")),
    ]
    found = issues(messages)
    assert found == sorted(found, key=lambda f: f[1])
    assert found == issues(copy.deepcopy(messages))
    assert {k for k, _ in found} >= {"first_message_not_user", "roles_not_alternating"}


# Repairs ---------------------------------------------------------------------------------------

REPAIR = {"on_pairing_error": "synthesize_error_results"}


def test_a_trailing_unanswered_call_gets_a_synthesized_error_result() -> None:
    messages = [user("go"), *ring("t0", size=5), calls(use("t1", "send_email"), use("t2"))]
    res = assemble(messages, config(**REPAIR))
    assert identical(res.messages[:4], messages)
    assert res.messages[4] == results(synthesized_result("t1"), synthesized_result("t2"))
    assert res.messages[4]["content"][0]["toolResult"] == {
        "toolUseId": "t1",
        "status": "error",
        "content": [{"text": SYNTH}],
    }
    assert res.report.repairs == ["t1", "t2"]
    assert res.report.merged == 0
    assert ADAPTER.validate(res.messages) == []


def test_a_repaired_request_is_counted_as_bedrock_receives_it() -> None:
    messages = [user("go"), *ring("t0", size=5), calls(use("t1"), use("t2"))]
    res = assemble(messages, config(**REPAIR))
    assert count(res.messages) == res.report.tokens_after
    tight = assemble(messages, config(res.report.tokens_after, **REPAIR))
    assert count(tight.messages) == tight.report.tokens_after <= tight.report.budget


def test_a_missing_result_joins_the_existing_result_turn_as_a_new_object() -> None:
    messages = [user("go"), calls(use("t1"), use("t2")), results(result("t2")), reply("ok")]
    res = assemble(messages, config(**REPAIR))
    turn = res.messages[2]
    assert turn is not messages[2] and res.report.merged == 1
    assert turn["content"][0] is messages[2]["content"][0]
    assert turn["content"][1] == synthesized_result("t1")
    assert ADAPTER.validate(res.messages) == []
    assert messages[2] == results(result("t2"))


def test_a_repair_that_would_mix_results_with_user_text_fails_closed() -> None:
    """Results cannot join a user turn holding text, and a new turn before it would break
    alternation: the gap is not repaired, whatever the budget."""
    messages = [user("go"), calls(use("t1")), user("are you there?"), reply("yes " * 100)]
    for budget in (count(messages) * 2, count(messages) - 60):
        with pytest.raises(rb.PairingError) as info:
            assemble(messages, config(budget, **REPAIR))
        kinds = [(i.kind, i.index) for i in info.value.issues]
        assert kinds == [("missing_result", 1), ("unrepairable_missing_result", 2)]


def test_render_refuses_to_merge_results_into_a_user_text_turn() -> None:
    messages = [user("go"), calls(use("t1")), user("are you there?")]
    canonical = read_canonical(ADAPTER, messages, None)
    with pytest.raises(rb.PairingError) as info:
        bedrock_converse_oracle.render(
            messages, [0, 1, 2, _core.Insertion.Synthesized(call_id="t1"), 3], canonical
        )
    assert [(i.kind, i.call_id, i.index) for i in info.value.issues] == [
        ("missing_result", "t1", 1)
    ]
    assert "Expected toolResult blocks at messages.2.content" in info.value.issues[0].message


def test_a_synthesized_result_is_read_back_as_not_completed_in_the_ledger() -> None:
    messages = [
        user("go"),
        calls(use("t1", "send_email"), use("t2")),
        results(result("t2", "x " * 200)),
        *ring("t3"),
        reply("ok"),
    ]
    repaired = assemble(messages, config(**REPAIR)).messages
    cfg = config(count(repaired) - 50, side_effect_tools=["send_email"], recent_tool_rings=1)
    res = assemble(repaired, cfg)
    assert res.report.dropped_rings == [(1, 3)]
    assert 'send_email [not_completed] call_id="t1"' in res.system[0]["text"]


# Provider-specific content -------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    return base64.b64decode(gen.png_data_url(width, height).split(",", 1)[1])


def image(data: bytes | str) -> dict[str, Any]:
    return {"image": {"format": "png", "source": {"bytes": data}}}


def test_reasoning_travels_with_its_call_and_is_counted() -> None:
    thinking = {
        "reasoningContent": {
            "reasoningText": {"text": "I should read the log. " * 30, "signature": "c2ln" * 40}
        }
    }
    redacted = {"reasoningContent": {"redactedContent": b"\x00\x01" * 300}}
    plain = [user("go"), calls(use("t1")), results(result("t1", "x " * 300)), reply("done")]
    thoughtful = [user("go"), calls(thinking, redacted, use("t1")), *plain[2:]]
    assert count(thoughtful) - count(plain) > 300
    # Kept, the reasoning is the caller's own block; dropped, it goes with its call.
    long = [*thoughtful[:3], *ring("t2"), *ring("t3"), reply("done")]
    res = assemble(long, config(count(long) + 10))
    assert res.messages[1] is long[1]
    res = assemble(long, config(count(long) - 50, recent_tool_rings=1))
    assert res.report.dropped_rings[0] == (1, 3)
    assert not any(m is long[1] for m in res.messages)
    assert ADAPTER.validate(res.messages) == []


def test_images_are_priced_by_anthropics_formula_from_bytes_or_base64() -> None:
    small, large = png(200, 200), png(1000, 1000)
    text_only = [user("look")]

    def cost(data: bytes | str) -> int:
        return count([{"role": "user", "content": [{"text": "look"}, image(data)]}]) - count(
            text_only
        )

    # 200x200 is 8x8 28-pixel patches, 1000x1000 is 1000*1000/750 (Anthropic's vision
    # guide: the larger of the two readings), times the ratio.
    assert cost(small) == cost(base64.b64encode(small).decode())
    assert abs(cost(small) - 64 * 1.3) <= 2
    assert abs(cost(large) - 1334 * 1.3) <= 2
    s3 = {"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k.png"}}}}
    assert count([{"role": "user", "content": [s3]}]) > 1640 * 1.3


def test_images_inside_tool_results_are_counted_and_kept_with_their_ring() -> None:
    shot = {
        "toolResult": {
            "toolUseId": "t1",
            "content": [{"text": "screenshot"}, image(png(1000, 1000))],
        }
    }
    messages = [user("look"), calls(use("t1")), results(shot), reply("I see it")]
    canonical = read_canonical(ADAPTER, messages, None)
    assert [m["role"] for m in canonical.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert count(messages) > 1334 * 1.3
    res = assemble(messages)
    assert identical(res.messages, messages)


def test_documents_and_cache_points() -> None:
    doc = {"document": {"format": "pdf", "name": "report", "source": {"bytes": b"%PDF" * 3000}}}
    with_doc = [{"role": "user", "content": [doc, {"text": "summarize"}]}]
    assert count(with_doc) > 12_000 * 4 / 3 / 3 * 1.3  # one token per 3 base64 characters
    cached = [{"role": "user", "content": [{"text": "hi"}, {"cachePoint": {"type": "default"}}]}]
    assert count(cached) == count([user("hi")])
    assert count([user("hi")], system=SYSTEM) == count([user("hi")], system=SYSTEM[:1])


def test_error_status_alone_makes_a_failed_result() -> None:
    # "timeout" does not open like an error: only the status says the call failed, and a short
    # failed ring is kept where the same ring, successful, is dropped.
    def dropped(status: str | None) -> list[tuple[int, int]]:
        msgs = session(8)
        msgs[2] = results(result("t0", "timeout", status))
        cfg = config(count(msgs) - 150, side_effect_tools=["send_email"])
        return assemble(msgs, cfg).report.dropped_rings

    assert (1, 3) in dropped(None)
    assert (1, 3) not in dropped("error")


SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}}


def test_tools_are_counted_in_openai_shape() -> None:
    tools = [
        {
            "toolSpec": {
                "name": "send_email",
                "description": "Send an email.",
                "inputSchema": {
                    "json": {"type": "object", "properties": {"to": {"type": "string"}}}
                },
            }
        },
        {"cachePoint": {"type": "default"}},
    ]
    assert ADAPTER.tools_to_openai(tools) == [
        {
            "type": "function",
            "function": {
                "name": "send_email",
                "parameters": SCHEMA,
                "description": "Send an email.",
            },
        }
    ]
    messages = [user("go")]
    assert count(messages, tools=tools) > count(messages)
    assert assemble(messages, tools=tools).report.tokens_after == count(messages, tools=tools)


def test_the_adapter_is_registered() -> None:
    assert adapter(KEY) is ADAPTER
    assert ADAPTER.key == KEY
    assert ADAPTER.image_formula == "anthropic"
    assert ADAPTER.default_token_ratio == 1.3


# Bad input -------------------------------------------------------------------------------------

BAD = [
    ("not a list", {"role": "user"}, None),
    ("not an object", ["hi"], 0),
    ("system role", [{"role": "system", "content": [{"text": "x"}]}], 0),
    ("string content", [{"role": "user", "content": "hi"}], 0),
    ("no content", [{"role": "user"}], 0),
    ("empty content", [user("go"), {"role": "assistant", "content": []}], 1),
    ("unknown block", [{"role": "user", "content": [{"sticker": {}}]}], 0),
    ("two members", [{"role": "user", "content": [{"text": "a", "image": {}}]}], 0),
    ("text not a string", [{"role": "user", "content": [{"text": 3}]}], 0),
    ("toolUse from the user", [{"role": "user", "content": [use("t1")]}], 0),
    ("toolResult from the model", [user("go"), {"role": "assistant", "content": [result("t")]}], 1),
    ("call without id", [user("go"), calls({"toolUse": {"name": "f", "input": {}}})], 1),
    ("input not JSON", [user("go"), calls({"toolUse": {"toolUseId": "t", "name": "f",
                                                       "input": b"x"}})], 1),
    ("bad status", [user("go"), calls(use("t")), results(result("t", "x", "failed"))], 2),
    ("image without source", [{"role": "user", "content": [{"image": {"format": "png"}}]}], 0),
]  # fmt: skip


@pytest.mark.parametrize(("what", "messages", "index"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_typed_error_naming_the_message(
    what: str, messages: Any, index: Any
) -> None:
    calls: list[Any] = []
    if what == "input not JSON":
        # The core reads bytes as the base64 text they are sent as: a JSON string, which is a
        # valid input; the request is still refused, for the result its call lacks.
        assert read_canonical(ADAPTER, messages, None).messages[-1]["tool_calls"]
        assert [i.kind for i in ADAPTER.validate(messages)] == ["missing_result"]
        with pytest.raises(rb.PairingError):
            assemble(messages)
    else:
        calls.append(lambda: ADAPTER.validate(messages))
        calls.append(lambda: read_canonical(ADAPTER, messages, None))
        calls.append(lambda: assemble(messages))
    for call in calls:
        with pytest.raises(rb.InvalidMessageError) as info:
            call()
        assert info.value.index == index


@pytest.mark.parametrize(
    "system", ["rules", [{"text": 1}], [{"image": {}}], {"text": "x"}], ids=repr
)
def test_a_bad_system_is_a_typed_error(system: Any) -> None:
    with pytest.raises(rb.InvalidMessageError) as info:
        assemble([user("go")], system=system)
    assert info.value.index is None


@pytest.mark.parametrize(
    "tools",
    [[{"toolSpec": {"name": "f"}}], [{"toolSpec": {"inputSchema": {"json": {}}}}], [{"x": 1}]],
    ids=repr,
)
def test_bad_tools_are_a_typed_error(tools: Any) -> None:
    with pytest.raises(rb.InvalidMessageError):
        assemble([user("go")], tools=tools)


# From OpenAI Chat and back ---------------------------------------------------------------------


def pairing(canonical: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """Calls and results in order: ("call", ids) per assistant message, ("results", ids)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for m in canonical:
        if m.get("tool_calls"):
            out.append(("call", tuple(c["id"] for c in m["tool_calls"])))
        elif m["role"] == "tool":
            if out and out[-1][0] == "results":
                out[-1] = ("results", (*out[-1][1], m["tool_call_id"]))
            else:
                out.append(("results", (m["tool_call_id"],)))
    return out


def texts(canonical: list[dict[str, Any]], roles: tuple[str, ...]) -> list[str]:
    out = []
    for m in canonical:
        if m["role"] not in roles:
            continue
        content = m.get("content")
        parts = [content] if isinstance(content, str) else content or []
        out += [p if isinstance(p, str) else p.get("text") for p in parts]
    return [t for t in out if t and t not in (BRIDGE_TEXT, OPENING_TEXT)]


def images(canonical: list[dict[str, Any]]) -> int:
    return sum(
        1
        for m in canonical
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p.get("type") == "image_url"
    )


def native_images(blocks: list[Any]) -> int:
    """Image blocks of Bedrock messages, those inside tool results included."""
    out = 0
    for b in blocks:
        if "image" in b:
            out += 1
        inner = b.get("content") or b.get("toolResult", {}).get("content")
        if isinstance(inner, list):
            out += native_images(inner)
    return out


@properties
@given(gen.sessions())
def test_from_canonical_then_to_canonical_keeps_pairing_and_content(chat: list[Any]) -> None:
    native, system = from_canonical("bedrock_converse", chat)
    assert ADAPTER.validate(native, system=system) == []
    back = read_canonical(ADAPTER, native, system).messages
    assert rb.validate(back) == []
    assert pairing(back) == pairing(chat)
    # The core's view holds each message's texts as one string, neighbours merged by the
    # conversion included: the texts of each role, in order, are the same characters.
    for roles in (("user",), ("assistant",), ("tool",), ("system", "developer")):
        assert "".join(texts(back, roles)) == "".join(texts(chat, roles)), roles
    assert native_images(native) == images(chat)
    arguments = [c["function"]["arguments"] for m in chat for c in m.get("tool_calls") or ()]
    for got, sent in zip(
        [c["function"]["arguments"] for m in back for c in m.get("tool_calls") or ()],
        arguments,
        strict=True,
    ):
        try:
            original = json.loads(sent)
        except ValueError:
            original = None
        assert json.loads(got) == (original if isinstance(original, dict) else {"input": sent})


def test_from_canonical_bridges_a_user_turn_after_tool_results() -> None:
    chat = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call 1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "call 1", "content": "Error: no"},
        {"role": "user", "content": "and now?"},
    ]  # fmt: skip
    native, system = from_canonical("bedrock_converse", chat)
    assert system == [{"text": "rules"}]
    assert [m["role"] for m in native] == ["user", "assistant", "user", "assistant", "user"]
    assert native[3] == reply(BRIDGE_TEXT)
    call_id = native[1]["content"][0]["toolUse"]["toolUseId"]
    assert (
        call_id.startswith("tooluse_")
        and call_id == native[2]["content"][0]["toolResult"]["toolUseId"]
    )
    assert native[2]["content"][0]["toolResult"]["status"] == "error"
    assert ADAPTER.validate(native, system=system) == []


# Properties (DESIGN §4) --------------------------------------------------------------------------


def bedrock_tools(names: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "toolSpec": {
                "name": t["function"]["name"],
                "description": t["function"]["description"],
                "inputSchema": {"json": t["function"]["parameters"]},
            }
        }
        for t in gen.tools_schema(names)
    ]


@dataclass(frozen=True)
class Case:
    messages: list[Any]
    system: Any
    tools: list[Any] | None
    policy: dict[str, Any]
    budget: int
    pinned: tuple[int, ...]

    def config(self, budget: int | None = None) -> rb.AssemblyConfig:
        return rb.AssemblyConfig(**{**self.policy, "model_input_limit": budget or self.budget})


@st.composite
def cases(draw: st.DrawFn, missing_results: bool = False) -> Case:
    chat = draw(gen.sessions())
    if missing_results:
        chat = draw(gen.drop_some_results(chat))
    native, system = from_canonical("bedrock_converse", chat)
    names = sorted({c["function"]["name"] for m in chat for c in m.get("tool_calls") or ()})
    tools = bedrock_tools(names or list(gen.TOOLS)) if draw(st.booleans()) else None
    policy = draw(gen.policies())
    policy["stages"] = draw(st.sampled_from(gen.stage_prefixes()))
    if missing_results:
        policy["on_pairing_error"] = "synthesize_error_results"
    full = rb.count_tokens(native, provider=KEY, system=system, tools=tools)
    pinned: tuple[int, ...] = ()
    if draw(st.integers(0, 3)) == 0:
        pinned = tuple(draw(st.lists(st.integers(0, len(native) - 1), max_size=2, unique=True)))
    budget = gen.budget_for(full, draw(gen.fractions))
    return Case(native, system, tools, policy, budget, pinned)


def run(
    case: Case,
    budget: int | None = None,
    messages: Any = None,
    system: Any = None,
    tools: Any = (),
) -> Any:
    """The assembly (of the case, or of other messages under its policy), or its typed error."""
    try:
        return assemble(
            case.messages if messages is None else messages,
            case.config(budget),
            system=case.system if messages is None else system,
            tools=case.tools if tools == () else tools,
            pinned=case.pinned if messages is None else (),
        )
    except (rb.BudgetExceededError, rb.PairingError) as e:
        return e


def rewrite_of(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether ``theirs`` is what a cheap stage makes of the caller's block ``mine``: the same
    result (id and status kept, content cut or stubbed), or an image become the placeholder."""
    if "toolResult" in mine and "toolResult" in theirs:
        a, b = mine["toolResult"], theirs["toolResult"]
        return (a["toolUseId"], a.get("status")) == (b["toolUseId"], b.get("status"))
    return "image" in mine and theirs == {"text": _core.MEDIA_PLACEHOLDER}


def kept_blocks(case: Case, res: rb.AssemblyResult) -> list[tuple[int, int]]:
    """(message, block) of every caller block in the output (its rewrite, in a message a cheap
    stage rewrote), in output order; anything else in the output must be a synthesized result
    the report lists."""
    where = {id(b): (i, k) for i, m in enumerate(case.messages) for k, b in enumerate(m["content"])}
    rewritten = [
        (i, k, b)
        for i in sorted({r.index for r in res.report.rewrites})
        for k, b in enumerate(case.messages[i]["content"])
    ]
    out: list[tuple[int, int]] = []
    for m in res.messages:
        for block in m["content"]:
            if id(block) in where:
                out.append(where[id(block)])
                continue
            was = [(i, k) for i, k, b in rewritten if (i, k) > max(out, default=(-1, -1))]
            was = [(i, k) for i, k in was if rewrite_of(case.messages[i]["content"][k], block)]
            if was:
                out.append(was[0])
                continue
            call_id = block["toolResult"]["toolUseId"]
            assert block == synthesized_result(call_id)
            assert call_id in res.report.repairs
    return out


def check(case: Case, res: Any) -> None:
    cfg = case.config()
    if isinstance(res, rb.PairingError):
        # Only a broken input fails, and under the repair policy only one with more than
        # missing results, or a missing result the request keeps before a user text turn,
        # where no synthesized result can go (Bedrock takes no text beside tool results).
        found = ADAPTER.validate(case.messages, system=case.system)
        assert found
        if cfg.on_pairing_error == "synthesize_error_results":
            unrepairable = "cannot join" in str(res) and "holds other content" in str(res)
            assert unrepairable or any(i.kind != "missing_result" for i in found)
        return
    if isinstance(res, rb.BudgetExceededError):
        assert res.tokens > case.budget
        return
    # 1. Valid by Bedrock's rules.
    assert ADAPTER.validate(res.messages, system=res.system) == []
    # 2. The input in order, minus whole messages, plus reported synthesized results.
    blocks = kept_blocks(case, res)
    assert blocks == sorted(blocks) and len(set(blocks)) == len(blocks)
    kept = {i for i, _ in blocks}
    assert all(
        sum(1 for i, _ in blocks if i == m) == len(case.messages[m]["content"]) for m in kept
    )
    # 3. The first user turn, the last turn, pinned messages and the caller's system stay.
    assert {0, len(case.messages) - 1, *case.pinned} <= kept
    callers_system = case.system or []
    assert all(
        any(b is s for s in res.system or []) for b in callers_system if MARKER not in str(b)
    )
    # 4. Within budget, also when recounted.
    assert res.report.tokens_after <= case.budget
    tools = None if res.report.tools_dropped else case.tools
    recount = rb.count_tokens(
        res.messages, provider=KEY, encoding=cfg.encoding, system=res.system, tools=tools
    )
    assert recount == res.report.tokens_after
    # 9. Every dropped side-effecting call is in the ledger note.
    if "side_effect_ledger" in cfg.pin:
        note = "".join(b.get("text", "") for b in res.system or [] if MARKER in str(b))
        for i, m in enumerate(case.messages):
            if i in kept or m["role"] != "assistant":
                continue
            for b in m["content"]:
                if "toolUse" in b and b["toolUse"]["name"] in cfg.side_effect_tools:
                    assert f'call_id="{b["toolUse"]["toolUseId"]}"' in note


@properties
@given(st.one_of(cases(), cases(missing_results=True)))
def test_assembly_invariants(case: Case) -> None:
    messages, system = copy.deepcopy(case.messages), copy.deepcopy(case.system)
    res = run(case)
    check(case, res)
    # 8. The input is not mutated.
    assert case.messages == messages and case.system == system
    if isinstance(res, Exception):
        if isinstance(res, rb.BudgetExceededError):
            assert isinstance(run(case, max(1, case.budget // 2)), rb.BudgetExceededError)
        return
    # 5. Deterministic.
    again = run(case)
    assert again.messages == res.messages and again.system == res.system
    assert [any(m is k for k in case.messages) for m in again.messages] == [
        any(m is k for k in case.messages) for m in res.messages
    ]
    # 6. Idempotent: the assembled request fits, and comes back as is.
    tools = None if res.report.tools_dropped else case.tools
    twice = run(case, messages=res.messages, system=res.system, tools=tools)
    assert identical(twice.messages, res.messages)
    assert twice.system is res.system
    # 7. Monotone: a larger budget keeps every caller block this one kept.
    larger = run(case, case.budget * 2)
    assert set(kept_blocks(case, larger)) >= set(kept_blocks(case, res))


# Real sessions -----------------------------------------------------------------------------------


def test_real_tau_bench_sessions_assemble_valid_for_bedrock(corpus: Any) -> None:
    """The tau-bench airline sessions, converted, at shrinking budgets: every assembly that
    fits is valid by Bedrock's rules, within budget, and records dropped bookings."""
    sessions = json.loads((corpus / "tau-bench" / "gpt-4o-airline.json").read_text())
    writes = ["book_reservation", "cancel_reservation", "update_reservation_flights"]
    fitted = 0
    for session in sessions[::4]:
        native, system = from_canonical("bedrock_converse", session["traj"])
        assert ADAPTER.validate(native, system=system) == []
        full = count(native, system=system)
        for fraction in (0.9, 0.6):
            cfg = config(round(full * fraction), side_effect_tools=writes)
            try:
                res = assemble(native, cfg, system=system)
            except rb.BudgetExceededError:
                continue
            fitted += 1
            assert ADAPTER.validate(res.messages, system=res.system) == []
            assert res.report.tokens_after <= cfg.budget
            dropped = [
                b["toolUse"]["toolUseId"]
                for start, end in res.report.dropped_rings
                for m in native[start:end]
                for b in m["content"]
                if "toolUse" in b and b["toolUse"]["name"] in writes
            ]
            note = res.system[-1]["text"] if dropped else ""
            assert all(f'call_id="{c}"' in note for c in dropped)
    assert fitted > 50


# The core's validator against the Python oracle ------------------------------------------------


def _both(messages: list[Any], system: Any = None) -> tuple[Any, Any]:
    """What the core's validator and the Python oracle make of a request: the issues, or the
    type and index of the error."""

    def run(validate: Any) -> Any:
        try:
            found = validate(messages, system=system)
        except rb.InvalidMessageError as e:
            return ("InvalidMessageError", e.index)
        return [(i.kind, i.call_id, i.index, i.message) for i in found]

    return run(ADAPTER.validate), run(bedrock_converse_oracle.validate)


@st.composite
def edited(draw: st.DrawFn) -> tuple[list[Any], Any]:
    """A converted session with one to three edits that break pairing in every way Bedrock
    names: messages deleted or swapped, blocks deleted, copied, moved or emptied."""
    native, system = from_canonical(
        "bedrock_converse", draw(gen.sessions(images=False, max_units=8))
    )
    msgs = copy.deepcopy(native)
    for _ in range(draw(st.integers(1, 3))):
        if not msgs:
            break
        k = draw(st.integers(0, len(msgs) - 1))
        blocks = msgs[k]["content"]
        op = draw(st.sampled_from(("delete", "swap", "drop", "copy", "move", "empty_error")))
        b = draw(st.integers(0, len(blocks) - 1))
        if op == "delete":
            del msgs[k]
        elif op == "swap":
            j = draw(st.integers(0, len(msgs) - 1))
            msgs[k], msgs[j] = msgs[j], msgs[k]
        elif op == "drop" and len(blocks) > 1:
            del blocks[b]
        elif op == "copy":
            target = msgs[draw(st.integers(0, len(msgs) - 1))]["content"]
            target.insert(draw(st.integers(0, len(target))), copy.deepcopy(blocks[b]))
        elif op == "move":
            blocks.append(blocks.pop(b))
        elif op == "empty_error" and "toolResult" in blocks[b]:
            blocks[b]["toolResult"].update(status="error", content=[])
    return msgs, system


@properties
@given(edited())
def test_the_core_validator_agrees_with_the_python_oracle(session: tuple[Any, Any]) -> None:
    messages, system = session
    core, oracle = _both(messages, system)
    assert core == oracle


def test_the_oracle_is_not_blind() -> None:
    """The comparison means something: both find every kind of issue of a broken session."""
    messages = [
        reply("hi"),
        reply("again"),
        calls(use("t1"), use("t1"), use("t2")),
        {"role": "user", "content": [result("t1"), result("t1"), result("zz"), {"text": "x"}]},
        calls(use("t3")),
        user("no result"),
        results(
            result("t2"), {"toolResult": {"toolUseId": "t4", "status": "error", "content": []}}
        ),
        calls(use("t4")),
    ]
    core, oracle = _both(messages)
    assert core == oracle
    assert {kind for kind, *_ in core} == {
        "first_message_not_user",
        "roles_not_alternating",
        "duplicate_id",
        "missing_result",
        "results_mixed_with_content",
        "orphan_result",
        "unrepairable_missing_result",
        "result_not_adjacent",
        "result_before_call",
        "empty_error_result",
    }


def test_a_result_called_before_and_after_is_late_for_the_earlier_call() -> None:
    """One stray classification for every provider: the latest earlier call of the id first."""
    messages = [
        user("go"),
        calls(use("t1")),
        user("wait"),
        reply("ok"),
        results(result("t1")),
        calls(use("t1")),
        results(result("t1")),
    ]
    assert ("result_not_adjacent", 4) in issues(messages)
    stray = next(i for i in ADAPTER.validate(messages) if i.index == 4)
    assert stray.message.endswith(
        "ringbound: messages[4] answers `t1` of messages[1], but results belong in the user "
        "turn right after the call"
    )


def test_boto3_bytes_are_read_by_the_core() -> None:
    doc = {"document": {"format": "txt", "name": "notes", "source": {"bytes": b"hello " * 50}}}
    messages = [
        {"role": "user", "content": [image(png(40, 40)), doc, {"text": "read these"}]},
        calls(use("t1")),
    ]
    assert [i.kind for i in ADAPTER.validate(messages)] == ["missing_result"]


def test_a_text_document_counts_as_its_text() -> None:
    text = "The quarterly figures rose by four percent. " * 40
    as_doc = [
        {
            "role": "user",
            "content": [
                {
                    "document": {
                        "format": "txt",
                        "name": "q",
                        "source": {"bytes": base64.b64encode(text.encode()).decode()},
                    }
                }
            ],
        }
    ]
    as_text = [{"role": "user", "content": [{"text": "q"}, {"text": text}]}]
    assert count(as_doc) == count(as_text)


# --- an Anthropic-compacted history -------------------------------------------------------------

#: Bedrock's answer to Anthropic's compaction beta (its error, quoted in issue 35).
NO_COMPACTION = (
    "The compact beta feature is not currently supported on the Converse and ConverseStream APIs."
)


@pytest.mark.parametrize(
    "block",
    [
        {"type": "compaction", "content": "Summary so far.", "signature": "c2ln"},
        {"compaction": {"content": "Summary so far."}},
    ],
)
@pytest.mark.parametrize("entry", ["validate", "count", "assemble", "assemble_body"])
def test_a_compacted_history_is_refused_in_bedrocks_words(block: Any, entry: str) -> None:
    messages = [
        {"role": "user", "content": [{"text": "Go on."}]},
        {"role": "assistant", "content": [block, {"text": "Carrying on."}]},
        {"role": "user", "content": [{"text": "Next."}]},
    ]
    before = copy.deepcopy(messages)
    with pytest.raises(rb.InvalidMessageError) as info:
        if entry == "validate":
            rb.validate(messages, provider="bedrock_converse")
        elif entry == "count":
            rb.count_tokens(messages, provider="bedrock_converse")
        elif entry == "assemble":
            rb.Assembler(rb.AssemblyConfig(), provider="bedrock_converse").assemble(messages)
        else:
            body = json.dumps({"modelId": "m", "messages": messages}).encode()
            rb.Assembler(rb.AssemblyConfig(), provider="bedrock_converse").assemble_body(body)
    assert info.value.index == 1
    assert info.value.reason.endswith(NO_COMPACTION)
    assert messages == before
