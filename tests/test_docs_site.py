"""The documentation site: ``docs/build_site.py`` builds it with ``mkdocs build --strict``. Its
first page holds the README's two commands and example, its API reference the docstrings,
and its performance page plots drawn from the benchmark run's JSON it is given (a run with a
case renamed shows the new name: the plots are not pasted). Links leaving ``docs/`` point to
the repository."""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "docs"))

import build_site  # noqa: E402

pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def run_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed run with one case renamed and its median set to 1.234 ms."""
    run = json.loads(build_site.RUN_JSON.read_text())
    run = copy.deepcopy(run)
    case = next(b for b in run["benchmarks"] if b["group"] == "assemble_warm")
    case["name"] = "test_renamed_for_the_site_test"
    case["stats"].update(median=1.234e-3, q1=1.2e-3, q3=1.3e-3)
    path = tmp_path_factory.mktemp("run") / "run.json"
    path.write_text(json.dumps(run))
    return path


@pytest.fixture(scope="module")
def site(run_json: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    assert build_site.build(out, run_json) == 0, "mkdocs build --strict failed"
    return out


def text(path: Path) -> str:
    return re.sub(r"<[^>]+>", "", path.read_text(encoding="utf-8"))


def test_first_page_has_the_readme_commands_and_example(site: Path) -> None:
    page = text(site / "index.html")
    assert "pip install . &amp;&amp; ringbound demo" in page
    assert "bash .ci/run" in page
    assert "asm = rb.Assembler(cfg" in page


def test_api_reference_comes_from_the_docstrings(site: Path) -> None:
    page = text(site / "api" / "index.html")
    for name in ("Assembler", "AssemblyConfig", "AssemblyReport", "count_tokens", "validate"):
        assert name in page
    assert "Tokens a request costs: every message with its framing" in page  # count_tokens
    assert "The context map of an assembly of" in page  # ringbound.context_map.context_map


def test_performance_page_plots_the_run_it_was_given(site: Path, run_json: Path) -> None:
    page = (site / "performance" / "index.html").read_text(encoding="utf-8")
    groups = {b["group"] for b in json.loads(run_json.read_text())["benchmarks"]}
    for group in groups:
        assert f"img/bench/bench-{group}.svg" in page
        assert (site / "img" / "bench" / f"bench-{group}.svg").is_file()
    warm = (site / "img" / "bench" / "bench-assemble_warm.svg").read_text()
    assert "renamed_for_the_site_test" in warm and "1.2 ms" in warm


def test_inspect_page_shows_both_pictures(site: Path) -> None:
    page = (site / "inspect" / "index.html").read_text(encoding="utf-8")
    for png in ("inspect-terminal.png", "inspect-page.png"):
        assert png in page and (site / "img" / png).stat().st_size > 20_000


def test_links_that_leave_docs_point_to_the_repository() -> None:
    page = build_site.DOCS / "integrations" / "litellm.md"
    got = build_site.relink("[hook](../../examples/litellm/config.yaml) [x](../cli.md#x)", page)
    assert got == (
        "[hook](https://github.com/ringbound/ringbound/blob/main/examples/litellm/config.yaml)"
        " [x](../cli.md#x)"
    )
    readme = build_site.REPO / "README.md"
    got = build_site.relink("[cli](docs/cli.md) [log](CHANGELOG.md) [w](https://x.org)", readme)
    assert got == (
        "[cli](cli.md) [log](https://github.com/ringbound/ringbound/blob/main/CHANGELOG.md)"
        " [w](https://x.org)"
    )


def test_a_missing_run_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert build_site.main(["--bench-json", str(tmp_path / "none.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
