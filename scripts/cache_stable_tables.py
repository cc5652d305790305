"""The result tables of docs/cache-stable.md, made by running what each block shows: the
generated 300-turn session through ``simulate``, the bundled tau-bench session and a swe-gym
session of the shared corpus through ``ringbound simulate``, each without and with the
extractive summarizer. ``tests/test_doc_figures.py`` checks the doc holds exactly this output.

    python scripts/cache_stable_tables.py           # print the blocks
    python scripts/cache_stable_tables.py --write   # put them into docs/cache-stable.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ringbound as rb
from ringbound.cli.main import main as cli
from ringbound.cli.session import Session
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session, simulate

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "cache-stable.md"
CORPUS = Path(os.environ.get("RINGBOUND_CORPUS", REPO.parent / "shared" / "corpus"))
TAU = "python/ringbound/data/tau_bench_airline_session.json"
MONAI = "MONAI-3715_4.json"
AGENT = "agent_session_300.json"
AGENT_YAML = "agent.yaml"
#: ``simulate --provider``: each provider's caching rules.
PROVIDERS = ("anthropic", "bedrock_converse", "openai_chat")
#: The rows of a simulate table: one per way.
ROW = re.compile(r"^(ringbound stateful|ringbound timed|ringbound stateless|trim_messages) +\d")
#: ``simulate --think-time``: the providers whose cache lifetime the timed replays show, and
#: the mean seconds between turns.
TIMED = ("anthropic", "openai_chat")
THINK = "120"
AGENT_CODE = """import ringbound as rb
from ringbound.cli.session import Session
from ringbound.cli.simulate import agent_session, simulate, SIDE_EFFECT_TOOLS
cfg = rb.AssemblyConfig(model_input_limit=30_000, output_reserve_tokens=0,
                        safety_margin_tokens=0, side_effect_tools=SIDE_EFFECT_TOOLS)
print(simulate(Session(agent_session(300), None, True), cfg,
               name='agent_session(300)').table())"""


@dataclass(frozen=True)
class Block:
    """One fenced block of the doc: the command shown, and which lines of its output."""

    command: str
    run: Callable[[], str]
    #: ``all``: the whole output; ``table``: without the legend; ``rows``: the rows only.
    keep: str


def _agent(summarize: bool) -> str:
    cfg = rb.AssemblyConfig(
        model_input_limit=30_000,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=SIDE_EFFECT_TOOLS,
    )
    summarizer = rb.summarizers.extractive() if summarize else None
    sim = simulate(
        Session(agent_session(300), None, True),
        cfg,
        name="agent_session(300)",
        summarizer=summarizer,
    )
    return sim.table() + "\n"


def _cli(*argv: str) -> Callable[[], str]:
    def run() -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            cli(["simulate", *argv])
        return out.getvalue()

    return run


def _kept(text: str, keep: str) -> list[str]:
    lines = text.rstrip("\n").split("\n")
    rows = [i for i, line in enumerate(lines) if ROW.match(line)]
    if keep == "rows":
        return [lines[i] for i in rows]
    if keep == "table":
        return lines[: rows[-1] + 1]
    return lines


def blocks(workdir: Path) -> list[str]:
    """Every block of the Results section, in the doc's order, as the doc shows it."""
    sessions = json.loads((CORPUS / "swe-gym" / "sample_raw.json").read_text(encoding="utf-8"))
    monai = next(s for s in sessions if s["instance_id"] == "Project-MONAI__MONAI-3715_4")
    (workdir / MONAI).write_text(
        json.dumps({"messages": monai["messages"], "tools": monai["tools"]}), encoding="utf-8"
    )
    monai_path = str(workdir / MONAI)
    (workdir / AGENT).write_text(json.dumps(agent_session(300)), encoding="utf-8")
    tools = ", ".join(SIDE_EFFECT_TOOLS)
    (workdir / AGENT_YAML).write_text(
        f"context_assembly:\n  side_effect_tools: [{tools}]\n", encoding="utf-8"
    )
    agent_args = [str(workdir / AGENT), "--budget", "30000", "--config", str(workdir / AGENT_YAML)]
    runs = [
        [Block(f'python -c "\n{AGENT_CODE}"', lambda: _agent(False), "all")],
        [Block("", lambda: _agent(True), "rows")],
        [
            Block(f"ringbound simulate {TAU}", _cli(str(REPO / TAU)), "table"),
            Block(
                f"ringbound simulate {TAU} --summarize",
                _cli(str(REPO / TAU), "--summarize"),
                "rows",
            ),
        ],
        [
            Block(f"ringbound simulate {MONAI}", _cli(monai_path), "table"),
            Block(
                f"ringbound simulate {MONAI} --summarize", _cli(monai_path, "--summarize"), "rows"
            ),
        ],
        [
            Block(
                f"ringbound simulate {AGENT} --budget 30000 --config {AGENT_YAML} --provider {p}",
                _cli(*agent_args, "--provider", p),
                "table",
            )
            for p in PROVIDERS
        ],
        [
            Block(
                f"ringbound simulate {TAU} --provider {p}",
                _cli(str(REPO / TAU), "--provider", p),
                "table",
            )
            for p in PROVIDERS
        ],
        [
            Block(
                f"ringbound simulate {AGENT} --budget 30000 --config {AGENT_YAML} --provider {p} "
                f"--think-time {THINK}",
                _cli(*agent_args, "--provider", p, "--think-time", THINK),
                "table",
            )
            for p in TIMED
        ],
        [
            Block(
                f"ringbound simulate {TAU} --provider {p} --think-time {THINK}",
                _cli(str(REPO / TAU), "--provider", p, "--think-time", THINK),
                "table",
            )
            for p in TIMED
        ],
    ]
    out = []
    for group in runs:
        lines: list[str] = []
        for block in group:
            if block.command:
                lines.append(f"$ {block.command}")
            lines += _kept(block.run(), block.keep)
        # The temporary folder is not part of what the reader runs.
        out.append("\n".join(lines).replace(str(workdir) + "/", "") + "\n")
    return out


def doc_blocks(text: str) -> list[tuple[int, int]]:
    """Where the fenced blocks of the Results section sit in ``text``: (start, end) of each
    block's body."""
    section = text.index("## Results")
    spans = []
    for m in re.finditer(r"```(?:console|text)\n(.*?)```", text[section:], flags=re.S):
        spans.append((section + m.start(1), section + m.end(1)))
    return spans


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help="write the blocks into the doc")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        made = blocks(Path(tmp))
    if not args.write:
        print("\n".join(made))
        return
    text = DOC.read_text(encoding="utf-8")
    spans = doc_blocks(text)
    if len(spans) != len(made):
        raise SystemExit(f"the doc has {len(spans)} result blocks, the script makes {len(made)}")
    for (start, end), body in reversed(list(zip(spans, made, strict=True))):
        text = text[:start] + body + text[end:]
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
