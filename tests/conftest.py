"""Shared test set-up: hypothesis profiles chosen by RINGBOUND_HYPOTHESIS_PROFILE (``ci`` by
default, ``dev`` for quick local runs, ``thorough`` for long ones) and the path to the real
sessions of ``../shared/corpus``.

``ci`` is derandomized and keeps no example database: every run of one commit draws the same
examples, here and in CI, so a red build is a regression to fix rather than a new random draw.
Searching for new failures is ``thorough``'s job: random, with the database replaying what it
found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The suite runs offline: without this, importing litellm tries to download its model cost map
# (three attempts, about ten seconds) before falling back to the copy it ships.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from ringbound import _core

settings.register_profile(
    "ci",
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("RINGBOUND_HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("RINGBOUND_CORPUS", REPO.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The shared corpus folder. Missing corpus is an error, not a skip: CI always has it."""
    if not (CORPUS / "README.md").exists():
        pytest.fail(f"real-session corpus not found at {CORPUS} (set RINGBOUND_CORPUS)")
    return CORPUS


@pytest.fixture(scope="session", autouse=True)
def bpe_openai_tables() -> None:
    """Tests of the bpe_openai backend check its own tables, which the first count starts
    building on a thread of their own (``tiktoken`` counts for it until they are ready); a
    fresh process's first counts are tested in ``tests/test_first_count.py``."""
    for encoding in ("o200k_base", "cl100k_base"):
        _core.wait_for_tables(encoding)
