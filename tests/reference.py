"""A pure-Python reference of the assembly plan (``rust/src/plan/``, ``rewrite.rs``, ``units.rs``,
``ledger.rs``, ``summary.rs``): units, protection, the cheap stages' rewrites, the stage loop, the
side-effect ledger and its note, written to be read, not to be fast. Token counts per message
come from ``rb.count_tokens([m]) - 3``, a text's from ``_core.count_text``, and a token-exact cut
from ``_core.cut_text``: the tokenizer and the cut are tested elsewhere, this oracle checks the
plan."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import ringbound as rb
from ringbound import _core

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
#: First line of a summary note an earlier assembly wrote.
SUMMARY_MARKER = "[ringbound:summary]"
#: The text each image of a degraded message becomes.
MEDIA_PLACEHOLDER = "[ringbound: image omitted to save context]"
#: Arguments read as a side-effecting call's idempotency key, in this order.
IDEMPOTENCY_ARGS = ("idempotency_key", "idempotencyKey")
#: The cheap stages and the kind of rewrite each makes.
REWRITES = {
    "dedupe_superseded_reads": "deduped",
    "truncate_oversized_results": "truncated",
    "degrade_media": "media",
}
#: Fewest tokens of text a cut keeps beside its anchor.
MIN_KEPT_TOKENS = 16
#: The stages that degrade the protected suffix, once the middle is exhausted.
DEGRADE_STAGES = ("truncate_protected_results", "shrink_recent")
#: The stages the core runs (``summarize`` is the façade's).
CORE_STAGES = (
    *REWRITES,
    "drop_rings",
    "drop_plain_turns",
    "drop_referenced_rings",
    "drop_citing_turns",
    "drop_error_rings",
    *DEGRADE_STAGES,
)
#: Shortest identifier (``rust/src/identifiers.rs``).
MIN_IDENTIFIER_CHARS = 4

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


def images(msg: Message) -> int:
    """Images of a message: the image_url parts of a user message (the only role that has any)."""
    content = msg.get("content")
    if msg.get("role") != "user" or not isinstance(content, list):
        return 0
    return sum(1 for part in content if part.get("type") == "image_url")


def is_summary_note(msg: Message) -> bool:
    """Whether a message is a summary note an earlier assembly wrote: one instruction text that
    opens with the marker."""
    body = texts(msg)
    return msg.get("role") in INSTRUCTION and len(body) == 1 and body[0].startswith(SUMMARY_MARKER)


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


# Rewrites of the cheap stages ---------------------------------------------------------------


def dedupe_stub(tool: str) -> str:
    """The text an older result of a read becomes when a later result of it is in the view."""
    return (
        f"[ringbound: superseded by a later {tool} call with the same arguments; this older "
        "result was removed]"
    )


def anchor(message_id: str, omitted: int, total: int) -> str:
    """The line between a truncated result's head and tail: how much was cut, how to get it."""
    return (
        f"\n[ringbound: {omitted} of {total} tokens of this tool result were cut. To read them, "
        f'call expand_message with {{"message_id": "{message_id}"}}]\n'
    )


def rewritten(msg: Message, kind: str, text: str) -> Message:
    """A new message: ``msg`` with its content rewritten. A tool result's content becomes the
    single text ``text`` (truncated, deduped); each image part becomes a text part (media)."""
    out = dict(msg)
    if kind == "media":
        out["content"] = [
            {"type": "text", "text": text} if part.get("type") == "image_url" else part
            for part in msg["content"]
        ]
    else:
        out["content"] = text
    return out


def truncatable(msg: Message, max_tokens: int, encoding: str) -> bool:
    """Whether the limit leaves a cut of ``msg`` room for MIN_KEPT_TOKENS of text beside the
    costliest anchor (the largest numbers, and one token per hex digit of the id)."""
    widest = anchor("rb-", 2**32 - 1, 2**32 - 1)
    overhead = message_tokens(rewritten(msg, "truncated", widest), encoding) + 16
    return max_tokens >= overhead + MIN_KEPT_TOKENS


def least_cap(msg: Message, encoding: str) -> int:
    """The smallest limit ``truncatable`` accepts for ``msg``."""
    widest = anchor("rb-", 2**32 - 1, 2**32 - 1)
    return message_tokens(rewritten(msg, "truncated", widest), encoding) + 16 + MIN_KEPT_TOKENS


def truncated_text(msg: Message, max_tokens: int, encoding: str) -> str | None:
    """A tool result cut to at most ``max_tokens``: two thirds of the room beside the anchor as
    head, one third as tail (none when head and tail would cover the text); the whole is
    counted, and the room given back by what it overshot, up to four tries; then the anchor
    alone. None when not even the anchor fits."""
    text = "".join(texts(msg))
    total = _core.count_text(text, encoding)
    message_id = _core.content_id(text)

    def tokens(body: str) -> int:
        return message_tokens(rewritten(msg, "truncated", body), encoding)

    room = max_tokens - tokens(anchor(message_id, total, total))
    if room < 0:
        return None
    for _ in range(4):
        if room < MIN_KEPT_TOKENS:
            break
        head = _core.cut_text(text, room * 2 // 3, encoding, False)
        tail = _core.cut_text(text, room - room * 2 // 3, encoding, True)
        if len(head.encode()) + len(tail.encode()) >= len(text.encode()):
            tail = ""
        kept = _core.count_text(head, encoding) + _core.count_text(tail, encoding)
        body = head + anchor(message_id, max(0, total - kept), total) + tail
        if tokens(body) <= max_tokens:
            return body
        room = max(0, room - (tokens(body) - max_tokens + 2))
    return anchor(message_id, total, total)


def _json_key(arguments: str) -> tuple[str, str]:
    """What makes two calls' arguments the same: equal JSON values (serde_json's: an integer
    outside 64 bits is a float), or the same raw string when they are not JSON."""

    def normal(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("a number out of range is not JSON to serde_json")
        if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**64:
            return float(v)
        if isinstance(v, list):
            return [normal(x) for x in v]
        if isinstance(v, dict):
            return {k: normal(x) for k, x in v.items()}
        return v

    try:
        value = normal(json.loads(arguments, parse_constant=_reject_constant))
    except ValueError:
        return ("raw", arguments)
    return ("json", json.dumps(value, sort_keys=True, ensure_ascii=False))


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


def idempotency_key(arguments: str) -> str | None:
    """The call's idempotency key: the first of IDEMPOTENCY_ARGS that is a string argument."""
    try:
        value = json.loads(arguments, parse_constant=_reject_constant)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return next((value[k] for k in IDEMPOTENCY_ARGS if isinstance(value.get(k), str)), None)


@dataclass(frozen=True)
class Entry:
    """One side-effecting call that was dropped."""

    tool: str
    call_id: str
    #: Canonical JSON.
    args: str
    status: str
    idempotency_key: str | None = None
    resource_id: str | None = None
    #: User messages before the call's ring (1 = the first user message).
    turn: int | None = None

    def line(self) -> str:
        """``- send_email [ok] call_id="c1" args={...}``, then ``idempotency_key=``,
        ``resource_id=`` and ``turn=`` when known; odd tool names are JSON-quoted."""
        bare = self.tool and all(c.isascii() and (c.isalnum() or c in "_-.:") for c in self.tool)
        tool = self.tool if bare else canonical(self.tool)
        ok = all(c.isascii() and (c.isalnum() or c == "_") for c in self.status)
        status = self.status if ok else "unknown"
        line = f"- {tool} [{status}] call_id={canonical(self.call_id)} args={self.args}"
        for name, value in (
            ("idempotency_key", self.idempotency_key),
            ("resource_id", self.resource_id),
        ):
            if value is not None:
                line += f" {name}={canonical(value)}"
        if self.turn is not None:
            line += f" turn={self.turn}"
        return line


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
    if got is None:
        return None
    args, rest = got
    optional: dict[str, str | None] = {}
    for name in ("idempotency_key", "resource_id"):
        optional[name] = None
        if rest.startswith(f" {name}="):
            got = _next_json(rest[len(name) + 2 :])
            if got is None or not isinstance(got[0], str):
                return None
            optional[name], rest = got
    turn = None
    if rest.startswith(" turn="):
        # Rust's u32::from_str: ASCII digits after an optional plus sign.
        digits = rest[len(" turn=") :]
        if not re.fullmatch(r"\+?[0-9]+", digits, flags=re.ASCII) or int(digits) >= 2**32:
            return None
        turn, rest = int(digits), ""
    if rest:
        return None
    return Entry(tool, call_id, canonical(args), status, turn=turn, **optional)


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


def side_effect_entries(work: Work, ring: Unit, cfg: rb.AssemblyConfig, turn: int) -> list[Entry]:
    """Entries for the side-effecting calls of a ring, with how each ended and its turn."""
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
        arguments = call["function"]["arguments"]
        fields = cfg.ledger_fields.get(name)
        out.append(
            Entry(
                name,
                call["id"],
                ledger_args(arguments, fields),
                status,
                idempotency_key=idempotency_key(arguments),
                turn=turn,
            )
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
    """The request split into units, what is protected and which units the suffix holds."""

    work: Work
    notes: list[int]
    #: Summary notes an earlier assembly wrote (pinned where they stand).
    summaries: list[int]
    units: list[Unit]
    protected: list[bool]
    #: Per unit: in the protected suffix (one of the latest rings, or the last unit).
    recent: list[bool]
    prefix_end: int
    first_user: int | None
    #: Positions of the user messages (a ring's turn is how many stand before it).
    users: list[int]
    ledger: Ledger
    #: Messages pinned otherwise than as one of the latest user turns.
    pin: set[int] = field(default_factory=set)

    def unit_tokens(self, u: Unit) -> int:
        return sum(self.work.tokens[w] for w in range(u.start, u.end) if w not in self.notes)

    def unit_of(self, w: int) -> int:
        return next(k for k, u in enumerate(self.units) if u.start <= w < u.end)


def recent_units(all_units: list[Unit], recent_tool_rings: int) -> list[bool]:
    """The last ``recent_tool_rings`` rings where they stand, and the last unit."""
    rings = [k for k, u in enumerate(all_units) if u.kind == "ring"]
    chosen = set(rings[max(0, len(rings) - recent_tool_rings) :] if recent_tool_rings else [])
    return [k in chosen or k == len(all_units) - 1 for k in range(len(all_units))]


def layout(work: Work, cfg: rb.AssemblyConfig, pinned: Iterable[int]) -> Layout:
    msgs = work.msgs
    notes, entries = [], []
    if "side_effect_ledger" in cfg.pin:
        for w, m in enumerate(msgs):
            parsed = parse_note(m)
            if parsed is not None:
                notes.append(w)
                entries += parsed
    summaries = [w for w, m in enumerate(msgs) if w not in notes and is_summary_note(m)]
    instructions = [w for w, m in enumerate(msgs) if m["role"] in INSTRUCTION]
    role = msgs[(notes or instructions)[0]]["role"] if notes or instructions else "system"
    prefix_end = next((w for w, m in enumerate(msgs) if m["role"] not in INSTRUCTION), len(msgs))
    users = [w for w, m in enumerate(msgs) if m["role"] == "user"]
    first_user = users[0] if users else None
    pin = set(range(prefix_end)) | set(notes) | set(summaries)
    if "first_user_message" in cfg.pin and first_user is not None:
        pin.add(first_user)
    if "security_system_prompt" in cfg.pin:
        pin |= set(instructions)
    pin |= {work.source.index(i) for i in pinned}
    all_units = units(msgs)
    ledger = Ledger(entries, role, cfg.encoding)
    lay = Layout(
        work, notes, summaries, all_units, [], [], prefix_end, first_user, users, ledger, pin
    )
    lay.recent, lay.protected = protection(lay, cfg.recent_tool_rings, cfg.recent_user_turns)
    return lay


def protection(lay: Layout, rings: int, turns: int) -> tuple[list[bool], list[bool]]:
    """Per unit, whether it is in the suffix with ``rings`` recent rings, and whether it is
    protected with that suffix and the last ``turns`` user messages pinned."""
    recent = recent_units(lay.units, rings)
    pin = lay.pin | set(lay.users[max(0, len(lay.users) - turns) :])
    return recent, [
        r or any(w in pin for w in range(u.start, u.end))
        for u, r in zip(lay.units, recent, strict=True)
    ]


# The cheap stages ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """A rewrite of one message: its new content and the message's tokens after it."""

    text: str
    tokens: int


def superseded_reads(lay: Layout, cfg: rb.AssemblyConfig) -> dict[int, str]:
    """Tool results (by position) that a later result of the same read supersedes, with the
    tool's name: same tool, same arguments as JSON values, the tool not side-effecting. The
    call a result answers is looked up in its own unit. The later result must be a real one
    (not an error, not synthesized) in a protected unit, so it is certain to stay."""
    calls: dict[tuple[int, str], tuple[str, str]] = {}
    for k, u in enumerate(lay.units):
        for w in range(u.start, u.end):
            for c in lay.work.msgs[w].get("tool_calls") or ():
                calls[(k, c["id"])] = (c["function"]["name"], c["function"]["arguments"])
    seen: set[tuple[str, tuple[str, str]]] = set()
    out: dict[int, str] = {}
    for w in reversed(range(len(lay.work.msgs))):
        msg = lay.work.msgs[w]
        if msg["role"] != "tool":
            continue
        call = calls.get((lay.unit_of(w), msg["tool_call_id"]))
        if call is None or call[0] in cfg.side_effect_tools:
            continue
        key = (call[0], _json_key(call[1]))
        if key in seen:
            out[w] = call[0]
        elif (
            lay.protected[lay.unit_of(w)]
            and not lay.work.errors[w]
            and lay.work.source[w] is not None
        ):
            seen.add(key)
    return dict(sorted(out.items()))


@dataclass
class Cheap:
    """What the cheap stages may rewrite: candidates per kind among the middle's own messages
    (not synthesized, not notes), oldest first, and each rewrite, made when first asked for.
    The stage loop plans a cut result at max_tool_result_tokens (the cut never exceeds it) and
    cuts only the results the plan keeps."""

    lay: Layout
    cfg: rb.AssemblyConfig
    candidates: dict[str, list[int]]
    read_tool: dict[int, str]
    made: dict[tuple[Any, ...], Action | None] = field(default_factory=dict)

    @classmethod
    def find(cls, lay: Layout, cfg: rb.AssemblyConfig) -> Cheap:
        enabled = {REWRITES[s] for s in cfg.stages if s in REWRITES}
        work = lay.work
        limit = cfg.max_tool_result_tokens

        def middle(w: int) -> bool:
            k = lay.unit_of(w)
            return not lay.protected[k] and w not in lay.notes and work.source[w] is not None

        reads = superseded_reads(lay, cfg) if "deduped" in enabled else {}
        read_tool = {w: tool for w, tool in reads.items() if middle(w)}
        candidates: dict[str, list[int]] = {"deduped": [*read_tool], "truncated": [], "media": []}
        for w in filter(middle, range(len(work.msgs))):
            msg = work.msgs[w]
            if "truncated" in enabled and msg["role"] == "tool" and work.tokens[w] > limit:
                if truncatable(msg, limit, cfg.encoding):
                    candidates["truncated"].append(w)
            if "media" in enabled and images(msg):
                candidates["media"].append(w)
        return cls(lay, cfg, candidates, read_tool)

    def floor(self, w: int) -> int | None:
        """The fewest tokens message ``w`` can end with as the loop plans it: the limit for a
        cut result, nothing for the others; None when no cheap stage may rewrite it."""
        floors = [
            self.cfg.max_tool_result_tokens if kind == "truncated" else 0
            for kind, ws in self.candidates.items()
            if w in ws
        ]
        return min(floors) if floors else None

    def shrinkable(self, u: Unit) -> int:
        """Tokens of a unit the cheap stages could remove, as the loop plans them."""
        tokens = self.lay.work.tokens
        return sum(
            max(0, tokens[w] - f) for w in range(u.start, u.end) if (f := self.floor(w)) is not None
        )

    def planned(self, kind: str, w: int) -> int | None:
        """Tokens of message ``w`` after the rewrite as the loop plans them, or None when the
        rewrite would not make it smaller."""
        if kind == "truncated":
            limit = self.cfg.max_tool_result_tokens
            return limit if self.lay.work.tokens[w] > limit else None
        act = self.rewrite(kind, w)
        return None if act is None else act.tokens

    def cut(self, w: int, cap: int) -> Action | None:
        """Result ``w`` cut to at most ``cap`` tokens (None when not smaller)."""
        if ("cut", w, cap) not in self.made:
            msg, enc = self.lay.work.msgs[w], self.cfg.encoding
            text = truncated_text(msg, cap, enc)
            tokens = (
                None if text is None else message_tokens(rewritten(msg, "truncated", text), enc)
            )
            ok = tokens is not None and tokens < self.lay.work.tokens[w]
            self.made[("cut", w, cap)] = Action(text, tokens) if ok else None  # type: ignore[arg-type]
        return self.made[("cut", w, cap)]  # type: ignore[index]

    def made_as(self, w: int, kind: str, cap: int) -> Action | None:
        """The rewrite a walk planned: a cut at its cap, any other at its own size."""
        return self.cut(w, cap) if kind == "truncated" else self.rewrite(kind, w)

    def rewrite(self, kind: str, w: int) -> Action | None:
        """The rewrite of message ``w``: its text and exact tokens (None when not smaller)."""
        if (kind, w) not in self.made:
            self.made[(kind, w)] = self._make(kind, w)
        return self.made[(kind, w)]

    def _make(self, kind: str, w: int) -> Action | None:
        msg, old, enc = self.lay.work.msgs[w], self.lay.work.tokens[w], self.cfg.encoding
        if kind == "deduped":
            text: str | None = dedupe_stub(self.read_tool[w])
        elif kind == "truncated":
            text = truncated_text(msg, self.cfg.max_tool_result_tokens, enc)
        else:
            text = MEDIA_PLACEHOLDER
        if text is None:
            return None
        tokens = message_tokens(rewritten(msg, kind, text), enc)
        return Action(text, tokens) if tokens < old else None


# Citations ----------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9_./:@#+~-]+")
_FILE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z][A-Za-z0-9]{0,7}")
_NUMBER = re.compile(r"[+-]?[0-9]+(?:[.:-][0-9]+)*")


def is_identifier(w: str) -> bool:
    """A word that looks like a path, a file name, a number, an id mixing letters and digits,
    a name with ``_ @ #``, or camelCase."""
    if len(w) < MIN_IDENTIFIER_CHARS:
        return False
    alpha, digit = re.search("[A-Za-z]", w), re.search("[0-9]", w)
    return bool(
        ((alpha or digit) and re.search("[/_@#]", w))
        or (alpha and digit)
        or re.search("[a-z][A-Z]", w)
        or _FILE_NAME.fullmatch(w)
        or _NUMBER.fullmatch(w)
    )


def identifiers(text: str) -> set[str]:
    """The identifiers among the ASCII words of ``text`` (trailing ``. : -`` left out), a path
    with each of its tails after a ``/`` that is one too."""
    out = set()
    for match in _WORD.finditer(text):
        w = match.group().rstrip(".:-")
        if is_identifier(w):
            out.add(w)
            out |= {w[i + 1 :] for i, c in enumerate(w) if c == "/" and is_identifier(w[i + 1 :])}
    return out


def message_identifiers(msg: Message) -> set[str]:
    """A message's identifiers: its texts', and its calls' arguments as written and their string
    values decoded."""
    out = set().union(*(identifiers(t) for t in texts(msg)))
    for call in msg.get("tool_calls") or ():
        raw = call["function"]["arguments"]
        out |= identifiers(raw)
        try:
            value = json.loads(raw, parse_constant=_reject_constant)
        except ValueError:
            continue
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                out |= identifiers(v)
            elif isinstance(v, list):
                stack += v
            elif isinstance(v, dict):
                stack += v.values()
    return out


def citations(lay: Layout) -> list[bool]:
    """Per unit: a ring one of whose results holds an identifier that a later message other
    than a result repeats; a plain unit repeating an identifier an earlier result holds. Notes
    and synthesized results hold nothing."""
    msgs = lay.work.msgs

    def ids(w: int) -> set[str]:
        if w in lay.notes or lay.work.source[w] is None:
            return set()
        return message_identifiers(msgs[w])

    def result(w: int) -> bool:
        return msgs[w]["role"] == "tool"

    out = []
    for u in lay.units:
        if u.kind == "ring":
            held = set().union(*(ids(w) for w in range(u.start, u.end) if result(w)))
            later = set().union(*(ids(w) for w in range(u.end, len(msgs)) if not result(w)))
            out.append(bool(held & later))
        else:
            said = set().union(*(ids(w) for w in range(u.start, u.end) if not result(w)))
            earlier = set().union(*(ids(w) for w in range(u.start) if result(w)))
            out.append(bool(said & earlier))
    return out


# The stage loop -----------------------------------------------------------------------------


def _is_short_error_ring(lay: Layout, u: Unit, cfg: rb.AssemblyConfig) -> bool:
    results = range(u.start + 1, u.end)
    return (
        u.kind == "ring"
        and all(lay.work.errors[w] for w in results)
        and sum(lay.work.tokens[w] for w in results) <= cfg.short_error_result_tokens
    )


def candidates(lay: Layout, cfg: rb.AssemblyConfig) -> dict[str, list[int]]:
    """Units each drop stage may drop, oldest first (none for the cheap stages)."""
    middle = [k for k, p in enumerate(lay.protected) if not p]
    held = [k for k in middle if _is_short_error_ring(lay, lay.units[k], cfg)]
    held = held[max(0, len(held) - cfg.max_held_error_rings) :]
    return {
        **{stage: [] for stage in REWRITES},
        **drops(lay, cfg, middle, held),
        **{stage: [] for stage in DEGRADE_STAGES},
    }


def drops(lay: Layout, cfg: rb.AssemblyConfig, among: list[int], held: list[int]) -> dict:
    """What each drop stage takes of ``among``: rings not ``held`` and plain units, the
    referenced rings and citing turns set apart for their own stage when it is configured."""
    cited = citations(lay)
    # A ring the ledger records keeps its place: its entries are written in drop order.
    for k, u in enumerate(lay.units):
        calls = [c for m in lay.work.msgs[u.start : u.end] for c in m.get("tool_calls") or ()]
        if "side_effect_ledger" in cfg.pin and any(
            c["function"]["name"] in cfg.side_effect_tools for c in calls
        ):
            cited[k] = False
    defer_rings = "drop_referenced_rings" in cfg.stages
    defer_turns = "drop_citing_turns" in cfg.stages
    rings = [k for k in among if lay.units[k].kind == "ring" and k not in held]
    plain = [k for k in among if lay.units[k].kind == "plain"]
    return {
        "drop_rings": [k for k in rings if not (defer_rings and cited[k])],
        "drop_plain_turns": [k for k in plain if not (defer_turns and cited[k])],
        "drop_referenced_rings": [k for k in rings if cited[k]],
        "drop_citing_turns": [k for k in plain if cited[k]],
        "drop_error_rings": held,
    }


def core_stages(cfg: rb.AssemblyConfig) -> list[str]:
    return [s for s in cfg.stages if s in CORE_STAGES]


def certainly_dropped(lay: Layout, cfg: rb.AssemblyConfig, cheap: Cheap) -> set[int]:
    """Units the drops reach whatever the cheap stages save: walking the drop sequence back from
    its end, once what stays (every candidate of a cheap stage counted at its floor) is over
    the budget, that unit and every earlier one of the sequence go. The cheap stages do not
    rewrite them."""
    per_stage = candidates(lay, cfg)
    sequence = list(dict.fromkeys(k for s in core_stages(cfg) for k in per_stage[s]))
    value = [lay.unit_tokens(u) - cheap.shrinkable(u) for u in lay.units]
    fixed = FRAMING + sum(v for k, v in enumerate(value) if k not in sequence)
    tail = 0
    for j in reversed(range(len(sequence))):
        tail += value[sequence[j]]
        if fixed + tail > cfg.budget:
            return set(sequence[: j + 1])
    return set()


@dataclass
class Walk:
    """Where one walk of the stages ended."""

    dropped: set[int]
    ledger: Ledger
    stages: list[tuple[str, int, int]]
    tools: int
    total: int
    #: The smallest total seen along the way: what a failed walk reports as needed.
    least: int
    #: Tokens of each unit after the rewrites of its messages.
    unit_now: list[int] = field(default_factory=list)
    #: Message position -> (kind, tokens saved), for every rewrite made.
    rewritten: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: Message position -> (stage that rewrote it, the cap of a cut).
    by: dict[int, tuple[str, int]] = field(default_factory=dict)
    #: Message position -> what its kept rewrite saved beyond the plan (``finish``).
    slack: dict[int, int] = field(default_factory=dict)

    def kept_rewrites(self, lay: Layout) -> list[tuple[int, str, int]]:
        """``(position, kind, saved)`` of the rewrites of units still kept, in order."""
        return [
            (w, kind, saved)
            for w, (kind, saved) in sorted(self.rewritten.items())
            if lay.unit_of(w) not in self.dropped
        ]


def _held(lay: Layout, among: list[int], cfg: rb.AssemblyConfig) -> list[int]:
    held = [k for k in among if _is_short_error_ring(lay, lay.units[k], cfg)]
    return held[max(0, len(held) - cfg.max_held_error_rings) :]


def released_candidates(lay: Layout, released: list[int], cfg: rb.AssemblyConfig) -> dict:
    """Per middle stage, what it may take among units ``shrink_recent`` released: units to drop,
    and messages to rewrite (cuts and images; a superseded read is not stubbed, the newer read
    may be released and dropped itself)."""
    held = _held(lay, released, cfg)
    msgs = [
        w
        for k in released
        for w in range(lay.units[k].start, lay.units[k].end)
        if lay.work.source[w] is not None and w not in lay.notes
    ]
    return {
        "deduped": [],
        "truncated": [w for w in msgs if lay.work.msgs[w]["role"] == "tool"],
        "media": [w for w in msgs if images(lay.work.msgs[w])],
        **drops(lay, cfg, released, held),
    }


def walk(
    lay: Layout,
    cfg: rb.AssemblyConfig,
    cheap: Cheap,
    tools: int,
    budget: int,
    certain: set[int] = frozenset(),  # type: ignore[assignment]
) -> Walk:
    """Runs the middle's stages in order while the request is over ``budget``: a cheap stage
    rewrites its candidates oldest first (one rewrite per message, units not certainly
    dropped), a drop stage drops its units oldest first, and a dropped side-effecting ring adds
    its calls to the ledger note (which costs tokens too). Then, the middle exhausted, the
    stages that degrade the suffix, in their order; last, still over and allowed, drops the
    tools schema."""
    ledger = Ledger(list(lay.ledger.entries), lay.ledger.role, lay.ledger.encoding)
    full = [lay.unit_tokens(u) for u in lay.units]
    w = Walk(set(), ledger, [], tools, 0, 0, unit_now=list(full))
    enc = cfg.encoding

    def total() -> int:
        return sum(w.unit_now[k] for k in range(len(full)) if k not in w.dropped) + (
            ledger.tokens + FRAMING + w.tools
        )

    def rewrite(m: int, stage: str, kind: str, tokens: int) -> None:
        saved = lay.work.tokens[m] - tokens
        w.rewritten[m] = (kind, saved)
        w.by[m] = (stage, tokens)
        w.unit_now[lay.unit_of(m)] -= saved
        w.least = min(w.least, total())

    def planned_cut(m: int, cap: int) -> int | None:
        msg = lay.work.msgs[m]
        fits = lay.work.tokens[m] > cap and truncatable(msg, cap, enc)
        return cap if fits else None

    def middle_stage(stage: str, per_stage: dict, by: str) -> tuple[int, int]:
        """Runs one middle stage over its candidates; returns (count, restored)."""
        count, restored = 0, 0
        kind = REWRITES.get(stage)
        for m in per_stage[kind] if kind else ():
            if total() <= budget:
                break
            k = lay.unit_of(m)
            if k in w.dropped or k in certain or m in w.rewritten:
                continue
            if kind == "truncated":
                planned = planned_cut(m, cfg.max_tool_result_tokens)
            else:
                planned = cheap.planned(kind, m)  # type: ignore[arg-type]
            if planned is None:
                continue
            rewrite(m, by, kind, planned)  # type: ignore[arg-type]
            count += 1
        for k in per_stage.get(stage, ()):
            if total() <= budget:
                break
            if k in w.dropped:
                continue
            w.dropped.add(k)
            count += 1
            # The drop is reported at the unit's full size, whatever rewrites saved before.
            restored += full[k] - w.unit_now[k]
            u = lay.units[k]
            if u.kind == "ring" and "side_effect_ledger" in cfg.pin:
                turn = sum(1 for x in lay.users if x < u.start)
                for entry in side_effect_entries(lay.work, u, cfg, turn):
                    ledger.add(entry)
            w.least = min(w.least, total())
        return count, restored

    rings = min(cfg.recent_tool_rings, sum(1 for u in lay.units if u.kind == "ring"))
    turns = min(cfg.recent_user_turns, len(lay.users))
    recent, protected = list(lay.recent), list(lay.protected)

    def truncate_protected() -> tuple[int, int]:
        results = [
            m
            for m in range(len(lay.work.msgs))
            if recent[lay.unit_of(m)]
            and lay.work.msgs[m]["role"] == "tool"
            and lay.work.source[m] is not None
            and m not in lay.notes
            and m not in lay.pin
            and lay.unit_of(m) not in w.dropped
            and m not in w.rewritten
        ]
        newest = lay.unit_of(results[-1]) if results else None
        count = 0
        for m in [m for m in results if lay.unit_of(m) != newest]:
            if total() <= budget:
                return count, 0
            planned = planned_cut(m, cfg.max_tool_result_tokens)
            if planned is not None:
                rewrite(m, "truncate_protected_results", "truncated", planned)
                count += 1
        for m in [m for m in results if lay.unit_of(m) == newest]:
            if total() <= budget:
                break
            need = max(0, lay.work.tokens[m] - (total() - budget))
            cap = max(cfg.min_result_tokens, min(cfg.max_tool_result_tokens, need))
            # Never below what leaves the cut some text beside its anchor.
            cap = max(cap, least_cap(lay.work.msgs[m], enc))
            planned = planned_cut(m, cap)
            if planned is not None:
                rewrite(m, "truncate_protected_results", "truncated", planned)
                count += 1
        return count, 0

    def shrink_recent() -> tuple[int, int]:
        nonlocal rings, turns, recent, protected
        ring_floor = min(cfg.min_recent_tool_rings, rings)
        turn_floor = min(cfg.min_recent_user_turns, turns)
        count = restored = 0
        while total() > budget:
            r, t = rings - ring_floor, turns - turn_floor
            if r == 0 and t == 0:
                break
            if r >= t:
                rings -= 1
            else:
                turns -= 1
            recent, now = protection(lay, rings, turns)
            released = [
                k for k in range(len(now)) if protected[k] and not now[k] and k not in w.dropped
            ]
            protected = now
            per_stage = released_candidates(lay, released, cfg)
            for stage in middle:
                if total() <= budget:
                    break
                c, r_ = middle_stage(stage, per_stage, "shrink_recent")
                count += c
                restored += r_
        return count, restored

    w.least = total()
    per_stage = {**candidates(lay, cfg), **cheap.candidates}
    middle = [s for s in core_stages(cfg) if s not in DEGRADE_STAGES]
    degrade = [s for s in core_stages(cfg) if s in DEGRADE_STAGES]
    for stage in middle + degrade:
        if total() <= budget:
            break
        before = total()
        if stage == "truncate_protected_results":
            count, restored = truncate_protected()
        elif stage == "shrink_recent":
            count, restored = shrink_recent()
        else:
            count, restored = middle_stage(stage, per_stage, stage)
        if count:
            w.stages.append((stage, count, max(0, before + restored - total())))
    if total() > budget and cfg.on_still_over_budget == "drop_tools_schema_then_fail" and w.tools:
        w.stages.append(("drop_tools_schema", 1, w.tools))
        w.tools = 0
        w.least = min(w.least, total())
    w.total = total()
    return w


def finish(lay: Layout, w: Walk, cheap: Cheap) -> None:
    """Makes the rewrites the walk keeps: a cut result's exact size (at most the planned
    limit) replaces the plan's, and what it saves beyond the plan comes off the total."""
    for m, kind, saved in w.kept_rewrites(lay):
        act = cheap.made_as(m, kind, w.by[m][1])
        if act is None:
            raise rb.InvalidMessageError("a planned rewrite could not be made", index=m)
        slack = max(0, lay.work.tokens[m] - saved - act.tokens)
        w.unit_now[lay.unit_of(m)] -= slack
        w.rewritten[m] = (kind, saved + slack)
        w.slack[m] = slack
        w.total -= slack


def stage_reports(lay: Layout, w: Walk) -> list[tuple[str, int, int]]:
    """The walk's stages as reported: a stage that only rewrites counts only the rewrites of
    messages still kept (a rewrite of a unit dropped later counts for the drop), and goes if
    none is left; ``shrink_recent`` adds what its kept cuts saved beyond the plan."""
    kept = w.kept_rewrites(lay)
    out = []
    for stage, units_, saved in w.stages:
        mine = [(m, s) for m, _, s in kept if w.by[m][0] == stage]
        if stage in REWRITES or stage == "truncate_protected_results":
            units_, saved = len(mine), sum(s for _, s in mine)
        elif stage == "shrink_recent":
            saved += sum(w.slack[m] for m, _ in mine)
        if units_:
            out.append((stage, units_, saved))
    return out


def buckets(lay: Layout, w: Walk) -> dict[str, int]:
    """Tokens per bucket of what the walk kept."""
    b = {"prefix": 0, "middle": 0, "suffix": 0, "tools": w.tools, "insertions": w.ledger.tokens}
    b["framing"] = FRAMING
    for k in range(len(lay.units)):
        if k in w.dropped:
            continue
        where = "prefix" if lay.protected[k] else "middle"
        b["suffix" if lay.recent[k] else where] += w.unit_now[k]
    return b


def emit(lay: Layout, w: Walk, cfg: rb.AssemblyConfig, cheap: Cheap) -> list[Any]:
    """Plan items: kept indices in order, rewrites, synthesized results, the ledger note at its
    anchor (where an earlier note stood, else right after the pinned first user message unless
    that is the last message, else after the leading instructions). An unchanged single note is
    the caller's own message again."""
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
        at = lay.notes[0]
    elif "first_user_message" in cfg.pin and first_user is not None:
        # After the goal, unless the goal is the last message: the request must still end with
        # the turn the model answers.
        last = first_user + 1 >= len(lay.work.msgs)
        at = lay.prefix_end if last else first_user + 1
    else:
        at = lay.prefix_end
    rewrites = {m: kind for m, kind, _ in w.kept_rewrites(lay)}
    items: list[Any] = []
    for k, u in enumerate(lay.units):
        for i in range(u.start, u.end):
            if i == at:
                items += note
            if k in w.dropped or i in lay.notes:
                continue
            source = lay.work.source[i]
            if i in rewrites:
                act = cheap.made_as(i, rewrites[i], w.by[i][1])
                assert act is not None
                items.append(("rewrite", source, rewrites[i], act.text))
            elif source is None:
                items.append(("synthesized", lay.work.msgs[i].get("tool_call_id")))
            else:
                items.append(source)
    if at >= len(lay.work.msgs):
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
    #: ``(index, kind, tokens_saved)`` of every message kept with rewritten content.
    rewrites: list[tuple[int, str, int]] = field(default_factory=list)
    #: Indices of the summary notes earlier assemblies wrote.
    summary_notes: list[int] = field(default_factory=list)


def plan(
    messages: Sequence[Message],
    cfg: rb.AssemblyConfig,
    tools: list[Any] | None = None,
    pinned: Iterable[int] = (),
) -> Plan:
    """The expected plan, or the expected error raised. A request that cannot fit reports the
    smallest request the stages pass through."""
    lay, repairs = prepare(messages, cfg, pinned)
    cheap = Cheap.find(lay, cfg)
    tools_cost = tools_tokens(tools, cfg.encoding)
    w = walk(lay, cfg, cheap, tools_cost, cfg.budget, certainly_dropped(lay, cfg, cheap))
    fits = w.total <= cfg.budget
    if not fits:
        least = walk(lay, cfg, cheap, tools_cost, cfg.budget).least
        w = walk(lay, cfg, cheap, tools_cost, least)
    if not fits:
        # The walk's own total: with a cut result planned at the limit, the budget that fits.
        raise rb.BudgetExceededError(
            "over budget", tokens=w.total, budget=cfg.budget, bucket_tokens=buckets(lay, w)
        )
    finish(lay, w, cheap)
    before = sum(lay.work.tokens[i] for i, s in enumerate(lay.work.source) if s is not None)
    spans: dict[str, list[tuple[int, int]]] = {"ring": [], "plain": []}
    for k in sorted(w.dropped):
        span = _span(lay, lay.units[k])
        if span is not None:
            spans[lay.units[k].kind].append(span)
    stages = stage_reports(lay, w)
    if len(lay.notes) > 1:
        # Several earlier notes become one, at the first one's place; the report says so.
        notes_cost = sum(lay.work.tokens[n] for n in lay.notes)
        stages.insert(
            0, ("merge_ledger_notes", len(lay.notes) - 1, max(0, notes_cost - w.ledger.tokens))
        )
    return Plan(
        items=emit(lay, w, cfg, cheap),
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
        rewrites=[
            (lay.work.source[m], kind, saved)  # type: ignore[misc]
            for m, kind, saved in w.kept_rewrites(lay)
        ],
        summary_notes=[s for w_ in lay.summaries if (s := lay.work.source[w_]) is not None],
    )


def materialize(messages: Sequence[Message], items: list[Any]) -> list[Any]:
    """The message list a plan stands for: the caller's objects plus new insertions."""
    out: list[Any] = []
    for item in items:
        if isinstance(item, int):
            out.append(messages[item])
        elif item[0] == "synthesized":
            out.append(synthesized_result(item[1]))
        elif item[0] == "rewrite":
            out.append(rewritten(messages[item[1]], item[2], item[3]))
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
