"""Fidelity (issue 39): the fact extraction's rules, a smoke run of ``benches/fidelity.py``
(a few real and generated sessions at one budget: the table's structure, sane ranges, ringbound
and the prototypes always sendable, a bad policy below keeping everything) and ``ringbound
simulate --fidelity``."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import ringbound as rb
from ringbound.cli.fidelity import fidelity_rows
from ringbound.cli.main import main
from ringbound.cli.session import Session
from ringbound.cli.simulate import cli_main
from ringbound.fidelity import candidate_values, cut_points, held, recall

REPO = Path(__file__).resolve().parent.parent
BENCHES = REPO / "benches"
BUNDLED = resources.files("ringbound") / "data" / "tau_bench_airline_session.json"


def call(i: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": f"c{i}", "type": "function", "function": function}


def ring(i: int, arguments: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(i, "f", arguments)]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": result},
    ]


# The rules ------------------------------------------------------------------------------------


def test_candidates_are_paths_numbers_ids_and_quoted_values_not_words() -> None:
    args = {
        "cabin": "economy",
        "airport": "JFK",
        "flight": "HAT136",
        "date": "2024-05-20",
        "user": "mia_li_3668",
        "code": "XLOIBM",
        "cmd": "grep -rn 'def main' src/app.py",
        "amount": 1250,
        "small": 12,
        "nested": [{"file": "setup.py"}],
    }
    assert candidate_values(args) == [
        "HAT136",
        "2024-05-20",
        "mia_li_3668",
        "XLOIBM",
        "src/app.py",
        "def main",
        "1250",
        "setup.py",
    ]


def test_a_fact_is_a_value_first_seen_in_a_tool_result() -> None:
    msgs = [
        {"role": "system", "content": "Rules mention POLICY42."},
        {"role": "user", "content": "My id is mia_li_3668."},
        *ring(1, {"user_id": "mia_li_3668"}, "reservations: NO6JO3, ZFA04Y; rules POLICY42"),
        {"role": "assistant", "content": "I will check ZFA04Y."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call(2, "g", {"a": "mia_li_3668", "b": "NO6JO3", "c": "ZFA04Y", "d": "POLICY42"})
            ],
        },
    ]
    # mia_li_3668 came from the user, POLICY42 from the rules; both ids of the reservation
    # list came from the tool, even though the agent repeated one of them since.
    assert [(c.index, c.facts) for c in cut_points(msgs)] == [(5, ("NO6JO3", "ZFA04Y"))]
    assert recall(("NO6JO3", "ZFA04Y"), msgs[4:5]) == 0.5


def test_held_means_verbatim_and_not_inside_a_longer_word() -> None:
    assert held(["1234", "src/a.py"], "ids 12345 and /repo/src/a.py:10") == 1
    assert held(["NO6JO3"], "no6jo3") == 0


def test_a_call_whose_values_no_tool_gave_is_no_cut_point() -> None:
    msgs = [{"role": "user", "content": "Open src/app.py"}, *ring(1, {"p": "src/app.py"}, "x")]
    assert cut_points(msgs) == []


# The bench, small -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bench(corpus: Path) -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCHES))
    try:
        import fidelity

        yield fidelity
    finally:
        sys.path.remove(str(BENCHES))


@pytest.fixture(scope="module")
def smoke(bench: ModuleType) -> dict[str, Any]:
    """Two sessions of each corpus family that has cut points, one generated, at 50%."""
    chosen: list[Any] = []
    for family in ("tau-bench", "swe-gym", "swe-agent"):
        chosen += [s for s in bench.corpus_sessions() if s.family == family][:2]
    chosen += bench.generated_sessions(count=1, messages=50)
    results = bench.sweep(chosen, bench.fs.strategies(), fractions=(0.5,))
    return {r.name: r for r in results[0.5]}


def test_the_smoke_run_covers_each_family(smoke: dict[str, Any], bench: ModuleType) -> None:
    row = smoke["ringbound default"]
    for family in ("tau-bench", "swe-gym", "swe-agent", "generated"):
        assert row.stats(family)["cuts"] > 0, family
    rows = list(smoke.values())
    assert {len(r.outcomes) for r in rows} == {row.stats()["cuts"]}
    table = bench.report({0.5: rows})
    assert table.count("\n| ringbound default |") == 2  # the main table and the family one


def test_shares_are_in_range(smoke: dict[str, Any]) -> None:
    for name, row in smoke.items():
        s = row.stats()
        assert 0 <= s["recall"] <= 1, name
        assert s["held_when_served"] is None or s["recall"] <= s["held_when_served"] <= 1
        assert 0 <= s["refused"] + s["unsendable_or_over"] <= 1, name


def test_ringbound_and_the_prototypes_only_send_requests_that_fit_and_pair(
    smoke: dict[str, Any],
) -> None:
    for name, row in smoke.items():
        if row.kind in ("ringbound", "prototype"):
            s = row.stats()
            assert s["unsendable_or_over"] == 0, name
            assert s["tokens_per_budget"] is None or s["tokens_per_budget"] <= 1, name


def test_a_bad_policy_scores_below_keeping_everything(smoke: dict[str, Any]) -> None:
    everything = smoke["keep everything (no trimming)"].stats()
    masked = smoke["mask every tool result"].stats()
    # Every fact is in the history by construction; the whole history is over the budget.
    assert everything["held_when_served"] == 1.0
    assert everything["unsendable_or_over"] == 1.0 and everything["recall"] == 0.0
    assert masked["held_when_served"] < 0.9 * everything["held_when_served"]


def test_the_measure_is_deterministic(bench: ModuleType) -> None:
    sessions = bench.generated_sessions(count=1, messages=50)
    default = [
        s for s in bench.fs.strategies(langchain=False, litellm=False) if s.kind != "reference"
    ]
    first = bench.sweep(sessions, default, fractions=(0.3,))
    again = bench.sweep(bench.generated_sessions(count=1, messages=50), default, fractions=(0.3,))
    assert [r.outcomes for r in first[0.3]] == [r.outcomes for r in again[0.3]]


# ringbound simulate --fidelity ----------------------------------------------------------------


def run_simulate(*args: str) -> str:
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        assert main(["simulate", *args]) == 0
    finally:
        sys.stdout = stdout
    return out.getvalue()


def test_simulate_fidelity_reports_each_budget() -> None:
    text = run_simulate(str(BUNDLED), "--fidelity")
    lines = text.splitlines()
    assert "tool calls using" in lines[0]
    assert [line.split()[0] for line in lines[2:5]] == ["30%", "50%", "70%"]
    body = json.loads(run_simulate(str(BUNDLED), "--fidelity", "--json"))
    rows = body["rows"]
    assert [r["budget"] for r in rows] == ["30%", "50%", "70%"]
    assert rows[0]["cuts"] > 0
    for r in rows:
        assert 0 <= r["recall"] <= 1 and 0 <= r["refused"] <= 1
    # A larger share of each history never refuses more.
    assert rows[0]["refused"] >= rows[1]["refused"] >= rows[2]["refused"]


@pytest.mark.parametrize("provider", [None, "anthropic", "bedrock_converse"])
def test_simulate_fidelity_with_room_for_everything_holds_every_fact(
    tmp_path: Path, provider: str | None
) -> None:
    """A budget the whole session fits in drops nothing, so every fact is held: the cut
    points are mapped back to the native messages of each format."""
    out = io.StringIO()
    code = cli_main(
        str(BUNDLED), budget=10**6, provider=provider, fidelity=True, json_out=True, out=out
    )
    assert code == 0
    (row,) = json.loads(out.getvalue())["rows"]
    assert row["cuts"] > 0
    assert row["recall"] == 1.0 and row["refused"] == 0.0


def test_fidelity_rows_of_a_session_without_facts_are_empty() -> None:
    session = Session([{"role": "user", "content": "hello"}], tools=None, bare=True)
    (row,) = fidelity_rows(session, rb.AssemblyConfig(), fractions=(0.5,))
    assert row.cuts == 0 and row.recall is None
