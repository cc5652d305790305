"""Context-length refusals and the retry that answers them: ``is_context_length_error`` reads
the OpenAI, Anthropic, Gemini and Bedrock refusals (SDK exceptions, HTTP bodies, plain strings)
without importing any SDK, and ``with_context_retry`` assembles one notch tighter and sends again.

The provider's count is the truth the local estimate is calibrated against, so the prompt tokens
a refusal reports are handed to the run's token ledger on the way.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from .caller_values import plain_dict, plain_int, plain_items, plain_str, shown
from .errors import ConfigError

__all__ = [
    "ContextOverflow",
    "RetryOutcome",
    "is_context_length_error",
    "with_context_retry",
    "with_context_retry_async",
]


@dataclass(frozen=True)
class ContextOverflow:
    """A provider's refusal of a request as longer than the model's context window.

    Attributes:
        provider: The error format it came in: ``openai`` (also OpenAI-compatible servers),
            ``anthropic``, ``gemini`` (Gemini API and Vertex AI) or ``bedrock``; None when
            the shape does not tell.
        prompt_tokens: The prompt tokens the provider counted, when the message says.
        limit: The limit it counted them against, when the message says.
        message: The provider's message.
    """

    provider: str | None
    prompt_tokens: int | None
    limit: int | None
    message: str


@dataclass(frozen=True)
class RetryOutcome:
    """What ``with_context_retry`` got through.

    Attributes:
        response: What ``send`` returned.
        result: The assembly that was sent; keep it (its report, and the state the next turn
            needs), not the first one.
        overflows: The refusals before it, one per notch tightened, oldest first.
    """

    response: Any
    result: Any
    overflows: tuple[ContextOverflow, ...] = field(default=())

    @property
    def retries(self) -> int:
        """How many times the request was tightened and sent again."""
        return len(self.overflows)


_NUM = r"\d{1,3}(?:,\d{3})+|\d+"


def _rx(pattern: str) -> re.Pattern[str]:
    pattern = pattern.replace("#PROMPT#", f"(?P<prompt>{_NUM})")
    return re.compile(pattern.replace("#LIMIT#", f"(?P<limit>{_NUM})"), re.IGNORECASE)


#: The refusals' wordings, each provider's exact ones first so their counts are read, then the
#: shorter phrases that still only ever mean "the prompt is over the window". Rate limits that
#: speak of tokens ("tokens per min", "Too many tokens, please wait") match none of them.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (provider, _rx(pattern))
    for provider, pattern in (
        # "This model's maximum context length is 128000 tokens. However, your messages
        # resulted in 130592 tokens. Please reduce the length of the messages."
        ("openai", r"maximum context length is #LIMIT# tokens"),
        # Responses API: "Your input exceeds the context window of this model. ..."
        ("openai", r"exceeds the context window"),
        ("openai", r"\bcontext_length_exceeded\b"),
        ("openai", r"reduce the length of the messages"),
        ("anthropic", r"prompt is too long(?:: #PROMPT# tokens > #LIMIT# maximum)?"),
        (
            "anthropic",
            r"input length and `?max_tokens`? exceed context limit: #PROMPT# \+ \d+ > #LIMIT#",
        ),
        (
            "gemini",
            r"input token count(?: \(#PROMPT#\))? exceeds the maximum number of tokens "
            r"allowed(?: \(#LIMIT#\))?",
        ),
        # Vertex AI: "Unable to submit request because the input token count is 131335 but
        # model only supports up to 131072."
        (
            "gemini",
            r"input token count is #PROMPT# but (?:the )?model (?:only )?supports up to #LIMIT#",
        ),
        ("gemini", r"exceeds the maximum number of tokens"),
        ("bedrock", r"input is too long for requested model"),
        (
            "bedrock",
            r"too many input tokens\. max input tokens: #LIMIT#, "
            r"request input token count: #PROMPT#",
        ),
        ("bedrock", r"too many input tokens"),
    )
)
#: Where an OpenAI-style message puts the prompt's share of what was requested.
_OPENAI_PROMPT = tuple(
    _rx(pattern)
    for pattern in (
        r"resulted in #PROMPT# tokens",
        r"\(#PROMPT# in (?:the|your) (?:messages|prompt)",
        r"request has #PROMPT# input tokens",
        r"\(#PROMPT# of text input",
    )
)
#: Codes and statuses of rate limits and quotas: a refusal carrying one is never an overflow,
#: whatever its text says about tokens.
_RATE_LIMITED = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "insufficient_quota",
        "resource_exhausted",
        "throttlingexception",
        "servicequotaexceededexception",
        "too_many_requests",
    }
)
_OVERFLOW_CODES = frozenset({"context_length_exceeded"})
#: Exception classes that mean an overflow by their name alone (litellm's mapped error).
_OVERFLOW_CLASSES = frozenset({"ContextWindowExceededError"})
_MODULE_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google": "gemini",
    "vertexai": "gemini",
    "botocore": "bedrock",
    "aiobotocore": "bedrock",
}
_MAX_DEPTH = 6
_MAX_TEXTS = 48
_MAX_TEXT = 8_000
_MAX_MESSAGE = 1_000


@dataclass
class _Evidence:
    """What an error says about itself, gathered from every shape it may come in."""

    texts: list[str] = field(default_factory=list)
    codes: set[str] = field(default_factory=set)
    status: int | None = None
    provider: str | None = None
    classes: set[str] = field(default_factory=set)
    seen: set[int] = field(default_factory=set)

    def text(self, value: str) -> None:
        if value and len(self.texts) < _MAX_TEXTS:
            self.texts.append(value[:_MAX_TEXT])

    def code(self, value: Any) -> None:
        text, number = plain_str(value), plain_int(value)
        if text:
            self.codes.add(text.lower())
        elif number is not None and 100 <= number < 600 and self.status is None:
            self.status = number


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _attr(obj: Any, name: str) -> Any:
    """An attribute that may not exist, or whose property may raise (an unread HTTP body)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _gather(value: Any, ev: _Evidence, depth: int = 0) -> None:
    """What ``value`` says, read into ``ev``. The caller's objects are read as stored where
    they are plain data, and a part whose own code raises while read says nothing: the
    answer is about the parts that could be read, never the caller's exception."""
    if depth > _MAX_DEPTH or value is None or id(value) in ev.seen:
        return
    try:
        _gather_one(value, ev, depth)
    except Exception:
        pass


def _gather_one(value: Any, ev: _Evidence, depth: int) -> None:
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        value = str.__str__(value)
        ev.text(value)
        if value.lstrip().startswith(("{", "[")):
            try:
                _gather(json.loads(value), ev, depth + 1)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser
                pass
        return
    ev.seen.add(id(value))
    items = plain_items(value)
    if isinstance(value, Mapping):
        body = plain_dict(value)
        if body is not None:
            _gather_body(body, ev, depth)
    elif items is not None:
        for item in items[:8]:
            _gather(item, ev, depth + 1)
    elif not isinstance(value, (int, float)):
        _gather_object(value, ev, depth)


def _gather_body(body: dict[Any, Any], ev: _Evidence, depth: int) -> None:
    """An HTTP error body: OpenAI and Anthropic ``{"error": {...}}``, Gemini's (sometimes in a
    list), botocore's ``{"Error": {"Code", "Message"}, "ResponseMetadata": {...}}``."""
    for key, value in list(body.items())[:32]:
        k = plain_str(key)
        if k is None:
            continue
        k = k.lower()
        if k in ("message", "errormessage", "error_message"):
            if isinstance(value, str):
                ev.text(str.__str__(value))
        elif k in ("code", "type", "status", "reason", "__type", "status_code", "httpstatuscode"):
            ev.code(value)
        elif k in ("error", "errors", "details", "detail", "responsemetadata"):
            _gather(value, ev, depth + 1)
    if isinstance(body.get("Error"), Mapping) and ev.provider is None:
        ev.provider = "bedrock"


def _gather_object(obj: Any, ev: _Evidence, depth: int) -> None:
    """An exception (or any object): SDK errors are read by their attributes, not their types."""
    cls = type(obj)
    ev.classes.update(c.__name__ for c in cls.__mro__)
    root = (cls.__module__ or "").split(".")[0]
    provider = _MODULE_PROVIDERS.get(root)
    if root == "litellm":
        provider = _litellm_provider(_attr(obj, "llm_provider"))
    if provider is not None and ev.provider is None:
        ev.provider = provider
    for name in ("status_code", "code", "status", "type"):
        ev.code(_attr(obj, name))
    response = _attr(obj, "response")
    if isinstance(response, Mapping):
        _gather(response, ev, depth + 1)
    elif response is not None:
        ev.code(_attr(response, "status_code"))
    # The body first: its message is the provider's own, where ``message`` and ``str`` often
    # wrap it ("Error code: 400 - {...}").
    for name in ("body", "details", "message"):
        value = _attr(obj, name)
        if isinstance(value, (str, bytes, bytearray, Mapping, list, tuple)):
            _gather(value, ev, depth + 1)
    if isinstance(obj, BaseException):
        for arg in (plain_items(_attr(obj, "args")) or [])[:4]:
            if isinstance(arg, (str, bytes, Mapping)):
                _gather(arg, ev, depth + 1)
        try:
            text = str(obj)
        except Exception:
            text = None
        if isinstance(text, str):
            ev.text(str.__str__(text))
        # An explicit ``raise Wrapper(...) from provider_error`` keeps the refusal readable.
        _gather(obj.__cause__, ev, depth + 1)


def _litellm_provider(name: Any) -> str | None:
    if not isinstance(name, str):
        return None
    name = name.lower()
    for word, provider in (
        ("bedrock", "bedrock"),
        ("anthropic", "anthropic"),
        ("vertex", "gemini"),
        ("gemini", "gemini"),
        ("openai", "openai"),
        ("azure", "openai"),
    ):
        if word in name:
            return provider
    return None


def _int(text: str | None) -> int | None:
    return None if text is None else int(text.replace(",", ""))


def _openai_prompt(text: str) -> int | None:
    for pattern in _OPENAI_PROMPT:
        m = pattern.search(text)
        if m is not None:
            return _int(m.group("prompt"))
    return None


def is_context_length_error(err: Any) -> ContextOverflow | None:
    """Says whether ``err`` is a provider refusing a request as too long for the context window.

    Recognized: the OpenAI (Chat Completions, Responses, and OpenAI-compatible servers),
    Anthropic, Gemini / Vertex AI and Bedrock refusals, as exceptions of their SDKs (read by
    duck typing: ``status_code``, ``code``, ``body``, ``response``, ``message``, ``args``,
    the class and module names; no SDK is imported), litellm's ``ContextWindowExceededError``,
    an exception raised ``from`` one of those, an HTTP error body (dict, JSON str or bytes) or
    a plain string. Rate limits and quotas (HTTP 429, ``rate_limit_exceeded``,
    ``RESOURCE_EXHAUSTED``, ``ThrottlingException``) never match, even when they speak of
    tokens, and neither do other 400s (a bad tool schema, ``max_tokens`` too large) nor
    Anthropic's 413 ``request_too_large``, a cap on bytes (see ``max_request_bytes``).

    Args:
        err: The exception, body or text.

    Returns:
        The refusal, with the prompt tokens and the limit the provider reported where its
        message gives them, or None when ``err`` is not a context-length refusal.

    Example:
        >>> from ringbound.retry import is_context_length_error
        >>> is_context_length_error("prompt is too long: 208310 tokens > 200000 maximum")
        ContextOverflow(provider='anthropic', prompt_tokens=208310, limit=200000, message='prompt is too long: 208310 tokens > 200000 maximum')
        >>> is_context_length_error("Rate limit reached for gpt-4o on tokens per min (TPM)")
    """  # noqa: E501
    ev = _Evidence()
    _gather(err, ev)
    if ev.status == 429 or ev.codes & _RATE_LIMITED:
        return None
    provider = message = None
    prompt = limit = None
    for text in ev.texts:
        for pattern_provider, pattern in _PATTERNS:
            m = pattern.search(text)
            if m is None:
                continue
            found = m.groupdict()
            if message is None:
                provider, message = pattern_provider, text
            if prompt is None:
                prompt = _int(found.get("prompt"))
                if prompt is None and pattern_provider == "openai":
                    prompt = _openai_prompt(text)
            if limit is None:
                limit = _int(found.get("limit"))
            break
    if message is None:
        if not (ev.codes & _OVERFLOW_CODES or ev.classes & _OVERFLOW_CLASSES):
            return None
        provider = "openai" if ev.codes & _OVERFLOW_CODES else None
        message = ev.texts[0] if ev.texts else "context_length_exceeded"
    return ContextOverflow(
        provider=ev.provider or provider,
        prompt_tokens=prompt,
        limit=limit,
        message=message[:_MAX_MESSAGE],
    )


def _check(
    send: Any, assembler: Any, method: str, max_retries: Any, ledger: Any, kwargs: Mapping
) -> int:
    """``max_retries`` as a plain int, once the arguments are checked."""
    retries = plain_int(max_retries)
    if retries is None or retries < 0:
        raise ConfigError(
            f"max_retries must be an integer >= 0, got {shown(max_retries)}",
            key="max_retries",
            reason="must be an integer >= 0",
        )
    if not callable(send):
        raise ConfigError(
            f"send must be callable, got {type(send).__name__}",
            key="send",
            reason="must be callable",
        )
    if not callable(_attr(assembler, method)):
        raise ConfigError(
            f"assembler must have a {method} method, got {type(assembler).__name__}",
            key="assembler",
            reason=f"must have {method}",
        )
    if "tighten" in kwargs:
        raise ConfigError(
            "tighten is set by the retry, one notch per refusal; do not pass it",
            key="tighten",
            reason="set by the retry",
        )
    if ledger is not None and not callable(_attr(ledger, "observe_usage")):
        raise ConfigError(
            f"token_ledger must have observe_usage (a ringbound TokenLedger), "
            f"got {type(ledger).__name__}",
            key="token_ledger",
            reason="must have observe_usage",
        )
    return retries


class _Refusals:
    """The refusals of one retried send: each is fed to the ledger; the last one is what the
    caller sees when the retries run out."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self.overflows: list[ContextOverflow] = []
        self.last: BaseException | None = None

    def absorb(self, err: BaseException, result: Any) -> bool:
        """Takes ``err`` in when it is a context-length refusal (the caller tightens and sends
        again); False for any other error."""
        overflow = is_context_length_error(err)
        if overflow is None:
            return False
        self.overflows.append(overflow)
        self.last = err
        estimate = _attr(_attr(result, "report"), "tokens_after")
        counted = overflow.prompt_tokens is not None and _is_int(estimate) and estimate > 0
        if self.ledger is not None and counted:
            self.ledger.observe_usage(prompt_tokens=overflow.prompt_tokens, local_estimate=estimate)
        return True

    def chain(self, err: BaseException) -> None:
        """A tightened assembly failed: the refusal that asked for it is the cause."""
        if self.last is not None:
            err.__cause__ = self.last

    def exhausted(self) -> BaseException:
        """The last refusal, carrying every refusal of the run (attribute, and a note)."""
        err = cast(BaseException, self.last)  # every attempt before this one was refused
        try:
            err.ringbound_overflows = tuple(self.overflows)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
        counts = ", ".join(
            "?" if o.prompt_tokens is None else str(o.prompt_tokens) for o in self.overflows
        )
        if hasattr(err, "add_note"):
            err.add_note(
                f"ringbound: refused as too long {len(self.overflows)} times (tighten 0.."
                f"{len(self.overflows) - 1}); reported prompt tokens: {counts}"
            )
        return err


def _not_awaitable(response: Any) -> None:
    if inspect.isawaitable(response):
        if inspect.iscoroutine(response):
            response.close()
        raise ConfigError(
            "send returned an awaitable; use with_context_retry_async for an async send",
            key="send",
            reason="must not be async here",
        )


def with_context_retry(
    send: Callable[[Any], Any],
    assembler: Any,
    messages: list[Any],
    *,
    max_retries: int = 2,
    token_ledger: Any = None,
    **assemble_kwargs: Any,
) -> RetryOutcome:
    """Assembles ``messages``, sends the result, and when the provider refuses it as too long
    assembles one notch tighter and sends again, at most ``max_retries`` times.

    Attempt ``k`` (from 0) sends ``assembler.assemble(messages, tighten=k, **assemble_kwargs)``;
    each notch drops at least one more unit, so every retry is strictly smaller.

    Args:
        send: ``send(result) -> response``: sends an ``AssemblyResult`` to the provider and
            returns its response, raising the provider's error on a refusal.
        assembler: The ``Assembler``.
        messages: The session, as for ``assemble``.
        max_retries: How many times to tighten and send again (an integer >= 0).
        token_ledger: The run's ``TokenLedger``: each refusal that quotes the prompt tokens
            is fed to ``observe_usage(prompt_tokens=..., local_estimate=...)`` with the
            refused assembly's ``report.tokens_after``.
        **assemble_kwargs: Passed on to ``assemble`` (``tools``, ``system``, ``pinned``,
            ``ledger``...).

    Returns:
        The response, the assembly that got it, and the refusals before it.

    Raises:
        ConfigError: A bad argument (``max_retries`` not an integer >= 0, ``send`` returned an
            awaitable, ``tighten`` passed, a ``token_ledger`` without ``observe_usage``).
        Exception: Whatever ``send`` raised that is not a context-length refusal, at once.
            After the last retry, the last refusal itself, with every refusal of the run in
            its ``ringbound_overflows`` attribute (and a note on Python 3.11+). An error of
            a tightened assembly (``BudgetExceededError`` when nothing more can go) is raised
            with the refusal as its ``__cause__``.

    Example:
        >>> import ringbound as rb
        >>> from ringbound.retry import with_context_retry
        >>> messages = [{"role": "user", "content": "Read the logs."}]
        >>> for i in range(12):
        ...     messages += [
        ...         {"role": "assistant", "content": None, "tool_calls": [{"id": f"c{i}",
        ...          "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
        ...         {"role": "tool", "tool_call_id": f"c{i}", "content": "ok " * 50}]
        >>> def send(res):  # a provider that counts 20 tokens more than the local estimate
        ...     counted = res.report.tokens_after + 20
        ...     if counted > 800:
        ...         raise ValueError("This model's maximum context length is 800 tokens. However, "
        ...             f"your messages resulted in {counted} tokens. Please reduce the length "
        ...             "of the messages.")
        ...     return "the reply"
        >>> asm = rb.Assembler(rb.AssemblyConfig(model_input_limit=800,
        ...                    output_reserve_tokens=0, safety_margin_tokens=0))
        >>> out = with_context_retry(send, asm, messages)
        >>> out.response, out.retries, out.overflows[0].prompt_tokens
        ('the reply', 1, 818)
    """
    max_retries = _check(send, assembler, "assemble", max_retries, token_ledger, assemble_kwargs)
    refusals = _Refusals(token_ledger)
    for notch in range(max_retries + 1):
        try:
            result = assembler.assemble(messages, tighten=notch, **assemble_kwargs)
        except Exception as e:
            refusals.chain(e)
            raise
        try:
            response = send(result)
        except Exception as e:
            if not refusals.absorb(e, result):
                raise
            continue
        _not_awaitable(response)
        return RetryOutcome(response, result, tuple(refusals.overflows))
    raise refusals.exhausted()


async def with_context_retry_async(
    send: Callable[[Any], Any | Awaitable[Any]],
    assembler: Any,
    messages: list[Any],
    *,
    max_retries: int = 2,
    token_ledger: Any = None,
    **assemble_kwargs: Any,
) -> RetryOutcome:
    """``with_context_retry`` for async callers: assembles with ``assemble_async`` and awaits
    ``send`` when it is async (a sync ``send`` is called as is). Same arguments, result and
    errors."""
    max_retries = _check(
        send, assembler, "assemble_async", max_retries, token_ledger, assemble_kwargs
    )
    refusals = _Refusals(token_ledger)
    for notch in range(max_retries + 1):
        try:
            result = await assembler.assemble_async(messages, tighten=notch, **assemble_kwargs)
        except Exception as e:
            refusals.chain(e)
            raise
        try:
            response = send(result)
            if inspect.isawaitable(response):
                response = await response
        except Exception as e:
            if not refusals.absorb(e, result):
                raise
            continue
        return RetryOutcome(response, result, tuple(refusals.overflows))
    raise refusals.exhausted()
