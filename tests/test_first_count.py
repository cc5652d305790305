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


def test_waiting_for_an_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(rb.ConfigError, match="encoding"):
        _core.wait_for_tables("p50k_base")
