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


def run(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringbound", *map(str, args)],
        capture_output=True,
        text=True,
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
    assert "tokens   " in proc.stdout and f"(budget {total // 2})" in proc.stdout
    assert "stage    drop_rings" in proc.stdout
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
    assert set(written) == {"messages", "tools"}
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
    assert "summary  " in proc.stdout and "(written)" in proc.stdout
    assembled = json.loads(out.read_text())
    assert any(str(m.get("content")).startswith("[ringbound:summary]") for m in assembled)
    assert rb.validate(assembled) == [] and rb.count_tokens(assembled) <= 1500


def test_assemble_limit_keeps_reserve_and_margin(tmp_path: Path) -> None:
    src = write(tmp_path / "session.json", session(2))
    proc = run("assemble", src, "--limit", 20_000, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["budget"] == 20_000 - 8192 - 1024


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
    assert "repaired 1 call(s) without result: call_2" in proc.stdout


@pytest.mark.parametrize(
    ("args", "texts"),
    [
        pytest.param(
            ("--budget", 10), ("BudgetExceededError", "budget is 10"), id="budget-too-small"
        ),
        pytest.param(("--budget", 0), ("ConfigError", "model_input_limit"), id="budget-zero"),
        pytest.param(
            ("--limit", 5000), ("ConfigError", "leaves no budget"), id="limit-under-reserve"
        ),
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


def test_version_is_the_package_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ringbound {rb.__version__}\n"
