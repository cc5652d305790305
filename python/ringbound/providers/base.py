"""What every provider adapter provides, and the walk they share.

The core plans OpenAI-Chat-shaped *canonical* messages. For every provider but OpenAI Chat the
core also reads the native request: it parses the items an adapter writes as JSON
(``native_parts``), checks the provider's own pairing rules (errors quote that provider's
wording) and maps the items onto the canonical view, each part at its real cost. An adapter
renders the core's plan back into native items (``render``): kept items are the caller's own
objects; insertions and merges are new objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .._core import LEDGER_MARKER, NOTE_SEPARATOR, SUMMARY_MARKER, Insertion, join_system_note
from ..errors import InvalidMessageError, PairingIssue, RingboundError
from ..payload import dump_native

__all__ = [
    "Adapter",
    "Canonical",
    "ItemFacts",
    "PlanItem",
    "Rendered",
    "UnreadableObject",
    "as_mapping",
    "begin_reading",
    "end_reading",
    "guarded",
    "is_summary_note",
    "join_system_note",
    "kept_native",
    "named_by",
    "native_json",
    "plan_rewrites",
    "read_once",
    "reading_once",
    "split_system_note",
    "tools_as_openai",
]

#: An item of the core's plan: an ``int`` keeps canonical message k; an ``Insertion`` is a
#: result synthesized for a call that had none, the ledger or summary note, or canonical
#: message k with its content rewritten (kind ``truncated``, ``deduped`` or ``media``).
PlanItem = int | Insertion


@dataclass(frozen=True)
class ItemFacts:
    """What the core read of each native item for rendering, so that copying kept items into
    the request never reads them again.

    Attributes:
        roles: Each item's role in the provider's own word (None where it has none).
        blank_text: Whether it holds a whitespace-only text block (stripped when rendered).
        cache_markers: Its blocks carrying a prompt-cache marker (an upper bound).
    """

    roles: list[str | None]
    blank_text: list[bool]
    cache_markers: list[int]


@dataclass(frozen=True)
class Canonical:
    """A native request as the core sees it.

    Attributes:
        messages: OpenAI Chat messages, one or more per native item (a top-level system text
            becomes a leading ``system`` message).
        spans: For each canonical message, the native items ``[start, end)`` it stands for;
            ``(-1, -1)`` for text outside the message list (a top-level system).
        binds_next: For each canonical message, whether it must stay in one unit with the
            next (a reasoning item with its call).
        pinned: Canonical messages the provider's rules keep whatever the budget (the latest
            OpenAI Responses ``compaction`` item).
        facts: What the core read of each native item for rendering, when the core read
            them; None for a view built in Python.
        view: The core's reading (``_core.NativeView``) this view comes from, if any.
    """

    messages: list[dict[str, Any]]
    spans: list[tuple[int, int]]
    binds_next: list[bool] = field(default_factory=list)
    pinned: list[int] = field(default_factory=list)
    facts: ItemFacts | None = None
    view: Any = None

    def groups(self) -> list[int]:
        """Non-decreasing group ids: canonical messages of one native item share one."""
        return [start + 1 for start, _ in self.spans]


@dataclass(frozen=True)
class Rendered:
    """A plan turned back into the provider's shape.

    Attributes:
        messages: The native items to send: a list, or for a body's history the kept items
            as they are (``raw_items.KeptItems``, written back as slices of the body).
        system: The top-level system value to send (providers that have one), else None.
        merged: Native messages that are new objects because same-role neighbours were
            merged or a block was added to them.
        rewrites: Rewrites the rendering made on its own, ``(native index, kind, tokens
            saved)``, reported with the plan's (``blank_text``: whitespace-only text blocks
            the provider refuses, stripped).
    """

    messages: Sequence[Any]
    system: Any = None
    merged: int = 0
    rewrites: list[tuple[int, str, int]] = field(default_factory=list)


class Adapter(Protocol):
    """One provider's wire format.

    An adapter of a provider the core reads also has ``native_parts(messages) -> list[bytes]``
    (the items as JSON for the core's parser) and ``system_texts(system) -> list[list[str]]``
    (the top-level system as the core counts it). The OpenAI Chat adapter, whose messages are
    the canonical view itself, has ``to_canonical`` instead; Gemini keeps one too, to place the
    results it synthesizes while rendering.
    """

    #: Provider key (``anthropic``, ...).
    key: str
    #: Whose published image formula prices images: ``openai``, ``anthropic``, ``gemini``.
    image_formula: str
    #: Provider tokens per counted token when the provider has no public tokenizer.
    default_token_ratio: float
    #: The request field holding the items, as errors name them (``messages``, ``contents``).
    items_field: str
    #: Whether a ledger note costs, as rendered, what the core counted for it: then a plan
    #: whose only insertion is that note is not recounted (``tests/providers/
    #: test_notes_counted.py`` holds each adapter that says so to it).
    notes_as_counted: bool
    #: Whether a result synthesized for an unanswered call costs, as rendered, what the core
    #: counted for it (where nothing is merged): then such a plan is not recounted either
    #: (held to it by the same tests).
    results_as_counted: bool

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by the provider's own rules, quoting its error wording."""
        ...

    def render(
        self,
        messages: Sequence[Any],
        items: Sequence[PlanItem],
        canonical: Canonical,
        *,
        system: Any = None,
    ) -> Rendered:
        """The native request the plan describes."""
        ...

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """The provider's tool definitions in OpenAI's shape, to be counted."""
        ...


_T = TypeVar("_T")

#: The readings of the current assembly: (reader, id of the list) -> (the list, its reading).
_READINGS: ContextVar[dict[tuple[str, int], tuple[Any, Any]] | None] = ContextVar(
    "ringbound_readings", default=None
)


@contextmanager
def reading_once() -> Iterator[None]:
    """Within the block, ``read_once`` reads a given message list once: an assembly validates,
    maps and renders the same list, and reading every native item in Python was most of an
    adapter's time. Scoped to one assembly, so a list changed between two is read again."""
    token = begin_reading()
    try:
        yield
    finally:
        end_reading(token)


def begin_reading() -> Token[Any]:
    """Starts the scope of ``reading_once`` without a context manager (the assembler's own
    enters it on every call); ``end_reading`` with the token ends it."""
    return _READINGS.set({})


def end_reading(token: Token[Any]) -> None:
    _READINGS.reset(token)


def read_once(reader: str, messages: Any, read: Callable[[Any], _T]) -> _T:
    """``read(messages)``, or inside ``reading_once`` the reading made before of this very
    list (the memo holds the list, so its id cannot be reused while the block runs)."""
    memo = _READINGS.get()
    if memo is None:
        return guarded(read, messages)
    key = (reader, id(messages))
    hit = memo.get(key)
    if hit is not None and hit[0] is messages:
        return hit[1]  # type: ignore[no-any-return]
    value = guarded(read, messages)
    memo[key] = (messages, value)
    return value


def native_json(messages: Sequence[Any], read: Callable[[Any], Any]) -> list[bytes]:
    """The items as JSON arrays for the core's parser (``payload.dump_native``); when they
    cannot be written, ``read`` (the adapter's own reader) names the item at fault, if it can."""
    try:
        return dump_native(messages)
    except InvalidMessageError:
        read(messages)
        raise


def tools_as_openai(adapter: Adapter, tools: Sequence[Any]) -> list[dict[str, Any]]:
    """``adapter.tools_to_openai(tools)``; an exception the caller's tool objects raise while
    they are read becomes InvalidMessageError, as for messages."""
    return guarded(adapter.tools_to_openai, tools, what="a tool")


def guarded(read: Callable[[Any], _T], messages: Any, *, what: str = "a message") -> _T:
    """``read(messages)``; an exception that the caller's own objects raise while they are
    read (a mapping whose ``get`` or ``__getitem__`` raises) becomes InvalidMessageError, with
    the original as its cause."""
    try:
        return read(messages)
    except RingboundError:
        raise
    except RecursionError:
        raise
    except Exception as e:
        reason = f"{what} could not be read ({type(e).__name__}: {e})"
        where = "tools" if what == "a tool" else "messages"
        raise InvalidMessageError(f"{where}: {reason}", index=None, reason=reason) from e


def named_by(field: str, call: Callable[[], _T]) -> _T:
    """``call()``, with an InvalidMessageError of the core naming the item by the provider's
    own field (``contents[3]``, ``input[3]``) instead of ``messages[3]``."""
    try:
        return call()
    except InvalidMessageError as e:
        if field == "messages" or e.index is None or e.reason is None:
            raise
        raise InvalidMessageError(
            f"{field}[{e.index}]: {e.reason}", index=e.index, reason=e.reason
        ) from None


class UnreadableObject(ValueError):
    """An SDK object whose ``model_dump`` failed; the message says why."""


def as_mapping(obj: Any) -> Mapping[str, Any] | None:
    """A native message, item or block as a mapping: itself when it is one, an SDK (pydantic)
    object through ``model_dump`` as the SDK would send it, None when it is neither.

    Raises:
        UnreadableObject: ``model_dump`` raised.
    """
    # A plain dict first: the ABC check below costs several times more, once per block.
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj
    try:
        dump = getattr(obj, "model_dump", None)
    except Exception as e:  # a hostile or broken __getattr__ is bad input, not a crash
        raise UnreadableObject(f"cannot be read ({type(e).__name__}: {e})") from None
    if not callable(dump):
        return None
    try:
        data = dump(mode="json", exclude_none=True)
    except Exception as e:  # whatever the SDK raises, the object is bad input
        raise UnreadableObject(f"cannot be read ({type(e).__name__}: {e})") from None
    return data if isinstance(data, Mapping) else None


def _kept(item: PlanItem) -> int | None:
    """The canonical index an item keeps (as is or rewritten), else None."""
    if type(item) is int:
        return item
    if type(item) is Insertion.Rewrite:
        return item.index
    return None


def kept_native(items: Sequence[PlanItem], canonical: Canonical) -> list[int]:
    """Native indices the plan keeps (as they are or rewritten), in order, each once."""
    if canonical.view is not None:
        return canonical.view.kept_native(items)  # type: ignore[no-any-return]
    out: list[int] = []
    spans = canonical.spans
    following = 0  # indices below it are in ``out`` already, or were passed over
    for item in items:
        k = item if type(item) is int else _kept(item)
        if k is None:
            continue
        start, end = spans[k]
        start = max(start, following)
        if start < end:
            out.extend(range(start, end))
            following = end
    return out


def call_message(
    items: Sequence[PlanItem], j: int, canonical: Canonical, call_id: str
) -> int | None:
    """The canonical index of the kept message making call ``call_id``, whose synthesized
    result is plan item ``j``: the plan places it after its call message's own results, so
    the search reads back only over that ring. None when the call is not found there."""
    for item in reversed(items[:j]):
        if type(item) is int or type(item) is Insertion.Rewrite:
            k = item if type(item) is int else item.index
            calls = canonical.messages[k].get("tool_calls") or ()
            if any(c["id"] == call_id for c in calls):
                return k
    return None


def plan_rewrites(
    items: Sequence[PlanItem], canonical: Canonical
) -> dict[int, list[tuple[int, str, str]]]:
    """The plan's rewrites by native index: ``(canonical index, kind, text)`` in plan order.
    One native item may stand for several canonical messages, each rewritten on its own."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    for item in items:
        if type(item) is Insertion.Rewrite:
            start = canonical.spans[item.index][0]
            if start >= 0:
                out.setdefault(start, []).append((item.index, item.kind, item.text))
    return out


def is_summary_note(text: Any) -> bool:
    """Whether a text is a summary note an earlier assembly wrote."""
    return isinstance(text, str) and text.startswith(SUMMARY_MARKER)


def split_system_note(text: str) -> tuple[str, str | None, str | None]:
    """A top-level system text split into the caller's part, the ledger note and the summary
    note an earlier assembly appended, in that order, each note optional (providers whose
    system sits outside the messages keep them there). The inverse of the core's
    ``join_system_note``, the one join every writer uses (tests/providers/test_system_note.py
    checks the two against each other)."""
    summary: str | None = None
    at = text.find(NOTE_SEPARATOR + SUMMARY_MARKER)
    if at >= 0:
        text, summary = text[:at], text[at + len(NOTE_SEPARATOR) :]
    elif text.startswith(SUMMARY_MARKER):
        return "", None, text
    at = text.find(NOTE_SEPARATOR + LEDGER_MARKER)
    if at < 0:
        if text.startswith(LEDGER_MARKER):
            return "", text, summary
        return text, None, summary
    return text[:at], text[at + len(NOTE_SEPARATOR) :], summary
