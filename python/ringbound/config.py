"""Assembly configuration: every key of the ``context_assembly:`` YAML block, validated when the
config is built, so a typo or an out-of-range value fails at start-up, not on a live request."""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

from .caller_values import is_utf8, plain_int, shown, str_list
from .errors import ConfigError

__all__ = ["PINS", "STAGES", "AssemblyConfig"]

#: Items that may be pinned (kept whatever the budget).
PINS = ("first_user_message", "side_effect_ledger", "security_system_prompt")
#: Stages in their default order, cheapest loss first: rewrites that keep the message, then
#: drops of whole units (those later turns build on last), then the summary of what was
#: dropped (with a summarizer only); last, and only once the middle is exhausted, the
#: protected suffix degrades before a refusal.
STAGES = (
    "dedupe_superseded_reads",
    "truncate_oversized_results",
    "degrade_media",
    "drop_rings",
    "drop_plain_turns",
    "drop_referenced_rings",
    "drop_citing_turns",
    "drop_error_rings",
    "summarize",
    "truncate_protected_results",
    "shrink_recent",
)
_CHOICES: dict[str, tuple[str, ...]] = {
    "on_pairing_error": ("fail_closed", "synthesize_error_results"),
    "on_still_over_budget": ("fail_closed", "drop_tools_schema_then_fail"),
    "token_counter": ("provider_or_tiktoken_model_encoding", "tiktoken", "provider"),
    "encoding": ("o200k_base", "cl100k_base"),
    "on_summary_failure": ("fallback", "fail_closed"),
    "summary_fallback": ("extractive", "none"),
    "on_store_error": ("fail_closed", "stateless"),
    "cache_markers": ("auto", "caller_only", "off"),
}
#: ``prompt_cache_mode`` values besides null: OpenAI's ``prompt_cache_options.mode``.
PROMPT_CACHE_MODES = ("implicit", "explicit")
_BACKENDS = ("tiktoken", "bpe_openai")
#: The largest integer any key takes: far beyond any real window or request (a trillion
#: tokens), and small enough that the core's 64-bit arithmetic never overflows on it.
INT_MAX = 2**40
#: Keys that no longer exist, with what to use instead: setting one is a ConfigError that says
#: so, not a silent no-op.
REMOVED_KEYS = {
    "middle_delete_unit": (
        "was removed: the middle is always cut in whole tool rings and plain turns (a call is "
        "never split from its result); choose which of them may go with `stages` "
        "(drop_rings, drop_plain_turns, drop_error_rings)"
    ),
}
#: Where the ledger and summary notes may go (``note_placement``, see ``ringbound.notes``).
PLACEMENTS = ("inline_system", "leading_system", "top_level_system", "user")


@dataclass(frozen=True)
class AssemblyConfig:
    """How a request is assembled. Every field has a production default.

    The budget is ``model_input_limit - output_reserve_tokens - safety_margin_tokens``; the
    tools schema, images and per-message framing all count inside it.

    Example:
        >>> cfg = AssemblyConfig(model_input_limit=32_000, output_reserve_tokens=4_000)
        >>> cfg.budget
        26976
    """

    model_input_limit: int = 128_000
    output_reserve_tokens: int = 8192
    #: Tokens kept free for estimation error; ``auto`` learns it per model from provider
    #: counts and reported usage (``ringbound.counters``, docs/calibration.md).
    safety_margin_tokens: int | str = 1024
    recent_tool_rings: int = 3
    recent_user_turns: int = 2
    summarize_trigger_ratio: float = 0.8
    summary_max_tokens: int = 1024
    summary_timeout_ms: int = 8000
    on_pairing_error: str = "fail_closed"
    on_still_over_budget: str = "fail_closed"
    token_counter: str = "provider_or_tiktoken_model_encoding"
    pin: tuple[str, ...] = PINS
    encoding: str = "o200k_base"
    #: Exact BPE implementation; None picks the fastest (see docs/performance.md).
    tokenizer_backend: str | None = None
    #: Provider tokens per counted token, for providers without a public tokenizer; None
    #: takes the provider's documented default (1.0 for OpenAI); ``auto`` learns it per model.
    token_ratio: float | str | None = None
    #: Share of requests the learned ``token_ratio`` / ``safety_margin_tokens`` cover.
    calibration_coverage: float = 0.999
    side_effect_tools: tuple[str, ...] = ()
    #: Per side-effecting tool, the argument names that identify its effect in the ledger.
    ledger_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: A ring whose results are all errors and at most this many tokens is dropped last.
    short_error_result_tokens: int = 200
    #: How many such short error rings (the most recent) are held back.
    max_held_error_rings: int = 4
    stages: tuple[str, ...] = STAGES
    #: Middle tool results over this many tokens keep their head and tail
    #: (``truncate_oversized_results``).
    max_tool_result_tokens: int = 4000
    #: ``truncate_protected_results`` never cuts a result of the newest ring below this.
    min_result_tokens: int = 500
    #: ``shrink_recent`` lowers ``recent_tool_rings`` no further than this (a floor above the
    #: configured value means no lowering).
    min_recent_tool_rings: int = 1
    #: ``shrink_recent`` lowers ``recent_user_turns`` no further than this.
    min_recent_user_turns: int = 1
    #: Size asked of the summarizer; None for clamp(0.2 x summarized, 2000,
    #: min(0.05 x model_input_limit, summary_max_tokens)).
    summary_target_tokens: int | None = None
    #: The summarizer's own input window in tokens; larger input is chunked (map, reduce).
    summarizer_input_limit: int | None = None
    #: When the summarizer fails: write the fallback summary (``fallback``) or raise
    #: SummaryError (``fail_closed``).
    on_summary_failure: str = "fallback"
    #: The summary written when the summarizer fails: ``extractive`` (deterministic, no
    #: model) or ``none`` (the units are dropped without a summary; the ledger still holds
    #: their side effects).
    summary_fallback: str = "extractive"
    #: Regular expressions of secrets to redact, besides the built-in kinds, before any text
    #: reaches the summarizer.
    redact_patterns: tuple[str, ...] = ()
    #: Also hand the summarizer the caller's own, unredacted objects
    #: (``SummaryRequest.raw_units``); off by default, so nothing unredacted leaves.
    summary_raw_units: bool = False
    #: Return an ``AssemblyState`` with every result (``res.state``); passing one back keeps
    #: the previous cut while it fits, so the request's prefix stays byte-identical.
    cache_stable: bool = False
    #: With a state: the previous cut is reused while the request stays under this share of
    #: the budget (the agent-side trigger) ...
    compact_trigger_ratio: float = 0.75
    #: ... and a compaction goes down to this share (the low-water mark).
    compact_target_ratio: float = 0.5
    #: With ``cache_stable``: ringbound places prompt-cache markers where the request is
    #: stable (``auto``: Anthropic ``cache_control``, Bedrock ``cachePoint``, OpenAI
    #: ``res.cache_key``), keeps only the caller's (``caller_only``), or neither (``off``).
    cache_markers: str = "auto"
    #: OpenAI explicit prompt caching (GPT-5.6 and later): with ``cache_markers: auto``,
    #: ``prompt_cache_breakpoint`` at the stable cut and ``prompt_cache_options`` with this
    #: mode (``implicit``: OpenAI adds its own breakpoint; ``explicit``: only the marked
    #: ones); null sends neither (earlier models refuse them).
    prompt_cache_mode: str | None = None
    #: No cache marker of ringbound's goes where the prefix is shorter than this: the
    #: provider does not cache it and the marker is wasted. Null: the model's minimum from
    #: the models table (``for_model``), else 1,024.
    min_cache_tokens: int | None = None
    #: With a state: when the provider's cache has expired since the last request, a
    #: compaction that is due anyway (the request above the low-water mark) runs now, when
    #: it writes nothing the request would not write anyway (``ringbound.cache_lifetime``).
    compact_on_cache_expiry: bool = False
    #: Seconds the provider's cache keeps a prefix after its last use; null: the provider's
    #: (``ringbound.cache_lifetime.LIFETIMES``; OpenAI with ``prompt_cache_mode``: 30 minutes).
    cache_lifetime_seconds: int | None = None
    #: Without a state (a gateway's safety net): the share of the budget an assembly fills.
    emergency_ratio: float = 1.0
    #: When the session store fails (``assemble(..., session_id=...)``): raise StoreError
    #: (``fail_closed``) or assemble without the stored state (``stateless``, said in
    #: ``report.store``).
    on_store_error: str = "fail_closed"
    max_messages: int = 100_000
    max_request_bytes: int = 64 * 1024 * 1024
    #: Where the ledger and summary notes go: ``inline_system`` (an instruction message after
    #: the goal), ``leading_system`` (after the leading system messages), ``top_level_system``
    #: (``res.system``) or ``user`` (user messages); null: the target's default (see
    #: ``ringbound.notes``; each integration picks one its framework accepts).
    note_placement: str | None = None
    #: Removed (see ``REMOVED_KEYS``): accepted by the constructor only to refuse it by name.
    middle_delete_unit: InitVar[Any] = None

    def __post_init__(self, middle_delete_unit: Any) -> None:
        if middle_delete_unit is not None:
            raise _error("middle_delete_unit", REMOVED_KEYS["middle_delete_unit"])
        # Every value as plain data first: what follows compares and hashes them, and a
        # caller's subclass or object must not run its own code there (its exception would
        # escape as ours).
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _plain(f.name, getattr(self, f.name)))
        for name in ("pin", "side_effect_tools", "stages", "redact_patterns"):
            value = getattr(self, name)
            items = str_list(value)
            if items is None:
                raise _error(name, f"must be a list of strings (UTF-8), got {shown(value)}")
            object.__setattr__(self, name, tuple(items))
        object.__setattr__(self, "ledger_fields", _ledger_fields(self.ledger_fields))
        for name, low in (
            ("model_input_limit", 1),
            ("output_reserve_tokens", 0),
            ("recent_tool_rings", 0),
            ("recent_user_turns", 0),
            ("summary_max_tokens", 1),
            ("summary_timeout_ms", 1),
            ("short_error_result_tokens", 0),
            ("max_held_error_rings", 0),
            ("max_tool_result_tokens", 16),
            ("min_result_tokens", 16),
            ("min_recent_tool_rings", 0),
            ("min_recent_user_turns", 0),
            ("max_messages", 1),
            ("max_request_bytes", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT_MAX:
                raise _error(name, f"must be an integer in [{low}, 2**40], got {shown(value)}")
        for name, low in (
            ("summary_target_tokens", 16),
            ("summarizer_input_limit", 16),
            ("min_cache_tokens", 0),
            ("cache_lifetime_seconds", 1),
        ):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT_MAX
            ):
                raise _error(
                    name, f"must be an integer in [{low}, 2**40] (or null), got {shown(value)}"
                )
        mode = self.prompt_cache_mode
        if mode is not None and (not isinstance(mode, str) or mode not in PROMPT_CACHE_MODES):
            raise _error(
                "prompt_cache_mode",
                f"must be one of {', '.join(PROMPT_CACHE_MODES)} (or null); got {shown(mode)}",
            )
        for pattern in self.redact_patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                raise _error(
                    "redact_patterns", f"holds an invalid pattern {shown(pattern)}: {e}"
                ) from None
        for name in ("compact_trigger_ratio", "compact_target_ratio", "emergency_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise _error(name, f"must be a number in (0, 1], got {shown(value)}")
        if self.compact_target_ratio > self.compact_trigger_ratio:
            raise _error(
                "compact_target_ratio",
                f"must not be above compact_trigger_ratio ({self.compact_target_ratio} > "
                f"{self.compact_trigger_ratio})",
            )
        for name in ("cache_stable", "summary_raw_units", "compact_on_cache_expiry"):
            if not isinstance(getattr(self, name), bool):
                raise _error(name, f"must be true or false, got {shown(getattr(self, name))}")
        ratio = self.summarize_trigger_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise _error(
                "summarize_trigger_ratio", f"must be a number in (0, 1], got {shown(ratio)}"
            )
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise _error(
                    name, f"must be one of {', '.join(allowed)}; got {shown(getattr(self, name))}"
                )
        margin = self.safety_margin_tokens
        if margin != "auto" and (
            isinstance(margin, bool) or not isinstance(margin, int) or not 0 <= margin <= INT_MAX
        ):
            raise _error(
                "safety_margin_tokens",
                f"must be an integer in [0, 2**40] or auto, got {shown(margin)}",
            )
        coverage = self.calibration_coverage
        if (
            isinstance(coverage, bool)
            or not isinstance(coverage, (int, float))
            or not 0.5 <= coverage < 1
        ):
            raise _error(
                "calibration_coverage", f"must be a number in [0.5, 1), got {shown(coverage)}"
            )
        ratio_ = self.token_ratio
        if (
            ratio_ is not None
            and ratio_ != "auto"
            and (
                isinstance(ratio_, bool)
                or not isinstance(ratio_, (int, float))
                or not 0.1 <= ratio_ <= 10
            )
        ):
            raise _error(
                "token_ratio", f"must be a number in [0.1, 10], auto or null; got {shown(ratio_)}"
            )
        if self.note_placement is not None and self.note_placement not in PLACEMENTS:
            raise _error(
                "note_placement",
                f"must be one of {', '.join(PLACEMENTS)} (or null); "
                f"got {shown(self.note_placement)}",
            )
        if self.tokenizer_backend is not None and self.tokenizer_backend not in _BACKENDS:
            raise _error(
                "tokenizer_backend",
                f"must be one of {', '.join(_BACKENDS)} (or null); "
                f"got {shown(self.tokenizer_backend)}",
            )
        for p in self.pin:
            if p not in PINS:
                raise _error("pin", f"must hold only {', '.join(PINS)}; got {shown(p)}")
        for s in self.stages:
            if s not in STAGES:
                raise _error("stages", f"must hold only {', '.join(STAGES)}; got {shown(s)}")
        if self.budget <= 0:
            raise _error(
                "model_input_limit",
                f"leaves no budget: {self.model_input_limit} - output_reserve_tokens "
                f"{self.output_reserve_tokens} - safety_margin_tokens "
                f"{self.safety_margin_tokens} = {self.budget}",
            )

    @property
    def budget(self) -> int:
        """Tokens the assembled request may use. With ``safety_margin_tokens: auto`` the
        margin is not known before assembly: this is then the budget before it, and each
        report's ``budget`` is the one applied."""
        return self.model_input_limit - self.output_reserve_tokens - self.margin_tokens

    @property
    def margin_tokens(self) -> int:
        """``safety_margin_tokens`` as a number (0 when it is learned: ``auto``)."""
        margin = self.safety_margin_tokens
        return 0 if margin == "auto" else int(margin)

    @classmethod
    def for_model(cls, model: str, **overrides: Any) -> AssemblyConfig:
        """A config sized for a model of the models table (``ringbound.models``): its window,
        an output reserve it can use (the default 8192, less where the model writes less or
        the window is small), its encoding and token ratio. ``overrides`` take precedence;
        ``model_input_limit`` follows an overridden ``output_reserve_tokens`` where the
        provider caps input on its own (Gemini, GPT-5).

        Example:
            >>> cfg = AssemblyConfig.for_model("claude-sonnet-4-5-20250929")
            >>> cfg.model_input_limit, cfg.output_reserve_tokens
            (200000, 8192)
            >>> AssemblyConfig.for_model("gpt-4o", output_reserve_tokens=16_384).budget
            110592
        """
        from .models import lookup

        info = lookup(model)
        values = cls().to_dict()
        reserve = overrides.get("output_reserve_tokens", info.default_reserve())
        values.update(
            output_reserve_tokens=reserve,
            encoding=info.encoding,
            token_ratio=info.token_ratio,
            min_cache_tokens=info.min_cache_tokens,
        )
        # An int subclass's own arithmetic and comparisons are not run: its value is used.
        count = plain_int(reserve)
        if count is not None and count > 0:
            values["model_input_limit"] = info.input_limit(count)
        values.update(overrides)
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> AssemblyConfig:
        """Builds a config from a mapping, rejecting unknown keys by name."""
        if not isinstance(values, dict):
            raise ConfigError(
                f"config must be a mapping, got {type(values).__name__}",
                key="context_assembly",
                reason="must be a mapping",
            )
        known = {f.name for f in dataclasses.fields(cls)}
        plain: dict[str, Any] = {}
        # The pairs as stored: a dict subclass's own keys() or items() may raise.
        for key, value in dict.items(values):
            if not isinstance(key, str):
                raise _error(shown(key), "is not a configuration key (keys are strings)")
            key = str.__str__(key)
            if key in REMOVED_KEYS:
                raise _error(key, REMOVED_KEYS[key])
            if key not in known:
                # A typo gets the closest key first: the whole list is forty names long.
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                known_keys = ", ".join(sorted(known))
                raise _error(key, f"is not a configuration key ({hint}known: {known_keys})")
            plain[key] = value
        return cls(**plain)

    @classmethod
    def from_yaml(cls, path: str | Path) -> AssemblyConfig:
        """Reads the ``context_assembly:`` block of a YAML file.

        Example:
            >>> import tempfile, os
            >>> with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            ...     _ = f.write("context_assembly:\\n  model_input_limit: 64000\\n")
            >>> AssemblyConfig.from_yaml(f.name).model_input_limit
            64000
            >>> os.unlink(f.name)
        """
        import yaml

        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read {path}: {e}", key="context_assembly") from e
        if not isinstance(doc, dict) or "context_assembly" not in doc:
            raise ConfigError(
                f"{path} has no `context_assembly:` block",
                key="context_assembly",
                reason="missing",
            )
        return cls.from_dict(doc["context_assembly"] or {})

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (lists for tuples), as it would be written to YAML."""
        out = dataclasses.asdict(self)
        for k, v in out.items():
            if isinstance(v, tuple):
                out[k] = list(v)
        out["ledger_fields"] = {k: list(v) for k, v in self.ledger_fields.items()}
        return out


def _plain(name: str, value: Any) -> Any:
    """A config value as plain data: a subclass of str, int or float as its base type;
    lists, tuples and mappings as given (their keys read them as stored); anything else, a
    caller's object no key takes, a ConfigError."""
    if value is None or type(value) in (bool, int, float, str, list, tuple, dict):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):  # bool cannot be subclassed
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, (list, tuple, dict)):
        return value
    raise _error(
        name, f"must be plain data (a string, number, list or mapping), got {shown(value)}"
    )


def _ledger_fields(value: Any) -> dict[str, tuple[str, ...]]:
    """``ledger_fields`` as a dict of plain strings, read as stored."""
    out: dict[str, tuple[str, ...]] = {}
    pairs = list(dict.items(value)) if isinstance(value, dict) else None
    for tool, names in pairs or ():
        items = str_list(names)
        if not isinstance(tool, str) or not is_utf8(str.__str__(tool)) or items is None:
            pairs = None
            break
        out[str.__str__(tool)] = tuple(items)
    if pairs is None:
        raise _error("ledger_fields", "must map tool names to lists of argument names")
    return out


def _error(key: str, reason: str) -> ConfigError:
    return ConfigError(f"config `{key}` {reason}", key=key, reason=reason)
