"""Move a session between providers: ``translate`` and ``translate_body`` read a history with
one provider's rules and write it in another's shape, tool pairing kept. The core does the
work (``rust/src/translate``); this module checks arguments, serializes the caller's objects,
runs the summarizer for opaque compaction items, and builds the typed report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from . import _core
from .config import AssemblyConfig
from .errors import InvalidBodyError, InvalidMessageError, SummaryError
from .payload import dump_tools, nesting_guard, snapshot
from .providers import check_provider

__all__ = [
    "Translation",
    "TranslationChange",
    "TranslationReport",
    "translate",
    "translate_body",
]

#: The limits an assembly applies by default (``max_messages``, ``max_request_bytes``), applied
#: to what is translated: time and memory stay bounded by them.
_LIMITS = AssemblyConfig()

#: ``summarizer(items)``: the source items an opaque compaction item stood for (those before
#: it that the caller still has) in, the summary text out.
CompactionSummarizer = Callable[[list[Any]], str]


@dataclass(frozen=True)
class TranslationChange:
    """One change a translation made.

    Attributes:
        item: The source item concerned, or None for the request as a whole (a tool, a field).
        action: ``dropped`` (nothing of it reaches the target), ``as_text``, ``placeholder``,
            ``summarized``, ``rewritten``, ``inserted``.
        what: What it happened to: ``signature``, ``redacted_thinking``, ``encrypted_content``,
            ``thought_signature``, ``reasoning``, ``compaction``, ``before_compaction``,
            ``image``, ``document``, ``is_error``, ``arguments``, ``opening_turn``,
            ``bridge_turn``, ``instruction``, ``blank_text``, ``tool:<type>``,
            ``schema:<tool>.<path>.<keyword>``, ``field:<name>``...
        detail: Why, in a sentence.
    """

    item: int | None
    action: str
    what: str
    detail: str


@dataclass(frozen=True)
class TranslationReport:
    """Every change of a translation, in source order, and the call ids it rewrote.

    Attributes:
        changes: The changes.
        ids: ``(source id, target id)`` for each call whose id the target's rules changed,
            in call order. The same session gives the same ids every time.
    """

    changes: tuple[TranslationChange, ...]
    ids: tuple[tuple[str, str], ...]

    @property
    def dropped(self) -> tuple[TranslationChange, ...]:
        """The changes that left something of the source out."""
        return tuple(c for c in self.changes if c.action == "dropped")


@dataclass(frozen=True)
class Translation:
    """A history in the target's shape.

    Attributes:
        messages: The target's items (its ``messages``, ``input`` or ``contents``).
        system: The target's top-level system (Anthropic ``system``, Gemini
            ``systemInstruction``, Bedrock ``system``, OpenAI Responses ``instructions``), or
            None (OpenAI Chat keeps it as messages).
        tools: The tools in the target's shape, or None when none were given.
        report: What changed.
    """

    messages: list[Any]
    system: Any
    tools: list[Any] | None
    report: TranslationReport


def _report(changes: list[tuple[Any, ...]], ids: list[tuple[str, str]]) -> TranslationReport:
    return TranslationReport(
        changes=tuple(TranslationChange(*c) for c in changes), ids=tuple(map(tuple, ids))
    )


def _dump(value: Any, what: str) -> bytes:
    try:
        return orjson.dumps(value, default=_plain)
    except (TypeError, orjson.JSONEncodeError) as e:
        raise InvalidMessageError(
            f"{what} cannot be serialized as JSON ({e})", index=None, reason=str(e)
        ) from None


def _plain(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def _check_size(messages: int, size: int, *, body: bool = False) -> None:
    for count, limit, what in (
        (messages, _LIMITS.max_messages, "messages, over max_messages"),
        (size, _LIMITS.max_request_bytes, "bytes, over max_request_bytes"),
    ):
        if count > limit:
            reason = f"the request has {count} {what} = {limit}"
            if body:
                raise InvalidBodyError(reason, reason=reason)
            raise InvalidMessageError(reason, index=None, reason=reason)


def _summaries(
    source: str, items: Sequence[Any], raw: bytes, summarizer: CompactionSummarizer | None
) -> list[tuple[int, str]]:
    """The summaries of the opaque compaction items a translation keeps, from ``summarizer``;
    none without one (the core then refuses such an item, naming it)."""
    if summarizer is None:
        return []
    out = []
    for i in _core.opaque_compactions(source, raw):
        try:
            text = summarizer(list(items[:i]))
        except Exception as e:
            raise SummaryError(
                f"the summarizer failed on the compaction item at {i}",
                reason=f"exception:{type(e).__name__}",
            ) from e
        if not isinstance(text, str) or not text.strip():
            raise SummaryError(
                f"the summarizer gave no text for the compaction item at {i}", reason="not_text"
            )
        out.append((i, text))
    return out


def translate(
    messages: Sequence[Any],
    *,
    source: str,
    target: str,
    system: Any = None,
    tools: Sequence[Any] | None = None,
    reasoning: str = "drop",
    unsupported: str = "refuse",
    summarizer: CompactionSummarizer | None = None,
    gemini_sentinel: bool = True,
) -> Translation:
    """A history of ``source`` in ``target``'s shape, tool pairing kept.

    Provider-bound items (thinking signatures, ``redacted_thinking``, ``encrypted_content``,
    Gemini ``thoughtSignature``) never reach the target; each drop is in the report. Call ids
    are rewritten to the target's rules the same way every time. The output passes the
    target's own validator; the input is not changed.

    Args:
        messages: The source's items (dicts or SDK objects).
        source: The provider they are in (``openai_chat``, ``openai_responses``,
            ``anthropic``, ``gemini``, ``bedrock_converse``).
        target: The provider to write them for.
        system: The source's top-level system, if it has one.
        tools: The source's tool definitions (Bedrock: its ``toolConfig`` or its ``tools``).
        reasoning: ``drop`` readable reasoning (reported), or send it as ``text``.
        unsupported: ``refuse`` a part the target cannot carry (an image in a Chat tool
            result, audio, a hosted tool), or put a text ``placeholder`` in its place.
        summarizer: Called with the items before an opaque OpenAI compaction item (one with
            ``encrypted_content`` only), returns the text that replaces it. Without one such an
            item is refused.
        gemini_sentinel: For Gemini, sign each call step with
            ``skip_thought_signature_validator``, Gemini's value for calls from elsewhere.

    Raises:
        ConfigError: An unknown provider or option.
        InvalidMessageError: A malformed item, a refused part, or an opaque compaction
            without a summarizer.
        PairingError: The source's calls and results do not pair by its own rules.
        SummaryError: The summarizer failed.

    Example:
        >>> import ringbound as rb
        >>> out = rb.translate(
        ...     [{"role": "user", "content": "hi"},
        ...      {"role": "assistant", "content": None, "tool_calls": [{"id": "call.1",
        ...       "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        ...      {"role": "tool", "tool_call_id": "call.1", "content": "done"}],
        ...     source="openai_chat", target="anthropic")
        >>> out.messages[1]["content"][0]["id"] == out.report.ids[0][1]
        True
    """
    source, target = check_provider(source), check_provider(target)
    items = snapshot(messages)
    with nesting_guard():
        raw = _dump(items, "messages")
        _check_size(len(items), len(raw))
        system_raw = None if system is None else _dump(system, "system")
        if tools is not None and isinstance(tools, Mapping):
            tools_raw = _dump(tools, "tools")
        else:
            tools_raw = dump_tools(tools)
        summaries = _summaries(source, items, raw, summarizer)
        out, sys_out, tools_out, changes, ids = _core.translate(
            source,
            target,
            raw,
            system_raw,
            tools_raw,
            reasoning=_option(reasoning),
            unsupported=_option(unsupported),
            summaries=summaries,
            gemini_sentinel=bool(gemini_sentinel),
        )
    return Translation(
        messages=orjson.loads(out),
        system=None if sys_out is None else orjson.loads(sys_out),
        tools=None if tools_out is None else orjson.loads(tools_out),
        report=_report(changes, ids),
    )


def _option(value: Any) -> str:
    # A non-str option reaches the core as text, which refuses it with ConfigError.
    return value if isinstance(value, str) else repr(value)


def translate_body(
    body: dict[str, Any] | bytes,
    *,
    source: str,
    target: str,
    reasoning: str = "drop",
    unsupported: str = "refuse",
    summarizer: CompactionSummarizer | None = None,
    gemini_sentinel: bool = True,
) -> tuple[dict[str, Any] | bytes, TranslationReport]:
    """A request body of ``source`` as one of ``target``: ``(body, report)``, the body of the
    kind given (a dict, or JSON bytes). The history, system and tools go through
    ``translate``; ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, stop sequences,
    ``tool_choice`` and ``stream`` go where the target keeps them; every other field, and one
    the target has no place for, is reported as dropped. The options are ``translate``'s.

    Raises:
        InvalidBodyError: The body is not a JSON object holding its history where ``source``
            keeps it.
        Others: as ``translate``.

    Example:
        >>> import ringbound as rb
        >>> body, report = rb.translate_body(
        ...     {"model": "gpt-4.1", "max_tokens": 100, "stop": ["END"],
        ...      "messages": [{"role": "system", "content": "be brief"},
        ...                   {"role": "user", "content": "hi"}]},
        ...     source="openai_chat", target="gemini")
        >>> body["generationConfig"], body["systemInstruction"]
        ({'maxOutputTokens': 100, 'stopSequences': ['END']}, {'parts': [{'text': 'be brief'}]})
        >>> [c.what for c in report.dropped]
        ['field:model']
    """
    source, target = check_provider(source), check_provider(target)
    as_bytes = isinstance(body, (bytes, bytearray, memoryview))
    if as_bytes:
        raw = bytes(body)
    elif isinstance(body, Mapping):
        with nesting_guard():
            raw = _dump(dict(body), "the body")
    else:
        reason = f"a body must be a dict or bytes, got {type(body).__name__}"
        raise InvalidBodyError(reason, reason=reason)
    _check_size(0, len(raw), body=True)
    summaries: list[tuple[int, str]] = []
    if summarizer is not None:
        parsed = orjson.loads(raw) if as_bytes else body
        history = parsed.get(_core.history_field(source)) if isinstance(parsed, Mapping) else None
        if isinstance(history, list):
            summaries = _summaries(source, history, _dump(history, "the history"), summarizer)
    out, changes, ids = _core.translate_body(
        source,
        target,
        raw,
        reasoning=_option(reasoning),
        unsupported=_option(unsupported),
        summaries=summaries,
        gemini_sentinel=bool(gemini_sentinel),
    )
    report = _report(changes, ids)
    return (out if as_bytes else orjson.loads(out)), report
