"""The stages that degrade the protected suffix before refusing (``truncate_protected_results``,
``shrink_recent``), through the public API: their config keys, what they report, the floors
that keep today's strict protection, and that a cut protected result recovers exactly."""

from __future__ import annotations

from typing import Any

import pytest

import ringbound as rb

DEGRADE = ("truncate_protected_results", "shrink_recent")


def ring(call_id: str, tool: str, result: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool, "arguments": f'{{"ref": "{call_id}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def table(rows: int, tag: str) -> str:
    return "id,amount,status\n" + "".join(f"{i},{i * 7},{tag}\n" for i in range(rows))


def session(*sizes: int) -> list[dict[str, Any]]:
    """Rules, the goal, one ring per size (the first sends a payment), the user's next turn."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You reconcile payments."},
        {"role": "user", "content": "Reconcile yesterday's payments."},
    ]
    for k, rows in enumerate(sizes):
        msgs += ring(f"c{k}", "send_payment" if k == 0 else "export_csv", table(rows, f"r{k}"))
    msgs.append({"role": "user", "content": "And the refunds?"})
    return msgs


def config(budget: int, **kw: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=("send_payment",),
        **kw,
    )


def strict(budget: int, **kw: Any) -> rb.AssemblyConfig:
    stages = tuple(s for s in rb.config.STAGES if s not in DEGRADE)
    return config(budget, stages=stages, **kw)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min_result_tokens", 15),
        ("min_result_tokens", "500"),
        ("min_recent_tool_rings", -1),
        ("min_recent_user_turns", True),
        ("stages", ("shrink_recent", "shrink_everything")),
    ],
)
def test_a_wrong_floor_is_a_config_error_naming_its_key(key: str, value: Any) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig(**{key: value})
    assert info.value.key == key


def test_a_huge_newest_result_is_cut_not_refused_and_recovers_exactly() -> None:
    messages = session(3000)
    budget = 3000
    with pytest.raises(rb.BudgetExceededError) as info:
        rb.Assembler(strict(budget)).assemble(messages)
    assert info.value.bucket_tokens["suffix"] > budget
    res = rb.Assembler(config(budget)).assemble(messages)
    assert [s.stage for s in res.report.stages] == ["truncate_protected_results"]
    assert res.report.truncated_results == [3]
    assert res.report.tokens_after <= budget
    # Cut only as far as the budget needs: the request is nearly the whole budget.
    assert res.report.tokens_after > budget - 50
    assert res.messages[3] is not messages[3] and res.messages[2] is messages[2]
    recovered = rb.recovery.recover(messages, res.messages[3]["content"])
    assert recovered.text == messages[3]["content"]


def test_the_newest_result_is_never_cut_below_its_floor() -> None:
    messages = session(3000)
    floor = 800
    res = rb.Assembler(config(100_000, min_result_tokens=floor)).assemble(messages)
    assert res.report.stages == []
    with pytest.raises(rb.BudgetExceededError) as info:
        rb.Assembler(config(floor, min_result_tokens=floor)).assemble(messages)
    # The smallest request the policy allows holds the result at its floor.
    assert info.value.tokens > floor
    res = rb.Assembler(config(info.value.tokens, min_result_tokens=floor)).assemble(messages)
    cut = rb.count_tokens([res.messages[3]]) - 3
    assert floor - 20 <= cut <= floor


def test_shrink_recent_releases_the_oldest_recent_ring_into_the_ledger() -> None:
    messages = session(400, 400, 400)
    full = rb.count_tokens(messages)
    budget = full - 200
    # Results under max_tool_result_tokens, the newest's floor above its size: nothing to
    # cut; the three recent rings kept whole do not fit.
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(strict(budget, min_result_tokens=5000)).assemble(messages)
    res = rb.Assembler(config(budget, min_result_tokens=5000)).assemble(messages)
    assert [s.stage for s in res.report.stages] == ["shrink_recent"]
    assert res.report.dropped_rings == [(2, 4)]
    assert res.report.tokens_after <= budget
    notes = [m for m in res.messages if "[ringbound:side-effect-ledger]" in str(m["content"])]
    assert len(notes) == 1 and "send_payment" in notes[0]["content"] and "c0" in notes[0]["content"]
    # Floors equal to the configured values keep the suffix whole: refused as before.
    with pytest.raises(rb.BudgetExceededError):
        rb.Assembler(
            config(budget, min_result_tokens=5000, min_recent_tool_rings=3, min_recent_user_turns=2)
        ).assemble(messages)


def test_the_degrading_stages_run_after_the_middle_whatever_their_place() -> None:
    messages = session(400, 400, 400, 400, 400)
    full = rb.count_tokens(messages)
    ring_tokens = rb.count_tokens(messages[2:4]) - 3
    order = tuple(reversed(rb.config.STAGES))
    # The two middle rings go, and it is still over: only then does the suffix degrade.
    budget = full - 2 * ring_tokens - 300
    res = rb.Assembler(config(budget, stages=order)).assemble(messages)
    stages = [s.stage for s in res.report.stages]
    assert stages[0] == "drop_rings" and res.report.stages[0].units == 2
    assert set(stages[1:]) <= set(DEGRADE)
