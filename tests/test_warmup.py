"""rb.warmup and RINGBOUND_WARMUP: the tables are built before the first request needs them,
and a wrong value is a ConfigError, at import too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ringbound as rb
from ringbound import startup as warmup_module


def test_warmup_builds_each_encoding() -> None:
    took = rb.warmup()
    assert set(took) == {"o200k_base", "cl100k_base"}
    assert all(t >= 0 for t in took.values())
    assert set(rb.warmup("cl100k_base")) == {"cl100k_base"}
    assert set(rb.warmup(["o200k_base"], tokenizer_backend="tiktoken")) == {"o200k_base"}
    assert set(rb.warmup(["cl100k_base"], wait=False)) == {"cl100k_base"}


@pytest.mark.parametrize("bad", [["p50k_base"], [None], ["o200k_base", ""]])
def test_unknown_encodings_are_config_errors(bad: list[object]) -> None:
    with pytest.raises(rb.ConfigError, match="encoding"):
        rb.warmup(bad)  # type: ignore[arg-type]


def test_bad_backend_is_a_config_error() -> None:
    with pytest.raises(rb.ConfigError, match="tokenizer_backend"):
        rb.warmup(tokenizer_backend="sentencepiece")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", None),
        ("0", None),
        ("off", None),
        ("1", list(warmup_module.ENCODINGS)),
        ("ALL", list(warmup_module.ENCODINGS)),
        ("cl100k_base", ["cl100k_base"]),
        (" o200k_base , cl100k_base ", ["o200k_base", "cl100k_base"]),
    ],
)
def test_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: list[str] | None
) -> None:
    seen: list[list[str]] = []
    monkeypatch.setattr(
        warmup_module,
        "warmup",
        lambda encodings=warmup_module.ENCODINGS: seen.append(list(encodings)),
    )
    monkeypatch.setenv(warmup_module.WARMUP_ENV, value)
    warmup_module.warmup_from_env()
    assert seen == ([] if expected is None else [expected])


@pytest.mark.parametrize(("value", "ok"), [("1", True), ("cl100k_base", True), ("nope", False)])
def test_warmup_at_import(value: str, ok: bool) -> None:
    env = {**os.environ, warmup_module.WARMUP_ENV: value}
    proc = subprocess.run(
        [sys.executable, "-c", "import ringbound"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (proc.returncode == 0) is ok, proc.stderr
    if not ok:
        assert "ConfigError" in proc.stderr and "nope" in proc.stderr
