"""The Gemini adapter: Gemini's turn rules and 400 wording, the canonical view (which must pair
whenever the adapter accepts the contents), rendering back into the caller's own contents with
the ledger note in the system instruction, and the invariants of DESIGN §4 on generated
sessions converted from OpenAI Chat."""

from __future__ import annotations

import base64
import copy
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import gemini_oracle
import orjson
import pydantic
import pytest
import strategies as gen
from canonical_writers import GEMINI_OPENING_TEXT, from_canonical
from canonical_writers import _g_canonical_text as chat_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.config import STAGES
from ringbound.providers import adapter
from ringbound.providers import gemini as mod
from ringbound.providers.gemini import ADAPTER

KEY = "gemini"
SYNTH = _core.SYNTHESIZED_RESULT_TEXT
MARKER = _core.LEDGER_MARKER
properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: When a property fails, hypothesis imports libcst, which trips a DeprecationWarning of
#: mypy_extensions under filterwarnings=error (see tests/test_invariants.py).
pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)


# Building blocks ----------------------------------------------------------------------------


def user(text: str = "Email Ana the report, then summarize the logs.") -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "model", "parts": list(parts)}


def answer(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "parts": list(parts)}


def say(text: str) -> dict[str, Any]:
    return model({"text": text})


def call(
    name: str = "read_log",
    args: dict[str, Any] | None = None,
    cid: str | None = None,
    signature: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "args": {"file": "app.log"} if args is None else args}
    if cid is not None:
        body["id"] = cid
    part: dict[str, Any] = {"functionCall": body}
    if signature is not None:
        part["thoughtSignature"] = signature
    return part


def response(
    name: str = "read_log", output: str = "log line " * 60, cid: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "response": {"output": output}}
    if cid is not None:
        body["id"] = cid
    return {"functionResponse": body}


def ring(name: str = "read_log", cid: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    args = kw.pop("args", None)
    return [model(call(name, args, cid, **kw)), answer(response(name, cid=cid))]


def session(rings: int = 8, first: str = "send_email") -> list[dict[str, Any]]:
    """A goal, then ``rings`` tool rings (the first calls ``first``), then a reply."""
    contents = [user()]
    for k in range(rings):
        contents += ring(first if k == 0 else "read_log", args={"file": f"app{k}.log"})
    return [*contents, say("The logs show three timeouts.")]


#: The stages these tests were written for: whole units dropped, the caller's objects kept.
#: The rewriting stages are tested in test_rewrites.py.
DROP_STAGES = ("drop_rings", "drop_plain_turns", "drop_error_rings")


def config(budget: int = 100_000, **kw: Any) -> rb.AssemblyConfig:
    kw.setdefault("stages", DROP_STAGES)
    kw.setdefault("side_effect_tools", ["send_email"])
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **kw
    )


@dataclass(frozen=True)
class Result:
    messages: list[Any]
    system: Any
    report: dict[str, Any]


REPORT_KEYS = (
    "tokens_after",
    "budget",
    "dropped_rings",
    "dropped_turns",
    "repairs",
    "ledger_entries",
    "tools_dropped",
    "merged",
)


def assemble(
    contents: list[Any],
    cfg: rb.AssemblyConfig,
    *,
    system: Any = None,
    tools: list[Any] | None = None,
    pinned: tuple[int, ...] = (),
) -> Result:
    res = rb.Assembler(cfg, provider=KEY).assemble(contents, tools, system=system, pinned=pinned)
    report = {k: getattr(res.report, k) for k in REPORT_KEYS}
    report["rewritten"] = {r.index for r in res.report.rewrites}
    return Result(res.messages, res.system, report)


def count(
    contents: list[Any], *, system: Any = None, tools: Any = None, enc: str = "o200k_base"
) -> int:
    return rb.count_tokens(contents, provider=KEY, system=system, tools=tools, encoding=enc)


def canonical_issues(contents: list[Any], system: Any = None) -> list[Any]:
    """What the core's OpenAI Chat validator says of the canonical view."""
    canonical = gemini_oracle.to_canonical(contents, system=system)
    return _core.validate("openai_chat", orjson.dumps(canonical.messages))


def parts(content: Any) -> list[Any]:
    return list(content["parts"] if isinstance(content, dict) else content.parts)


def kinds(issues: list[rb.PairingIssue]) -> list[tuple[str, int]]:
    return [(i.kind, i.index) for i in issues]


def rejected(contents: list[Any], **kw: Any) -> rb.PairingError:
    with pytest.raises(rb.PairingError) as info:
        assemble(contents, config(), **kw)
    assert kinds(info.value.issues) == kinds(ADAPTER.validate(contents, system=kw.get("system")))
    return info.value


def budget_dropping(contents: list[Any], fraction: float = 0.5, **kw: Any) -> int:
    return int(count(contents, **kw) * fraction)


# The adapter is the one the framework hands out ---------------------------------------------


def test_registered_adapter() -> None:
    assert adapter(KEY) is ADAPTER
    assert (ADAPTER.key, ADAPTER.image_formula) == ("gemini", "gemini")
    assert 1.0 < ADAPTER.default_token_ratio < 2.0


# The round-trip matrix ----------------------------------------------------------------------


def test_single_tool_round_trip() -> None:
    contents = [user(), *ring("read_log"), say("Done.")]
    assert ADAPTER.validate(contents) == []
    canonical = gemini_oracle.to_canonical(contents)
    roles = [m["role"] for m in canonical.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    # The leading system message (empty here) is glued to the first user turn, which Gemini
    # needs first: the two are one unit, protected with the instructions.
    assert canonical.spans == [(-1, -1), (0, 1), (1, 2), (2, 3), (3, 4)]
    assert canonical.binds_next == [True, False, False, False, False]
    cid = canonical.messages[2]["tool_calls"][0]["id"]
    assert canonical.messages[3]["tool_call_id"] == cid and cid.startswith("gemini_")
    assert canonical_issues(contents) == []
    res = assemble(contents, config())
    assert all(a is b for a, b in zip(res.messages, contents, strict=True))
    assert res.system is None
    assert res.report["tokens_after"] == count(contents)


def test_two_parallel_tools_pair_by_id_or_by_name_and_position() -> None:
    by_id = [
        user(),
        model(call("read_log", cid="c1"), call("get_weather", {"city": "Paris"}, cid="c2")),
        answer(response("get_weather", "sunny", cid="c2"), response("read_log", cid="c1")),
        say("Done."),
    ]
    same_name = [
        user(),
        model(call("read_log", {"file": "a"}), call("read_log", {"file": "b"})),
        answer(response("read_log", "A"), response("read_log", "B")),
        say("Done."),
    ]
    for contents in (by_id, same_name):
        assert ADAPTER.validate(contents) == []
        assert canonical_issues(contents) == []
        canonical = gemini_oracle.to_canonical(contents)
        ids = [c["id"] for c in canonical.messages[2]["tool_calls"]]
        answered = [m["tool_call_id"] for m in canonical.messages[3:5]]
        assert sorted(ids) == sorted(answered) and len(set(ids)) == 2
        res = assemble(contents, config())
        assert all(a is b for a, b in zip(res.messages, contents, strict=True))
    canonical = gemini_oracle.to_canonical(by_id)
    assert [m["tool_call_id"] for m in canonical.messages[3:5]] == ["c2", "c1"]
    # Without ids, responses answer same-named calls in order.
    canonical = gemini_oracle.to_canonical(same_name)
    first, second = (c["id"] for c in canonical.messages[2]["tool_calls"])
    assert [m["tool_call_id"] for m in canonical.messages[3:5]] == [first, second]


def test_tool_then_user_follow_up() -> None:
    contents = [
        user(),
        *ring("read_log"),
        answer({"text": "Also check the nightly job."}),
        *ring("list_dir"),
        say("All checked."),
    ]
    # Two user contents in a row (a response turn, then text): kept as the caller sent them.
    assert ADAPTER.validate(contents) == []
    assert canonical_issues(contents) == []
    res = assemble(contents, config())
    assert all(a is b for a, b in zip(res.messages, contents, strict=True))


def test_response_turn_may_carry_text_and_images() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": gen.png_data_url(64, 48)[22:]}}
    contents = [user(), model(call()), answer(response(), {"text": "see the chart"}, image)]
    assert ADAPTER.validate(contents) == []
    canonical = gemini_oracle.to_canonical(contents)
    assert [m["role"] for m in canonical.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert canonical.spans[-2:] == [(2, 3), (2, 3)]
    assert canonical.messages[-1]["content"][1]["type"] == "image_url"
    assert canonical_issues(contents) == []


def test_dropped_middle_ring() -> None:
    contents = session(10)
    budget = budget_dropping(contents)
    res = assemble(contents, config(budget))
    out = res.messages
    assert ADAPTER.validate(out, system=res.system) == []
    assert canonical_issues(out, res.system) == []
    assert len(out) < len(contents)
    # Every content is the caller's own object, in order; whole rings went.
    where = {id(c): i for i, c in enumerate(contents)}
    kept = [where[id(c)] for c in out]
    assert kept == sorted(kept) and len(kept) == len(out)
    dropped = set(range(len(contents))) - set(kept)
    assert all((i % 2 == 1) == (i + 1 in dropped) for i in dropped if i % 2 == 1)
    assert kept[0] == 0 and kept[-1] == len(contents) - 1
    assert res.report["tokens_after"] <= budget
    assert count(out, system=res.system) <= budget
    assert res.report["dropped_rings"][0] == (1, 3)


def test_ledger_note_goes_into_the_system_instruction() -> None:
    contents = session(10)
    shapes: list[Any] = [
        None,
        "You are a careful assistant.",
        {"parts": [{"text": "You are a careful assistant."}]},
        {"role": "system", "parts": [{"text": "Rule one."}, {"text": "Rule two."}]},
    ]
    for system in shapes:
        before = copy.deepcopy(system)
        budget = budget_dropping(contents, system=system)
        res = assemble(contents, config(budget), system=system)
        assert system == before
        assert res.report["ledger_entries"] == 1
        if system is None:
            note = res.system["parts"][0]["text"]
        elif isinstance(system, str):
            assert res.system.startswith(system + "\n\n" + MARKER)
            note = res.system[len(system) + 2 :]
        else:
            assert res.system is not system
            assert res.system["parts"][:-1] == system["parts"]
            note = res.system["parts"][-1]["text"]
        assert note.startswith(MARKER) and "send_email" in note
        assert res.report["tokens_after"] <= budget
        assert count(res.messages, system=res.system) <= budget
        # The next assembly reads the note back and, with nothing new, returns it as is.
        again = assemble(res.messages, config(budget), system=res.system)
        assert again.system is res.system
        assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))
        # A session that grows keeps the note and adds to it.
        grown = [*res.messages[:-1], *ring("send_email", args={"to": "bob@example.com"})]
        grown += [*ring(), *ring(), *ring(), say("ok")]
        later = assemble(grown, config(budget), system=res.system)
        assert later.report["ledger_entries"] >= 1
        text = str(later.system)
        assert text.count(MARKER) == 1


def test_ledger_note_remembers_calls_without_ids_by_their_arguments() -> None:
    contents = session(10)
    budget = budget_dropping(contents)
    res = assemble(contents, config(budget))
    cid = gemini_oracle.to_canonical(contents).messages[2]["tool_calls"][0]["id"]
    assert f'call_id="{cid}"' in res.system["parts"][0]["text"]
    # The same call, wherever it stands, has the same canonical id.
    moved = [user("hi"), say("hello"), *contents]
    assert gemini_oracle.to_canonical(moved).messages[4]["tool_calls"][0]["id"] == cid


# Broken pairing: Gemini's wording -----------------------------------------------------------


def test_unanswered_call_is_rejected_with_geminis_wording() -> None:
    contents = [user(), model(call(cid="c1")), user("never mind"), say("ok")]
    err = rejected(contents)
    assert kinds(err.issues) == [("missing_result", 1)]
    assert err.issues[0].call_id == "c1"
    assert err.issues[0].message.startswith(mod.COUNT_MISMATCH)
    assert "contents[2]" in err.issues[0].message
    # One of two calls answered: the same rule (counts differ), at the call turn.
    partial = [user(), model(call("a"), call("b")), answer(response("a")), say("ok")]
    issues = ADAPTER.validate(partial)
    assert kinds(issues) == [("missing_result", 1)]
    assert "`b`" in issues[0].message and "1 of 2" in issues[0].message


def test_orphan_response_is_rejected_with_geminis_wording() -> None:
    stray = [user(), say("hello"), answer(response("read_log"))]
    err = rejected(stray)
    assert kinds(err.issues) == [("orphan_result", 2)]
    assert err.issues[0].message.startswith(mod.RESPONSE_TURN_POSITION)
    # An extra response in a response turn breaks the count rule.
    extra = [user(), model(call("a")), answer(response("a"), response("b")), say("ok")]
    err = rejected(extra)
    assert kinds(err.issues) == [("orphan_result", 2)]
    assert err.issues[0].message.startswith(mod.COUNT_MISMATCH)
    # A response whose call comes only later.
    early = [
        user(),
        answer(response("a", cid="x")),
        model(call("a", cid="x")),
        answer(response("a", cid="x")),
    ]
    assert kinds(ADAPTER.validate(early)) == [("result_before_call", 1)]
    # A response separated from its call turn by another user turn.
    late = [user(), model(call("a", cid="x")), user("wait"), answer(response("a", cid="x"))]
    issues = ADAPTER.validate(late)
    assert kinds(issues) == [("result_not_adjacent", 3)]
    assert issues[0].message.startswith(mod.RESPONSE_TURN_POSITION)


def test_duplicate_response_is_rejected() -> None:
    contents = [
        user(),
        model(call("a", cid="x")),
        answer(response("a", cid="x"), response("a", cid="x")),
        say("ok"),
    ]
    err = rejected(contents)
    assert kinds(err.issues) == [("duplicate_id", 2)]
    assert err.issues[0].call_id == "x"
    assert err.issues[0].message.startswith(mod.COUNT_MISMATCH)
    # Answered in its turn, then again later.
    again = [
        *contents[:2],
        answer(response("a", cid="x")),
        say("ok"),
        answer(response("a", cid="x")),
    ]
    assert kinds(ADAPTER.validate(again)) == [("duplicate_id", 4)]
    # Two calls with one id in a turn pair with two responses in order (counts match).
    twice = [
        user(),
        model(call("a", cid="x"), call("a", {"file": "b"}, cid="x")),
        answer(response("a", cid="x"), response("a", cid="x")),
    ]
    assert ADAPTER.validate(twice) == []
    assert canonical_issues(twice) == []


def test_turn_order_rules() -> None:
    opens_with_model = [say("hi"), user()]
    issues = ADAPTER.validate(opens_with_model)
    assert kinds(issues) == [("first_turn_not_user", 0)]
    assert issues[0].message.startswith(mod.ALTERNATE)
    call_first = [model(call()), answer(response())]
    issues = ADAPTER.validate(call_first)
    assert kinds(issues) == [("call_turn_misplaced", 0)]
    assert issues[0].message.startswith(mod.CALL_TURN_POSITION)
    after_model = [user(), say("let me look"), model(call()), answer(response())]
    issues = ADAPTER.validate(after_model)
    assert kinds(issues) == [("call_turn_misplaced", 2)]
    with pytest.raises(rb.PairingError):
        assemble(after_model, config(on_pairing_error="synthesize_error_results"))


def test_issues_come_in_content_order_and_are_deterministic() -> None:
    contents = [
        user(),
        answer(response("z")),
        model(call("a"), call("b", cid="q")),
        user("no answers"),
        model(call("c")),
    ]
    issues = ADAPTER.validate(contents)
    assert kinds(issues) == [
        ("orphan_result", 1),
        ("missing_result", 2),
        ("missing_result", 2),
        ("missing_result", 4),
    ]
    assert issues == ADAPTER.validate(copy.deepcopy(contents))
    assert rb.validate(contents, provider=KEY) == issues


# Repair -------------------------------------------------------------------------------------


def test_repair_answers_a_trailing_call_in_a_new_user_turn() -> None:
    contents = [
        *session(3),
        user("Now email Bob."),
        model(call("send_email", {"to": "bob"}, cid="c9"), call("list_dir")),
    ]
    rejected(contents)
    before = copy.deepcopy(contents)
    res = assemble(contents, config(on_pairing_error="synthesize_error_results"))
    assert contents == before
    assert all(a is b for a, b in zip(res.messages, contents, strict=False))
    added = res.messages[-1]
    assert added == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "send_email",
                    "response": {"error": SYNTH},
                    "id": "c9",
                }
            },
            {"functionResponse": {"name": "list_dir", "response": {"error": SYNTH}}},
        ],
    }
    assert len(res.report["repairs"]) == 2 and "c9" in res.report["repairs"]
    assert ADAPTER.validate(res.messages) == []
    # Assembling the repaired request again changes nothing.
    again = assemble(res.messages, config(on_pairing_error="synthesize_error_results"))
    assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))


def test_the_report_counts_the_rendered_request() -> None:
    """Synthesized responses, merges and the note cost what the rendered request costs."""
    contents = [user(), model(call("send_email", cid="c9"), call("list_dir"))]
    res = assemble(contents, config(on_pairing_error="synthesize_error_results"))
    assert count(res.messages) == res.report["tokens_after"]


def test_repair_completes_a_partial_response_turn_in_a_new_object() -> None:
    turn = answer(response("a"), {"text": "and a note"})
    contents = [user(), model(call("a"), call("b")), turn, say("ok")]
    res = assemble(contents, config(on_pairing_error="synthesize_error_results"))
    fixed = res.messages[2]
    assert fixed is not turn and turn == answer(response("a"), {"text": "and a note"})
    got = parts(fixed)
    assert got[0] is turn["parts"][0] and got[2] is turn["parts"][1]
    assert got[1] == {"functionResponse": {"name": "b", "response": {"error": SYNTH}}}
    assert ADAPTER.validate(res.messages) == []
    # A user text turn after the call turn receives the responses in front of its text.
    text_after = [user(), model(call("a")), user("hurry"), say("ok")]
    res = assemble(text_after, config(on_pairing_error="synthesize_error_results"))
    assert parts(res.messages[2])[1] is text_after[2]["parts"][0]
    assert ADAPTER.validate(res.messages) == []


# Structure after drops ----------------------------------------------------------------------


def test_same_role_neighbours_are_merged_into_new_contents() -> None:
    aside = user("an aside " * 200)
    contents = [
        user(),
        say("Let me think about it."),
        aside,
        model(call("read_log")),
        answer(response("read_log", "short")),
        say("Done."),
    ]
    cfg = config(budget_dropping(contents, 0.5), recent_user_turns=0, recent_tool_rings=1)
    before = copy.deepcopy(contents)
    res = assemble(contents, cfg, pinned=(1,))
    assert contents == before
    # The aside went (the reply before it is pinned); the two model turns it separated are now
    # one new model content.
    assert len(res.messages) == 4 and res.report["merged"] == 1
    merged = res.messages[1]
    assert merged["role"] == "model"
    assert parts(merged)[0] is contents[1]["parts"][0]
    assert parts(merged)[1] is contents[3]["parts"][0]
    assert ADAPTER.validate(res.messages) == []
    assert canonical_issues(res.messages) == []


def test_first_user_turn_is_kept_even_when_not_pinned() -> None:
    goal = user("the goal " * 200)
    contents = [goal, *session(6)[1:]]
    budget = count(contents) - 100
    res = assemble(contents, config(budget, pin=(), recent_user_turns=0))
    assert res.messages[0] is goal
    assert ADAPTER.validate(res.messages) == []


def test_thought_signatures_stay_on_their_parts() -> None:
    thinking = model(
        {"text": "Reading the log first.", "thought": True},
        call("read_log", cid="c1", signature="c2lnbmF0dXJl" * 30),
        call("list_dir", cid="c2"),
    )
    contents = [user(), thinking, answer(response(cid="c1"), response("list_dir", cid="c2"))]
    # Every later step of the turn is signed too, as Gemini 3 signs them.
    contents += [*ring(signature="c2ln"), *ring(signature="c2ln"), *ring(signature="c2ln")]
    contents += [say("ok")]
    full = count(contents)
    unsigned = copy.deepcopy(contents)
    del unsigned[1]["parts"][1]["thoughtSignature"]
    del unsigned[1]["parts"][0]["thought"]
    unsigned[1]["parts"][0]["text"] = ""
    assert full > count(unsigned) + 40  # the signature and the thought are counted
    # Kept: the very same part objects, signature in place.
    res = assemble(contents, config())
    assert res.messages[1] is thinking and "thoughtSignature" in thinking["parts"][1]
    # Dropped: with its responses, as one ring.
    res = assemble(contents, config(budget_dropping(contents, 0.6), recent_tool_rings=1))
    assert all(c is not thinking and c is not contents[2] for c in res.messages)
    assert ADAPTER.validate(res.messages) == []


def test_snake_case_contents_as_the_python_sdk_writes_them() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "go"}]},
        {
            "role": "model",
            "parts": [
                {"function_call": {"name": "send_email", "args": {"to": "a"}, "id": "s1"}},
                {"function_call": {"name": "read_log", "args": {}}, "thought_signature": "abc"},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"function_response": {"name": "send_email", "response": {"ok": 1}, "id": "s1"}},
                {"inline_data": {"mime_type": "image/png", "data": gen.png_data_url(16, 16)[22:]}},
            ],
        },
    ]
    assert kinds(ADAPTER.validate(contents)) == [("missing_result", 1)]
    res = assemble(contents, config(on_pairing_error="synthesize_error_results"))
    added = parts(res.messages[2])[1]
    assert added == {"function_response": {"name": "read_log", "response": {"error": SYNTH}}}
    assert ADAPTER.validate(res.messages) == []


class Part(pydantic.BaseModel):
    """A stand-in for ``google.genai.types.Part`` (snake_case fields, dumped by the SDK)."""

    model_config = pydantic.ConfigDict(extra="forbid")
    text: str | None = None
    thought_signature: str | None = None
    function_call: dict[str, Any] | None = None
    function_response: dict[str, Any] | None = None


class Content(pydantic.BaseModel):
    """A stand-in for ``google.genai.types.Content``."""

    role: str | None = None
    parts: list[Part]


def test_sdk_objects_are_read_and_merged_as_sdk_objects() -> None:
    def sdk_ring(name: str, k: int) -> list[Content]:
        return [
            Content(role="model", parts=[Part(function_call={"name": name, "args": {"k": k}})]),
            Content(
                role="user",
                parts=[Part(function_response={"name": name, "response": {"out": "x" * 400}})],
            ),
        ]

    contents: list[Any] = [Content(role="user", parts=[Part(text="goal")])]
    contents.append(Content(role="model", parts=[Part(text="thinking")]))
    contents.append(Content(role="user", parts=[Part(text="aside " * 300)]))
    for k in range(4):
        contents += sdk_ring("send_email" if k == 0 else "read_log", k)
    contents.append(Content(role="model", parts=[Part(function_call={"name": "send_email"})]))
    system = Content(parts=[Part(text="rules")])
    snapshot = [c.model_dump() for c in contents]
    cfg = config(
        count(contents, system=system) // 2,
        recent_user_turns=0,
        recent_tool_rings=1,
        on_pairing_error="synthesize_error_results",
    )
    res = assemble(contents, cfg, system=system)
    assert [c.model_dump() for c in contents] == snapshot
    assert all(isinstance(c, Content) for c in res.messages)
    assert ADAPTER.validate(res.messages, system=res.system) == []
    last = res.messages[-1]
    assert isinstance(last.parts[0], Part) and last.parts[0].function_response is not None
    # The dropped send_email is in a ledger note added to the SDK system instruction.
    assert isinstance(res.system, Content) and res.system.parts[0] is system.parts[0]
    assert res.system.parts[-1].text.startswith(MARKER)
    assert system.parts[-1].text == "rules"
    assert res.report["tokens_after"] <= cfg.budget
    assert count(res.messages, system=res.system) <= cfg.budget


# Counting -----------------------------------------------------------------------------------


def test_images_are_priced_by_geminis_formula() -> None:
    def with_image(width: int, height: int) -> list[dict[str, Any]]:
        data = gen.png_data_url(width, height).split(",", 1)[1]
        return [answer({"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": data}})]

    plain = count([user("look")])
    small = count(with_image(64, 48)) - plain
    large = count(with_image(2048, 1536)) - plain
    # 258 per image up to 384 px, else 258 per 768-px tile (3 by 2 here); the core currently
    # scales these native prices by the text ratio too (over-counting, never under).
    top = ADAPTER.default_token_ratio
    assert 258 <= small <= 258 * top + 2
    assert 6 * 258 <= large <= 6 * 258 * top + 2


def test_tools_are_counted() -> None:
    contents = [user()]
    tools = [
        {
            "functionDeclarations": [
                {
                    "name": "send_email",
                    "description": "Send an email.",
                    "parameters": {"type": "OBJECT", "properties": {"to": {"type": "STRING"}}},
                }
            ]
        },
        {"googleSearch": {}},
    ]
    mapped = ADAPTER.tools_to_openai(tools)
    assert [t["function"]["name"] for t in mapped] == ["send_email", "googleSearch"]
    assert count(contents, tools=tools) > count(contents, tools=tools[1:]) > count(contents)
    snake = [
        {"function_declarations": [{"name": "f", "parameters_json_schema": {"type": "object"}}]}
    ]
    assert ADAPTER.tools_to_openai(snake)[0]["function"]["parameters"] == {"type": "object"}


def test_every_field_the_model_reads_is_counted() -> None:
    base = count([user()])
    extra = [
        {"text": "x " * 50, "thought": True},
        {"executableCode": {"language": "PYTHON", "code": "print(1)" * 20}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1" * 100}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a.jpg"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "files/abc"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg" * 100}},
        {"thoughtSignature": "c2ln" * 50},
        {"somethingNew": {"payload": "y " * 50}},
    ]
    for part in extra:
        role = "model" if "executableCode" in part or "codeExecutionResult" in part else "user"
        contents = [user(), {"role": role, "parts": [part]}]
        assert count(contents) > base + 10, part


# Bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("contents", "index"),
    [
        ([user(), "not a content"], 1),
        ([user(), {"role": "assistant", "parts": [{"text": "x"}]}], 1),
        ([user(), {"role": "model", "parts": []}], 1),
        ([user(), {"role": "model"}], 1),
        ([user(), model({"text": "a", "functionCall": {"name": "f"}})], 1),
        ([user(), model({})], 1),
        ([user(), answer(call())], 1),
        ([user(), model(response())], 1),
        ([user(), model({"functionCall": {"name": "", "args": {}}})], 1),
        ([user(), model({"functionCall": {"name": "f", "args": [1, 2]}})], 1),
        ([user(), model(call()), answer({"functionResponse": {"name": "f", "response": "ok"}})], 2),
        ([user(), model({"text": 42})], 1),
        ([user(), answer({"inlineData": {"data": "abc"}})], 1),
        ([user(), answer({"fileData": {"mimeType": "image/png"}})], 1),
        ([user(), model({"functionCall": {"name": "f", "args": {"when": object()}}})], 1),
        ([user(), model(call(cid=7))], 1),  # type: ignore[arg-type]
        ([object()], 0),
    ],
)
def test_bad_contents_raise_typed_errors_naming_the_content(
    contents: list[Any], index: int
) -> None:
    for run in (
        lambda: ADAPTER.validate(contents),
        lambda: gemini_oracle.to_canonical(contents),
        lambda: count(contents),
        lambda: assemble(contents, config()),
    ):
        with pytest.raises(rb.InvalidMessageError) as info:
            run()
        assert info.value.index == index
        assert f"contents[{index}]" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        {"contents": [user()]},
        "contents",
        None,
    ],
)
def test_contents_must_be_a_list(bad: Any) -> None:
    with pytest.raises(rb.InvalidMessageError) as info:
        gemini_oracle.to_canonical(bad)
    assert info.value.index is None


def test_bad_system_and_tools_raise_typed_errors() -> None:
    for system in ({"parts": [{"inlineData": {"mimeType": "image/png", "data": ""}}]}, 42):
        with pytest.raises(rb.InvalidMessageError) as info:
            gemini_oracle.to_canonical([user()], system=system)
        assert info.value.index is None
    for tools in ({"functionDeclarations": []}, [{"functionDeclarations": "f"}], [print]):
        with pytest.raises(rb.InvalidMessageError):
            ADAPTER.tools_to_openai(tools)  # type: ignore[arg-type]
    with pytest.raises(rb.InvalidMessageError):
        ADAPTER.tools_to_openai([{"functionDeclarations": [{"description": "no name"}]}])


def test_a_part_given_as_the_system_instruction_is_refused() -> None:
    """A part alone (a dict or the SDK's ``Part``) is not a content: read as one it would
    have no parts, its text neither counted nor kept, so it is refused by name."""
    from google.genai import types

    for system in ({"text": "Be brief."}, types.Part(text="Be brief.")):
        with pytest.raises(rb.InvalidMessageError, match="got a part") as info:
            rb.count_tokens([user()], provider="gemini", system=system)
        assert info.value.index is None


def test_a_note_before_the_callers_later_parts_is_read_as_a_note() -> None:
    """The caller added a part after the note an earlier assembly left: the note is still
    the assembly's (counted as a note, replaced by the next), the caller's parts their own."""
    note = {"text": MARKER + "\n- send_email [ok] turn=1"}
    system = {"parts": [{"text": "rules"}, note, {"text": "Answer in French."}]}
    texts = ADAPTER.system_texts(system)
    assert texts == [["rules", "Answer in French."], [note["text"]]]


# from_canonical -----------------------------------------------------------------------------


def test_from_canonical_shapes() -> None:
    chat = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "on it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": 1}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "[1]"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
        {"role": "tool", "tool_call_id": "c1", "content": "fine"},
        {"role": "user", "content": "thanks"},
    ]
    contents, system = from_canonical("gemini", chat)
    assert system == {"parts": [{"text": "rules"}]}
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[1]["parts"] == [
        {"text": "on it"},
        {"functionCall": {"name": "f", "args": {"a": 1}, "id": "c1"}},
        {"functionCall": {"name": "g", "args": {"arguments": "[1]"}, "id": "c2"}},
    ]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "g", "id": "c2", "response": {"error": "Error: boom"}}},
        {"functionResponse": {"name": "f", "id": "c1", "response": {"output": "fine"}}},
        {"text": "thanks"},
    ]
    assert ADAPTER.validate(contents, system=system) == []


def _content_of(chat: list[dict[str, Any]]) -> tuple[Counter[str], Counter[Any], Counter[Any]]:
    """Texts, calls and results of canonical messages, ignoring how they are split."""
    texts: Counter[str] = Counter()
    calls: Counter[Any] = Counter()
    results: Counter[Any] = Counter()
    for m in chat:
        content = m.get("content")
        if m["role"] == "tool":
            text = chat_text(content)
            if text.startswith('{"output": '):
                text = json.loads(text)["output"]
            results[(m["tool_call_id"], text)] += 1
            continue
        if isinstance(content, str):
            texts[content] += 1
        elif isinstance(content, list):
            for p in content:
                key = p.get("text") if p["type"] == "text" else p[p["type"]].get("url")
                texts[key] += 1
        for c in m.get("tool_calls") or ():
            args = c["function"]["arguments"]
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                parsed = {"arguments": args}
            calls[(c["id"], c["function"]["name"], json.dumps(parsed, sort_keys=True))] += 1
    texts.pop("", None)
    texts.pop(GEMINI_OPENING_TEXT, None)
    return texts, calls, results


@properties
@given(gen.sessions())
def test_from_canonical_then_to_canonical_keeps_pairing_and_content(chat: list[Any]) -> None:
    contents, system = from_canonical("gemini", chat)
    assert ADAPTER.validate(contents, system=system) == []
    canonical = gemini_oracle.to_canonical(contents, system=system)
    assert _core.validate("openai_chat", orjson.dumps(canonical.messages)) == []
    assert _content_of(canonical.messages) == _content_of(chat)


# The invariants of DESIGN §4 on generated sessions ------------------------------------------


@dataclass(frozen=True)
class Case:
    contents: list[dict[str, Any]]
    system: Any
    tools: list[dict[str, Any]] | None
    policy: dict[str, Any]
    budget: int
    pinned: tuple[int, ...]

    def config(self, **overrides: Any) -> rb.AssemblyConfig:
        return rb.AssemblyConfig(**{**self.policy, "model_input_limit": self.budget, **overrides})


def gemini_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"functionDeclarations": [t["function"] for t in tools]}]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A generated session converted to Gemini, some results deleted (repaired), a budget
    between 25% and 120% of its own Gemini count (below that the protected part rarely fits)."""
    chat = draw(gen.cases(missing_results=True))
    contents, system = from_canonical("gemini", chat.messages)
    tools = gemini_tools(chat.tools) if chat.tools else None
    policy = {**chat.policy, "on_pairing_error": "synthesize_error_results"}
    full = count(contents, system=system, tools=tools, enc=policy["encoding"])
    budget = gen.budget_for(full, draw(st.floats(0.25, 1.2)))
    pinned = tuple(p for p in chat.pinned if p < len(contents))
    return Case(contents, system, tools, policy, budget, pinned)


def run(case: Case, **overrides: Any) -> Result | rb.BudgetExceededError:
    try:
        return assemble(
            case.contents,
            case.config(**overrides),
            system=case.system,
            tools=case.tools,
            pinned=case.pinned,
        )
    except rb.BudgetExceededError as e:
        return e


def origin(contents: list[Any]) -> dict[int, tuple[int, int]]:
    """Where each of the caller's parts stands: (content, position), by object identity."""
    return {id(p): (i, k) for i, c in enumerate(contents) for k, p in enumerate(parts(c))}


def kept_parts(case: Case, out: list[Any]) -> list[tuple[int, int]]:
    where = origin(case.contents)
    return [where[id(p)] for c in out for p in parts(c) if id(p) in where]


def rewrite_of_a_part(case: Case, rewritten: set[int], part: dict[str, Any]) -> bool:
    """Whether a new part is what a cheap stage made of a part of a rewritten content: a
    response of the same call, or the placeholder of an image."""
    if part.get("text") == _core.MEDIA_PLACEHOLDER:
        return True
    body = part.get("functionResponse")
    return body is not None and any(
        (p.get("functionResponse") or {}).get("name") == body["name"]
        and (p.get("functionResponse") or {}).get("id") == body.get("id")
        for i in rewritten
        for p in parts(case.contents[i])
    )


def check_shape(case: Case, res: Result) -> None:
    """The caller's parts in order, whole contents only (a rewritten one with its results and
    images rewritten), plus synthesized responses; the contents that went are exactly the
    reported dropped spans."""
    where = origin(case.contents)
    rewritten = res.report["rewritten"]
    seen = kept_parts(case, res.messages)
    assert seen == sorted(set(seen))
    for c in res.messages:
        for p in parts(c):
            if id(p) not in where and not rewrite_of_a_part(case, rewritten, p):
                assert p["functionResponse"]["response"] == {"error": SYNTH}
    present = Counter(i for i, _ in seen)
    for i, c in enumerate(case.contents):
        assert present[i] in (0, len(parts(c))) or i in rewritten, f"contents[{i}] was split"
    spans = res.report["dropped_rings"] + res.report["dropped_turns"]
    dropped = {i for start, end in spans for i in range(start, end)}
    assert dropped == set(range(len(case.contents))) - set(present) - rewritten


def check_protection(case: Case, cfg: rb.AssemblyConfig, res: Result) -> None:
    """The first user turn (Gemini needs one first), the last turn, pinned contents and the
    system instruction are all there."""
    present = {i for i, _ in kept_parts(case, res.messages)} | res.report["rewritten"]
    assert 0 in present and len(case.contents) - 1 in present
    assert set(case.pinned) <= present
    assert res.messages[0]["role"] == "user"
    if case.system is not None:
        assert res.system["parts"][: len(case.system["parts"])] == case.system["parts"]


def check_fits(case: Case, cfg: rb.AssemblyConfig, res: Result) -> None:
    assert res.report["tokens_after"] <= cfg.budget
    tools = None if res.report["tools_dropped"] else case.tools
    real = count(res.messages, system=res.system, tools=tools, enc=cfg.encoding)
    assert real == res.report["tokens_after"]


def check_ledger(case: Case, cfg: rb.AssemblyConfig, res: Result) -> None:
    """Every dropped side-effecting call is in the note, by its canonical id."""
    if "side_effect_ledger" not in cfg.pin:
        return
    canonical = gemini_oracle.to_canonical(case.contents, system=case.system)
    present = {i for i, _ in kept_parts(case, res.messages)} | res.report["rewritten"]
    note = next(
        (p["text"] for p in (res.system or {}).get("parts", []) if p["text"].startswith(MARKER)),
        "",
    )
    for k, m in enumerate(canonical.messages):
        start = canonical.spans[k][0]
        if start < 0 or start in present:
            continue
        for c in m.get("tool_calls") or ():
            if c["function"]["name"] in cfg.side_effect_tools:
                assert f"call_id={json.dumps(c['id'])}" in note


def same(a: Result, b: Result) -> bool:
    return len(a.messages) == len(b.messages) and a.messages == b.messages and a.system == b.system


@properties
@given(cases())
def test_invariants_after_every_stage(case: Case) -> None:
    """Pairing by Gemini's rules and by the core's, order and whole units, protection, budget
    (reported and recounted), determinism, idempotency, no mutation, ledger completeness;
    after each prefix of the stage order."""
    snapshot = copy.deepcopy((case.contents, case.system))
    for k in range(len(STAGES) + 1):
        stages = STAGES[:k]
        cfg = case.config(stages=stages)
        res = run(case, stages=stages)
        if isinstance(res, rb.BudgetExceededError):
            assert res.tokens > res.budget == cfg.budget
            continue
        assert ADAPTER.validate(res.messages, system=res.system) == []
        assert canonical_issues(res.messages, res.system) == []
        check_shape(case, res)
        check_protection(case, cfg, res)
        check_fits(case, cfg, res)
        check_ledger(case, cfg, res)
        again = run(case, stages=stages)
        assert isinstance(again, Result) and same(res, again)
        tools = None if res.report["tools_dropped"] else case.tools
        twice = assemble(res.messages, cfg, system=res.system, tools=tools)
        assert all(a is b for a, b in zip(twice.messages, res.messages, strict=True))
        assert twice.system is res.system
    assert (case.contents, case.system) == snapshot


@properties
@given(cases(), st.integers(1, 2_000))
def test_a_larger_budget_never_keeps_less(case: Case, more: int) -> None:
    small, large = run(case), run(case, model_input_limit=case.budget + more)
    if isinstance(small, rb.BudgetExceededError):
        return
    assert isinstance(large, Result)
    assert set(kept_parts(case, small.messages)) <= set(kept_parts(case, large.messages))


# The validator against the core's, on edited sessions ---------------------------------------


@st.composite
def edited(draw: st.DrawFn) -> tuple[list[Any], Any]:
    """A converted session with a few edits at the content and part level: contents deleted,
    swapped or copied, parts deleted, duplicated or moved, ids and names changed."""
    contents, system = from_canonical("gemini", draw(gen.sessions(images=False, max_units=8)))
    contents = [{**c, "parts": list(c["parts"])} for c in contents]
    for _ in range(draw(st.integers(1, 4))):
        n = len(contents)
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        edit = draw(st.sampled_from(("delete", "swap", "copy", "part", "dup", "move", "rename")))
        pi = draw(st.integers(0, len(contents[i]["parts"]) - 1))
        if edit == "delete" and n > 1:
            del contents[i]
        elif edit == "swap":
            contents[i], contents[j] = contents[j], contents[i]
        elif edit == "copy":
            contents.insert(j, {**contents[i], "parts": list(contents[i]["parts"])})
        elif edit == "part" and len(contents[i]["parts"]) > 1:
            del contents[i]["parts"][pi]
        elif edit == "dup":
            contents[i]["parts"].insert(pi, contents[i]["parts"][pi])
        elif edit == "move" and i != j and len(contents[i]["parts"]) > 1:
            contents[j]["parts"].append(contents[i]["parts"].pop(pi))
        elif edit == "rename":
            part = contents[i]["parts"][pi]
            key = next(iter(part))
            if key in ("functionCall", "functionResponse"):
                body = dict(part[key])
                field = draw(st.sampled_from(("id", "name")))
                body[field] = draw(st.sampled_from(("call_0", "call_1", "send_email", "f")))
                contents[i]["parts"][pi] = {key: body}
    return contents, system


@properties
@given(edited())
def test_what_the_adapter_accepts_pairs_in_the_canonical_view(session: tuple[Any, Any]) -> None:
    """Whenever Gemini's rules (as the adapter reads them) accept the contents, the canonical
    view pairs for the core; when they only miss results, the repair makes them acceptable."""
    contents, system = session
    try:
        issues = ADAPTER.validate(contents, system=system)
    except rb.InvalidMessageError:
        return
    assert issues == ADAPTER.validate(contents, system=system)
    assert [i.index for i in issues] == sorted(i.index for i in issues)
    assert all(0 <= i.index < len(contents) for i in issues)
    if not issues:
        assert canonical_issues(contents, system) == []
        return
    if all(i.kind == "missing_result" for i in issues):
        res = assemble(
            contents, config(10**7, on_pairing_error="synthesize_error_results"), system=system
        )
        assert ADAPTER.validate(res.messages, system=res.system) == []
        assert canonical_issues(res.messages, res.system) == []


# --- the core's validator against the Python oracle ------------------------------------------


def _both(contents: list[Any], system: Any = None) -> tuple[Any, Any]:
    """What the core's validator and the Python oracle make of a request: the issues, or the
    type and index of the error."""

    def run(validate: Any) -> Any:
        try:
            found = validate(contents, system=system)
        except rb.InvalidMessageError as e:
            return ("InvalidMessageError", e.index)
        return [(i.kind, i.call_id, i.index, i.message) for i in found]

    return run(ADAPTER.validate), run(gemini_oracle.validate)


@properties
@given(edited())
def test_the_core_validator_agrees_with_the_python_oracle(session: tuple[Any, Any]) -> None:
    contents, system = session
    core, oracle = _both(contents, system)
    assert core == oracle


def test_the_oracle_is_not_blind() -> None:
    """The comparison means something: both find every kind of issue in one broken session."""
    contents = [
        say("hello"),
        model(call("a", cid="c1"), call("b", cid="c2")),
        answer(response("a", cid="c1"), response("a", cid="c1"), response("z", cid="c9")),
        user("wait"),
        answer(response("b", cid="c2")),
        answer(response("q", cid="later")),
        model(call("q", cid="later")),
    ]
    core, oracle = _both(contents)
    assert core == oracle
    assert {kind for kind, *_ in core} == {
        "first_turn_not_user",
        "call_turn_misplaced",
        "duplicate_id",
        "orphan_result",
        "result_not_adjacent",
        "result_before_call",
        "missing_result",
    }


# --- thought signatures ----------------------------------------------------------------------


def parallel_ring(k: int, signature: str | None = "c2lnbmF0dXJl" * 8) -> list[dict[str, Any]]:
    """A call step of three parallel calls, only the first signed (as Gemini 3 sends them),
    and its response turn."""
    return [
        model(
            call("read_log", {"k": k}, cid=f"r{k}", signature=signature),
            call("list_dir", {"k": k}, cid=f"l{k}"),
            call("stat", {"k": k}, cid=f"s{k}"),
        ),
        answer(
            response("read_log", cid=f"r{k}"),
            response("list_dir", cid=f"l{k}"),
            response("stat", cid=f"s{k}"),
        ),
    ]


@properties
@given(st.integers(4, 9), st.floats(0.45, 1.0))
def test_parallel_calls_with_one_signature_are_kept_or_dropped_together(
    rings: int, share: float
) -> None:
    contents = [user()] + [c for k in range(rings) for c in parallel_ring(k)] + [say("done")]
    res = assemble(contents, config(budget_dropping(contents, share), recent_tool_rings=1))
    for c in contents:
        calls = [p for p in c["parts"] if "functionCall" in p]
        if len(calls) < 2:
            continue
        # The step is in the request whole, as the caller's object, signature first, or not
        # at all: no part of it travels without the others.
        parts = [p for m in res.messages for p in m["parts"]]
        present = [any(p is q for q in parts) for p in calls]
        assert all(present) or not any(present)
        if all(present):
            assert any(m is c for m in res.messages)
            assert "thoughtSignature" in c["parts"][0]
    assert ADAPTER.validate(res.messages, system=res.system) == []


def test_a_call_step_that_lost_its_signature_is_reported_in_geminis_words() -> None:
    contents = [user(), *parallel_ring(0), *parallel_ring(1)]
    moved = copy.deepcopy(contents)
    step = moved[3]["parts"]
    step.append(step.pop(0))  # the signed part is no longer the first functionCall part
    issues = ADAPTER.validate(moved)
    assert [(i.kind, i.index, i.call_id) for i in issues] == [("missing_signature", 3, "l1")]
    assert issues[0].message.startswith(
        "Function call `list_dir` in the `3.` content block is missing a `thought_signature`."
    )
    assert "parts[2] carries this step's signature" in issues[0].message
    stripped = copy.deepcopy(contents)
    del stripped[3]["parts"][0]["thoughtSignature"]
    issues = ADAPTER.validate(stripped)
    assert [(i.kind, i.index) for i in issues] == [("missing_signature", 3)]
    with pytest.raises(rb.PairingError) as err:
        assemble(stripped, config())
    assert err.value.issues[0].kind == "missing_signature"
    # Earlier turns are not checked (Gemini validates the current turn), nor unsigned sessions.
    assert ADAPTER.validate([*stripped, say("ok"), user("again")]) == []
    unsigned = [user(), *parallel_ring(0, signature=None), *parallel_ring(1, signature=None)]
    assert ADAPTER.validate(unsigned) == []


def test_vertex_function_role_and_bytes_are_read() -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    )
    contents = [
        {
            "role": "user",
            "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": png}}],
        },
        model(call("read_log", {1: "keys the adapter writes as strings"}, cid="c1")),
        {"role": "function", "parts": [response(cid="c1")]},
    ]
    assert ADAPTER.validate(contents) == []
    assert ADAPTER.validate(contents[:2])[0].kind == "missing_result"
    res = assemble(contents, config())
    assert res.messages == contents
