"""The Anthropic Messages adapter: round trips, drops, the ledger note in ``system``, pairing
errors in Anthropic's wording, the repair policy, thinking blocks and cache breakpoints, typed
errors on bad input, conversion from OpenAI Chat, the DESIGN §4 invariants on generated sessions
and the real Claude Code logs of the corpus."""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import anthropic_oracle
import pytest
import strategies as gen
from anthropic_oracle import OMITTED_TURNS_TEXT
from canonical_writers import from_canonical
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound import _core
from ringbound.adapted import read_canonical
from ringbound.providers.anthropic import ADAPTER

pytestmark = pytest.mark.filterwarnings(
    "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
)
properties = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SYNTH = _core.SYNTHESIZED_RESULT_TEXT
MARKER = _core.LEDGER_MARKER
#: Text tokens of one PDF page at most ("1,500-3,000 tokens per page", Anthropic PDF support),
#: as the core prices a page on top of its image (rust/src/providers/anthropic/parse.rs).
PDF_PAGE_TOKENS = 3000
#: The tool-use system prompt the core adds to an Anthropic request with tools
#: (`TOOL_SYSTEM_TOKENS` in rust/src/providers/anthropic/mod.rs).
TOOL_USE_SYSTEM_PROMPT_TOKENS = 530


# --- helpers ----------------------------------------------------------------------------------


#: The stages these tests were written for: whole units dropped, the caller's objects kept.
#: The rewriting stages are tested in test_rewrites.py.
DROP_STAGES = ("drop_rings", "drop_plain_turns", "drop_error_rings")


def config(budget: int = 100_000, **kw: Any) -> rb.AssemblyConfig:
    kw.setdefault("stages", DROP_STAGES)
    kw.setdefault("output_reserve_tokens", 0)
    kw.setdefault("safety_margin_tokens", 0)
    return rb.AssemblyConfig(model_input_limit=budget, **kw)


@dataclass(frozen=True)
class Result:
    messages: list[Any]
    system: Any
    tools_dropped: bool
    tokens_after: int
    budget: int
    dropped: set[int]
    repairs: list[str]
    merged: int
    #: Native indices of the messages a cheap stage rewrote.
    rewritten: set[int] = field(default_factory=set)


def assemble(
    messages: list[Any],
    cfg: rb.AssemblyConfig,
    *,
    system: Any = None,
    tools: list[Any] | None = None,
    pinned: tuple[int, ...] = (),
) -> Result:
    """One assembly through ``Assembler(provider="anthropic")``, with the dropped native
    indices spelt out."""
    res = rb.Assembler(cfg, provider="anthropic").assemble(
        messages, tools, system=system, pinned=pinned
    )
    r = res.report
    dropped = {i for s, e in [*r.dropped_rings, *r.dropped_turns] for i in range(s, e)}
    return Result(
        messages=res.messages,
        system=res.system,
        tools_dropped=r.tools_dropped,
        tokens_after=r.tokens_after,
        budget=r.budget,
        dropped=dropped,
        repairs=list(r.repairs),
        merged=r.merged,
        rewritten={w.index for w in r.rewrites},
    )


def count(messages: list[Any], *, system: Any = None, tools: Any = None, **kw: Any) -> int:
    return rb.count_tokens(messages, provider="anthropic", system=system, tools=tools, **kw)


def use(cid: str, name: str = "read_file", **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": name, "input": args or {"path": "a.txt"}}


def result(cid: str, content: Any = "file contents", **kw: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": content, **kw}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def ring(cid: str, name: str = "read_file", body: str = "data ", n: int = 60) -> list[dict]:
    return [
        {"role": "assistant", "content": [text("Let me look."), use(cid, name)]},
        {"role": "user", "content": [result(cid, body * n)]},
    ]


def session(rings: int, first: str = "send_email") -> list[dict[str, Any]]:
    """A goal, ``rings`` tool rings (the first calls ``first``), a closing reply and a user turn."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Email Ana, then read the logs."}]
    for k in range(rings):
        msgs += ring(f"toolu_{k:02d}", first if k == 0 else "read_file")
    msgs += [
        {"role": "assistant", "content": "All done."},
        {"role": "user", "content": "Thanks, and now?"},
    ]
    return msgs


def roles_alternate(messages: list[Any]) -> bool:
    return all(a["role"] != b["role"] for a, b in pairwise(messages))


def blocks(message: dict[str, Any]) -> list[Any]:
    c = message["content"]
    return [text(c)] if isinstance(c, str) else list(c)


def png(width: int, height: int) -> str:
    return gen.png_data_url(width, height).split(",", 1)[1]


def image(width: int, height: int) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png(width, height)},
    }


def note_of(system: Any) -> str | None:
    if isinstance(system, str):
        at = system.find(MARKER)
        return system[at:] if at >= 0 else None
    for b in system or ():
        if b["text"].startswith(MARKER):
            return b["text"]
    return None


# --- round trips ---------------------------------------------------------------------------

SINGLE = [
    {"role": "user", "content": "What is in a.txt?"},
    {"role": "assistant", "content": [use("toolu_a")]},
    {"role": "user", "content": [result("toolu_a")]},
    {"role": "assistant", "content": "It holds the file contents."},
]
PARALLEL = [
    {"role": "user", "content": "Compare a.txt and b.txt."},
    {"role": "assistant", "content": [text("Both at once."), use("toolu_a"), use("toolu_b")]},
    {"role": "user", "content": [result("toolu_b", "B"), result("toolu_a", "A")]},
    {"role": "assistant", "content": "They differ."},
]
FOLLOW_UP = [
    {"role": "user", "content": "Read a.txt."},
    {"role": "assistant", "content": [use("toolu_a")]},
    {"role": "user", "content": [result("toolu_a"), text("Also, keep it short.")]},
    {"role": "assistant", "content": "Short: file contents."},
    {"role": "user", "content": "Thanks."},
]


@pytest.mark.parametrize(
    ("messages", "calls"),
    [(SINGLE, [["toolu_a"]]), (PARALLEL, [["toolu_a", "toolu_b"]]), (FOLLOW_UP, [["toolu_a"]])],
    ids=["single_tool", "parallel_tools", "tool_then_user_follow_up"],
)
@pytest.mark.parametrize("system", [None, "Be brief.", [text("Be brief."), text("Cite files.")]])
def test_round_trip_returns_the_callers_objects(messages, calls, system) -> None:
    assert rb.validate(messages, provider="anthropic", system=system) == []
    canonical = read_canonical(ADAPTER, messages, system)
    made = [[c["id"] for c in m["tool_calls"]] for m in canonical.messages if m.get("tool_calls")]
    assert made == calls
    answered = [m["tool_call_id"] for m in canonical.messages if m["role"] == "tool"]
    assert sorted(answered) == sorted(c for cs in calls for c in cs)
    res = assemble(messages, config(), system=system)
    assert len(res.messages) == len(messages)
    assert all(a is b for a, b in zip(res.messages, messages, strict=True))
    assert res.system is system
    assert res.merged == 0 and res.dropped == set()
    assert res.tokens_after == count(messages, system=system) <= res.budget


def test_follow_up_text_is_counted_and_grouped_with_its_results() -> None:
    canonical = read_canonical(ADAPTER, FOLLOW_UP, None)
    roles = [m["role"] for m in canonical.messages]
    assert roles == ["user", "assistant", "tool", "user", "assistant", "user"]
    # The tool message and the user text of native message 2 are one native item.
    assert canonical.spans[2] == canonical.spans[3] == (2, 3)
    assert canonical.messages[3]["content"] == "Also, keep it short."


def test_consecutive_same_role_messages_are_one_turn() -> None:
    # Claude Code logs one event per content block; the API combines consecutive same-role
    # messages, so results may open a turn spread over several messages.
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [text("Reading both.")]},
        {"role": "assistant", "content": [use("toolu_a"), use("toolu_b")]},
        {"role": "user", "content": [result("toolu_a")]},
        {"role": "user", "content": [result("toolu_b")]},
        {"role": "user", "content": "next"},
    ]
    assert ADAPTER.validate(msgs) == []
    canonical = read_canonical(ADAPTER, msgs, None)
    assert [m["role"] for m in canonical.messages] == ["user", "assistant", "tool", "tool", "user"]
    assert canonical.spans[1] == (1, 3) and canonical.spans[2] == (3, 6)
    res = assemble(msgs, config())
    assert all(a is b for a, b in zip(res.messages, msgs, strict=True))


# --- drops, merges, ledger --------------------------------------------------------------------


def test_dropped_middle_ring_keeps_pairing_objects_and_budget() -> None:
    msgs = session(8)
    system = "You are careful."
    full = count(msgs, system=system)
    res = assemble(msgs, config(full - 400, side_effect_tools=["send_email"]), system=system)
    assert res.dropped, "the budget must force a drop"
    assert res.tokens_after <= res.budget == full - 400
    assert ADAPTER.validate(res.messages, system=res.system) == []
    assert roles_alternate(res.messages)
    kept = [next(i for i, m in enumerate(msgs) if m is o) for o in res.messages]
    assert kept == sorted(kept) and set(kept) | res.dropped == set(range(len(msgs)))
    # Whole rings went: a call and its result are dropped together or kept together.
    for i, m in enumerate(msgs):
        if any(b["type"] == "tool_use" for b in blocks(m)):
            assert (i in res.dropped) == (i + 1 in res.dropped)
    assert kept[0] == 0 and kept[-1] == len(msgs) - 1
    assert res.merged == 0


@pytest.mark.parametrize(
    "system", [None, "You are careful.", [text("You are careful."), text("Use tools.")]]
)
def test_ledger_note_goes_into_the_system(system) -> None:
    msgs = session(8)
    full = count(msgs, system=system)
    cfg = config(full - 150, side_effect_tools=["send_email"])
    res = assemble(msgs, cfg, system=system)
    assert 1 in res.dropped and 2 in res.dropped, "the send_email ring was dropped"
    note = note_of(res.system)
    assert note is not None and "send_email" in note and "toolu_00" in note
    assert all(MARKER not in json.dumps(m) for m in res.messages)
    if isinstance(system, list):
        assert res.system[:-1] == system and res.system[-1] == text(note)
        assert all(a is b for a, b in zip(res.system, system, strict=False))
    elif isinstance(system, str):
        assert res.system == f"{system}\n\n{note}"
    else:
        assert res.system == note
    assert res.tokens_after <= res.budget
    # A later assembly reads the note back: same entries, the caller's system object again.
    again = assemble(res.messages, cfg, system=res.system)
    assert again.system is res.system
    assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))
    # ... and adds to it when it drops another side-effecting ring.
    more = [res.messages[0], *ring("toolu_99", "send_email"), *res.messages[1:]]
    cfg2 = config(count(more, system=res.system) - 10, side_effect_tools=["send_email"])
    later = assemble(more, cfg2, system=res.system)
    assert later.dropped == {1, 2}
    later_note = note_of(later.system)
    assert later_note.count(MARKER) == 1
    assert "toolu_00" in later_note and "toolu_99" in later_note


def test_dropping_a_plain_turn_merges_neighbours_into_a_new_message() -> None:
    msgs = [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": "first reply " * 50},
        {"role": "user", "content": "an aside " * 50},
        {"role": "assistant", "content": [text("a tool"), use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a")]},
    ]
    before = copy.deepcopy(msgs)
    cfg = config(
        count(msgs) - 60, recent_user_turns=0, recent_tool_rings=1, stages=["drop_plain_turns"]
    )
    res = assemble(msgs, cfg)
    assert res.dropped == {1}, "the oldest plain turn goes first"
    # user goal + user aside are neighbours now: one new message, the caller's blocks inside.
    assert len(res.messages) == 3 and res.merged == 1
    assert res.messages[0] not in msgs and blocks(res.messages[0]) == [
        text("goal"),
        text("an aside " * 50),
    ]
    assert res.messages[1] is msgs[3] and res.messages[2] is msgs[4]
    assert roles_alternate(res.messages) and ADAPTER.validate(res.messages) == []
    assert msgs == before, "the caller's messages are not modified"


def test_merged_assistant_keeps_the_callers_block_objects() -> None:
    shared = text("reply one")
    msgs = [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": [shared]},
        {"role": "user", "content": "aside " * 80},
        {"role": "assistant", "content": "reply two"},
        {"role": "user", "content": "last"},
    ]
    cfg = config(count(msgs) - 50, recent_user_turns=1, stages=["drop_plain_turns"])
    res = assemble(msgs, cfg, pinned=(1, 3))
    assert res.dropped == {2}
    merged = [m for m in res.messages if m["role"] == "assistant"]
    assert len(merged) == 1 and merged[0]["content"][0] is shared
    assert roles_alternate(res.messages)


# --- pairing errors -------------------------------------------------------------------------


def kinds(issues: list[rb.PairingIssue]) -> list[tuple[str, int, str | None]]:
    return [(i.kind, i.index, i.call_id) for i in issues]


def test_unanswered_call_quotes_anthropic() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("toolu_a"), use("toolu_b")]},
        {"role": "user", "content": [result("toolu_b"), text("a is still running")]},
        {"role": "assistant", "content": "ok"},
    ]
    issues = rb.validate(msgs, provider="anthropic")
    assert kinds(issues) == [("missing_result", 1, "toolu_a")]
    assert issues[0].message.startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_a. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )
    with pytest.raises(rb.PairingError) as e:
        assemble(msgs, config())
    assert kinds(e.value.issues) == [("missing_result", 1, "toolu_a")]


def test_orphan_result_quotes_anthropic() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "I will not call anything."},
        {"role": "user", "content": [result("toolu_ghost"), text("hm")]},
    ]
    issues = rb.validate(msgs, provider="anthropic")
    assert kinds(issues) == [("orphan_result", 2, "toolu_ghost")]
    assert issues[0].message.startswith(
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
        "toolu_ghost. Each `tool_result` block must have a corresponding `tool_use` block in the "
        "previous message."
    )
    with pytest.raises(rb.PairingError) as e:
        assemble(msgs, config(on_pairing_error="synthesize_error_results"))
    assert kinds(e.value.issues) == [("orphan_result", 2, "toolu_ghost")]


def test_duplicate_ids_quote_anthropic() -> None:
    # Anthropic wants tool_use ids unique across the conversation, not only within a turn.
    msgs = [*SINGLE, *ring("toolu_a"), {"role": "assistant", "content": "done"}]
    issues = rb.validate(msgs, provider="anthropic")
    assert kinds(issues) == [("duplicate_id", 4, "toolu_a")]
    assert issues[0].message.startswith("messages.4.content.1: `tool_use` ids must be unique")
    twice = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a"), result("toolu_a")]},
    ]
    issues = rb.validate(twice, provider="anthropic")
    assert kinds(issues) == [("duplicate_id", 2, "toolu_a")]
    assert issues[0].message.startswith(
        "messages.2.content.1: each tool_use must have a single result. Found multiple "
        "tool_result blocks with id: toolu_a"
    )
    with pytest.raises(rb.PairingError):
        assemble(msgs, config())


def test_misplaced_results_quote_anthropic() -> None:
    text_first = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("toolu_a")]},
        {"role": "user", "content": [text("here:"), result("toolu_a")]},
    ]
    issues = rb.validate(text_first, provider="anthropic")
    assert kinds(issues) == [("result_not_adjacent", 2, "toolu_a")]
    assert issues[0].message.startswith(
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. "
        "Messages following `tool_use` blocks must begin with a matching number of "
        "`tool_result` blocks."
    )
    late_and_early = [
        {"role": "user", "content": [result("toolu_b")]},
        {"role": "assistant", "content": [use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a")]},
        {"role": "assistant", "content": [use("toolu_b")]},
        {"role": "user", "content": "skipped the result"},
        {"role": "assistant", "content": "..."},
        {"role": "user", "content": [result("toolu_a")]},
    ]
    assert kinds(rb.validate(late_and_early, provider="anthropic")) == [
        ("result_before_call", 0, "toolu_b"),
        ("missing_result", 3, "toolu_b"),
        ("result_not_adjacent", 6, "toolu_a"),
    ]
    # Repair fixes only missing results: misplaced ones still fail closed.
    with pytest.raises(rb.PairingError):
        assemble(text_first, config(on_pairing_error="synthesize_error_results"))


# --- provider-side compaction -----------------------------------------------------------------


def _compacted() -> list[dict[str, Any]]:
    """A session whose latest compaction block follows a broken ring and a long stretch."""
    return [
        {"role": "user", "content": "go " * 400},
        {"role": "assistant", "content": [use("toolu_lost")]},
        {"role": "user", "content": "its result never came " * 50},
        {"role": "assistant", "content": [{"type": "compaction", "content": "old summary"}]},
        {"role": "user", "content": "more " * 300},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "Summary: the user asked for logs."},
                text("Reading them now."),
            ],
        },
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": [use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a")]},
    ]


def test_nothing_before_the_latest_compaction_is_paired_counted_or_kept() -> None:
    msgs = _compacted()
    assert rb.validate(msgs, provider="anthropic") == []
    assert count(msgs) == count(msgs[5:])
    res = assemble(msgs, config())
    assert res.messages[0] is msgs[5], "the compaction block goes back verbatim"
    assert all(a is b for a, b in zip(res.messages, msgs[5:], strict=True))
    assert res.tokens_after == count(msgs[5:])
    # Without the compaction block, the broken ring counts again.
    whole = copy.deepcopy(msgs)
    whole[5]["content"] = whole[5]["content"][1:]
    whole[3]["content"] = "no summary"
    assert kinds(rb.validate(whole, provider="anthropic")) == [("missing_result", 1, "toolu_lost")]


def test_blocks_before_a_compaction_block_in_its_message_are_not_counted() -> None:
    msgs = _compacted()
    ahead = copy.deepcopy(msgs)
    ahead[5]["content"].insert(0, text("the API drops this " * 200))
    ahead[5]["content"].insert(0, use("toolu_gone"))
    assert rb.validate(ahead, provider="anthropic") == []
    assert count(ahead) == count(msgs)


def _long_compacted(turns: int = 120) -> list[dict[str, Any]]:
    """The issue's session: ``turns`` tool rings, then a compaction block opening an assistant
    message that also carries text and a ``tool_use``, then more rings after it."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Audit every log."}]
    for k in range(turns // 2):
        msgs += ring(f"toolu_{k:03d}")
    msgs.append(
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "Summary: logs 0-59 read, nothing wrong."},
                text("Carrying on."),
                use("toolu_c"),
            ],
        }
    )
    msgs.append({"role": "user", "content": [result("toolu_c", "data " * 60)]})
    for k in range(turns // 2, turns // 2 + 6):
        msgs += ring(f"toolu_{k:03d}")
    return msgs


@pytest.mark.parametrize("fraction", [1.0, 0.9, 0.5, 0.3])
def test_the_latest_compaction_block_survives_any_budget(fraction: float) -> None:
    """Trimming used to drop the block's ring like any other, and with it the only record of
    everything before it, silently."""
    msgs = _long_compacted()
    at = next(i for i, m in enumerate(msgs) if blocks(m)[0].get("type") == "compaction")
    full = count(msgs)
    asm = rb.Assembler(config(int(full * fraction), recent_tool_rings=2), provider="anthropic")
    if fraction < 0.4:
        # Below the block's ring and the recent rings, the answer is a refusal, not a loss.
        with pytest.raises(rb.BudgetExceededError):
            asm.assemble(msgs)
        return
    out = asm.assemble(msgs)
    assert out.messages[0] is msgs[at], "the request opens with the block's message, verbatim"
    assert out.messages[1] is msgs[at + 1], "its tool_use keeps its result: the ring is whole"
    assert sum(1 for m in out.messages if m is msgs[at]) == 1
    assert rb.validate(out.messages, provider="anthropic") == []
    assert out.report.tokens_after <= out.report.budget
    assert not any(s <= at < e for s, e in [*out.report.dropped_rings, *out.report.dropped_turns])
    if fraction < 1.0:
        assert out.report.dropped_rings, "the rings after the block are what goes"


@st.composite
def compacted_cases(draw: st.DrawFn) -> tuple[Case, int]:
    """A generated case with a compaction block opening one or two of its assistant messages:
    the latest one's message index."""
    case = draw(cases())
    msgs = copy.deepcopy(case.messages)
    assistants = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if not assistants:
        msgs.append({"role": "assistant", "content": [text("ok")]})
        assistants = [len(msgs) - 1]
    chosen = sorted(draw(st.lists(st.sampled_from(assistants), min_size=1, max_size=2)))
    for n, i in enumerate(chosen):
        block = {"type": "compaction", "content": f"summary {n}: " + "what happened " * 20}
        msgs[i] = {**msgs[i], "content": [block, *blocks(msgs[i])]}
    pinned = tuple(p for p in case.pinned if p < len(msgs))
    return replace(case, messages=msgs, pinned=pinned), chosen[-1]


@properties
@given(compacted_cases())
def test_the_latest_compaction_block_is_kept_once_verbatim(drawn: tuple[Case, int]) -> None:
    case, at = drawn
    res = _run(case)
    if isinstance(res, rb.BudgetExceededError):
        assert res.tokens > res.budget
        return
    compacted = case.messages[at]
    # Verbatim, but for whitespace-only text blocks, which Anthropic refuses wherever they
    # are: a message holding one goes out as a copy without it (a reported rewrite).
    stripped = {**compacted, "content": [b for b in blocks(compacted) if not _blank_text(b)]}
    verbatim = [m for m in res.messages if m is compacted or m == stripped]
    assert len(verbatim) == 1, "kept once, verbatim"
    assert verbatim[0] is compacted or any(_blank_text(b) for b in blocks(compacted))
    assert res.messages[0] is verbatim[0], "nothing the API ignores is sent"
    assert rb.validate(res.messages, provider="anthropic", system=res.system) == []
    assert res.tokens_after <= res.budget
    # Counted as sent: what precedes the block is not counted either.
    tools = None if res.tools_dropped else case.tools
    policy = case.policy
    sent = count(
        res.messages,
        system=res.system,
        tools=tools,
        encoding=policy["encoding"],
        token_ratio=policy["token_ratio"],
    )
    assert res.tokens_after >= sent


def test_a_compaction_message_with_blank_text_goes_first_without_it() -> None:
    """Found by the property above: the message holding the latest compaction block also held
    a whitespace-only text block, which Anthropic refuses anywhere; it goes out first, once,
    as a copy without that block (its other blocks the caller's objects)."""
    compaction = {"type": "compaction", "content": "summary: " + "what happened " * 20}
    call = {"type": "tool_use", "id": "c1", "name": "read", "input": {}}
    messages = [
        {"role": "user", "content": "the goal " * 50},
        {"role": "assistant", "content": [compaction, {"type": "text", "text": "\t"}, call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}]},
        {"role": "assistant", "content": "done"},
    ]
    res = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=10**5, output_reserve_tokens=0),
        provider="anthropic",
    ).assemble(messages)
    first = res.messages[0]
    assert first["content"] == [compaction, call] and first["content"][0] is compaction
    assert res.messages[1:] == messages[2:]
    assert [(r.index, r.kind) for r in res.report.rewrites] == [(1, "blank_text")]


# --- whitespace-only text --------------------------------------------------------------------


def test_whitespace_only_text_blocks_are_stripped_as_a_reported_rewrite() -> None:
    """Opus 4.6 emits ``"\n\n"`` text blocks that the API then refuses ("text content blocks
    must contain non-whitespace text"): stripped everywhere, the last assistant turn included,
    each strip reported; the other blocks are the caller's own objects."""
    thinking = {"type": "thinking", "thinking": "Check the file.", "signature": "sig"}
    last_thinking = {"type": "thinking", "thinking": "Done.", "signature": "sig2"}
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [thinking, text("\n\n"), use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a"), text(" \t")]},
        {"role": "assistant", "content": [last_thinking, text("\n\n"), text("All read.")]},
        {"role": "user", "content": "   "},
    ]
    before = copy.deepcopy(msgs)
    cleaned = copy.deepcopy(msgs)
    for k in (1, 2, 3):
        del cleaned[k]["content"][1]
    assert count(msgs) == count(cleaned), "never counted"
    res = rb.Assembler(config(), provider="anthropic").assemble(msgs)
    assert msgs == before, "the caller's messages are not changed"
    assert [(r.index, r.kind) for r in res.report.rewrites] == [
        (1, "blank_text"),
        (2, "blank_text"),
        (3, "blank_text"),
    ]
    out = res.messages
    assert out[1]["content"][0] is thinking and out[1]["content"][1] is msgs[1]["content"][2]
    assert out[3]["content"] == [last_thinking, text("All read.")]
    assert out[3]["content"][0] is last_thinking
    assert out[2]["content"] == [result("toolu_a")]
    # A message of blank text alone has nothing to keep: it goes as it came.
    assert out[4] is msgs[4]
    assert out[0] is msgs[0]
    assert res.report.tokens_after <= res.report.budget


# --- repair -----------------------------------------------------------------------------------


def test_trailing_unanswered_call_gets_a_synthesized_result() -> None:
    msgs = [*SINGLE[:3], {"role": "assistant", "content": [use("toolu_late", "send_email")]}]
    with pytest.raises(rb.PairingError):
        assemble(msgs, config())
    res = assemble(msgs, config(on_pairing_error="synthesize_error_results"))
    assert res.repairs == ["toolu_late"]
    assert all(a is b for a, b in zip(res.messages, msgs, strict=False))
    assert res.messages[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_late", "is_error": True, "content": SYNTH}
        ],
    }
    assert ADAPTER.validate(res.messages) == [] and roles_alternate(res.messages)
    assert res.merged == 0


def test_synthesized_result_opens_the_next_user_message_as_a_new_object() -> None:
    follow = {"role": "user", "content": [result("toolu_b"), text("and a?")]}
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("toolu_a"), use("toolu_b")]},
        follow,
        {"role": "assistant", "content": "ok"},
    ]
    res = assemble(msgs, config(on_pairing_error="synthesize_error_results"))
    assert res.repairs == ["toolu_a"] and res.merged == 1
    assert res.messages[2] is not follow and follow["content"][0]["tool_use_id"] == "toolu_b"
    assert res.messages[2]["content"] == [
        follow["content"][0],
        {"type": "tool_result", "tool_use_id": "toolu_a", "is_error": True, "content": SYNTH},
        follow["content"][1],
    ]
    assert ADAPTER.validate(res.messages) == []
    # Assembling the repaired request again changes nothing.
    again = assemble(res.messages, config())
    assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))


def test_synthesized_results_are_counted_with_the_ratio() -> None:
    msgs = [*SINGLE[:3], {"role": "assistant", "content": [use("toolu_late")]}]
    res = assemble(msgs, config(on_pairing_error="synthesize_error_results"))
    assert res.repairs == ["toolu_late"] and not res.dropped
    assert count(res.messages) == res.tokens_after


# --- provider specifics: thinking, cache_control, images, documents, tools -------------------

THINKING = {
    "type": "thinking",
    "thinking": "The user wants a.txt; read it. " * 20,
    "signature": "c2ln",
}
REDACTED = {"type": "redacted_thinking", "data": "RW5jcnlwdGVk" * 40}


def thinking_session(rings: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for k in range(rings):
        cid = f"toolu_{k:02d}"
        msgs += [
            {"role": "assistant", "content": [dict(THINKING), use(cid)]},
            {"role": "user", "content": [result(cid, "line " * 80)]},
        ]
    msgs += [
        {"role": "assistant", "content": [dict(REDACTED), THINKING, use("toolu_last")]},
        {"role": "user", "content": [result("toolu_last", "the end")]},
    ]
    return msgs


def test_thinking_travels_with_its_call_and_the_last_turn_is_untouched() -> None:
    msgs = thinking_session(6)
    full = count(msgs)
    without = count([*msgs[:-2], {"role": "assistant", "content": [use("toolu_last")]}, msgs[-1]])
    assert full > without + 100, "thinking and redacted thinking are counted"
    res = assemble(msgs, config(full // 2, recent_tool_rings=1))
    assert res.dropped and res.tokens_after <= res.budget
    for o in res.messages:
        if o["role"] == "assistant":
            assert any(o is m for m in msgs), "assistant turns with thinking are the caller's"
            assert o["content"][0]["type"] in ("thinking", "redacted_thinking")
    assert res.messages[-2] is msgs[-2] and res.messages[-1] is msgs[-1]
    assert ADAPTER.validate(res.messages) == []


def test_a_plain_turn_before_thinking_is_never_dropped_alone() -> None:
    # Dropping "aside" would merge "plain reply" in front of the thinking block, which
    # Anthropic rejects ("If an assistant message contains any thinking blocks, the first block
    # must be thinking or redacted_thinking"): the reply and the aside go or stay together.
    msgs = [
        {"role": "user", "content": "goal"},
        {"role": "assistant", "content": "plain reply " * 40},
        {"role": "user", "content": "aside " * 40},
        {"role": "assistant", "content": [THINKING, use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a")]},
    ]
    canonical = read_canonical(ADAPTER, msgs, None)
    assert canonical.binds_next == [False, True, False, False, False]
    cfg = config(count(msgs) - 30, recent_user_turns=0, stages=["drop_plain_turns"])
    res = assemble(msgs, cfg)
    assert res.dropped == {1, 2}
    assert res.messages == [msgs[0], msgs[3], msgs[4]] and res.merged == 0
    assert res.messages[1] is msgs[3]


def test_cache_breakpoints_are_kept_and_never_more_than_four() -> None:
    cc = {"cache_control": {"type": "ephemeral"}}
    system = [{**text("rules"), **cc}]
    msgs = [
        {"role": "user", "content": [{**text("goal"), **cc}]},
        {"role": "assistant", "content": [{**use("toolu_a"), **cc}]},
        {"role": "user", "content": [{**result("toolu_a"), **cc}]},
    ]
    res = assemble(msgs, config(), system=system)
    assert res.system is system and all(a is b for a, b in zip(res.messages, msgs, strict=True))
    msgs.append({"role": "assistant", "content": [{**text("done"), **cc}]})
    with pytest.raises(rb.InvalidMessageError) as e:
        assemble(msgs, config(), system=system)
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(e.value)
    assert e.value.index == 3
    # Dropping the ring that carried two breakpoints brings the request under the limit.
    long = [msgs[0], *ring("toolu_x"), msgs[1], msgs[2], msgs[3]]
    long[2] = {"role": "user", "content": [{**result("toolu_x", "data " * 300), **cc}]}
    long[1] = {"role": "assistant", "content": [{**use("toolu_x"), **cc}]}
    long[3] = {"role": "assistant", "content": [use("toolu_a")]}
    cfg = config(count(long, system=system) - 100, recent_tool_rings=1)
    res = assemble(long, cfg, system=system)
    assert res.dropped == {1, 2}


def test_images_are_priced_by_anthropics_formula() -> None:
    base = [{"role": "user", "content": [text("Describe it.")]}]
    small = [{"role": "user", "content": [text("Describe it."), image(200, 200)]}]
    big = [{"role": "user", "content": [text("Describe it."), image(1000, 1000)]}]
    huge = [{"role": "user", "content": [text("Describe it."), image(2048, 1536)]}]
    plain = count(base, token_ratio=1.0)
    assert count(small, token_ratio=1.0) - plain == 64  # 8 x 8 patches of 28 px > 200·200/750
    assert count(big, token_ratio=1.0) - plain == 1334  # 1000·1000/750
    assert count(huge, token_ratio=1.0) - plain == 1640  # scaled down to the cap
    url = [
        {
            "role": "user",
            "content": [
                text("Describe it."),
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
            ],
        }
    ]
    assert count(url, token_ratio=1.0) - plain == 1640  # unknown size: the maximum
    # An image returned by a tool is counted too.
    in_result = [
        {"role": "user", "content": "shoot"},
        {"role": "assistant", "content": [use("toolu_s", "screenshot")]},
        {"role": "user", "content": [result("toolu_s", [text("here"), image(1000, 1000)])]},
    ]
    no_image = copy.deepcopy(in_result)
    no_image[2]["content"][0]["content"] = [text("here")]
    assert count(in_result, token_ratio=1.0) - count(no_image, token_ratio=1.0) >= 1334


def test_documents_and_error_flags_are_counted() -> None:
    pdf = b"%PDF-1.4\n" + b"1 0 obj << /Type /Page >> endobj\n" * 3 + b"<< /Type /Pages >>"
    doc = {
        "type": "document",
        "source": {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.b64encode(pdf).decode(),
        },
        "title": "Three pages",
    }
    base = [{"role": "user", "content": [text("Summarize.")]}]
    with_doc = [{"role": "user", "content": [doc, text("Summarize.")]}]
    added = count(with_doc, token_ratio=1.0) - count(base, token_ratio=1.0)
    assert 3 * (PDF_PAGE_TOKENS + 1640) <= added <= 3 * (PDF_PAGE_TOKENS + 1640) + 10
    text_doc = {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "lorem ipsum " * 100},
    }
    assert count([{"role": "user", "content": [text_doc]}], token_ratio=1.0) > 200


def test_the_error_flag_alone_makes_a_failed_result() -> None:
    # The text does not open like an error: only the flag says the call failed, and a short
    # failed ring is kept where the same ring, unflagged, is dropped and ledgered.
    def dropped(flag: bool) -> set[int]:
        msgs = session(8)
        msgs[2]["content"] = [result("toolu_00", "no such file", is_error=flag)]
        cfg = config(count(msgs) - 150, side_effect_tools=["send_email"])
        return assemble(msgs, cfg).dropped

    assert {1, 2} <= dropped(False)
    assert not {1, 2} & dropped(True)


def test_tools_are_counted_with_the_tool_use_system_prompt() -> None:
    tools = [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "cache_control": {"type": "ephemeral"},
        },
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
    ]
    mapped = ADAPTER.tools_to_openai(tools)
    assert mapped[0]["function"]["parameters"] == tools[0]["input_schema"]
    assert mapped[1]["function"]["name"] == "web_search"
    assert len(mapped) == 2
    added = count(SINGLE, tools=tools, token_ratio=1.0) - count(SINGLE, token_ratio=1.0)
    definitions = rb.count_tokens([], tools=mapped) - rb.count_tokens([])
    assert added == definitions + TOOL_USE_SYSTEM_PROMPT_TOKENS
    with pytest.raises(rb.InvalidMessageError):
        ADAPTER.tools_to_openai({"name": "x"})


def test_token_ratio_scales_the_count() -> None:
    assert ADAPTER.default_token_ratio == 1.3
    one = count(SINGLE, token_ratio=1.0)
    assert one * 1.3 <= count(SINGLE) <= one * 1.3 + len(SINGLE) + 1


def test_sdk_objects_are_read_and_returned_as_they_are() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Block(pydantic.BaseModel):
        type: str
        text: str | None = None
        id: str | None = None
        name: str | None = None
        input: dict | None = None

    class Message(pydantic.BaseModel):
        role: str
        content: list[Block]

    msgs = [
        {"role": "user", "content": "go"},
        Message(
            role="assistant", content=[Block(type="tool_use", id="toolu_a", name="f", input={})]
        ),
        {"role": "user", "content": [result("toolu_a")]},
    ]
    assert ADAPTER.validate(msgs) == []
    res = assemble(msgs, config())
    assert all(a is b for a, b in zip(res.messages, msgs, strict=True))


# --- bad input --------------------------------------------------------------------------------

BAD = [
    ("not a list", None, {"role": "user", "content": "x"}),
    ("not an object", 1, [{"role": "user", "content": "x"}, "hello"]),
    ("system role", 0, [{"role": "system", "content": "rules"}]),
    ("unknown role", 0, [{"role": "tool", "content": "x"}]),
    ("missing content", 0, [{"role": "user"}]),
    ("content a number", 0, [{"role": "user", "content": 3}]),
    ("block not object", 0, [{"role": "user", "content": ["hi"]}]),
    ("block without type", 0, [{"role": "user", "content": [{"text": "hi"}]}]),
    ("text not str", 0, [{"role": "user", "content": [{"type": "text", "text": None}]}]),
    (
        "use without id",
        1,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
        ],
    ),
    (
        "input not object",
        1,
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": [use("t") | {"input": "[]"}]},
        ],
    ),
    (
        "result in assistant",
        1,
        [{"role": "user", "content": "x"}, {"role": "assistant", "content": [result("t")]}],
    ),
    ("use in user", 0, [{"role": "user", "content": [use("t")]}]),
    ("is_error not bool", 0, [{"role": "user", "content": [result("t") | {"is_error": "yes"}]}]),
    ("result content", 0, [{"role": "user", "content": [result("t", 42)]}]),
    ("image source", 0, [{"role": "user", "content": [{"type": "image", "source": "x"}]}]),
    (
        "image base64",
        0,
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
                ],
            }
        ],
    ),
    ("thinking text", 0, [{"role": "assistant", "content": [{"type": "thinking"}]}]),
]


@pytest.mark.parametrize(("case", "index", "messages"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_typed_error_naming_the_message(case, index, messages) -> None:
    for call in (
        lambda: ADAPTER.validate(messages),
        lambda: read_canonical(ADAPTER, messages, None),
        lambda: assemble(messages, config()),
        lambda: count(messages),
    ):
        with pytest.raises(rb.InvalidMessageError) as e:
            call()
        assert e.value.index == index, case


@pytest.mark.parametrize(
    "system", [42, {"type": "text", "text": "x"}, ["rules"], [{"type": "image"}]]
)
def test_bad_system_is_a_typed_error(system) -> None:
    with pytest.raises(rb.InvalidMessageError) as e:
        assemble([{"role": "user", "content": "x"}], config(), system=system)
    assert e.value.index is None


def _mutations(msgs: list[dict[str, Any]]) -> st.SearchStrategy[list[Any]]:
    """The session with one value somewhere replaced by junk."""
    junk = st.sampled_from([None, 0, -1.5, "", "x", [], {}, [None], {"type": None}, True])

    @st.composite
    def mutate(draw: st.DrawFn) -> list[Any]:
        out = copy.deepcopy(msgs)
        paths: list[tuple[Any, Any]] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                for k in list(node):
                    paths.append((node, k))
                    walk(node[k])
            elif isinstance(node, list):
                for k in range(len(node)):
                    paths.append((node, k))
                    walk(node[k])

        walk(out)
        parent, key = draw(st.sampled_from(paths))
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[key]
        else:
            parent[key] = draw(junk)
        return out

    return mutate()


@properties
@given(_mutations([*thinking_session(1), *FOLLOW_UP[1:]]))
def test_junk_anywhere_is_a_typed_error_never_a_crash(msgs) -> None:
    for cfg in (config(), config(300, on_pairing_error="synthesize_error_results")):
        try:
            res = assemble(msgs, cfg, system="rules")
        except (rb.InvalidMessageError, rb.PairingError, rb.BudgetExceededError):
            continue
        assert ADAPTER.validate(res.messages, system=res.system) == []


# --- conversion from OpenAI Chat -----------------------------------------------------------


def _args(arguments: str) -> dict[str, Any]:
    """Arguments as the Anthropic side keeps them: an object, else the raw string wrapped."""
    try:
        value = json.loads(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"arguments": arguments}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or ())


def _rings(canonical: list[dict[str, Any]]) -> list[list[tuple[str, str, str]]]:
    """Per assistant message with calls: (name, arguments, result text) of each answered call."""
    out = []
    for k, m in enumerate(canonical):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        calls = {c["id"]: c["function"] for c in m["tool_calls"]}
        ring_ = []
        for r in canonical[k + 1 :]:
            if r["role"] != "tool":
                break
            fn = calls[r["tool_call_id"]]
            ring_.append(
                (
                    fn["name"],
                    json.dumps(_args(fn["arguments"]), sort_keys=True),
                    _text(r["content"]),
                )
            )
        out.append(sorted(ring_))
    return out


def _texts(canonical: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in canonical:
        c = m.get("content")
        out += [c] if isinstance(c, str) else [p["text"] for p in c or () if p["type"] == "text"]
    return [t for t in out if t]


def _native_images(blocks_or_messages: list[Any]) -> int:
    """Image blocks of Anthropic messages, those inside tool results included."""
    out = 0
    for b in blocks_or_messages:
        content = b.get("content")
        if b.get("type") == "image":
            out += 1
        elif isinstance(content, list):
            out += _native_images(content)
    return out


def _images(canonical: list[dict[str, Any]]) -> int:
    return sum(
        1
        for m in canonical
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if p["type"] == "image_url"
    )


@properties
@given(gen.sessions())
def test_from_canonical_then_to_canonical_keeps_pairing_and_content(msgs) -> None:
    native, system = from_canonical("anthropic", msgs)
    assert ADAPTER.validate(native, system=system) == []
    assert roles_alternate(native)
    back = read_canonical(ADAPTER, native, system).messages
    assert _rings(back) == _rings(msgs)
    # Every text survives, in order (leading instructions joined into the system), but
    # whitespace-only text, which Anthropic refuses and ringbound strips.
    flat = "\u0000".join(_texts(back))
    at = 0
    for t in _texts(msgs):
        if not t.strip():
            continue
        found = flat.find(t, at)
        assert found >= 0, t
        at = found
    assert _native_images(native) == _images(msgs)


def test_from_canonical_renames_recurring_ids_and_wraps_odd_arguments() -> None:
    call = {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "[1]"}}
    msgs = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "one"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": "two"},
    ]
    native, system = from_canonical("anthropic", msgs)
    assert system == "rules"
    ids = [b["id"] for m in native for b in m["content"] if b["type"] == "tool_use"]
    assert ids == ["call_0", "call_0_2"]
    assert native[-1]["content"][0]["tool_use_id"] == "call_0_2"
    assert native[1]["content"][0]["input"] == {"arguments": "[1]"}
    assert ADAPTER.validate(native, system=system) == []


# --- DESIGN §4 on generated sessions ----------------------------------------------------------


@dataclass(frozen=True)
class Case:
    messages: list[dict[str, Any]]
    system: Any
    tools: list[dict[str, Any]] | None
    policy: dict[str, Any]
    budget: int
    pinned: tuple[int, ...]

    def config(self, **kw: Any) -> rb.AssemblyConfig:
        return rb.AssemblyConfig(**{**self.policy, "model_input_limit": self.budget, **kw})


def _anthropic_tools(names: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in gen.tools_schema(names)
    ]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    chat = draw(gen.sessions())
    if draw(st.booleans()):
        chat = draw(gen.drop_some_results(chat))
    native, system = from_canonical("anthropic", chat)
    if isinstance(system, str) and draw(st.booleans()):
        system = [text(part) for part in system.split("\n\n")]
    names = sorted({b["name"] for m in native for b in m["content"] if b["type"] == "tool_use"})
    tools = _anthropic_tools(names or list(gen.TOOLS)) if draw(st.booleans()) else None
    policy = draw(gen.policies())
    policy["on_pairing_error"] = "synthesize_error_results"
    policy["token_ratio"] = draw(st.sampled_from((None, 1.0)))
    full = count(native, system=system, tools=tools, encoding=policy["encoding"])
    budget = gen.budget_for(full, draw(gen.fractions))
    # Pins keep some turns while their neighbours go: the drops that make same-role messages
    # neighbours, which rendering must merge.
    pinned: tuple[int, ...] = ()
    if draw(st.booleans()):
        pinned = tuple(draw(st.lists(st.integers(0, len(native) - 1), max_size=3, unique=True)))
    return Case(native, system, tools, policy, budget, pinned)


def _run(case: Case, **kw: Any) -> Result | rb.BudgetExceededError:
    try:
        return assemble(
            case.messages,
            case.config(**kw),
            system=case.system,
            tools=case.tools,
            pinned=case.pinned,
        )
    except rb.BudgetExceededError as e:
        return e


def _synthesized(block: Any) -> bool:
    return block.get("type") == "tool_result" and block.get("content") == SYNTH


def _rewrite_shape(block: dict[str, Any]) -> Any:
    """What a rewrite keeps of a block: a result's id and flag (its content may be cut or
    stubbed), an image as such (it may have become the placeholder)."""
    if block.get("type") == "tool_result":
        return ("tool_result", block["tool_use_id"], block.get("is_error"))
    if block.get("type") == "image" or block == text(_core.MEDIA_PLACEHOLDER):
        return "image"
    if block.get("type") == "document" and block["source"]["type"] in ("base64", "url", "file"):
        return "image"
    return block


def _present(out: list[Any], message: dict[str, Any], rewritten: bool = False) -> bool:
    """The caller's message is in the output: itself, or its blocks inside a new message (merged
    with a neighbour, or with synthesized results added); for a rewritten message, its blocks
    as a rewrite leaves them. Whitespace-only text blocks are stripped (Anthropic refuses
    them) unless they are all the message holds."""
    if any(o is message for o in out):
        return True
    shape = _rewrite_shape if rewritten else (lambda b: b)
    mine = [shape(b) for b in blocks(message) if not _blank_text(b)] or [
        shape(b) for b in blocks(message)
    ]
    for o in out:
        theirs = [shape(b) for b in blocks(o) if not _synthesized(b)]
        if any(theirs[k : k + len(mine)] == mine for k in range(len(theirs) - len(mine) + 1)):
            return True
    return False


def _blank_text(block: Any) -> bool:
    b = _plain_block(block)
    return b.get("type") == "text" and isinstance(b.get("text"), str) and not b["text"].strip()


@properties
@given(cases())
def test_invariants_hold_after_every_stage(case: Case) -> None:
    before = copy.deepcopy((case.messages, case.system, case.tools))
    canonical = read_canonical(ADAPTER, case.messages, case.system)
    goal = next(
        (
            s
            for m, s in zip(canonical.messages, canonical.spans, strict=True)
            if m["role"] == "user"
        ),
        (0, 0),
    )
    outcomes = []
    for stages in gen.stage_prefixes():
        res = _run(case, stages=stages)
        outcomes.append(res)
        if isinstance(res, rb.BudgetExceededError):
            assert res.tokens > res.budget == case.budget
            continue
        out = res.messages
        # 1. Pairing valid by Anthropic's rules; roles alternate.
        assert ADAPTER.validate(out, system=res.system) == []
        assert roles_alternate(out)
        # 2. Order kept: the caller's objects in their order, nothing but dropped units gone.
        idx = [
            next(i for i, m in enumerate(case.messages) if m is o)
            for o in out
            if any(o is m for m in case.messages)
        ]
        assert idx == sorted(idx)
        for i, m in enumerate(case.messages):
            if i in res.dropped:
                assert all(o is not m for o in out), i
            else:
                assert _present(out, m, i in res.rewritten), i
        # 3. Protected: the last message, pinned ones, the goal when pinned.
        assert len(case.messages) - 1 not in res.dropped
        assert not set(case.pinned) & res.dropped
        if "first_user_message" in case.policy["pin"]:
            assert not set(range(*goal)) & res.dropped
        # 4. Within budget.
        assert res.tokens_after <= res.budget
        # 9. Every dropped side-effecting call is in the ledger note.
        note = note_of(res.system) or ""
        for i in res.dropped:
            for b in case.messages[i]["content"]:
                if b["type"] == "tool_use" and b["name"] in case.policy["side_effect_tools"]:
                    if "side_effect_ledger" in case.policy["pin"]:
                        assert json.dumps(b["id"]) in note, b["id"]
        # 5. Deterministic.
        twin = _run(case, stages=stages)
        assert twin.messages == out and twin.system == res.system
        # 6. Idempotent: the assembled request, assembled again, is returned as it is. (Not
        # with repairs under a token ratio: test_synthesized_results_are_counted_with_the_ratio.)
        if res.repairs and case.policy.get("token_ratio") != 1.0:
            continue
        again = assemble(
            out,
            case.config(stages=stages),
            system=res.system,
            tools=None if res.tools_dropped else case.tools,
        )
        assert all(a is b for a, b in zip(again.messages, out, strict=True))
        assert again.system == res.system
    # 7. Monotone: a larger budget never drops more.
    bigger = _run(replace(case, budget=case.budget + 500))
    final = outcomes[-1]
    if isinstance(final, Result):
        assert isinstance(bigger, Result)
        assert bigger.dropped <= final.dropped
    # 8. The input is never mutated.
    assert (case.messages, case.system, case.tools) == before


@st.composite
def chatty(draw: st.DrawFn) -> tuple[list[dict[str, Any]], tuple[int, ...]]:
    """Plain turns with the odd ring, thinking on some assistant turns, and pins: the drops
    that leave same-role neighbours (to merge) and thinking turns behind plain ones."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": draw(gen.text)}]
    for k in range(draw(st.integers(1, 12))):
        first = [dict(THINKING)] if draw(st.booleans()) else []
        if draw(st.integers(0, 3)) == 0:
            cid = f"toolu_{k}"
            msgs.append({"role": "assistant", "content": [*first, use(cid)]})
            tail = [text(draw(gen.text))] if draw(st.booleans()) else []
            msgs.append({"role": "user", "content": [result(cid, draw(gen.text)), *tail]})
        else:
            msgs.append({"role": "assistant", "content": [*first, text(draw(gen.text))]})
            msgs.append({"role": "user", "content": draw(gen.text)})
    pins = draw(st.lists(st.integers(0, len(msgs) - 1), max_size=3, unique=True))
    return msgs, tuple(pins)


@properties
@given(chatty(), st.floats(0.2, 1.0), st.integers(0, 2), st.sampled_from([(), ("x",)]))
def test_merges_keep_roles_alternating_and_thinking_first(session_, fraction, recent, sys_) -> None:
    msgs, pins = session_
    system = "rules" if sys_ else None
    cfg = config(
        max(1, int(count(msgs, system=system) * fraction)),
        recent_user_turns=recent,
        recent_tool_rings=recent,
        pin=(),
    )
    try:
        res = assemble(msgs, cfg, system=system, pinned=pins)
    except rb.BudgetExceededError:
        return
    out = res.messages
    assert roles_alternate(out) and ADAPTER.validate(out, system=res.system) == []
    assert res.tokens_after <= res.budget
    for i, m in enumerate(msgs):
        assert (i in res.dropped) or _present(out, m), i
    assert not set(pins) & res.dropped
    for o in out:
        kinds_ = [(_plain_block(b))["type"] for b in blocks(o)]
        if {"thinking", "redacted_thinking"} & set(kinds_):
            assert kinds_[0] in ("thinking", "redacted_thinking"), kinds_
    new = [o for o in out if all(o is not m for m in msgs)]
    # New objects are merges, or messages whose whitespace-only text was stripped (reported
    # as rewrites, and possibly merged too).
    assert res.merged <= len(new) <= res.merged + len(res.rewritten)


def _plain_block(b: Any) -> dict[str, Any]:
    return b if isinstance(b, dict) else b.model_dump()


# --- the Claude Code corpus -------------------------------------------------------------------


def _events(path: Path) -> list[Any]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            out.append(line)
    return out


def _conversation(events: list[Any], suffix: str = "") -> tuple[list[dict[str, Any]], int]:
    """The request Claude Code rebuilds: user/assistant events in order, consecutive same-role
    ones merged; events whose message is malformed are left out (and counted). ``suffix`` is
    appended to tool ids, to replay a session without reusing its ids."""
    msgs: list[dict[str, Any]] = []
    broken = 0
    for e in events:
        if not isinstance(e, dict) or e.get("type") not in ("user", "assistant"):
            continue
        m = e.get("message")
        one = {"role": m.get("role"), "content": m.get("content")} if isinstance(m, dict) else m
        try:
            ADAPTER.validate([one])
        except rb.InvalidMessageError as err:
            assert err.index == 0
            broken += 1
            continue
        content = one["content"]
        parts = [text(content)] if isinstance(content, str) else copy.deepcopy(content)
        for b in parts:
            for key in ("id", "tool_use_id"):
                if key in b:
                    b[key] += suffix
        if msgs and msgs[-1]["role"] == one["role"]:
            msgs[-1]["content"] += parts
        else:
            msgs.append({"role": one["role"], "content": parts})
    return msgs, broken


def test_claude_code_sessions_assemble_valid_requests(corpus: Path) -> None:
    files = sorted((corpus / "claude-code").glob("*.jsonl"))
    assert {"edge_cases", "representative_messages", "todowrite_examples"} <= {
        f.stem for f in files
    }
    sessions: dict[str, list[dict[str, Any]]] = {}
    for path in files:
        msgs, broken = _conversation(_events(path))
        sessions[path.stem] = msgs
        assert roles_alternate(msgs)
        issues = kinds(ADAPTER.validate(msgs))
        if path.stem == "edge_cases":
            # Its real quirks: a result event with a misspelt `content` key, a message that is
            # a string, a content list holding a bare string. Each is a typed error and is left
            # out, which leaves MultiEdit's and TodoWrite's calls unanswered.
            assert broken == 3
            assert [k for k, _, _ in issues] == ["missing_result", "missing_result"]
            assert {c for _, _, c in issues} == {"tool_edge_002", "toolu_todowrite_002"}
        elif path.stem in ("representative_messages", "todowrite_examples"):
            assert broken == 0 and issues == []
    # A long session: every log replayed three times, ids kept unique.
    replayed: list[dict[str, Any]] = []
    for r in range(3):
        for path in files:
            if path.stem not in ("representative_messages", "todowrite_examples"):
                continue
            for m in _conversation(_events(path), f"_r{r}")[0]:
                if replayed and replayed[-1]["role"] == m["role"]:
                    replayed[-1]["content"] += m["content"]
                else:
                    replayed.append(m)
    sessions["replayed"] = replayed
    system = "You are Claude Code, Anthropic's official CLI for Claude."
    drops = 0
    for name, msgs in sessions.items():
        full = count(msgs, system=system)
        if name == "edge_cases":
            with pytest.raises(rb.PairingError):
                assemble(msgs, config(full), system=system)
        for fraction in (1.0, 0.6, 0.3, 0.1):
            cfg = config(
                max(1, int(full * fraction)),
                on_pairing_error="synthesize_error_results",
                side_effect_tools=["MultiEdit", "Edit", "TodoWrite"],
                recent_tool_rings=1,
                recent_user_turns=1,
            )
            try:
                res = assemble(msgs, cfg, system=system)
            except rb.BudgetExceededError as e:
                assert fraction < 1.0 and e.tokens > e.budget
                continue
            assert ADAPTER.validate(res.messages, system=res.system) == [], name
            assert roles_alternate(res.messages), name
            assert res.tokens_after <= res.budget
            kept = [i for o in res.messages for i, m in enumerate(msgs) if o is m]
            assert kept == sorted(kept)
            assert len(kept) + res.merged + len(res.repairs) >= len(res.messages)
            drops += len(res.dropped)
            if fraction == 1.0 and name != "edge_cases":
                # (edge_cases grows by its synthesized results and may not fit its own count.)
                assert res.dropped == set()
    assert drops > 0, "some budget forced drops"


# --- the core's validator against the Python oracle ------------------------------------------


def _both(msgs: list[Any], system: Any = None) -> tuple[Any, Any]:
    """What the core's validator and the Python oracle make of a request: the issues, or the
    type and index of the error."""

    def run(validate: Any) -> Any:
        try:
            return [(i.kind, i.call_id, i.index, i.message) for i in validate(msgs, system=system)]
        except rb.InvalidMessageError as e:
            return ("InvalidMessageError", e.index)

    return run(ADAPTER.validate), run(anthropic_oracle.validate)


@st.composite
def _edited(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A generated session in Anthropic's shape with one to three edits that break pairing in
    every way: messages deleted or swapped, blocks deleted, copied or moved."""
    native, _ = from_canonical("anthropic", draw(gen.sessions(images=False)))
    msgs = copy.deepcopy(native)
    for _ in range(draw(st.integers(1, 3))):
        if not msgs:
            break
        k = draw(st.integers(0, len(msgs) - 1))
        blocks = msgs[k]["content"]
        op = draw(st.sampled_from(("delete", "swap", "drop_block", "copy_block", "move_block")))
        if op == "delete":
            del msgs[k]
        elif op == "swap":
            j = draw(st.integers(0, len(msgs) - 1))
            msgs[k], msgs[j] = msgs[j], msgs[k]
        elif blocks:
            b = draw(st.integers(0, len(blocks) - 1))
            if op == "drop_block" and len(blocks) > 1:
                del blocks[b]
            elif op == "copy_block":
                same = [j for j, m in enumerate(msgs) if m["role"] == msgs[k]["role"]]
                target = msgs[draw(st.sampled_from(same))]["content"]
                target.insert(draw(st.integers(0, len(target))), copy.deepcopy(blocks[b]))
            elif op == "move_block":
                blocks.append(blocks.pop(b))
    return msgs


@properties
@given(_edited())
def test_the_core_validator_agrees_with_the_python_oracle(msgs) -> None:
    core, oracle = _both(msgs)
    assert core == oracle


def test_the_core_validator_agrees_with_the_oracle_on_the_corpus(corpus: Path) -> None:
    """The real Claude Code logs, whole and with each message in turn left out."""
    compared = 0
    for path in sorted((corpus / "claude-code").glob("*.jsonl")):
        msgs, _ = _conversation(_events(path))
        for k in range(-1, len(msgs)):
            variant = msgs if k < 0 else msgs[:k] + msgs[k + 1 :]
            core, oracle = _both(variant, system="You are Claude Code.")
            assert core == oracle, (path.name, k)
            compared += 1
    assert compared >= 25


def test_mappings_other_than_dicts_are_read_as_before() -> None:
    from types import MappingProxyType

    msgs = [
        {"role": "user", "content": "go"},
        MappingProxyType({"role": "assistant", "content": [MappingProxyType(use("toolu_a"))]}),
        {"role": "user", "content": "no result"},
    ]
    core, oracle = _both(msgs)
    assert core == oracle
    assert [k for k, *_ in core] == ["missing_result"]
    with pytest.raises(rb.InvalidMessageError) as e:
        ADAPTER.validate([{"role": "user", "content": "x"}, MappingProxyType({"role": "tool"})])
    assert e.value.index == 1


def test_the_oracle_is_not_blind() -> None:
    """The comparison means something: both find the issues of a broken session."""
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [use("toolu_a"), use("toolu_a")]},
        {"role": "user", "content": [text("x"), result("toolu_a"), result("toolu_z")]},
    ]
    core, oracle = _both(msgs)
    assert core == oracle
    assert [k for k, *_ in core] == ["duplicate_id", "result_not_adjacent", "orphan_result"]


def test_a_thinking_turn_is_never_merged_behind_other_blocks() -> None:
    """A kept assistant text and a later thinking turn become neighbours when everything
    between them is dropped; merging would put text before thinking, so a placeholder user
    turn keeps them apart."""
    thinking = {"type": "thinking", "thinking": "Read b next. " * 20, "signature": "c2ln"}
    msgs = [
        {"role": "user", "content": "Read both files."},
        {"role": "assistant", "content": [text("Reading a.txt first.")]},
        {"role": "user", "content": "go on " * 40},
        {"role": "assistant", "content": [use("toolu_a")]},
        {"role": "user", "content": [result("toolu_a", "a " * 200)]},
        {"role": "assistant", "content": [thinking, use("toolu_b")]},
        {"role": "user", "content": [result("toolu_b")]},
    ]
    cfg = config(
        count(msgs) // 3, recent_tool_rings=1, recent_user_turns=0, pin=["first_user_message"]
    )
    res = assemble(msgs, cfg, pinned=(1,))
    assert res.dropped == {2, 3, 4}
    roles = [m["role"] for m in res.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert res.messages[2]["content"] == OMITTED_TURNS_TEXT
    assert res.messages[3] is msgs[5]
    assert res.tokens_after <= res.budget
    assert rb.validate(res.messages, provider="anthropic") == []


def test_an_assembly_leaves_the_reading_to_the_core() -> None:
    """The core parses and checks the messages: the package holds no Python reader of them
    (it is the tests' oracle, ``native_readers.anthropic``). A list edited in place between two
    assemblies is read afresh (no reading outlives its assembly)."""
    import ringbound.providers.anthropic as anthropic

    assert not hasattr(anthropic, "_read") and not hasattr(anthropic, "_read_uncached")
    msgs = session(6)
    asm = rb.Assembler(config(2_000), provider="anthropic")
    first = asm.assemble(msgs)
    msgs[-1] = {"role": "user", "content": "Something else entirely, said at length. " * 20}
    second = asm.assemble(msgs)
    assert second.messages[-1] is msgs[-1] and first.messages[-1] is not msgs[-1]
    assert second.report.tokens_before > first.report.tokens_before
