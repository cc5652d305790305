"""Fidelity (issue 39): how many of the facts the agent's next tool call uses an assembled
request still holds, for ringbound and the baselines, at 30/50/70% of each history's tokens,
on the real sessions of ``../shared/corpus`` and on generated ones. The facts and the recall
are ``ringbound.fidelity``'s; the method is written down in docs/performance.md ("Fidelity").

    python benches/fidelity.py [--fractions 0.3 0.5 0.7] [--json OUT.json]

Markdown on stdout: one table per budget (recall, refused, unsendable or over, tokens used;
recall per corpus family)."""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import fidelity_strategies as fs
import workload

import ringbound as rb
from ringbound.adapted import read_canonical
from ringbound.fidelity import CutPoint, cut_points, identifiers, recall
from ringbound.providers import adapter

FRACTIONS = (0.3, 0.5, 0.7)
FAMILIES = ("tau-bench", "swe-gym", "swe-agent", "claude-code", "generated")
#: Claude Code rebuilds its requests with this system (the logs do not record it).
CLAUDE_CODE_SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."

Message = dict[str, Any]


@dataclass(frozen=True)
class Session:
    family: str
    name: str
    messages: list[Message]
    tools: list[Any] | None


# Sessions -------------------------------------------------------------------------------------


def _without_null_parameters(tools: list[Any]) -> list[Any]:
    """swe-gym's ``finish`` has ``parameters: null`` (no parameters): the key is left out."""
    out = []
    for t in tools:
        f = t.get("function") or {}
        if "parameters" in f and f["parameters"] is None:
            t = {**t, "function": {k: v for k, v in f.items() if k != "parameters"}}
        out.append(t)
    return out


def _claude_code_messages(lines: Iterable[str]) -> list[Message]:
    """A Claude Code log as the OpenAI Chat messages ringbound reads it as: user and assistant
    events in order, same-role neighbours merged (as Claude Code sends them), malformed events
    left out (tests/providers/test_anthropic.py), then the core's canonical reading."""
    native: list[Message] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("type") not in ("user", "assistant"):
            continue
        m = event.get("message")
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        one = {"role": m.get("role"), "content": parts}
        try:
            read_canonical(adapter("anthropic"), [one], None)
        except rb.RingboundError:
            continue
        if native and native[-1]["role"] == one["role"]:
            native[-1] = {**native[-1], "content": native[-1]["content"] + parts}
        else:
            native.append(one)
    return list(read_canonical(adapter("anthropic"), native, CLAUDE_CODE_SYSTEM).messages)


def corpus_sessions() -> list[Session]:
    """Every real session of the corpus, as OpenAI Chat messages, each whole (a trailing call
    without its result is a place to measure: the history before it is complete)."""
    corpus = workload.CORPUS
    out = [
        Session("tau-bench", f"{run['task_id']}-{run['trial']}", run["traj"], None)
        for run in json.loads((corpus / "tau-bench" / "gpt-4o-airline.json").read_text())
    ]
    for s in json.loads((corpus / "swe-gym" / "sample_raw.json").read_text()):
        tools = _without_null_parameters(s["tools"])
        out.append(Session("swe-gym", s["instance_id"], s["messages"], tools))
    for path in sorted((corpus / "swe-agent").glob("*.traj")):
        history = json.loads(path.read_text())["history"]
        out.append(Session("swe-agent", path.stem, workload.swe_agent_messages(history), None))
    for path in sorted((corpus / "claude-code").glob("*.jsonl")):
        messages = _claude_code_messages(path.read_text().splitlines())
        out.append(Session("claude-code", path.stem, messages, None))
    return out


class ReferringWriter(workload.SessionWriter):
    """The reference workload's writer (real prose, source files, test logs, JSON payloads),
    but an agent that acts on what it saw: most calls take a path or an id from an earlier
    result, half of them from the last three results and half from any earlier one, and its
    plain turns now and then repeat an id it just read."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.seen: list[list[str]] = []

    def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self._call_id(),
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)},
        }

    def ring(self) -> list[Message]:
        rng = self.rng
        calls = []
        for _ in range(rng.choices((1, 2, 3), weights=(6, 3, 1))[0]):
            pool = self.seen[-3:] if rng.random() < 0.5 else self.seen
            source = [i for result in pool for i in result]
            if source and rng.random() < 0.7:
                ident = rng.choice(source)
                tool = "read_file" if "/" in ident or ident.endswith(".py") else "http_get"
                args = {
                    "path" if tool == "read_file" else "id": ident,
                    "reason": workload.prose(rng, 6),
                }
            else:
                tool = rng.choice(workload.TOOLS)
                args = {"path": f"src/{rng.choice(workload.NOUNS)}.py"}
            calls.append(self._call(tool, args))
        content = workload.prose(rng, rng.randint(10, 40)) if rng.random() < 0.4 else None
        out: list[Message] = [{"role": "assistant", "content": content, "tool_calls": calls}]
        for c in calls:
            text = self.result(c["function"]["name"])
            self.seen.append(identifiers(text))
            out.append({"role": "tool", "tool_call_id": c["id"], "content": text})
        return out

    def grow(self, messages: int) -> list[Message]:
        while len(self.messages) < messages:
            recent = self.seen[-1] if self.seen else []
            if recent and self.rng.random() < 0.15:
                noted = " ".join(self.rng.sample(recent, min(2, len(recent))))
                self.messages += [
                    {
                        "role": "assistant",
                        "content": f"Noted {noted}. " + workload.prose(self.rng, 40),
                    },
                    {"role": "user", "content": "Continue. " + workload.prose(self.rng, 15)},
                ]
            self.messages += self.ring()
        return self.messages


def generated_sessions(count: int = 4, messages: int = 120) -> list[Session]:
    return [
        Session("generated", f"seed-{seed}", ReferringWriter(seed).grow(messages), None)
        for seed in range(1, count + 1)
    ]


# Measuring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One strategy at one cut point and budget."""

    family: str
    fraction: float
    budget: int
    facts: int
    #: None: refused; else the share of the facts the request holds.
    held: float | None
    #: The request pairs (rb.validate) and fits (rb.count_tokens <= budget).
    sendable: bool
    tokens: int

    @property
    def recall(self) -> float:
        """What the next step gets: the share held by a request that can be sent, else 0."""
        return self.held if self.held is not None and self.sendable else 0.0


def measure_cut(session: Session, cut: CutPoint, fraction: float, strategy: fs.Strategy) -> Outcome:
    history = session.messages[: cut.index]
    budget = int(rb.count_tokens(history, tools=session.tools) * fraction)
    out = strategy.run(history, session.tools, budget)
    if out is None:
        return Outcome(session.family, fraction, budget, len(cut.facts), None, False, 0)
    tokens = rb.count_tokens(out, tools=session.tools)
    sendable = (
        tokens <= budget
        and not rb.validate(out)
        and any(m.get("role") not in ("system", "developer") for m in out)
    )
    return Outcome(
        session.family, fraction, budget, len(cut.facts), recall(cut.facts, out), sendable, tokens
    )


def places(sessions: Sequence[Session]) -> list[tuple[Session, CutPoint]]:
    """Every cut point whose history is a request ringbound's validator accepts."""
    out = []
    for s in sessions:
        for cut in cut_points(s.messages):
            if not rb.validate(s.messages[: cut.index]):
                out.append((s, cut))
    return out


@dataclass
class Row:
    """A strategy's outcomes at one budget, per family and overall."""

    name: str
    kind: str
    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, family: str | None) -> list[Outcome]:
        return [o for o in self.outcomes if family is None or o.family == family]

    def stats(self, family: str | None = None) -> dict[str, float | int | None]:
        rows = self.of(family)
        if not rows:
            return {"cuts": 0}
        served = [o for o in rows if o.held is not None]
        sent = [o for o in rows if o.sendable]
        return {
            "cuts": len(rows),
            "recall": statistics.fmean(o.recall for o in rows),
            "held_when_served": statistics.fmean(o.held for o in served) if served else None,
            "refused": sum(o.held is None for o in rows) / len(rows),
            "unsendable_or_over": sum(o.held is not None and not o.sendable for o in rows)
            / len(rows),
            "tokens_per_budget": statistics.fmean(o.tokens / o.budget for o in sent)
            if sent
            else None,
        }


def sweep(
    sessions: Sequence[Session],
    strategies: Sequence[fs.Strategy],
    fractions: Sequence[float] = FRACTIONS,
) -> dict[float, list[Row]]:
    cuts = places(sessions)
    out: dict[float, list[Row]] = {}
    for fraction in fractions:
        rows = [Row(s.name, s.kind) for s in strategies]
        for session, cut in cuts:
            for row, strategy in zip(rows, strategies, strict=True):
                row.outcomes.append(measure_cut(session, cut, fraction, strategy))
        out[fraction] = rows
    return out


# Reporting ------------------------------------------------------------------------------------


def _num(value: Any, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:.3f}"


def table(rows: list[Row], families: Sequence[str]) -> str:
    present = [f for f in families if rows and rows[0].of(f)]
    head = ["strategy", "recall", "served recall", "refused", "unsendable or over"]
    head += ["tokens / budget"]
    head += [f"recall {f} ({rows[0].stats(f)['cuts']})" for f in present]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        s = r.stats()
        cells = [
            r.name,
            _num(s["recall"]),
            _num(s["held_when_served"]),
            _num(s["refused"], True),
            _num(s["unsendable_or_over"], True),
            _num(s["tokens_per_budget"]),
        ]
        cells += [_num(r.stats(f)["recall"]) for f in present]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def family_table(rows: list[Row], families: Sequence[str]) -> str:
    """Refused and unsendable-or-over shares per family: ``refused / bad``."""
    present = [f for f in families if rows and rows[0].of(f)]
    head = ["strategy", *present]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [r.name]
        for f in present:
            s = r.stats(f)
            cells.append(f"{_num(s['refused'], True)} / {_num(s['unsendable_or_over'], True)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(results: dict[float, list[Row]], families: Sequence[str] = FAMILIES) -> str:
    parts = []
    for fraction, rows in results.items():
        cuts = rows[0].stats()["cuts"] if rows else 0
        parts.append(f"### Budget {fraction:.0%} of each history's tokens ({cuts} cut points)")
        parts.append(table(rows, families))
        parts.append("Refused / unsendable or over, per family:")
        parts.append(family_table(rows, families))
    return "\n\n".join(parts)


def to_json(results: dict[float, list[Row]], families: Sequence[str] = FAMILIES) -> dict[str, Any]:
    return {
        str(fraction): [
            {
                "strategy": r.name,
                "kind": r.kind,
                "all": r.stats(),
                **{f: r.stats(f) for f in families if r.of(f)},
            }
            for r in rows
        ]
        for fraction, rows in results.items()
    }


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    p.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    p.add_argument("--generated", type=int, default=4, help="generated sessions (120 messages)")
    p.add_argument("--json", help="also write every number to this file")
    args = p.parse_args(argv)
    sessions = [s for s in corpus_sessions() if s.family in args.families]
    if "generated" in args.families:
        sessions += generated_sessions(args.generated)
    results = sweep(sessions, fs.strategies(), args.fractions)
    print(report(results, args.families))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(results, args.families), f, indent=2)


if __name__ == "__main__":
    main()
