"""Ready-made summarizers: ``extractive`` needs no model (the default fallback, and a
summarizer for callers who want no model call on the assembly path); ``openai_compatible``
asks any Chat-Completions-compatible endpoint.

Both read ``SummaryRequest.text`` (redacted) rather than the native units, so no secret the
redactor caught reaches a model or a summary.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .request import TEMPLATE_HEADINGS, SummaryRequest, template

__all__ = ["extractive", "openai_compatible"]

_GOAL, _DECISIONS, _EXECUTED, _QUESTIONS, _ = TEMPLATE_HEADINGS
_PART_HEADER = re.compile(r"^### part \d+$", re.MULTILINE)
_UNIT_HEADER = re.compile(r"^### unit \d+$")
_CALL_LINE = re.compile(r"^(\w+) → (.*)$")
_RESULT_LINE = re.compile(r"^tool (.+?)( \[error\])?: ?(.*)$")
_TEXT_LINE = re.compile(r"^(user|assistant|system|developer): ?(.*)$")
_OMITTED = "(… "
# Characters per token the extractive summarizer assumes; the orchestrator cuts exactly.
_CHARS_PER_TOKEN = 3


def extractive(max_line_chars: int = 200) -> Callable[[SummaryRequest], str]:
    """A deterministic summarizer that copies lines instead of asking a model.

    It fills the summary template: the user goal; every decision line of the previous
    summary (so a fact from an early unit survives any number of compactions) and the first
    and last text line of each unit; each executed tool from the ledger and the units; the
    last question the user asked. When that is longer than the target it drops lines from
    the middle: the older new lines first, then the later lines of the previous summary, so
    the oldest and the newest lines stay.

    Args:
        max_line_chars: Longest line copied; longer lines are cut and end in "…".

    Example:
        >>> from ringbound.summary.request import SummaryRequest
        >>> req = SummaryRequest(units=[], text="### unit 1\\nuser: ship to Oslo",
        ...     previous_summary=None, target_tokens=500, ledger=[], goal=None, provider="x")
        >>> "- user: ship to Oslo" in extractive()(req)
        True
    """
    if max_line_chars < 8:
        raise ValueError(f"max_line_chars must be at least 8, got {max_line_chars}")

    def summarize(request: SummaryRequest) -> str:
        return _extract(request, max_line_chars)

    return summarize


@dataclass
class _Unit:
    """What the extractive summarizer reads from one ``### unit`` block."""

    texts: list[str] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    results: list[tuple[str, bool]] = field(default_factory=list)
    questions: list[str] = field(default_factory=list)


#: How a decision line that only records a read opens.
_LOOKUP = "looked up "


def _extract(request: SummaryRequest, width: int) -> str:
    earlier = _sections(request.previous_summary or "")
    # A reduce call's text is the part summaries of this input, oldest first: their lines
    # are new lines, after the previous summary's.
    parts: dict[str, list[str]] = {}
    text = request.text
    if _PART_HEADER.search(text):
        for part in _PART_HEADER.split(text):
            _merge(parts, _sections(part))
        text = ""
    units = _units(text)
    goal = request.goal or " ".join(earlier.get(_GOAL) or parts.get(_GOAL) or []) or None
    old = [_clip(line, width) for line in earlier.get(_DECISIONS, [])]
    new = [_clip(line, width) for line in parts.get(_DECISIONS, [])]
    # The side-effects section holds the ledger's entries only: a read is not an effect, and
    # calls of ledgered tools are there already. Other calls are what the agent looked up.
    effects = {getattr(e, "tool", None) for e in request.ledger}
    for unit in units:
        lines = [unit.texts[0], unit.texts[-1]] if len(unit.texts) > 1 else unit.texts
        new.extend(_clip(line, width) for line in lines)
        new.extend(
            _clip(f"{_LOOKUP}{line}", width)
            for (name, _), line in zip(unit.calls, _tool_lines(unit), strict=True)
            if name not in effects
        )
    executed = _dedupe(
        [_clip(line, width) for line in earlier.get(_EXECUTED, []) + parts.get(_EXECUTED, [])]
        + [_clip(_ledger_line(e), width) for e in request.ledger]
    )
    asked = [_clip(q, width) for q in parts.get(_QUESTIONS, [])]
    asked += [_clip(q, width) for unit in units for q in unit.questions]
    questions = asked[-1:] or earlier.get(_QUESTIONS, [])[-1:]
    budget = request.target_tokens * _CHARS_PER_TOKEN
    return _fitted(_goal_line(goal, width), old, new, executed, questions, budget)


def _fitted(
    goal: str | None,
    old: list[str],
    new: list[str],
    executed: list[str],
    questions: list[str],
    budget: int,
) -> str:
    """The template within ``budget`` characters, dropping middle lines as needed."""
    decisions = old + new
    text = template(goal, decisions, executed, questions)
    excess = len(text) - budget
    if excess <= 0:
        return text
    # Middle-out: the new lines after the previous summary's (oldest first, the newest
    # kept), then the previous summary's own from its end (its first kept).
    # Lookups go first: what the agent read matters less than what was said and decided. The
    # first new line stays as long as any does (often where the facts are stated).
    fresh = range(len(old), len(decisions) - 1)
    lookups = [i for i in fresh if decisions[i].startswith(_LOOKUP)]
    said = [i for i in fresh if i not in lookups]
    order = lookups + said[1:] + said[:1] + list(range(len(old) - 1, 0, -1))
    decisions, excess = _drop(decisions, order, excess)
    if excess > 0:
        executed, excess = _drop(executed, list(range(1, len(executed) - 1)), excess)
    return template(goal, decisions, executed, questions)


def _drop(lines: list[str], order: Sequence[int], excess: int) -> tuple[list[str], int]:
    """``lines`` without the first of ``order`` needed to save ``excess`` characters; the
    dropped ones (always one contiguous run) become one "omitted" line."""
    saved = -40  # the "omitted" line costs about this much
    gone: set[int] = set()
    for i in order:
        if saved >= excess:
            break
        gone.add(i)
        saved += len(lines[i]) + 3
    if not gone:
        return lines, excess
    out = [line for i, line in enumerate(lines) if i not in gone]
    out.insert(min(gone), f"{_OMITTED}{len(gone)} lines omitted to fit)")
    return out, excess - saved


def _units(text: str) -> list[_Unit]:
    """Reads ``units_text`` output; text without unit headers is read as one unit."""
    units: list[_Unit] = []
    unit = _Unit()
    kind = None  # what a continuation line continues: "text", "call" or None
    role = ""
    for line in text.splitlines():
        if _UNIT_HEADER.match(line):
            if unit.texts or unit.calls or unit.results:
                units.append(unit)
            unit, kind = _Unit(), None
            continue
        if not line.strip():
            continue
        if line.startswith("  "):
            if kind == "text":
                _add_text(unit, role, line.strip())
            elif kind == "call":
                name, args = unit.calls[-1]
                unit.calls[-1] = (name, f"{args} {line.strip()}")
            continue
        if m := _RESULT_LINE.match(line):
            unit.results.append((m[1], bool(m[2])))
            kind = None
        elif m := _CALL_LINE.match(line):
            name, _, args = m[2].partition("(")
            unit.calls.append((name, args[:-1] if args.endswith(")") else args))
            kind = "call"
        elif m := _TEXT_LINE.match(line):
            role, kind = m[1], "text"
            if m[2].strip():
                _add_text(unit, role, m[2].strip())
        else:
            role, kind = "", "text"
            _add_text(unit, role, line.strip())
    if unit.texts or unit.calls or unit.results:
        units.append(unit)
    return units


def _add_text(unit: _Unit, role: str, line: str) -> None:
    unit.texts.append(f"{role}: {line}" if role else line)
    if role == "user" and "?" in line:
        unit.questions.append(line)


def _tool_lines(unit: _Unit) -> list[str]:
    """``tool(args) → ok|error`` per call; a call's result is the next unused result of the
    same tool name in the unit (results carry the name, not the call id)."""
    pending = list(unit.results)
    lines = []
    for name, args in unit.calls:
        status = "no result"
        for j, (result_name, is_error) in enumerate(pending):
            if result_name == name:
                status = "error" if is_error else "ok"
                del pending[j]
                break
        lines.append(f"{name}({args}) → {status}")
    return lines


def _ledger_line(entry: Any) -> str:
    tool = getattr(entry, "tool", "unknown")
    return f"{tool}({getattr(entry, 'args', '')}) → {getattr(entry, 'status', 'unknown')}"


def _sections(body: str) -> dict[str, list[str]]:
    """The lines of each ``## <heading>`` section of a summary, bullets unwrapped. A body
    that is not in template form (a model's free text) is all decisions."""
    sections: dict[str, list[str]] = {}
    current = None
    loose = []
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("## "):
            current = line[3:].strip()
            sections.setdefault(current, [])
            continue
        line = line[2:] if line.startswith("- ") else line
        if not line or line == "(none)" or line.startswith(_OMITTED):
            continue
        if current is None:
            loose.append(line)
        else:
            sections[current].append(line)
    if not sections:
        return {_DECISIONS: loose} if loose else {}
    return sections


def _merge(into: dict[str, list[str]], more: dict[str, list[str]]) -> None:
    for heading, lines in more.items():
        if heading == _GOAL and into.get(_GOAL):
            continue  # the first part's goal stands for all
        into.setdefault(heading, []).extend(lines)


def _goal_line(goal: str | None, width: int) -> str | None:
    if not goal:
        return None
    lines = [line.strip() for line in goal.splitlines() if line.strip()]
    return _clip(" ".join(lines[:3]), 2 * width) if lines else None


def _clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def openai_compatible(
    client: Any,
    model: str,
    *,
    system_prompt: str | None = None,
    max_tokens: int | None = None,
    temperature: float = 0,
) -> Callable[[SummaryRequest], Any]:
    """A summarizer that asks a Chat Completions endpoint (OpenAI or any compatible server).

    Returns an async summarizer when ``client`` is async (``AsyncOpenAI``), else a sync one.

    Args:
        client: An ``openai.OpenAI``/``AsyncOpenAI`` client, or anything with
            ``chat.completions.create(model=, messages=, max_tokens=, temperature=)``
            returning an object or dict with ``choices[0].message.content``.
        model: The model name.
        system_prompt: Instructions replacing the default ones; the target size and the
            previous summary are still added after them.
        max_tokens: Answer limit; by default the request's ``target_tokens``.
        temperature: Sampling temperature (0: the same input gives the most stable summary).
    """
    create = client.chat.completions.create

    def arguments(request: SummaryRequest) -> dict[str, Any]:
        return {
            "model": model,
            "messages": [
                {"role": "system", "content": _prompt(request, system_prompt)},
                {"role": "user", "content": request.text},
            ],
            "max_tokens": max_tokens or request.target_tokens,
            "temperature": temperature,
        }

    if _is_async(create):

        async def summarize_async(request: SummaryRequest) -> str:
            return _content(await create(**arguments(request)))

        return summarize_async

    def summarize(request: SummaryRequest) -> str:
        return _content(create(**arguments(request)))

    return summarize


def _is_async(create: Any) -> bool:
    # The openai SDK wraps its async ``create`` in a sync-looking decorator: unwrap to see it.
    if inspect.iscoroutinefunction(create):
        return True
    try:
        return inspect.iscoroutinefunction(inspect.unwrap(create))
    except ValueError:  # a __wrapped__ chain that never ends (mock objects)
        return False


_INSTRUCTIONS = (
    "You summarize the earlier part of an agent session: these messages were removed from "
    "the conversation to fit the context window, and your summary replaces them. Never drop "
    "a side effect: every tool call that changed something outside the conversation (sent, "
    "created, paid, deleted, booked, ...) stays listed with its arguments and outcome."
)


def _prompt(request: SummaryRequest, instructions: str | None) -> str:
    headings = "\n".join(f"## {h}" for h in TEMPLATE_HEADINGS)
    parts = [
        instructions or _INSTRUCTIONS,
        f"Write at most {request.target_tokens} tokens, in these sections:\n{headings}",
        'Under "Do not repeat" write: Do not repeat completed side-effecting tools without '
        "new user intent.",
    ]
    if request.goal:
        parts.append(f"The user's goal (still in the conversation):\n{request.goal}")
    if request.previous_summary:
        parts.append(
            "Update this previous summary with the new messages instead of starting over; "
            "keep every fact and side effect it lists unless the new messages contradict "
            f"it:\n{request.previous_summary}"
        )
    return "\n\n".join(parts)


def _content(response: Any) -> Any:
    """``choices[0].message.content`` of an SDK object or a dict; None becomes ""."""
    choice = _field(response, "choices")[0]
    content = _field(_field(choice, "message"), "content")
    return "" if content is None else content


def _field(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)
