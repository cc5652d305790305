"""Builds the documentation site with mkdocs-material. The pages of ``docs/`` are laid out in a
build folder with what is generated from the sources: the first page from the README (its
two commands and its example), the API reference from the docstrings (mkdocstrings), and the
performance page's plots from a benchmark run's JSON (``docs/bench_plots.py``). Links that
leave ``docs/`` point to the repository. Then ``mkdocs build --strict`` runs on
``docs/mkdocs.yml``, so a broken link or reference fails the build.

    pip install -e '.[docs]'
    python docs/build_site.py [--out DIR] [--bench-json RUN.json | --run-benches]

Without ``--bench-json`` the plots come from ``docs/bench/benchmarks.json``, the committed run;
``--run-benches`` makes a short run first (about half a minute).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
RUN_JSON = DOCS / "bench" / "benchmarks.json"
BLOB = "https://github.com/ringbound/ringbound/blob/main/"
TREE = "https://github.com/ringbound/ringbound/tree/main/"
#: The benches whose groups the performance page plots, and the short run's settings.
BENCHES = (
    "benches/test_bench_assemble.py",
    "benches/test_bench_count.py",
    "benches/test_bench_validate.py",
)
SHORT_RUN = ("--benchmark-max-time=0.2", "--benchmark-min-rounds=5")

#: The API reference: (heading, objects) in the order a reader meets them.
API = (
    ("Assembling", ("Assembler", "AssemblyConfig", "AssemblyResult", "BodyResult")),
    (
        "What an assembly did",
        ("AssemblyReport", "StageRecord", "RewriteRecord", "SummaryRecord", "LedgerEntry"),
    ),
    ("Counting and validating", ("count_tokens", "count_text", "validate", "detect_provider")),
    ("Across turns", ("AssemblyState", "SideEffectLedger", "TokenLedger", "with_context_retry")),
    (
        "Errors",
        (
            "RingboundError",
            "InvalidMessageError",
            "PairingError",
            "BudgetExceededError",
            "ConfigError",
            "SummaryError",
        ),
    ),
)
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def relink(text: str, page: Path) -> str:
    """``text`` of the page at ``page`` (a file of the repository) with every relative link
    that leaves ``docs/`` pointed at the repository on GitHub. A page from outside ``docs/``
    (the README) lands at the site's root, so its links into ``docs/`` lose that prefix."""
    here = page.parent.resolve()
    site_dir = here if here.is_relative_to(DOCS) else DOCS

    def fix(m: re.Match[str]) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:|^#|^/", target):
            return m.group(0)
        path, hash_, anchor = target.partition("#")
        resolved = (here / path).resolve()
        if resolved.is_relative_to(DOCS) and resolved.is_file() and resolved.suffix != ".py":
            link = Path(os.path.relpath(resolved, site_dir)).as_posix()
        elif resolved.is_relative_to(REPO):
            rel = resolved.relative_to(REPO).as_posix()
            link = (TREE if resolved.is_dir() else BLOB) + rel
        else:
            return m.group(0)
        return f"{m.group(1)}{link}{hash_}{anchor}{m.group(3)}"

    return _LINK.sub(fix, text)


def first_page(readme: str) -> str:
    """The README's title and opening, its two commands and its example."""
    sections = re.split(r"(?m)^(?=## )", readme)
    opening = sections[0]
    wanted = [s for s in sections[1:] if s.startswith(("## The two commands", "## Example"))]
    if len(wanted) != 2:
        raise SystemExit("README.md has no '## The two commands' or '## Example' section")
    more = "\n## More\n\nThe whole README is in the [repository](" + BLOB + "README.md).\n"
    return opening + "".join(wanted) + more


def api_page() -> str:
    lines = [
        "# API reference",
        "",
        "The public names of `ringbound`, from their docstrings. The context map that",
        "`ringbound inspect` draws is `ringbound.context_map`.",
        "",
    ]
    for heading, names in API:
        lines += [f"## {heading}", ""]
        for name in names:
            lines += [f"::: ringbound.{name}", "    options:", "      heading_level: 3", ""]
    lines += ["## The context map", "", "::: ringbound.context_map", "    options:"]
    lines += ["      heading_level: 3", "      show_root_heading: false", ""]
    return "\n".join(lines)


def performance_plots(run_json: Path, out: Path) -> str:
    """The plots' section of the performance page, drawn from ``run_json`` into ``out``."""
    sys.path.insert(0, str(DOCS))
    from bench_plots import plot_groups, read_run

    run = read_run(run_json)
    plots = plot_groups(run, out)
    cpu = run.get("machine_info", {}).get("cpu", {})
    commit = (run.get("commit_info") or {}).get("id", "")[:10]
    shown = run_json.relative_to(REPO) if run_json.is_relative_to(REPO) else run_json.name
    lines = [
        "## Plots of a benchmark run",
        "",
        f"Drawn at build time from `{shown}`, the JSON of",
        f"`pytest {' '.join(BENCHES)} --benchmark-only --benchmark-json=FILE`",
        f"run on {run.get('datetime', '?')[:16].replace('T', ' ')} UTC at commit `{commit}`,",
        f"{cpu.get('brand_raw', 'an unknown CPU')}, {cpu.get('count', '?')} cores, Python "
        f"{run.get('machine_info', {}).get('python_version', '?')}. The tables below are",
        "`benches/compare.py`'s, measured separately.",
        "",
    ]
    for p in plots:
        lines += [f"![{p.group}](img/bench/{p.path.name})", ""]
    return "\n".join(lines)


def lay_out(src: Path, run_json: Path) -> None:
    """Writes the site's pages into ``src``."""
    for page in DOCS.rglob("*.md"):
        rel = page.relative_to(DOCS)
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(relink(page.read_text(encoding="utf-8"), page), encoding="utf-8")
    if (DOCS / "img").is_dir():
        shutil.copytree(DOCS / "img", src / "img", dirs_exist_ok=True)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (src / "index.md").write_text(relink(first_page(readme), REPO / "README.md"), encoding="utf-8")
    (src / "api.md").write_text(api_page(), encoding="utf-8")
    perf = (src / "performance.md").read_text(encoding="utf-8")
    title, _, rest = perf.partition("\n")
    plots = performance_plots(run_json, src / "img" / "bench")
    (src / "performance.md").write_text(f"{title}\n\n{plots}\n{rest}", encoding="utf-8")


def short_run(into: Path) -> Path:
    """A short benchmark run's JSON (half a minute on two cores)."""
    path = into / "benchmarks.json"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    cmd += [*BENCHES, "--benchmark-only", f"--benchmark-json={path}", *SHORT_RUN]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return path


def build(out: Path, run_json: Path | None = None, run_benches: bool = False) -> int:
    """Lays the site out and runs ``mkdocs build --strict`` into ``out``; its exit code."""
    with tempfile.TemporaryDirectory(prefix="ringbound-site-") as tmp:
        work = Path(tmp)
        if run_benches:
            run_json = short_run(work)
        src = work / "docs"
        lay_out(src, run_json or RUN_JSON)
        config = yaml.safe_load((DOCS / "mkdocs.yml").read_text(encoding="utf-8"))
        config["docs_dir"] = str(src)
        config["site_dir"] = str(out.resolve())
        for plugin in config["plugins"]:
            if isinstance(plugin, dict) and "mkdocstrings" in plugin:
                plugin["mkdocstrings"]["handlers"]["python"]["paths"] = [str(REPO / "python")]
        (work / "mkdocs.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        cmd = [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-q",
            "-f",
            str(work / "mkdocs.yml"),
        ]
        # The theme's notice about its successor is not a build problem.
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
        return subprocess.run(cmd, cwd=work, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=REPO / "target" / "site", help="where to write")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--bench-json", type=Path, help="plot this benchmark run's JSON")
    source.add_argument("--run-benches", action="store_true", help="plot a short run made now")
    args = p.parse_args(argv)
    if args.bench_json is not None and not args.bench_json.is_file():
        print(f"error: {args.bench_json} does not exist", file=sys.stderr)
        return 2
    return build(args.out, args.bench_json, args.run_benches)


if __name__ == "__main__":
    sys.exit(main())
