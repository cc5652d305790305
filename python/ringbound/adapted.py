"""Assembling a provider's native request: the core reads it by the provider's own rules,
plans the canonical view and writes the plan back as native items on the caller's list; OpenAI
Chat's summary assembly alone is rendered by its adapter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

import orjson

from . import _core
from .core_config import default_core
from .errors import (
    BudgetExceededError,
    InternalError,
    InvalidMessageError,
    PairingError,
    PairingIssue,
)
from .list_ops import apply_ops, system_like
from .payload import dump_messages, native_default
from .providers.base import (
    Adapter,
    Canonical,
    Rendered,
    guarded,
    named_by,
    tools_json,
)
from .raw_items import RawItems, items_json

__all__ = [
    "CanonicalMessages",
    "Counting",
    "NativePlan",
    "NativeRequest",
    "native_spans",
    "plan_native",
    "read_canonical",
]


@dataclass(frozen=True)
class NativePlan:
    """A plan rendered as the provider receives it, its report in the caller's indices."""

    rendered: Rendered
    report: _core.PlanReport
    canonical: Canonical


def _canonical_pins(pinned: Sequence[int], canonical: Canonical) -> list[int]:
    """The canonical messages standing for the caller's pinned items, and the provider's own
    pins, in order."""
    if not pinned:
        return sorted(canonical.pinned)
    wanted = set(pinned)
    return [
        k
        for k, (start, end) in enumerate(canonical.spans)
        if any(i in wanted for i in range(start, end)) or k in canonical.pinned
    ]


def native_spans(spans: Sequence[tuple[int, int]], canonical: Canonical) -> list[tuple[int, int]]:
    """Canonical index spans of dropped units as spans of the caller's native items."""
    out = []
    every = canonical.spans
    for start, end in spans:
        # A system text stands for no item (-1, -1); every other span is a non-empty range.
        natives = [span for span in every[start:end] if span[0] >= 0 and span[1] > span[0]]
        if natives:
            out.append((min(s for s, _ in natives), max(e for _, e in natives)))
    return out


@dataclass(frozen=True)
class Counting:
    """How the assembler counts, to recount a rendered request the same way."""

    encoding: str
    tokenizer_backend: str | None
    image_formula: str
    token_ratio: float
    cache: Any

    def count(self, canonical: Canonical, tools_payload: bytes | None) -> int:
        return _core.count(
            "openai_chat",
            orjson.dumps(canonical.messages),
            tools_payload,
            self.encoding,
            self.tokenizer_backend,
            2**63,
            2**63,
            self.cache,
            self.image_formula,
            self.token_ratio,
        )


def _as_planned(items: Sequence[Any]) -> bool:
    """Whether OpenAI Chat's rendering of ``items`` is exactly what the core counted: kept
    messages, as they are or rewritten (the core counts a rewrite as it is written). Then
    there is nothing to recount; a note or a synthesized result is recounted as rendered."""
    rewrite = _core.Insertion.Rewrite
    return all(type(item) is int or type(item) is rewrite for item in items)


#: Times a plan is tightened when its rendering costs more than the plan counted.
_MAX_TIGHTENINGS = 3

#: Rewrites the plan's items before rendering (the summary assembly writes its note there).
Fill = Callable[[Sequence[Any]], Sequence[Any]]


class CanonicalMessages(Sequence[dict[str, Any]]):
    """The canonical messages of a request the core read, as OpenAI Chat dicts built when
    asked for: an assembly reads a few (a note, the first user message, the units a summary
    covers), never all."""

    def __init__(self, view: Any) -> None:
        self._view = view
        self._built: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self._view)

    @overload
    def __getitem__(self, k: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, k: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, k: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        message = self._built.get(k)
        if message is None:
            message = self._built[k] = self._view.message(k)
        return message


def _canonical_of(view: Any) -> Canonical:
    return Canonical(
        messages=CanonicalMessages(view),  # type: ignore[arg-type]
        spans=view.spans,
        binds_next=view.binds_next,
        pinned=view.pinned,
        view=view,
    )


def _dumper(adapter: Adapter, messages: Sequence[Any]) -> Callable[[list[int]], list[bytes]]:
    """``dump(indices)``: JSON arrays of the items at ``indices``, as ``adapter.native_parts``
    writes them, a malformed one named by its index among ``messages``."""

    def dump(indices: list[int]) -> list[bytes]:
        try:
            return adapter.native_parts([messages[i] for i in indices])  # type: ignore[attr-defined,no-any-return]
        except InvalidMessageError as e:
            if e.index is None or e.reason is None or not 0 <= e.index < len(indices):
                raise
            i = indices[e.index]
            raise InvalidMessageError(
                f"messages[{i}]: {e.reason}", index=i, reason=e.reason
            ) from None

    return dump


def read_view(
    adapter: Adapter,
    messages: Sequence[Any],
    system: Any,
    tools_payload: bytes | None,
    core: Any,
    cache: Any,
) -> Any:
    """The core's reading of a native request, its errors naming the items by the provider's
    own field. A list is read by the core itself, which serializes only the plain items it has
    not met and the others (SDK objects) as ``adapter.native_parts`` writes them
    (``_core.read_native_objects``); anything else is serialized here (``_core.read_native``).
    """
    texts = adapter.system_texts(system)  # type: ignore[attr-defined]
    key = adapter.key
    dump = _dumper(adapter, messages)

    def read() -> Any:
        if type(messages) is RawItems:
            # A body's history, split once already: the core takes its items where they are.
            return _core.read_native(
                key, messages.source, texts, tools_payload, core, cache, messages.spans
            )
        items = items_json(messages)
        if items is not None:
            return _core.read_native(key, items, texts, tools_payload, core, cache)
        if type(messages) is list:
            view = _core.read_native_objects(key, messages, texts, tools_payload, core, cache, dump)
            if view is not None:
                return view
        parts = adapter.native_parts(messages)  # type: ignore[attr-defined]
        return _core.read_native(key, parts, texts, tools_payload, core, cache)

    return named_by(adapter.items_field, read)


def read_canonical(adapter: Adapter, messages: Sequence[Any], system: Any) -> Canonical:
    """The core's canonical view of a native request, counted with the default config: for
    callers that only look at it (recovery, simulation), never to plan."""
    return _canonical_of(read_view(adapter, messages, system, None, default_core(), None))


def _pairing_error(issues: Sequence[PairingIssue]) -> PairingError:
    return PairingError(
        f"tool call pairing is broken ({len(issues)} issue{'s' if len(issues) != 1 else ''})"
        + "".join(f"\n  messages[{i.index}]: {i.message}" for i in issues),
        issues=list(issues),
    )


def _blocking(issues: Sequence[PairingIssue], repair: bool) -> bool:
    return bool(issues) and not (repair and all(i.kind == "missing_result" for i in issues))


class NativeRequest:
    """A native request made ready to plan: checked by the provider's own pairing rules,
    mapped to the canonical view and counted once, whatever number of plans follow.

    A provider the core reads (every one but OpenAI Chat, whose messages are the canonical
    view) is parsed, checked and mapped there, each part at its real cost.

    Raises:
        PairingError: Pairing is broken (quoting the provider's wording) and the policy
            does not repair it.
        InvalidMessageError: A message is malformed.
    """

    def __init__(
        self,
        adapter: Adapter,
        messages: Sequence[Any],
        tools: Sequence[Any] | None,
        system: Any,
        pinned: Sequence[int],
        repair: bool,
        *,
        core: Any,
        cache: Any,
    ) -> None:
        self.adapter = adapter
        self.messages = messages
        self.system = system
        self._core, self._cache = core, cache
        self.tools_payload = tools_json(adapter, tools) if tools else None
        self.view: Any = None
        self._payload: list[bytes] | None = None
        if hasattr(adapter, "system_texts"):
            self.view = self._read(messages, system, self.tools_payload)
            issues = [PairingIssue(*t) for t in self.view.issues]
            if _blocking(issues, repair):
                raise _pairing_error(issues)
            self.canonical = _canonical_of(self.view)
            self._groups = self.view.groups
        else:
            issues = adapter.validate(messages, system=system)
            if _blocking(issues, repair):
                raise _pairing_error(issues)
            self.canonical = adapter.to_canonical(  # type: ignore[attr-defined]
                messages, system=system
            )
            self._payload = dump_messages(self.canonical.messages)
            self._groups = self.canonical.groups()
        self._pins = _canonical_pins(pinned, self.canonical)
        self._binds = self.canonical.binds_next or [False] * len(self.canonical.messages)

    def _read(self, messages: Sequence[Any], system: Any, tools_payload: bytes | None) -> Any:
        return read_view(self.adapter, messages, system, tools_payload, self._core, self._cache)

    @property
    def payload(self) -> list[bytes]:
        """The serialized messages (the canonical ones for OpenAI Chat), made when asked."""
        if self._payload is None:
            items = items_json(self.messages)
            self._payload = (
                [items] if items is not None else self.adapter.native_parts(self.messages)  # type: ignore[attr-defined]
            )
        return self._payload

    def serialized(self) -> list[bytes]:
        return self.payload

    def render(self, items: Sequence[Any]) -> Rendered:
        """The plan's items as OpenAI Chat messages (the one adapter that renders: the others'
        requests are written by the core, ``written``). Whatever the caller's objects raise
        is a malformed message, not a crash."""
        adapter, canonical, system = self.adapter, self.canonical, self.system
        return guarded(lambda m: adapter.render(m, items, canonical, system=system), self.messages)

    def count(self, rendered: Rendered, tools_payload: bytes | None, counting: Counting) -> int:
        """Tokens of a rendering of this request, counted as the provider receives it."""
        if self.view is None:
            canonical = self.adapter.to_canonical(  # type: ignore[attr-defined]
                rendered.messages, system=rendered.system
            )
            return counting.count(canonical, tools_payload)
        view = self._read(rendered.messages, rendered.system, tools_payload)
        issues = [PairingIssue(*t) for t in view.issues]
        if _blocking(issues, False):
            raise _pairing_error(issues)
        return view.count()  # type: ignore[no-any-return]

    def written(
        self, items: Sequence[Any], tools_dropped: bool
    ) -> tuple[Rendered, int | None] | None:
        """The plan's items as the native request, written by the core (``NativeView.written``)
        and applied to the caller's list (``list_ops``), and what it costs as sent: the plan's
        own count, or the request counted again where neighbours are merged (None then means
        the plan's). Synthesized results are written where the provider puts them, and
        counted as sent. None for OpenAI Chat (rendered by its adapter) and for a plan the
        core does not write.

        Raises:
            PairingError: The request as sent would not pair.
            InvalidMessageError: The system cannot hold the notes (not JSON), or an item is
                malformed.
        """
        if self.view is None or type(items) is not list:
            return None
        adapter, system = self.adapter, self.system
        markers = getattr(adapter, "system_markers", None)
        plain: list[Any] = []

        def system_json() -> str:
            written, values = _system_json(system)
            plain.append(values)
            return written

        got = self.view.written(
            adapter.key,
            items,
            system_json,
            markers(system) if markers is not None else 0,
            tools_dropped,
            _dumper(adapter, self.messages),
            self._core,
            self._cache,
            self.messages if type(self.messages) is list else None,
        )
        if got is None:
            return None
        ops, fresh, system_out, merged, stripped, tokens = got
        if type(self.messages) is not list:
            fresh = None  # the ops name the items by index
        rendered = Rendered(
            messages=guarded(lambda m: apply_ops(m, ops, fresh), self.messages),
            system=(
                system
                if system_out is None
                else system_like(orjson.loads(system_out), system, plain[0])
            ),
            merged=merged,
            rewrites=[(i, "blank_text", 0) for i in stripped],
        )
        return rendered, tokens

    def plan(
        self,
        core: Any,
        cache: Any,
        budget: int,
        *,
        reserve: int | None = None,
        recorded: list[tuple[Any, ...]] | None = None,
        replay: tuple[list[int], list[tuple[int, str]]] | None = None,
    ) -> _core.Plan:
        """The core's plan of the canonical view, in canonical indices. Errors name the
        caller's budget and native indices."""
        try:
            if self.view is not None:
                return _core.plan(
                    self.view,
                    core,
                    self._pins,
                    summary_reserve=reserve,
                    recorded=recorded,
                    replay=replay,
                )
            return _core.plan(
                self.payload,
                core,
                self._pins,
                tools_json=self.tools_payload,
                cache=cache,
                groups=self._groups,
                binds_next=self._binds,
                summary_reserve=reserve,
                recorded=recorded,
                replay=replay,
            )
        except BudgetExceededError as e:
            e.budget = budget
            raise
        except InvalidMessageError as e:
            spans = self.canonical.spans
            if e.index is not None and 0 <= e.index < len(spans):
                e.index = spans[e.index][0] if spans[e.index][0] >= 0 else None
            raise

    def native_spans(self, spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        if self.view is not None:
            return self.view.native_spans(spans)  # type: ignore[no-any-return]
        return native_spans(spans, self.canonical)


def _system_json(system: Any) -> tuple[str, Any]:
    """The caller's system as JSON for the core to place the notes in (``null`` for none),
    and that JSON as Python values: the system itself where it is plain JSON, else as its SDK
    objects dump.

    Raises:
        InvalidMessageError: The system cannot be written as JSON (an SDK object whose dump
            fails, an int JSON cannot hold): the notes have nowhere to go.
    """
    if system is None:
        return "null", None
    try:
        return orjson.dumps(system).decode(), system
    except TypeError:  # orjson.JSONEncodeError is one
        pass
    try:
        dumped = orjson.dumps(system, default=native_default)
    except Exception as e:  # whatever the caller's objects raise
        why = f"{type(e).__name__}: {e}" if isinstance(e, TypeError) else type(e).__name__
        raise InvalidMessageError(
            f"system: cannot be written as JSON to hold the notes ({why})",
            reason=f"cannot be written as JSON to hold the notes ({why})",
        ) from None
    return dumped.decode(), orjson.loads(dumped)


def _unwritten(provider: str) -> InternalError:
    """A plan the core made but does not write: sending anything else would send a request
    nobody counted, so nothing is sent."""
    reason = f"the core planned a {provider} request it does not write"
    return InternalError(
        f"{reason}; nothing was sent (a bug in ringbound: please report it)", reason=reason
    )


def plan_native(
    native: NativeRequest,
    core_for: Callable[[int], Any],
    budget: int,
    counting: Counting,
    *,
    start_budget: int | None = None,
    reserve: int | None = None,
    recorded: list[tuple[Any, ...]] | None = None,
    fill: Fill | None = None,
    first: _core.Plan | None = None,
) -> NativePlan:
    """Plans a native request and writes it within ``budget``.

    The core counts the canonical view, but the request as sent can cost a little more than
    its canonical insertions (a synthesized result added to an existing turn, merged
    neighbours, a summary longer than its reserve). The core writes every provider's request
    it reads and counts what it writes as sent; OpenAI Chat's summary assembly, whose
    messages are the canonical view, is rendered here and counted again. If the request is
    over budget, the plan is made again with the budget tightened by the difference.

    Args:
        start_budget: The budget of the first plan (a low-water mark below ``budget``).
        reserve, recorded: Passed to the core (room for a summary note, recorded ledger).
        fill: Rewrites the items before rendering.
        first: The first plan, when the caller has made it already.
    """
    plan_budget = budget if start_budget is None else start_budget
    actual = None
    for _ in range(_MAX_TIGHTENINGS + 1):
        if first is not None:
            plan, first = first, None
        else:
            try:
                plan = native.plan(
                    core_for(plan_budget),
                    counting.cache,
                    budget,
                    reserve=reserve,
                    recorded=recorded,
                )
            except BudgetExceededError:
                if actual is None:
                    raise
                # A tightened plan no longer fits: the last rendering, over budget, is the
                # smallest this request gets; report what it needs.
                break
        items, report = plan.items, plan.report
        if fill is not None:
            items = fill(items)
        written = native.written(items, report.tools_dropped)
        if written is not None:
            # The core wrote the request and counted what it wrote.
            rendered, sent = written
            actual = report.tokens_after if sent is None else sent
        elif native.view is not None:
            raise _unwritten(native.adapter.key)
        else:
            # OpenAI Chat's summary assembly: its messages are the canonical view.
            rendered = native.render(items)
            if reserve is None and _as_planned(items):
                actual = report.tokens_after
                break
            kept_tools = None if report.tools_dropped else native.tools_payload
            actual = native.count(rendered, kept_tools, counting)
        if actual <= budget:
            break
        # Under what this plan took, by what its rendering overshot: the next plan must
        # drop or cut something more, whatever budget it was given.
        plan_budget = min(plan_budget, report.tokens_after) - (actual - budget)
        if plan_budget < 1:
            break
    if actual > budget:
        raise BudgetExceededError(
            f"the rendered request needs {actual} tokens but the budget is {budget}",
            tokens=actual,
            budget=budget,
            bucket_tokens=report.bucket_tokens,
        )
    # What the rendering cost beyond the plan (a note smaller than its reserved room, merged
    # neighbours, a note moved into the system) is the insertions' doing: `rendered` books it.
    spans = native.canonical.spans
    report = report.rendered(
        budget,
        actual,
        native.native_spans(report.dropped_rings),
        native.native_spans(report.dropped_turns),
        [(spans[k][0], kind, saved) for k, kind, saved in report.rewrites] + rendered.rewrites,
    )
    return NativePlan(rendered=rendered, report=report, canonical=native.canonical)
