"""The pictures of ``docs/inspect.md``: ``ringbound inspect`` on the bundled tau-bench session,
as a terminal draws it (rich's SVG export of the same drawing) and as its ``--html`` page,
each photographed by a headless Chromium into ``docs/img/``.

    python docs/screenshots.py
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tempfile
from importlib import resources
from pathlib import Path

import ringbound as rb
from ringbound.cli.context_page import page
from ringbound.cli.demo import AIRLINE_SIDE_EFFECT_TOOLS
from ringbound.cli.inspect import inspect_session, rich_view
from ringbound.cli.session import load_session

IMG = Path(__file__).resolve().parent / "img"
SESSION = Path(str(resources.files("ringbound") / "data" / "tau_bench_airline_session.json"))
#: The config the pictures show: a 5,000-token window, 800 for the answer, 200 of margin.
CONFIG = rb.AssemblyConfig(
    model_input_limit=5000,
    output_reserve_tokens=800,
    safety_margin_tokens=200,
    side_effect_tools=list(AIRLINE_SIDE_EFFECT_TOOLS),
)


#: The same config as the command's flags, for the picture's title.
FLAGS = "--limit 5000 --reserve 800 --margin 200 --summarize"


def shoot(chromium: str, html: Path, png: Path, width: int, height: int) -> None:
    subprocess.run(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
    )


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: chromium is not installed (bash .ci/chromium)", file=sys.stderr)
        return 2
    m, _ = inspect_session(load_session(SESSION), CONFIG, "openai_chat", summarize=True)
    name = SESSION.name
    IMG.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        from rich.console import Console

        console = Console(record=True, width=100, file=io.StringIO(), force_terminal=True)
        rich_view(m, console.file, width=100, name=name)
        # Replayed into a recording console, which exports what a terminal shows.
        console.print(rich_text(console.file.getvalue()), end="")
        svg = Path(tmp) / "terminal.html"
        svg.write_text(
            "<body style='margin:0;background:#fff'>"
            + console.export_svg(title=f"ringbound inspect {name} {FLAGS}")
            + "</body>",
            encoding="utf-8",
        )
        shoot(chromium, svg, IMG / "inspect-terminal.png", 1000, 1280)
        html = Path(tmp) / "page.html"
        html.write_text(page(m, name=name), encoding="utf-8")
        shoot(chromium, html, IMG / "inspect-page.png", 1000, 1100)
    for png in ("inspect-terminal.png", "inspect-page.png"):
        print(IMG / png)
    return 0


def rich_text(ansi: str) -> object:
    from rich.text import Text

    return Text.from_ansi(ansi)


if __name__ == "__main__":
    sys.exit(main())
