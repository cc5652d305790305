"""A pure-Python reference of the assembly plan (``rust/src/plan.rs``, ``units.rs``, ``ledger.rs``):
units, protection, the stage loop, the side-effect ledger and its note, written to be read, not
to be fast. Token counts per message come from ``rb.count_tokens([m]) - 3``: the tokenizer is
tested elsewhere, this oracle checks the plan."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ringbound as rb

INSTRUCTION = ("system", "developer")
SYNTHESIZED_RESULT_TEXT = "Tool call was not completed (no result recorded)."
MARKER = "[ringbound:side-effect-ledger]"
HEADER = (
    "Tools already executed in this conversation. Do not repeat any of them without new user "
    "intent:"
)
#: Longest argument string an entry keeps (then cut, with an ellipsis).
MAX_ARG_CHARS = 120
#: Reply priming, once per request; ``count_tokens([m]) - FRAMING`` is one message's cost.
FRAMING = 3
#: Rust's ``char::is_whitespace`` (Unicode White_Space), which ``str.isspace`` is not quite.
RUST_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)
ERROR_OPENINGS = ("error", "traceback (most recent call last)", "exception")

Message = dict[str, Any]


class NotCovered(Exception):
    """The session breaks pairing otherwise than by missing results: outside this reference."""


# Messages -----------------------------------------------------------------------------------


def texts(msg: Message) -> list[str]:
    """Every text the model reads from a message: content string or text/refusal parts, refusal."""
    content = msg.get("content")
    out = [content] if isinstance(content, str) else []
    for part in content if isinstance(content, list) else ():
        if part.get("type") in ("text", "refusal"):
            out.append(part[part["type"]])
    if isinstance(msg.get("refusal"), str):
        out.append(msg["refusal"])
    return out


def looks_like_error(msg: Message) -> bool:
    """A tool result reports a failure when its first text opens with error/traceback/exception."""
    first = next(iter(texts(msg)), None)
    if first is None:
        return False
    k = 0
    while k < len(first) and first[k] in RUST_WHITESPACE:
        k += 1
    return first[k : k + 40].lower().startswith(ERROR_OPENINGS)


def message_tokens(msg: Message, encoding: str) -> int:
    """What one message costs inside a request (its framing included, reply priming not)."""
    return rb.count_tokens([msg], encoding=encoding) - FRAMING


def tools_tokens(tools: list[Any] | None, encoding: str) -> int:
    return 0 if tools is None else rb.count_tokens([], encoding=encoding, tools=tools) - FRAMING


def synthesized_result(call_id: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "content": SYNTHESIZED_RESULT_TEXT}


# Units and repairs --------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """Messages ``start..end`` kept or dropped together: a tool ring, or one plain message."""

    kind: str
    start: int
    end: int


def units(msgs: Sequence[Message]) -> list[Unit]:
    """A ring is an assistant message with tool_calls plus the tool messages right after it."""
    out: list[Unit] = []
    i = 0
    while i < len(msgs):
        if msgs[i]["role"] == "assistant" and msgs[i].get("tool_calls"):
            end = i + 1
            while end < len(msgs) and msgs[end]["role"] == "tool":
                end += 1
            out.append(Unit("ring", i, end))
            i = end
        else:
            out.append(Unit("plain", i, i + 1))
            i += 1
    return out


def missing_results(msgs: Sequence[Message]) -> list[tuple[int, int, str]]:
    """``(assistant index, insert-before index, call id)`` of every call without a result."""
    missing = []
    for u in units(msgs):
        if u.kind == "plain" and msgs[u.start]["role"] == "tool":
            raise NotCovered("a tool message outside a result block")
        if u.kind == "plain":
            continue
        ids = [c["id"] for c in msgs[u.start]["tool_calls"]]
        answers = [msgs[w]["tool_call_id"] for w in range(u.start + 1, u.end)]
        if len(set(ids)) != len(ids) or len(set(answers)) != len(answers):
            raise NotCovered("a duplicate id")
        if not set(answers) <= set(ids):
            raise NotCovered("a result that answers another block")
        missing += [(u.start, u.end, i) for i in ids if i not in answers]
    return missing


@dataclass(frozen=True)
class Work:
    """The request with repairs applied, as the stages see it."""

    msgs: list[Message]
    #: Original index, or None for a synthesized result.
    source: list[int | None]
    tokens: list[int]
    errors: list[bool]


def with_repairs(messages: Sequence[Message], repairs: list[tuple[int, str]], enc: str) -> Work:
    """Inserts a synthesized result before index ``at`` for each repair, in call order."""
    work = Work([], [], [], [])
    for i in range(len(messages) + 1):
        for call_id in (c for at, c in repairs if at == i):
            _push(work, synthesized_result(call_id), None, enc, True)
        if i < len(messages):
            m = messages[i]
            _push(work, m, i, enc, m["role"] == "tool" and looks_like_error(m))
    return work


def _push(work: Work, msg: Message, source: int | None, enc: str, error: bool) -> None:
    work.msgs.append(msg)
    work.source.append(source)
    work.tokens.append(message_tokens(msg, enc))
    work.errors.append(error)


# The side-effect ledger ---------------------------------------------------------------------


def canonical(value: Any) -> str:
    """serde_json's compact rendering: sorted keys, raw non-ASCII, only required escapes."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_ARG_CHARS:
        return value[:MAX_ARG_CHARS] + "…"
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def ledger_args(arguments: str, fields: Sequence[str] | None) -> str:
    """The identifying arguments of a call: the listed fields (all by default), strings cut."""
    try:
        value = json.loads(arguments, parse_constant=_reject_constant)
    except ValueError:
        return canonical(_shorten(arguments))
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if fields is None or k in fields}
    return canonical(_shorten(value))


@dataclass(frozen=True)
class Entry:
    """One side-effecting call that was dropped."""

    tool: str
    call_id: str
    #: Canonical JSON.
    args: str
    status: str

    def line(self) -> str:
        """``- send_email [ok] call_id="c1" args={...}``; odd tool names are JSON-quoted."""
        bare = self.tool and all(c.isascii() and (c.isalnum() or c in "_-.:") for c in self.tool)
        tool = self.tool if bare else canonical(self.tool)
        ok = all(c.isascii() and (c.isalnum() or c == "_") for c in self.status)
        status = self.status if ok else "unknown"
        return f"- {tool} [{status}] call_id={canonical(self.call_id)} args={self.args}"


def render(entries: Sequence[Entry]) -> str | None:
    """The note's text; no entries, no note."""
    if not entries:
        return None
    return "\n".join([MARKER, HEADER, *(e.line() for e in entries)])


def _lines(text: str) -> list[str]:
    """Rust's ``str::lines``: split at ``\\n`` (a ``\\r`` before it goes too), no final empty."""
    pieces = text.split("\n")
    out = [p[:-1] if p.endswith("\r") else p for p in pieces[:-1]]
    return [*out, pieces[-1]] if pieces[-1] else out


def _next_json(text: str) -> tuple[Any, str] | None:
    stripped = text.lstrip(" \t\n\r")
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except ValueError:
        return None
    return value, stripped[end:]


def parse_line(line: str) -> Entry | None:
    """An entry back from its rendered line, or None when the line is not one."""
    if not line.startswith("- "):
        return None
    rest = line[2:]
    if rest.startswith('"'):
        got = _next_json(rest)
        if got is None or not isinstance(got[0], str):
            return None
        tool, rest = got
    else:
        tool, sep, rest = rest.partition(" ")
        if not sep:
            return None
    k = 0
    while k < len(rest) and rest[k] in RUST_WHITESPACE:
        k += 1
    rest = rest[k:]
    if not rest.startswith("["):
        return None
    status, sep, rest = rest[1:].partition("] call_id=")
    got = _next_json(rest) if sep else None
    if got is None or not isinstance(got[0], str) or not got[1].startswith(" args="):
        return None
    call_id, rest = got
    got = _next_json(rest[len(" args=") :])
    if got is None or got[1] != "":
        return None
    return Entry(tool, call_id, canonical(got[0]), status)


def parse_note(msg: Message) -> list[Entry] | None:
    """The entries of a ledger note ringbound rendered, or None for any other message."""
    body = texts(msg)
    if msg.get("role") not in INSTRUCTION or len(body) != 1:
        return None
    lines = _lines(body[0])
    if len(lines) < 2 or lines[0] != MARKER or lines[1] != HEADER:
        return None
    entries = [parse_line(line) for line in lines[2:]]
    return None if any(e is None for e in entries) else entries  # type: ignore[return-value]


def identity(entry: Entry) -> str:
    """What makes two ledger entries one: everything they say (their line). Call ids recur
    across turns, so two calls under one id are two entries unless they agree in every field."""
    return entry.line()


def side_effect_entries(work: Work, ring: Unit, cfg: rb.AssemblyConfig) -> list[Entry]:
    """Entries for the side-effecting calls of a ring, with how each ended."""
    out = []
    for call in work.msgs[ring.start]["tool_calls"]:
        name = call["function"]["name"]
        if name not in cfg.side_effect_tools:
            continue
        result = next(
            (
                w
                for w in range(ring.start + 1, ring.end)
                if work.msgs[w].get("tool_call_id") == call["id"]
            ),
            None,
        )
        status = "ok"
        if result is not None and texts(work.msgs[result])[:1] == [SYNTHESIZED_RESULT_TEXT]:
            status = "not_completed"
        elif result is not None and work.errors[result]:
            status = "error"
        fields = cfg.ledger_fields.get(name)
        out.append(
            Entry(name, call["id"], ledger_args(call["function"]["arguments"], fields), status)
        )
    return out


@dataclass
class Ledger:
    """The ledger while the stages run: an entry identical to one already recorded (see
    ``identity``) is not recorded twice."""

    entries: list[Entry]
    role: str
    encoding: str
    added: list[Entry] = field(default_factory=list)
    tokens: int = 0

    def __post_init__(self) -> None:
        unique: dict[str, Entry] = {}
        for e in self.entries:
            unique.setdefault(identity(e), e)
        self.entries = list(unique.values())
        self.tokens = self._note_tokens()

    def add(self, entry: Entry) -> None:
        if all(identity(e) != identity(entry) for e in self.entries):
            self.entries.append(entry)
            self.added.append(entry)
            self.tokens = self._note_tokens()

    def _note_tokens(self) -> int:
        text = render(self.entries)
        return (
            0
            if text is None
            else message_tokens({"role": self.role, "content": text}, self.encoding)
        )


# Protection ---------------------------------------------------------------------------------


@dataclass
class Layout:
    """The request split into units, what is protected and where the suffix starts."""

    work: Work
    notes: list[int]
    units: list[Unit]
    protected: list[bool]
    suffix_start: int
    prefix_end: int
    first_user: int | None
    ledger: Ledger

    def unit_tokens(self, u: Unit) -> int:
        return sum(self.work.tokens[w] for w in range(u.start, u.end) if w not in self.notes)


def suffix_start(all_units: list[Unit], recent_tool_rings: int) -> int:
    """Start of the last ``recent_tool_rings``-th ring, or of the last unit if earlier."""
    last = all_units[-1].start if all_units else 0
    rings = [u for u in all_units if u.kind == "ring"]
    if recent_tool_rings == 0 or not rings:
        return last
    return min(last, rings[max(0, len(rings) - recent_tool_rings)].start)


def layout(work: Work, cfg: rb.AssemblyConfig, pinned: Iterable[int]) -> Layout:
    msgs = work.msgs
    notes, entries = [], []
    if "side_effect_ledger" in cfg.pin:
        for w, m in enumerate(msgs):
            parsed = parse_note(m)
            if parsed is not None:
                notes.append(w)
                entries += parsed
    instructions = [w for w, m in enumerate(msgs) if m["role"] in INSTRUCTION]
    role = msgs[(notes or instructions)[0]]["role"] if notes or instructions else "system"
    prefix_end = next((w for w, m in enumerate(msgs) if m["role"] not in INSTRUCTION), len(msgs))
    users = [w for w, m in enumerate(msgs) if m["role"] == "user"]
    first_user = users[0] if users else None
    pin = set(range(prefix_end)) | set(notes)
    if "first_user_message" in cfg.pin and first_user is not None:
        pin.add(first_user)
    if "security_system_prompt" in cfg.pin:
        pin |= set(instructions)
    pin |= {work.source.index(i) for i in pinned}
    pin |= set(users[max(0, len(users) - cfg.recent_user_turns) :])
    all_units = units(msgs)
    start = suffix_start(all_units, cfg.recent_tool_rings)
    protected = [
        u.start >= start or any(w in pin for w in range(u.start, u.end)) for u in all_units
    ]
    ledger = Ledger(entries, role, cfg.encoding)
    return Layout(work, notes, all_units, protected, start, prefix_end, first_user, ledger)


# The stage loop -----------------------------------------------------------------------------


def _is_short_error_ring(lay: Layout, u: Unit, cfg: rb.AssemblyConfig) -> bool:
    results = range(u.start + 1, u.end)
    return (
        u.kind == "ring"
        and all(lay.work.errors[w] for w in results)
        and sum(lay.work.tokens[w] for w in results) <= cfg.short_error_result_tokens
    )


def candidates(lay: Layout, cfg: rb.AssemblyConfig) -> dict[str, list[int]]:
    """Units each stage may drop, oldest first."""
    middle = [k for k, p in enumerate(lay.protected) if not p]
    held = [k for k in middle if _is_short_error_ring(lay, lay.units[k], cfg)]
    held = held[max(0, len(held) - cfg.max_held_error_rings) :]
    return {
        "drop_rings": [k for k in middle if lay.units[k].kind == "ring" and k not in held],
        "drop_plain_turns": [k for k in middle if lay.units[k].kind == "plain"],
        "drop_error_rings": held,
    }


@dataclass
class Walk:
    """Where one walk of the drop sequence ended."""

    dropped: set[int]
    ledger: Ledger
    stages: list[tuple[str, int, int]]
    tools: int
    total: int
    #: The smallest total seen along the way: what a failed walk reports as needed.
    least: int


def walk(lay: Layout, cfg: rb.AssemblyConfig, tools: int, budget: int) -> Walk:
    """Drops candidates stage by stage, oldest first, while the request is over ``budget``;
    a dropped side-effecting ring adds its calls to the ledger note (which costs tokens too).
    Then, still over and allowed, drops the tools schema."""
    ledger = Ledger(list(lay.ledger.entries), lay.ledger.role, lay.ledger.encoding)
    kept = sum(lay.unit_tokens(u) for u in lay.units)
    w = Walk(set(), ledger, [], tools, 0, 0)

    def total() -> int:
        return kept + ledger.tokens + FRAMING + w.tools

    w.least = total()
    per_stage = candidates(lay, cfg)
    for stage in cfg.stages:
        if total() <= budget:
            break
        before, count = total(), 0
        for k in per_stage[stage]:
            if total() <= budget:
                break
            if k in w.dropped:
                continue
            w.dropped.add(k)
            count += 1
            kept -= lay.unit_tokens(lay.units[k])
            if lay.units[k].kind == "ring" and "side_effect_ledger" in cfg.pin:
                for entry in side_effect_entries(lay.work, lay.units[k], cfg):
                    ledger.add(entry)
            w.least = min(w.least, total())
        if count:
            w.stages.append((stage, count, max(0, before - total())))
    if total() > budget and cfg.on_still_over_budget == "drop_tools_schema_then_fail" and w.tools:
        w.stages.append(("drop_tools_schema", 1, w.tools))
        w.tools = 0
        w.least = min(w.least, total())
    w.total = total()
    return w


def buckets(lay: Layout, w: Walk) -> dict[str, int]:
    """Tokens per bucket of what the walk kept."""
    b = {"prefix": 0, "middle": 0, "suffix": 0, "tools": w.tools, "insertions": w.ledger.tokens}
    b["framing"] = FRAMING
    for k, u in enumerate(lay.units):
        if k in w.dropped:
            continue
        where = "prefix" if lay.protected[k] else "middle"
        b["suffix" if u.start >= lay.suffix_start else where] += lay.unit_tokens(u)
    return b


def emit(lay: Layout, w: Walk, cfg: rb.AssemblyConfig) -> list[Any]:
    """Plan items: kept indices in order, synthesized results, the ledger note at its anchor
    (where an earlier note stood, else right after the pinned first user message unless that
    is the last message, else after the leading instructions). An unchanged single note is the
    caller's own message again."""
    text = render(w.ledger.entries)
    note: list[Any] = []
    if text is not None:
        note = [("ledger", text, w.ledger.role)]
        if len(lay.notes) == 1:
            source = lay.work.source[lay.notes[0]]
            if source is not None and texts(lay.work.msgs[lay.notes[0]])[:1] == [text]:
                note = [source]
    first_user = lay.first_user
    if lay.notes:
        anchor = lay.notes[0]
    elif "first_user_message" in cfg.pin and first_user is not None:
        # After the goal, unless the goal is the last message: the request must still end with
        # the turn the model answers.
        last = first_user + 1 >= len(lay.work.msgs)
        anchor = lay.prefix_end if last else first_user + 1
    else:
        anchor = lay.prefix_end
    items: list[Any] = []
    for k, u in enumerate(lay.units):
        for i in range(u.start, u.end):
            if i == anchor:
                items += note
            if k in w.dropped or i in lay.notes:
                continue
            source = lay.work.source[i]
            call_id = lay.work.msgs[i].get("tool_call_id")
            items.append(source if source is not None else ("synthesized", call_id))
    if anchor >= len(lay.work.msgs):
        items += note
    return items


def _span(lay: Layout, u: Unit) -> tuple[int, int] | None:
    originals = [s for s in lay.work.source[u.start : u.end] if s is not None]
    return (originals[0], originals[-1] + 1) if originals else None


def _pairing_error(missing: list[tuple[int, int, str]]) -> rb.PairingError:
    issues = [rb.PairingIssue("missing_result", c, a, "") for a, _, c in missing]
    return rb.PairingError("missing results", issues=issues)


def prepare(
    messages: Sequence[Message], cfg: rb.AssemblyConfig, pinned: Iterable[int] = ()
) -> tuple[Layout, list[str]]:
    """Validates, repairs, counts and splits the request; raises what the library must raise."""
    pinned = sorted(set(pinned))
    if any(p >= len(messages) for p in pinned):
        raise rb.ConfigError("pinned index out of range", key="pinned")
    missing = missing_results(messages)
    if missing and cfg.on_pairing_error != "synthesize_error_results":
        raise _pairing_error(missing)
    repairs = [(at, c) for _, at, c in missing]
    work = with_repairs(messages, repairs, cfg.encoding)
    return layout(work, cfg, pinned), [c for _, c in repairs]


@dataclass
class Plan:
    """What the reference expects of one assembly."""

    items: list[Any]
    #: Tokens of the request as given: the caller's messages, framing, tools.
    tokens_before: int
    tokens_after: int
    dropped_rings: list[tuple[int, int]]
    dropped_turns: list[tuple[int, int]]
    stages: list[tuple[str, int, int]]
    repairs: list[str]
    ledger_added: list[Entry]
    ledger_entries: int
    buckets: dict[str, int]
    tools_dropped: bool


def plan(
    messages: Sequence[Message],
    cfg: rb.AssemblyConfig,
    tools: list[Any] | None = None,
    pinned: Iterable[int] = (),
) -> Plan:
    """The expected plan, or the expected error raised. A request that cannot fit reports the
    smallest request the drop sequence passes through."""
    lay, repairs = prepare(messages, cfg, pinned)
    tools_cost = tools_tokens(tools, cfg.encoding)
    w = walk(lay, cfg, tools_cost, cfg.budget)
    if w.total > cfg.budget:
        w = walk(lay, cfg, tools_cost, w.least)
        raise rb.BudgetExceededError(
            "over budget", tokens=w.total, budget=cfg.budget, bucket_tokens=buckets(lay, w)
        )
    before = sum(lay.work.tokens[i] for i, s in enumerate(lay.work.source) if s is not None)
    spans = {"ring": [], "plain": []}
    for k in sorted(w.dropped):
        span = _span(lay, lay.units[k])
        if span is not None:
            spans[lay.units[k].kind].append(span)
    stages = list(w.stages)
    if len(lay.notes) > 1:
        # Several earlier notes become one, at the first one's place; the report says so.
        notes_cost = sum(lay.work.tokens[n] for n in lay.notes)
        stages.insert(
            0, ("merge_ledger_notes", len(lay.notes) - 1, max(0, notes_cost - w.ledger.tokens))
        )
    return Plan(
        items=emit(lay, w, cfg),
        tokens_before=before + FRAMING + tools_cost,
        tokens_after=w.total,
        dropped_rings=spans["ring"],
        dropped_turns=spans["plain"],
        stages=stages,
        repairs=repairs,
        ledger_added=w.ledger.added,
        ledger_entries=len(w.ledger.entries),
        buckets=buckets(lay, w),
        tools_dropped=w.tools != tools_cost,
    )


def materialize(messages: Sequence[Message], items: list[Any]) -> list[Any]:
    """The message list a plan stands for: the caller's objects plus new insertions."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, int):
            out.append(messages[item])
        elif item[0] == "synthesized":
            out.append(synthesized_result(item[1]))
        else:
            out.append({"role": item[2], "content": item[1]})
    return out


def assemble(
    messages: Sequence[Message],
    cfg: rb.AssemblyConfig,
    tools: list[Any] | None = None,
    pinned: Iterable[int] = (),
) -> list[Any]:
    """The expected output messages of ``Assembler(cfg).assemble(messages, tools, pinned=...)``."""
    return materialize(messages, plan(messages, cfg, tools, pinned).items)


def protected_indices(
    messages: Sequence[Message], cfg: rb.AssemblyConfig, pinned: Iterable[int] = ()
) -> set[int]:
    """Original indices of the protected prefix and suffix (ledger notes aside: they update)."""
    lay, _ = prepare(messages, cfg, pinned)
    out = set()
    for k, u in enumerate(lay.units):
        if lay.protected[k]:
            out |= {
                s
                for w in range(u.start, u.end)
                if (s := lay.work.source[w]) is not None and w not in lay.notes
            }
    return out
