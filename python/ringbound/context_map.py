"""The context map: one assembly as a picture of the model's window. The window is split into
buckets (system, tools schema, pinned, ledger, summary, middle, recent, free, output reserve)
whose in-request part adds up to ``report.tokens_after``, and every ring and plain turn of the
session is listed in order with what the assembly did to it and which stage did it.

Bucket totals come from the report. The core does not yet say which bucket each unit stood in,
so the units are placed by the protection rule, its two sizes (recent rings, recent user turns)
read back from the report's totals when ``shrink_recent`` lowered them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from . import _core
from .adapted import read_canonical
from .config import AssemblyConfig
from .counting import count_tokens
from .providers import adapter
from .report import AssemblyReport

__all__ = ["BUCKETS", "MARKS", "Bucket", "ContextMap", "Unit", "context_map"]

#: Buckets in the order they fill the window; the first ones are in the request, then ``free``
#: (what the budget has left), ``margin`` (the safety margin) and ``reserve`` (the output).
BUCKETS = (
    "system",
    "tools",
    "pinned",
    "ledger",
    "summary",
    "middle",
    "recent",
    "framing",
    "free",
    "margin",
    "reserve",
)
#: What an assembly can do to a unit.
MARKS = ("kept", "cut", "stubbed", "summarized", "dropped")
#: Buckets that are not part of the request.
_OUTSIDE = ("free", "margin", "reserve")
_INSTRUCTION = ("system", "developer")
_REWRITE_MARK = {"truncated": "cut", "deduped": "stubbed", "media": "stubbed"}
_REWRITE_STAGE = {
    "deduped": "dedupe_superseded_reads",
    "media": "degrade_media",
}


@dataclass(frozen=True)
class Bucket:
    """A part of the window.

    Attributes:
        name: One of ``BUCKETS``.
        tokens: Its tokens (for ``free``, ``margin`` and ``reserve``: the room they keep).
    """

    name: str
    tokens: int


@dataclass(frozen=True)
class Unit:
    """A ring or plain turn of the session, or the top-level system.

    Attributes:
        kind: ``ring`` (a call and its results), ``turn`` (a plain message) or ``system``
            (a top-level system, outside the messages).
        start: First native item (message) of the unit; -1 for a top-level system.
        end: One past its last item.
        role: Role of its first message.
        tools: Tools a ring called, in order.
        bucket: Where it stood: ``system``, ``pinned``, ``middle`` or ``recent``.
        mark: One of ``MARKS``.
        tokens: Tokens it takes in the request (0 when dropped).
        tokens_before: Tokens it took in the session.
        stage: The stage that changed it, None when kept as it was.
    """

    kind: str
    start: int
    end: int
    role: str
    tools: tuple[str, ...]
    bucket: str
    mark: str
    tokens: int
    tokens_before: int
    stage: str | None


@dataclass(frozen=True)
class ContextMap:
    """One assembly drawn as its window.

    Attributes:
        provider: The wire format.
        window: ``model_input_limit``.
        budget: The budget the request had to fit.
        tokens_before: Tokens of the session as given (an upper bound when
            ``tokens_before_exact`` is False).
        tokens_after: Tokens of the assembled request.
        buckets: Every bucket of ``BUCKETS``, in order; those in the request add up to
            ``tokens_after``.
        units: The session's units in order.
        stages: ``(stage, units, tokens_saved)`` of the stages that ran.
        tokens_before_exact: Whether ``tokens_before`` is exact.
    """

    provider: str
    window: int
    budget: int
    tokens_before: int
    tokens_after: int
    buckets: tuple[Bucket, ...]
    units: tuple[Unit, ...]
    stages: tuple[tuple[str, int, int], ...]
    tokens_before_exact: bool = True

    def bucket(self, name: str) -> int:
        """Tokens of bucket ``name``."""
        return next(b.tokens for b in self.buckets if b.name == name)

    @property
    def in_request(self) -> tuple[Bucket, ...]:
        """The buckets that are part of the request."""
        return tuple(b for b in self.buckets if b.name not in _OUTSIDE)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, ready for JSON."""
        out = asdict(self)
        out["buckets"] = {b.name: b.tokens for b in self.buckets}
        out["stages"] = [{"stage": s, "units": u, "tokens_saved": t} for s, u, t in self.stages]
        return out


def context_map(
    report: AssemblyReport,
    messages: Sequence[Any],
    config: AssemblyConfig,
    *,
    provider: str = "openai_chat",
    system: Any = None,
    pinned: Sequence[int] = (),
) -> ContextMap:
    """The context map of an assembly of ``messages`` that produced ``report``.

    Args:
        report: The assembly's report.
        messages: The session's messages as they were given to the assembly.
        config: The config it ran with.
        provider: The wire format.
        system: The top-level system given with them.
        pinned: Messages the caller pinned.

    Example:
        >>> import ringbound as rb
        >>> from ringbound.cli.simulate import agent_session
        >>> msgs = agent_session(turns=20)
        >>> cfg = rb.AssemblyConfig(model_input_limit=6000, output_reserve_tokens=1000,
        ...                         safety_margin_tokens=0)
        >>> res = rb.Assembler(cfg).assemble(msgs)
        >>> m = context_map(res.report, msgs, cfg)
        >>> sum(b.tokens for b in m.in_request) == res.report.tokens_after
        True
        >>> {u.mark for u in m.units} == {"kept", "dropped"}
        True
    """
    ratio = config.token_ratio if isinstance(config.token_ratio, float) else None
    reading = _Reading(messages, provider, system, config.encoding, ratio)
    units = reading.units()
    fates = _Fates(report)
    stage_names = [s.stage for s in report.stages]
    repaired = set(report.repairs)
    # A synthesized result joins its ring: its tokens are the ring's in the report's buckets.
    added = [sum(reading.synthesized(c) for c in u.call_ids if c in repaired) for u in units]
    sizes = [reading.tokens(u) for u in units]
    now = [size + extra for size, extra in zip(sizes, added, strict=True)]
    placed = _place(units, now, config, report, fates, pinned)
    out: list[Unit] = []
    for u, bucket, before, extra in zip(units, placed, sizes, added, strict=True):
        mark, stage, saved = fates.of(u, bucket, stage_names)
        if extra and mark not in ("dropped", "summarized"):
            saved -= extra
            stage = "synthesize_error_results" if stage is None else stage
        out.append(
            Unit(
                kind=u.kind,
                start=u.start,
                end=u.end,
                role=u.role,
                tools=u.tools,
                bucket=bucket,
                mark=mark,
                tokens=0 if mark in ("dropped", "summarized") else max(0, before - saved),
                tokens_before=before,
                stage=stage,
            )
        )
    return ContextMap(
        provider=provider,
        window=config.model_input_limit,
        budget=report.budget,
        tokens_before=report.tokens_before,
        tokens_after=report.tokens_after,
        buckets=_buckets(report, config, out),
        units=tuple(out),
        stages=tuple((s.stage, s.units, s.tokens_saved) for s in report.stages),
        tokens_before_exact=report.tokens_before_exact,
    )


@dataclass(frozen=True)
class _Span:
    """A unit as read from the canonical view, before its fate is known."""

    kind: str
    start: int
    end: int
    role: str
    tools: tuple[str, ...]
    #: Canonical indices of its messages.
    first: int
    last: int
    note: bool
    #: Whether it holds a user message (a provider may glue one to a ring).
    user: bool
    #: Ids of the calls a ring makes.
    call_ids: tuple[str, ...] = ()


class _Reading:
    """The session in the canonical view the planner splits, with each unit's tokens counted
    as the request counts them (a unit is a complete ring, so it can be counted alone)."""

    def __init__(
        self,
        messages: Sequence[Any],
        provider: str,
        system: Any,
        encoding: str,
        ratio: float | None,
    ) -> None:
        self.messages = list(messages)
        self.provider = provider
        self.system = system
        self.encoding = encoding
        self.ratio = ratio
        if provider == "openai_chat":
            self.canon: Sequence[Any] = [m if isinstance(m, dict) else dict(m) for m in messages]
            self.spans = [(i, i + 1) for i in range(len(self.canon))]
            self.binds: Sequence[bool] = [False] * len(self.canon)
        else:
            c = read_canonical(adapter(provider), self.messages, system)
            self.canon, self.spans, self.binds = c.messages, c.spans, c.binds_next
        self._empty = self._count([], None)

    def _count(self, items: list[Any], system: Any) -> int:
        return count_tokens(
            items, self.provider, self.encoding, system=system, token_ratio=self.ratio
        )

    def units(self) -> list[_Span]:
        """The planner's units: a ring is an assistant message with calls and the results after
        it; canonical messages sharing a native item (or bound to the next) stay together."""
        canon, spans, n = self.canon, self.spans, len(self.canon)
        out: list[_Span] = []
        i = 0
        while i < n:
            if spans[i][0] < 0:
                out.append(_Span("system", -1, -1, "system", (), i, i, False, False))
                i += 1
                continue
            calls = _calls(canon[i])
            ring = bool(calls)
            end = i + 1
            while True:
                before = end
                if ring:
                    while end < n and canon[end].get("role") == "tool":
                        end += 1
                while end < n and (self.binds[end - 1] or spans[end - 1] == spans[end]):
                    if _calls(canon[end]):
                        ring = True
                    end += 1
                if end == before:
                    break
            tools = tuple(name for k in range(i, end) for name, _ in _calls(canon[k]))
            ids = tuple(cid for k in range(i, end) for _, cid in _calls(canon[k]))
            role = str(canon[i].get("role"))
            native = [spans[k] for k in range(i, end) if spans[k][0] >= 0]
            out.append(
                _Span(
                    "ring" if ring else "turn",
                    min(s for s, _ in native),
                    max(e for _, e in native),
                    role,
                    tools,
                    i,
                    end - 1,
                    _is_note(canon[i]),
                    any(canon[k].get("role") == "user" for k in range(i, end)),
                    ids,
                )
            )
            i = end
        return out

    def synthesized(self, call_id: str) -> int:
        """Tokens of the error result synthesized for ``call_id``, as the core inserts it:
        an OpenAI tool message, scaled as the provider's count is."""
        message = {
            "role": "tool",
            "tool_call_id": call_id,
            "content": _core.SYNTHESIZED_RESULT_TEXT,
        }
        return count_tokens(
            [message], encoding=self.encoding, token_ratio=self.ratio
        ) - count_tokens([], encoding=self.encoding, token_ratio=self.ratio)

    def tokens(self, u: _Span) -> int:
        if u.kind == "system":
            # Every system text is one unit; the first one carries the system's whole cost.
            if u.first != next(k for k, s in enumerate(self.spans) if s[0] < 0):
                return 0
            return self._count([], self.system) - self._empty
        return self._count(self.messages[u.start : u.end], None) - self._empty


def _calls(message: Any) -> list[tuple[str, str]]:
    """``(name, id)`` of the calls an assistant message makes."""
    if message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls") or []
    return [
        (str((c.get("function") or {}).get("name", "")), str(c.get("id", "")))
        for c in calls
        if isinstance(c, dict)
    ]


def _is_note(message: Any) -> bool:
    """An earlier assembly's ledger or summary note, pinned where it stands."""
    content = message.get("content")
    return isinstance(content, str) and content.startswith(
        (_core.LEDGER_MARKER, _core.SUMMARY_MARKER)
    )


class _Fates:
    """What the report says happened to each native item."""

    def __init__(self, report: AssemblyReport) -> None:
        self.report = report
        self.dropped = [*report.dropped_rings, *report.dropped_turns]
        self.rewrites = [w for w in report.rewrites if w.kind in _REWRITE_MARK]

    def of(self, u: _Span, bucket: str, stages: list[str]) -> tuple[str, str | None, int]:
        """``(mark, stage, tokens_saved)`` of a unit."""
        if u.kind != "system" and any(s <= u.start and u.end <= e for s, e in self.dropped):
            return self._dropped(u, stages)
        rewrites = [w for w in self.rewrites if u.start <= w.index < u.end]
        if not rewrites or u.kind == "system":
            return "kept", None, 0
        saved = sum(w.tokens_saved for w in rewrites)
        kinds = {w.kind for w in rewrites}
        kind = "truncated" if "truncated" in kinds else sorted(kinds)[0]
        if kind == "truncated":
            stage = (
                "truncate_protected_results"
                if bucket == "recent" and "truncate_protected_results" in stages
                else "truncate_oversized_results"
            )
        else:
            stage = _REWRITE_STAGE[kind]
        return _REWRITE_MARK[kind], stage, saved

    def _dropped(self, u: _Span, stages: list[str]) -> tuple[str, str | None, int]:
        wanted = (
            ("drop_rings", "drop_referenced_rings", "drop_error_rings")
            if u.kind == "ring"
            else ("drop_plain_turns", "drop_citing_turns")
        )
        # The report counts each drop stage's units but not which unit each took: when two
        # stages could have taken a ring, both are named.
        ran = [s for s in wanted if s in stages] or [s for s in stages if s == "shrink_recent"]
        stage = "/".join(ran) if ran else None
        s = self.report.summary
        if self.report.summarized and s is not None and s.tokens > 0:
            if s.span[0] <= u.start and u.end <= s.span[1]:
                return "summarized", stage, 0
        return "dropped", stage, 0


def _place(
    units: list[_Span],
    sizes: list[int],
    config: AssemblyConfig,
    report: AssemblyReport,
    fates: _Fates,
    pinned: Sequence[int],
) -> list[str]:
    """Each unit's bucket. The leading instructions are ``system``; pins and the latest user
    turns ``pinned``; the last unit and the latest rings ``recent``. Which rings the suffix
    holds (the latest where they stand, or everything from the earliest of them) and how many
    (``shrink_recent`` lowers the counts to their floors) is read back from the report: the
    layout whose kept units add up to its prefix and suffix totals."""
    first_user = next((k for k, u in enumerate(units) if u.user), None)
    leading = True
    base: list[str | None] = []
    for k, u in enumerate(units):
        instruction = u.role in _INSTRUCTION and u.kind != "ring"
        leading = leading and (instruction or u.kind == "system")
        if leading:
            base.append("system")
            continue
        pin = (
            u.note
            or (k == first_user and "first_user_message" in config.pin)
            or (instruction and "security_system_prompt" in config.pin)
            or any(u.start <= i < u.end for i in pinned)
        )
        base.append("pinned" if pin else None)
    users = [k for k, u in enumerate(units) if u.user]
    rings = [k for k, u in enumerate(units) if u.kind == "ring"]
    kept = [not any(s <= u.start and u.end <= e for s, e in fates.dropped) for u in units]

    def split(n_rings: int, n_turns: int, standing: bool) -> list[str]:
        recent = set(rings[max(0, len(rings) - n_rings) :] if n_rings else [])
        if units:
            recent.add(len(units) - 1)
        if not standing:
            recent = set(range(min(recent), len(units))) if recent else recent
        latest = set(users[max(0, len(users) - n_turns) :] if n_turns else [])
        out = []
        for k, b in enumerate(base):
            if b == "system":
                out.append(b)
            elif k in recent:
                out.append("recent")
            elif b is not None or k in latest:
                out.append("pinned")
            else:
                out.append("middle")
        return out

    want = report.bucket_tokens

    def error(placed: list[str]) -> int:
        sums = {"pinned": 0, "recent": 0, "system": 0}
        for size, b, keep in zip(sizes, placed, kept, strict=True):
            if keep and b in sums:
                sums[b] += size
        prefix = sums["pinned"] + sums["system"]
        return abs(sums["recent"] - want.get("suffix", 0)) + abs(prefix - want.get("prefix", 0))

    shrunk = any(s.stage == "shrink_recent" for s in report.stages)
    low_rings = config.min_recent_tool_rings if shrunk else config.recent_tool_rings
    low_turns = config.min_recent_user_turns if shrunk else config.recent_user_turns
    options = [
        split(r, t, standing)
        for standing in (True, False)
        for r in range(config.recent_tool_rings, low_rings - 1, -1)
        for t in range(config.recent_user_turns, low_turns - 1, -1)
    ]
    return min(options, key=error)


def _buckets(
    report: AssemblyReport, config: AssemblyConfig, units: list[Unit]
) -> tuple[Bucket, ...]:
    """The report's buckets, its prefix split into system and pinned by the units' own tokens
    and its insertions into ledger and summary by the summary's."""
    b = report.bucket_tokens
    prefix = b.get("prefix", 0)
    system = min(prefix, sum(u.tokens for u in units if u.bucket == "system"))
    insertions = b.get("insertions", 0)
    summary = 0
    if report.summary is not None and report.summarized:
        summary = min(insertions, report.summary.tokens)
    margin = config.safety_margin_tokens if isinstance(config.safety_margin_tokens, int) else 0
    if report.provider_count is not None:
        margin = report.provider_count.safety_margin_tokens
    sizes = {
        "system": system,
        "tools": b.get("tools", 0),
        "pinned": prefix - system,
        "ledger": insertions - summary,
        "summary": summary,
        "middle": b.get("middle", 0),
        "recent": b.get("suffix", 0),
        "framing": b.get("framing", 0),
        "free": max(0, report.budget - report.tokens_after),
        "margin": margin,
        "reserve": config.output_reserve_tokens,
    }
    return tuple(Bucket(name, sizes[name]) for name in BUCKETS)
