"""What every provider adapter provides, and the helpers they share.

The core plans OpenAI-Chat-shaped *canonical* messages. For every provider but OpenAI Chat the
core also reads the native request: it parses the items, the system and the tools, written as
JSON here (``NativeAdapter``), checks the provider's own pairing rules (errors quote that
provider's wording) and maps the items onto the canonical view, each part at its real cost;
and it writes the request the plan describes: kept items are the caller's own objects,
insertions and merges are new objects. The Python reading and rendering those adapters had
live on in the tests (``tests/native_readers/``, ``tests/providers/<provider>_oracle.py``) as
the oracles for what the core reads and writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import orjson

from .. import _core
from .._core import LEDGER_MARKER, NOTE_SEPARATOR, SUMMARY_MARKER, Insertion, join_system_note
from ..errors import InvalidMessageError, PairingIssue, RingboundError
from ..payload import check_tools, dump_native, dump_system, dump_tools, dump_value

__all__ = [
    "Adapter",
    "Canonical",
    "NativeAdapter",
    "PlanItem",
    "Rendered",
    "UnreadableObject",
    "as_mapping",
    "guarded",
    "is_summary_note",
    "join_system_note",
    "named_by",
    "split_system_note",
    "tools_json",
]

#: An item of the core's plan: an ``int`` keeps canonical message k; an ``Insertion`` is a
#: result synthesized for a call that had none, the ledger or summary note, or canonical
#: message k with its content rewritten (kind ``truncated``, ``deduped`` or ``media``).
PlanItem = int | Insertion


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
        view: The core's reading (``_core.NativeView``) this view comes from, if any.
    """

    messages: list[dict[str, Any]]
    spans: list[tuple[int, int]]
    binds_next: list[bool] = field(default_factory=list)
    pinned: list[int] = field(default_factory=list)
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

    An adapter of a provider the core reads is a ``NativeAdapter``: it also has
    ``native_parts(messages) -> list[bytes]`` (the items as JSON for the core's parser) and
    ``system_texts(system) -> list[list[str]]`` (the top-level system as the core counts it).
    The OpenAI Chat adapter, whose messages are the canonical view itself, has ``to_canonical``
    instead, and is the one that renders a plan in Python (``render``): the core writes the
    other providers' requests.
    """

    #: Provider key (``anthropic``, ...).
    key: str
    #: Whose published image formula prices images: ``openai``, ``anthropic``, ``gemini``.
    image_formula: str
    #: Provider tokens per counted token when the provider has no public tokenizer.
    default_token_ratio: float
    #: The request field holding the items, as errors name them (``messages``, ``contents``).
    items_field: str

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
        """The native request the plan describes (the OpenAI Chat adapter's alone)."""
        ...

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """The provider's tool definitions in OpenAI's shape, to be counted."""
        ...


#: The systems read lately, by provider and the text or its JSON: a session sends the same
#: system every turn, and each assembly reads it three times (the check, the reading, the
#: cache markers). Bounded: cleared when full. The groups are shared: nobody changes them.
_SYSTEMS: dict[tuple[str, Any], tuple[list[list[str]], int]] = {}
_SYSTEMS_KEPT = 16


class NativeAdapter:
    """What the adapters of the providers the core reads share: the items, the system and the
    tools go to the core as JSON, and the core reads them and checks the provider's own
    pairing rules. A subclass names the provider (``key``), its list (``items_field``) and its
    figures."""

    key: str
    items_field: str
    #: Whether the provider's SDK takes raw bytes (boto3's image bytes, the Gemini SDK's
    #: blobs): sent as base64 text in its JSON; elsewhere bytes are refused.
    raw_bytes = False

    def system_texts(self, system: Any) -> list[list[str]]:
        """The top-level system as the core counts it (``_core.read_system``): the caller's
        texts, then each note an earlier assembly left in it, one group each.

        Raises:
            InvalidMessageError: The system is not one the provider takes.
        """
        return self._system(system)[0]

    def system_markers(self, system: Any) -> int:
        """The ``cache_control`` markers a system sent as it is carries (Anthropic's): they
        count against the request's four."""
        return self._system(system)[1]

    def _system(self, system: Any) -> tuple[list[list[str]], int]:
        # A string is its own key (its hash is kept on it); anything else is keyed by its JSON,
        # which the caller's objects may change between two assemblies.
        plain = system is None or type(system) is str
        key = (self.key, system if plain else dump_system(system))
        read = _SYSTEMS.get(key)
        if read is None:
            read = _core.read_system(self.key, dump_system(system) if plain else key[1])
            if len(_SYSTEMS) >= _SYSTEMS_KEPT:
                _SYSTEMS.clear()
            _SYSTEMS[key] = read
        return read

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by the provider's own rules, in item order, each quoting the
        provider's wording: checked in the core (``_core.validate``).

        Raises:
            InvalidMessageError: An item (or the system) is malformed.
        """
        self.system_texts(system)
        return self.validate_parts(self.native_parts(messages))

    def validate_parts(self, parts: list[bytes]) -> list[PairingIssue]:
        """``validate`` of items already written as JSON (``native_parts``)."""
        issues = named_by(self.items_field, lambda: _core.validate(self.key, parts))
        return [PairingIssue(*issue) for issue in issues]

    def tools_to_openai(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """The provider's tool definitions as the OpenAI tools the core counts (``tools_json``)."""
        return orjson.loads(tools_json(self, tools))  # type: ignore[no-any-return]

    def native_parts(self, messages: Sequence[Any]) -> list[bytes]:
        """The items as JSON arrays for the core's parser of the provider."""
        return dump_native(messages, self.items_field, raw_bytes=self.raw_bytes)


_T = TypeVar("_T")


def tools_json(adapter: Adapter, tools: Sequence[Any]) -> bytes:
    """The provider's ``tools`` as the OpenAI tools the core counts, as JSON, read by the core
    (``_core.tools_as_openai``; OpenAI Chat's tools are that shape already).

    Raises:
        InvalidMessageError: ``tools`` is not a list of the provider's tool definitions.
    """
    check_tools(tools)
    if adapter.key == "openai_chat":  # a summary's assembly of Chat messages
        return dump_tools(tools) or b"[]"
    return _core.tools_as_openai(adapter.key, dump_value(tools, "tools"))


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
