"""``ringbound simulate --plot``: a replay drawn per turn. Tokens sent by each way against the
budget and the compaction trigger, the share of each request a prompt cache could serve, the
stateful way's compactions marked on both, and the cumulative cost of each way. PNG or SVG,
chosen by the file's extension; each axis and series carries an id (SVG ``gid``, PNG text
metadata) so tests and scripts can find them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .replay import STATEFUL, STATELESS, TRIM, Simulation

__all__ = ["AXES", "FORMATS", "plot_simulation"]

FORMATS = (".png", ".svg")
#: The axes, top to bottom.
AXES = ("tokens", "cached", "cost")
_COLOURS = {STATEFUL: "#2563eb", STATELESS: "#d97706", TRIM: "#6b7280"}


def plot_simulation(sim: Simulation, path: str | Path, trigger_ratio: float) -> dict[str, Any]:
    """Draws ``sim`` into ``path`` (``.png`` or ``.svg``) and returns what it drew: each
    axis's series, by id.

    Args:
        sim: The replay.
        path: Where to write; the extension picks the format.
        trigger_ratio: ``compact_trigger_ratio``: the stateful way compacts once a request
            would pass this share of the budget.

    Raises:
        ConfigError: Another extension, matplotlib missing, or the file cannot be written.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(
            f"--plot writes .png or .svg, not {path.name!r}",
            key="plot",
            reason="must end in .png or .svg",
        )
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ConfigError(
            "the simulation plot needs matplotlib: pip install 'ringbound[plot]'",
            key="plot",
            reason="matplotlib is not installed",
        ) from e
    ways = [w for w in sim.ways if w.skipped is None and w.turns]
    fig = Figure(figsize=(10, 9), layout="constrained")
    tokens, cached, cost = fig.subplots(3, 1, sharex=True)
    drawn: dict[str, list[str]] = {name: [] for name in AXES}

    def line(ax: Any, axis: str, series: str, xs: Any, ys: Any, **style: Any) -> None:
        (artist,) = ax.plot(xs, ys, **style)
        artist.set_gid(f"{axis}:{series}")
        drawn[axis].append(series)

    for w in ways:
        turns = [t.turn for t in w.turns]
        colour = _COLOURS.get(w.name)
        line(
            tokens, "tokens", w.name, turns, [t.tokens for t in w.turns], color=colour, label=w.name
        )
        line(
            cached,
            "cached",
            w.name,
            turns,
            [t.cached_fraction for t in w.turns],
            color=colour,
            label=w.name,
        )
        running = list(
            itertools.accumulate(t.cost(sim.price_factor, sim.write_factor) for t in w.turns)
        )
        line(cost, "cost", w.name, turns, running, color=colour, label=w.name)
    last = max((t.turn for w in ways for t in w.turns), default=1)
    span = [1, last]
    line(
        tokens,
        "tokens",
        "budget",
        span,
        [sim.budget] * 2,
        color="#dc2626",
        linestyle="--",
        label="budget",
    )
    trigger = trigger_ratio * sim.budget
    line(
        tokens,
        "tokens",
        "trigger",
        span,
        [trigger] * 2,
        color="#dc2626",
        linestyle=":",
        label=f"trigger ({trigger_ratio:g} x budget)",
    )
    stateful = next((w for w in ways if w.name == STATEFUL), None)
    if stateful is not None:
        marks = [t for t in stateful.turns if t.compacted]
        for ax, axis, ys in (
            (tokens, "tokens", [t.tokens for t in marks]),
            (cached, "cached", [t.cached_fraction for t in marks]),
        ):
            line(
                ax,
                axis,
                "compactions",
                [t.turn for t in marks],
                ys,
                color="#111827",
                marker="v",
                linestyle="none",
                label=f"compactions ({len(marks)})",
            )
    tokens.set_ylabel("tokens sent")
    tokens.set_title(
        f"{sim.name}: {sim.provider}, budget {sim.budget:,}, cached tokens at {sim.price_factor:g}x"
        + (f" under {sim.cache}'s caching rules" if sim.cache else "")
    )
    cached.set_ylabel("cached fraction")
    cached.set_ylim(-0.02, 1.02)
    cost.set_ylabel("cumulative effective tokens")
    cost.set_xlabel("turn")
    for name, ax in zip(AXES, (tokens, cached, cost), strict=True):
        ax.set_gid(f"axes:{name}")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    description = json.dumps(drawn)
    try:
        if suffix == ".png":
            fig.savefig(path, dpi=100, metadata={"Description": description})
        else:
            fig.savefig(path, metadata={"Description": description, "Date": None})
    except OSError as e:
        raise ConfigError(f"cannot write {path}: {e.strerror}", key="plot") from e
    return drawn
