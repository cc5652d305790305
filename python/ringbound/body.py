"""The gateway path: a provider's whole request body in, the body to send out.

OpenAI Chat bodies are assembled by the Rust core from end to end with the GIL released
(``path == "native"``): kept messages are copied as the input's own bytes and every other
field keeps its bytes. The other formats, and calls that need Python (a summarizer, a state,
a session, provider counts), parse the body, run ``assemble`` and serialize it again, keeping
every field but the history, the system and the tools (``path == "dict"``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import orjson

from . import _core, cache_markers, items_body
from .assembly import Assembles
from .body_members import TOO_DEEP, shallow_members
from .body_result import BodyResult, budget_rule, native_result
from .config import AssemblyConfig
from .detect import detect_provider
from .errors import ConfigError, InvalidBodyError, InvalidMessageError
from .models import lookup, resolve
from .observability import tracing
from .raw_items import RawItems, dumps_with_items, items_json, raw_items

__all__ = ["NATIVE_PROVIDERS", "BodyResult", "Variants"]

#: Providers whose bodies the core assembles without the GIL whatever the plan; the other
#: formats' bodies are, when the plan only drops whole items (``items_body.PROVIDERS``).
NATIVE_PROVIDERS = frozenset({"openai_chat"})


@dataclass(frozen=True)
class _Shape:
    """Where a provider's body keeps its history, system and tools, and which fields go
    with its tools (dropped with them: a provider refuses a tool choice without tools)."""

    history: str
    system: str | None
    tools: tuple[str, ...]
    with_tools: tuple[str, ...]
    #: Top-level fields the provider reads under a second spelling, as (camelCase, other):
    #: Gemini's REST API parses proto field names (``system_instruction``) as well as their
    #: JSON names (``systemInstruction``).
    spellings: tuple[tuple[str, str], ...] = ()

    def spelled(self, parsed: dict[str, Any]) -> _Shape:
        """This shape with each field named as ``parsed`` spells it, so that the system is
        read and counted whichever spelling the caller used and written back under that one.

        Raises:
            InvalidBodyError: The body gives one field under both spellings (which one the
                API reads is not documented, so neither can be fitted as the one sent).
        """
        renamed: dict[str, str] = {}
        for camel, other in self.spellings:
            if camel in parsed and other in parsed:
                raise both_spellings(camel, other)
            if other in parsed:
                renamed[camel] = other
        if not renamed:
            return self
        return replace(
            self,
            system=renamed.get(self.system, self.system) if self.system else None,
            with_tools=tuple(renamed.get(k, k) for k in self.with_tools),
        )


#: The fields a Gemini body may spell either way (the reserve's ``generationConfig`` too, so
#: that a body giving it twice is refused as the others are).
_GEMINI_SPELLINGS = (
    ("systemInstruction", "system_instruction"),
    ("toolConfig", "tool_config"),
    ("generationConfig", "generation_config"),
)

_SHAPES = {
    "openai_chat": _Shape("messages", None, ("tools",), ("tool_choice", "parallel_tool_calls")),
    "openai_responses": _Shape(
        "input", "instructions", ("tools",), ("tool_choice", "parallel_tool_calls")
    ),
    "anthropic": _Shape("messages", "system", ("tools",), ("tool_choice",)),
    "gemini": _Shape(
        "contents", "systemInstruction", ("tools",), ("toolConfig",), _GEMINI_SPELLINGS
    ),
    "bedrock_converse": _Shape("messages", "system", ("toolConfig", "tools"), ("toolConfig",)),
}
#: Where each format may name its output reserve, the first present winning (as the core
#: reads it for the native path). Each step lists the spellings of one field: Gemini's
#: ``generation_config.max_output_tokens`` is its ``generationConfig.maxOutputTokens``.
_RESERVE_PATHS: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("max_completion_tokens",),),
    (("max_tokens",),),
    (("max_output_tokens",),),
    (("generationConfig", "generation_config"), ("maxOutputTokens", "max_output_tokens")),
    (("inferenceConfig",), ("maxTokens",)),
)
#: A body's output reserve: the field that named it (``max_tokens``,
#: ``generationConfig.maxOutputTokens``...) and its count.
Reserve = tuple[str, int]
#: Assemblers made for a (provider, model, reserve) are kept this many at most.
_VARIANTS = 256


class Variants:
    """The assemblers one assembler uses for bodies of another provider, model or output
    reserve: same policy, summarizer, store, cache and sinks, built once and shared (made as
    the base is made: by its own class)."""

    def __init__(
        self, base: Assembles, kwargs: dict[str, Any], overrides: dict[str, Any] | None
    ) -> None:
        self._base = base
        self._kwargs = kwargs
        #: ``AssemblyConfig.for_model`` overrides when bodies pick their model's entry.
        self.overrides = overrides
        self._made: dict[tuple[str, str | None, int | None], Assembles] = {}
        #: Bodies' heads read for the base provider (``_head``), by their bytes.
        self.heads: dict[bytes, _Head] = {}
        self._lock = threading.Lock()

    def get(self, provider: str, model: str | None, reserve: Reserve | None) -> Assembles:
        """The assembler for a body of ``provider`` naming ``model`` (a table name, or None
        for the base config) and output reserve ``reserve`` (None for the config's).

        Raises:
            ConfigError: The reserve leaves no budget (``no_budget``).
        """
        base = self._base
        if model is None and reserve is None and provider == base.provider and not base._detect:
            return base
        key = (provider, model, None if reserve is None else reserve[1])
        made = self._made.get(key)
        if made is not None:
            return made
        config = self._config(model, reserve)
        made: Assembles = type(base)(config, provider=provider, **self._kwargs)  # type: ignore[call-arg]
        with self._lock:
            if len(self._made) >= _VARIANTS:
                self._made.clear()
            self._made[key] = made
        return made

    def detected(self, messages: Any) -> Assembles:
        """The assembler for ``messages`` of the format ``detect_provider`` finds in them."""
        return self.get(detect_provider(messages), None, None)

    def _config(self, model: str | None, reserve: Reserve | None) -> AssemblyConfig:
        sized = self._base.config
        if model is not None:
            sized = AssemblyConfig.for_model(model, **(self.overrides or {}))
        if reserve is None:
            return sized
        field, count = reserve
        values = sized.to_dict()
        if model is not None:
            values["model_input_limit"] = lookup(model).input_limit(count)
        limit = values["model_input_limit"]
        if limit - count - sized.margin_tokens <= 0:
            raise no_budget(field, count, limit, sized.margin_tokens)
        values["output_reserve_tokens"] = count
        return AssemblyConfig.from_dict(values)


def no_budget(field: str, reserve: int, limit: int, margin: int) -> ConfigError:
    """The error for a body whose output reserve leaves no budget, worded as the core's
    (``rust/src/body.rs``) so that every provider's body gets the same one. It names
    ``model_input_limit``: the body's own field takes the place of ``output_reserve_tokens``,
    so changing that key would change nothing."""
    reason = (
        f"{limit} leaves no budget for the body's {field} {reserve} (its output reserve, in "
        f"place of output_reserve_tokens) and safety_margin_tokens {margin}: {limit} - "
        f"{reserve} - {margin} = {limit - reserve - margin}; raise model_input_limit or send "
        f"a smaller {field}"
    )
    return ConfigError(
        f"config `model_input_limit`: {reason}", key="model_input_limit", reason=reason
    )


def _bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, (bytearray, memoryview)):
        return bytes(body)
    raise InvalidBodyError(
        f"a request body must be bytes, got {type(body).__name__}",
        reason="must be bytes",
    )


def _model_entry(asm: Assembles, model: Any) -> str | None:
    """The models-table name of a body's ``model`` when the assembler picks entries by model
    (unknown names use the assembler's own config, said by a warning and a metric, or refused
    under ``ringbound.models.set_strict``)."""
    if asm._variants.overrides is None or not isinstance(model, str):
        return None
    info = resolve(model, where="the body's model", provider=asm.provider, sink=asm._sink)
    return None if info is None else info.name


def _native_reason(asm: Assembles, state: Any, session_id: Any) -> str | None:
    """Why a chat body cannot take the native path, or None when it can."""
    if session_id is not None:
        return "session_id: the session store is read and written in Python"
    if state is not None or asm.config.cache_stable:
        return "cache-stable state is planned in Python"
    if asm._summarizer is not None:
        return "a summarizer may have to run"
    if asm._gate is not None:
        return "provider counts or learned figures check the request in Python"
    if asm._placed:
        return f"note_placement {asm.config.note_placement} places notes in Python"
    return None


def assemble(
    asm: Assembles, body: Any, state: Any = None, session_id: Any = None
) -> BodyResult | _DictPath:
    """``Assembler.assemble_body``: the native result, or what the dict path needs."""
    data = _bytes(body)
    limit = asm.config.max_request_bytes
    if len(data) > limit:
        reason = f"the request body is {len(data)} bytes, over max_request_bytes = {limit}"
        raise InvalidBodyError(reason, reason=reason)
    if not asm._detect and asm.provider in NATIVE_PROVIDERS:
        model, entry, reserve = None, None, None
        if asm._variants.overrides is not None:
            model, reserve = _core.body_head(data, limit)
            entry = _model_entry(asm, model)
        target = asm._variants.get(asm.provider, entry, reserve)
        why = _native_reason(target, state, session_id)
        if why is None:
            return _native(target, data, entry)
    if not asm._detect and _native_reason(asm, state, session_id) is None:
        cut = _core.split_body_at(data, _SHAPES[asm.provider].history, limit)
        if cut is not None:
            head = _head(asm, cut.head)
            cache_markers.check_body(asm.provider, head.parsed)
            why = _native_reason(head.target, state, session_id)
            if why is None:
                keys = (head.shape.history, head.shape.system)
                given = head.native_inputs()
                done = items_body.assemble(head.target, data, cut, given, keys, head.entry)
                if done is not None:
                    return done
                # The items path: the history's items stay their own bytes (``RawItem``),
                # which the core reads again from its kept reading and writes back where kept
                # unchanged.
                parsed = _parse(cut.head)
                parsed[head.shape.history] = raw_items(cut.array(), cut.spans)
                return _DictPath(
                    head.target, parsed, head.shape, asm.provider, head.entry, _RENDERED
                )
    try:
        parsed = _parse(data)
    except InvalidBodyError:
        deep = _deep_chat_body(asm, data, state, session_id) if asm._detect else None
        if deep is None:
            raise
        return deep
    provider = detect_provider(parsed) if asm._detect else asm.provider
    cache_markers.check_body(provider, parsed)
    shape = _SHAPES[provider].spelled(parsed)
    entry = _model_entry(asm, parsed.get("model"))
    target = asm._variants.get(provider, entry, output_reserve(parsed))
    why = _native_reason(target, state, session_id)
    cut = None
    if why is None and asm._detect and provider not in NATIVE_PROVIDERS:
        # A detected body of another format: the format cost a parse, but the core still
        # reads its history from the body's bytes, as when the provider is named.
        got, got_cut = _split(data, shape.history, limit)
        if got is not None:
            parsed, cut = got, got_cut
            shape = _SHAPES[provider].spelled(parsed)
    if why is None and provider in NATIVE_PROVIDERS:
        # A detected chat body: the format cost a parse, the assembly is still native.
        return _native(target, data, entry)
    if why is None and cut is not None:
        _, tools, system = split(parsed, shape)
        given = items_body.inputs(provider, target._adapter, tools, system)
        keys = (shape.history, shape.system)
        done = items_body.assemble(target, data, cut, given, keys, entry)
        if done is not None:
            return done
        parsed[shape.history] = raw_items(cut.array(), cut.spans)
        why = _RENDERED
    elif why is None:
        why = "the core could not split the body's history"
    return _DictPath(target, parsed, shape, provider, entry, why)


#: Members whose values telling the provider reads (the others only by their presence).
_READ_BY_DETECTION = frozenset({"messages", "input", "contents", "system", "model"})


def _deep_chat_body(asm: Assembles, data: bytes, state: Any, session_id: Any) -> BodyResult | None:
    """A body nested too deeply for the JSON parser (a ``metadata`` 100,000 deep), assembled
    as it is with ``provider="openai_chat"``: when its other members tell OpenAI Chat and the
    native path may take it, the core reads it from its bytes, the deep value passed through
    unread. None otherwise: the parser's refusal stands, as it does for a named provider
    whose body needs parsing."""
    members = shallow_members(data)
    if members is None or any(members.get(k) is TOO_DEEP for k in _READ_BY_DETECTION):
        return None
    try:
        provider = detect_provider(members)
    except InvalidMessageError:
        return None
    if provider not in NATIVE_PROVIDERS:
        return None
    model, reserve = _core.body_head(data, asm.config.max_request_bytes)
    entry = _model_entry(asm, model)
    target = asm._variants.get(provider, entry, reserve)
    if _native_reason(target, state, session_id) is not None:
        return None
    return _native(target, data, entry)


#: Why a body the native path could have taken took the items path.
_RENDERED = (
    "the plan is one the body path does not write (a summary, neighbours to merge that it "
    "does not, the tools dropped): the core writes it from the parsed items, or the core "
    "refused the request"
)


class _DictPath(NamedTuple):
    """What the dict (or items) path needs of a body the native path did not take."""

    target: Assembles
    parsed: dict[str, Any]
    shape: _Shape
    provider: str
    entry: str | None
    why: str


def _native(asm: Assembles, data: bytes, entry: str | None) -> BodyResult:
    start = time.perf_counter()
    span = tracing.start_span(asm._tracer, asm.provider)
    try:
        # The core refuses both cache lifetimes set together, as the dict path does.
        got = _core.assemble_openai_chat_body(data, asm._core, budget_rule(asm), asm._cache)
        return native_result(asm, data, got, start, span, entry)
    except BaseException as e:
        tracing.rejected(e, asm.provider, asm._sink, span)
        raise


class _Head:
    """What a body's fields besides its history give (``SplitBody.head``): the assembler
    for its model and output reserve, where it keeps its fields, and what the core counts of
    its system and tools. A session sends the same head every turn, so each distinct head
    is read once (``_head``)."""

    __slots__ = ("_inputs", "entry", "parsed", "shape", "target")

    def __init__(self, parsed: dict[str, Any], shape: _Shape, entry: str | None, target: Any):
        #: Read, never written: the items path parses the head again for its own copy.
        self.parsed = parsed
        self.shape = shape
        self.entry = entry
        self.target: Assembles = target
        self._inputs: tuple[items_body.Inputs | None] | None = None

    def native_inputs(self) -> items_body.Inputs | None:
        """``items_body.inputs`` of this head, read on first use.

        Raises:
            InvalidBodyError: The tools are not a list (not kept: raised for every body).
        """
        if self._inputs is None:
            _, tools, system = split(self.parsed, self.shape)
            target = self.target
            self._inputs = (items_body.inputs(target.provider, target._adapter, tools, system),)
        return self._inputs[0]


#: Heads kept per assembler (``_head``): a gateway's sessions differ in few heads. A head
#: larger than ``_HEAD_BYTES`` is read for its body alone, so that what is kept stays small.
_HEADS = 64
_HEAD_BYTES = 256 << 10


def _head(asm: Assembles, head: bytes) -> _Head:
    """The reading of a body's ``head`` for ``asm``, kept by its bytes.

    Raises:
        InvalidBodyError: The head is not a JSON object, gives a field under both of its
            spellings, or names an output reserve that is not a count.
        ConfigError: The body's output reserve leaves no budget.
    """
    heads = asm._variants.heads
    got = heads.get(head)
    if got is not None:
        return got
    parsed = _parse(head)
    shape = _SHAPES[asm.provider].spelled(parsed)
    entry = _model_entry(asm, parsed.get("model"))
    target = asm._variants.get(asm.provider, entry, output_reserve(parsed))
    made = _Head(parsed, shape, entry, target)
    if len(head) <= _HEAD_BYTES:
        if len(heads) >= _HEADS:
            heads.clear()
        heads[head] = made
    return made


def _split(data: bytes, history: str, limit: int) -> tuple[dict[str, Any], Any] | tuple[None, None]:
    """The body parsed but for its history (left ``[]``), and the core's split of it
    (``_core.SplitBody``: the history stays in ``data`` until the items path asks for it);
    Nones when the core cannot split the body so (``_parse`` then says what is wrong)."""
    cut = _core.split_body_at(data, history, limit)
    if cut is None:
        return None, None
    return _parse(cut.head), cut


def holds_raw_items(parsed: dict[str, Any], shape: _Shape) -> bool:
    history = parsed.get(shape.history)
    return type(history) is RawItems and len(history) > 0


def whole(parsed: dict[str, Any], shape: _Shape, body: Any) -> dict[str, Any] | None:
    """The body parsed whole when ``parsed`` kept its history's items as bytes, else None:
    an item the core refused is read again the usual way, so that a body that is not JSON is
    refused as such (``InvalidBodyError``) and a malformed item in the dict path's words."""
    return _parse(_bytes(body)) if holds_raw_items(parsed, shape) else None


def _parse(data: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        reason = f"the request body is not valid JSON ({e})"
        raise InvalidBodyError(reason, reason=reason) from None
    if not isinstance(parsed, dict):
        reason = "the request body must be a JSON object"
        raise InvalidBodyError(reason, reason=reason)
    return parsed


def output_reserve(parsed: dict[str, Any]) -> Reserve | None:
    """The output reserve a parsed body names and its field (as the body spells it), as the
    core reads them from bytes.

    Raises:
        InvalidBodyError: The reserve is not a count, or a field on its path is given under
            two spellings (``generationConfig`` and ``generation_config``).
    """
    for path in _RESERVE_PATHS:
        value: Any = parsed
        names: list[str] = []
        for spellings in path:
            if not isinstance(value, dict):
                value = None
                break
            given = [k for k in spellings if k in value]
            if len(given) > 1:
                raise both_spellings(*given)
            names.append(given[0] if given else spellings[0])
            value = value.get(names[-1])
        if value is None:
            continue
        name = ".".join(names)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            reason = f"{name} must be a non-negative integer, got {value!r:.40}"
            raise InvalidBodyError(reason, reason=reason)
        return name, value
    return None


def both_spellings(first: str, second: str) -> InvalidBodyError:
    """The error for a body that gives one field under both of its spellings."""
    reason = (
        f"the body gives both {first} and {second}, two spellings of one field; "
        "send only one of them"
    )
    return InvalidBodyError(reason, reason=reason)


def split(parsed: dict[str, Any], shape: _Shape) -> tuple[Any, Any, Any]:
    """The history, tools and system of a parsed body."""
    history = parsed.get(shape.history)
    if not isinstance(history, (list, RawItems)):
        reason = f"{shape.history} must be a list, got {type(history).__name__}"
        raise InvalidBodyError(reason, reason=reason)
    tools: Any = parsed
    for key in shape.tools:
        tools = tools.get(key) if isinstance(tools, dict) else None
    if tools is not None and not isinstance(tools, list):
        reason = f"{'.'.join(shape.tools)} must be a list, got {type(tools).__name__}"
        raise InvalidBodyError(reason, reason=reason)
    system = parsed.get(shape.system) if shape.system is not None else None
    return history, tools, system


def joined(
    parsed: dict[str, Any],
    shape: _Shape,
    result: Any,
    tools: Any,
    provider: str,
    entry: str | None,
    why: str,
) -> BodyResult:
    """The dict path's body: the input's fields with the assembled history, system and tools
    in their places (a dropped tools schema takes its companions with it). Kept items that
    stayed bytes (the ``items`` path) are written as those bytes."""
    raw = holds_raw_items(parsed, shape)
    out = dict(parsed)
    history = items_json(result.messages) if raw else None
    out[shape.history] = result.messages if history is None else orjson.Fragment(history)
    if shape.system is not None and (result.system is not None or shape.system in out):
        out[shape.system] = result.system
    if tools is not None and result.tools is None:
        for key in (shape.tools[0], *shape.with_tools):
            out.pop(key, None)
    return BodyResult(
        body=dumps_with_items(out) if raw else orjson.dumps(out),
        report=result.report,
        state=result.state,
        provider=provider,
        path="items" if raw else "dict",
        path_reason=why,
        model=entry,
    )
