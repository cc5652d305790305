"""``ringbound inspect`` and the context map: the terminal drawing against snapshots at a fixed
width, the map against the report on every real session of the corpus and a 200-turn session
per provider (buckets that add up to ``tokens_after``, kept and dropped marks that are the
report's, under a second warm), and the command's JSON and bad input."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from canonical_writers import from_canonical
from test_corpus import (
    SWE_AGENT_SIDE_EFFECTS,
    SWE_GYM_SIDE_EFFECTS,
    swe_agent,
    swe_agent_messages,
    swe_gym,
    tau_bench,
    without_null_parameters,
)

import ringbound as rb
from ringbound.cli.demo import AIRLINE_SIDE_EFFECT_TOOLS
from ringbound.cli.inspect import grid_cells, inspect_session, plain, rich_view
from ringbound.cli.main import main
from ringbound.cli.session import Session, load_session
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session
from ringbound.context_map import BUCKETS, ContextMap, context_map
from ringbound.providers import PROVIDERS

BUNDLED = Path(str(resources.files("ringbound") / "data" / "tau_bench_airline_session.json"))
REWRITTEN = {"cut": ("truncated",), "stubbed": ("deduped", "media")}


def config(budget: int, **extra: Any) -> rb.AssemblyConfig:
    return rb.AssemblyConfig(
        model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **extra
    )


def assert_matches_report(m: ContextMap, report: rb.AssemblyReport, exact: bool) -> None:
    """The map says what the report says: its buckets add up to ``tokens_after``, the units
    it marks dropped are exactly the report's dropped spans, its cut and stubbed units hold
    the report's rewrites, and (``exact`` counting) its units' buckets add up to the report's
    prefix, middle and suffix."""
    assert sum(b.tokens for b in m.in_request) == report.tokens_after
    assert [b.name for b in m.buckets] == list(BUCKETS)
    assert all(b.tokens >= 0 for b in m.buckets)
    gone = {
        i for u in m.units if u.mark in ("dropped", "summarized") for i in range(u.start, u.end)
    }
    spans = [*report.dropped_rings, *report.dropped_turns]
    assert gone == {i for s, e in spans for i in range(s, e)}
    for mark, kinds in REWRITTEN.items():
        marked = {u.start for u in m.units if u.mark == mark}
        holding = {
            u.start
            for u in m.units
            if u.mark not in ("dropped", "summarized")
            and any(u.start <= w.index < u.end and w.kind in kinds for w in report.rewrites)
        }
        assert marked == holding if mark == "cut" else marked <= holding
    for u in m.units:
        if u.mark == "kept":
            assert u.stage in (None, "synthesize_error_results")
            assert (u.tokens == u.tokens_before) == (u.stage is None)
        elif u.mark in ("dropped", "summarized"):
            assert u.tokens == 0 and u.stage and u.bucket in ("middle", "recent", "pinned")
        if u.mark == "summarized":
            assert report.summary is not None
            assert report.summary.span[0] <= u.start and u.end <= report.summary.span[1]
    b = report.bucket_tokens
    assert m.bucket("middle") == b["middle"] and m.bucket("recent") == b["suffix"]
    assert m.bucket("system") + m.bucket("pinned") == b["prefix"]
    assert m.bucket("free") == report.budget - report.tokens_after
    if exact:
        sums = dict.fromkeys(("system", "pinned", "middle", "recent"), 0)
        for u in m.units:
            sums[u.bucket] += u.tokens
        assert sums["middle"] == b["middle"] and sums["recent"] == b["suffix"]
        assert sums["system"] + sums["pinned"] == b["prefix"]


def mapped(
    messages: list[Any],
    cfg: rb.AssemblyConfig,
    provider: str = "openai_chat",
    tools: Any = None,
    system: Any = None,
    summarizer: Any = None,
) -> tuple[ContextMap, rb.AssemblyReport] | None:
    try:
        res = rb.Assembler(cfg, provider=provider, summarizer=summarizer).assemble(
            messages, tools, system=system
        )
    except rb.BudgetExceededError:
        return None
    return context_map(res.report, messages, cfg, provider=provider, system=system), res.report


# The terminal drawing ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled_map() -> ContextMap:
    session = load_session(BUNDLED)
    cfg = rb.AssemblyConfig(
        model_input_limit=5000,
        output_reserve_tokens=800,
        safety_margin_tokens=200,
        side_effect_tools=list(AIRLINE_SIDE_EFFECT_TOOLS),
    )
    # A cache of its own: the estimated figures in the snapshots come out the same whatever
    # the tests before it counted.
    m, _ = inspect_session(session, cfg, "openai_chat", summarize=True, cache=rb.CountCache())
    return m


def test_plain_text_matches_its_snapshot(bundled_map: ContextMap, snapshot: Any) -> None:
    assert plain(bundled_map, width=100, name="tau_bench_airline_session.json") == snapshot


def test_terminal_drawing_matches_its_snapshot(bundled_map: ContextMap, snapshot: Any) -> None:
    out = io.StringIO()
    rich_view(bundled_map, out, width=100, name="tau_bench_airline_session.json")
    assert out.getvalue() == snapshot


def test_the_grid_shows_every_bucket_in_proportion(bundled_map: ContextMap) -> None:
    cells = grid_cells(bundled_map, 400)
    assert len(cells) == 400
    shown = {b.name for b in bundled_map.buckets if b.tokens and b.name != "framing"}
    assert shown <= set(cells)
    per_cell = sum(b.tokens for b in bundled_map.buckets) / 400
    for b in bundled_map.buckets:
        if b.tokens > 10 * per_cell:
            assert abs(cells.count(b.name) * per_cell - b.tokens) <= 2 * per_cell, b.name


def test_the_bundled_session_map_marks_summary_and_ledger(bundled_map: ContextMap) -> None:
    assert bundled_map.bucket("summary") > 0 and bundled_map.bucket("ledger") > 0
    assert {u.mark for u in bundled_map.units} == {"kept", "summarized"}


# The map against the report -------------------------------------------------------------------


def test_every_tau_bench_session_maps_to_its_report(corpus: Path) -> None:
    mapped_runs = 0
    for s in tau_bench(corpus):
        total = rb.count_tokens(s["traj"])
        for fraction in (0.25, 0.5, 0.75):
            cfg = config(int(total * fraction), side_effect_tools=list(AIRLINE_SIDE_EFFECT_TOOLS))
            got = mapped(s["traj"], cfg)
            if got is not None:
                assert_matches_report(*got, exact=True)
                mapped_runs += 1
    assert mapped_runs > 300


def test_swe_gym_and_swe_agent_sessions_map_to_their_reports(corpus: Path) -> None:
    for s in swe_gym(corpus):
        tools = without_null_parameters(s["tools"])
        total = rb.count_tokens(s["messages"], tools=tools)
        for fraction in (0.5, 0.75):
            cfg = config(
                int(total * fraction),
                side_effect_tools=list(SWE_GYM_SIDE_EFFECTS),
                on_pairing_error="synthesize_error_results",
            )
            got = mapped(s["messages"], cfg, tools=tools)
            assert got is not None
            m, report = got
            assert_matches_report(m, report, exact=True)
            assert m.bucket("tools") > 0
            repaired = [u for u in m.units if u.stage == "synthesize_error_results"]
            assert len(repaired) == 1 and repaired[0].tokens > repaired[0].tokens_before
    for history in swe_agent(corpus).values():
        messages = swe_agent_messages(history)
        total = rb.count_tokens(messages)
        runs = [
            mapped(messages, config(int(total * f), side_effect_tools=list(SWE_AGENT_SIDE_EFFECTS)))
            for f in (0.25, 0.5, 0.75)
        ]
        assert any(runs)
        for got in filter(None, runs):
            assert_matches_report(*got, exact=True)


def claude_code_conversation(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """A Claude Code log as the Anthropic request it rebuilds, read as the Anthropic tests
    read it (``tests/providers/test_anthropic.py``, which imports its siblings)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "providers"))
    spec = importlib.util.spec_from_file_location(
        "anthropic_corpus", Path(__file__).parent / "providers" / "test_anthropic.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look themselves up
    spec.loader.exec_module(module)
    messages, _ = module._conversation(module._events(path))
    return messages


def test_claude_code_sessions_map_to_their_reports(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = "You are Claude Code, Anthropic's official CLI for Claude."
    mapped_runs = 0
    for name in ("representative_messages", "todowrite_examples"):
        path = corpus / "claude-code" / f"{name}.jsonl"
        messages = claude_code_conversation(path, monkeypatch)
        total = rb.count_tokens(messages, "anthropic", system=system)
        for fraction in (0.5, 0.75, 1.0):
            cfg = config(int(total * fraction))
            got = mapped(messages, cfg, provider="anthropic", system=system)
            if got is not None:
                assert_matches_report(*got, exact=False)
                assert got[0].units[0].kind == "system"
                mapped_runs += 1
    assert mapped_runs >= 4


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_200_turn_session_maps_to_its_report_within_a_second(provider: str) -> None:
    messages: Any = agent_session(turns=200)
    system = None
    if provider != "openai_chat":
        messages, system = from_canonical(provider, messages)
    session = Session(messages, None, bare=False, system=system)
    cfg = rb.AssemblyConfig(model_input_limit=40_000, side_effect_tools=list(SIDE_EFFECT_TOOLS))
    inspect_session(session, cfg, provider, summarize=True)  # warm
    start = time.perf_counter()
    m, _ = inspect_session(session, cfg, provider, summarize=True)
    assert time.perf_counter() - start < 1.0
    res = rb.Assembler(cfg, provider=provider, summarizer=rb.summarizers.extractive()).assemble(
        messages, system=system
    )
    assert m == context_map(res.report, messages, cfg, provider=provider, system=system)
    # Providers other than OpenAI's are estimated per unit, so their units' sums are not
    # compared with the report's; their marks and bucket totals are.
    assert_matches_report(m, res.report, exact=provider in ("openai_chat", "openai_responses"))
    assert {"summarized", "kept"} <= {u.mark for u in m.units}
    assert m.bucket("summary") > 0 and m.bucket("ledger") > 0 and m.bucket("reserve") > 0


@pytest.mark.parametrize(
    ("budget", "bucket", "stage"),
    [
        (6000, "middle", "truncate_oversized_results"),
        (1800, "recent", "truncate_protected_results"),
    ],
)
def test_cut_results_are_marked_with_their_stage(budget: int, bucket: str, stage: str) -> None:
    fn = {"name": "read_log"}
    messages: list[Any] = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "go"},
    ]
    for i in range(6):
        c = {"id": f"c{i}", "type": "function", "function": {**fn, "arguments": f'{{"day": {i}}}'}}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [c]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i} log line " * 700},
        ]
    cfg = config(budget, max_tool_result_tokens=500, recent_tool_rings=1)
    got = mapped(messages, cfg)
    assert got is not None
    m, report = got
    assert_matches_report(m, report, exact=True)
    cut = [u for u in m.units if u.mark == "cut"]
    assert cut and {u.bucket for u in cut} == {bucket}
    assert all(u.stage == stage and 0 < u.tokens < u.tokens_before for u in cut)


def test_older_duplicate_reads_are_marked_stubbed() -> None:
    call = {"type": "function", "function": {"name": "read_file", "arguments": '{"p": "a.py"}'}}
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for i in range(6):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{**call, "id": f"c{i}"}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "line of code " * 600},
        ]
    got = mapped(messages, config(3000, recent_tool_rings=1))
    assert got is not None
    m, report = got
    assert_matches_report(m, report, exact=True)
    stubbed = [u for u in m.units if u.mark == "stubbed"]
    assert len(stubbed) == 5 and all(u.stage == "dedupe_superseded_reads" for u in stubbed)
    assert all(0 < u.tokens < u.tokens_before for u in stubbed)


def test_shrink_recent_is_read_back_from_the_report(corpus: Path) -> None:
    shrunk = 0
    for s in tau_bench(corpus)[:60]:
        total = rb.count_tokens(s["traj"])
        got = mapped(s["traj"], config(int(total * 0.25)))
        if got is not None and any(st.stage == "shrink_recent" for st in got[1].stages):
            assert_matches_report(*got, exact=True)
            shrunk += 1
    assert shrunk > 0


# The command ----------------------------------------------------------------------------------


def test_json_gives_the_same_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(BUNDLED), "--budget", "3000", "--summarize", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert list(body["buckets"]) == list(BUCKETS)
    in_request = sum(
        v for k, v in body["buckets"].items() if k not in ("free", "margin", "reserve")
    )
    assert in_request == body["tokens_after"] <= body["budget"] == 3000
    assert {u["mark"] for u in body["units"]} >= {"kept", "summarized"}
    assert body["units"][0]["bucket"] == "system" and body["elapsed_s"] > 0


def test_plain_text_when_stdout_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(BUNDLED), "--budget", "3000", "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out and "S system and developer" in out
    grid = [line for line in out.splitlines() if line and set(line) <= set("STPLZXMRF.~O")]
    assert len(grid) == 4 and all(len(line) == 80 for line in grid)


def test_html_is_written_next_to_the_drawing(tmp_path: Path) -> None:
    page = tmp_path / "map.html"
    assert main(["inspect", str(BUNDLED), "--budget", "3000", "--html", str(page), "--json"]) == 0
    text = page.read_text()
    assert text.startswith("<!doctype html>") and "http" not in text


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["inspect", "/no/such/file.json"], "/no/such/file.json"),
        (["inspect", str(BUNDLED), "--budget", "50"], "BudgetExceededError"),
        (["inspect", str(BUNDLED), "--html", "/no/such/dir/map.html"], "cannot write"),
        (["inspect", str(BUNDLED), "--model", "no-such-model"], "error:"),
    ],
)
def test_bad_input_is_a_typed_error_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_bad_json_on_stdin_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"{nope")))
    assert main(["inspect", "-"]) == 2
    assert "not valid JSON" in capsys.readouterr().err
