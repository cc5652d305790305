"""``ringbound inspect --html``: the page opened in a headless Chromium, as a reader opens it.
It must load with no console error and no request leaving the file, show a cell for every
bucket that holds tokens and a legend row for every bucket, and its screenshot must show the
map: every such bucket's colour is on screen, and the page is not blank.

Chromium is Debian's package, which ``.ci/run`` installs; there (``RINGBOUND_REQUIRE_CHROMIUM``)
a missing browser fails the tests instead of skipping them."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from headless_chromium import Chromium, chromium_binary
from matplotlib import image

import ringbound as rb
from ringbound.cli.context_page import page
from ringbound.cli.demo import AIRLINE_SIDE_EFFECT_TOOLS
from ringbound.cli.inspect import STYLES, inspect_session
from ringbound.cli.main import main
from ringbound.cli.session import load_session
from ringbound.context_map import BUCKETS, ContextMap

BUNDLED = Path(str(resources.files("ringbound") / "data" / "tau_bench_airline_session.json"))

#: What the page reports about itself once loaded.
PROBE = """JSON.stringify({
  cells: [...document.querySelectorAll('.grid .cell')].map(c => c.dataset.bucket),
  legend: [...document.querySelectorAll('.legend tr')].map(r => r.dataset.bucket),
  units: document.querySelectorAll('.units tbody tr').length,
  gridBox: (() => { const r = document.querySelector('.grid').getBoundingClientRect();
                    return [r.width, r.height]; })(),
})"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    binary = chromium_binary()
    if binary is None:
        if os.environ.get("RINGBOUND_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed (.ci/run installs Debian's package)")
        pytest.skip("chromium is not installed (.ci/run installs Debian's package)")
    with Chromium(binary) as c:
        yield c


@pytest.fixture(scope="module")
def bundled_map() -> ContextMap:
    cfg = rb.AssemblyConfig(
        model_input_limit=5000,
        output_reserve_tokens=800,
        safety_margin_tokens=200,
        side_effect_tools=list(AIRLINE_SIDE_EFFECT_TOOLS),
    )
    m, _ = inspect_session(load_session(BUNDLED), cfg, "openai_chat", summarize=True)
    return m


def colour_pixels(png: bytes, hex_colour: str) -> int:
    """Pixels of the screenshot in ``hex_colour`` (within rounding)."""
    pixels = image.imread(io.BytesIO(png), format="png")[..., :3]
    want = np.array([int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    return int((np.abs(pixels - want).max(axis=-1) < 2 / 255).sum())


def test_the_page_shows_the_map(browser: Chromium, bundled_map: ContextMap, tmp_path: Path) -> None:
    path = tmp_path / "map.html"
    path.write_text(page(bundled_map, name="tau-bench airline"), encoding="utf-8")
    visit, probe = browser.visit(path, PROBE)
    assert visit.errors == []
    got = json.loads(probe)
    holding = [b.name for b in bundled_map.buckets if b.tokens > 0]
    assert set(got["cells"]) == set(holding) and len(got["cells"]) == 1000
    assert got["legend"] == list(BUCKETS)
    assert got["units"] == len(bundled_map.units)
    assert got["gridBox"][0] > 500 and got["gridBox"][1] > 200
    pixels = image.imread(io.BytesIO(visit.png), format="png")
    assert pixels[..., :3].std() > 0.05, "the screenshot is blank"
    for name in holding:
        assert colour_pixels(visit.png, STYLES[name]) > 50, f"bucket {name} is not on screen"


def test_a_blank_or_broken_page_is_caught(browser: Chromium, tmp_path: Path) -> None:
    """The checks above can fail: an empty page has no cells, a script error and a fetch from
    a CDN are reported."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><title>x</title>", encoding="utf-8")
    visit, probe = browser.visit(blank, "document.querySelectorAll('.cell').length")
    assert probe == 0 and visit.errors == []
    assert image.imread(io.BytesIO(visit.png), format="png")[..., :3].std() < 0.01
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!doctype html><script src='https://cdn.example.invalid/x.js'></script>"
        "<script>undefinedFunction()</script>",
        encoding="utf-8",
    )
    visit, _ = browser.visit(broken)
    assert any("cdn.example.invalid" in e for e in visit.errors)
    assert any("ReferenceError" in e or "Uncaught" in e for e in visit.errors)


def test_the_command_writes_a_page_that_loads(browser: Chromium, tmp_path: Path) -> None:
    path = tmp_path / "cli.html"
    assert main(["inspect", str(BUNDLED), "--budget", "3000", "--html", str(path), "--json"]) == 0
    visit, cells = browser.visit(path, "document.querySelectorAll('.grid .cell').length")
    assert visit.errors == [] and cells == 1000
