"""How the context map's buckets are drawn, in the terminal (``ringbound inspect``) and on its
page (``--html``) alike: each bucket's letter, colour and label, and the window cut into grid
cells by bucket."""

from __future__ import annotations

from ..context_map import ContextMap

__all__ = ["GLYPHS", "LABELS", "STYLES", "grid_cells"]

#: Each bucket's letter in plain text, and its colour on a terminal (and in the page).
GLYPHS = {
    "system": "S",
    "tools": "T",
    "pinned": "P",
    "ledger": "L",
    "summary": "Z",
    "middle": "M",
    "recent": "R",
    "framing": "F",
    "free": ".",
    "margin": "~",
    "reserve": "O",
}
STYLES = {
    "system": "#7c3aed",
    "tools": "#0891b2",
    "pinned": "#db2777",
    "ledger": "#d97706",
    "summary": "#65a30d",
    "middle": "#2563eb",
    "recent": "#059669",
    "framing": "#6b7280",
    "free": "#d1d5db",
    "margin": "#9ca3af",
    "reserve": "#4b5563",
}
LABELS = {
    "system": "system and developer",
    "tools": "tools schema",
    "pinned": "pinned",
    "ledger": "side-effect ledger",
    "summary": "summary",
    "middle": "middle",
    "recent": "recent",
    "framing": "framing",
    "free": "free",
    "margin": "safety margin",
    "reserve": "output reserve",
}


def grid_cells(m: ContextMap, cells: int) -> list[str]:
    """The window as ``cells`` cells, each the bucket it shows, in bucket order. Every
    non-empty bucket but the framing gets at least one cell; the rest go by largest
    remainder, so a cell stands for ``window / cells`` tokens, give or take one."""
    sizes = [(b.name, b.tokens) for b in m.buckets if b.tokens > 0]
    total = sum(t for _, t in sizes)
    if not total or cells <= 0:
        return []
    floor = {n: 1 if n != "framing" else 0 for n, _ in sizes}
    free = cells - sum(floor.values())
    if free < 0:
        return [n for n, _ in sizes][:cells]
    share = {n: max(0.0, t * cells / total - floor[n]) for n, t in sizes}
    scale = free / sum(share.values()) if sum(share.values()) else 0.0
    exact = {n: share[n] * scale for n in share}
    count = {n: floor[n] + int(exact[n]) for n in exact}
    left = cells - sum(count.values())
    for n in sorted(exact, key=lambda n: exact[n] - int(exact[n]), reverse=True)[:left]:
        count[n] += 1
    return [n for n, _ in sizes for _ in range(count[n])]
