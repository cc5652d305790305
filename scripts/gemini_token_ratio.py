"""How many Gemini tokens one o200k_base token is, on the shared corpus: the measurement
behind the ``gemini`` adapter's ``default_token_ratio`` (docs/providers/gemini.md).

Gemini has no public tokenizer; Gemma 3 ships Gemini 2.0's vocabulary (a 262k SentencePiece
model). Given that model's ``tokenizer.model`` file, this counts every text of every corpus
session (message contents, tool names and arguments, tool results) with it and with
o200k_base, and prints the ratio of the sums per source and the spread per session.

    pip install sentencepiece
    python scripts/gemini_token_ratio.py --vocab path/to/gemma-3/tokenizer.model

The vocabulary is not on the package registries, so neither this repository nor its CI holds
it: bring the file from a Gemma 3 release (any size: they share the tokenizer).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ringbound as rb

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("RINGBOUND_CORPUS", REPO.parent / "shared" / "corpus"))


def texts(message: dict[str, Any]) -> Iterator[str]:
    """Every text a message carries: its content (a string or text parts), and its calls'
    names and arguments."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        yield str(function.get("name") or "")
        yield str(function.get("arguments") or "")


def corpus(root: Path) -> dict[str, list[list[dict[str, Any]]]]:
    """The corpus's OpenAI-format sessions by source."""
    tau = json.loads((root / "tau-bench" / "gpt-4o-airline.json").read_text(encoding="utf-8"))
    gym = json.loads((root / "swe-gym" / "sample_raw.json").read_text(encoding="utf-8"))
    agent = [
        json.loads(p.read_text(encoding="utf-8"))["history"]
        for p in sorted((root / "swe-agent").glob("*.traj"))
    ]
    return {
        "tau-bench": [run["traj"] for run in tau],
        "swe-gym": [s["messages"] for s in gym],
        "swe-agent": agent,
    }


def ratios(
    sessions: list[list[dict[str, Any]]], count: Callable[[str], int]
) -> tuple[float, list[float]]:
    """The ratio of the sums over all sessions, and each session's own."""
    per_session, total_theirs, total_ours = [], 0, 0
    for messages in sessions:
        parts = [t for m in messages for t in texts(m) if t]
        theirs = sum(count(t) for t in parts)
        ours = sum(rb.count_text(t) for t in parts)
        total_theirs += theirs
        total_ours += ours
        if ours:
            per_session.append(theirs / ours)
    return total_theirs / max(1, total_ours), per_session


def report(by_source: dict[str, list[list[dict[str, Any]]]], count: Callable[[str], int]) -> str:
    """One line per source: the ratio of the sums, then the median, 90th percentile and
    highest of the sessions' ratios."""
    lines = [f"{'source':<10} {'sessions':>8} {'ratio':>7} {'median':>7} {'p90':>7} {'max':>7}"]
    for source, sessions in by_source.items():
        total, each = ratios(sessions, count)
        each.sort()
        p90 = each[max(0, -(-9 * len(each) // 10) - 1)]
        lines.append(
            f"{source:<10} {len(sessions):>8} {total:>7.3f} {statistics.median(each):>7.3f} "
            f"{p90:>7.3f} {each[-1]:>7.3f}"
        )
    return "\n".join(lines)


def sentencepiece_counter(path: Path) -> Callable[[str], int]:
    import sentencepiece

    model = sentencepiece.SentencePieceProcessor(model_file=str(path))
    return lambda text: len(model.encode(text))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vocab", type=Path, required=True, help="Gemma 3 tokenizer.model")
    p.add_argument("--corpus", type=Path, default=CORPUS)
    args = p.parse_args()
    print(report(corpus(args.corpus), sentencepiece_counter(args.vocab)))


if __name__ == "__main__":
    main()
