"""The peak-memory harness on a 1 MB session (compare.py runs the 10 MB one): a fresh child
process, and the assembly's peak above what loading the package and the session took."""

from __future__ import annotations

from pathlib import Path

import orjson
import workload
from measure import assembly_peak_rss


def test_assembly_peak_rss(tmp_path: Path) -> None:
    body = orjson.dumps(workload.session_of_size(workload.MB))
    path = tmp_path / "session.json"
    path.write_bytes(body)
    rss = assembly_peak_rss(path, workload.BUDGET)
    assert rss["tables_kib"] > 0  # the tokenizer's tables, loaded on the first count
    # The bar, with a generous fixed part: at 1 MB the allocator's own granularity dominates.
    assert rss["assembly_peak_kib"] * 1024 < 3 * len(body) + 16 * workload.MB
