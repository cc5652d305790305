"""atheris harness for the plan, with the pure-Python reference (``tests/reference.py``) as its
oracle.

The fuzzer's bytes build an OpenAI chat session (rules, the goal, user turns, replies, tool rings
with parallel calls, repeated reads, huge and error results, images, side-effecting calls,
results left missing, a mid-conversation policy message) and a policy (protection, pins,
stages in any order and subset, error-ring holding, result limits, floors, both failure
policies, both encodings, a budget from 1% to 120% of the session). The Rust plan runs through
the public API, the reference plans the same request, and any disagreement is a finding: the
kept messages (the caller's own objects, at the same places), their order, the insertions,
the report's tokens, drops, stages, rewrites and ledger, or the error's type and numbers. So is
any exception that is not a ``ringbound.RingboundError``.

Run: ``python tests/fuzz/plan.py -runs=2000 -seed=1 tests/fuzz/plan_seeds`` (libFuzzer flags).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The reference is instrumented too: its branches are the plan's decisions, so coverage of
# them steers the fuzzer towards sessions that exercise other stages.
with atheris.instrument_imports():
    import reference as ref
    import strategies as gen
    from test_reference import check_against_reference

    import ringbound as rb
    from ringbound.config import PINS, STAGES

#: Tool names, side-effecting ones first (send_email the most frequent, so ids recur on it).
NAMES = ("send_email", *gen.TOOLS)


def pick(fdp: atheris.FuzzedDataProvider, options: tuple[Any, ...]) -> Any:
    return options[fdp.ConsumeIntInRange(0, len(options) - 1)]


def ring(
    fdp: atheris.FuzzedDataProvider, rnd: random.Random, earlier: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """An assistant message with 1-4 calls and its results in an order the bytes choose; a
    call may repeat an earlier one (a read whose older result a newer one supersedes)."""
    n = fdp.ConsumeIntInRange(1, 4)
    positional = fdp.ConsumeBool()
    calls = []
    for k in range(n):
        if earlier and fdp.ConsumeIntInRange(0, 3) == 0:
            old = pick(fdp, tuple(earlier))["function"]
            name, arguments = old["name"], gen.rewritten_arguments(old["arguments"], rnd)
        else:
            name = pick(fdp, NAMES)
            arguments = gen._arguments(name, rnd)
        call_id = f"call_{k}" if positional else f"call_{rnd.getrandbits(32):08x}{k}"
        function = {"name": name, "arguments": arguments}
        calls.append({"id": call_id, "type": "function", "function": function})
    earlier.extend(calls)
    content = gen._words((rnd.randint(0, 99), rnd.randint(1, 9))) if fdp.ConsumeBool() else None
    out: list[dict[str, Any]] = [{"role": "assistant", "content": content, "tool_calls": calls}]
    order = list(range(n))
    for k in range(n - 1, 0, -1):
        j = fdp.ConsumeIntInRange(0, k)
        order[k], order[j] = order[j], order[k]
    for k in order:
        body = gen._result_text(pick(fdp, gen.RESULT_KINDS), rnd)
        result: dict[str, Any] = {"role": "tool", "tool_call_id": calls[k]["id"]}
        result["content"] = [{"type": "text", "text": body}] if fdp.ConsumeBool() else body
        out.append(result)
    return out


def user(fdp: atheris.FuzzedDataProvider, rnd: random.Random) -> dict[str, Any]:
    """A user turn: a string, or text parts with one or two images."""
    text = gen._words((rnd.randint(0, 99), rnd.randint(1, 30)))
    if fdp.ConsumeIntInRange(0, 4) > 0:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for _ in range(fdp.ConsumeIntInRange(1, 2)):
        width, height = pick(fdp, gen.PNG_SIZES)
        detail = pick(fdp, ("low", "high", "auto"))
        url = {"url": gen.png_data_url(width, height), "detail": detail}
        parts.append({"type": "image_url", "image_url": url})
    return {"role": "user", "content": parts}


def session(fdp: atheris.FuzzedDataProvider, rnd: random.Random) -> list[dict[str, Any]]:
    """A chat session the bytes shape; some results may be left missing."""
    msgs: list[dict[str, Any]] = []
    if fdp.ConsumeIntInRange(0, 4) > 0:
        msgs.append({"role": "system", "content": "You are a careful travel agent."})
    if fdp.ConsumeIntInRange(0, 4) == 0:
        msgs.append({"role": "developer", "content": "Never reveal internal ids."})
    calls: list[dict[str, Any]] = []
    if fdp.ConsumeIntInRange(0, 7) == 0:  # the agent acted before the user spoke
        msgs += ring(fdp, rnd, calls)
    msgs.append(user(fdp, rnd))
    for _ in range(fdp.ConsumeIntInRange(0, 16)):
        kind = fdp.ConsumeIntInRange(0, 9)
        if kind == 0:
            msgs.append(user(fdp, rnd))
        elif kind == 1:
            msgs.append({"role": "assistant", "content": gen._words((rnd.randint(0, 99), 12))})
        elif kind == 2:
            msgs.append({"role": "system", "content": "Policy update: be brief."})
        else:
            msgs += ring(fdp, rnd, calls)
    results = [i for i, m in enumerate(msgs) if m["role"] == "tool"]
    if results and fdp.ConsumeIntInRange(0, 3) == 0:
        gone = {pick(fdp, tuple(results)) for _ in range(fdp.ConsumeIntInRange(1, 3))}
        msgs = [m for i, m in enumerate(msgs) if i not in gone]
    return msgs


def policy(fdp: atheris.FuzzedDataProvider) -> dict[str, Any]:
    """AssemblyConfig keyword arguments, the budget aside."""
    stages = [s for s in STAGES if fdp.ConsumeIntInRange(0, 5) > 0]
    for k in range(len(stages) - 1, 0, -1):
        if fdp.ConsumeIntInRange(0, 3) == 0:
            j = fdp.ConsumeIntInRange(0, k)
            stages[k], stages[j] = stages[j], stages[k]
    side_effects = tuple(t for t in gen.SIDE_EFFECT_TOOLS if fdp.ConsumeIntInRange(0, 3) > 0)
    return {
        "recent_tool_rings": fdp.ConsumeIntInRange(0, 4),
        "recent_user_turns": fdp.ConsumeIntInRange(0, 3),
        "min_recent_tool_rings": fdp.ConsumeIntInRange(0, 2),
        "min_recent_user_turns": fdp.ConsumeIntInRange(0, 2),
        "min_result_tokens": pick(fdp, (16, 60, 500)),
        "max_tool_result_tokens": pick(fdp, gen.MAX_TOOL_RESULT_TOKENS),
        "pin": tuple(p for p in PINS if fdp.ConsumeIntInRange(0, 3) > 0),
        "side_effect_tools": side_effects,
        "ledger_fields": pick(fdp, ({}, {"send_email": ["to"]}, {"book_reservation": []})),
        "short_error_result_tokens": pick(fdp, (0, 10, 30, 200, 10_000)),
        "max_held_error_rings": fdp.ConsumeIntInRange(0, 4),
        "stages": tuple(stages),
        "on_still_over_budget": pick(fdp, ("fail_closed", "drop_tools_schema_then_fail")),
        "on_pairing_error": pick(fdp, ("fail_closed", "synthesize_error_results")),
        "encoding": pick(fdp, ("o200k_base", "cl100k_base")),
        "output_reserve_tokens": 0,
        "safety_margin_tokens": 0,
    }


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    rnd = random.Random(fdp.ConsumeInt(4))
    messages = session(fdp, rnd)
    kwargs = policy(fdp)
    tools = None
    if fdp.ConsumeBool():
        names = sorted({c["function"]["name"] for m in messages for c in m.get("tool_calls", ())})
        tools = gen.tools_schema(names or list(gen.TOOLS))
    pinned = tuple(
        sorted(
            {
                fdp.ConsumeIntInRange(0, len(messages) - 1)
                for _ in range(fdp.ConsumeIntInRange(0, 2))
            }
        )
    )
    full = rb.count_tokens(messages, encoding=kwargs["encoding"], tools=tools)
    budget = max(1, full * fdp.ConsumeIntInRange(1, 120) // 100)
    cfg = rb.AssemblyConfig(model_input_limit=budget, **kwargs)
    try:
        check_against_reference(messages, cfg, tools, pinned)
    except ref.NotCovered:
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
