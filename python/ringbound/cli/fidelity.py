"""``ringbound simulate SESSION --fidelity``: at every assistant tool call of a session, the
history before it is assembled with the user's config, and the report says how many of the
facts that call uses (``ringbound.fidelity``) the request still holds; so a budget and the
stages can be chosen from one's own traffic. Budgets are 30/50/70% of each history's tokens,
or the one ``--budget`` / ``--limit`` gives."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import orjson

from ..adapted import read_canonical
from ..assembler import Assembler
from ..config import AssemblyConfig
from ..counting import count_tokens, validate
from ..errors import BudgetExceededError
from ..fidelity import CutPoint, cut_points, recall
from ..providers import adapter
from .session import Session

__all__ = ["FRACTIONS", "FidelityRow", "cli_main", "fidelity_rows", "report"]

FRACTIONS = (0.3, 0.5, 0.7)


@dataclass(frozen=True)
class FidelityRow:
    """One budget over every cut point of the session.

    Attributes:
        budget: ``"30%"`` (of each history's tokens) or the fixed budget in tokens.
        cuts: Cut points measured (tool calls with at least one fact, complete history).
        facts: Facts over those cut points.
        recall: Mean share of a cut point's facts the request holds; a refusal counts 0.
        held_when_served: The same over the served requests only (None: none served).
        refused: Share of cut points refused (``BudgetExceededError``).
        tokens_per_budget: Mean ``tokens_after / budget`` of the served requests.
    """

    budget: str
    cuts: int
    facts: int
    recall: float | None
    held_when_served: float | None
    refused: float | None
    tokens_per_budget: float | None


def _canonical(session: Session, provider: str) -> tuple[list[Any], list[int | None]]:
    """The session as OpenAI Chat messages, and for each the native index a history ending
    just before it would end at (None when it begins inside a native message)."""
    if provider == "openai_chat":
        return list(session.messages), list(range(len(session.messages)))
    c = read_canonical(adapter(provider), list(session.messages), session.system)
    starts: list[int | None] = []
    previous_end = 0
    for start, end in c.spans:
        starts.append(start if start >= 0 and start >= previous_end else None)
        previous_end = max(previous_end, end)
    return list(c.messages), starts


def _request_messages(res: Any, provider: str) -> list[Any]:
    """The assembled request as OpenAI Chat messages (its top-level system among them)."""
    if provider == "openai_chat":
        return res.messages
    return list(read_canonical(adapter(provider), res.messages, res.system).messages)


def fidelity_rows(
    session: Session,
    config: AssemblyConfig,
    provider: str = "openai_chat",
    *,
    fractions: Sequence[float] = FRACTIONS,
    fixed: bool = False,
) -> list[FidelityRow]:
    """Measures recall at each fraction of each history's tokens (the whole budget for the
    request: no reserve, no margin), or, with ``fixed``, at ``config.budget`` alone.

    Example:
        >>> from ringbound.cli.simulate import agent_session
        >>> s = Session(agent_session(turns=30), tools=None, bare=True)
        >>> [r.budget for r in fidelity_rows(s, AssemblyConfig(), fractions=(0.5,))]
        ['50%']
    """
    canonical, native_at = _canonical(session, provider)
    places: list[tuple[int, CutPoint]] = []
    for cut in cut_points(canonical):
        end = native_at[cut.index]
        if end is None:
            continue
        history = list(session.messages[:end])
        if not validate(history, provider, system=session.system):
            places.append((end, cut))
    settings = [(f"{config.budget:,}", None)] if fixed else [(f"{f:.0%}", f) for f in fractions]
    rows = []
    for label, fraction in settings:
        recalls, served, refused, fill = [], [], 0, []
        for end, cut in places:
            history = list(session.messages[:end])
            cfg = config
            if fraction is not None:
                tokens = count_tokens(
                    history, provider, config.encoding, session.tools, system=session.system
                )
                cfg = dataclasses.replace(
                    config,
                    model_input_limit=max(1, int(tokens * fraction)),
                    output_reserve_tokens=0,
                    safety_margin_tokens=0,
                )
            try:
                res = Assembler(cfg, provider=provider).assemble(
                    history, session.tools, system=session.system
                )
            except BudgetExceededError:
                refused += 1
                recalls.append(0.0)
                continue
            share = recall(cut.facts, _request_messages(res, provider))
            recalls.append(share)
            served.append(share)
            fill.append(res.report.tokens_after / cfg.budget)
        n = len(places)
        rows.append(
            FidelityRow(
                budget=label,
                cuts=n,
                facts=sum(len(c.facts) for _, c in places),
                recall=statistics.fmean(recalls) if n else None,
                held_when_served=statistics.fmean(served) if served else None,
                refused=refused / n if n else None,
                tokens_per_budget=statistics.fmean(fill) if fill else None,
            )
        )
    return rows


def _fixed(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if pct else f"{value:.3f}"


def report(rows: list[FidelityRow], name: str, out: TextIO, json_out: bool = False) -> None:
    """Prints the rows as a table (or JSON)."""
    if json_out:
        body = {"session": name, "rows": [dataclasses.asdict(r) for r in rows]}
        out.write(orjson.dumps(body, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    cuts = rows[0].cuts if rows else 0
    facts = rows[0].facts if rows else 0
    lines = [
        f"{name}: {cuts} tool calls using {facts} facts from earlier tool results",
        f"{'budget':>10} {'recall':>7} {'served':>7} {'refused':>8} {'tokens/budget':>13}",
    ]
    for r in rows:
        lines.append(
            f"{r.budget:>10} {_fixed(r.recall):>7} {_fixed(r.held_when_served):>7} "
            f"{_fixed(r.refused, True):>8} {_fixed(r.tokens_per_budget):>13}"
        )
    lines.append(
        "recall: mean share of each call's facts (argument values first seen in a tool result) "
        "that the request holds verbatim, a refusal counting 0;\nserved: the same over the "
        "requests served; budget: a share of each history's tokens, or the fixed budget."
    )
    out.write("\n".join(lines) + "\n")


def cli_main(
    session: Session,
    config: AssemblyConfig,
    provider: str,
    *,
    budget: int | None,
    limit: int | None,
    name: str,
    json_out: bool,
    out: TextIO,
) -> int:
    """``simulate --fidelity``: with ``budget`` (the whole budget) or ``limit``
    (``model_input_limit``, the config's reserve and margin apply) one fixed budget for every
    cut point, else 30/50/70% of each history's tokens. Returns 0."""
    if budget is not None:
        config = dataclasses.replace(
            config, model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0
        )
    elif limit is not None:
        config = dataclasses.replace(config, model_input_limit=limit)
    fixed = budget is not None or limit is not None
    report(fidelity_rows(session, config, provider, fixed=fixed), name, out, json_out)
    return 0
