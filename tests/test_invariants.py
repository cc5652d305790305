"""The invariants of DESIGN §4, each a hypothesis property over generated sessions, checked after
every stage: each assembly runs once per prefix of the stage order, so the request is observed
as it stands after drop_rings, after drop_plain_turns and after drop_error_rings."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import reference as ref
import strategies as gen
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import MistralRequestValidatorV13, ValidationMode

import ringbound as rb
from ringbound import _core

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
MISTRAL = MistralRequestValidatorV13(mode=ValidationMode.serving)


#: Sessions that pair, or only miss results and are repaired: every assembly can plan.
plannable = gen.cases(missing_results=True, repair=True)


def each_stage(case: gen.Case) -> Iterator[tuple[rb.AssemblyConfig, Any]]:
    """``(config, result or BudgetExceededError)`` for each prefix of the stage order."""
    for stages in gen.stage_prefixes():
        cfg = case.config(stages=stages)
        try:
            res = rb.Assembler(cfg).assemble(case.messages, case.tools, pinned=case.pinned)
        except rb.BudgetExceededError as e:
            yield cfg, e
        else:
            yield cfg, res


def kept_indices(messages: list[Any], out: list[Any]) -> list[int]:
    """Original indices of the caller's objects in ``out``, in output order."""
    where = {id(m): i for i, m in enumerate(messages)}
    return [where[id(m)] for m in out if id(m) in where]


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


def check_insertions(case: gen.Case, cfg: rb.AssemblyConfig, res: rb.AssemblyResult) -> None:
    """Insertions are the reported ones: one ledger note, and synthesized results of repairs."""
    added = insertions(case.messages, res.messages)
    notes = [m for m in added if m.get("role") in ref.INSTRUCTION]
    results = [m for m in added if m.get("role") == "tool"]
    assert len(notes) + len(results) == len(added)
    assert len(notes) <= 1
    for note in notes:
        assert "side_effect_ledger" in cfg.pin
        assert note["content"].startswith(ref.MARKER + "\n" + ref.HEADER + "\n")
        assert res.report.ledger_entries == note["content"].count("\n") - 1
    for result in results:
        assert result == ref.synthesized_result(result["tool_call_id"])
    ids = Counter(r["tool_call_id"] for r in results)
    assert not ids - Counter(res.report.repairs)


@properties
@given(plannable)
def test_output_is_input_minus_whole_units_plus_reported_insertions(case: gen.Case) -> None:
    """The caller's objects come back in order; what is missing is exactly the reported dropped
    spans, each a whole unit (a ring with every result, or one plain message)."""
    unit_spans = {(u.start, u.end) for u in ref.units(case.messages)}
    for cfg, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        kept = kept_indices(case.messages, res.messages)
        assert kept == sorted(set(kept))
        spans = [tuple(s) for s in res.report.dropped_rings + res.report.dropped_turns]
        assert set(spans) <= unit_spans
        dropped = {i for start, end in spans for i in range(start, end)}
        assert dropped == set(range(len(case.messages))) - set(kept)
        assert len(dropped) == sum(end - start for start, end in spans)
        check_insertions(case, cfg, res)


# 3. Protection ------------------------------------------------------------------------------


@properties
@given(plannable)
def test_protected_prefix_and_suffix_are_kept_as_is(case: gen.Case) -> None:
    """Every protected message is in the output as the caller's own, unmodified object; the
    leading instructions open the request, and its last message (the turn the model answers)
    still closes it, followed at most by the synthesized results it needed."""
    snapshot = copy.deepcopy(case.messages)
    lead = next(i for i, m in enumerate(case.messages) if m["role"] not in ref.INSTRUCTION)
    goal = next(i for i, m in enumerate(case.messages) if m["role"] == "user")
    last = len(case.messages) - 1
    for cfg, res in each_stage(case):
        if isinstance(res, Exception):
            continue
        protected = ref.protected_indices(case.messages, cfg, case.pinned)
        assert goal in protected or "first_user_message" not in cfg.pin
        assert last in protected
        out_ids = {id(m) for m in res.messages}
        for i in protected:
            assert id(case.messages[i]) in out_ids, f"protected message {i} is missing"
            assert case.messages[i] == snapshot[i]
        assert all(a is b for a, b in zip(res.messages[:lead], case.messages[:lead], strict=True))
        closing = [m for m in res.messages if m.get("content") != ref.SYNTHESIZED_RESULT_TEXT]
        assert closing[-1] is case.messages[last], "the request no longer ends with its last turn"


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


# 7. Monotonicity ----------------------------------------------------------------------------


@properties
@given(plannable, gen.fractions)
def test_monotone_in_the_budget(case: gen.Case, fraction: float) -> None:
    """A larger budget keeps a superset of the caller's messages, and fails only if the smaller
    one fails too."""
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
        assert set(kept_indices(case.messages, lo.messages)) <= set(
            kept_indices(case.messages, hi.messages)
        )


# 8. The input is never mutated ---------------------------------------------------------------


@properties
@given(gen.cases(missing_results=True))
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
    """The ledger entry each dropped side-effecting call must have."""
    out = []
    for start, end in res.report.dropped_rings:
        for call in messages[start]["tool_calls"]:
            name = call["function"]["name"]
            if name in cfg.side_effect_tools:
                args = ref.ledger_args(call["function"]["arguments"], cfg.ledger_fields.get(name))
                status = expected_status(messages, start, end, call["id"])
                out.append(ref.Entry(name, call["id"], args, status))
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


@properties
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
@given(st.lists(gen.sessions(), min_size=4, max_size=8), gen.policies(), gen.fractions)
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

    expected = [run(k) for k in range(len(sessions))]
    jobs = [k for _ in range(3) for k in range(len(sessions))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(run, jobs))
    assert got == [expected[k] for k in jobs]
