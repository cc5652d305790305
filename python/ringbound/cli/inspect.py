"""``ringbound inspect``: the context map of one assembly in the terminal. A grid of the window
by bucket, then every ring and turn in order with its fate, tokens and stage; drawn with rich
on a terminal, as plain text (a letter per bucket) when standard output is not one, as JSON
with ``--json``, and as a self-contained page with ``--html``."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import TextIO

import orjson

from .._core import CountCache
from ..assembler import Assembler
from ..config import AssemblyConfig
from ..context_map import ContextMap, context_map
from ..errors import ConfigError
from ..summary import summarizers
from .context_grid import GLYPHS, LABELS, STYLES, grid_cells
from .context_page import page
from .session import Session

__all__ = [
    "GLYPHS",
    "STYLES",
    "TERMINAL",
    "grid_cells",
    "inspect_session",
    "plain",
    "rich_view",
    "run",
]

#: On a terminal: the 16 standard colours, which every terminal tells apart, and a glyph of
#: its own for the room outside the request.
TERMINAL = {
    "system": ("magenta", "█"),
    "tools": ("cyan", "█"),
    "pinned": ("bright_magenta", "█"),
    "ledger": ("yellow", "█"),
    "summary": ("bright_cyan", "█"),
    "middle": ("blue", "█"),
    "recent": ("green", "█"),
    "framing": ("white", "█"),
    "free": ("bright_black", "░"),
    "margin": ("bright_black", "▒"),
    "reserve": ("white", "▓"),
}
MARK_STYLES = {
    "kept": "green",
    "cut": "yellow",
    "stubbed": "yellow",
    "summarized": "cyan",
    "dropped": "red",
}
#: Rows of the grid; its columns follow the width.
GRID_ROWS = 4


def inspect_session(
    session: Session,
    config: AssemblyConfig,
    provider: str,
    *,
    summarize: bool = False,
    cache: CountCache | bool = True,
) -> tuple[ContextMap, float]:
    """Assembles ``session`` and maps it; returns the map and the seconds both took.
    ``cache`` is the Assembler's (the process-wide one by default): the figures the core
    estimates rather than counts depend on what it holds, so a fresh ``CountCache()`` maps
    the same session the same way in any process."""
    start = time.perf_counter()
    summarizer = summarizers.extractive() if summarize else None
    asm = Assembler(config, provider=provider, summarizer=summarizer, cache=cache)
    res = asm.assemble(session.messages, session.tools, system=session.system)
    m = context_map(res.report, session.messages, config, provider=provider, system=session.system)
    return m, time.perf_counter() - start


def _header(m: ContextMap, name: str) -> list[str]:
    bound = "" if m.tokens_before_exact else "about "
    lines = [
        f"{name}: {m.provider}, window {m.window:,}, budget {m.budget:,}",
        f"tokens {bound}{m.tokens_before:,} -> {m.tokens_after:,} "
        f"({m.tokens_after / m.window:.1%} of the window)"
        if m.window
        else f"tokens {bound}{m.tokens_before:,} -> {m.tokens_after:,}",
    ]
    for stage, units, saved in m.stages:
        # A summary note can cost more than the drops it follows saved: said as such.
        effect = f"{bound}{saved:,} tokens saved" if saved >= 0 else f"{-saved:,} tokens added"
        lines.append(f"stage  {stage}: {units} unit(s), {effect}")
    return lines


def _what(kind: str, role: str, tools: tuple[str, ...]) -> str:
    if kind != "ring":
        return role
    names: dict[str, int] = {}
    for t in tools:
        names[t] = names.get(t, 0) + 1
    return ", ".join(f"{t} x{n}" if n > 1 else t for t, n in names.items())


def _items(start: int, end: int) -> str:
    if start < 0:
        return "system"
    return str(start) if end - start == 1 else f"{start}-{end - 1}"


def _rows(m: ContextMap) -> list[tuple[str, ...]]:
    return [
        (
            str(k),
            _items(u.start, u.end),
            u.kind,
            _what(u.kind, u.role, u.tools),
            u.bucket,
            u.mark,
            f"{u.tokens:,}",
            f"{u.tokens_before:,}",
            u.stage or "",
        )
        for k, u in enumerate(m.units)
    ]


_HEAD = ("#", "items", "kind", "what", "bucket", "mark", "sent", "session", "stage")


def plain(m: ContextMap, width: int = 100, name: str = "session") -> str:
    """The map as plain text ``width`` columns wide: a letter per bucket in the grid."""
    lines = _header(m, name)
    cols = max(10, width)
    cells = grid_cells(m, cols * GRID_ROWS)
    lines.append("")
    lines += ["".join(GLYPHS[c] for c in cells[r : r + cols]) for r in range(0, len(cells), cols)]
    lines.append(f"one cell = {_per_cell(m, len(cells))} tokens")
    lines.append("")
    for b in m.buckets:
        share = b.tokens / m.window if m.window else 0.0
        lines.append(f"{GLYPHS[b.name]} {LABELS[b.name]:<21} {b.tokens:>10,} {share:>7.1%}")
    lines.append(f"  {'in the request':<21} {sum(b.tokens for b in m.in_request):>10,}")
    lines.append("")
    rows = [_HEAD, *_rows(m)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    right = {0, 6, 7}
    for r in rows:
        cells_ = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells_).rstrip())
    return "\n".join(lines) + "\n"


def _per_cell(m: ContextMap, cells: int) -> str:
    total = sum(b.tokens for b in m.buckets)
    return f"{total / cells:,.0f}" if cells else "-"


def rich_view(m: ContextMap, out: TextIO, width: int | None = None, name: str = "session") -> None:
    """The map drawn with rich on ``out``: coloured cells, a legend and the units' table."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(file=out, width=width, force_terminal=True, highlight=False)
    lines = _header(m, name)
    console.print(Text(lines[0], style="bold"))
    for line in lines[1:]:
        console.print(line)
    cols = max(10, console.width)
    cells = grid_cells(m, cols * GRID_ROWS)
    grid = Text()
    for r in range(0, len(cells), cols):
        row = cells[r : r + cols]
        start = 0
        for k in range(1, len(row) + 1):
            if k == len(row) or row[k] != row[start]:
                style, glyph = TERMINAL[row[start]]
                grid.append(glyph * (k - start), style=style)
                start = k
        grid.append("\n")
    console.print(grid, end="")
    console.print(Text(f"one cell = {_per_cell(m, len(cells))} tokens", style="dim"))
    legend = Table(box=None, show_header=False, pad_edge=False)
    for _ in range(3):
        legend.add_column()
    legend.add_column(justify="right")
    legend.add_column(justify="right")
    for b in m.buckets:
        share = b.tokens / m.window if m.window else 0.0
        legend.add_row(
            Text(TERMINAL[b.name][1], style=TERMINAL[b.name][0]),
            GLYPHS[b.name],
            LABELS[b.name],
            f"{b.tokens:,}",
            f"{share:.1%}",
        )
    console.print(legend)
    table = Table(title="units", title_justify="left", expand=False)
    for i, head in enumerate(_HEAD):
        table.add_column(head, justify="right" if i in (0, 6, 7) else "left")
    for row in _rows(m):
        styled = list(row)
        table.add_row(
            *styled[:4],
            Text(row[4], style=TERMINAL[row[4]][0]),
            Text(row[5], style=MARK_STYLES[row[5]]),
            *styled[6:],
        )
    console.print(table)


def run(
    session: Session,
    config: AssemblyConfig,
    provider: str,
    *,
    name: str = "session",
    summarize: bool = False,
    json_out: bool = False,
    html: str | Path | None = None,
    width: int | None = None,
    out: TextIO | None = None,
) -> int:
    """``ringbound inspect FILE``: draws the map (or prints it as JSON) and writes the page."""
    out = out or sys.stdout
    m, elapsed = inspect_session(session, config, provider, summarize=summarize)
    if html is not None:
        try:
            Path(html).write_text(page(m, name=name), encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot write {html}: {e.strerror}", key="html") from e
    if json_out:
        body = {"session": name, **m.to_dict(), "elapsed_s": elapsed}
        out.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif out.isatty() and _has_rich():
        rich_view(m, out, width, name)
    else:
        out.write(plain(m, width or shutil.get_terminal_size((100, 24)).columns, name))
    return 0


def _has_rich() -> bool:
    """Whether rich (the ``inspect`` extra) is installed; without it the terminal gets the
    plain drawing."""
    try:
        import rich  # noqa: F401
    except ImportError:
        print("note: pip install 'ringbound[inspect]' draws the map in colour", file=sys.stderr)
        return False
    return True
