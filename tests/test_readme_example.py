"""The README's example prints figures that are exact: the input's count as ``count_tokens``
gives it (not the report's, which may be an estimate) and the assembled request's, and its
history has no repeated read that a "superseded" stub would stand for unexplained."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import ringbound as rb

README = Path(__file__).resolve().parent.parent / "README.md"


def run_example() -> tuple[str, dict[str, Any]]:
    text = README.read_text(encoding="utf-8")
    code = text[text.index("## Example") :].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {"__name__": "__readme__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<README example>", "exec"), scope)
    return out.getvalue(), scope


def test_the_example_prints_exact_figures() -> None:
    printed, scope = run_example()
    messages, res = scope["messages"], scope["res"]
    before, after = map(int, re.match(r"(\d+) -> (\d+) ", printed).groups())  # type: ignore[union-attr]
    assert before == rb.count_tokens(messages)
    assert after == res.report.tokens_after == rb.count_tokens(res.messages)
    # The sentence after the example: the report's own figure is exact, or an estimate.
    if res.report.tokens_before_exact:
        assert res.report.tokens_before == before
    else:
        assert abs(res.report.tokens_before - before) <= 0.05 * before


def test_each_read_has_its_own_argument() -> None:
    _, scope = run_example()
    reads = [
        call["function"]["arguments"]
        for m in scope["messages"]
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == "read_log"
    ]
    assert len(reads) == len(set(reads)) > 1
    assert all(json.loads(r) for r in reads)
    assert "dedupe_superseded_reads" not in [s.stage for s in scope["res"].report.stages]
