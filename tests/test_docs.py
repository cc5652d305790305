"""Docs that run: every ```python block of the README (and of docs/), every docstring example
of the package, the README's YAML block (it must be the defaults, key for key) and the
README's links to other files."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Iterator
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


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of the suite's own (``tests/stores/redis_server.py``: missing, it fails
    the test unless RINGBOUND_SKIP_REDIS=1), for the doc examples that connect to one."""
    spec = importlib.util.spec_from_file_location(
        "docs_redis_server", REPO / "tests" / "stores" / "redis_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.RedisServer(module.need_redis(), tmp_path_factory.mktemp("docs-redis"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("code", python_blocks())
def test_python_blocks_run(
    code: str,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if "RedisStore(" not in code:
        exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})
        capsys.readouterr()
        return
    # The example reads its server from REDIS_URL and must reach it: no Redis, no pass; and
    # it must really use it (an example that only builds a store proves nothing).
    import redis

    url = request.getfixturevalue("redis_url")
    monkeypatch.setenv("REDIS_URL", url)
    with redis.Redis.from_url(url, socket_timeout=5) as client:
        before = client.info("commandstats")
        exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})
        after = client.info("commandstats")
    used = {
        name: after[name]["calls"] - before.get(name, {"calls": 0})["calls"]
        for name in after
        if name in ("cmdstat_hmget", "cmdstat_evalsha", "cmdstat_eval")
    }
    assert used.get("cmdstat_hmget", 0) > 0, used  # records were read ...
    assert used.get("cmdstat_evalsha", 0) + used.get("cmdstat_eval", 0) > 0, used  # ... and written
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


def test_the_pydantic_ai_page_runs_both_ways_in() -> None:
    """Each of the two ways in (``RingboundHistory`` and ``history_processor`` in
    ``ProcessHistory``) has an example that runs (``test_python_blocks_run``)."""
    code = blocks(REPO / "docs" / "integrations" / "pydantic_ai.md", "python")
    assert any("capabilities=[history]" in c and "RingboundHistory(" in c for c in code)
    assert any("history_processor(" in c and "ProcessHistory(" in c for c in code)
