"""Docs that run: every ```python block of the README (and of docs/), every docstring example
of the package, the README's YAML block (it must be the defaults, key for key) and the
README's links to other files."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import ringbound as rb

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
#: Docstring examples in the package when this test was written; more is fine, fewer is not.
MIN_DOCTEST_EXAMPLES = 17


def blocks(path: Path, language: str) -> list[str]:
    return [
        body for lang, body in FENCE.findall(path.read_text(encoding="utf-8")) if lang == language
    ]


def python_blocks() -> list[object]:
    files = [README, *sorted((REPO / "docs").rglob("*.md"))]
    return [
        pytest.param(body, id=f"{path.relative_to(REPO)}-{i}")
        for path in files
        for i, body in enumerate(blocks(path, "python"))
    ]


def test_readme_has_a_python_example() -> None:
    assert blocks(README, "python")


@pytest.mark.parametrize("code", python_blocks())
def test_python_blocks_run(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})
    capsys.readouterr()


def package_modules() -> list[str]:
    # __main__ runs the command line on import.
    return [
        m.name
        for m in pkgutil.walk_packages(rb.__path__, "ringbound.")
        if not m.name.endswith("__main__")
    ]


def test_docstring_examples() -> None:
    attempted = 0
    failures = []
    for name in ["ringbound", *package_modules()]:
        result = doctest.testmod(
            importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False, report=True
        )
        attempted += result.attempted
        if result.failed:
            failures.append(f"{name}: {result.failed} of {result.attempted} failed")
    assert not failures, failures
    assert attempted >= MIN_DOCTEST_EXAMPLES


def test_readme_yaml_is_every_key_at_its_default(tmp_path: Path) -> None:
    (yaml_block,) = blocks(README, "yaml")
    path = tmp_path / "readme.yaml"
    path.write_text(yaml_block, encoding="utf-8")
    assert rb.AssemblyConfig.from_yaml(path) == rb.AssemblyConfig()
    listed = set(re.findall(r"^  (\w+):", yaml_block, re.MULTILINE))
    assert listed == {f.name for f in dataclasses.fields(rb.AssemblyConfig)}


def test_readme_links_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)#]+)\)", text) if "://" not in t]
    assert links
    missing = [t for t in links if not (REPO / t).exists()]
    assert not missing, missing
