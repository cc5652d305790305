"""The ``ringbound`` command, run as a user runs it (``python -m ringbound ...`` in a child
process): assemble, validate, count and demo, and how it fails (exit 2, ``error:`` on stderr,
no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
    assert "tokens   " in proc.stderr and f"(budget {total // 2})" in proc.stderr
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
        pytest.param(("--budget", 0), ("ConfigError", "model_input_limit"), id="budget-zero"),
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
    assert_clean_error(run("assemble", src, "--config", bad), "ConfigError", "recent_tool_ringz")
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


@pytest.mark.parametrize("command", ["assemble", "validate", "count"])
def test_missing_file(tmp_path: Path, command: str) -> None:
    assert_clean_error(run(command, tmp_path / "absent.json"), "absent.json")


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
        messages, system = rb.providers.adapter("anthropic").from_canonical(messages)
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
