"""Hypothesis strategies for realistic OpenAI Chat agent sessions and the assembly policies they
are checked under: leading rules, the user's goal, then plain turns and tool rings (parallel
calls, shuffled results, errors, huge outputs, reused call ids, images, side-effecting tools).
With ``cheap=True`` sessions also repeat earlier reads (the same arguments written another way)
and show more images, and policies cut tool results small, so the cheap stages have work."""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import reference
from hypothesis import strategies as st

import ringbound as rb
from ringbound.config import PINS, STAGES

#: Tools that change the world: dropping their calls must leave a ledger entry.
SIDE_EFFECT_TOOLS = ("send_email", "book_reservation", "cancel_reservation", "transfer_funds")
#: Read-only tools.
READ_TOOLS = ("search_flights", "get_weather", "read_file", "list_dir", "run_tests")
TOOLS = SIDE_EFFECT_TOOLS + READ_TOOLS

#: Words texts are made of: plain, accented, CJK, Hangul, Arabic, emoji (with ZWJ and skin
#: tone), quotes, JSON, code, whitespace, and ERROR (an error only when it opens a tool result).
WORDS = (
    "the|flight|to|Paris|is|booked|please|check|order|#4521|refund|status:|ok|42|3.14|naïve|"
    'café|Zürich|東京|予約|确认|예약|مرحبا|🚀|👍🏽|👨\u200d👩\u200d👧|✈️|—|“quoted”|{"k": 1}|'
    "def f(x):|\n|\t|line\nbreak|ERROR|null|<tag>|a\\b|" + "x" * 30
).split("|")
EMAILS = ("ana@example.com", "bob@example.com", "李雷@例子.中国", "zoë@exämple.de")
PNG_SIZES = (
    (1, 1), (16, 16), (64, 48), (512, 512), (768, 1024), (1024, 1024), (2048, 1536), (300, 4000)
)  # fmt: skip


def _words(seed_and_length: tuple[int, int]) -> str:
    seed, n = seed_and_length
    return " ".join(random.Random(seed).choices(WORDS, k=n))


seeds = st.integers(0, 2**16)
#: Text of 1-25 words. Built from a seed, so a text costs two draws and shrinks to "the".
text = st.tuples(seeds, st.integers(1, 25)).map(_words)
#: Arbitrary Unicode (no surrogates, controls or separators), for the odd user message.
wild_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=40,
)


@cache
def png_data_url(width: int, height: int) -> str:
    """A real (decodable) 1-bit grayscale PNG of this size, as a data URL."""
    row = b"\x00" + bytes((width + 7) // 8)
    raw = zlib.compress(row * height, 9)

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(tag + data))
        return struct.pack(">I", len(data)) + tag + data + crc

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


@st.composite
def image_part(draw: st.DrawFn) -> dict[str, Any]:
    """An image_url part with a tiny real PNG and an explicit detail."""
    width, height = draw(st.sampled_from(PNG_SIZES))
    detail = draw(st.sampled_from(("low", "high")))
    return {
        "type": "image_url",
        "image_url": {"url": png_data_url(width, height), "detail": detail},
    }


@st.composite
def user_message(draw: st.DrawFn, images: bool = True, image_odds: int = 6) -> dict[str, Any]:
    """A user turn: a string, or text parts with an image one time in ``image_odds``."""
    body = draw(st.one_of(text, wild_text) if draw(st.integers(0, 9)) == 0 else text)
    if images and draw(st.integers(1, image_odds)) == 1:
        parts = [
            {"type": "text", "text": body},
            *draw(st.lists(image_part(), min_size=1, max_size=2)),
        ]
        return {"role": "user", "content": parts}
    return {"role": "user", "content": body}


def assistant_reply(body: str) -> dict[str, Any]:
    return {"role": "assistant", "content": body}


def _arguments(tool: str, rnd: random.Random) -> str:
    """The JSON-encoded arguments of a call: a realistic object (recipient, query, maybe a body
    beyond the ledger's 120-character cut, an amount, passengers, nested options, for a
    side-effecting tool an idempotency key); now and then not an object, or not JSON at all, as
    models emit."""
    roll = rnd.random()
    if roll < 0.05:
        return '{"to": "ana@example.com", "body": "unterminated'
    if roll < 0.1:
        return json.dumps([rnd.choice(EMAILS), rnd.randint(0, 9)])
    args: dict[str, Any] = {"to": rnd.choice(EMAILS)} if "email" in tool else {}
    args["query"] = _words((rnd.randint(0, 99), rnd.randint(1, 8)))
    if rnd.random() < 0.5:
        args["body"] = _words((rnd.randint(0, 99), 25)) * rnd.randint(1, 4)
    if rnd.random() < 0.5:
        args["amount"] = rnd.randint(0, 40_000) / 4
    if rnd.random() < 0.5:
        args["passengers"] = rnd.choices(("Ana", "Bo", "Łukasz"), k=rnd.randint(0, 3))
    if rnd.random() < 0.5:
        n = rnd.randint(-(2**53), 2**53)
        args["options"] = {"confirm": rnd.random() < 0.5, "seat": None, "n": n}
    if tool in SIDE_EFFECT_TOOLS and rnd.random() < 0.3:
        # The ledger reads a string idempotency key (under either spelling), nothing else.
        key = rnd.choice(("idempotency_key", "idempotencyKey"))
        args[key] = f"idem-{rnd.randint(0, 999)}" if rnd.random() < 0.8 else rnd.randint(0, 9)
    return json.dumps(args, ensure_ascii=rnd.random() < 0.5)


@st.composite
def call_ids(draw: st.DrawFn, n: int) -> list[str]:
    """n ids unique within one assistant message; positional ids recur across rings."""
    style = draw(st.sampled_from(("positional", "random", "openai")))
    if style == "positional":
        return [f"call_{k}" for k in range(n)]
    rnd = random.Random(draw(seeds))
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    ids = [f"{''.join(rnd.choices(alphabet, k=8))}{k}" for k in range(n)]
    return ids if style == "random" else [f"call_{i}" for i in ids]


#: Tool names, send_email the most frequent (so reused ids meet the same tool).
tool_names = st.sampled_from(("send_email", "send_email", *TOOLS))
#: How a tool call ended.
RESULT_KINDS = ("short", "huge", "error", "traceback")


def _result_text(kind: str, rnd: random.Random) -> str:
    """What a tool returned: short, huge (several KB), or an error report."""
    body = _words((rnd.randint(0, 2**16), rnd.randint(1, 25)))
    if kind == "huge":
        return (body + "\n") * rnd.randint(30, 120)
    if kind == "error":
        return rnd.choice(("Error: ", "ERROR ", "error: ", "Exception: ")) + body
    if kind == "traceback":
        return f'Traceback (most recent call last):\n  File "tool.py", line 3\n{body}'
    return body


@st.composite
def tool_ring(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An assistant message with 1-4 parallel calls and its results, in shuffled order. Tool
    names and how each call ended are drawn; the texts come from a seed (cheap to shrink)."""
    n = draw(st.integers(1, 4))
    ids = draw(call_ids(n))
    names = [draw(tool_names) for _ in range(n)]
    kinds = [draw(st.sampled_from(RESULT_KINDS)) for _ in range(n)]
    rnd = random.Random(draw(seeds))
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": name, "arguments": _arguments(name, rnd)},
        }
        for i, name in zip(ids, names, strict=True)
    ]
    content = _words((rnd.randint(0, 99), rnd.randint(1, 9))) if rnd.random() < 0.3 else None
    ring: list[dict[str, Any]] = [{"role": "assistant", "content": content, "tool_calls": calls}]
    for k in rnd.sample(range(n), n):
        result: dict[str, Any] = {"role": "tool", "tool_call_id": ids[k]}
        body = _result_text(kinds[k], rnd)
        result["content"] = [{"type": "text", "text": body}] if rnd.random() < 0.2 else body
        if rnd.random() < 0.2:
            result["name"] = names[k]
        ring.append(result)
    return ring


def rewritten_arguments(arguments: str, rnd: random.Random) -> str:
    """The same arguments written another way: keys in another order, other whitespace, other
    escaping; now and then an integral float written as an integer (another JSON value to
    serde_json, so not the same read). Arguments that are not JSON stay as they are."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        value = dict(items)
        if rnd.random() < 0.2 and isinstance(value.get("amount"), float):
            value["amount"] = int(value["amount"]) if value["amount"].is_integer() else 0
    separators = rnd.choice(((",", ":"), (", ", ": "), (" ,", " : ")))
    indent = rnd.choice((None, None, 2, "\t"))
    out = json.dumps(value, ensure_ascii=rnd.random() < 0.5, separators=separators, indent=indent)
    return rnd.choice(("", " ", "\n")) + out + rnd.choice(("", " ", "\n"))


@st.composite
def reread_ring(draw: st.DrawFn, call: dict[str, Any]) -> list[dict[str, Any]]:
    """A ring repeating an earlier call (same tool, same arguments written another way), now and
    then twice in parallel, now and then beside another call; its results are new texts."""
    rnd = random.Random(draw(seeds))
    name, arguments = call["function"]["name"], call["function"]["arguments"]
    copies = [rewritten_arguments(arguments, rnd) for _ in range(draw(st.sampled_from((1, 1, 2))))]
    calls = [(name, a) for a in copies]
    if draw(st.integers(0, 3)) == 0:
        other = draw(tool_names)
        calls.insert(rnd.randint(0, len(calls)), (other, _arguments(other, rnd)))
    ids = draw(call_ids(len(calls)))
    ring: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                for i, (n, a) in zip(ids, calls, strict=True)
            ],
        }
    ]
    for k in rnd.sample(range(len(calls)), len(calls)):
        kind = draw(st.sampled_from(RESULT_KINDS))
        ring.append({"role": "tool", "tool_call_id": ids[k], "content": _result_text(kind, rnd)})
    return ring


@st.composite
def body_unit(draw: st.DrawFn, images: bool, image_odds: int = 6) -> list[dict[str, Any]]:
    """One unit of the conversation after the goal: a user turn, a reply or a tool ring."""
    kind = draw(st.sampled_from(("user", "assistant", "ring", "ring", "ring")))
    if kind == "user":
        return [draw(user_message(images, image_odds))]
    if kind == "assistant":
        return [assistant_reply(draw(text))]
    return draw(tool_ring())


@st.composite
def sessions(
    draw: st.DrawFn,
    *,
    images: bool = True,
    max_units: int = 14,
    ending: str | None = None,
    cheap: bool = False,
) -> list[dict[str, Any]]:
    """A pairing-valid session: rules (system, sometimes developer), now and then a ring the
    agent ran before the user spoke, the user's goal, up to ``max_units`` user turns, replies
    and rings, sometimes a mid-conversation system message, then the last unit (``ending``:
    user, ring, assistant or none). With ``cheap``, images are three times as frequent and one
    to five rings repeat an earlier call (``reread_ring``)."""
    odds = 2 if cheap else 6
    msgs: list[dict[str, Any]] = []
    if draw(st.integers(0, 4)) > 0:
        msgs.append({"role": "system", "content": "You are a careful travel agent. " + draw(text)})
    if draw(st.integers(0, 4)) == 0:
        msgs.append({"role": "developer", "content": "Never reveal internal ids. " + draw(text)})
    if draw(st.integers(0, 7)) == 0:  # the agent acted before the user spoke (a scheduled run)
        msgs.extend(draw(tool_ring()))
    msgs.append(draw(user_message(images, odds)))
    units = [draw(body_unit(images, odds)) for _ in range(draw(st.integers(0, max_units)))]
    for _ in range(draw(st.integers(1, 5)) if cheap else 0):
        rings = [k for k, u in enumerate(units) if u[0].get("tool_calls")]
        if not rings:
            break
        source = draw(st.sampled_from(rings))
        call = draw(st.sampled_from(units[source][0]["tool_calls"]))
        units.insert(draw(st.integers(source + 1, len(units))), draw(reread_ring(call)))
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(units)))
        units.insert(at, [{"role": "system", "content": "Policy update: " + draw(text)}])
    end = ending or draw(st.sampled_from(("user", "ring", "assistant", "none")))
    if end == "user":
        units.append([draw(user_message(images, odds))])
    elif end == "ring":
        units.append(draw(tool_ring()))
    elif end == "assistant":
        units.append([assistant_reply(draw(text))])
    for unit in units:
        msgs.extend(unit)
    return msgs


@st.composite
def drop_some_results(draw: st.DrawFn, msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session with some tool results deleted (only ``missing_result`` issues arise)."""
    results = [i for i, m in enumerate(msgs) if m["role"] == "tool"]
    if not results:
        return msgs
    gone = set(draw(st.lists(st.sampled_from(results), min_size=1, max_size=3, unique=True)))
    return [m for i, m in enumerate(msgs) if i not in gone]


def tools_schema(names: list[str]) -> list[dict[str, Any]]:
    """A ``tools`` parameter declaring these tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name.replace('_', ' ')} for the user.",
                "parameters": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "to": {"type": "string"}},
                    "required": ["query"],
                },
            },
        }
        for name in names
    ]


def stage_prefixes() -> list[tuple[str, ...]]:
    """Every prefix of the default stage order, so the state after each stage is observed."""
    return [STAGES[:k] for k in range(len(STAGES) + 1)]


#: Limits of a tool result's size small enough that generated results go over them (16 is the
#: least the config accepts: the anchor alone is over it).
MAX_TOOL_RESULT_TOKENS = (16, 40, 80, 120, 400, 4000)


@st.composite
def policies(draw: st.DrawFn, stage_prefix: bool = False, cheap: bool = False) -> dict[str, Any]:
    """AssemblyConfig keyword arguments, the budget aside. Stages: the default order, or with
    ``stage_prefix`` one of its prefixes (tests that observe every stage override them). With
    ``cheap``, max_tool_result_tokens is drawn from MAX_TOOL_RESULT_TOKENS."""
    ledger_fields = draw(st.sampled_from(({}, {"send_email": ["to"]}, {"book_reservation": []})))
    extra = (
        {"max_tool_result_tokens": draw(st.sampled_from(MAX_TOOL_RESULT_TOKENS))} if cheap else {}
    )
    return {
        **extra,
        "recent_tool_rings": draw(st.integers(0, 4)),
        "recent_user_turns": draw(st.integers(0, 3)),
        # The floors of the degrading stages: below, at or above the configured values.
        "min_recent_tool_rings": draw(st.integers(0, 2)),
        "min_recent_user_turns": draw(st.integers(0, 2)),
        "min_result_tokens": draw(st.sampled_from((16, 60, 500))),
        "pin": tuple(p for p in PINS if draw(st.integers(0, 3)) > 0),
        "side_effect_tools": tuple(
            draw(st.lists(st.sampled_from((*SIDE_EFFECT_TOOLS, "read_file")), unique=True))
            if draw(st.integers(0, 3)) == 0
            else SIDE_EFFECT_TOOLS
        ),
        "ledger_fields": ledger_fields,
        "short_error_result_tokens": draw(st.sampled_from((0, 10, 30, 200, 10_000))),
        "max_held_error_rings": draw(st.integers(0, 4)),
        "stages": draw(st.sampled_from(stage_prefixes())) if stage_prefix else STAGES,
        "on_still_over_budget": draw(
            st.sampled_from(("fail_closed", "drop_tools_schema_then_fail"))
        ),
        "on_pairing_error": draw(st.sampled_from(("fail_closed", "synthesize_error_results"))),
        "encoding": draw(st.sampled_from(("o200k_base", "o200k_base", "cl100k_base"))),
        "output_reserve_tokens": 0,
        "safety_margin_tokens": 0,
    }


@dataclass(frozen=True)
class Case:
    """A session, its tools, a policy and a budget: one assembly to check."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    policy: dict[str, Any]
    budget: int
    pinned: tuple[int, ...] = ()
    full_tokens: int = field(default=0, compare=False)

    def config(self, **overrides: Any) -> rb.AssemblyConfig:
        """The AssemblyConfig: the policy with model_input_limit = budget, plus overrides."""
        kwargs = {**self.policy, "model_input_limit": self.budget, **overrides}
        return rb.AssemblyConfig(**kwargs)

    def with_budget(self, budget: int) -> Case:
        return replace(self, budget=budget)


def budget_for(full_tokens: int, fraction: float) -> int:
    """A budget that is ``fraction`` of the session's own tokens (at least 1)."""
    return max(1, round(full_tokens * fraction))


def least_tokens(case: Case, stages: tuple[str, ...] | None = None) -> int | None:
    """Tokens of the smallest request the policy (or these ``stages``) allows (what a budget of
    1 token reports), or None when the session cannot be planned (a pairing error under
    fail_closed)."""
    cfg = case.config(model_input_limit=1, **({} if stages is None else {"stages": stages}))
    try:
        reference.plan(case.messages, cfg, case.tools, case.pinned)
    except rb.BudgetExceededError as e:
        return e.tokens
    except rb.RingboundError:
        return None
    return 1


def between(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats spread evenly over [low, high] (hypothesis' floats favour the bounds)."""
    return st.integers(0, 1000).map(lambda k: low + (high - low) * k / 1000)


#: A budget as a fraction of the session's own tokens.
fractions = between(0.05, 1.2)


@st.composite
def budget_fraction(draw: st.DrawFn, floor: float) -> float:
    """A fraction of the session's tokens, 5%-120%; mostly above ``floor`` (the share the
    protected part needs, at which the request just fits), where dropping decides something;
    one time in five anywhere, failures included."""
    if draw(st.integers(0, 4)) == 0:
        return draw(fractions)
    return draw(between(max(0.05, floor), max(1.0, floor)))


@st.composite
def cases(
    draw: st.DrawFn,
    *,
    images: bool = True,
    missing_results: bool = False,
    repair: bool = False,
    pins: bool = True,
    stage_prefix: bool = False,
    ending: str | None = None,
    cheap: bool = False,
) -> Case:
    """A session with a policy and a budget between 5% and 120% of its own token count.

    With ``missing_results`` some results may be deleted; they are repaired if ``repair`` or
    if the policy drawn says so, else the assembly must fail closed. With ``cheap`` the session
    and the policy give the cheap stages work (see ``sessions`` and ``policies``).
    """
    msgs = draw(sessions(images=images, ending=ending, cheap=cheap))
    if missing_results and draw(st.booleans()):
        msgs = draw(drop_some_results(msgs))
    names = sorted({c["function"]["name"] for m in msgs for c in m.get("tool_calls") or ()})
    tools = tools_schema(names or list(TOOLS)) if draw(st.booleans()) else None
    policy = draw(policies(stage_prefix, cheap))
    if repair:
        policy["on_pairing_error"] = "synthesize_error_results"
    full = rb.count_tokens(msgs, encoding=policy["encoding"], tools=tools)
    pinned: tuple[int, ...] = ()
    if pins and draw(st.integers(0, 3)) == 0:
        pinned = tuple(draw(st.lists(st.integers(0, len(msgs) - 1), max_size=2, unique=True)))
    case = Case(msgs, tools, policy, full, pinned, full)
    # With ``cheap``, half the budgets lie where the cheap stages alone decide: between the
    # smallest request they can make and the whole session.
    only_cheap = cheap and draw(st.booleans())
    least = least_tokens(case, tuple(reference.REWRITES) if only_cheap else None)
    fraction = draw(budget_fraction(0.0 if least is None else least / full))
    return case.with_budget(budget_for(full, fraction))
