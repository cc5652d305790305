"""The records of a replayed session (``ringbound simulate``): each way of assembling it, by
name, its turns, and the comparison of the ways as a table and as JSON. The replay that fills
them is ``ringbound.cli.simulate``; ``ringbound.cli.simulate_plot`` draws them."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

__all__ = ["LEGEND", "STATEFUL", "STATELESS", "TIMED", "TRIM", "Simulation", "Turn", "Way"]

STATEFUL = "ringbound stateful"
STATELESS = "ringbound stateless"
#: Cache-stable with ``compact_on_cache_expiry``: only with ``think_time``.
TIMED = "ringbound timed"
TRIM = "trim_messages"

LEGEND = (
    "1st cut: the first turn that compacted (stateful) or did not begin with the whole "
    "previous request;\n"
    "cached>: mean share of the request's tokens equal to a prefix of the previous request, "
    "over the turns after it;\n"
    "util>, util: mean tokens / budget over those turns, over all turns; compact: such "
    "turns; summ: summarizer calls;\n"
    "eff. cost: uncached + cached x price factor, summed over the turns; /stateless: that "
    "cost over stateless ringbound's;\n"
    "empty: requests left with no message but the system one; bad: requests over budget or "
    "with broken pairing."
)


@dataclass(frozen=True)
class Turn:
    """One replayed turn of one way of assembling.

    Attributes:
        turn: 1 for the first turn.
        history: Messages of the session given to this turn.
        tokens: Tokens of the request (messages, framing, tools schema, system).
        messages: Messages in the request.
        conversation: Of those, the ones that are not a system (or developer) message: 0
            means the request lost the whole conversation.
        cached_tokens: Tokens of its longest run of leading messages identical to the
            previous request's (0 on the first turn); under a provider's caching rules
            (``simulate(cache=...)``), the tokens its cache read.
        kept_previous: Whether the whole previous request is a prefix of this one (the
            turn only appended).
        compacted: Whether this turn cut the history anew (the stateful way: a compaction;
            the others: a request that does not begin with the whole previous one).
        state: ``report.state`` of the stateful way, else None.
        summarizer_calls: Summarizer calls this turn made.
        within_budget: Whether ``tokens`` is at most the budget.
        valid: Whether the request passes ``ringbound.validate``.
        written_tokens: Under Anthropic's or Bedrock's rules: the tokens written to the
            cache (priced at ``write_factor``).
        at: When the request was sent, in seconds from the first (``think_time``), or None.
    """

    turn: int
    history: int
    tokens: int
    messages: int
    conversation: int
    cached_tokens: int
    kept_previous: bool
    compacted: bool
    state: str | None = None
    summarizer_calls: int = 0
    within_budget: bool = True
    valid: bool = True
    written_tokens: int = 0
    at: float | None = None

    @property
    def cached_fraction(self) -> float:
        return self.cached_tokens / self.tokens if self.tokens else 0.0

    def cost(self, price_factor: float, write_factor: float = 1.0) -> float:
        """Effective input tokens: the uncached ones, plus the cached ones at their price and
        the ones written to the cache at theirs."""
        plain = self.tokens - self.cached_tokens - self.written_tokens
        return plain + self.cached_tokens * price_factor + self.written_tokens * write_factor


@dataclass(frozen=True)
class Way:
    """One way of assembling, over the whole replay.

    Attributes:
        name: ``ringbound stateful``, ``ringbound stateless`` or ``trim_messages``.
        turns: Its turns, in order.
        skipped: Why it did not run (a dependency missing), else None.
        error: The error that stopped it (``turn N: Type: message``), else None.
    """

    name: str
    turns: tuple[Turn, ...] = ()
    skipped: str | None = None
    error: str | None = None

    @property
    def first_compaction(self) -> int | None:
        """The turn number of the first compaction, None when there was none."""
        return next((t.turn for t in self.turns if t.compacted), None)

    @property
    def cached_after_first_compaction(self) -> float | None:
        """Mean cached-prefix fraction over the turns after the first compaction."""
        first = self.first_compaction
        after = [t.cached_fraction for t in self.turns if first is not None and t.turn > first]
        return statistics.fmean(after) if after else None

    @property
    def compactions(self) -> int:
        return sum(t.compacted for t in self.turns)

    @property
    def summarizer_calls(self) -> int:
        return sum(t.summarizer_calls for t in self.turns)

    @property
    def broken(self) -> int:
        """Turns whose request was over budget or would be refused for its pairing."""
        return sum(not (t.within_budget and t.valid) for t in self.turns)

    @property
    def empty(self) -> int:
        """Turns whose request kept no message but the system one."""
        return sum(t.conversation == 0 for t in self.turns)

    @property
    def reuse_breaks(self) -> int:
        """Stateful turns reported ``reused`` whose request rewrote the previous one's
        prefix: each one is a bug (the cache it promised was lost)."""
        return sum(t.state == "reused" and not t.kept_previous for t in self.turns)

    def utilization(self, budget: int, after_first_compaction: bool = False) -> float | None:
        """Mean request tokens / budget, over every turn or the turns after the first
        compaction."""
        first = self.first_compaction if after_first_compaction else 0
        ratios = [t.tokens / budget for t in self.turns if first is not None and t.turn > first]
        return statistics.fmean(ratios) if ratios else None

    def cost(self, price_factor: float, write_factor: float = 1.0) -> float:
        return sum(t.cost(price_factor, write_factor) for t in self.turns)


@dataclass(frozen=True)
class Simulation:
    """A replayed session: the turns of each way and the totals."""

    name: str
    provider: str
    budget: int
    price_factor: float
    #: Tokens of the last turn's whole history (what a request without assembly would cost).
    session_tokens: int
    #: Messages the replay left out: a trailing call without its results.
    unreplayed: int
    ways: tuple[Way, ...]
    #: What counted tokens for ``trim_messages``.
    trim_counter: str = ""
    #: The provider caching rules the replay applied (``ringbound.cli.cache_rules``), or
    #: None: the prefix shared with the previous request is the cached part.
    cache: str | None = None
    #: Price of a token written to the cache (1.25 under Anthropic's and Bedrock's rules).
    write_factor: float = 1.0
    #: The mean seconds between turns (``think_times``) and its seed, and the provider's
    #: cache lifetime the replay applied; None: turns follow each other within it.
    think_time: float | None = None
    seed: int = 0
    lifetime: float | None = None

    def way(self, name: str) -> Way:
        return next(w for w in self.ways if w.name == name)

    @property
    def turns(self) -> int:
        return max((len(w.turns) for w in self.ways), default=0)

    def summary(self) -> list[dict[str, Any]]:
        """One row per way that ran: the table's numbers."""
        anchor = self.way(STATELESS).cost(self.price_factor, self.write_factor)
        rows = []
        for w in self.ways:
            if w.skipped is not None:
                continue
            cost = w.cost(self.price_factor, self.write_factor)
            rows.append(
                {
                    "way": w.name,
                    "turns": len(w.turns),
                    "first_compaction": w.first_compaction,
                    "cached_after_first_compaction": w.cached_after_first_compaction,
                    "utilization_after_first_compaction": w.utilization(self.budget, True),
                    "utilization": w.utilization(self.budget),
                    "compactions": w.compactions,
                    "summarizer_calls": w.summarizer_calls,
                    "effective_cost": cost,
                    "cost_per_turn": cost / len(w.turns) if w.turns else None,
                    "cost_vs_stateless": cost / anchor if anchor else None,
                    "empty": w.empty,
                    "broken": w.broken,
                    "reuse_breaks": w.reuse_breaks,
                    "error": w.error,
                }
            )
        return rows

    def to_dict(self, per_turn: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session": self.name,
            "provider": self.provider,
            "budget": self.budget,
            "price_factor": self.price_factor,
            "turns": self.turns,
            "session_tokens": self.session_tokens,
            "unreplayed_messages": self.unreplayed,
            "trim_counter": self.trim_counter,
            "cache": self.cache,
            "write_factor": self.write_factor,
            "think_time": self.think_time,
            "seed": self.seed,
            "lifetime": self.lifetime,
            "ways": self.summary(),
            "skipped": {w.name: w.skipped for w in self.ways if w.skipped is not None},
        }
        if per_turn:
            out["per_turn"] = {
                w.name: [dataclasses.asdict(t) for t in w.turns]
                for w in self.ways
                if w.skipped is None
            }
        return out

    def table(self) -> str:
        """The comparison, one row per way."""
        lines = [
            f"{self.name}: {self.provider}, {self.turns} turns, {self.session_tokens:,} tokens "
            f"at the last turn, budget {self.budget:,}, cached tokens at "
            f"{self.price_factor:g}x",
        ]
        if self.cache is not None:
            lines.append(
                f"under {self.cache}'s caching rules"
                + (
                    f": marked prefixes, writes at {self.write_factor:g}x"
                    if self.cache != "openai"
                    else ": automatic prefix caching from 1,024 tokens"
                )
            )
        if self.unreplayed:
            lines.append(
                f"(the last {self.unreplayed} message(s), a call without its results, not replayed)"
            )
        if self.think_time is not None:
            last = max((t.at or 0.0 for w in self.ways for t in w.turns), default=0.0)
            life = "no lifetime known" if self.lifetime is None else f"{self.lifetime:g} s"
            lines.append(
                f"turns {self.think_time:g} s apart on average (seed {self.seed}, "
                f"{last / 60:.0f} minutes in all); cache lifetime {life}; "
                + ", ".join(
                    f"{r['way']} {r['cost_per_turn']:,.0f}"
                    for r in self.summary()
                    if r["cost_per_turn"] is not None
                )
                + " per turn"
            )
        head = (
            f"{'way':<19} {'1st cut':>7} {'cached>':>7} {'util>':>5} {'util':>5} "
            f"{'compact':>7} {'summ':>4} {'eff. cost':>10} {'/stateless':>10} {'empty':>5} "
            f"{'bad':>3}"
        )
        lines += [head, "-" * len(head)]
        for r in self.summary():
            lines.append(
                f"{r['way']:<19} {_or_dash(r['first_compaction']):>7} "
                f"{_fixed(r['cached_after_first_compaction']):>7} "
                f"{_fixed(r['utilization_after_first_compaction']):>5} "
                f"{_fixed(r['utilization']):>5} {r['compactions']:>7} "
                f"{r['summarizer_calls']:>4} {r['effective_cost']:>10,.0f} "
                f"{_fixed(r['cost_vs_stateless']):>10} {r['empty']:>5} {r['broken']:>3}"
            )
            if r["error"]:
                lines.append(f"  stopped at {r['error']}")
        for w in self.ways:
            if w.skipped is not None:
                lines.append(f"{w.name}: skipped ({w.skipped})")
        lines.append(LEGEND)
        if self.trim_counter:
            lines.append(f"trim_messages counts with {self.trim_counter}.")
        return "\n".join(lines)

    def per_turn_table(self) -> str:
        """One row per turn: each way's tokens, cached fraction and what happened."""
        ways = [w for w in self.ways if w.skipped is None]
        head = f"{'turn':>4} {'msgs':>5}" + "".join(f" | {w.name[:26]:<26}" for w in ways)
        lines = [head, "-" * len(head)]
        for i in range(self.turns):
            row = None
            cells = []
            for w in ways:
                if i >= len(w.turns):
                    cells.append(f" | {'':<26}")
                    continue
                t = row = w.turns[i]
                mark = t.state or ("cut" if t.compacted else "")
                flag = "" if t.within_budget and t.valid else " BAD"
                flag += "" if t.conversation else " EMPTY"
                cells.append(f" | {t.tokens:>7} {t.cached_fraction:>5.3f} {mark + flag:<12}")
            assert row is not None
            lines.append(f"{row.turn:>4} {row.history:>5}" + "".join(cells))
        return "\n".join(lines)


def _or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def _fixed(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
