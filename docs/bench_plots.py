"""Plots of a benchmark run for the documentation site: pytest-benchmark's JSON
(``pytest benches --benchmark-only --benchmark-json=FILE``) in, one SVG per benchmark group
out, each benchmark's median as a bar with its interquartile range, on a log scale, labelled
with its time and its ratio to the group's fastest case. Nothing is pasted: the
figures are drawn again from the JSON at every build.

    python docs/bench_plots.py RUN.json OUT_DIR
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GroupPlot", "plot_groups", "read_run"]

#: Groups in the order the performance page shows them, with a title each; groups not listed
#: follow in the run's order under their own name.
TITLES = {
    "assemble_cold": "Assembling the reference session, nothing cached",
    "assemble_warm": "The next turn of a gateway, against orjson.dumps of its request",
    "provider": "Every provider, cold and warm",
    "count": "Counting tokens",
    "validate": "Validating tool-call pairing",
}


#: Words that name a baseline or anchor rather than ringbound.
_BASELINES = ("pure_python", "langchain", "orjson", "tiktoken")


@dataclass(frozen=True)
class GroupPlot:
    """One figure: its group, its file and the benchmarks it shows (median seconds)."""

    group: str
    path: Path
    medians: dict[str, float]


def read_run(path: Path) -> dict[str, Any]:
    """The run's JSON; ValueError when it is not a pytest-benchmark run."""
    run = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(run, dict) or not isinstance(run.get("benchmarks"), list):
        raise ValueError(f"{path} is not pytest-benchmark JSON (no 'benchmarks' list)")
    if not run["benchmarks"]:
        raise ValueError(f"{path} holds no benchmark: run them with --benchmark-only")
    return run


def _label(name: str) -> str:
    return name.removeprefix("test_")


def _time(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds * 1e6:,.0f} µs"


def plot_groups(run: dict[str, Any], out: Path) -> list[GroupPlot]:
    """Draws each group of ``run`` into ``out/bench-<group>.svg``."""
    import matplotlib
    from matplotlib.figure import Figure

    groups: dict[str, list[dict[str, Any]]] = {}
    for b in run["benchmarks"]:
        groups.setdefault(b.get("group") or "ungrouped", []).append(b)
    order = [g for g in TITLES if g in groups] + [g for g in groups if g not in TITLES]
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    for group in order:
        rows = sorted(groups[group], key=lambda b: b["stats"]["median"])
        names = [_label(b["name"]) for b in rows]
        medians = [b["stats"]["median"] for b in rows]
        fastest = medians[0]
        fig = Figure(figsize=(9, 0.45 * len(rows) + 1.4), layout="constrained")
        ax = fig.subplots()
        low = [m - b["stats"]["q1"] for m, b in zip(medians, rows, strict=True)]
        high = [b["stats"]["q3"] - m for m, b in zip(medians, rows, strict=True)]
        # ringbound's own cases in blue, the baselines and anchors in grey.
        colours = ["#9ca3af" if any(k in n for k in _BASELINES) else "#2563eb" for n in names]
        bars = ax.barh(names, medians, xerr=[low, high], color=colours, capsize=3)
        for bar, m, b in zip(bars, medians, rows, strict=True):
            ax.text(
                max(m, b["stats"]["q3"]) * 1.15,
                bar.get_y() + bar.get_height() / 2,
                f"{_time(m)}  ({m / fastest:,.1f}x)",
                va="center",
                fontsize=8,
            )
        ax.set_xscale("log")
        ax.set_xlim(min(medians) / 2, max(medians) * 30)
        ax.invert_yaxis()
        ax.set_xlabel("median seconds per run (log scale; bars: interquartile range)")
        ax.set_title(TITLES.get(group, group), fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        path = out / f"bench-{group}.svg"
        # Text kept as text (searchable, smaller); no date, so one run draws the same bytes.
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": group}):
            fig.savefig(path, metadata={"Date": None})
        plots.append(GroupPlot(group, path, dict(zip(names, medians, strict=True))))
    return plots


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        plots = plot_groups(read_run(Path(argv[0])), Path(argv[1]))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in plots:
        print(p.path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
