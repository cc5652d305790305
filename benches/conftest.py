"""Shared set-up of the benchmarks: the reference workload, generated once per run, and the
largest real sessions of the corpus. In the default test run (``--benchmark-disable``) every
benchmark runs once as a smoke test and checks its result."""

from __future__ import annotations

from typing import Any

import pytest
import workload

from ringbound import _core


@pytest.fixture(scope="session")
def reference() -> list[dict[str, Any]]:
    return workload.reference_session()


@pytest.fixture(scope="session")
def largest_corpus_sessions() -> list[tuple[str, list[Any], list[Any] | None]]:
    """Missing corpus is an error, not a skip, as in tests/: CI always has it."""
    if not (workload.CORPUS / "README.md").exists():
        pytest.fail(f"real-session corpus not found at {workload.CORPUS} (set RINGBOUND_CORPUS)")
    return workload.corpus_sessions()


@pytest.fixture(scope="session", autouse=True)
def bpe_openai_tables() -> None:
    """Benchmarks measure its own tables, which the first count starts building on a thread of their
    own (``tiktoken`` counts for it until they are ready); a fresh process's first counts are
    tested in ``tests/test_first_count.py``."""
    for encoding in ("o200k_base", "cl100k_base"):
        _core.wait_for_tables(encoding)
