"""A fresh process's first counts: the ``bpe_openai`` backend's tables are built from the one
copy of each vocabulary on a thread of their own, and its counts before and after are exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ringbound as rb
from ringbound import _core

REPO = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys
import ringbound as rb
from ringbound import _core

texts = json.loads(sys.argv[1])
out = {}
for encoding in ("o200k_base", "cl100k_base"):
    before = [rb.count_text(t, encoding, tokenizer_backend="bpe_openai") for t in texts]
    _core.wait_for_tables(encoding)
    after = [rb.count_text(t, encoding, tokenizer_backend="bpe_openai") for t in texts]
    out[encoding] = [before, after]
print(json.dumps(out))
"""

TEXTS = [
    "hello world",
    "    def parse(self, line):\n        return line.split(', ')\n" * 20,
    "naïve café, 中文字符, emoji 👋🏽, Ελληνικά " * 10,
    "a" * 5_000 + " " * 300 + "=" * 200,
    "aGVsbG8gd29ybGQ=/+Zq9" * 100,
]


def test_first_counts_are_exact_before_and_after_the_tables() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(TEXTS)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    got = json.loads(run.stdout)
    for encoding, (before, after) in got.items():
        want = [rb.count_text(t, encoding, tokenizer_backend="tiktoken") for t in TEXTS]
        assert before == want, encoding
        assert after == want, encoding


FORK_CHILD = """
import os, signal, warnings
import ringbound as rb
from ringbound import _core

warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process, on purpose
text = "    def parse(self, line):\\n        return line.split(', ')\\n" * 50
want = rb.count_text(text, tokenizer_backend="tiktoken")
assert rb.count_text(text) == want  # starts the tables' build on a thread of its own
pid = os.fork()  # while it runs: the child has no such thread
if pid == 0:
    signal.alarm(60)  # a child stuck waiting for a build nobody runs dies instead of hanging
    ok = rb.count_text(text) == want
    _core.wait_for_tables("o200k_base")
    ok = ok and rb.count_text(text) == want
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
_core.wait_for_tables("o200k_base")
assert rb.count_text(text) == want
print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_process_forked_mid_build_builds_its_own_tables() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.run(
        [sys.executable, "-c", FORK_CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "ok\n"


def test_waiting_for_an_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(rb.ConfigError, match="encoding"):
        _core.wait_for_tables("p50k_base")
