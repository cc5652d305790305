"""The native path for the bodies of Responses, Anthropic, Gemini and Bedrock Converse: when
the plan drops whole items, cuts tool results (or stubs superseded reads), makes older images
text and may bring the side-effect ledger note, the core reads the history, plans it and
writes the body in one call with the GIL released, kept items as the input's own bytes (a
rewritten item edited where it lies), the note where the provider's adapter puts it, and
every other field as it was. Python reads only the few fields the adapter turns into what
the core counts (the system's texts, the tools in OpenAI's shape: ``inputs``), once for each
distinct head of a body (``body._head``), since a session sends the same one every turn.

The merges of the neighbours a drop brought together (Anthropic, Bedrock, Gemini),
Anthropic's stripped whitespace-only text and the results a plan synthesizes for unanswered
calls (where the caller asked for them) are written by the core too, such a body counted as
sent. Any other plan (a summary, another merge, the tools dropped), a system of a shape the
core does not rewrite, another pairing issue, a note an earlier assembly left in the system,
or a request the core refuses takes the items path, which finds the same reading kept and
says what is wrong in its own words.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from . import _core
from .assembly import Assembles
from .body_result import BodyResult, budget_rule, native_result
from .observability import tracing
from .providers.base import tools_json

#: The providers whose bodies this path writes (OpenAI Chat has a native path of its own).
PROVIDERS = frozenset({"openai_responses", "anthropic", "gemini", "bedrock_converse"})
_NOTES = (_core.LEDGER_MARKER, _core.SUMMARY_MARKER)


class Inputs(NamedTuple):
    """What the core counts of a body's fields besides its history, as the adapter reads
    them: the system's texts, the tools in OpenAI's shape (JSON) and the system's cache
    markers. The same for every turn of a session, so a body's head reads them once."""

    texts: list[list[str]]
    tools: bytes | None
    markers: int


def inputs(provider: str, adapter: Any, tools: Any, system: Any) -> Inputs | None:
    """The core's inputs for a body of ``provider`` with these ``tools`` and ``system``, or
    None when the native path cannot take it (the items path then says why in its words)."""
    if provider not in PROVIDERS:
        return None
    try:
        texts = adapter.system_texts(system)
        tools_payload = tools_json(adapter, tools) if tools else None
    except Exception:
        return None  # the items path refuses them in its words
    if any(t.startswith(_NOTES) for group in texts for t in group):
        return None  # an earlier assembly's note, which the adapter rewrites
    markers = getattr(adapter, "system_markers", None)
    return Inputs(texts, tools_payload, markers(system) if markers is not None else 0)


def assemble(
    asm: Assembles,
    data: bytes,
    cut: _core.SplitBody,
    given: Inputs | None,
    keys: tuple[str, str | None],
    entry: str | None,
) -> BodyResult | None:
    """The body assembled by the core when its plan keeps items, rewrites them (cut results,
    images made text) and may bring the ledger note, else None.

    ``cut`` is ``data`` as the core split it (``_core.split_body_at``), ``given`` what the
    core counts of its other fields (``inputs``; None: the native path cannot take it);
    ``keys`` name the history and the system as the body spells them."""
    if given is None:
        return None
    start = time.perf_counter()
    got = _core.assemble_items_body(
        asm.provider,
        *keys,
        cut,
        given.texts,
        given.tools,
        given.markers,
        asm._core,
        budget_rule(asm),
        asm._cache,
    )
    if got is None:
        return None
    # The span starts once the core has written the body: a body it leaves to the adapter's
    # path is traced there, once.
    span = tracing.start_span(asm._tracer, asm.provider)
    out, planned, before, after, merged = got
    return native_result(asm, data, (out, planned, before, after), start, span, entry, merged)
