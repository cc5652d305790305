"""The ways of fitting a history into a budget that ``benches/fidelity.py`` compares: ringbound
under several configs, the baselines an agent framework offers (LangChain's and LiteLLM's
``trim_messages``, last-k, observation masking as arXiv 2508.21433 describes it), two
reference points (everything, every result masked) and prototypes of proposed core stages,
written here in pure Python so their recall is measured before anything is built in Rust.

Each strategy takes an OpenAI Chat history, its tools schema and a budget (tokens of the whole
request, tools included, as ``rb.count_tokens`` counts them) and returns the messages to send,
or None when it refuses."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ringbound as rb
from ringbound.fidelity import identifiers

Message = dict[str, Any]
Tools = list[Any] | None
Run = Callable[[list[Message], Tools, int], list[Message] | None]

#: Observation masking's window in the paper: the tool outputs of the last M agent turns stay.
PAPER_WINDOW = 10
#: SWE-agent's placeholder for an elided observation, which the paper's masking uses.
PLACEHOLDER = "Old environment output: ({lines} lines omitted)"


@dataclass(frozen=True)
class Strategy:
    name: str
    run: Run
    #: What kind of row it is: ``ringbound`` (a config), ``baseline``, ``reference``
    #: (bounds, not policies) or ``prototype`` (a proposed core stage, in Python).
    kind: str


# ringbound ------------------------------------------------------------------------------------


def ringbound(**overrides: Any) -> Run:
    """ringbound's Assembler with the whole budget for the request and ``overrides`` set."""

    def run(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
        cfg = rb.AssemblyConfig(
            model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **overrides
        )
        try:
            return rb.Assembler(cfg).assemble(history, tools).messages
        except rb.BudgetExceededError:
            return None

    return run


CHEAP = ("dedupe_superseded_reads", "truncate_oversized_results", "degrade_media")
DEFAULT_STAGES = rb.AssemblyConfig().stages
DROPS_ONLY = tuple(s for s in DEFAULT_STAGES if s not in CHEAP)
#: The stages that take what later turns build on last (docs/drop-order.md).
CITED = ("drop_referenced_rings", "drop_citing_turns")
#: The default order before them: rings, then plain turns, oldest first.
OLDEST_FIRST = tuple(s for s in DEFAULT_STAGES if s not in CITED)


def with_cheap_stage(stage: str) -> tuple[str, ...]:
    """The default stages with ``stage`` the only cheap one."""
    return tuple(s for s in DEFAULT_STAGES if s not in CHEAP or s == stage)


# Baselines ------------------------------------------------------------------------------------


def _message_tokens(m: Message) -> int:
    return rb.count_tokens([m]) - rb.count_tokens([])


def _tools_tokens(tools: Tools) -> int:
    return rb.count_tokens([], tools=tools or None) - rb.count_tokens([])


def last_k(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    """The leading system messages and ``history[-k:]`` for the largest k that fits: the
    naive cut, which may start on a tool result whose call it left out."""
    lead = 0
    while lead < len(history) and history[lead].get("role") in ("system", "developer"):
        lead += 1
    head, rest = history[:lead], history[lead:]
    lo, hi = 0, len(rest)
    while lo < hi:  # the largest k whose request fits; fewer messages never weigh more
        k = (lo + hi + 1) // 2
        if rb.count_tokens(head + rest[len(rest) - k :], tools=tools) <= budget:
            lo = k
        else:
            hi = k - 1
    return head + rest[len(rest) - lo :]


class LangChainTrim:
    """LangChain's ``trim_messages(strategy="last", include_system=True, ...)`` with a counter
    in ringbound's accounting (the message's tokens as ``rb.count_tokens`` counts it alone),
    the tools schema taken off its budget, as ``ringbound simulate`` runs it."""

    def __init__(self, **settings: Any) -> None:
        from langchain_core.messages import (
            convert_to_messages,
            convert_to_openai_messages,
            trim_messages,
        )

        self.settings = {"strategy": "last", "include_system": True, **settings}
        self._convert = convert_to_messages
        self._back = convert_to_openai_messages
        self._trim = trim_messages
        self._sizes: dict[int, tuple[Any, int]] = {}
        self._framing = rb.count_tokens([])

    def _size(self, m: Any) -> int:
        hit = self._sizes.get(id(m))
        if hit is None or hit[0] is not m:
            hit = self._sizes[id(m)] = (m, _message_tokens(self._back(m)))
        return hit[1]

    def _counter(self, messages: Sequence[Any]) -> int:
        return self._framing + sum(self._size(m) for m in messages)

    def __call__(self, history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
        lc = self._convert(history)
        limit = budget - _tools_tokens(tools)
        kept = self._trim(lc, max_tokens=limit, token_counter=self._counter, **self.settings)
        return [self._back(m) for m in kept]


def litellm_trim(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    """LiteLLM's ``trim_messages(messages, max_tokens=...)`` (its own counter), the tools
    schema taken off its budget."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.utils import trim_messages

    # On an agent history it fails inside (``content: null`` next to ``tool_calls``), logs
    # the traceback and returns the messages untouched: the outcome is measured, the log muted.
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
    return list(trim_messages(history, max_tokens=budget - _tools_tokens(tools)))


def _turn_of_results(history: list[Message]) -> list[int]:
    """For each message, the number of the agent turn (assistant message with calls) whose
    results it is, or -1."""
    turn, out = -1, []
    calls = 0
    for m in history:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls += 1
            turn = calls
        out.append(turn if m.get("role") == "tool" else -1)
    return out


def _masked(m: Message, text: str) -> Message:
    return {**m, "content": text}


def _content_text(m: Message) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(str(p.get("text", "")) for p in c or () if isinstance(p, dict))


def mask_observations(history: list[Message], window: int) -> list[Message]:
    """Every message kept; each tool output older than the last ``window`` agent turns
    replaced by SWE-agent's placeholder (the paper's observation masking)."""
    turns = _turn_of_results(history)
    last = max(turns, default=-1)
    out = []
    for m, t in zip(history, turns, strict=True):
        if t >= 0 and t <= last - window:
            lines = len(_content_text(m).splitlines())
            m = _masked(m, PLACEHOLDER.format(lines=lines))
        out.append(m)
    return out


def paper_masking(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    """Observation masking with the paper's window, whatever the budget."""
    return mask_observations(history, PAPER_WINDOW)


def fitted_masking(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    """Observation masking with the largest window (up to the paper's) whose request fits;
    with no window left, what masking every output gives, fitting or not."""
    for window in range(PAPER_WINDOW, -1, -1):
        out = mask_observations(history, window)
        if rb.count_tokens(out, tools=tools) <= budget:
            return out
    return out


# References -----------------------------------------------------------------------------------


def keep_everything(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    return history


def mask_every_result(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
    """A deliberately bad policy: every tool result replaced by the placeholder."""
    return mask_observations(history, 0)


# Prototypes of proposed core stages -----------------------------------------------------------


def _recent_start(history: list[Message], rings: int) -> int:
    """Where the last ``rings`` tool rings begin (ringbound's protected suffix)."""
    starts = [
        i for i, m in enumerate(history) if m.get("role") == "assistant" and m.get("tool_calls")
    ]
    return starts[-rings] if len(starts) >= rings else (starts[0] if starts else len(history))


def identifier_stub(text: str) -> str:
    """What the proposed stage leaves of a result: its size and the identifiers it holds
    (paths, numbers, ids; ``ringbound.fidelity.identifiers``), in order, within a tenth of
    the result's characters (at least 80)."""
    room = max(80, len(text) // 10)
    kept: list[str] = []
    used = 0
    for ident in identifiers(text):
        if used + len(ident) + 1 > room:
            break
        kept.append(ident)
        used += len(ident) + 1
    lines = len(text.splitlines())
    return f"[older result elided ({lines} lines); identifiers: {' '.join(kept) or 'none'}]"


def mask_then_ringbound(stub: Callable[[str], str], **overrides: Any) -> Run:
    """Prototype of a stage before ``drop_rings``: while over budget, the oldest middle tool
    result (before the last ``recent_tool_rings`` rings) becomes ``stub(text)``, when that is
    shorter; then ringbound (``overrides`` set) assembles what is left, dropping whole units
    if still over. The call, its result message and every plain turn stay, so pairing holds."""
    recent = overrides.get("recent_tool_rings", rb.AssemblyConfig().recent_tool_rings)
    assemble = ringbound(**overrides)

    def run(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
        total = rb.count_tokens(history, tools=tools)
        out = list(history)
        for i in range(_recent_start(history, recent)):
            if total <= budget:
                break
            m = out[i]
            if m.get("role") != "tool":
                continue
            text = _content_text(m)
            short = stub(text)
            if len(short) >= len(text):
                continue
            new = _masked(m, short)
            total += _message_tokens(new) - _message_tokens(m)
            out[i] = new
        return assemble(out, tools, budget)

    return run


def placeholder_stub(text: str) -> str:
    return PLACEHOLDER.format(lines=len(text.splitlines()))


def referenced_rings(history: list[Message]) -> list[int]:
    """The rings (by their assistant message's index) one of whose results holds an
    identifier that a later message repeats: rings the rest of the session builds on."""
    out = []
    for i, m in enumerate(history):
        if not (m.get("role") == "assistant" and m.get("tool_calls")):
            continue
        j = i + 1
        found: set[str] = set()
        while j < len(history) and history[j].get("role") == "tool":
            found.update(identifiers(_content_text(history[j])))
            j += 1
        later = "\n".join(
            _content_text(h)
            + "".join(
                str((c.get("function") or {}).get("arguments")) for c in h.get("tool_calls") or ()
            )
            for h in history[j:]
            if h.get("role") != "tool"
        )
        if any(ident in later for ident in found):
            out.append(i)
    return out


def citing_turns(history: list[Message]) -> list[int]:
    """The plain assistant turns that repeat an identifier of an earlier tool result: where
    the agent wrote down what it read."""
    seen: set[str] = set()
    out = []
    for i, m in enumerate(history):
        if m.get("role") == "tool":
            seen.update(identifiers(_content_text(m)))
        elif m.get("role") == "assistant" and not m.get("tool_calls"):
            if any(ident in seen for ident in identifiers(_content_text(m))):
                out.append(i)
    return out


def keep_referenced_rings(plain_turns: bool = False, **overrides: Any) -> Run:
    """Prototype of a drop order: rings whose results later turns refer to (and, with
    ``plain_turns``, plain turns that cite a result) are dropped last. Run as ringbound
    (``overrides`` set) with those units pinned, the oldest pin released while the request
    does not fit."""

    def run(history: list[Message], tools: Tools, budget: int) -> list[Message] | None:
        pins = referenced_rings(history)
        if plain_turns:
            pins = sorted(pins + citing_turns(history))
        cfg = rb.AssemblyConfig(
            model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0, **overrides
        )
        asm = rb.Assembler(cfg)
        for start in range(len(pins) + 1):
            try:
                return asm.assemble(history, tools, pinned=pins[start:]).messages
            except rb.BudgetExceededError:
                continue
        return None

    return run


#: The config-only change that raised recall most (docs/performance.md, "Fidelity"): one
#: protected ring, and the suffix free to shrink to nothing before a refusal.
BEST_CONFIG = {"recent_tool_rings": 1, "min_recent_tool_rings": 0, "min_recent_user_turns": 0}


def strategies(langchain: bool = True, litellm: bool = True) -> list[Strategy]:
    """Every strategy of the table, in its order."""
    out = [
        Strategy("keep everything (no trimming)", keep_everything, "reference"),
        Strategy("mask every tool result", mask_every_result, "reference"),
        Strategy("ringbound default", ringbound(), "ringbound"),
        Strategy(
            "ringbound, oldest first (without drop_referenced_rings, drop_citing_turns)",
            ringbound(stages=OLDEST_FIRST),
            "ringbound",
        ),
        Strategy(
            "ringbound, drops only (no cheap stage)", ringbound(stages=DROPS_ONLY), "ringbound"
        ),
    ]
    out += [
        Strategy(f"ringbound, drops + {s}", ringbound(stages=with_cheap_stage(s)), "ringbound")
        for s in CHEAP
    ]
    out += [
        Strategy(
            "ringbound, min_recent_tool_rings=0", ringbound(min_recent_tool_rings=0), "ringbound"
        ),
        Strategy(
            "ringbound, min_recent_tool_rings=0, min_recent_user_turns=0",
            ringbound(min_recent_tool_rings=0, min_recent_user_turns=0),
            "ringbound",
        ),
        Strategy("ringbound, recent_tool_rings=1", ringbound(recent_tool_rings=1), "ringbound"),
        Strategy(
            "ringbound, without drop_plain_turns",
            ringbound(stages=tuple(s for s in DEFAULT_STAGES if s != "drop_plain_turns")),
            "ringbound",
        ),
        Strategy(
            "ringbound, max_tool_result_tokens=500",
            ringbound(max_tool_result_tokens=500, min_result_tokens=200),
            "ringbound",
        ),
        Strategy(
            "ringbound, best config: recent_tool_rings=1, min_recent_*=0",
            ringbound(**BEST_CONFIG),
            "ringbound",
        ),
        Strategy("last-k", last_k, "baseline"),
        Strategy("observation masking, M=10 (paper)", paper_masking, "baseline"),
        Strategy("observation masking, M fitted to the budget", fitted_masking, "baseline"),
    ]
    if langchain:
        out += [
            Strategy("LangChain trim_messages, default", LangChainTrim(), "baseline"),
            Strategy(
                'LangChain trim_messages, start_on="human"',
                LangChainTrim(start_on="human", end_on=("human", "tool")),
                "baseline",
            ),
        ]
    if litellm:
        out.append(Strategy("LiteLLM trim_messages", litellm_trim, "baseline"))
    out += [
        Strategy(
            "prototype: mask middle results (placeholder), then ringbound",
            mask_then_ringbound(placeholder_stub),
            "prototype",
        ),
        Strategy(
            "prototype: mask middle results keeping identifiers, then ringbound",
            mask_then_ringbound(identifier_stub),
            "prototype",
        ),
        Strategy("prototype: keep referenced rings", keep_referenced_rings(), "prototype"),
        Strategy(
            "prototype: mask keeping identifiers + best config",
            mask_then_ringbound(identifier_stub, **BEST_CONFIG),
            "prototype",
        ),
        Strategy(
            "prototype: keep referenced rings + best config",
            keep_referenced_rings(**BEST_CONFIG),
            "prototype",
        ),
        Strategy(
            "prototype: keep referenced rings and citing plain turns",
            keep_referenced_rings(plain_turns=True),
            "prototype",
        ),
        Strategy(
            "prototype: keep referenced rings and citing plain turns + best config",
            keep_referenced_rings(plain_turns=True, **BEST_CONFIG),
            "prototype",
        ),
    ]
    return out
