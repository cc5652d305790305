"""The ``ringbound`` command, run as a user runs it (``python -m ringbound ...`` in a child
process): assemble, validate, count and demo, and how it fails (exit 2, ``error:`` on stderr,
no traceback)."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from canonical_writers import from_canonical

import ringbound as rb


def run(*args: Any, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringbound", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        check=False,
    )


def call(i: int, name: str) -> dict[str, Any]:
    return {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": name, "arguments": '{"to": "ana@example.com"}'},
    }


def session(rings: int = 10) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Email Ana the report, then summarize the logs."},
    ]
    for i in range(rings):
        name = "send_email" if i == 0 else "read_log"
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call(i, name)]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": "log line " * 40},
        ]
    return messages


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Reads the log.",
            "parameters": {"type": "object", "properties": {"day": {"type": "string"}}},
        },
    }
]


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def assert_clean_error(proc: subprocess.CompletedProcess[str], *texts: str) -> None:
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for text in texts:
        assert text in proc.stderr


def test_assemble_bare_list_writes_a_bare_list(tmp_path: Path) -> None:
    messages = session()
    src = write(tmp_path / "session.json", messages)
    out = tmp_path / "out.json"
    total = rb.count_tokens(messages)
    proc = run("assemble", src, "--budget", total // 2, "-o", out)
    assert proc.returncode == 0, proc.stderr
    # With -o, nothing goes to stdout; the report goes to stderr.
    assert proc.stdout == ""
    assert "tokens   " in proc.stderr and f"saved, budget {total // 2})" in proc.stderr
    assert "stage    drop_rings" in proc.stderr
    written = json.loads(out.read_text())
    assert isinstance(written, list)
    assert rb.validate(written) == []
    assert rb.count_tokens(written) <= total // 2
    # What the command writes is what the library assembles.
    cfg = rb.AssemblyConfig(
        model_input_limit=total // 2, output_reserve_tokens=0, safety_margin_tokens=0
    )
    assert written == rb.Assembler(cfg).assemble(messages).messages


def test_assemble_object_with_tools_writes_the_same_shape(tmp_path: Path) -> None:
    messages = session()
    src = write(tmp_path / "session.json", {"messages": messages, "tools": TOOLS, "meta": 1})
    out = tmp_path / "out.json"
    budget = rb.count_tokens(messages, tools=TOOLS) * 3 // 4
    proc = run("assemble", src, "--budget", budget, "-o", out, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    written = json.loads(out.read_text())
    assert set(written) == {"messages", "tools", "meta"}  # every other field is kept
    assert written["meta"] == 1
    assert written["tools"] == TOOLS
    assert report["budget"] == budget
    assert report["tokens_after"] == rb.count_tokens(written["messages"], tools=TOOLS) <= budget
    assert report["messages_after"] == len(written["messages"])
    assert report["tools_dropped"] is False
    assert set(report["bucket_tokens"]) == {
        "prefix",
        "middle",
        "suffix",
        "tools",
        "insertions",
        "framing",
    }


def test_assemble_without_output_only_reports(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session(2))
    proc = run("assemble", src, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["budget"] == rb.AssemblyConfig().budget
    assert report["messages_after"] == report["messages_before"] == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.json"]


def test_assemble_summarize_writes_a_summary_note(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session(30))
    out = tmp_path / "out.json"
    proc = run("assemble", src, "--budget", 1500, "--summarize", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "summary  " in proc.stderr and "(written)" in proc.stderr
    assembled = json.loads(out.read_text())
    assert any(str(m.get("content")).startswith("[ringbound:summary]") for m in assembled)
    assert rb.validate(assembled) == [] and rb.count_tokens(assembled) <= 1500


def test_assemble_limit_keeps_reserve_and_margin(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session(2))
    proc = run("assemble", src, "--limit", 128_000, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["budget"] == 128_000 - 8192 - 1024
    # A limit too small for the default reserve and margin keeps a quarter and a
    # thirty-second of itself for them instead of refusing.
    proc = run("assemble", src, "--limit", 20_000, "--json")
    assert json.loads(proc.stdout)["budget"] == 20_000 - 5000 - 625


def test_assemble_with_yaml_config(tmp_path: Path) -> None:
    messages = session()
    total = rb.count_tokens(messages)
    config = tmp_path / "ringbound.yaml"
    config.write_text(
        "context_assembly:\n"
        f"  model_input_limit: {total // 2 + 100}\n"
        "  output_reserve_tokens: 60\n"
        "  safety_margin_tokens: 40\n"
        "  side_effect_tools: [send_email]\n",
        encoding="utf-8",
    )
    src = write(tmp_path / "session.json", messages)
    out = tmp_path / "out.json"
    proc = run("assemble", src, "--config", config, "-o", out, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["budget"] == total // 2
    assert report["ledger_entries"] == 1
    written = json.loads(out.read_text())
    assert any("send_email" in str(m["content"]) for m in written[:3])
    # --limit overrides the file's limit; the file's reserve and margin still apply.
    proc = run("assemble", src, "--config", config, "--limit", total, "--json")
    assert json.loads(proc.stdout)["budget"] == total - 100


def test_assemble_repair_flag(tmp_path: Path) -> None:
    messages = session(3)[:-1]  # the last call has no result
    src = write(tmp_path / "session.json", messages)
    assert_clean_error(run("assemble", src), "PairingError", "call_2")
    proc = run("assemble", src, "--repair")
    assert proc.returncode == 0, proc.stderr
    assert "repaired 1 call(s) without result: call_2" in proc.stderr


@pytest.mark.parametrize(
    ("args", "texts"),
    [
        pytest.param(
            ("--budget", 10), ("BudgetExceededError", "budget is 10"), id="budget-too-small"
        ),
        pytest.param(
            ("--limit", 5000, "--reserve", 8192),
            ("ConfigError", "leaves no budget"),
            id="limit-under-reserve",
        ),
        pytest.param(("--model", "no-such-model"), ("ConfigError", "models table"), id="model"),
    ],
)
def test_assemble_errors(tmp_path: Path, args: tuple[Any, ...], texts: tuple[str, ...]) -> None:
    src = write(tmp_path / "session.json", session())
    assert_clean_error(run("assemble", src, *args), *texts)


def test_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session())
    proc = run("assemble", src, "--provider", "cohere")
    assert proc.returncode == 2
    assert "invalid choice: 'cohere'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_assemble_config_errors(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session())
    bad = tmp_path / "bad.yaml"
    bad.write_text("context_assembly:\n  recent_tool_ringz: 2\n", encoding="utf-8")
    assert_clean_error(
        run("assemble", src, "--config", bad),
        "ConfigError",
        "recent_tool_ringz",
        "did you mean recent_tool_rings?",
    )
    assert_clean_error(
        run("assemble", src, "--config", tmp_path / "absent.yaml"), "ConfigError", "absent.yaml"
    )


def test_validate_valid_session(tmp_path: Path) -> None:
    proc = run("validate", write(tmp_path / "s.json", {"messages": session()}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "pairing valid\n"


def test_validate_broken_session_lists_issues(tmp_path: Path) -> None:
    messages = session(3)
    del messages[5]  # the result of call_1
    messages.append({"role": "tool", "tool_call_id": "call_9", "content": "late"})
    proc = run("validate", write(tmp_path / "s.json", messages))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    assert lines[0].startswith("messages[4] missing_result: ")
    assert "call_1" in lines[0]
    assert lines[1].startswith(f"messages[{len(messages) - 1}] orphan_result: ")
    assert "call_9" in lines[1]
    assert proc.stderr == ""


def test_validate_malformed_message(tmp_path: Path) -> None:
    proc = run("validate", write(tmp_path / "s.json", [{"role": "robot", "content": "x"}]))
    assert_clean_error(proc, "InvalidMessageError", "messages[0]", "robot")


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_count_prints_the_library_count(tmp_path: Path, encoding: str) -> None:
    messages = session(4)
    proc = run(
        "count",
        write(tmp_path / "s.json", {"messages": messages, "tools": TOOLS}),
        "--encoding",
        encoding,
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == rb.count_tokens(messages, encoding=encoding, tools=TOOLS)
    assert proc.stdout == f"{int(proc.stdout)}\n"


def test_count_bare_list(tmp_path: Path) -> None:
    proc = run("count", write(tmp_path / "s.json", [{"role": "user", "content": "hello world"}]))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "9\n"


def test_demo() -> None:
    proc = run("demo")
    assert proc.returncode == 0, proc.stderr
    rows = [
        line
        for line in proc.stdout.splitlines()
        if line.rstrip().endswith(tuple("0123456789")) and "valid" in line
    ]
    assert len(rows) >= 3, proc.stdout
    assert "BROKEN" not in proc.stdout
    assert "side-effect-ledger" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize("command", ["assemble", "validate", "count", "simulate"])
def test_missing_file(tmp_path: Path, command: str) -> None:
    """A file that cannot be read is a file error naming the path and the system's reason,
    not a malformed message."""
    absent = tmp_path / "absent.json"
    proc = run(command, absent)
    assert_clean_error(proc)
    assert proc.stderr == f"error: {absent}: No such file or directory\n"
    proc = run(command, tmp_path)  # a directory
    assert_clean_error(proc)
    assert proc.stderr == f"error: {tmp_path}: Is a directory\n"


def test_unwritable_output_and_bench_file_errors(tmp_path: Path) -> None:
    src = write(tmp_path / "s.json", session(2))
    out = tmp_path / "no-such-dir" / "out.json"
    proc = run("assemble", src, "-o", out)
    assert_clean_error(proc)
    assert proc.stderr.endswith(f"error: {out}: No such file or directory\n"), proc.stderr
    proc = run("bench", tmp_path / "absent.json", src, "--repeat", 1, "--progress", "never")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'absent.json'}: FileNotFoundError: No such file or directory" in (
        proc.stderr
    )
    assert "s.json" in proc.stdout  # the readable file still ran


@pytest.mark.parametrize(
    ("content", "text"),
    [
        pytest.param("{not json", "is not valid JSON", id="invalid-json"),
        pytest.param("", "is not valid JSON", id="empty-file"),
        pytest.param('{"msgs": []}', "must hold a list of messages", id="no-messages-key"),
        pytest.param('"hello"', "must hold a list of messages", id="a-string"),
        pytest.param(
            '{"messages": {"role": "user"}}',
            "must hold a list of messages",
            id="messages-not-a-list",
        ),
    ],
)
@pytest.mark.parametrize("command", ["assemble", "validate", "count"])
def test_unreadable_session(tmp_path: Path, command: str, content: str, text: str) -> None:
    src = tmp_path / "s.json"
    src.write_text(content, encoding="utf-8")
    assert_clean_error(run(command, src), "InvalidMessageError", text)


def test_usage_errors_are_argparse_errors() -> None:
    proc = run()
    assert proc.returncode == 2
    assert "usage: ringbound" in proc.stderr
    proc = run("assemble", "x.json", "--budget", "lots")
    assert proc.returncode == 2
    assert "invalid int value" in proc.stderr


def test_calibrate_prints_the_recommendation() -> None:
    sample = Path(__file__).parent / "data" / "usage_sample.jsonl"
    proc = run("calibrate", sample, "--coverage", "0.99")
    assert proc.returncode == 0, proc.stderr
    assert "token_ratio: " in proc.stdout and "safety_margin_tokens: " in proc.stdout


def test_calibrate_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "usage.jsonl"
    bad.write_text('{"local_estimate": 10, "prompt_tokens": 11}\nnot json\n')
    proc = run("calibrate", bad)
    assert proc.returncode == 2 and "line 2" in proc.stderr


def test_simulate_prints_the_three_ways(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session(40))
    proc = run("simulate", src, "--budget", 3000)
    assert proc.returncode == 0, proc.stderr
    for way in ("ringbound stateful", "ringbound stateless", "trim_messages"):
        assert way in proc.stdout


def body(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "temperature": 0.2,
        "tool_choice": "auto",
        **fields,
        "messages": messages,
    }


def test_stdin_to_stdout_keeps_every_other_field() -> None:
    messages = session(30)
    proc = run("assemble", "-", "--limit", 3000, stdin=json.dumps(body(messages, user="u-1")))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {k: v for k, v in out.items() if k != "messages"} == {
        "model": "gpt-4o",
        "temperature": 0.2,
        "tool_choice": "auto",
        "user": "u-1",
    }
    assert rb.validate(out["messages"]) == [] and out["messages"] != messages
    # A small --limit takes a quarter for the answer and a thirty-second for the margin.
    budget = 3000 - 3000 // 4 - 3000 // 32
    assert f"budget   {budget} = limit 3000 - reserve 750 - margin 93" in proc.stderr
    assert rb.count_tokens(out["messages"]) <= budget


def test_dash_output_is_stdout_and_json_is_the_report_alone(tmp_path: Path) -> None:
    src = write(tmp_path / "s.json", body(session(3)))
    proc = run("assemble", src, "-o", "-", "--budget", 100_000)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"] == "gpt-4o"
    assert not (Path.cwd() / "-").exists()
    proc = run("assemble", src, "--json")
    report = json.loads(proc.stdout)  # the report alone: no body mixed in
    assert report["messages_after"] == 8 and proc.stderr == ""


def test_model_sizes_the_request(tmp_path: Path) -> None:
    src = write(tmp_path / "s.json", session(2))
    report = json.loads(run("assemble", src, "--model", "gpt-4.1", "--json").stdout)
    assert report["budget"] == rb.AssemblyConfig.for_model("gpt-4.1").budget
    # The body's own model sizes it when no --model is given ...
    src = write(tmp_path / "b.json", body(session(2), model="gpt-3.5-turbo-0125"))
    report = json.loads(run("assemble", src, "--json").stdout)
    assert report["budget"] == rb.AssemblyConfig.for_model("gpt-3.5-turbo").budget
    # ... and --reserve / --margin override the entry.
    proc = run("assemble", src, "--json", "--reserve", 1000, "--margin", 10)
    assert json.loads(proc.stdout)["budget"] == 16_385 - 1000 - 10


def test_side_effect_tools_flag(tmp_path: Path) -> None:
    messages = session(30)
    src = write(tmp_path / "s.json", messages)
    proc = run("assemble", src, "--budget", 1500, "--json", "--side-effect-tools", "x,send_email")
    assert json.loads(proc.stdout)["ledger_entries"] == 1
    proc = run("assemble", src, "--budget", 1500, "--json")
    assert json.loads(proc.stdout)["ledger_entries"] == 0


def test_a_list_of_sessions_is_picked_by_index_and_key(tmp_path: Path) -> None:
    records = [{"task_id": i, "reward": 1.0, "traj": session(i + 1)} for i in range(3)]
    src = write(tmp_path / "many.json", records)
    assert_clean_error(run("count", src), "a list of 3 sessions", "--session N")
    proc = run("count", src, "--session", 2)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == rb.count_tokens(session(3))
    assert_clean_error(run("count", src, "--session", 3), "out of range")
    assert_clean_error(run("count", src, "--session", 0, "--key", "nope"), "'nope'")
    # Elements that are request bodies themselves (SWE-Gym's) need no key.
    src = write(tmp_path / "bodies.json", [{"id": 1, "messages": session(1), "tools": TOOLS}])
    proc = run("count", src, "--session", 0)
    assert int(proc.stdout) == rb.count_tokens(session(1), tools=TOOLS)
    assert_clean_error(
        run("count", write(tmp_path / "one.json", session(1)), "--session", 0), "holds one session"
    )


def test_version_and_help_are_plain_text() -> None:
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"ringbound {rb.__version__}"
    for args in [("--help",), ("assemble", "--help"), ("count", "--help"), ("bench", "--help")]:
        proc = run(*args)
        assert proc.returncode == 0, proc.stderr
        assert "``" not in proc.stdout and ":class:" not in proc.stdout
    assert "- reads standard input" in run("assemble", "--help").stdout.replace("\n", " ")


def test_a_closed_pipe_is_not_a_traceback() -> None:
    # `ringbound assemble ... | head -1`: the reader closes early.
    proc = subprocess.run(
        f"{sys.executable} -m ringbound demo | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout.startswith("ringbound demo")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


# Request bodies take the gateway's path --------------------------------------------------------

#: The config the flags `--limit 4000 --reserve 500 --margin 0` give a model the table does
#: not know.
FLAGS = ("--limit", 4000, "--reserve", 500, "--margin", 0)
FLAGGED = rb.AssemblyConfig(
    model_input_limit=4000, output_reserve_tokens=500, safety_margin_tokens=0
)


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic"])
def test_a_body_comes_out_as_assemble_body_makes_it(tmp_path: Path, provider: str) -> None:
    """The same bytes as a gateway's ``assemble_body``: kept messages as the file's own
    (indented here, which the dict path would not keep), every other field as it was."""
    messages: Any = session(60)
    system = None
    if provider == "anthropic":
        messages, system = from_canonical("anthropic", messages)
    doc = body(messages, model="my-own-model", **({"system": system} if system else {}))
    src = tmp_path / "s.json"
    src.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    proc = run("assemble", src, *FLAGS)
    assert proc.returncode == 0, proc.stderr
    res = rb.Assembler(FLAGGED, provider=provider).assemble_body(src.read_bytes())
    assert res.report.tokens_after < res.report.tokens_before
    assert proc.stdout.encode() == res.body + b"\n"


def test_the_bodys_max_tokens_wins_over_reserve(tmp_path: Path) -> None:
    """The provider reserves what the body asks for, so the body's own reserve wins and a
    --reserve it overrides is named on stderr; --reserve sizes bodies that name none."""
    asking = write(tmp_path / "a.json", body(session(30), model="m", max_tokens=2000))
    proc = run("assemble", asking, *FLAGS, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["budget"] == 4000 - 2000
    assert "the body's max_tokens 2000 is the output reserve; --reserve 500" in proc.stderr
    silent = write(tmp_path / "s.json", body(session(30), model="m"))
    proc = run("assemble", silent, *FLAGS, "--json")
    assert json.loads(proc.stdout)["budget"] == 4000 - 500 and proc.stderr == ""
    # --budget stays the history's whole budget whatever the body reserves.
    proc = run("assemble", asking, "--budget", 1500, "--json")
    assert json.loads(proc.stdout)["budget"] == 1500 and proc.stderr == ""
    proc = run("assemble", asking, "--budget", 1500)
    assert "budget   1500 = limit 3500 - reserve 2000 - margin 0" in proc.stderr


def test_a_body_reserve_that_leaves_no_budget_is_the_gateways_error(tmp_path: Path) -> None:
    src = write(tmp_path / "s.json", body(session(3), model="m", max_completion_tokens=3900))
    assert_clean_error(
        run("assemble", src, "--limit", 4000, "--margin", 200),
        "ConfigError",
        "config `model_input_limit`: 4000 leaves no budget for the body's "
        "max_completion_tokens 3900",
    )


def test_a_models_entry_is_sized_for_the_bodys_reserve(tmp_path: Path) -> None:
    """GPT-5 caps its input on its own: the limit follows the body's reserve, as
    ``Assembler.for_models`` sizes the body, so the budget stays under the input cap."""
    src = write(tmp_path / "s.json", body(session(3), model="gpt-5", max_tokens=1000))
    proc = run("assemble", src, "--json")
    assert proc.returncode == 0, proc.stderr
    expected = rb.AssemblyConfig.for_model("gpt-5", output_reserve_tokens=1000).budget
    assert json.loads(proc.stdout)["budget"] == expected
    gateway = rb.Assembler.for_models(provider="openai_chat").assemble_body(src.read_bytes())
    assert gateway.report.budget == expected


# Exact figures --------------------------------------------------------------------------------


def tokens_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("tokens   "))


def test_assemble_prints_the_exact_count_not_a_bound(tmp_path: Path) -> None:
    """A budget far under the session makes the library's tokens_before an estimate (the
    rings it certainly drops are sized from their bytes at a sampled rate); the command
    prints the exact count, the same as ``count``'s, and what was saved."""
    messages = session(200)
    for k, m in enumerate(messages[3::2]):  # results the count cache has not all seen
        m["content"] = f"log {k}: " + "line " * (20 + k)
    cfg = rb.AssemblyConfig(model_input_limit=1500, output_reserve_tokens=0, safety_margin_tokens=0)
    library = rb.Assembler(cfg, cache=rb.CountCache()).assemble(messages).report
    assert not library.tokens_before_exact  # the case
    exact = rb.count_tokens(messages)
    src = write(tmp_path / "s.json", messages)
    proc = run("assemble", src, "--budget", 1500, "-o", tmp_path / "out.json")
    assert proc.returncode == 0, proc.stderr
    after = library.tokens_after
    assert tokens_line(proc.stderr) == (
        f"tokens   {exact} -> {after} ({exact - after} saved, budget 1500)"
    )
    assert "at most" not in proc.stderr
    # Each stage's own saving is a bound here: the stage is listed with its units only.
    stages = [line for line in proc.stderr.splitlines() if line.startswith("stage    ")]
    assert "stage    drop_rings: " in proc.stderr
    assert not [line for line in stages if "saved" in line], stages
    assert int(run("count", src).stdout) == exact
    report = json.loads(run("assemble", src, "--budget", 1500, "--json").stdout)
    assert report["tokens_before_counted"] == exact
    assert report["tokens_before"] == library.tokens_before  # the library's own, as given


def test_assemble_prints_stage_savings_when_they_are_exact(tmp_path: Path) -> None:
    messages = session(10)
    total = rb.count_tokens(messages)
    src = write(tmp_path / "s.json", messages)
    proc = run("assemble", src, "--budget", total - 100, "--json")
    report = json.loads(proc.stdout)
    assert report["tokens_before_exact"] and report["tokens_before"] == total
    proc = run("assemble", src, "--budget", total - 100, "-o", tmp_path / "o.json")
    (stage,) = report["stages"]
    assert (
        f"stage    {stage['stage']}: {stage['units']} unit(s), {stage['tokens_saved']} tokens saved"
    ) in proc.stderr


def test_summarize_never_prints_a_negative_saving(tmp_path: Path) -> None:
    messages = session(30)
    exact = rb.count_tokens(messages)
    src = write(tmp_path / "s.json", messages)
    proc = run("assemble", src, "--budget", 1500, "--summarize", "-o", tmp_path / "o.json")
    assert proc.returncode == 0, proc.stderr
    assert not re.search(r"-\d", proc.stderr), proc.stderr
    note = json.loads(run("assemble", src, "--budget", 1500, "--summarize", "--json").stdout)
    tokens = note["summary"]["tokens"]
    assert f"stage    summarize: {note['summary']['units']} unit(s), {tokens} tokens added" in (
        proc.stderr
    )
    after = note["tokens_after"]
    assert tokens_line(proc.stderr).startswith(
        f"tokens   {exact} -> {after} ({exact - after} saved"
    )


@pytest.mark.parametrize(
    "provider", ["openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse"]
)
def test_count_is_what_the_assembly_counts(tmp_path: Path, provider: str) -> None:
    """``count`` of a request body, tools included (Bedrock keeps them in toolConfig), is
    the assembly's exact tokens_before."""
    from test_body import provider_body

    if provider == "openai_chat":
        doc: Any = body(session(20), model="m-1", tools=TOOLS)
    else:
        doc, *_ = provider_body(provider, turns=20)
    src = write(tmp_path / "b.json", doc)
    cfg = rb.AssemblyConfig(model_input_limit=2**40, output_reserve_tokens=0)
    report = rb.Assembler(cfg, provider=provider).assemble_body(src.read_bytes()).report
    assert report.tokens_before_exact
    proc = run("count", src, "--provider", provider)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == report.tokens_before


# count and validate: --json, --model, and what the count was made with ------------------------


def test_count_names_its_provider_and_encoding(tmp_path: Path) -> None:
    messages = session(4)
    src = write(tmp_path / "s.json", messages)
    proc = run("count", src)
    assert proc.stdout == f"{rb.count_tokens(messages)}\n"  # the bare number, for scripts
    assert proc.stderr == "tokens of openai_chat with o200k_base, token ratio 1.0\n"
    proc = run("count", src, "--json")
    assert json.loads(proc.stdout) == {
        "tokens": rb.count_tokens(messages),
        "provider": "openai_chat",
        "encoding": "o200k_base",
        "token_ratio": 1.0,
        "model": None,
    }
    assert proc.stderr == ""


def test_count_model_sizes_the_count_as_assemble_does(tmp_path: Path) -> None:
    messages, system = from_canonical("anthropic", session(6))
    src = write(tmp_path / "a.json", {"messages": messages, "system": system})
    entry = rb.models.lookup("claude-sonnet-4-5")
    expected = rb.count_tokens(
        messages,
        "anthropic",
        entry.encoding,
        system=system,
        token_ratio=entry.token_ratio,
    )
    assert expected != rb.count_tokens(messages, "anthropic", system=system, token_ratio=1.0)
    doc = json.loads(run("count", src, "--model", "claude-sonnet-4-5", "--json").stdout)
    assert doc["tokens"] == expected and doc["model"] == "claude-sonnet-4-5"
    assert doc["provider"] == "anthropic"
    default = rb.providers.adapter("anthropic").default_token_ratio
    assert doc["token_ratio"] == (entry.token_ratio or default)
    proc = run("count", src, "--model", "claude-sonnet-4-5")
    assert int(proc.stdout) == expected
    assert "model claude-sonnet-4-5" in proc.stderr and "anthropic" in proc.stderr
    # The body's own model counts it when the table knows it, as it sizes assemble.
    src = write(tmp_path / "b.json", {"model": "claude-sonnet-4-5", **json.loads(src.read_text())})
    assert json.loads(run("count", src, "--json").stdout)["tokens"] == expected
    # --encoding overrides the model's.
    doc = json.loads(run("count", src, "--encoding", "cl100k_base", "--json").stdout)
    assert doc["encoding"] == "cl100k_base"
    assert_clean_error(run("count", src, "--model", "no-such-model"), "ConfigError", "models table")


def test_validate_json_and_model(tmp_path: Path) -> None:
    messages = session(3)
    del messages[5]
    src = write(tmp_path / "s.json", messages)
    proc = run("validate", src, "--json", "--model", "gpt-4o")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["valid"] is False and doc["provider"] == "openai_chat" and doc["model"] == "gpt-4o"
    assert [(i["index"], i["kind"], i["call_id"]) for i in doc["issues"]] == [
        (4, "missing_result", "call_1")
    ]
    proc = run("validate", write(tmp_path / "ok.json", session(2)), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {
        "valid": True,
        "provider": "openai_chat",
        "model": None,
        "issues": [],
    }
    assert_clean_error(run("validate", src, "--model", "no-such-model"), "models table")


# Errors name what the user typed ---------------------------------------------------------------


def assert_usage_error(proc: subprocess.CompletedProcess[str], *texts: str) -> None:
    assert proc.returncode == 2, proc
    assert "usage: ringbound" in proc.stderr and "Traceback" not in proc.stderr
    for text in texts:
        assert text in proc.stderr, proc.stderr


HUGE = "99999999999999999999999"


def test_budget_errors_name_the_flag_and_the_value_typed(tmp_path: Path) -> None:
    """A body's max_tokens is added to --budget to make the limit: an error about that limit
    named a number nobody typed."""
    src = write(tmp_path / "b.json", body(session(3), max_tokens=1000))
    proc = run("assemble", src, "--budget", HUGE)
    assert_usage_error(proc, "argument --budget", f"got {HUGE}")
    assert "100000000000000000000999" not in proc.stderr
    proc = run("assemble", src, "--budget", 0)
    assert_usage_error(proc, "argument --budget", "got 0")
    assert "leaves no budget" not in proc.stderr
    proc = run("assemble", src, "--budget", 2**40)
    assert_clean_error(
        proc, "ConfigError", f"--budget {2**40} plus the body's max_tokens 1000 is over 2**40"
    )


@pytest.mark.parametrize(
    ("command", "args", "flag"),
    [
        *[
            pytest.param("assemble", (flag, value), flag, id=f"assemble{flag}={value}")
            for flag in ("--budget", "--limit", "--reserve", "--margin")
            for value in (HUGE, "-5", "1e999", "nan", "inf")
        ],
        *[
            pytest.param("simulate", (flag, value), flag, id=f"simulate{flag}={value}")
            for flag in ("--budget", "--limit")
            for value in (HUGE, "0", "-5", "nan")
        ],
        *[
            pytest.param("bench", (flag, value), flag, id=f"bench{flag}={value}")
            for flag, value in (("--repeat", HUGE), ("--repeat", "0"), ("--budget", HUGE))
        ],
        *[
            pytest.param("inspect", (flag, value), flag, id=f"inspect{flag}={value}")
            for flag, value in (
                ("--reserve", HUGE),
                ("--margin", "-5"),
                ("--width", HUGE),
                ("--width", "0"),
                ("--budget", "0"),
            )
        ],
        pytest.param("assemble", ("--budget", "\udcff"), "--budget", id="budget-surrogate"),
    ],
)
def test_hostile_numbers_are_usage_errors(
    tmp_path: Path, command: str, args: tuple[str, ...], flag: str
) -> None:
    src = write(tmp_path / "s.json", session(3))
    proc = run(command, src, *args)
    assert_usage_error(proc, f"argument {flag}")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        pytest.param(
            ("simulate", "{src}", "--price-factor", "nan"), "price_factor", id="price-nan"
        ),
        pytest.param(
            ("simulate", "{src}", "--price-factor", "1e999"), "price_factor", id="price-inf"
        ),
        pytest.param(
            ("simulate", "{src}", "--price-factor", HUGE), "price_factor", id="price-huge"
        ),
        pytest.param(("calibrate", "{usage}", "--coverage", "nan"), "coverage", id="coverage-nan"),
        pytest.param(("calibrate", "{usage}", "--coverage", "-1"), "coverage", id="coverage-neg"),
        pytest.param(("calibrate", "{usage}", "--coverage", "inf"), "coverage", id="coverage-inf"),
        pytest.param(("assemble", "{src}", "--session", HUGE), "--session", id="session-huge"),
        pytest.param(("count", "{many}", "--session", HUGE), "out of range", id="index-huge"),
        pytest.param(("count", "{many}", "--session", "-1"), "out of range", id="index-negative"),
        pytest.param(("assemble", "{src}", "--model", "\udcff"), "models table", id="model-sur"),
        pytest.param(("count", "{src}", "--model", "gpt\udcff"), "models table", id="count-model"),
        pytest.param(
            ("validate", "{many}", "--session", 0, "--key", "\udcff"), "key", id="key-sur"
        ),
        pytest.param(
            ("assemble", "{src}", "--side-effect-tools", "x\udcffy"),
            "side_effect_tools",
            id="tools-surrogate",
        ),
        pytest.param(("assemble", "{src}", "--config", "{bad_yaml}"), "cannot read", id="yaml-sur"),
    ],
)
def test_hostile_values_are_typed_errors(tmp_path: Path, args: tuple[Any, ...], text: str) -> None:
    files = {
        "src": write(tmp_path / "s.json", session(3)),
        "many": write(tmp_path / "many.json", [{"id": 1, "traj": session(2), "x": []}]),
        "usage": Path(__file__).parent / "data" / "usage_sample.jsonl",
        "bad_yaml": tmp_path / "bad.yaml",
    }
    files["bad_yaml"].write_bytes(b"context_assembly:\n  encoding: \xed\xa0\x80\n")
    proc = run(*(str(a).format(**files) if isinstance(a, str) else a for a in args))
    assert_clean_error(proc, text)


@pytest.mark.parametrize("command", ["assemble", "validate", "count"])
@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'[{"role": "user", "content": "a\\ud800b"}]', id="escaped-high"),
        pytest.param(b'[{"role": "user", "content": "a\\udc00b"}]', id="escaped-low"),
        pytest.param(b'[{"role": "user", "content": "a\xed\xa0\x80b"}]', id="encoded"),
        pytest.param(b'{"messages": [{"role": "user", "content": "\xff"}]}', id="not-utf8"),
    ],
)
def test_lone_surrogates_on_stdin_are_typed_errors(command: str, data: bytes) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ringbound", command, "-"],
        input=data,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc
    stderr = proc.stderr.decode()
    assert stderr.startswith("error: InvalidMessageError: standard input is not valid JSON")
    assert "Traceback" not in stderr


# Input is read bounded -------------------------------------------------------------------------

#: The address space the child gets: plenty for the interpreter, the extension and one
#: request of max_request_bytes, far less than an unbounded read of /dev/zero takes.
MEMORY_CAP = 1 << 30


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


@pytest.mark.parametrize("command", ["assemble", "validate", "count"])
@pytest.mark.parametrize("source", ["stdin", "file"])
def test_an_endless_input_is_refused_at_the_limit(command: str, source: str) -> None:
    """/dev/zero is refused once max_request_bytes + 1 bytes are read, with the error and
    exit of a body over that limit, quickly and within a memory cap; an unbounded read
    runs out of memory (MemoryError) or of time."""
    argv = [sys.executable, "-m", "ringbound", command, "-" if source == "stdin" else "/dev/zero"]
    start = time.monotonic()
    with open("/dev/zero", "rb") as zero:
        proc = subprocess.run(
            argv,
            stdin=zero if source == "stdin" else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_capped,
            check=False,
        )
    elapsed = time.monotonic() - start
    name = "standard input" if source == "stdin" else "/dev/zero"
    assert_clean_error(proc, "InvalidBodyError", f"{name} is over max_request_bytes = 67108864")
    assert elapsed < 30, elapsed


def test_the_read_limit_is_the_configs(tmp_path: Path) -> None:
    src = write(tmp_path / "s.json", session(3))
    small = tmp_path / "small.yaml"
    small.write_text("context_assembly:\n  max_request_bytes: 100\n", encoding="utf-8")
    assert_clean_error(
        run("assemble", src, "--config", small),
        "InvalidBodyError",
        "is over max_request_bytes = 100",
    )
    assert run("assemble", src, "--json").returncode == 0
