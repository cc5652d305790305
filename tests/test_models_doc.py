"""docs/models.md's table is the bundled table, row for row."""

from __future__ import annotations

import re
from pathlib import Path

from ringbound import models

DOC = Path(__file__).resolve().parent.parent / "docs" / "models.md"
ROW = re.compile(
    r"^\| `([^`]+)` \| (\w+) \| ([\d,—]+) \| ([\d,—]+) \| ([\d,]+) \| (\w+) "
    r"\| \[docs\]\(([^)]+)\) \|$"
)


def number(text: str) -> int | None:
    return None if text == "—" else int(text.replace(",", ""))


def test_the_doc_table_is_the_bundled_table() -> None:
    rows = [ROW.match(line) for line in DOC.read_text(encoding="utf-8").splitlines()]
    found = {m.group(1): m for m in rows if m}
    assert sorted(found) == models.names()
    for name, m in found.items():
        info = models.lookup(name)
        assert (m.group(2), m.group(6), m.group(7)) == (info.family, info.encoding, info.source)
        assert number(m.group(3)) == info.context_window
        assert number(m.group(4)) == info.max_input_tokens
        assert number(m.group(5)) == info.max_output_tokens
