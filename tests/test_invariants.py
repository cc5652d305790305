"""The invariants of DESIGN §4, each a hypothesis property over generated sessions, checked after
every stage: each assembly runs once per prefix of the stage order, so the request is observed
as it stands after each cheap stage (dedupe_superseded_reads, truncate_oversized_results,
degrade_media), after each drop stage and after the summary. Half the sessions give the cheap
stages work (repeated reads, huge results, images, small max_tool_result_tokens). With a
summarizer the invariants still hold, the summary note sits where the ledger note goes, and the
ledger survives compaction after compaction; a truncated result recovers its exact original."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
import reference as ref
import strategies as gen
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import MistralRequestValidatorV13, ValidationMode

import ringbound as rb
from ringbound import _core, summarizers
from ringbound.summary.recovery import recover

#: Two warnings hypothesis itself raises only while reporting a failure: libcst (imported to
#: suggest an explicit example) trips a DeprecationWarning of mypy_extensions, and a session
#: with several KB of tool output makes an "overly large repr". Under filterwarnings=error
#: either would turn the report of a failing property into a pytest INTERNALERROR.
pytestmark = [
    pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]
properties = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Tests that assemble again what an assembly returned give up on inputs that do not fit at
#: all; that filtering is expected.
rounds = settings(
    parent=properties,
    suppress_health_check=[*properties.suppress_health_check, HealthCheck.filter_too_much],
)
MISTRAL = MistralRequestValidatorV13(mode=ValidationMode.serving)


#: Sessions that pair, or only miss results and are repaired: every assembly can plan. Half of
#: them give the cheap stages work.
plannable = st.one_of(
    gen.cases(missing_results=True, repair=True, cheap=True),
    gen.cases(missing_results=True, repair=True),
)
ANCHOR = re.compile(
    r"\n\[ringbound: (\d+) of (\d+) tokens of this tool result were cut\. To read them, call "
    r'expand_message with \{"message_id": "(rb-[0-9a-f]{16})"\}\]\n'
)


def each_stage(case: gen.Case, summarizer: Any = None) -> Iterator[tuple[rb.AssemblyConfig, Any]]:
    """``(config, result or BudgetExceededError)`` for each prefix of the stage order."""
    for stages in gen.stage_prefixes():
        cfg = case.config(stages=stages)
        asm = rb.Assembler(cfg, summarizer=summarizer)
        try:
            res = asm.assemble(case.messages, case.tools, pinned=case.pinned)
        except rb.BudgetExceededError as e:
            yield cfg, e
        else:
            yield cfg, res


def is_ledger_note(m: Any) -> bool:
    content = m.get("content")
    return (
        m.get("role") in ref.INSTRUCTION
        and isinstance(content, str)
        and content.startswith(ref.MARKER + "\n" + ref.HEADER + "\n")
    )


def is_summary_note(m: Any) -> bool:
    content = m.get("content")
    return (
        m.get("role") in ref.INSTRUCTION
        and isinstance(content, str)
        and content.startswith(_core.SUMMARY_MARKER)
    )


def is_synthesized(m: Any) -> bool:
    return m.get("role") == "tool" and m.get("content") == ref.SYNTHESIZED_RESULT_TEXT


@dataclass
class Shape:
    """An output read against its input: where each of the caller's messages went."""

    #: Per output message: ``("keep", i)``, ``("rewrite", i)``, ``("ledger", None)``,
    #: ``("summary", None)`` or ``("synthesized", None)``.
    order: list[tuple[str, int | None]] = field(default_factory=list)
    #: Original index -> the new message standing for it.
    rewritten: dict[int, Any] = field(default_factory=dict)

    @property
    def positions(self) -> list[int]:
        """Original indices still in the output (as themselves or rewritten), in order."""
        return [i for kind, i in self.order if kind in ("keep", "rewrite") and i is not None]

    def inserted(self, kind: str) -> int:
        return sum(1 for k, _ in self.order if k == kind)


def shape(messages: list[Any], res: rb.AssemblyResult) -> Shape:
    """Classifies every output message: the caller's own object, a reported insertion, or the
    rewrite of the caller's message the report names next (rewrites are reported in order)."""
    where = {id(m): i for i, m in enumerate(messages)}
    pending = [r.index for r in res.report.rewrites]
    out = Shape()
    for m in res.messages:
        if id(m) in where:
            out.order.append(("keep", where[id(m)]))
        elif is_ledger_note(m):
            out.order.append(("ledger", None))
        elif is_summary_note(m):
            out.order.append(("summary", None))
        elif is_synthesized(m):
            out.order.append(("synthesized", None))
        else:
            assert pending, f"a new message that is no reported insertion or rewrite: {m!r:.300}"
            i = pending.pop(0)
            out.order.append(("rewrite", i))
            out.rewritten[i] = m
    assert not pending, f"reported rewrites {pending} are not in the output"
    return out


def insertions(messages: list[Any], out: list[Any]) -> list[Any]:
    mine = {id(m) for m in messages}
    return [m for m in out if id(m) not in mine]


def ledger_notes(out: list[Any]) -> list[dict[str, Any]]:
    return [m for m in out if isinstance(m.get("content"), str) and ref.MARKER in m["content"]]


def for_mistral(out: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request in Mistral's terms, pairing untouched: developer is system; an instruction
    message after an assistant or tool turn (Mistral's templates refuse it, OpenAI accepts it)
    becomes a user turn; a request that opens with an assistant turn (the goal unpinned and
    dropped) gets a user turn before it, since Mistral's validator skips the first message
    when it pairs calls with results."""
    conv: list[dict[str, Any]] = []
    if out and out[0]["role"] == "assistant":
        conv.append({"role": "user", "content": "(earlier turns trimmed)"})
    for m in out:
        if m["role"] in ref.INSTRUCTION:
            after_turn = bool(conv) and conv[-1]["role"] in ("assistant", "tool")
            m = {**m, "role": "user" if after_turn else "system"}
        conv.append(m)
    return conv


def check_mistral(out: list[dict[str, Any]]) -> None:
    request = ChatCompletionRequest(messages=for_mistral(out))
    MISTRAL.validate_messages(request.messages)


# 1. Pairing -----------------------------------------------------------------------------------


@properties
@given(plannable)
def test_output_pairs_for_ringbound_and_mistral(case: gen.Case) -> None:
    """After every stage the request pairs: ringbound's validator finds no issue, and when the
    session ends with a user or tool turn (what serving needs) mistral_common accepts it."""
    for _, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        assert rb.validate(res.messages) == []
        if case.messages[-1]["role"] in ("user", "tool"):
            check_mistral(res.messages)


# 2. Shape -----------------------------------------------------------------------------------


def check_insertions(
    case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult, out: Shape
) -> None:
    """Insertions are the reported ones: one ledger note, one summary note (with a summarizer
    that wrote one), and synthesized results of repairs."""
    new = {id(m) for m in out.rewritten.values()}
    added = [m for m in insertions(case.messages, res.messages) if id(m) not in new]
    notes = [m for m in added if is_ledger_note(m)]
    summaries = [m for m in added if is_summary_note(m)]
    results = [m for m in added if is_synthesized(m)]
    assert len(notes) + len(summaries) + len(results) == len(added)
    assert len(notes) <= 1
    assert len(summaries) <= 1
    for note in notes:
        assert "side_effect_ledger" in cfg.pin
        assert res.report.ledger_entries == note["content"].count("\n") - 1
    if summaries:
        assert res.report.summarized and res.report.summary is not None
        assert res.report.summary.tokens > 0
    for result in results:
        assert result == ref.synthesized_result(result["tool_call_id"])
    ids = Counter(r["tool_call_id"] for r in results)
    assert not ids - Counter(res.report.repairs)


def answering_call(messages: list[Any], i: int) -> dict[str, Any]:
    """The call tool result ``i`` answers: in the assistant message that opens its ring."""
    k = i
    while messages[k]["role"] == "tool":
        k -= 1
    call_id = messages[i]["tool_call_id"]
    return next(c for c in messages[k]["tool_calls"] if c["id"] == call_id)


def check_deduped(case: gen.Case, cfg: rb.AssemblyConfig, out: Shape, i: int, new: Any) -> None:
    """A deduped result is a read (not side-effecting) whose tool and JSON arguments a later,
    real result of the input repeats, and that later result is still in the output: the stub
    must point at something the model can read."""
    call = answering_call(case.messages, i)
    name, key = call["function"]["name"], ref._json_key(call["function"]["arguments"])
    assert name not in cfg.side_effect_tools, f"a side-effecting {name} call was deduped"
    assert new["content"] == ref.dedupe_stub(name)
    later = [
        j
        for j in range(i + 1, len(case.messages))
        if case.messages[j]["role"] == "tool"
        and (c := answering_call(case.messages, j))["function"]["name"] == name
        and ref._json_key(c["function"]["arguments"]) == key
    ]
    assert later, f"messages[{i}] was deduped but no later, real result repeats its read"
    kept = set(out.positions)
    assert any(j in kept for j in later), (
        f"messages[{i}] was deduped in favour of later results {later}, none of which is in the "
        "output"
    )


def check_truncated(
    case: gen.Case, cfg: rb.AssemblyConfig, i: int, new: Any, protected: bool = False
) -> None:
    """A truncated result is its original's head, the anchor naming the original's id and how
    much was cut, and its tail; the message fits max_tool_result_tokens. A result of the
    protected suffix (``truncate_protected_results``) may be cut below that limit only as far
    as the budget needs, and the newest ring's never to less than min_result_tokens, so it
    fits the larger of the two."""
    original = "".join(ref.texts(case.messages[i]))
    total = _core.count_text(original, cfg.encoding)
    limit = cfg.max_tool_result_tokens
    if protected:
        # ... nor below what leaves it some text beside the anchor.
        limit = max(limit, cfg.min_result_tokens, ref.least_cap(case.messages[i], cfg.encoding))
        assert ref.message_tokens(case.messages[i], cfg.encoding) > cfg.min_result_tokens or (
            ref.message_tokens(case.messages[i], cfg.encoding) > cfg.max_tool_result_tokens
        )
    else:
        assert ref.message_tokens(case.messages[i], cfg.encoding) > cfg.max_tool_result_tokens
    text = new["content"]
    assert isinstance(text, str)
    splits = [
        (text[: m.start()], m, text[m.end() :])
        for m in ANCHOR.finditer(text)
        if original.startswith(text[: m.start()]) and original.endswith(text[m.end() :])
    ]
    assert splits, f"messages[{i}] is not head + anchor + tail of its original: {text!r:.300}"
    head, anchor, tail = splits[0]
    assert len(head.encode()) + len(tail.encode()) < len(original.encode())
    assert anchor.group(3) == _core.content_id(original)
    assert int(anchor.group(2)) == total
    kept = _core.count_text(head, cfg.encoding) + _core.count_text(tail, cfg.encoding)
    assert int(anchor.group(1)) == total - kept
    tokens = ref.message_tokens(new, cfg.encoding)
    assert tokens <= limit, f"messages[{i}] truncated to {tokens} tokens, over {limit}"


def check_media(case: gen.Case, i: int, new: Any) -> None:
    """Each image part became the placeholder text, in place; every other part is unchanged."""
    before, after = case.messages[i]["content"], new["content"]
    assert len(before) == len(after)
    assert any(p.get("type") == "image_url" for p in before)
    for b, a in zip(before, after, strict=True):
        if b.get("type") == "image_url":
            assert a == {"type": "text", "text": _core.MEDIA_PLACEHOLDER}
        else:
            assert a == b


def check_rewrites(
    case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult, out: Shape
) -> None:
    """Each reported rewrite is a new message standing where the caller's stood, changed only
    in its content and only as its kind says, and smaller by the tokens reported."""
    kinds = {r.index: r for r in res.report.rewrites}
    assert len(kinds) == len(res.report.rewrites), "a message was rewritten twice"
    # Once the middle is exhausted, the degrading stages rewrite too: results of the protected
    # suffix, and the messages of units shrink_recent released.
    degraded = {s.stage for s in res.report.stages} & set(ref.DEGRADE_STAGES)
    protected = ref.protected_indices(case.messages, cfg, case.pinned)
    assert res.report.truncated_results == [
        r.index for r in res.report.rewrites if r.kind == "truncated"
    ]
    for i, new in out.rewritten.items():
        original, record = case.messages[i], kinds[i]
        assert new is not original
        rest = {k: v for k, v in new.items() if k != "content"}
        assert rest == {k: v for k, v in original.items() if k != "content"}, (
            f"messages[{i}] changed beyond its content"
        )
        stage = {v: k for k, v in ref.REWRITES.items()}[record.kind]
        assert stage in cfg.stages or (i in protected and degraded)
        if record.kind == "deduped":
            check_deduped(case, cfg, out, i, new)
        elif record.kind == "truncated":
            check_truncated(case, cfg, i, new, protected=i in protected)
        else:
            assert record.kind == "media"
            check_media(case, i, new)
        saved = ref.message_tokens(original, cfg.encoding) - ref.message_tokens(new, cfg.encoding)
        assert saved > 0
        if res.report.tokens_before_exact:
            assert record.tokens_saved == saved
    # A middle stage's report counts its own rewrites: those of the caller's middle messages.
    middle = [r for r in res.report.rewrites if r.index not in protected]
    reported = Counter(r.kind for r in middle)
    for s in res.report.stages:
        kind = ref.REWRITES.get(s.stage)
        if kind is not None:
            assert s.units == reported[kind]
            if res.report.tokens_before_exact:
                assert s.tokens_saved == sum(r.tokens_saved for r in middle if r.kind == kind)
    for kind, n in reported.items():
        assert n == 0 or any(ref.REWRITES.get(s.stage) == kind for s in res.report.stages)
    if "shrink_recent" not in degraded:
        # Without released units, truncate_protected_results reports every protected cut.
        cuts = [r for r in res.report.rewrites if r.index in protected]
        stage = [s for s in res.report.stages if s.stage == "truncate_protected_results"]
        assert len(cuts) == sum(s.units for s in stage)
        if res.report.tokens_before_exact:
            assert sum(r.tokens_saved for r in cuts) == sum(s.tokens_saved for s in stage)


def check_shape(case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult) -> None:
    """The caller's messages come back in order, as themselves or rewritten; what is missing
    is exactly the reported dropped spans, each a whole unit (a ring with every result, or one
    plain message); everything else is a reported insertion."""
    unit_spans = {(u.start, u.end) for u in ref.units(case.messages)}
    out = shape(case.messages, res)
    kept = out.positions
    assert kept == sorted(set(kept))
    spans = [tuple(s) for s in res.report.dropped_rings + res.report.dropped_turns]
    assert set(spans) <= unit_spans
    dropped = {i for start, end in spans for i in range(start, end)}
    assert dropped == set(range(len(case.messages))) - set(kept)
    assert len(dropped) == sum(end - start for start, end in spans)
    check_insertions(case, cfg, res, out)
    check_rewrites(case, cfg, res, out)


@properties
@given(plannable)
def test_output_is_input_minus_whole_units_plus_reported_insertions(case: gen.Case) -> None:
    """After every stage the output is the input in order, minus whole dropped units, with
    reported rewrites in place and reported insertions only."""
    for cfg, res in each_stage(case):
        if not isinstance(res, Exception):
            check_shape(case, cfg, res)


def read_ring(call_id: str, result: str | None) -> list[dict[str, Any]]:
    """A read of a.py and its result (none when ``result`` is None)."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
    }
    ring: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": [call]}]
    if result is not None:
        ring.append({"role": "tool", "tool_call_id": call_id, "content": result})
    return ring


def tight(messages: list[Any], less: int, **kw: Any) -> rb.AssemblyConfig:
    """A config whose budget is ``less`` tokens under the session's own count."""
    return rb.AssemblyConfig(
        model_input_limit=rb.count_tokens(messages) - less,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=0,
        recent_user_turns=1,
        **kw,
    )


@pytest.mark.parametrize(
    "later",
    [
        pytest.param(None, id="the later call was never answered (a synthesized result)"),
        pytest.param("short error", id="the later result is dropped, the older ring held back"),
    ],
)
def test_a_stub_points_at_a_real_result_the_request_keeps(later: str | None) -> None:
    """The older of two reads of a.py is stubbed only when the newer one is a real result
    that stays in the request; otherwise the only copy of a.py is lost behind a stub that
    points at nothing."""
    contents = "file contents " * 200
    if later is None:
        # The newer read has no result: repair gives it a synthesized error.
        messages = [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "goal"},
            *read_ring("r1", contents),
            *read_ring("r2", None),
            {"role": "user", "content": "next"},
        ]
        cfg = tight(messages, 30, on_pairing_error="synthesize_error_results")
    else:
        # The older read failed briefly (held back until drop_error_rings); the newer read's
        # ring is the one drop_rings takes.
        messages = [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "goal"},
            *read_ring("r1", "Error: the file is locked, " + "retry later " * 20),
            *read_ring("r2", contents),
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "next"},
        ]
        cfg = tight(messages, 100)
    res = rb.Assembler(cfg).assemble(messages)
    case = gen.Case(messages, None, {}, cfg.budget)
    check_shape(case, cfg, res)


# 3. Protection ------------------------------------------------------------------------------


def check_protected(case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult) -> None:
    """Every protected message is in the output as the caller's own object (never rewritten);
    the leading instructions open the request, and its last message (the turn the model
    answers) still closes it, followed at most by the synthesized results it needed. Once the
    middle is exhausted, the suffix may degrade as reported, and only so: with
    ``shrink_recent`` what the floors protect is kept, with ``truncate_protected_results`` a
    protected tool result not pinned may stand cut in its place."""
    lead = next(i for i, m in enumerate(case.messages) if m["role"] not in ref.INSTRUCTION)
    goal = next(i for i, m in enumerate(case.messages) if m["role"] == "user")
    last = len(case.messages) - 1
    stages = {s.stage for s in res.report.stages}
    floors = cfg
    if "shrink_recent" in stages:
        floors = dataclasses.replace(
            cfg,
            recent_tool_rings=min(cfg.recent_tool_rings, cfg.min_recent_tool_rings),
            recent_user_turns=min(cfg.recent_user_turns, cfg.min_recent_user_turns),
        )
    protected = ref.protected_indices(case.messages, floors, case.pinned)
    cut = {r.index for r in res.report.rewrites} if stages & set(ref.DEGRADE_STAGES) else set()
    lay, _ = ref.prepare(case.messages, cfg, case.pinned)
    pinned = {lay.work.source[w] for w in lay.pin}
    assert goal in protected or "first_user_message" not in cfg.pin
    assert last in protected
    out_ids = {id(m) for m in res.messages}
    out = shape(case.messages, res)
    positions = set(out.positions)
    for i in protected:
        if i in cut and i not in pinned and case.messages[i]["role"] == "tool":
            assert i in positions, f"protected message {i} is missing"
            continue
        assert id(case.messages[i]) in out_ids, f"protected message {i} is missing"
    assert all(a is b for a, b in zip(res.messages[:lead], case.messages[:lead], strict=True))
    closing = [m for m in res.messages if m.get("content") != ref.SYNTHESIZED_RESULT_TEXT]
    ends = case.messages[last] if last not in cut else out.rewritten.get(last, case.messages[last])
    assert closing[-1] is ends, "the request no longer ends with its last turn"


@properties
@given(plannable)
def test_protected_prefix_and_suffix_are_kept_as_is(case: gen.Case) -> None:
    """After every stage the protected part is the caller's own, unmodified objects."""
    snapshot = copy.deepcopy(case.messages)
    for cfg, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        check_protected(case, cfg, res)
        assert case.messages == snapshot


@st.composite
def user_speaks_last(draw: st.DrawFn) -> gen.Case:
    """A scheduled run: rules, the agent's rings, then the user's first (and only) message."""
    rings = draw(st.lists(gen.tool_ring(), min_size=1, max_size=4))
    user = draw(gen.user_message(images=False))
    msgs = [{"role": "system", "content": "You run the nightly digest."}]
    msgs += [m for ring in rings for m in ring] + [user]
    policy = draw(gen.policies())
    full = rb.count_tokens(msgs, encoding=policy["encoding"])
    return gen.Case(msgs, None, policy, gen.budget_for(full, draw(gen.fractions)), (), full)


@properties
@given(user_speaks_last())
def test_the_request_still_ends_with_the_users_turn(case: gen.Case) -> None:
    """When the user's only message is the last one, insertions (the ledger note) go before it:
    the model still answers the user, and Mistral's serving validator still accepts it."""
    for _, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        assert res.messages[-1] is case.messages[-1], "the request no longer ends with the user"
        check_mistral(res.messages)


# 4. Budget ----------------------------------------------------------------------------------


def check_fits(case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult) -> None:
    report = res.report
    assert report.budget == case.budget
    assert report.tokens_after <= case.budget
    assert (
        rb.count_tokens(res.messages, encoding=cfg.encoding, tools=res.tools) == report.tokens_after
    )
    if report.tokens_before_exact:
        assert report.tokens_before == case.full_tokens, "tokens_before is not the input's count"
    else:
        assert report.tokens_before >= case.full_tokens, "tokens_before is not an upper bound"
    assert sum(report.bucket_tokens.values()) == report.tokens_after
    assert (res.tools is None) == (case.tools is None or report.tools_dropped)


def check_fails_closed(case: gen.Case, cfg: rb.AssemblyConfig, err: rb.BudgetExceededError) -> None:
    """The error names the smallest budget that fits: at err.tokens the same policy assembles
    a request of exactly that size, one token less still fails."""
    assert err.budget == case.budget
    assert err.tokens > case.budget
    assert sum(err.bucket_tokens.values()) == err.tokens
    enough = rb.Assembler(case.config(stages=cfg.stages, model_input_limit=err.tokens))
    res = enough.assemble(case.messages, case.tools, pinned=case.pinned)
    # A cut result is planned at max_tool_result_tokens and comes out at most that: the
    # request made at err.tokens may be a little smaller than the plan that needed it.
    cut = [r for r in res.report.rewrites if r.kind == "truncated"]
    if cut:
        assert res.report.tokens_after <= err.tokens
    else:
        assert res.report.tokens_after == err.tokens
        assert res.report.bucket_tokens == err.bucket_tokens
    if err.tokens > 1:
        short = rb.Assembler(case.config(stages=cfg.stages, model_input_limit=err.tokens - 1))
        with pytest.raises(rb.BudgetExceededError):
            short.assemble(case.messages, case.tools, pinned=case.pinned)


@properties
@given(plannable)
def test_fits_the_budget_and_recounts_exactly_or_fails_closed(case: gen.Case) -> None:
    """tokens_after ≤ budget and a recount of the output gives tokens_after exactly; otherwise a
    BudgetExceededError whose buckets add up to its tokens, the smallest budget that fits."""
    for cfg, res in each_stage(case):
        if isinstance(res, rb.BudgetExceededError):
            check_fails_closed(case, cfg, res)
        else:
            check_fits(case, cfg, res)


def test_the_budget_error_names_a_budget_that_fits_when_a_result_is_cut() -> None:
    """With truncation the only stage, the error's tokens are a budget at which the same
    assembly fits (the loop plans a cut result at max_tool_result_tokens, its exact size is
    smaller: the error must name what the loop needs, not the smaller exact size)."""
    rows = "".join(f"row {i}\n" for i in range(300))
    messages = [
        {"role": "user", "content": "goal"},
        *read_ring("r1", rows),
        {"role": "assistant", "content": "done"},
    ]
    policy = {
        "recent_tool_rings": 0,
        "recent_user_turns": 1,
        "stages": ("truncate_oversized_results",),
        "max_tool_result_tokens": 200,
        "output_reserve_tokens": 0,
        "safety_margin_tokens": 0,
    }
    case = gen.Case(messages, None, policy, 100, (), rb.count_tokens(messages))
    cfg = case.config()
    with pytest.raises(rb.BudgetExceededError) as err:
        rb.Assembler(cfg).assemble(messages)
    check_fails_closed(case, cfg, err.value)


# 5. Determinism -----------------------------------------------------------------------------


def fingerprint(messages: list[Any], res: Any, *, decisions_only: bool = False) -> Any:
    """What an assembly returned, comparable across runs: kept indices or inserted dicts, the
    report without the wall time; or the error type and text. ``decisions_only`` leaves out the
    numbers the report may give as upper bounds (tokens_before, stage savings) when units the
    plan certainly drops were sized from their bytes."""
    if isinstance(res, Exception):
        return type(res).__name__, str(res)
    where = {id(m): i for i, m in enumerate(messages)}
    items = [where.get(id(m), m) for m in res.messages]
    report = {k: v for k, v in res.report.to_dict().items() if k != "elapsed_s"}
    if decisions_only:
        del report["tokens_before"], report["tokens_before_exact"]
        report["stages"] = [(s["stage"], s["units"]) for s in report["stages"]]
    return items, report, res.tools is None


def assembled(case: gen.Case, cfg: rb.AssemblyConfig) -> Any:
    try:
        return rb.Assembler(cfg).assemble(case.messages, case.tools, pinned=case.pinned)
    except rb.BudgetExceededError as e:
        return e


@properties
@given(plannable)
def test_the_plain_path_assembles_what_the_general_one_does(case: gen.Case) -> None:
    """A call with nothing but messages and tools takes the façade's plain path; an empty
    pin list sends the same call through the general one. Same request, same report, same
    error, cold and warm. The report, made without its dataclass ``__init__``, holds what
    ``__init__`` would have set."""
    asm = rb.Assembler(case.config())
    assert asm._plain and asm._lane
    for _ in range(2):
        results = []
        for pinned in ((), []):
            try:
                results.append(asm.assemble(case.messages, case.tools, pinned=pinned))
            except rb.RingboundError as e:
                results.append(e)
        plain, general = (fingerprint(case.messages, r) for r in results)
        assert plain == general
        for r in results:
            if not isinstance(r, Exception):
                assert vars(r.report) == vars(dataclasses.replace(r.report))


@properties
@given(plannable)
def test_deterministic(case: gen.Case) -> None:
    """Same input and config give the same output and report, from a cold count cache and
    again warm; once every message has been counted the decisions are still the same."""
    for stages in gen.stage_prefixes():
        cfg = case.config(stages=stages)
        _core.cache_clear()
        cold = fingerprint(case.messages, assembled(case, cfg))
        assert fingerprint(case.messages, assembled(case, cfg)) == cold
        rb.count_tokens(case.messages, encoding=cfg.encoding, tools=case.tools)
        counted = fingerprint(case.messages, assembled(case, cfg), decisions_only=True)
        again = fingerprint(case.messages, assembled(case, cfg), decisions_only=True)
        assert counted == again
        _core.cache_clear()
        cold = fingerprint(case.messages, assembled(case, cfg), decisions_only=True)
        assert cold == counted


# 6. Idempotence -----------------------------------------------------------------------------


@properties
@given(plannable)
def test_idempotent(case: gen.Case) -> None:
    """Assembling an assembled request again with the same config returns the same objects,
    runs no stage and repairs nothing."""
    for cfg, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        again = rb.Assembler(cfg).assemble(res.messages, res.tools)
        assert len(again.messages) == len(res.messages)
        assert all(a is b for a, b in zip(again.messages, res.messages, strict=True))
        assert again.report.stages == []
        assert again.report.repairs == []
        assert again.report.ledger_added == []
        assert again.report.tokens_after == res.report.tokens_after


def stable(case: gen.Case) -> rb.Assembler:
    """Cache-stable assembly with the extractive summarizer, the case's policy and budget."""
    return rb.Assembler(case.config(cache_stable=True), summarizer=summarizers.extractive())


#: Stages a replay of the state cannot make again: the compaction is then planned afresh (the
#: same request, and the same state but for its count of compactions).
UNREPLAYABLE = {"truncate_protected_results", "drop_tools_schema"}


@properties
@given(plannable)
def test_idempotent_cache_stable_with_a_summarizer(case: gen.Case) -> None:
    """With cache_stable and a summarizer: the same history assembled again with the state it
    returned makes the same request (its cut reused), and after a compaction the request sits
    at the low-water mark, summary included, or has nothing left in the middle; at most under
    the trigger or the floor it recorded, so the next call does not compact again. Assembling
    the request it returned again (its pins where they went) changes nothing, also when the
    compaction had to degrade the protected part to fit (issue 36, finding 12: it dropped one
    more turn while the suffix ran from the earliest recent ring to the end)."""
    asm = stable(case)
    cfg = asm.config
    try:
        first = asm.assemble(case.messages, case.tools, pinned=case.pinned)
    except rb.BudgetExceededError:
        return
    assert first.state is not None
    again = asm.assemble(case.messages, case.tools, pinned=case.pinned, state=first.state)
    assert fingerprint(case.messages, again)[0] == fingerprint(case.messages, first)[0]
    assert again.tools is first.tools
    assert again.state is not None
    stages = {s.stage for s in first.report.stages}
    if stages & UNREPLAYABLE:
        assert dataclasses.replace(again.state, compactions=0) == dataclasses.replace(
            first.state, compactions=0
        )
    else:
        assert again.report.state == "reused"
        assert again.state == first.state
    if first.state.compactions:
        report = first.report
        trigger = math.floor(cfg.compact_trigger_ratio * cfg.budget)
        assert report.tokens_after <= max(trigger, first.state.floor)
        if not stages & {*ref.DEGRADE_STAGES, "drop_tools_schema"}:
            target = math.floor(cfg.compact_target_ratio * cfg.budget)
            assert report.tokens_after <= target or report.bucket_tokens["middle"] == 0
    if stages & {"drop_tools_schema"}:
        return
    where = {id(m): k for k, m in enumerate(first.messages)}
    pins = [where[id(case.messages[i])] for i in case.pinned if id(case.messages[i]) in where]
    out = asm.assemble(first.messages, first.tools, pinned=pins)
    assert len(out.messages) == len(first.messages)
    assert all(a is b for a, b in zip(out.messages, first.messages, strict=True))
    assert out.report.stages == []


# 7. Monotonicity ----------------------------------------------------------------------------


@properties
@given(plannable, gen.fractions)
def test_monotone_in_the_budget(case: gen.Case, fraction: float) -> None:
    """A larger budget keeps a superset of the caller's messages (as themselves or rewritten),
    and fails only if the smaller one fails too."""
    other = gen.budget_for(case.full_tokens, fraction)
    small, large = (
        case.with_budget(min(case.budget, other)),
        case.with_budget(max(case.budget, other)),
    )
    for (_, lo), (_, hi) in zip(each_stage(small), each_stage(large), strict=True):
        if isinstance(hi, Exception):
            assert isinstance(lo, rb.BudgetExceededError)
            continue
        if isinstance(lo, Exception):
            continue
        assert set(shape(case.messages, lo).positions) <= set(shape(case.messages, hi).positions)


@properties
@given(plannable, gen.fractions)
def test_monotone_in_the_budget_cache_stable_with_a_summarizer(
    case: gen.Case, fraction: float
) -> None:
    """With cache_stable and a summarizer too, a larger budget keeps a superset of the
    caller's messages, and fails only if the smaller one fails too; a message its summary
    note stands for counts as kept. The note is inserted only where it has room (below, the
    units are dropped without one: docs/summaries.md, reason ``no_room``), and its room is
    made by dropping more of the middle: just above that budget the request keeps fewer
    messages, each of them in the span the note summarizes (regression test
    ``test_finding_the_summary_note_appears_above_a_budget_in_place_of_kept_messages``)."""
    other = gen.budget_for(case.full_tokens, fraction)
    small, large = (
        case.with_budget(min(case.budget, other)),
        case.with_budget(max(case.budget, other)),
    )
    outcomes = []
    for c in (small, large):
        try:
            outcomes.append(stable(c).assemble(c.messages, c.tools, pinned=c.pinned))
        except rb.BudgetExceededError as e:
            outcomes.append(e)
    lo, hi = outcomes
    if isinstance(hi, Exception):
        assert isinstance(lo, rb.BudgetExceededError)
        return
    if isinstance(lo, Exception):
        return
    kept = set(shape(case.messages, hi).positions)
    if hi.report.summarized:
        assert hi.report.summary is not None
        kept |= set(range(*hi.report.summary.span))
    assert set(shape(case.messages, lo).positions) <= kept


# 8. The input is never mutated ---------------------------------------------------------------


@properties
@given(st.one_of(gen.cases(missing_results=True, cheap=True), gen.cases(missing_results=True)))
def test_input_is_never_mutated(case: gen.Case) -> None:
    """Whatever the outcome (result, budget error, pairing error), the caller's list, its
    message objects and its tools are exactly as they were."""
    messages, objects = copy.deepcopy(case.messages), list(case.messages)
    tools = copy.deepcopy(case.tools)
    for stages in gen.stage_prefixes():
        try:
            rb.Assembler(case.config(stages=stages)).assemble(
                case.messages, case.tools, pinned=case.pinned
            )
        except (rb.BudgetExceededError, rb.PairingError):
            pass
        assert case.messages == messages
        assert len(case.messages) == len(objects)
        assert all(a is b for a, b in zip(case.messages, objects, strict=True))
        assert case.tools == tools


# 9. Side-effect ledger ----------------------------------------------------------------------


def expected_status(messages: list[Any], start: int, end: int, call_id: str) -> str:
    result = next((m for m in messages[start + 1 : end] if m["tool_call_id"] == call_id), None)
    if result is None or ref.texts(result)[:1] == [ref.SYNTHESIZED_RESULT_TEXT]:
        return "not_completed"
    return "error" if ref.looks_like_error(result) else "ok"


def dropped_side_effects(
    messages: list[Any], res: rb.AssemblyResult, cfg: rb.AssemblyConfig
) -> list[ref.Entry]:
    """The ledger entry each dropped side-effecting call must have: tool, id, identifying
    arguments, how it ended, its idempotency key, and its turn (user messages before it)."""
    out = []
    for start, end in res.report.dropped_rings:
        turn = sum(1 for m in messages[:start] if m["role"] == "user")
        for call in messages[start]["tool_calls"]:
            name = call["function"]["name"]
            if name in cfg.side_effect_tools:
                arguments = call["function"]["arguments"]
                args = ref.ledger_args(arguments, cfg.ledger_fields.get(name))
                status = expected_status(messages, start, end, call["id"])
                key = ref.idempotency_key(arguments)
                out.append(ref.Entry(name, call["id"], args, status, key, turn=turn))
    return out


def note_entries(out: list[Any]) -> list[ref.Entry]:
    notes = ledger_notes(out)
    assert len(notes) <= 1
    if not notes:
        return []
    entries = ref.parse_note(notes[0])
    assert entries is not None, "the ledger note does not parse"
    return entries


def check_ledger(messages: list[Any], res: rb.AssemblyResult, cfg: rb.AssemblyConfig) -> None:
    if "side_effect_ledger" not in cfg.pin:
        assert ledger_notes(insertions(messages, res.messages)) == []
        return
    entries = note_entries(res.messages)
    for entry in dropped_side_effects(messages, res, cfg):
        assert entry in entries, f"dropped call missing from the ledger: {entry.line()}"
    assert res.report.ledger_entries == len(entries)


@properties
@given(plannable)
def test_every_dropped_side_effecting_call_is_in_the_ledger_note(case: gen.Case) -> None:
    """Each dropped call to a side_effect_tools tool has its entry (tool, id, identifying
    arguments, how it ended) in the note; without the side_effect_ledger pin no note appears."""
    for cfg, res in each_stage(case):
        if not isinstance(res, Exception):
            check_ledger(case.messages, res, cfg)


@rounds
@given(
    gen.cases(missing_results=True, repair=True, pins=False),
    st.lists(gen.tool_ring(), min_size=1, max_size=5),
    gen.between(0.05, 1.0),
)
def test_the_ledger_survives_repeated_compactions(
    case: gen.Case, new_rings: list[list[dict[str, Any]]], shrink: float
) -> None:
    """Assemble, append new rings, assemble the output again at a smaller budget: every entry of
    the first note is still in the second, and the calls dropped the second time are added."""
    pins = tuple(dict.fromkeys((*case.policy["pin"], "side_effect_ledger")))
    case = gen.Case(case.messages, case.tools, {**case.policy, "pin": pins}, case.budget)
    cfg = case.config()
    try:
        first = rb.Assembler(cfg).assemble(case.messages, case.tools)
    except rb.BudgetExceededError:
        assume(False)
    later = [*first.messages, *(m for ring in new_rings for m in ring)]
    budget = max(1, min(case.budget, round(rb.count_tokens(later, encoding=cfg.encoding) * shrink)))
    cfg2 = case.config(model_input_limit=budget)
    try:
        second = rb.Assembler(cfg2).assemble(later)
    except rb.BudgetExceededError:
        assume(False)
    before, after = note_entries(first.messages), note_entries(second.messages)
    assert all(e in after for e in before), "an earlier ledger entry was lost"
    check_ledger(later, second, cfg2)


# Summaries ----------------------------------------------------------------------------------


def check_summary(case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult) -> None:
    """A summary note is the report's, stands for exactly the units dropped, and sits right
    after the ledger note, else right after the pinned goal (unless the goal closes the
    request), else right after the leading instructions."""
    out = shape(case.messages, res)
    report = res.report
    if "summarize" not in cfg.stages:
        assert report.summary is None and not report.summarized
    dropped = len(report.dropped_rings) + len(report.dropped_turns)
    if report.summary is not None:
        assert report.summary.units == dropped, (
            f"the summary stands for {report.summary.units} units, {dropped} were dropped"
        )
    notes = [k for k, (kind, _) in enumerate(out.order) if kind == "summary"]
    assert len(notes) == (1 if report.summarized else 0)
    if not notes:
        return
    at = notes[0]
    assert dropped > 0
    assert ("summarize", report.summary.units) in [(s.stage, s.units) for s in report.stages]  # type: ignore[union-attr]
    before = out.order[at - 1] if at else None
    goal = next(i for i, m in enumerate(case.messages) if m["role"] == "user")
    if any(kind == "ledger" for kind, _ in out.order) or (
        "side_effect_ledger" in cfg.pin
        and any(is_ledger_note(case.messages[i]) for i in kept_indices(case, res))
    ):
        assert before is not None and (
            before[0] == "ledger" or is_ledger_note(case.messages[before[1]])  # type: ignore[index]
        ), f"the summary note is not right after the ledger note: {out.order}"
    elif "first_user_message" in cfg.pin and goal + 1 < len(case.messages):
        assert before == ("keep", goal), (
            f"the summary note is not right after the goal: {out.order}"
        )
    else:
        assert all(
            kind == "keep" and case.messages[i]["role"] in ref.INSTRUCTION  # type: ignore[index]
            for kind, i in out.order[:at]
        ), f"the summary note is not right after the leading instructions: {out.order}"


@pytest.mark.parametrize(
    ("answer", "fallback"), [("short", "extractive"), ("", "none"), ("", "extractive")]
)
def test_the_report_counts_the_summary_note_it_wrote(answer: str, fallback: str) -> None:
    """When the summary note is smaller than the room reserved for it, or not written at all
    (the summarizer answers nothing and there is no fallback), tokens_after is what the
    request costs and the buckets add up to it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for k in range(6):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "send_email", "arguments": f'{{"to": "a{k}@example.com"}}'},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "sent " * 100},
        ]
    messages.append({"role": "assistant", "content": "ok"})
    policy = {
        "recent_tool_rings": 1,
        "recent_user_turns": 0,
        "side_effect_tools": ("send_email",),
        "output_reserve_tokens": 0,
        "safety_margin_tokens": 0,
        "summary_fallback": fallback,
    }
    case = gen.Case(messages, None, policy, 600, (), rb.count_tokens(messages))
    cfg = case.config()
    res = rb.Assembler(cfg, summarizer=lambda _: answer).assemble(messages)
    assert res.report.summary is not None and res.report.dropped_rings
    assert res.report.summary.failed == (answer == "")
    assert res.report.summarized == (answer != "" or fallback != "none")
    check_fits(case, cfg, res)
    assert sum(res.report.bucket_tokens.values()) == res.report.tokens_after


def kept_indices(case: gen.Case, res: rb.AssemblyResult) -> list[int]:
    where = {id(m): i for i, m in enumerate(case.messages)}
    return [where[id(m)] for m in res.messages if id(m) in where]


@properties
@given(plannable)
def test_invariants_hold_with_a_summarizer(case: gen.Case) -> None:
    """With the extractive summarizer, after every stage: the output pairs, is the input minus
    whole units plus reported rewrites and insertions, keeps the protected part, fits and
    recounts exactly, lists every dropped side effect in the ledger, leaves the input alone and
    is deterministic; the summary note stands for the dropped units, right after the ledger
    note or the pinned goal."""
    snapshot = copy.deepcopy(case.messages)
    summarizer = summarizers.extractive()
    for cfg, res in each_stage(case, summarizer):
        if isinstance(res, Exception):
            continue
        assert rb.validate(res.messages) == []
        check_shape(case, cfg, res)
        check_protected(case, cfg, res)
        check_fits(case, cfg, res)
        check_ledger(case.messages, res, cfg)
        check_summary(case, cfg, res)
        again = rb.Assembler(cfg, summarizer=summarizer).assemble(
            case.messages, case.tools, pinned=case.pinned
        )
        assert fingerprint(case.messages, again) == fingerprint(case.messages, res)
        assert case.messages == snapshot


@rounds
@given(
    gen.cases(missing_results=True, repair=True, pins=False, cheap=True),
    st.lists(st.lists(gen.tool_ring(), min_size=1, max_size=3), min_size=2, max_size=4),
)
def test_the_ledger_keeps_every_dropped_call_across_compactions_with_a_summary(
    case: gen.Case, rounds: list[list[list[dict[str, Any]]]]
) -> None:
    """Assemble with the extractive summarizer, append new rings to the output, assemble again,
    several rounds at the same budget: after each round the ledger note lists every
    side-effecting call dropped in any round so far, and there is at most one summary note."""
    pins = tuple(dict.fromkeys((*case.policy["pin"], "side_effect_ledger")))
    cfg = case.config(pin=pins)
    asm = rb.Assembler(cfg, summarizer=summarizers.extractive())
    messages, expected, compactions = case.messages, [], 0
    for new in [[], *rounds]:
        messages = [*messages, *(m for ring in new for m in ring)]
        try:
            res = asm.assemble(messages, case.tools)
        except rb.BudgetExceededError:
            break
        dropped = dropped_side_effects(messages, res, cfg)
        expected += dropped
        compactions += bool(res.report.dropped_rings or res.report.dropped_turns)
        entries = note_entries(res.messages)
        for entry in expected:
            assert entry in entries, f"dropped call missing from the ledger: {entry.line()}"
        assert len([m for m in res.messages if is_summary_note(m)]) <= 1
        messages = res.messages
    assume(compactions >= 2)


# Recovery -----------------------------------------------------------------------------------


@properties
@given(gen.cases(missing_results=True, repair=True, cheap=True))
def test_a_truncated_result_recovers_its_exact_original(case: gen.Case) -> None:
    """The anchor of every truncated result, given as the shortened text itself, as
    expand_message's arguments or as the bare id, finds the exact original text in the
    caller's history."""
    for _, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        out = shape(case.messages, res)
        for r in res.report.rewrites:
            if r.kind != "truncated":
                continue
            original = "".join(ref.texts(case.messages[r.index]))
            text = out.rewritten[r.index]["content"]
            message_id = _core.content_id(original)
            for anchor in (text, json.dumps({"message_id": message_id}), message_id):
                found = recover(case.messages, anchor)
                assert found.text == original
                assert "".join(ref.texts(case.messages[found.index])) == original
                assert found.call_id == case.messages[found.index]["tool_call_id"]


# Repairs ------------------------------------------------------------------------------------


@st.composite
def unanswered_tail(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    """A session that ends with an assistant call nobody answered (the agent crashed)."""
    msgs = draw(gen.sessions(ending="user"))
    ring = draw(gen.tool_ring())
    calls = ring[0]["tool_calls"]
    return [*msgs, ring[0]], [c["id"] for c in calls]


@properties
@given(unanswered_tail())
def test_synthesize_error_results_repairs_a_trailing_unanswered_call(
    session: tuple[list[dict[str, Any]], list[str]],
) -> None:
    """Each unanswered call gets a tool message with the fixed text, in call order, reported in
    report.repairs; everything else is the caller's own objects."""
    msgs, ids = session
    cfg = rb.AssemblyConfig(on_pairing_error="synthesize_error_results")
    res = rb.Assembler(cfg).assemble(msgs)
    k = len(ids)
    assert res.report.repairs == ids
    assert [m["tool_call_id"] for m in res.messages[-k:]] == ids
    assert all(m["content"] == _core.SYNTHESIZED_RESULT_TEXT for m in res.messages[-k:])
    assert all(m["role"] == "tool" for m in res.messages[-k:])
    assert all(a is b for a, b in zip(res.messages[:-k], msgs, strict=True))
    assert rb.validate(res.messages) == []
    check_mistral(res.messages)


@properties
@given(unanswered_tail())
def test_fail_closed_refuses_a_trailing_unanswered_call(
    session: tuple[list[dict[str, Any]], list[str]],
) -> None:
    """The default policy raises PairingError naming every unanswered call (missing_result)."""
    msgs, ids = session
    with pytest.raises(rb.PairingError) as err:
        rb.Assembler(rb.AssemblyConfig()).assemble(msgs)
    issues = err.value.issues
    assert {i.kind for i in issues} == {"missing_result"}
    assert sorted(i.call_id for i in issues) == sorted(ids)
    assert {i.index for i in issues} == {len(msgs) - 1}


# Threads ------------------------------------------------------------------------------------


@settings(parent=properties, max_examples=max(5, settings.default.max_examples // 10))
@given(
    st.lists(gen.sessions(cheap=True), min_size=4, max_size=8),
    gen.policies(cheap=True),
    gen.fractions,
)
def test_one_assembler_shared_by_four_threads(
    sessions: list[list[dict[str, Any]]], policy: dict[str, Any], fraction: float
) -> None:
    """One Assembler used by 4 threads at once gives what sequential runs give."""
    largest = max(rb.count_tokens(s, encoding=policy["encoding"]) for s in sessions)
    cfg = rb.AssemblyConfig(**{**policy, "model_input_limit": gen.budget_for(largest, fraction)})
    asm = rb.Assembler(cfg)

    def run(k: int) -> Any:
        try:
            return fingerprint(sessions[k], asm.assemble(sessions[k]))
        except rb.BudgetExceededError as e:
            return fingerprint(sessions[k], e)

    # A first pass warms the cache: a cold assembly may report a bound where a warm one
    # reports the exact count (``tokens_before``, stage savings), and threads run warm.
    for k in range(len(sessions)):
        run(k)
    expected = [run(k) for k in range(len(sessions))]
    jobs = [k for _ in range(3) for k in range(len(sessions))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(run, jobs))
    assert got == [expected[k] for k in jobs]
