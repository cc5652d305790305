"""``scripts/gemini_token_ratio.py``, the measurement behind Gemini's ``default_token_ratio``:
run on the shared corpus with a SentencePiece vocabulary trained here (the Gemma 3 vocabulary
itself is not on the package registries), its ratios must be the sums of what the vocabulary
and o200k_base count, text by text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import sentencepiece

import ringbound as rb

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gemini_token_ratio.py"


def load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gemini_token_ratio", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gemini_token_ratio"] = module
    spec.loader.exec_module(module)
    return module


def test_the_ratio_is_the_sum_of_both_counts(tmp_path: Path, corpus: Path) -> None:
    script = load()
    sources = script.corpus(corpus)
    assert {k: len(v) for k, v in sources.items()}["tau-bench"] == 200
    texts = [t for s in sources["tau-bench"][:40] for m in s for t in script.texts(m) if t]
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=str(tmp_path / "tiny"),
        vocab_size=500,
        minloglevel=2,
    )
    count = script.sentencepiece_counter(tmp_path / "tiny.model")
    first = sources["tau-bench"][:3]
    total, each = script.ratios(first, count)
    parts = [[t for m in s for t in script.texts(m) if t] for s in first]
    theirs = [sum(count(t) for t in p) for p in parts]
    ours = [sum(rb.count_text(t) for t in p) for p in parts]
    assert total == pytest.approx(sum(theirs) / sum(ours))
    assert each == pytest.approx([a / b for a, b in zip(theirs, ours, strict=True)])
    # A 500-piece vocabulary needs more tokens than o200k_base's 200k: the ratio says so.
    assert total > 1.2
    table = script.report({"tau-bench": first}, count).splitlines()
    assert table[0].split() == ["source", "sessions", "ratio", "median", "p90", "max"]
    assert table[1].split()[:3] == ["tau-bench", "3", f"{total:.3f}"]
