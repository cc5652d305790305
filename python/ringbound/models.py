"""The models table: each model's window, output limit, encoding and token ratio, so a gateway
sizes a request by the body's ``model`` instead of by hand.

The bundled table (``data/models.yaml``) cites the provider's documentation for every figure;
``load_yaml`` and ``register`` add or override entries. Names are matched the way gateways
spell them: with a route prefix (``openai/gpt-4o``), a dated snapshot (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``) or a Bedrock inference profile and version
(``us.anthropic.claude-sonnet-4-5-20250929-v1:0``), an alias (``claude-sonnet``), or LiteLLM's
own spelling (``vertex_ai/claude-sonnet-4-5@20250929``, ``openrouter/anthropic/claude-sonnet-4.5``).
``resolve`` is what callers that size a request by a name use: an unknown name is logged and
counted (or refused, when strictness is asked for), never silently given the default window.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .caller_values import plain_int, plain_items, plain_number, plain_str, shown
from .errors import ConfigError
from .observability.metrics import get_default_sink

__all__ = [
    "FAMILIES",
    "ModelInfo",
    "find",
    "load_yaml",
    "lookup",
    "names",
    "register",
    "resolve",
    "set_strict",
]

logger = logging.getLogger("ringbound")

#: Provider families the table knows; each maps to the wire format its requests use.
FAMILIES = ("openai", "anthropic", "gemini", "bedrock")
_ENCODINGS = ("o200k_base", "cl100k_base")
#: Output reserve ``for_model`` takes when the caller names none: the config's default,
#: never more than the model can write nor a quarter of a small window.
DEFAULT_OUTPUT_RESERVE = 8192

#: Route prefixes gateways put before a model name (LiteLLM, OpenRouter, Vertex paths).
_ROUTE = re.compile(r"^(?:[a-z_]+/)+")
#: Bedrock cross-region inference profiles put a region group first.
_REGION = re.compile(r"^(?:us|eu|apac|us-gov|global|ca|jp|au)\.(?=[a-z]+\.)")
#: Bedrock ids end in a version (``-v1:0``, ``-v2``); snapshots end in a date.
_VERSION = re.compile(r"(?:-v\d+(?::\d+)?|:\d+)$")
_DATE = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")
#: Vertex AI pins a Claude snapshot with ``@`` (``claude-sonnet-4-5@20250929``, ``@001``).
_VERTEX_PIN = re.compile(r"@[\w.-]*$")
#: OpenAI fine-tunes: ``ft:gpt-4o-mini-2024-07-18:org:name:id`` is sized as its base model.
_FINE_TUNE = re.compile(r"^ft:([^:]+):.*$")
#: OpenRouter and some consoles write Claude versions with a dot (``claude-sonnet-4.5``).
_CLAUDE_DOT = re.compile(r"(?<=\d)\.(?=\d)")


@dataclass(frozen=True)
class ModelInfo:
    """What a request to one model may hold.

    Attributes:
        name: The table's name for the model (``gpt-4o``, ``claude-sonnet-4-5``).
        family: ``openai``, ``anthropic``, ``gemini`` or ``bedrock``.
        max_output_tokens: The most tokens one answer may have.
        context_window: The window input and output share, or None where the provider caps
            them separately (Gemini).
        max_input_tokens: The provider's own cap on input, where it has one.
        encoding: The BPE ringbound counts with.
        token_ratio: Provider tokens per counted token; None for the provider's default.
        source: Where the figures come from.
        aliases: Other names users write for this model (``claude-sonnet`` for the newest
            Sonnet); matched like the name itself.
        min_cache_tokens: The shortest prefix the provider caches for this model (a cache
            marker below it is silently not cached); None where the provider's default
            applies.
    """

    name: str
    family: str
    max_output_tokens: int
    context_window: int | None = None
    max_input_tokens: int | None = None
    encoding: str = "o200k_base"
    token_ratio: float | None = None
    source: str = ""
    aliases: tuple[str, ...] = ()
    min_cache_tokens: int | None = None

    def __post_init__(self) -> None:
        # The fields are kept as the plain values they hold: a caller's subclass may raise
        # from its own ``__eq__``, ``__hash__`` or ``__repr__`` wherever the table reads it.
        name = plain_str(self.name)
        if not name:
            raise _error(f"a model's name must be a non-empty string, got {shown(self.name)}")
        object.__setattr__(self, "name", name)
        aliases = plain_items(self.aliases)
        if aliases is None:
            raise _error(f"{name}: aliases must be a list of names, got {shown(self.aliases)}")
        texts = [plain_str(a) for a in aliases]
        if not all(texts):
            raise _error(f"{name}: aliases must be non-empty strings")
        # A YAML list arrives as a list: kept as a tuple so the record stays hashable.
        object.__setattr__(self, "aliases", tuple(str(a).lower() for a in texts))
        for key in ("family", "encoding"):
            object.__setattr__(self, key, plain_str(getattr(self, key)))
        if self.family not in FAMILIES:
            raise _error(f"{name}: family must be one of {', '.join(FAMILIES)}")
        for key in ("max_output_tokens", "context_window", "max_input_tokens", "min_cache_tokens"):
            value = getattr(self, key)
            count = plain_int(value)
            optional = key != "max_output_tokens"
            if (value is None and optional) or (count is not None and 1 <= count < 2**40):
                object.__setattr__(self, key, count)
                continue
            raise _error(f"{name}: {key} must be a positive integer, got {shown(value)}")
        if self.context_window is None and self.max_input_tokens is None:
            raise _error(f"{name}: needs context_window or max_input_tokens")
        if self.encoding not in _ENCODINGS:
            raise _error(f"{name}: encoding must be one of {', '.join(_ENCODINGS)}")
        given = self.token_ratio
        ratio = plain_number(given)
        if given is not None and (ratio is None or not 0.1 <= ratio <= 10):
            raise _error(f"{name}: token_ratio must be a number in [0.1, 10] or null")
        object.__setattr__(self, "token_ratio", ratio)

    def input_limit(self, output_reserve: int) -> int:
        """``model_input_limit`` for a request that reserves ``output_reserve`` tokens: the
        shared window, or the input cap plus the reserve where input is capped on its own
        (the budget then comes out as the input cap less the safety margin).

        Example:
            >>> lookup("gpt-5").input_limit(8192)
            280192
            >>> lookup("gpt-4o").input_limit(8192)
            128000
        """
        limits = []
        if self.context_window is not None:
            limits.append(self.context_window)
        if self.max_input_tokens is not None:
            limits.append(self.max_input_tokens + output_reserve)
        return min(limits)

    def default_reserve(self) -> int:
        """The output reserve when the caller names none."""
        window = self.context_window or self.max_input_tokens or 0
        return max(1, min(DEFAULT_OUTPUT_RESERVE, self.max_output_tokens, window // 4))


_lock = threading.Lock()
_table: dict[str, ModelInfo] | None = None
_aliases: dict[str, str] = {}
#: ``resolve`` refuses unknown names when True; ``RINGBOUND_STRICT_MODELS=1`` sets it.
_strict = os.environ.get("RINGBOUND_STRICT_MODELS", "").strip().lower() in ("1", "true", "yes")
#: Unknown names already logged: a gateway sees the same name on every request.
_warned: set[str] = set()
_MAX_WARNED = 1024


def _loaded() -> dict[str, ModelInfo]:
    global _table
    with _lock:
        if _table is None:
            text = resources.files("ringbound").joinpath("data/models.yaml").read_text("utf-8")
            _table = {}
            for m in _parse(text, "the bundled models table"):
                _add(_table, m)
        return _table


def _add(table: dict[str, ModelInfo], info: ModelInfo) -> None:
    """Adds ``info`` and its aliases; a later entry's alias replaces an earlier one's."""
    old = table.get(info.name)
    if old is not None:
        for alias in old.aliases:
            _aliases.pop(alias, None)
    table[info.name] = info
    for alias in info.aliases:
        _aliases[alias] = info.name


def _parse(text: str, where: str) -> list[ModelInfo]:
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise _error(f"{where} is not valid YAML: {e}") from None
    rows = doc.get("models") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise _error(f"{where} has no `models:` list")
    out = []
    known = set(ModelInfo.__dataclass_fields__)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise _error(f"{where}: models[{i}] must be a mapping")
        unknown = sorted(str(k) for k in row if k not in known)
        if unknown:
            raise _error(f"{where}: models[{i}] has unknown keys {', '.join(unknown)}")
        try:
            if "aliases" in row and isinstance(row["aliases"], list):
                row = {**row, "aliases": tuple(row["aliases"])}
            out.append(ModelInfo(**row))
        except TypeError as e:
            raise _error(f"{where}: models[{i}] {e}") from None
    return out


def register(info: ModelInfo) -> None:
    """Adds a model to the table, or replaces the entry of the same name."""
    if not isinstance(info, ModelInfo):
        raise _error(f"register takes a ModelInfo, got {type(info).__name__}")
    table = _loaded()
    with _lock:
        _add(table, info)


def load_yaml(path: str | Path) -> list[ModelInfo]:
    """Adds every model of a YAML file (a ``models:`` list, keys as in ``ModelInfo``) to the
    table, replacing entries of the same name, and returns them."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise _error(f"cannot read {path}: {e}") from None
    infos = _parse(text, str(path))
    for info in infos:
        register(info)
    return infos


def names() -> list[str]:
    """Every name in the table, sorted."""
    return sorted(_loaded())


def find(name: str) -> ModelInfo | None:
    """The table's entry for a model name as a request spells it, or None.

    Example:
        >>> find("openai/gpt-4o-mini-2024-07-18").name
        'gpt-4o-mini'
        >>> find("us.anthropic.claude-sonnet-4-5-20250929-v1:0").name
        'anthropic.claude-sonnet-4-5'
        >>> find("vertex_ai/claude-sonnet-4-5@20250929").name, find("claude-sonnet").name
        ('claude-sonnet-4-5', 'claude-sonnet-4-5')
        >>> find("openrouter/anthropic/claude-sonnet-4.5").name
        'claude-sonnet-4-5'
        >>> find("my-own-model") is None
        True
    """
    name = plain_str(name)
    if name is None:
        return None
    table = _loaded()
    key = _FINE_TUNE.sub(r"\1", name.strip().lower())
    if key.startswith("models/"):  # Gemini's resource names
        key = key[len("models/") :]
    key = _VERTEX_PIN.sub("", key)
    routed = _ROUTE.sub("", key)
    bare = _VERSION.sub("", _REGION.sub("", routed))
    candidates = [key, routed, bare, _DATE.sub("", bare)]
    if "claude" in bare:
        dashed = _CLAUDE_DOT.sub("-", bare)
        candidates += [dashed, _DATE.sub("", dashed)]
    for c in candidates:
        if c in table:
            return table[c]
        if c in _aliases:
            return table[_aliases[c]]
    # A longer spelling of a known name (``gpt-4o-mini-search-preview``, ``o3-pro``): the
    # longest name it extends at a dash wins, so ``gpt-4o-mini...`` is never ``gpt-4o``.
    best = None
    for c in candidates[2:]:
        for known in table:
            if c.startswith(known + "-") and (best is None or len(known) > len(best)):
                best = known
    return table[best] if best is not None else None


def lookup(name: str) -> ModelInfo:
    """Like ``find``, but an unknown name is a ``ConfigError`` that says how to add it."""
    info = find(name)
    if info is None:
        raise ConfigError(
            f"model {shown(name, 200)} is not in the models table; pass model_input_limit and "
            "output_reserve_tokens yourself, or add it with ringbound.models.register / "
            "load_yaml (see docs/models.md)",
            key="model",
            reason="unknown model",
        )
    return info


def set_strict(strict: bool) -> None:
    """Makes ``resolve`` refuse unknown model names (``ConfigError``) instead of warning,
    process-wide; ``RINGBOUND_STRICT_MODELS=1`` sets it at start."""
    global _strict
    _strict = bool(strict)


def resolve(
    name: Any, *, where: str, provider: str = "other", sink: Any = None, strict: bool | None = None
) -> ModelInfo | None:
    """``find`` for a caller about to size a request by ``name``: an unknown name is logged
    (a WARNING on the ``ringbound`` logger, once per name) and counted
    (``context_assemble_unknown_model_total`` on sinks that have ``unknown_model``), and the
    caller falls back to its own config; with ``strict`` (or ``set_strict(True)``) it is a
    ``ConfigError`` instead.

    Args:
        name: The model name as the request, framework or route spells it.
        where: What named it, for the message (``"the body's model"``).
        provider: The wire format the request is in (the metric's label).
        sink: The metrics sink to count an unknown name in; the default sink when None.
        strict: Refuse unknown names; None for the process setting.

    Raises:
        ConfigError: ``name`` is unknown and strictness is on (key ``model``).
    """
    info = find(name)
    if info is not None:
        return info
    named = name is not None and (plain_str(name) != "" or not isinstance(name, str))
    what = (
        f"{where} {shown(name, 200)} is not in the models table"
        if named
        else f"{where} names no model"
    )
    if _strict if strict is None else strict:
        raise ConfigError(
            f"{what}, and unknown models are refused (strict); add it with "
            "ringbound.models.register / load_yaml, or pass model_input_limit and "
            "output_reserve_tokens yourself (see docs/models.md)",
            key="model",
            reason="unknown model",
        )
    if what not in _warned:
        if len(_warned) >= _MAX_WARNED:
            _warned.clear()
        _warned.add(what)
        logger.warning(
            "ringbound: %s; the request is sized by the config's model_input_limit and "
            "output_reserve_tokens, not by the model's window (add it with "
            "ringbound.models.register, or refuse unknown models with "
            "RINGBOUND_STRICT_MODELS=1)",
            what,
        )
    if sink is None:
        sink = get_default_sink()
    count = getattr(sink, "unknown_model", None)
    if callable(count):
        count(provider)
    return None


def _error(message: str) -> ConfigError:
    return ConfigError(message, key="models", reason=message)
