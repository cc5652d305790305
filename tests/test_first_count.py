"""A fresh process's first counts: the ``bpe_openai`` backend counts from rank tables laid out at
build time, and builds its encoder's tables (for long pieces) on a thread of its own only once
it meets a long piece; its counts before and after are exact."""

from __future__ import annotations

import json
import os
import platform
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


BIG_CHILD = """
import resource, sys
import ringbound as rb

# Counting one long piece took tiktoken-rs about 48 bytes a byte (a 50 MB run of one letter:
# 2.6 GB and 33 s) while the tables were being built; a fresh process now waits for them and
# counts such a piece in linear time and memory.
limit = 2 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
texts = ["x" * 50_000_000, "中文字符" * 2_000_000, "=" * 3_000 + "a" * 20_000_000]
print([rb.count_text(t, "o200k_base") for t in texts])
"""


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="POSIX resource limits")
def test_a_fresh_process_counts_a_long_piece_in_bounded_memory() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.run(
        [sys.executable, "-c", BIG_CHILD], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    for encoding in ("o200k_base",):
        _core.wait_for_tables(encoding)
    texts = ["x" * 50_000_000, "中文字符" * 2_000_000, "=" * 3_000 + "a" * 20_000_000]
    assert run.stdout.strip() == str([rb.count_text(t, "o200k_base") for t in texts])


THREADS_CHILD = """
import pathlib, sys, time
import ringbound as rb

def builders():
    # The build runs on a thread named after its encoding (Linux shows thread names here).
    tasks = pathlib.Path("/proc/self/task").glob("*/comm")
    return sorted(t.read_text().strip() for t in tasks if "ringbound-" in t.read_text())

rb.count_text("    def parse(self, line):\\n        return line.split(', ')\\n" * 50)
rb.count_text("naïve café, 中文字符, emoji 👋🏽 " * 20)
short = builders()
rb.count_text("abcdefghij" * 30)  # one piece of 300 bytes
for _ in range(200):
    if builders():
        break
    time.sleep(0.01)
import json
import platform
print(json.dumps([short, builders()]))
"""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="thread names under /proc")
def test_the_encoder_tables_are_built_only_for_a_long_piece() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.run(
        [sys.executable, "-c", THREADS_CHILD], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    # Short pieces (text, code, other scripts) start no build; a long one starts it (the build
    # takes most of a second, so the polling sees its thread).
    short, after = json.loads(run.stdout)
    assert short == []
    assert after == ["ringbound-o200k"], after


MEMORY_CHILD = """
import json, sys
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import workload
import ringbound as rb


def kib(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])


# The memory bar's session (benches/compare.py): every text in it a count would meet.
texts = []
for m in workload.session_of_size(10 * workload.MB):
    texts += [m["content"]] if isinstance(m.get("content"), str) else []
    texts += [c["function"]["arguments"] for c in m.get("tool_calls") or []]
start = kib("VmRSS")
rb.warmup(["o200k_base"])
tables = kib("VmRSS") - start
Path("/proc/self/clear_refs").write_text("5")  # the high-water mark starts again here
start = kib("VmRSS")
tokens = sum(rb.count_text(t) for t in texts)
print(json.dumps({
    "tables_kib": tables,
    "count_peak_kib": kib("VmHWM") - start,
    "bytes": sum(len(t.encode()) for t in texts),
    "tokens": tokens,
}))
"""


@pytest.mark.skipif(
    not Path("/proc/self/clear_refs").exists() or platform.libc_ver()[0] != "glibc",
    reason="RSS high-water marks under /proc; memory given back through glibc",
)
def test_the_tables_are_resident_and_their_build_leaves_no_garbage() -> None:
    """``warmup()`` leaves o200k_base's tables resident and little else (45-48 MB: the
    encoder's tables, the 6.8 MB rank block, the regex); the encoder's build frees about as
    much again, which glibc kept in the builder thread's arena until it was given back (71-95
    MB in all). Counting the 8 MB of text of the memory bar's session then adds a fraction of
    a megabyte at its peak (0.1-0.25 MB, the piece tables among it): no page of the rank tables
    left to fault in (3.5 MB of the peak when they were left to the counts), nothing kept per
    piece or per text."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(REPO / "benches")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout)
    assert got["bytes"] > 8_000_000, got
    assert got["tables_kib"] < 60_000, got
    assert got["count_peak_kib"] < 1_500, got
