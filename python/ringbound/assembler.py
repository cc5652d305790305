"""The Assembler façade: serializes the caller's messages once, lets the Rust core plan the
request with the GIL released, and builds the result from the caller's own message objects
plus the few insertions the plan asks for."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import _core, telemetry
from .adapted import Counting, plan_native
from .config import AssemblyConfig
from .errors import ConfigError
from .metrics import MetricsSink, check_sink
from .payload import check_message_list, dump_messages, dump_tools
from .providers import adapter, check_provider
from .report import AssemblyReport, LedgerEntry, StageRecord

__all__ = ["Assembler", "AssemblyResult"]


@dataclass(frozen=True)
class AssemblyResult:
    """An assembled request.

    Attributes:
        messages: The list to send. Kept messages are the caller's own objects (same
            identity, unmodified); insertions are new dicts.
        tools: The tools to send: the caller's list, or None if it was dropped to fit
            (``on_still_over_budget: drop_tools_schema_then_fail``) or none was given.
        report: What the assembly did.
    """

    messages: list[Any]
    tools: list[Any] | None
    report: AssemblyReport
    #: The top-level system to send, for providers that have one (Anthropic ``system``,
    #: Gemini ``systemInstruction``, Bedrock ``system``, Responses ``instructions``): the
    #: caller's value, or a new one carrying the side-effect ledger note.
    system: Any = None


def _core_config(
    cfg: AssemblyConfig, image_formula: str = "openai", token_ratio: float = 1.0
) -> _core.CoreConfig:
    return _core.CoreConfig(
        budget=cfg.budget,
        recent_tool_rings=cfg.recent_tool_rings,
        recent_user_turns=cfg.recent_user_turns,
        pin_first_user_message="first_user_message" in cfg.pin,
        pin_side_effect_ledger="side_effect_ledger" in cfg.pin,
        pin_security_system_prompt="security_system_prompt" in cfg.pin,
        short_error_result_tokens=cfg.short_error_result_tokens,
        max_held_error_rings=cfg.max_held_error_rings,
        side_effect_tools=list(cfg.side_effect_tools),
        ledger_fields={k: list(v) for k, v in cfg.ledger_fields.items()},
        stages=list(cfg.stages),
        drop_tools_schema=cfg.on_still_over_budget == "drop_tools_schema_then_fail",
        synthesize_missing_results=cfg.on_pairing_error == "synthesize_error_results",
        encoding=cfg.encoding,
        tokenizer_backend=cfg.tokenizer_backend,
        max_messages=cfg.max_messages,
        max_request_bytes=cfg.max_request_bytes,
        image_formula=image_formula,
        token_ratio=token_ratio,
    )


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
            ``anthropic``, ``gemini`` or ``bedrock_converse``.
        summarizer: Not supported in this release; passing one raises ConfigError rather
            than silently not summarizing.
        sink: Where the metrics of each assembly go (see ``MetricsSink``); the default sink
            (``set_default_sink``, NullSink unless set) when None.
        tracer: An OpenTelemetry ``Tracer`` for a span ``ringbound.assemble`` per assembly;
            the one ``enable_tracing`` set (none by default) when None.
        cache: Where parsed messages and their counts are cached: True for the process-wide
            cache, False for none, or a ``CountCache`` of this assembler's own.

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
        provider: str = "openai_chat",
        summarizer: Any = None,
        sink: MetricsSink | None = None,
        tracer: Any = None,
        cache: Any = True,
    ) -> None:
        self.config = config if config is not None else AssemblyConfig()
        if not isinstance(self.config, AssemblyConfig):
            raise ConfigError(
                f"config must be an AssemblyConfig, got {type(self.config).__name__}",
                key="config",
            )
        self.provider = check_provider(provider)
        if summarizer is not None:
            raise ConfigError(
                "summarizers are not supported in this release; assemble without one "
                "(dropped side-effecting calls are still kept in the ledger note)",
                key="summarizer",
                reason="not supported in this release",
            )
        self._adapter = None if self.provider == "openai_chat" else adapter(self.provider)
        ratio = self.config.token_ratio
        self._image_formula = "openai" if self._adapter is None else self._adapter.image_formula
        if ratio is None:
            ratio = 1.0 if self._adapter is None else self._adapter.default_token_ratio
        self._ratio = ratio
        self._core = _core_config(self.config, self._image_formula, ratio)
        self._cache = _cache(cache)
        self._sink = None if sink is None else check_sink(sink)
        self._tracer = None if tracer is None else telemetry.check_tracer(tracer)

    def assemble(
        self,
        messages: list[Any],
        tools: list[Any] | None = None,
        *,
        system: Any = None,
        pinned: Iterable[int] | None = (),
    ) -> AssemblyResult:
        """Assembles the next request from ``messages``.

        Args:
            messages: The session, OpenAI Chat Completions messages (dicts or SDK objects).
                Never modified.
            tools: The ``tools`` parameter, counted inside the budget.
            pinned: Indices of messages to keep whatever the budget (their whole ring is
                kept with them).

        Returns:
            The request to send and its report.

        Raises:
            InvalidMessageError: A message is malformed (the error names its index).
            PairingError: Tool calls and results do not pair and the policy is fail_closed.
            BudgetExceededError: The protected part alone does not fit the budget.
        """
        span = telemetry.start_span(self._tracer, self.provider)
        try:
            result, payload = self._assemble(messages, tools, system, pinned)
        except BaseException as e:
            telemetry.rejected(e, self.provider, self._sink, span)
            raise
        telemetry.assembled(result.report, payload, self.provider, self._sink, span)
        return result

    def _core_for(self, budget: int) -> _core.CoreConfig:
        """The core config, with another budget when a rendering has to be tightened."""
        if budget == self.config.budget:
            return self._core
        return _core_config(
            dataclasses.replace(
                self.config,
                model_input_limit=budget,
                output_reserve_tokens=0,
                safety_margin_tokens=0,
            ),
            self._image_formula,
            self._ratio,
        )

    def _assemble(
        self,
        messages: list[Any],
        tools: list[Any] | None,
        system: Any,
        pinned: Iterable[int] | None,
    ) -> tuple[AssemblyResult, bytes]:
        """The assembly itself, and the serialized messages it planned from."""
        start = time.perf_counter()
        merged = 0
        if self._adapter is None:
            payload = dump_messages(messages)
            pins = _pins(pinned, len(messages))
            out, raw = _core.plan_openai_chat(
                payload, dump_tools(tools), self._core, pins, self._cache, messages=messages
            )
            system_out = system
        else:
            check_message_list(messages)
            native = plan_native(
                self._adapter,
                messages,
                tools,
                system,
                self._core_for,
                self.config.budget,
                Counting(
                    self.config.encoding,
                    self.config.tokenizer_backend,
                    self._image_formula,
                    self._ratio,
                    self._cache,
                ),
                _pins(pinned, len(messages)),
                repair=self.config.on_pairing_error == "synthesize_error_results",
            )
            raw, payload = native.raw, native.payload
            out, system_out = native.rendered.messages, native.rendered.system
            merged = native.rendered.merged
        report = AssemblyReport(
            tokens_before=raw["tokens_before"],
            tokens_after=raw["tokens_after"],
            budget=raw["budget"],
            dropped_rings=raw["dropped_rings"],
            dropped_turns=raw["dropped_turns"],
            stages=[StageRecord(*s) for s in raw["stages"]],
            repairs=raw["repairs"],
            ledger_added=[LedgerEntry(*e) for e in raw["ledger_added"]],
            ledger_entries=raw["ledger_entries"],
            bucket_tokens=raw["bucket_tokens"],
            tools_dropped=raw["tools_dropped"],
            merged=merged,
            messages_before=len(messages),
            messages_after=len(out),
            elapsed_s=time.perf_counter() - start,
            tokens_before_exact=raw["tokens_before_exact"],
        )
        kept_tools = None if report.tools_dropped or tools is None else tools
        result = AssemblyResult(messages=out, tools=kept_tools, report=report, system=system_out)
        return result, payload


def _pins(pinned: Iterable[int] | None, n: int) -> list[int]:
    """Sorted, unique message indices to pin; ConfigError for anything else."""
    if pinned is None:
        return []
    try:
        items = list(pinned)
    except TypeError:
        raise _pin_error(pinned, n) from None
    for p in items:
        if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < n:
            raise _pin_error(p, n)
    return sorted(set(items))


def _pin_error(p: Any, n: int) -> ConfigError:
    return ConfigError(
        f"pinned indices must be integers in [0, {n}) for {n} messages, got {p!r}",
        key="pinned",
        reason=f"must be integers in [0, {n})",
    )
