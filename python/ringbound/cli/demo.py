"""The demo: a real customer-service session (tau-bench, gpt-4o, airline domain) assembled at
shrinking budgets, with a before/after table and the ledger note that keeps the dropped
side effects in view."""

from __future__ import annotations

from importlib import resources
from typing import Any, TextIO

from .._core import LEDGER_MARKER, SUMMARY_MARKER
from ..assembler import Assembler
from ..config import AssemblyConfig
from ..counting import count_tokens, validate
from ..errors import BudgetExceededError
from ..summary import summarizers
from .session import Session, load_session

__all__ = ["AIRLINE_SIDE_EFFECT_TOOLS", "bundled_session", "run_demo"]

#: The airline tools that change a booking or move money: never to be repeated by accident.
AIRLINE_SIDE_EFFECT_TOOLS = (
    "book_reservation",
    "cancel_reservation",
    "send_certificate",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
)


def bundled_session() -> Session:
    """The bundled tau-bench session (MIT, Sierra; see ``data/LICENSE-tau-bench``)."""
    ref = resources.files("ringbound") / "data" / "tau_bench_airline_session.json"
    with resources.as_file(ref) as path:
        return load_session(path)


def _config(budget: int, **extra: Any) -> AssemblyConfig:
    """The demo's policy: the whole budget for the request, the last 2 rings and the last
    user turn protected, the airline's side-effecting tools ledgered."""
    return AssemblyConfig(
        model_input_limit=budget,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        recent_tool_rings=2,
        recent_user_turns=1,
        side_effect_tools=AIRLINE_SIDE_EFFECT_TOOLS,
        **extra,
    )


def run_demo(out: TextIO, fractions: tuple[float, ...] = (1.0, 0.75, 0.5, 0.25)) -> int:
    """Prints the demo table; returns the number of assemblies whose output failed a check."""
    session = bundled_session()
    messages = session.messages
    total = count_tokens(messages)
    rings = sum(1 for m in messages if m.get("tool_calls"))
    out.write(
        "ringbound demo: tau-bench airline session (gpt-4o, MIT, Sierra)\n"
        f"{len(messages)} messages, {rings} tool rings, {total} tokens "
        "(o200k_base, OpenAI framing)\n"
        "protected: system rules, first user goal, last 2 rings, last user turn; "
        "side-effect tools go to the ledger\n\n"
    )
    header = (
        f"{'budget':>7} {'before':>7} {'after':>7} {'msgs':>9} "
        f"{'rings-':>6} {'turns-':>6} {'ledger':>6} {'pairing':>8} {'ms':>6}\n"
    )
    out.write(header)
    out.write("-" * (len(header) - 1) + "\n")
    failures = 0
    last_note = None
    for fraction in fractions:
        budget = int(total * fraction)
        cfg = _config(budget)
        try:
            res = Assembler(cfg).assemble(messages)
        except BudgetExceededError as e:
            out.write(
                f"{budget:>7} {total:>7} {'-':>7} {'-':>9} {'':>6} {'':>6} {'':>6} {'':>8} {'':>6}"
                f"  fails closed: protected part needs {e.tokens} tokens\n"
            )
            continue
        r = res.report
        issues = validate(res.messages)
        fits = r.tokens_after <= budget and count_tokens(res.messages) == r.tokens_after
        ok = not issues and fits
        failures += not ok
        out.write(
            f"{budget:>7} {('' if r.tokens_before_exact else '<=') + str(r.tokens_before):>7} "
            f"{r.tokens_after:>7} "
            f"{f'{r.messages_after}/{r.messages_before}':>9} {len(r.dropped_rings):>6} "
            f"{len(r.dropped_turns):>6} {r.ledger_entries:>6} "
            f"{'valid' if ok else 'BROKEN':>8} {r.elapsed_s * 1000:>6.2f}\n"
        )
        notes = [
            m
            for m in res.messages
            if isinstance(m, dict) and str(m.get("content")).startswith(LEDGER_MARKER)
        ]
        if notes:
            last_note = notes[0]["content"]
    if last_note:
        out.write("\nledger note at the smallest budget that fits:\n")
        for line in last_note.splitlines():
            out.write(f"  {line}\n")
    failures += _summary_demo(out, messages, int(total * 0.5))
    out.write(
        "\nbefore/after: tokens of the request (<=N: an upper bound, the units dropped "
        "uncounted); msgs: kept/given; rings-/turns-: units "
        "dropped whole;\npairing: ringbound's validator on the output and an exact recount "
        "within the budget.\n"
    )
    return failures


def _summary_demo(out: TextIO, messages: list[Any], budget: int) -> int:
    """The same session at half its size with the extractive summarizer (no model needed):
    the dropped rings become one note after the ledger note. Returns 1 if the output fails a
    check."""
    cfg = _config(budget, summary_max_tokens=400)
    try:
        res = Assembler(cfg, summarizer=summarizers.extractive()).assemble(messages)
    except BudgetExceededError as e:
        out.write(f"\nwith a summary at {budget}: fails closed ({e.tokens} tokens needed)\n")
        return 0
    r, s = res.report, res.report.summary
    ok = not validate(res.messages) and count_tokens(res.messages) == r.tokens_after <= budget
    out.write(
        f"\nwith the extractive summarizer at {budget} tokens: {r.tokens_after} tokens, "
        f"{s.units if s else 0} dropped unit(s) summarized in {s.tokens if s else 0} tokens "
        "(compacted to summarize_trigger_ratio of the budget):\n"
    )
    note = next(
        (m["content"] for m in res.messages if str(m.get("content")).startswith(SUMMARY_MARKER)),
        "",
    )
    for line in note.splitlines()[:14]:
        out.write(f"  {line[:100]}\n")
    return 0 if ok else 1
