"""``ringbound inspect --html``: the context map as one self-contained page. Styles and the
small script are inlined and nothing is fetched, so the page opens offline and can be attached
to an issue as it is."""

from __future__ import annotations

import html

from ..context_map import ContextMap
from .context_grid import GLYPHS, LABELS, STYLES, grid_cells

__all__ = ["page"]

#: Cells of the page's grid (20 rows of 50), as in Claude Code's ``/context``.
CELLS = 1000

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#111827}
h1{font-size:1.3rem;margin:0 0 .3rem}
.meta{color:#4b5563;margin:.1rem 0}
.grid{display:grid;grid-template-columns:repeat(50,14px);gap:2px;margin:1.2rem 0}
.cell{width:14px;height:14px;border-radius:2px}
.legend td,.units td,.units th{padding:2px 10px 2px 0;text-align:left}
.legend td.n,.units td.n{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px}
.units{border-collapse:collapse;margin-top:1rem}
.units tr{border-bottom:1px solid #e5e7eb}
.units tr.dim{opacity:.25}
.mark-kept{color:#047857}.mark-dropped{color:#b91c1c}.mark-summarized{color:#0e7490}
.mark-cut,.mark-stubbed{color:#b45309}
.legend tr{cursor:pointer}
"""

#: Clicking a bucket in the legend dims the units of every other bucket; clicking it again
#: shows them all.
_JS = """
document.querySelectorAll('.legend tr[data-bucket]').forEach(function (row) {
  row.addEventListener('click', function () {
    var b = row.dataset.bucket;
    var on = document.body.dataset.only === b ? '' : b;
    document.body.dataset.only = on;
    document.querySelectorAll('.units tbody tr').forEach(function (u) {
      u.classList.toggle('dim', on !== '' && u.dataset.bucket !== on);
    });
  });
});
"""


def page(m: ContextMap, name: str = "session") -> str:
    """The map as an HTML document: the grid, the legend and the units' table."""
    e = html.escape
    bound = "" if m.tokens_before_exact else "about "
    per_cell = sum(b.tokens for b in m.buckets) / CELLS
    cells = "".join(
        f'<div class="cell" data-bucket="{c}" style="background:{STYLES[c]}"></div>'
        for c in grid_cells(m, CELLS)
    )
    legend = "".join(
        f'<tr data-bucket="{b.name}"><td><span class="swatch" style="background:'
        f'{STYLES[b.name]}"></span> {GLYPHS[b.name]}</td><td>{e(LABELS[b.name])}</td>'
        f'<td class="n">{b.tokens:,}</td>'
        f'<td class="n">{(b.tokens / m.window if m.window else 0):.1%}</td></tr>'
        for b in m.buckets
    )
    stages = "".join(
        f'<p class="meta">stage {e(s)}: {u} unit(s), '
        + (f"{bound}{t:,} tokens saved" if t >= 0 else f"{-t:,} tokens added")
        + "</p>"
        for s, u, t in m.stages
    )
    rows = []
    for k, u in enumerate(m.units):
        items = (
            "system"
            if u.start < 0
            else (str(u.start) if u.end - u.start == 1 else f"{u.start}-{u.end - 1}")
        )
        what = ", ".join(u.tools) if u.kind == "ring" else u.role
        rows.append(
            f'<tr data-bucket="{u.bucket}" data-mark="{u.mark}"><td class="n">{k}</td>'
            f"<td>{items}</td><td>{u.kind}</td><td>{e(what)}</td>"
            f'<td><span class="swatch" style="background:{STYLES[u.bucket]}"></span> '
            f'{u.bucket}</td><td class="mark-{u.mark}">{u.mark}</td>'
            f'<td class="n">{u.tokens:,}</td><td class="n">{u.tokens_before:,}</td>'
            f"<td>{e(u.stage or '')}</td></tr>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ringbound context map: {e(name)}</title>
<style>{_CSS}</style></head>
<body>
<h1>Context map: {e(name)}</h1>
<p class="meta">{e(m.provider)}, window {m.window:,}, budget {m.budget:,}; tokens
{bound}{m.tokens_before:,} &rarr; {m.tokens_after:,}; one cell = {per_cell:,.0f} tokens</p>
{stages}
<div class="grid" role="img" aria-label="the window by bucket">{cells}</div>
<table class="legend"><tbody>{legend}</tbody></table>
<table class="units"><thead><tr><th>#</th><th>items</th><th>kind</th><th>what</th>
<th>bucket</th><th>mark</th><th>sent</th><th>session</th><th>stage</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<script>{_JS}</script>
</body></html>
"""
