"""The release workflow cannot run here; `.ci/run` checks it against the workflow schema, and
this checks what the schema cannot: every platform the README promises is built and tested,
jobs name jobs that exist, and publishing is by trusted publishing from a tag only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

import ringbound as rb

REPO = Path(__file__).resolve().parent.parent
WORKFLOW = REPO / ".github" / "workflows" / "release.yml"


def jobs() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]


def builds(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The inputs of every maturin-action step of a job, one per matrix entry."""
    steps = [s for s in job["steps"] if s.get("uses", "").startswith("PyO3/maturin-action@")]
    entries = job.get("strategy", {}).get("matrix", {}).get("include", [{}])
    out = []
    for step in steps:
        for entry in entries:
            inputs = {
                k: re.sub(r"\$\{\{ matrix\.(\w+) \}\}", lambda m, e=entry: e[m.group(1)], str(v))
                for k, v in step["with"].items()
            }
            out.append(inputs)
    return out


def test_every_promised_platform_is_built() -> None:
    built = {
        (b.get("command", "build"), b.get("manylinux", ""), b.get("target", ""))
        for job in jobs().values()
        for b in builds(job)
    }
    for platform in [
        ("build", "2014", "x86_64"),
        ("build", "2014", "aarch64"),
        ("build", "musllinux_1_2", "x86_64"),
        ("build", "musllinux_1_2", "aarch64"),
        ("build", "", "universal2-apple-darwin"),
        ("build", "", "x64"),
        ("sdist", "", ""),
    ]:
        assert platform in built, platform
    for b in builds_of_wheels():
        assert "--release" in b["args"] and "--locked" in b["args"], b


def builds_of_wheels() -> list[dict[str, Any]]:
    return [b for job in jobs().values() for b in builds(job) if b.get("command") != "sdist"]


def test_every_wheel_job_installs_and_runs_what_it_built() -> None:
    for name, job in jobs().items():
        if not builds(job) or name == "sdist":
            continue
        script = "\n".join(
            s.get("run", "") + str(s.get("with", {}).get("run", "")) for s in job["steps"]
        )
        assert "--only-binary :all:" in script, name
        assert "ringbound --version" in script and "ringbound demo" in script, name


def test_needs_name_existing_jobs() -> None:
    all_jobs = jobs()
    for name, job in all_jobs.items():
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            assert need in all_jobs, (name, need)


def test_publishing_is_trusted_and_from_tags_only() -> None:
    all_jobs = jobs()
    publish = all_jobs["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/')"
    assert publish["permissions"] == {"id-token": "write"}
    assert set(publish["needs"]) == set(all_jobs) - {"publish", "version"}
    step = next(s for s in publish["steps"] if "gh-action-pypi-publish" in s.get("uses", ""))
    assert "password" not in step.get("with", {})  # no stored token: OIDC
    # Nothing else may write: the workflow's default is read-only.
    assert yaml.safe_load(WORKFLOW.read_text())["permissions"] == {"contents": "read"}


def test_the_changelog_has_a_section_for_this_version() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    assert f"\n## [{rb.__version__}]" in changelog
