"""The Assembler façade: serializes the caller's messages once, lets the Rust core plan the
request with the GIL released, and builds the result from the caller's own message objects
plus the few insertions the plan asks for. It composes the stages around the core (the body
path, a session's load and save, the count gate, routing), which never import it: they are
handed it as an ``Assembles`` and pass one ``AssemblyInputs`` on (``ringbound.assembly``)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import orjson

from . import _core, cache_lifetime, cache_markers, flow, low_water, notes, routing
from . import body as bodies
from .adapted import Counting, NativePlan, NativeRequest, plan_native
from .assembly import AssemblyInputs, AssemblyResult
from .caller_values import shown
from .config import AssemblyConfig
from .core_config import core_config
from .counters.gate import count_gate
from .counting import count_tokens
from .detect import detect_provider
from .errors import BudgetExceededError, ConfigError, InvalidMessageError, StaleStateError
from .ledgers.side_effects import SideEffectLedger
from .ledgers.tokens import TokenLedger
from .observability import tracing
from .observability.metrics import MetricsSink, check_sink
from .payload import (
    check_tools,
    dump_messages,
    dump_tools,
    nesting_guard,
    snapshot,
)
from .plan_report import report_of
from .providers import adapter, check_provider, check_system
from .providers.base import tools_json
from .providers.chat_adapter import ADAPTER as CHAT_ADAPTER
from .report import LedgerEntry
from .state import AssemblyState, fingerprint
from .stores import session as sessions
from .stores.base import SessionStore, check_store
from .stores.memory import MemoryStore
from .summary import runner, summarizers
from .summary import stage as compaction
from .summary.redact import Redactor
from .summary.request import SummaryOutcome
from .translation import translate, translate_body

__all__ = ["Assembler", "AssemblyResult"]


def _cache(cache: Any) -> Any:
    if cache is True:
        return None  # the process-wide cache
    if cache is False:
        return _core.CountCache(0, 0)
    if isinstance(cache, _core.CountCache):
        return cache
    raise ConfigError(
        f"cache must be True, False or a ringbound.CountCache, got {type(cache).__name__}",
        key="cache",
        reason="must be True, False or a CountCache",
    )


class Assembler:
    """Assembles requests that fit a budget, pairing intact, protected content kept.

    An Assembler holds no per-request state: reuse one across calls and share it between
    threads.

    Args:
        config: The policy; defaults to ``AssemblyConfig()``.
        provider: Wire format of the messages: ``openai_chat`` (default), ``openai_responses``,
            ``anthropic``, ``gemini`` or ``bedrock_converse``; None to detect the format of
            each request (``detect_provider``).
        summarizer: ``callable(SummaryRequest) -> str`` (sync or async) that writes the
            summary of dropped units (``ringbound.summary.summarizers`` has an OpenAI-compatible one
            and a deterministic extractive one); None to drop without summarizing.
        sink: Where the metrics of each assembly go (see ``MetricsSink``); the default sink
            (``set_default_sink``, NullSink unless set) when None.
        tracer: An OpenTelemetry ``Tracer`` for a span ``ringbound.assemble`` per assembly;
            the one ``enable_tracing`` set (none by default) when None.
        cache: Where parsed messages and their counts are cached: True for the process-wide
            cache, False for none, or a ``CountCache`` of this assembler's own.
        store: Where ``assemble(..., session_id=...)`` keeps each session's checkpoint and
            ledgers (a ``SessionStore``: ``RedisStore`` for several replicas); a
            ``MemoryStore`` of this assembler's own when None.
        counter: A provider counter (``ringbound.counters.openai(client)`` and the others):
            with ``token_counter: provider`` every assembled request is checked with it, with
            ``provider_or_tiktoken_model_encoding`` those close to the budget are (see
            docs/calibration.md).
        calibrator: Where provider counts teach the ratio and margin (``token_ratio:
            auto``, ``safety_margin_tokens: auto``); a ``TokenLedger`` given to ``assemble``
            brings its own. A new one when None.

    Example:
        >>> import ringbound as rb
        >>> asm = rb.Assembler(rb.AssemblyConfig(model_input_limit=10_000))
        >>> res = asm.assemble([{"role": "user", "content": "hi"}])
        >>> res.report.tokens_after <= res.report.budget
        True
    """

    def __init__(
        self,
        config: AssemblyConfig | None = None,
        provider: str | None = "openai_chat",
        summarizer: Any = None,
        sink: MetricsSink | None = None,
        tracer: Any = None,
        cache: Any = True,
        store: SessionStore | None = None,
        counter: Any = None,
        calibrator: Any = None,
        *,
        _model_overrides: dict[str, Any] | None = None,
    ) -> None:
        self.config = config if config is not None else AssemblyConfig()
        if not isinstance(self.config, AssemblyConfig):
            raise ConfigError(
                f"config must be an AssemblyConfig, got {type(self.config).__name__}",
                key="config",
            )
        #: Whether each request's format is detected (``provider=None``).
        self._detect = provider is None
        self.provider = check_provider("openai_chat" if provider is None else provider)
        if summarizer is not None and not callable(summarizer):
            raise ConfigError(
                f"summarizer must be callable, got {type(summarizer).__name__}",
                key="summarizer",
                reason="must be callable",
            )
        self._summarizer = summarizer if "summarize" in self.config.stages else None
        self._fallback = (
            summarizers.extractive() if self.config.summary_fallback == "extractive" else None
        )
        self._redactor = Redactor(self.config.redact_patterns)
        self._adapter = None if self.provider == "openai_chat" else adapter(self.provider)
        ratio = self.config.token_ratio
        self._image_formula = "openai" if self._adapter is None else self._adapter.image_formula
        if ratio is None or ratio == "auto":
            ratio = 1.0 if self._adapter is None else self._adapter.default_token_ratio
        self._ratio = ratio
        self._core = core_config(self.config, self._image_formula, ratio)
        self._cache = _cache(cache)
        self._sink = None if sink is None else check_sink(sink)
        self._tracer = None if tracer is None else tracing.check_tracer(tracer)
        self._count, self._cut = compaction.counter(self.config.encoding)
        #: Calls with nothing but messages, tools and system take ``_assemble_plain``.
        self._plain = (
            self._adapter is None and self._summarizer is None and not self.config.cache_stable
        )
        self._emergency_budget = math.floor(self.config.emergency_ratio * self.config.budget)
        self._notes = notes.check_placement(self.config.note_placement, self.provider)
        #: Notes placed apart from where the core puts them (``routing`` moves them).
        self._placed = self._notes != "inline_system" and self.provider in notes.IN_MESSAGES
        self.store = MemoryStore() if store is None else check_store(store)
        #: Whether assemblies with a ``token_ledger`` are recorded in it (the count gate's
        #: inner assemblers leave that to the gate).
        self._accounts = True
        self._gate = count_gate(self, counter, calibrator, cache)
        #: Whether a plain call (``_plain_call``) can go straight to ``_assemble_plain``:
        #: nothing between ``assemble`` and the core (detection, the count gate, notes
        #: moved by ``routing``) has anything to do.
        self._lane = self._plain and not self._detect and self._gate is None and not self._placed
        kwargs = dict(summarizer=summarizer, sink=sink, tracer=tracer, cache=cache)
        kwargs.update(store=self.store, counter=counter, calibrator=calibrator)
        self._variants = bodies.Variants(self, kwargs, _model_overrides)

    @classmethod
    def for_models(
        cls,
        provider: str | None = None,
        config: AssemblyConfig | None = None,
        **kwargs: Any,
    ) -> Assembler:
        """An Assembler that sizes each body by its ``model``: ``assemble_body`` takes the
        models-table entry the body names (``AssemblyConfig.for_model``, with the body's
        ``max_tokens`` as the output reserve when it has one), and ``config`` for a model the
        table does not know.

        Args:
            provider: The bodies' format; None (the default) detects it per body.
            config: The policy for unknown models, and the source of every key
                ``for_model`` does not set (the window, reserve, encoding and ratio come from
                the table).
            **kwargs: Any other ``Assembler`` argument (``summarizer``, ``store``, ...).

        Example:
            >>> import orjson, ringbound as rb
            >>> asm = rb.Assembler.for_models(provider="openai_chat")
            >>> body = orjson.dumps({"model": "gpt-4o-mini", "max_tokens": 1000,
            ...                      "messages": [{"role": "user", "content": "hi"}]})
            >>> res = asm.assemble_body(body)
            >>> res.model, res.report.budget
            ('gpt-4o-mini', 125976)
        """
        base = config if config is not None else AssemblyConfig()
        keep = base.to_dict()
        for key in ("model_input_limit", "output_reserve_tokens", "encoding", "token_ratio"):
            keep.pop(key, None)
        return cls(base, provider, _model_overrides=keep, **kwargs)

    def assemble_body(
        self,
        body: bytes,
        *,
        state: AssemblyState | None = None,
        session_id: str | None = None,
        now: float | None = None,
        target: str | None = None,
    ) -> bodies.BodyResult:
        """Assembles a provider's whole request body: the history (with the system and
        tools) fitted to the budget, every other field kept as it was.

        OpenAI Chat bodies are read and written by the core with the GIL released (kept
        messages are the input's own bytes), and so are the other formats' when the plan
        only drops whole items; a plan the body path does not write takes the items path
        (the history read from the body's bytes and written by the core as on the objects
        path, the rest in Python), and a call that needs
        Python (a summarizer, ``state``, ``session_id``, provider counts) the dict path:
        ``orjson`` parse, ``assemble``, serialize. ``result.path`` says which ran. The
        body's ``max_tokens`` (``max_completion_tokens``, ``max_output_tokens``,
        ``generationConfig.maxOutputTokens``, ``inferenceConfig.maxTokens``) is the output
        reserve when present. See docs/gateway.md.

        Args:
            body: The JSON request body (bytes, bytearray or memoryview).
            state: As for ``assemble``.
            session_id: As for ``assemble``.
            now: As for ``assemble``.
            target: Another provider to send the body to: it is translated
                (``rb.translate_body``, its report in ``result.translation``), then assembled
                as ``target``'s body by an assembler of this one's policy for it.

        Returns:
            The body to send, its report and the next state.

        Raises:
            InvalidBodyError: The body is not a JSON object of its provider's shape (not
                UTF-8, truncated, over ``max_request_bytes``, a history that is not a list,
                a ``max_tokens`` that is not a count, a field under both its spellings).
            InvalidMessageError: A message of the history is malformed (its index named),
                or the format cannot be detected.
            PairingError, BudgetExceededError, SummaryError, StaleStateError, StoreError:
                As for ``assemble``.
            ConfigError: As for ``assemble``; also when the body's output reserve leaves no
                budget.
        """
        if target is not None:
            return self._translated_body(body, target, state=state, session_id=session_id, now=now)
        with cache_lifetime.clock(now):
            return flow.run(self._body_flow(body, state, session_id))

    def _translated_body(self, body: bytes, target: str, **rest: Any) -> bodies.BodyResult:
        """``assemble_body(..., target=...)``: the body translated to ``target``, then
        assembled by the assembler of this one's policy for it."""
        target = check_provider(target)
        source = detect_provider(body) if self._detect else self.provider
        if source == target:
            return self.assemble_body(body, **rest)
        out, report = translate_body(bytes(body), source=source, target=target)
        res = self._variants.get(target, None, None).assemble_body(cast(bytes, out), **rest)
        return dataclasses.replace(res, translation=report)

    async def assemble_body_async(
        self,
        body: bytes,
        *,
        state: AssemblyState | None = None,
        session_id: str | None = None,
        now: float | None = None,
    ) -> bodies.BodyResult:
        """``assemble_body`` for async callers: the native path runs inline (the core holds
        no GIL and takes about as long as parsing the body), the dict path awaits
        ``assemble_async``. Same arguments, result and errors as ``assemble_body``."""
        with cache_lifetime.clock(now):
            return await flow.arun(self._body_flow(body, state, session_id))

    def _body_flow(
        self, body: bytes, state: AssemblyState | None, session_id: str | None
    ) -> flow.Flow[bodies.BodyResult]:
        """One ``assemble_body`` call as a flow: the native path at once, or the dict path's
        assembly nested."""
        got = bodies.assemble(self, body, state, session_id)
        if isinstance(got, bodies.BodyResult):
            return got
        target, parsed, shape, provider, entry, why = got
        history, tools, system = bodies.split(parsed, shape)
        cache_markers.check_body(provider, parsed)
        inputs = AssemblyInputs(history, tools, system, state=state, session_id=session_id)
        try:
            with cache_markers.body_fields(parsed):
                result = yield from target._entry(inputs)
        except InvalidMessageError:
            parsed = bodies.whole(parsed, shape, body)
            if parsed is None:
                raise
            history, tools, system = bodies.split(parsed, shape)
            inputs = dataclasses.replace(inputs, messages=history, tools=tools, system=system)
            with cache_markers.body_fields(parsed):
                result = yield from target._entry(inputs)
        if result.cache_options is not None:
            parsed = {**parsed, "prompt_cache_options": result.cache_options}
        return bodies.joined(parsed, shape, result, tools, provider, entry, why)

    def assemble(
        self,
        messages: list[Any],
        tools: list[Any] | None = None,
        *,
        system: Any = None,
        pinned: Iterable[int] | None = (),
        ledger: SideEffectLedger | None = None,
        tighten: int = 0,
        state: AssemblyState | None = None,
        token_ledger: TokenLedger | None = None,
        session_id: str | None = None,
        now: float | None = None,
        target: str | None = None,
    ) -> AssemblyResult:
        """Assembles the next request from ``messages``.

        Args:
            messages: The session in the provider's format (dicts or SDK objects). Never
                modified.
            tools: The ``tools`` parameter, counted inside the budget.
            system: The top-level system (providers that have one).
            pinned: Indices of messages to keep whatever the budget (their whole ring is
                kept with them).
            ledger: The run's side-effect ledger: its entries are rendered into the ledger
                note, and the side-effecting calls this assembly drops are added to it.
            tighten: Notches to tighten by: each one plans again under the tokens the last
                plan took, so at least one more unit is dropped or rewritten (after the
                provider refused a request as too long, see ``with_context_retry``).
            state: The previous turn's ``res.state`` (cache-stable assembly): its cut is made
                again while the request stays under ``compact_trigger_ratio`` of the budget,
                so the request's prefix is byte-identical to the previous one's. Implies
                ``cache_stable``.
            token_ledger: The run's ``TokenLedger``: a compaction then leaves free at least
                the worst return it has seen of the tools in ``tools`` (``tail_reserve``), so
                the next tool result fits without another stage.
            session_id: The conversation this request belongs to: its checkpoint, side-effect
                ledger and token ledger are loaded from the assembler's ``store``, used as
                ``state``, ``ledger`` and ``token_ledger``, and saved back by compare-and-set
                (see docs/session-store.md); ``report.store`` says what happened. A ``ledger``
                given as well receives the stored entries; a ``token_ledger`` given replaces
                the stored one.
            now: The time of this request in seconds since the epoch, for tests and
                replays (default: the wall clock): the state records it, and the provider's
                cache lifetime is timed from it (``compact_on_cache_expiry``).
            target: Another provider to send the request to (a failover, a model switch):
                the session is translated (``rb.translate``, its report in
                ``result.translation``), then fitted as the target counts, by an assembler
                of this one's policy for that provider; ``state`` and ``session_id`` are then
                the target's. ``pinned`` indices, which name source messages, are refused.

        Returns:
            The request to send and its report.

        Raises:
            InvalidMessageError: A message is malformed (the error names its index), or
                ``system`` is given to ``openai_chat``, which has no top-level system.
            PairingError: Tool calls and results do not pair and the policy is fail_closed.
            BudgetExceededError: The protected part alone does not fit the budget.
            SummaryError: The summarizer failed and ``on_summary_failure`` is fail_closed.
            ConfigError: The summarizer is async and an event loop is running (use
                ``assemble_async``), or the counter's client is async.
            StaleStateError: ``state`` is from another session or provider (a history
                edited since is not an error: the assembly plans afresh, ``report.state``
                says why).
            StoreError: With ``session_id``: the store failed and ``on_store_error`` is
                ``fail_closed``.
        """
        if (
            self._lane
            and target is None
            and session_id is None
            and now is None
            and self._plain_call(pinned, ledger, tighten, state, token_ledger)
            and not _framework(messages)
        ):
            # The call a gateway makes on every request: the inputs' record, the flow and
            # the clock around it cost a sixth of a warm assembly of a small session.
            check_system(self.provider, system)
            return self._assemble_plain(messages, tools, system)
        if target is not None:
            return self._translated(
                messages,
                tools,
                system,
                pinned,
                target,
                ledger=ledger,
                tighten=tighten,
                state=state,
                token_ledger=token_ledger,
                session_id=session_id,
                now=now,
            )
        inputs = AssemblyInputs(
            messages, tools, system, pinned, ledger, tighten, state, token_ledger, session_id
        )
        with cache_lifetime.clock(now):
            return flow.run(self._entry(inputs))

    def _translated(
        self,
        messages: list[Any],
        tools: list[Any] | None,
        system: Any,
        pinned: Iterable[int] | None,
        target: str,
        **rest: Any,
    ) -> AssemblyResult:
        """``assemble(..., target=...)``: the session translated to ``target``, then
        assembled by the assembler of this one's policy for it."""
        target = check_provider(target)
        source = detect_provider(messages) if self._detect else self.provider
        if source == target:
            return self.assemble(messages, tools, system=system, pinned=pinned, **rest)
        if pinned:
            reason = "pinned indices name the source's messages, which translation renumbers"
            raise ConfigError(f"pinned with target: {reason}", key="pinned", reason=reason)
        out = translate(messages, source=source, target=target, system=system, tools=tools)
        res = self._variants.get(target, None, None).assemble(
            out.messages, out.tools, system=out.system, **rest
        )
        return dataclasses.replace(res, translation=out.report)

    def _entry(self, inputs: AssemblyInputs) -> flow.Flow[AssemblyResult]:
        """The flow of one ``assemble`` call: by the detected provider's assembler when this
        one detects, within its session when the call names one."""
        if self._detect:
            return self._variants.detected(inputs.messages)._entry(inputs)
        if inputs.session_id is not None:
            return sessions.session_flow(self, self.store, inputs)
        return self._flow(inputs)

    def _flow(self, inputs: AssemblyInputs) -> flow.Flow[AssemblyResult]:
        """One assembly as a flow (see ``ringbound.flow``): through the count gate when the
        config or a counter needs one; a framework's messages, or notes placed apart from
        where the core puts them, through ``routing``; the provider's own messages straight
        to the core."""
        if self._gate is not None:
            return (yield from self._gate.flow(inputs))
        if self._placed or _framework(inputs.messages):
            return (
                yield from routing.assemble(
                    self._native, inputs, self.config.note_placement, self.provider
                )
            )
        return (yield from self._native(inputs))

    def _native(self, inputs: AssemblyInputs) -> flow.Flow[AssemblyResult]:
        """An assembly of messages in the provider's own format, notes where the core puts
        them: the plain path when the call allows it, else the general one, which yields the
        summarizer's run when it compacts."""
        check_system(self.provider, inputs.system)
        if self._takes_plain(inputs):
            return self._assemble_plain(inputs.messages, inputs.tools, inputs.system)
        with self._observed(inputs.ledger, inputs.token_ledger) as done:
            with nesting_guard():
                job = self._begin(inputs)
            if isinstance(job.draft, compaction.Draft):
                job.outcome = yield _Summarize(self, job.draft)
            return done(*self._finish(job))

    def _takes_plain(self, inputs: AssemblyInputs) -> bool:
        """Whether a call is one ``_assemble_plain`` makes exactly as the general path would."""
        return not inputs.stateful and self._plain_call(
            inputs.pinned, inputs.ledger, inputs.tighten, inputs.state, inputs.token_ledger
        )

    def _plain_call(
        self, pinned: Any, ledger: Any, tighten: Any, state: Any, token_ledger: Any
    ) -> bool:
        """Whether ``assemble``'s arguments leave nothing for the general path to do."""
        return (
            self._plain
            # Not ``pinned == ()``: the caller's object's own __eq__ may raise.
            and (pinned is None or (type(pinned) is tuple and not pinned))
            and ledger is None
            and type(tighten) is int
            and tighten == 0
            and state is None
            and token_ledger is None
        )

    def _assemble_plain(
        self, messages: list[Any], tools: list[Any] | None, system: Any
    ) -> AssemblyResult:
        """``assemble`` for the call a gateway makes on every request: OpenAI Chat, no
        summarizer, cache-stable state, pins, ledger, notches or token ledger. The same plan
        and report as ``_begin`` and ``_finish`` make of it, without their machinery for the
        other cases: on a warm turn that machinery cost a third as much as the core."""
        start = time.perf_counter()
        span = tracing.start_span(self._tracer, self.provider)
        try:
            listed = snapshot(messages)
            plan = _core.plan(
                None,
                self._core_for(self._emergency_budget),
                [],
                tools_json=dump_tools(tools),
                cache=self._cache,
                messages=listed,
            )
            out = plan.items
            report = report_of(
                plan.report,
                self._redactor,
                messages_before=len(listed),
                messages_after=len(out),
                start=start,
            )
            result = AssemblyResult(
                messages=out,
                tools=None if report.tools_dropped else tools,
                report=report,
                system=system,
            )
            tracing.assembled(
                report, lambda: dump_messages(listed), self.provider, self._sink, span
            )
        except BaseException as e:
            tracing.rejected(e, self.provider, self._sink, span)
            raise
        return result

    async def assemble_async(
        self,
        messages: list[Any],
        tools: list[Any] | None = None,
        *,
        system: Any = None,
        pinned: Iterable[int] | None = (),
        ledger: SideEffectLedger | None = None,
        tighten: int = 0,
        state: AssemblyState | None = None,
        token_ledger: TokenLedger | None = None,
        session_id: str | None = None,
        now: float | None = None,
    ) -> AssemblyResult:
        """``assemble`` for async callers: an async summarizer is awaited, a sync one runs in
        a worker thread, so the event loop is never blocked by a summary; the store's async
        methods are awaited. Same arguments, result and errors as ``assemble``."""
        inputs = AssemblyInputs(
            messages, tools, system, pinned, ledger, tighten, state, token_ledger, session_id
        )
        with cache_lifetime.clock(now):
            return await flow.arun(self._entry(inputs))

    def _observed(
        self, ledger: SideEffectLedger | None, token_ledger: TokenLedger | None = None
    ) -> _Observed:
        return _Observed(self, ledger, token_ledger if self._accounts else None)

    def _run_args(self, d: compaction.Draft) -> dict[str, Any]:
        cfg = self.config
        return {
            "count": self._count,
            "cut": self._cut,
            "target": d.request.target_tokens,
            "input_limit": cfg.summarizer_input_limit,
            "timeout_s": cfg.summary_timeout_ms / 1000,
            "policy": cfg.on_summary_failure,
            "fallback": self._fallback,
            "unit_texts": d.unit_texts,
        }

    def _core_for(self, budget: int) -> _core.CoreConfig:
        """The core config, with another budget when a rendering has to be tightened."""
        if budget == self.config.budget:
            return self._core
        return core_config(self._config_at(budget), self._image_formula, self._ratio)

    def _config_at(self, budget: int) -> AssemblyConfig:
        """The config with ``budget`` as its whole budget (no reserve, no margin)."""
        return dataclasses.replace(
            self.config, model_input_limit=budget, output_reserve_tokens=0, safety_margin_tokens=0
        )

    def _read(self, adapter: Any, *args: Any) -> NativeRequest:
        """The request made ready to plan, read with this assembler's counting."""
        return NativeRequest(adapter, *args, core=self._core, cache=self._cache)

    def _counting(self) -> Counting:
        return Counting(
            self.config.encoding,
            self.config.tokenizer_backend,
            self._image_formula,
            self._ratio,
            self._cache,
        )

    def _begin(self, inputs: AssemblyInputs) -> _Job:
        """Plans the request; when a summary is due, leaves room for it and says what to ask."""
        start = time.perf_counter()
        tools, system, ledger, tighten = inputs.tools, inputs.system, inputs.ledger, inputs.tighten
        state, token_ledger = inputs.state, inputs.token_ledger
        if ledger is not None and not isinstance(ledger, SideEffectLedger):
            raise ConfigError(
                f"ledger must be a ringbound.SideEffectLedger, got {type(ledger).__name__}",
                key="ledger",
                reason="must be a SideEffectLedger",
            )
        recorded = None if ledger is None or not len(ledger) else ledger.core_entries()
        messages = snapshot(inputs.messages)
        check_tools(tools)
        pins = _pins(inputs.pinned, len(messages))
        repair = self.config.on_pairing_error == "synthesize_error_results"
        if isinstance(tighten, bool) or not isinstance(tighten, int) or tighten < 0:
            raise ConfigError(
                f"tighten must be an integer >= 0, got {shown(tighten)}",
                key="tighten",
                reason="must be an integer >= 0",
            )
        job = _Job(start=start, messages=messages, system=system, tools=tools, tighten=tighten)
        job.now = cache_lifetime.current()
        if state is not None and not isinstance(state, AssemblyState):
            raise ConfigError(
                f"state must be a ringbound.AssemblyState, got {type(state).__name__}",
                key="state",
                reason="must be an AssemblyState",
            )
        if state is not None or inputs.stateful or self.config.cache_stable:
            native = self._read(
                self._adapter or CHAT_ADAPTER, messages, tools, system, pins, repair
            )
            job.tail = self._tail_reserve(token_ledger, tools)
            return self._begin_stateful(job, native, state, recorded, ledger)
        job.tail = self._tail_reserve(token_ledger, tools)
        job.budget = budget = self._emergency_budget
        if self._adapter is None:
            # The core reads the messages themselves and serializes only what its cache has
            # not seen (the payload is made only if a DEBUG log asks for its hash).
            listed = messages if type(messages) is list else list(messages)
            tools_payload = dump_tools(tools)

            def plan_chat(budget: int) -> _core.Plan:
                return _core.plan(
                    None,
                    self._core_for(budget),
                    pins,
                    tools_json=tools_payload,
                    cache=self._cache,
                    messages=listed,
                    recorded=recorded,
                )

            chat_plan = plan_chat(budget)
            if job.tail and chat_plan.report.stages and budget - job.tail > 0:
                # Compacting anyway: down to where the worst tool return still fits.
                with contextlib.suppress(BudgetExceededError):
                    chat_plan = plan_chat(budget - job.tail).with_budget(budget)
            for _ in range(tighten):
                job.budget = budget = chat_plan.report.tokens_after - 1
                chat_plan = plan_chat(budget)
            job.done = (chat_plan.items, chat_plan.report, system, 0)
            goal = compaction.trigger_goal(self.config, budget)
            if self._summarizer is None or not compaction.due(chat_plan.report, goal):
                return job
            native = self._read(CHAT_ADAPTER, messages, tools, system, pins, repair)
            first = None
        else:
            native = self._read(self._adapter, messages, tools, system, pins, repair)
            job.payload = native.serialized
            first = native.plan(self._core_for(budget), self._cache, budget, recorded=recorded)
            if job.tail and first.report.stages and budget - job.tail > 0:
                with contextlib.suppress(BudgetExceededError):
                    first = native.plan(
                        self._core_for(budget - job.tail), self._cache, budget, recorded=recorded
                    ).with_budget(budget)
            for _ in range(tighten):
                job.budget = budget = first.report.tokens_after - 1
                first = native.plan(self._core_for(budget), self._cache, budget, recorded=recorded)
        job.native, job.recorded = native, recorded
        if self._summarizer is not None:
            job.draft = compaction.draft(
                native,
                job.done[1] if job.done is not None else first.report,
                budget=budget,
                cfg=self.config,
                core_for=self._core_for,
                cache=self._cache,
                recorded=recorded,
                ledger=list(ledger or ()),
                count=self._count,
                token_ratio=self._ratio,
                redactor=self._redactor,
            )
        if job.draft is None or isinstance(job.draft, compaction.Skipped):
            if job.done is None:
                job.native_plan = plan_native(
                    native,
                    self._core_for,
                    budget,
                    self._counting(),
                    recorded=recorded,
                    first=first,
                )
        return job

    def _begin_stateful(
        self,
        job: _Job,
        native: NativeRequest,
        state: AssemblyState | None,
        recorded: list[tuple[Any, ...]] | None,
        ledger: SideEffectLedger | None,
    ) -> _Job:
        """Cache-stable assembly: the previous cut again while it fits under the trigger,
        else a compaction down to the low-water mark (see ``ringbound.state``)."""
        cfg = self.config
        job.native, job.recorded, job.payload = native, recorded, native.serialized
        job.budget = budget = cfg.budget
        canon = native.canonical.messages

        def render(core_for: Callable[[int], _core.CoreConfig], **kw: Any) -> NativePlan:
            """The plan rendered and recounted at the current budget (see ``plan_native``)."""
            return plan_native(native, core_for, budget, self._counting(), recorded=recorded, **kw)

        job.session = fingerprint(canon[:1])
        if state is not None and (state.provider != self.provider or state.session != job.session):
            what = "provider" if state.provider != self.provider else "session"
            raise StaleStateError(
                f"the assembly state is from another {what}; start this one without a state",
                reason=f"another {what}",
            )
        trigger = math.floor(cfg.compact_trigger_ratio * budget)
        job.state_in = state
        job.state_status = "new"
        if state is not None:
            stale = _stale_reason(state, canon, budget)
            job.state_status = "compacted" if stale is None else f"stale: {stale}"
            if stale is None and job.tighten == 0:
                reserve = (
                    None
                    if state.summary is None
                    else compaction.note_reserve(state.summary, self._count, self._ratio)
                )
                try:
                    first = native.plan(
                        self._core,
                        self._cache,
                        budget,
                        reserve=reserve,
                        recorded=recorded,
                        replay=(list(state.dropped), list(state.rewrites)),
                    )
                except StaleStateError as e:
                    job.state_status = f"stale: {e.reason}"
                else:
                    # With its summary reserved (an upper bound of the note) the replay
                    # fits under the trigger; else the request as rendered decides.
                    fits = first.report.tokens_after <= trigger
                    replayed = None
                    try:
                        replayed = render(
                            self._core_for,
                            reserve=reserve,
                            fill=compaction.filler(state.summary),
                            first=first,
                        )
                    except BudgetExceededError:
                        if fits:
                            raise
                    # A compaction that could not get under the trigger is reused as long as
                    # the request is no larger than it made it. A rendering over the budget
                    # is planned again with the stages: that is a new cut, not the replay.
                    # With the cache expired, a compaction due anyway runs now: the request
                    # writes its whole prefix again in any case (``ringbound.cache_lifetime``).
                    job.expired = (
                        cfg.compact_on_cache_expiry
                        and replayed is not None
                        and replayed.report.tokens_after
                        > math.floor(cfg.compact_target_ratio * budget)
                        and cache_lifetime.expired(state.assembled_at, job.now, self.provider, cfg)
                    )
                    job.reuse = replayed if job.expired else None
                    if (
                        replayed is not None
                        and not job.expired
                        and replayed.report.stages == first.report.stages
                        and (fits or replayed.report.tokens_after <= max(trigger, state.floor))
                    ):
                        job.state_status = "reused"
                        job.note = state.summary
                        job.native_plan = replayed
                        return job
        first = native.plan(self._core, self._cache, budget, recorded=recorded)
        for _ in range(job.tighten):
            job.budget = budget = first.report.tokens_after - 1
            first = native.plan(self._core_for(budget), self._cache, budget, recorded=recorded)
        start = budget
        job.core_for = self._core_for
        if first.report.tokens_after > trigger or first.report.canonical_dropped or job.expired:
            job.compacted = True
            target = max(
                1, min(math.floor(cfg.compact_target_ratio * cfg.budget), budget - job.tail)
            )
            # Down to the low-water mark with the middle's stages, as low as they go when
            # the protected part is above it (see ``ringbound.low_water``).
            first, start, job.core_for = low_water.lowest(
                lambda core: native.plan(core, self._cache, budget, recorded=recorded),
                target,
                budget,
                self._low_for,
                self._core_for,
            )
            reuse = job.reuse
            if (
                reuse is not None
                and state is not None
                and first.report.tokens_after > reuse.report.tokens_after - (trigger - target) // 4
            ):
                # An early compaction that frees too little room (the protected part is
                # most of the request) is not worth a summary: the cut is reused.
                job.compacted = False
                job.state_status = "reused"
                job.note = state.summary
                job.native_plan = reuse
                return job
        if self._summarizer is not None and job.compacted:
            previous = None
            if state is not None and state.summary is not None and state.summary_span:
                previous = (state.summary, state.summary_span)
            job.draft = compaction.draft(
                native,
                first.report,
                budget=budget,
                goal=start,
                previous=previous,
                cfg=cfg,
                core_for=job.core_for,
                low_for=self._low_for,
                cache=self._cache,
                recorded=recorded,
                ledger=list(ledger or ()),
                count=self._count,
                token_ratio=self._ratio,
                redactor=self._redactor,
            )
            kept = None
            if job.draft is None and previous is not None and _within(first.report, None):
                # A cut planned afresh may drop only units the state's summary stands for
                # (the same units again): that note is then sent again as it was.
                reserve = compaction.note_reserve(previous[0], self._count, self._ratio)
                with contextlib.suppress(BudgetExceededError):
                    kept = low_water.lowest(
                        lambda core: native.plan(
                            core, self._cache, budget, reserve=reserve, recorded=recorded
                        ),
                        start,
                        budget,
                        self._low_for,
                        job.core_for,
                    )
            if kept is not None and previous is not None and _within(kept[0].report, previous[1]):
                first, start, job.core_for = kept
                job.note, job.kept_summary = previous
                job.native_plan = render(
                    job.core_for,
                    start_budget=start,
                    reserve=reserve,
                    fill=compaction.filler(previous[0]),
                    first=first,
                )
                return job
        if isinstance(job.draft, compaction.Draft):
            job.core_for = job.draft.core_for
        else:
            job.native_plan = render(job.core_for, start_budget=start, first=first)
        return job

    def _low_for(self, budget: int) -> _core.CoreConfig:
        """The core config of a compaction's low-water plan: the middle's stages only."""
        return core_config(
            low_water.middle_only(self._config_at(budget)), self._image_formula, self._ratio
        )

    def _tail_reserve(self, token_ledger: TokenLedger | None, tools: list[Any] | None) -> int:
        """Room a compaction leaves free for the next tool return (0 without a ledger)."""
        if token_ledger is None:
            return 0
        if not isinstance(token_ledger, TokenLedger):
            raise ConfigError(
                f"token_ledger must be a ringbound.TokenLedger, got {type(token_ledger).__name__}",
                key="token_ledger",
                reason="must be a TokenLedger",
            )
        names = None
        if tools:
            as_openai = (
                tools if self._adapter is None else orjson.loads(tools_json(self._adapter, tools))
            )
            names = [
                t["function"]["name"]
                for t in as_openai
                if isinstance(t, dict) and isinstance(t.get("function"), dict)
            ] or None
        return token_ledger.tail_reserve(names)

    def _state_out(self, job: _Job, planned: _core.PlanReport) -> AssemblyState:
        """The checkpoint of this assembly, for the next turn."""
        assert job.native is not None
        canon = job.native.canonical.messages
        d = job.draft
        if isinstance(d, compaction.Draft) and job.note is not None:
            summary, span = job.note, d.canonical_span
        elif job.state_status == "reused" and job.state_in is not None:
            summary, span = job.state_in.summary, job.state_in.summary_span
        elif job.kept_summary is not None:
            summary, span = job.note, job.kept_summary
        else:
            summary, span = None, None
        previous = job.state_in.compactions if job.state_in is not None else 0
        dropped = tuple(i for s, e in planned.canonical_dropped for i in range(s, e))
        rewrites = tuple(planned.canonical_rewrites)
        # The decisions cover the history up to the last message they touch: later messages
        # may change (a retried turn, an edited question) without making the cut stale.
        extent = max([*dropped, *(k for k, _ in rewrites), *(span or (0, 0))], default=-1) + 1
        return AssemblyState(
            provider=self.provider,
            session=job.session,
            messages=extent,
            prefix=fingerprint(canon[:extent]),
            budget=self.config.budget,
            dropped=dropped,
            rewrites=rewrites,
            summary=summary,
            summary_span=span,
            compactions=previous + int(job.compacted),
            floor=planned.tokens_after
            if job.compacted
            else (job.state_in.floor if job.state_in is not None else 0),
            tokens=planned.tokens_after,
            assembled_at=job.now,
        )

    def _marker_size(
        self, planned: _core.PlanReport, tools: Any, reused: AssemblyState | None, system: Any
    ) -> cache_markers.Sizer:
        """The tokens of the prefix a cache marker would end: the whole request (the last
        message), the previous request (the stable cut), the tools and the caller's system
        (counted only when asked)."""

        def size(why: str, part: tuple[str, Any]) -> int:
            if why == "last":
                return planned.tokens_after
            if why == "stable_cut":
                return reused.tokens if reused is not None else 0
            kind, value = part
            # Messages come after the whole system (Responses' instructions, Anthropic's).
            messages, before = (value, system) if kind == "messages" else ([], value)
            return count_tokens(
                messages, self.provider, self.config.encoding, tools or None, system=before
            )

        return size

    def _finish(self, job: _Job) -> tuple[AssemblyResult, tracing.Payload, list[LedgerEntry]]:
        """The result: the plan rendered, the summary note written into its place; and the
        ledger entries the assembly added, unredacted, for the caller's ledger."""
        summary = stage = None
        d = job.draft
        if isinstance(d, compaction.Draft):
            note = job.note = compaction.note_for(d, job.outcome)
            job.native_plan = plan_native(
                job.native,
                job.core_for or self._core_for,
                job.budget,
                self._counting(),
                start_budget=d.start_budget,
                reserve=d.reserve,
                recorded=job.recorded,
                fill=compaction.filler(note),
                first=d.first,
            )
            job.done = None
            summary, stage = compaction.record(d, job.outcome, note, self._count)
        elif isinstance(d, compaction.Skipped):
            summary, stage = compaction.record(d, None, None, self._count)
        if job.native_plan is not None:
            p: NativePlan = job.native_plan
            out, planned = p.rendered.messages, p.report
            system_out, merged = p.rendered.system, p.rendered.merged
        else:
            out, planned, system_out, merged = job.done
        report = report_of(
            planned,
            self._redactor,
            messages_before=len(job.messages),
            messages_after=len(out),
            start=job.start,
            stage=stage,
            summary=summary,
            merged=merged,
            tightened=job.tighten,
            state=job.state_status,
        )
        tools = job.tools if not report.tools_dropped else None
        state = cache_key = options = None
        if job.session is not None:
            assert job.native is not None
            reused = job.state_in if job.state_status == "reused" else None
            out, system_out, cache_key, options, report = cache_markers.apply(
                self.provider, self.config, job.native.canonical.messages,
                out, system_out, tools, report, stable=reused.sent if reused else None,
                size=self._marker_size(planned, tools, reused, system_out),
            )  # fmt: skip
            state = dataclasses.replace(self._state_out(job, planned), sent=len(out))
        result = AssemblyResult(
            messages=out,
            tools=tools,
            report=report,
            system=system_out,
            state=state,
            cache_key=cache_key,
            cache_options=options,
        )
        added = [LedgerEntry(*e) for e in planned.ledger_added]
        return result, job.payload or (lambda: dump_messages(job.messages)), added


class _Observed:
    """One assembly's span, metrics and ledger update: entered, it gives ``done(result,
    payload)``, which reports a success; an exception leaving the block is reported as a
    rejection. A class, not a generator: it is entered on every call, and the generator
    machinery cost more than the rest of the hook."""

    __slots__ = ("asm", "ledger", "span", "token_ledger")

    def __init__(
        self,
        asm: Assembler,
        ledger: SideEffectLedger | None,
        token_ledger: TokenLedger | None = None,
    ) -> None:
        self.asm, self.ledger, self.token_ledger = asm, ledger, token_ledger

    def __enter__(
        self,
    ) -> Callable[[AssemblyResult, tracing.Payload, list[LedgerEntry]], AssemblyResult]:
        self.span = tracing.start_span(self.asm._tracer, self.asm.provider)
        return self.done

    def done(
        self, result: AssemblyResult, payload: tracing.Payload, added: list[LedgerEntry]
    ) -> AssemblyResult:
        # The caller's ledger gets the entries whole: it renders the note of the next
        # request, which goes to the same provider as the history. The report's are redacted.
        if self.ledger is not None:
            self.ledger.extend(added)
        if self.token_ledger is not None:
            self.token_ledger.observe_assembly(result.report)
        asm = self.asm
        tracing.assembled(result.report, payload, asm.provider, asm._sink, self.span)
        return result

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> None:
        if error is not None:
            tracing.rejected(error, self.asm.provider, self.asm._sink, self.span)


def _within(planned: _core.PlanReport, span: tuple[int, int] | None) -> bool:
    """Whether a plan drops units, every one of them in ``span`` (canonical) if one is given."""
    dropped = planned.canonical_dropped
    return bool(dropped) and (
        span is None or all(span[0] <= s and e <= span[1] for s, e in dropped)
    )


def _stale_reason(state: AssemblyState, canon: list[Any], budget: int) -> str | None:
    """Why a state no longer describes this history, or None when it does."""
    if state.budget != budget:
        return f"it was made for a budget of {state.budget}, this one is {budget}"
    if len(canon) < state.messages:
        return f"the history has {len(canon)} messages, fewer than the {state.messages} it saw"
    if fingerprint(canon[: state.messages]) != state.prefix:
        return "the messages it saw have changed"
    return None


@dataclass(frozen=True)
class _Summarize:
    """The summarizer run on a draft: the effect an assembly's flow waits on."""

    asm: Assembler
    draft: compaction.Draft

    def run(self) -> SummaryOutcome:
        asm = self.asm
        return runner.run(asm._summarizer, self.draft.request, **asm._run_args(self.draft))

    async def arun(self) -> SummaryOutcome:
        asm = self.asm
        return await runner.arun(asm._summarizer, self.draft.request, **asm._run_args(self.draft))


@dataclass
class _Job:
    """One assembly between its steps."""

    start: float
    messages: list[Any]
    system: Any
    tools: list[Any] | None = None
    #: The budget planned for: the config's, or lower after ``tighten`` notches.
    budget: int = 0
    tighten: int = 0
    #: The input serialized, made when asked (a DEBUG log hashes it).
    payload: tracing.Payload | None = None
    #: The finished request of the direct chat path: (messages, report, system, merged).
    done: tuple[list[Any], _core.PlanReport, Any, int] | None = None
    native: NativeRequest | None = None
    native_plan: NativePlan | None = None
    recorded: list[tuple[Any, ...]] | None = None
    draft: compaction.Draft | compaction.Skipped | None = None
    outcome: SummaryOutcome | None = None
    #: Cache-stable assembly: the session's hash (None when stateless), the state given,
    #: what became of it, whether this assembly compacted, and the summary note it sends.
    session: str | None = None
    state_in: AssemblyState | None = None
    state_status: str | None = None
    compacted: bool = False
    note: str | None = None
    #: The span of the state's summary when a compaction sends that note again.
    kept_summary: tuple[int, int] | None = None
    #: When this assembly ran (``assemble(..., now=...)``), and whether the provider's cache
    #: had expired since the state's request, so a due compaction runs now.
    now: float = 0.0
    expired: bool = False
    #: The reused cut an early compaction replaces, kept in case it frees too little.
    reuse: NativePlan | None = None
    #: Tokens a compaction leaves free for the next tool return (``TokenLedger``).
    tail: int = 0
    #: Core configs by budget for planning again: a cache-stable compaction's are the
    #: middle's stages only when it planned below the budget (``ringbound.low_water``).
    core_for: Callable[[int], Any] | None = None


def _framework(messages: Any) -> bool:
    """Whether ``messages`` is a framework's message list (LangChain), read by ``routing``."""
    return (
        type(messages) is list
        and bool(messages)
        and type(messages[0]) is not dict
        and routing.framework_of(messages[0]) is not None
    )


def _pins(pinned: Iterable[int] | None, n: int) -> list[int]:
    """Sorted, unique message indices to pin; ConfigError for anything else."""
    if pinned is None:
        return []
    try:
        # A list or tuple as stored; any other iterable through its own __iter__, whose
        # exception is the caller's bad input, not ours.
        if isinstance(pinned, list):
            items = list.copy(pinned)
        elif isinstance(pinned, tuple):
            items = list(tuple.__iter__(pinned))
        else:
            items = list(pinned)
    except Exception:
        raise _pin_error(pinned, n) from None
    # An int subclass as its plain value: its own __eq__/__hash__ are not ours to call.
    plain = []
    for p in items:
        if isinstance(p, bool) or not isinstance(p, int):
            raise _pin_error(p, n)
        p = int.__index__(p)
        if not 0 <= p < n:
            raise _pin_error(p, n)
        plain.append(p)
    return sorted(set(plain))


def _pin_error(p: Any, n: int) -> ConfigError:
    return ConfigError(
        f"pinned indices must be integers in [0, {n}) for {n} messages, got {shown(p)}",
        key="pinned",
        reason=f"must be integers in [0, {n})",
    )
