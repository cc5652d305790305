"""The first count's latency: what the first request of a fresh process pays to build a
vocabulary's tables (per encoding and backend), as the median of several fresh processes.

    python benches/first_count.py            # 7 processes per case
    python benches/first_count.py --runs 15

Each process imports ringbound, then times one short count; the import is not in the time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

CHILD = """
import sys, time
import ringbound as rb
encoding, backend = sys.argv[1], sys.argv[2]
start = time.perf_counter()
rb.count_text("hello world", encoding, tokenizer_backend=backend)
print(time.perf_counter() - start)
"""

CASES = [
    ("o200k_base", "bpe_openai"),
    ("o200k_base", "tiktoken"),
    ("cl100k_base", "bpe_openai"),
    ("cl100k_base", "tiktoken"),
]


def first_count_s(encoding: str, backend: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, encoding, backend],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ,
    )
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per case")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.2f}; median of {args.runs} fresh processes\n")
    print("| encoding | backend | first count (ms) | min (ms) |")
    print("| --- | --- | ---: | ---: |")
    for encoding, backend in CASES:
        # Interleaved per round would mix page-cache effects across cases; one case at a time
        # keeps each case's processes alike.
        times = [first_count_s(encoding, backend) for _ in range(args.runs)]
        print(
            f"| {encoding} | {backend} | {statistics.median(times) * 1e3:.0f} "
            f"| {min(times) * 1e3:.0f} |"
        )


if __name__ == "__main__":
    main()
