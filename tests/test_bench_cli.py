"""``ringbound bench``, run as a user runs it (a child process): the table and the JSON, the
budget options, the progress bar, and how it reports a session it cannot assemble while still
measuring the others. ``percentile`` and ``Progress`` are checked directly."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ringbound as rb
from ringbound.cli import bench


def run(*args: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "ringbound", "bench", *map(str, args)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    # Decoded by hand: text mode would turn the bar's carriage returns into newlines.
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def session(rings: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Summarize the logs."},
    ]
    for i in range(rings):
        call = {
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": "read_log", "arguments": "{}"},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"log line {i} " * 40},
        ]
    return messages


@pytest.fixture
def sessions(tmp_path: Path) -> list[Path]:
    paths = []
    for name, rings in (("small.json", 4), ("large.json", 40)):
        path = tmp_path / name
        path.write_text(json.dumps(session(rings)), encoding="utf-8")
        paths.append(path)
    return paths


def test_table_has_one_row_per_session(sessions: list[Path]) -> None:
    proc = run(*sessions, "--budget", 2_000, "--repeat", 3)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["session", "messages", "tokens", "kept"]
    for path, rings in zip(sessions, (4, 40), strict=True):
        row = next(line for line in lines if line.startswith(path.name)).split()
        assert int(row[1]) == 2 + 2 * rings
        assert int(row[2].replace(",", "")) == rb.count_tokens(session(rings))
        assert int(row[3].replace(",", "")) <= 2_000
    assert "budget 2,000" in proc.stdout and "3 warm runs" in proc.stdout
    assert proc.stderr == ""  # short run, stdout not a terminal: no progress bar


def test_json_reports_every_measurement(sessions: list[Path]) -> None:
    proc = run(*sessions, "--budget", 2_000, "--repeat", 5, "--json")
    assert proc.returncode == 0, proc.stderr
    small, large = json.loads(proc.stdout)
    assert small["session"] == str(sessions[0])
    assert large["tokens"] == rb.count_tokens(session(40))
    assert large["tokens_after"] <= large["budget"] == 2_000
    for r in (small, large):
        assert r["runs"] == 5
        assert 0 < r["p50_s"] <= r["p99_s"]
        assert r["cold_s"] > 0
        assert r["warm_tokens_per_s"] == pytest.approx(r["tokens"] / r["p50_s"])
        assert r["cold_tokens_per_s"] == pytest.approx(r["tokens"] / r["cold_s"])


def test_limit_keeps_reserve_and_margin(sessions: list[Path]) -> None:
    proc = run(sessions[0], "--limit", 128_000, "--repeat", 1, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["budget"] == 128_000 - 8192 - 1024
    # As for assemble: a limit too small for the defaults keeps a quarter for the answer
    # and a thirty-second for the margin.
    proc = run(sessions[0], "--limit", 20_000, "--repeat", 1, "--json")
    assert json.loads(proc.stdout)[0]["budget"] == 20_000 - 5000 - 625


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--budget", 100, "--limit", 100), "not allowed with argument"),
        (("--repeat", 0), "must be at least 1"),
    ],
)
def test_bad_options_are_usage_errors(sessions: list[Path], args: Any, message: str) -> None:
    proc = run(sessions[0], *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_progress_bar_on_request(sessions: list[Path]) -> None:
    proc = run(*sessions, "--repeat", 4, "--progress", "always")
    assert proc.returncode == 0, proc.stderr
    # Two sessions, one cold run and four warm runs each; the last redraw is always shown.
    assert "\r[" + "#" * bench.BAR_WIDTH + "] 10/10 large.json" in proc.stderr
    assert proc.stderr.endswith("\n")
    assert "[" not in proc.stdout.splitlines()[0]


def test_a_bad_session_is_reported_and_the_others_measured(
    sessions: list[Path], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(session(3)[:-1]), encoding="utf-8")  # last call unanswered
    proc = run(broken, sessions[0], "--repeat", 2)
    assert proc.returncode == 2
    assert f"error: {broken}: PairingError" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "small.json" in proc.stdout and "broken.json" not in proc.stdout
    repaired = run(broken, "--repeat", 2, "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    assert json.loads(repaired.stdout)[0]["messages"] == 7


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert bench.percentile(values, 50) == 50.0
    assert bench.percentile(values, 99) == 99.0
    assert bench.percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert bench.percentile([7.0], 50) == 7.0


def test_progress_auto_appears_once_the_run_is_long(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    bar = bench.Progress(total=3, mode="auto", stream=err, stdout=io.StringIO())
    bar.advance("a")
    assert err.getvalue() == ""  # not a terminal, not long yet
    monkeypatch.setattr(bench, "LONG_RUN_S", 0.0)
    bar.advance("b")
    bar.advance("c")
    bar.close()
    assert err.getvalue().endswith("] 3/3 c\x1b[K\n")
    never = bench.Progress(total=1, mode="never", stream=err, stdout=io.StringIO())
    monkeypatch.setattr(never, "start", 0.0)
    never.advance("x")
    assert "x" not in err.getvalue()


class Spy(rb.Assembler):
    """Records how many messages each assembly got, and how many were cached before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, int]] = []

    def assemble(self, messages: list[Any], *args: Any, **kwargs: Any) -> rb.AssemblyResult:
        self.calls.append((len(messages), rb._core.cache_len()))
        return super().assemble(messages, *args, **kwargs)


def test_warm_runs_time_a_new_last_turn_on_the_cached_history(sessions: list[Path]) -> None:
    cfg = rb.AssemblyConfig(model_input_limit=2_000, output_reserve_tokens=0)
    spy = Spy(cfg)
    results, failures = bench.bench_sessions(spy, [str(sessions[1])], 3, "never")
    assert failures == [] and results[0].runs == 3
    full, history = 82, 80  # the last turn is the last ring
    cold, *warm = spy.calls
    assert cold == (full, 0)  # nothing cached
    assert [n for n, _ in warm] == [history, full] * 3
    for (_, before_prime), (_, before_timed) in zip(warm[::2], warm[1::2], strict=True):
        assert before_prime == 0  # each round starts from an empty cache ...
        assert 0 < before_timed  # ... and the timed run finds the history cached
