"""What every provider adapter provides, and the walk they share.

The core plans OpenAI-Chat-shaped *canonical* messages. An adapter maps a provider's native
request onto them (``to_canonical``), checks the provider's own pairing rules first so errors
quote that provider's wording (``validate``), and turns the core's plan back into native items
(``render``): kept items are the caller's own objects; insertions and merges are new objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .._core import LEDGER_MARKER
from ..errors import PairingIssue

__all__ = [
    "Adapter",
    "Canonical",
    "PlanItem",
    "Rendered",
    "UnreadableObject",
    "as_mapping",
    "join_system_note",
    "kept_native",
    "split_system_note",
]

#: An element of the core's plan: ``int`` keeps canonical message k; ``("synthesized",
#: call_id)`` is a result for a call that had none; ``("ledger", text, role)`` is the note.
PlanItem = int | tuple[str, str] | tuple[str, str, str]


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
    """

    messages: list[dict[str, Any]]
    spans: list[tuple[int, int]]
    binds_next: list[bool] = field(default_factory=list)

    def groups(self) -> list[int]:
        """Non-decreasing group ids: canonical messages of one native item share one."""
        return [start + 1 for start, _ in self.spans]


@dataclass(frozen=True)
class Rendered:
    """A plan turned back into the provider's shape.

    Attributes:
        messages: The native list to send.
        system: The top-level system value to send (providers that have one), else None.
        merged: Native messages that are new objects because same-role neighbours were
            merged or a block was added to them.
    """

    messages: list[Any]
    system: Any = None
    merged: int = 0


class Adapter(Protocol):
    """One provider's wire format."""

    #: Provider key (``anthropic``, ...).
    key: str
    #: Whose published image formula prices images: ``openai``, ``anthropic``, ``gemini``.
    image_formula: str
    #: Provider tokens per counted token when the provider has no public tokenizer.
    default_token_ratio: float

    def validate(self, messages: Sequence[Any], *, system: Any = None) -> list[PairingIssue]:
        """Pairing issues by the provider's own rules, quoting its error wording."""
        ...

    def to_canonical(self, messages: Sequence[Any], *, system: Any = None) -> Canonical:
        """The canonical view; InvalidMessageError naming the native index on bad input."""
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

    def from_canonical(self, messages: Sequence[dict[str, Any]]) -> tuple[list[Any], Any]:
        """Canonical (OpenAI Chat) messages in this provider's shape: ``(messages, system)``.
        Used to convert sessions between providers; pairing and content are kept."""
        ...


class UnreadableObject(ValueError):
    """An SDK object whose ``model_dump`` failed; the message says why."""


def as_mapping(obj: Any) -> Mapping[str, Any] | None:
    """A native message, item or block as a mapping: itself when it is one, an SDK (pydantic)
    object through ``model_dump`` as the SDK would send it, None when it is neither.

    Raises:
        UnreadableObject: ``model_dump`` raised.
    """
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if not callable(dump):
        return None
    try:
        data = dump(mode="json", exclude_none=True)
    except Exception as e:  # whatever the SDK raises, the object is bad input
        raise UnreadableObject(f"cannot be read ({type(e).__name__}: {e})") from None
    return data if isinstance(data, Mapping) else None


def kept_native(items: Sequence[PlanItem], canonical: Canonical) -> list[int]:
    """Native indices the plan keeps, in order, each once."""
    out: list[int] = []
    for item in items:
        if isinstance(item, int):
            start, end = canonical.spans[item]
            for i in range(start, end):
                if i >= 0 and (not out or out[-1] < i):
                    out.append(i)
    return out


_NOTE_SEPARATOR = "\n\n"


def split_system_note(text: str) -> tuple[str, str | None]:
    """A top-level system text split into the caller's part and a ledger note an earlier
    assembly appended (providers whose system sits outside the messages keep it there)."""
    at = text.find(_NOTE_SEPARATOR + LEDGER_MARKER)
    if at < 0:
        return (text, None) if not text.startswith(LEDGER_MARKER) else ("", text)
    return text[:at], text[at + len(_NOTE_SEPARATOR) :]


def join_system_note(base: str, note: str | None) -> str:
    """Inverse of ``split_system_note``."""
    if not note:
        return base
    return f"{base}{_NOTE_SEPARATOR}{note}" if base else note
