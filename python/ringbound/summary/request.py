"""What a summarizer receives and the note its text becomes: the request, the structured
template, and the units rendered to text. ``runner`` calls the summarizer.

Providers play no part here: the units arrive as canonical (OpenAI-Chat-shaped) messages
rendered to text, and the summary leaves as text; the adapters place the note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "TEMPLATE_HEADINGS",
    "SummaryOutcome",
    "SummaryRequest",
    "note_body",
    "note_text",
    "split_units",
    "summary_target",
    "template",
    "unit_blocks",
    "units_text",
]

#: Section headings of the structured summary, in order.
TEMPLATE_HEADINGS = (
    "User goal",
    "Decisions",
    "Tools already executed (side effects)",
    "Open questions",
    "Do not repeat",
)
DO_NOT_REPEAT = "Do not repeat completed side-effecting tools without new user intent."
WINDOW_CUT_MARK = "[… cut to fit the summarizer's window …]"
POLICIES = ("fallback", "fail_closed")

_ERROR_OPENINGS = ("error", "traceback (most recent call last)", "exception")
_UNIT_HEADER = re.compile(r"^### unit \d+$", re.MULTILINE)


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is called with.

    Attributes:
        units: The provider-native items of each unit to summarize, oldest unit first, for
            summarizers that want the structure: plain data (SDK objects dumped) with every
            string redacted.
        text: The same units as plain text (see ``units_text``), redacted: what most
            summarizers should send to a model.
        previous_summary: The body of the earlier summary this one replaces (its marker line
            stripped), or None. Update it rather than summarizing it again from scratch.
        target_tokens: The size to aim for; a longer answer is cut to it, and one over four
            times it counts as a failure.
        ledger: The side-effect ledger entries (objects with ``tool``, ``call_id``, ``args``,
            ``status``), their arguments redacted. The ledger, not the summary, is the record
            of executed tools.
        goal: The pinned first user message as text (redacted), or None.
        provider: The provider key of the request being assembled.
        raw_units: The caller's own objects of each unit, NOT redacted; None unless the
            config opts in with ``summary_raw_units: true``.
    """

    units: list[list[Any]]
    text: str
    previous_summary: str | None
    target_tokens: int
    ledger: list[Any]
    goal: str | None
    provider: str
    raw_units: list[list[Any]] | None = None


@dataclass(frozen=True)
class SummaryOutcome:
    """What running a summarizer gave.

    Attributes:
        text: The summary body, at most the target size; None when no summary was produced.
        failed: Whether the caller's summarizer failed (the fallback may still have given
            ``text``).
        reason: Why it failed: ``exception:<ExceptionType>``, ``timeout``, ``empty``,
            ``oversized`` or ``not_text``; never the exception's own message, which may quote
            the summarized text.
        calls: Summarizer calls made, fallback included.
        chunks: Pieces the input was split into to fit the summarizer's window (1 when it
            fit whole).
        cut: Whether the answer was longer than the target and was cut to it.
        fallback_used: Whether ``text`` came from the fallback summarizer.
    """

    text: str | None
    failed: bool
    reason: str | None
    calls: int
    chunks: int
    cut: bool
    fallback_used: bool


def summary_target(
    summarized_tokens: int,
    model_input_limit: int,
    summary_max_tokens: int,
    configured: int | None = None,
) -> int:
    """The summary's token target (DESIGN §2): a fifth of what it replaces, at least 2000,
    at most 5 % of the model's window and ``summary_max_tokens`` (the upper bound wins). A
    ``configured`` target (``summary_target_tokens``) replaces the formula but not the cap.

    Never below 1: a zero target would turn every answer into an oversized failure.

    Example:
        >>> summary_target(50_000, 128_000, 4_000)
        4000
    """
    if configured is not None:
        return max(1, min(configured, summary_max_tokens))
    upper = min(int(0.05 * model_input_limit), summary_max_tokens)
    return max(1, min(max(round(0.20 * summarized_tokens), 2000), upper))


def _marker() -> str:
    # Imported here so this module loads against a core built before the constant existed.
    from .. import _core

    return _core.SUMMARY_MARKER


def note_text(body: str, *, units: int, messages: int) -> str:
    """The summary note: the marker line that tells readers (and later assemblies) what it
    is, a blank line, then the body."""
    return (
        f"{_marker()} Machine-generated summary of {messages} earlier messages ({units} units)"
        " that were removed to fit the context window. The side-effect ledger, not this"
        " summary, is the record of executed tools.\n\n"
        f"{body}"
    )


def note_body(text: str) -> str | None:
    """The body of a summary note (inverse of ``note_text``); None if ``text`` is not one."""
    if not text.startswith(_marker()):
        return None
    _, sep, rest = text.partition("\n")
    if not sep:
        return ""
    return rest[1:] if rest.startswith("\n") else rest


def template(
    goal: str | None,
    decisions: Sequence[str],
    executed: Sequence[str],
    open_questions: Sequence[str],
) -> str:
    """The structured summary: one ``## <heading>`` section per ``TEMPLATE_HEADINGS``.

    Example:
        >>> print(template("Refund order 7", ["user: order 7 arrived broken"], [], []))
        ## User goal
        Refund order 7
        <BLANKLINE>
        ## Decisions
        - user: order 7 arrived broken
        <BLANKLINE>
        ## Tools already executed (side effects)
        (none)
        <BLANKLINE>
        ## Open questions
        (none)
        <BLANKLINE>
        ## Do not repeat
        Do not repeat completed side-effecting tools without new user intent.
    """

    def bullets(lines: Sequence[str]) -> str:
        return "\n".join(f"- {line}" for line in lines) if lines else "(none)"

    bodies = (
        goal.strip() if goal and goal.strip() else "(unknown)",
        bullets(decisions),
        bullets(executed),
        bullets(open_questions),
        DO_NOT_REPEAT,
    )
    return "\n\n".join(f"## {h}\n{b}" for h, b in zip(TEMPLATE_HEADINGS, bodies, strict=True))


def units_text(units: Sequence[Sequence[Mapping[str, Any]]]) -> str:
    """Canonical messages of each unit as plain text, one ``### unit <n>`` block per unit.

    Each message opens a line with its role (``user: ...``, ``assistant → tool(args)``,
    ``tool <name> [error]: ...``); its further lines are indented, so a line that opens
    without indentation always starts a message.

    Example:
        >>> print(units_text([[{"role": "user", "content": "hi"}]]))
        ### unit 1
        user: hi
    """
    return "\n\n".join(unit_blocks(units))


def unit_blocks(units: Sequence[Sequence[Mapping[str, Any]]]) -> list[str]:
    """The blocks ``units_text`` joins: one text per unit, numbered from 1."""
    return [_unit_block(n, unit) for n, unit in enumerate(units, 1)]


def _unit_block(number: int, messages: Sequence[Mapping[str, Any]]) -> str:
    names: dict[Any, str] = {}
    for msg in messages:
        for call in msg.get("tool_calls") or ():
            names[call.get("id")] = _call_name(call)
    lines = [f"### unit {number}"]
    for msg in messages:
        role = str(msg.get("role") or "unknown")
        text = _content_text(msg.get("content"))
        if role == "tool":
            name = names.get(msg.get("tool_call_id")) or str(msg.get("name") or "unknown")
            flag = " [error]" if _is_error(msg, text) else ""
            lines.append(_indented(f"tool {name}{flag}: ", text))
            continue
        if text:
            lines.append(_indented(f"{role}: ", text))
        for call in msg.get("tool_calls") or ():
            lines.append(_indented(f"{role} → ", f"{_call_name(call)}({_call_args(call)})"))
    return "\n".join(lines)


def _indented(prefix: str, text: str) -> str:
    lines = text.splitlines() or [""]
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    rest = [f"  {line}" if line.strip() else "" for line in lines[1:]]
    return "\n".join([prefix + lines[0], *rest])


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return str(content)
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, Mapping):
            kind = part.get("type")
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind in ("image_url", "image", "input_image"):
                texts.append("[image]")
            else:
                texts.append(f"[{kind or 'part'}]")
    return "\n".join(texts)


def _call_name(call: Mapping[str, Any]) -> str:
    fn = call.get("function") or call.get("custom") or {}
    return str(fn.get("name") or "unknown")


def _call_args(call: Mapping[str, Any]) -> str:
    fn = call.get("function") or call.get("custom") or {}
    args = fn.get("arguments", fn.get("input", ""))
    return args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)


def _is_error(msg: Mapping[str, Any], text: str) -> bool:
    # Chat Completions has no error flag: the core reads one from the text's opening, the
    # same way (rust/src/providers/openai_chat.rs).
    return (
        msg.get("is_error") is True
        or msg.get("status") == "error"
        or text.lstrip()[:40].lower().startswith(_ERROR_OPENINGS)
    )


def split_units(text: str) -> list[str]:
    """The unit blocks of a ``units_text`` output (the whole text if it has no headers)."""
    starts = [m.start() for m in _UNIT_HEADER.finditer(text)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    ends = [*starts[1:], len(text)]
    # Blocks are joined with one blank line: drop exactly that, not a block's own ending.
    return [
        text[a:b].removesuffix("\n\n") if b < len(text) else text[a:b]
        for a, b in zip(starts, ends, strict=True)
    ]
