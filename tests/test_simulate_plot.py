"""``ringbound simulate --plot``: the PNG and SVG read back. The SVG must hold the three axes
and, on each, one series per way with a point per turn, the budget and trigger lines and the
compaction marks; the PNG must name the same series in its metadata and show each way's
colour; another extension is a typed error before the replay runs."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ringbound.cli.main import main
from ringbound.cli.simulate import STATEFUL, STATELESS, TRIM, agent_session
from ringbound.cli.simulate_plot import _COLOURS, AXES

TURNS = 40
WAYS = (STATEFUL, STATELESS, TRIM)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plot") / "agent.json"
    path.write_text(json.dumps(agent_session(turns=TURNS)))
    return path


def run(session: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code = main(["simulate", str(session), "--budget", "9000", "--json", "--plot", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    assert f"plot written to {out}" in captured.err
    return json.loads(captured.out)


def test_svg_holds_every_axis_and_series(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.svg"
    body = run(session, out, capsys)
    turns = body["turns"]
    assert turns == TURNS
    tree = ET.parse(out)
    ids = {g.get("id"): g for g in tree.iter("{http://www.w3.org/2000/svg}g") if g.get("id")}
    for axis in AXES:
        assert f"axes:{axis}" in ids
        for way in WAYS:
            g = ids[f"{axis}:{way}"]
            path = g.find("{http://www.w3.org/2000/svg}path")
            assert path is not None
            points = re.findall(r"[ML]\s*[-\d.]+\s+[-\d.]+", path.get("d", ""))
            assert len(points) == turns, (axis, way)
    for series in ("budget", "trigger"):
        assert f"tokens:{series}" in ids
    compactions = next(w for w in body["ways"] if w["way"] == STATEFUL)["compactions"]
    assert compactions > 0
    for axis in ("tokens", "cached"):
        marks = ids[f"{axis}:compactions"]
        assert len(list(marks.iter("{http://www.w3.org/2000/svg}use"))) == compactions


def test_png_names_its_series_and_shows_each_way(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "replay.png"
    run(session, out, capsys)
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (1000, 900)
        drawn = json.loads(img.text["Description"])
        pixels = np.asarray(img.convert("RGB")).astype(int)
    assert list(drawn) == list(AXES)
    for axis in AXES:
        assert set(WAYS) <= set(drawn[axis])
    assert {"budget", "trigger", "compactions"} <= set(drawn["tokens"])
    for way in WAYS:
        rgb = np.array([int(_COLOURS[way][i : i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(pixels - rgb).max(axis=-1) <= 8).sum() > 500, way


def test_another_extension_is_a_typed_error_before_the_replay(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", str(session), "--plot", str(tmp_path / "replay.jpg")]) == 2
    captured = capsys.readouterr()
    assert "ConfigError" in captured.err and "Traceback" not in captured.err
    assert captured.out == ""
    assert main(["simulate", str(session), "--plot", "/no/such/dir/replay.png"]) == 2
    assert "cannot write" in capsys.readouterr().err
