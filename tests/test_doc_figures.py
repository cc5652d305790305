"""The figures the docs quote are what the code prints at this commit: the result blocks of
docs/cache-stable.md are ``scripts/cache_stable_tables.py``'s output, and the deterministic
parts of docs/performance.md's pasted ``benches/compare.py`` run (the workload's size, the
corpus sessions' sizes and budgets, the whole pairing table, the memory bar's input) are what
``compare.py`` computes now. Timings vary from run to run and machine to machine: they are not
checked, only that the run was made on this branch's history."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import orjson
import pytest

import ringbound as rb

REPO = Path(__file__).resolve().parent.parent
BENCHES = REPO / "benches"


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    sys.path.insert(0, str(BENCHES))
    try:
        return load(BENCHES / "compare.py")
    finally:
        sys.path.remove(str(BENCHES))


@pytest.fixture(scope="module")
def latest_run() -> str:
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    return text.split("## Latest run", 1)[1].split("\n## ", 1)[0]


def test_cache_stable_tables_are_the_scripts_output(tmp_path: Path) -> None:
    tables = load(REPO / "scripts" / "cache_stable_tables.py")
    text = tables.DOC.read_text(encoding="utf-8")
    shown = [text[start:end] for start, end in tables.doc_blocks(text)]
    assert shown == tables.blocks(tmp_path)


def test_the_pasted_run_was_made_on_this_history(latest_run: str) -> None:
    commit = re.search(r"build of commit\s+`([0-9a-f]{7,40})`", latest_run)
    assert commit is not None
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run(
        ["git", "merge-base", "--is-ancestor", commit.group(1), "HEAD"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    assert known.returncode == 0, f"commit {commit.group(1)} is not in this branch's history"


def test_the_workload_line_is_what_compare_prints(compare: ModuleType, latest_run: str) -> None:
    reference = compare.workload.reference_session()
    line = next(
        x for x in compare.header(reference, 1, "wall").splitlines() if "reference workload" in x
    )
    assert line in latest_run.splitlines()


def test_the_corpus_rows_are_the_corpus(compare: ModuleType, latest_run: str) -> None:
    shown = [
        row.split(" | ")[:4]
        for row in latest_run.splitlines()
        if row.startswith("| swe-") or row.startswith("| tau-")
    ]
    sessions = compare.workload.corpus_sessions()
    expected = [
        [f"| {name}", str(len(m)), f"{rb.count_tokens(m):,}", f"{rb.count_tokens(m) // 2:,}"]
        for name, m, _ in sessions
    ]
    assert shown == expected


def test_the_pairing_table_is_what_compare_prints(compare: ModuleType, latest_run: str) -> None:
    assert compare.pairing_section() in latest_run


def test_the_memory_bars_input_is_what_compare_makes(compare: ModuleType, latest_run: str) -> None:
    size = len(orjson.dumps(compare.workload.session_of_size(10 * compare.workload.MB)))
    assert f"| {size / 1e6:.1f} MB |" in latest_run
