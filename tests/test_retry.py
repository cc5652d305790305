"""Context-length refusals and the retry: every provider's refusal recognized in each shape it
comes in (SDK exceptions faked by their attributes and class names, HTTP bodies, strings), the
look-alikes that must not match (rate limits on tokens, other 400s), and the retry's counting,
ledger feeding and async path, with a fake assembler and with the real one."""

from __future__ import annotations

import asyncio
import json
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringbound as rb
from ringbound.errors import BudgetExceededError, ConfigError
from ringbound.retry import (
    ContextOverflow,
    RetryOutcome,
    is_context_length_error,
    with_context_retry,
    with_context_retry_async,
)

OPENAI_CHAT = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted in "
    "130592 tokens. Please reduce the length of the messages."
)
OPENAI_COMPLETION = (
    "This model's maximum context length is 4097 tokens. However, you requested 4222 tokens "
    "(1222 in the messages, 3000 in the completion). Please reduce the length of the messages "
    "or completion."
)
OPENAI_LEGACY = (
    "This model's maximum context length is 4097 tokens, however you requested 4231 tokens "
    "(3975 in your prompt; 256 for the completion). Please reduce your prompt; or completion "
    "length."
)
OPENROUTER = (
    "This endpoint's maximum context length is 32768 tokens. However, you requested about 42832 "
    'tokens (42832 of text input). Please reduce the length of either one, or use the "middle-'
    'out" transform to compress your prompt automatically.'
)
OPENAI_RESPONSES = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
ANTHROPIC = "prompt is too long: 208310 tokens > 200000 maximum"
ANTHROPIC_WITH_OUTPUT = (
    "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease "
    "input length or `max_tokens` and try again"
)
GEMINI = "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
GEMINI_NO_COUNT = "The input token count exceeds the maximum number of tokens allowed (1048576)."
VERTEX = (
    "Unable to submit request because the input token count is 131335 but model only supports "
    "up to 131072. Reduce the input token count and try again. You can also use the CountTokens "
    "API to calculate prompt token count and billable characters."
)
BEDROCK = "Input is too long for requested model."
BEDROCK_TITAN = (
    "400 Bad Request: Too many input tokens. Max input tokens: 8192, request input token count: "
    "9279 "
)
BEDROCK_CLAUDE = (
    "The model returned the following errors: prompt is too long: 200049 tokens > 200000 maximum"
)


def sdk(module: str, *names: str, **class_attrs: Any) -> type[Exception]:
    """A chain of exception classes named as an SDK names them, the last the most derived."""
    cls: type[Exception] = Exception
    for name in names:
        cls = type(name, (cls,), {"__module__": module})
    for key, value in class_attrs.items():
        setattr(cls, key, value)
    return cls


def error(cls: type[Exception], text: str, **attrs: Any) -> Exception:
    """An instance of ``cls`` carrying the attributes the SDK sets on it."""
    err = cls(text)
    vars(err).update(attrs)
    return err


def openai_error(
    message: str,
    *,
    code: str | None = "context_length_exceeded",
    status: int = 400,
    kind: str = "invalid_request_error",
    name: str = "BadRequestError",
) -> Exception:
    """As openai>=1 raises it: ``body`` is the inner error object, ``code`` copied from it."""
    body = {"message": message, "type": kind, "param": "messages", "code": code}
    text = f"Error code: {status} - {{'error': {body!r}}}"
    return error(
        sdk("openai._exceptions", "OpenAIError", "APIError", "APIStatusError", name),
        text,
        message=text,
        body=body,
        code=code,
        type=kind,
        param="messages",
        status_code=status,
        response=SimpleNamespace(status_code=status, headers={}),
    )


def anthropic_error(
    message: str, *, status: int = 400, kind: str = "invalid_request_error"
) -> Exception:
    """As anthropic raises it: ``body`` is the whole JSON body."""
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}
    name = {400: "BadRequestError", 413: "RequestTooLargeError", 429: "RateLimitError"}[status]
    text = f"Error code: {status} - {body!r}"
    return error(
        sdk("anthropic._exceptions", "AnthropicError", "APIError", "APIStatusError", name),
        text,
        message=text,
        body=body,
        status_code=status,
        response=SimpleNamespace(status_code=status),
    )


def genai_error(message: str, *, code: int = 400, status: str = "INVALID_ARGUMENT") -> Exception:
    """As google-genai raises it: int ``code``, str ``status``, ``details`` the response JSON."""
    details = {"error": {"code": code, "message": message, "status": status}}
    return error(
        sdk("google.genai.errors", "APIError", "ClientError"),
        f"{code} {status}. {details}",
        code=code,
        status=status,
        message=message,
        details=details,
        response=None,
    )


def vertex_error(message: str) -> Exception:
    """As google.api_core raises it: ``code`` 400 on the class, ``str`` is code and message."""
    cls = sdk(
        "google.api_core.exceptions",
        "GoogleAPIError",
        "GoogleAPICallError",
        "InvalidArgument",
        code=400,
    )
    return error(cls, f"400 {message}", message=message, errors=(), details=[])


def boto_error(message: str, code: str = "ValidationException", status: int = 400) -> Exception:
    """As botocore raises a modeled bedrock-runtime error: a dict ``response``."""
    return error(
        sdk("botocore.errorfactory", "ClientError", code),
        f"An error occurred ({code}) when calling the Converse operation: {message}",
        response={
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        operation_name="Converse",
    )


def litellm_error(message: str, provider: str) -> Exception:
    """litellm's mapped error: derives from openai's BadRequestError, names the provider."""
    base = sdk("openai._exceptions", "OpenAIError", "APIError", "APIStatusError", "BadRequestError")
    cls = type("ContextWindowExceededError", (base,), {"__module__": "litellm.exceptions"})
    text = f"litellm.ContextWindowExceededError: {message}"
    return error(
        cls, text, message=text, status_code=400, llm_provider=provider, model="some-model"
    )


def overflow(err: Any) -> ContextOverflow:
    got = is_context_length_error(err)
    assert got is not None
    return got


class Wrapped(RuntimeError):
    pass


def wrapped(cause: Exception) -> Exception:
    try:
        raise Wrapped("agent step 7 failed") from cause
    except Wrapped as e:
        return e


GEMINI_BODY = [{"error": {"code": 400, "message": GEMINI, "status": "INVALID_ARGUMENT"}}]
ANTHROPIC_BODY = {"type": "error", "error": {"type": "invalid_request_error", "message": ANTHROPIC}}
OPENAI_HTTP = f"Error code: 400 - {{'error': {{'message': {OPENAI_CHAT!r}}}}}"

RECOGNIZED: list[Any] = [
    # (id, err, provider, prompt_tokens, limit)
    ("openai-chat", openai_error(OPENAI_CHAT), "openai", 130592, 128000),
    ("openai-completion", openai_error(OPENAI_COMPLETION), "openai", 1222, 4097),
    ("openai-legacy-text", OPENAI_LEGACY, "openai", 3975, 4097),
    ("openai-responses", openai_error(OPENAI_RESPONSES), "openai", None, None),
    ("openai-code-only", openai_error("A wording not seen yet."), "openai", None, None),
    ("openrouter-text", OPENROUTER, "openai", 42832, 32768),
    ("anthropic", anthropic_error(ANTHROPIC), "anthropic", 208310, 200000),
    ("anthropic-output", anthropic_error(ANTHROPIC_WITH_OUTPUT), "anthropic", 189136, 204648),
    ("gemini", genai_error(GEMINI), "gemini", 1200000, 1048576),
    ("gemini-no-count", genai_error(GEMINI_NO_COUNT), "gemini", None, 1048576),
    ("vertex", vertex_error(VERTEX), "gemini", 131335, 131072),
    ("bedrock", boto_error(BEDROCK), "bedrock", None, None),
    ("bedrock-titan", boto_error(BEDROCK_TITAN), "bedrock", 9279, 8192),
    ("bedrock-claude", boto_error(BEDROCK_CLAUDE), "bedrock", 200049, 200000),
    ("litellm-text", litellm_error(ANTHROPIC, "anthropic"), "anthropic", 208310, 200000),
    ("litellm-class-only", litellm_error("too big", "vertex_ai"), "gemini", None, None),
    ("wrapped", wrapped(openai_error(OPENAI_CHAT)), "openai", 130592, 128000),
    ("body-dict", {"error": {"message": OPENAI_CHAT}}, "openai", 130592, 128000),
    ("body-code-only", {"error": {"code": "context_length_exceeded"}}, "openai", None, None),
    ("body-json-gemini-list", json.dumps(GEMINI_BODY), "gemini", 1200000, 1048576),
    ("body-bytes-anthropic", json.dumps(ANTHROPIC_BODY).encode(), "anthropic", 208310, 200000),
    (
        "body-botocore",
        {"Error": {"Code": "ValidationException", "Message": BEDROCK}},
        "bedrock",
        None,
        None,
    ),
    (
        "text-commas",
        "prompt is too long: 242,201 tokens > 200,000 maximum",
        "anthropic",
        242201,
        200000,
    ),
    ("text-gemini", GEMINI, "gemini", 1200000, 1048576),
    ("text-vertex", VERTEX, "gemini", 131335, 131072),
    ("text-bedrock", BEDROCK, "bedrock", None, None),
    ("text-bedrock-titan", BEDROCK_TITAN, "bedrock", 9279, 8192),
    ("text-openai-http", OPENAI_HTTP, "openai", 130592, 128000),
]


@pytest.mark.parametrize(
    ("err", "provider", "prompt", "limit"),
    [pytest.param(*case[1:], id=case[0]) for case in RECOGNIZED],
)
def test_recognizes_and_reads_the_counts(err: Any, provider: str, prompt: Any, limit: Any) -> None:
    got = is_context_length_error(err)
    assert isinstance(got, ContextOverflow)
    assert (got.provider, got.prompt_tokens, got.limit) == (provider, prompt, limit)
    assert got.message and len(got.message) <= 1000


def test_the_message_is_the_providers_own() -> None:
    assert overflow(openai_error(OPENAI_CHAT)).message == OPENAI_CHAT
    assert overflow(anthropic_error(ANTHROPIC)).message == ANTHROPIC
    assert overflow(boto_error(BEDROCK)).message == BEDROCK
    assert overflow(genai_error(GEMINI)).message == GEMINI


TPM = (
    "Request too large for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, "
    "Requested 45000. The input or output tokens must be reduced in order to run successfully. "
    "Visit https://platform.openai.com/account/rate-limits to learn more."
)
ANTHROPIC_TPM = (
    "This request would exceed the rate limit for your organization (org) of 40,000 input "
    "tokens per minute."
)
GEMINI_QUOTA = (
    "Quota exceeded for metric: generativelanguage.googleapis.com/"
    "generate_content_paid_tier_input_token_count, limit: 1000000"
)
BEDROCK_THROTTLED = "Too many tokens, please wait before trying again."
TOOL_SCHEMA = (
    "Invalid schema for function 'get_weather': In context=(), 'required' is required to be "
    "supplied and to be an array including every key in properties. Missing 'city'."
)
OPENAI_MAX_TOKENS = (
    "max_tokens is too large: 100000. This model supports at most 16384 completion tokens, "
    "whereas you provided 100000."
)
STRING_TOO_LONG = (
    "Invalid 'messages[1].content': string too long. Expected a string with maximum length "
    "10485760, but got a string with length 12000000 instead."
)
ANTHROPIC_MAX_TOKENS = (
    "max_tokens: 21333 > 4096, which is the maximum allowed number of output tokens for "
    "claude-3-opus-20240229"
)
GEMINI_MAX_OUTPUT = (
    "Unable to submit request because it has a maxOutputTokens value of 100117 but the supported "
    "range is from 1 (inclusive) to 65537 (exclusive). Update the value and try again."
)
BEDROCK_TOOL_NAME = (
    "Value at 'messages.1.member.content.1.member.toolUse.name' failed to satisfy constraint: "
    "Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+"
)
BEDROCK_BODY_SIZE = (
    "1 validation error detected: Value at 'body' failed to satisfy constraint: Member must "
    "have length less than or equal to 25000000"
)


def rate_limited(message: str, code: str | None = "rate_limit_exceeded") -> Exception:
    return openai_error(message, code=code, status=429, kind="tokens", name="RateLimitError")


NOT_RECOGNIZED: list[Any] = [
    ("openai-429-tpm", rate_limited(TPM)),
    ("openai-tpm-text", TPM),
    ("429-whatever-it-says", rate_limited(OPENAI_CHAT, code=None)),
    ("anthropic-429", anthropic_error(ANTHROPIC_TPM, status=429, kind="rate_limit_error")),
    (
        "anthropic-413-bytes",
        anthropic_error("Request too big", status=413, kind="request_too_large"),
    ),
    ("gemini-429-quota", genai_error(GEMINI_QUOTA, code=429, status="RESOURCE_EXHAUSTED")),
    ("bedrock-throttling", boto_error(BEDROCK_THROTTLED, code="ThrottlingException", status=429)),
    ("bedrock-throttling-text", BEDROCK_THROTTLED),
    ("openai-bad-tool-schema", openai_error(TOOL_SCHEMA, code="invalid_function_parameters")),
    ("openai-max-tokens", openai_error(OPENAI_MAX_TOKENS, code="invalid_value")),
    ("openai-string-too-long", openai_error(STRING_TOO_LONG, code="string_above_max_length")),
    ("anthropic-max-tokens", anthropic_error(ANTHROPIC_MAX_TOKENS)),
    ("gemini-max-output", genai_error(GEMINI_MAX_OUTPUT)),
    ("bedrock-tool-name", boto_error(BEDROCK_TOOL_NAME)),
    ("bedrock-body-size", boto_error(BEDROCK_BODY_SIZE)),
    ("value-error", ValueError("invalid literal for int() with base 10: 'x'")),
    ("plain-text", "connection reset by peer"),
    ("none", None),
    ("int", 400),
    ("empty-dict", {}),
    ("empty-str", ""),
    ("empty-bytes", b""),
    ("bad-json", "{not json"),
]


@pytest.mark.parametrize("err", [pytest.param(c[1], id=c[0]) for c in NOT_RECOGNIZED])
def test_look_alikes_do_not_match(err: Any) -> None:
    assert is_context_length_error(err) is None


class Hostile(Exception):
    """An error whose attributes raise when read, and whose str raises too."""

    @property
    def body(self) -> Any:
        raise RuntimeError("response not read")

    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_attributes_that_raise_are_skipped() -> None:
    assert is_context_length_error(Hostile(ANTHROPIC)) is not None
    assert is_context_length_error(Hostile("fine")) is None


def test_a_cycle_in_the_causes_ends() -> None:
    a, b = ValueError("a"), ValueError(BEDROCK)
    a.__cause__, b.__cause__ = b, a
    assert overflow(a).provider == "bedrock"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["error", "message", "code", "status", "Error", "Code", "details", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(st.one_of(JSON, JSON.map(json.dumps), st.binary(max_size=64)))
def test_never_raises_on_any_body(body: Any) -> None:
    got = is_context_length_error(body)
    assert got is None or isinstance(got, ContextOverflow)


# The retry, with a fake assembler ---------------------------------------------------------


class FakeAssembler:
    """Records every call; each notch takes 100 tokens off a 1000-token request."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.calls: list[tuple[str, int, dict[str, Any]]] = []
        self.fail_at = fail_at

    def _result(self, method: str, messages: list[Any], tighten: int, kw: dict[str, Any]) -> Any:
        self.calls.append((method, tighten, kw))
        if tighten == self.fail_at:
            raise BudgetExceededError("nothing more can go", tokens=900, budget=800)
        report = SimpleNamespace(tokens_after=1000 - 100 * tighten, tightened=tighten)
        return SimpleNamespace(messages=messages, report=report)

    def assemble(self, messages: list[Any], *, tighten: int = 0, **kw: Any) -> Any:
        return self._result("assemble", messages, tighten, kw)

    async def assemble_async(self, messages: list[Any], *, tighten: int = 0, **kw: Any) -> Any:
        await asyncio.sleep(0)
        return self._result("assemble_async", messages, tighten, kw)

    @property
    def notches(self) -> list[int]:
        return [t for _, t, _ in self.calls]


class Provider:
    """A send that refuses the first ``refusals`` requests, quoting 110% of their size."""

    def __init__(self, refusals: int, make: Any = None) -> None:
        self.refusals = refusals
        self.sent: list[Any] = []
        self.raised: list[Exception] = []
        self.make = make or (
            lambda n: openai_error(
                f"This model's maximum context length is 800 tokens. However, your messages "
                f"resulted in {n} tokens. Please reduce the length of the messages."
            )
        )

    def __call__(self, result: Any) -> str:
        self.sent.append(result)
        if len(self.sent) <= self.refusals:
            err = self.make(result.report.tokens_after * 11 // 10)
            self.raised.append(err)
            raise err
        return f"reply {len(self.sent)}"


class Ledger:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def observe_usage(self, prompt_tokens: int, local_estimate: int) -> None:
        self.seen.append((prompt_tokens, local_estimate))


def test_a_first_success_sends_once() -> None:
    asm, send = FakeAssembler(), Provider(0)
    out = with_context_retry(send, asm, ["m"], tools=["t"], system="s")
    assert isinstance(out, RetryOutcome)
    assert (out.response, out.retries, out.overflows) == ("reply 1", 0, ())
    assert out.result is send.sent[0]
    assert asm.calls == [("assemble", 0, {"tools": ["t"], "system": "s"})]


@pytest.mark.parametrize("refusals", [1, 2])
def test_each_refusal_tightens_one_notch(refusals: int) -> None:
    asm, send, ledger = FakeAssembler(), Provider(refusals), Ledger()
    out = with_context_retry(send, asm, ["m"], token_ledger=ledger)
    assert asm.notches == list(range(refusals + 1))
    assert out.retries == refusals and out.result is send.sent[-1]
    assert out.result.report.tightened == refusals
    assert [o.prompt_tokens for o in out.overflows] == [1100, 990][:refusals]
    assert ledger.seen == [(1100, 1000), (990, 900)][:refusals]


def test_the_last_refusal_is_raised_with_every_refusal_on_it() -> None:
    asm, send = FakeAssembler(), Provider(10)
    with pytest.raises(Exception) as info:
        with_context_retry(send, asm, ["m"], max_retries=2)
    assert info.value is send.raised[-1]
    assert asm.notches == [0, 1, 2] and len(send.sent) == 3
    overflows = vars(info.value)["ringbound_overflows"]
    assert [o.prompt_tokens for o in overflows] == [1100, 990, 880]
    if sys.version_info >= (3, 11):
        assert "refused as too long 3 times" in info.value.__notes__[-1]


def test_max_retries_zero_sends_once() -> None:
    asm, send = FakeAssembler(), Provider(1)
    with pytest.raises(Exception) as info:
        with_context_retry(send, asm, ["m"], max_retries=0)
    assert info.value is send.raised[0] and asm.notches == [0]


@given(refusals=st.integers(0, 6), max_retries=st.integers(0, 4))
def test_never_more_than_max_retries(refusals: int, max_retries: int) -> None:
    asm, send = FakeAssembler(), Provider(refusals)
    try:
        out = with_context_retry(send, asm, [], max_retries=max_retries)
    except Exception as e:
        assert refusals > max_retries and e is send.raised[-1]
    else:
        assert refusals <= max_retries and out.retries == refusals
    assert asm.notches == list(range(min(refusals, max_retries) + 1))


@pytest.mark.parametrize(
    "err",
    [
        ValueError("boom"),
        rate_limited(TPM),
        anthropic_error(ANTHROPIC_MAX_TOKENS),
    ],
    ids=["value-error", "openai-429-tpm", "anthropic-other-400"],
)
def test_any_other_error_propagates_at_once(err: Exception) -> None:
    asm, send = FakeAssembler(), Provider(5, make=lambda n: err)
    with pytest.raises(type(err)) as info:
        with_context_retry(send, asm, ["m"])
    assert info.value is err and asm.notches == [0]


def test_refusals_without_a_count_do_not_reach_the_ledger() -> None:
    ledger = Ledger()
    send = Provider(1, make=lambda n: boto_error(BEDROCK))
    out = with_context_retry(send, FakeAssembler(), ["m"], token_ledger=ledger)
    assert out.retries == 1 and out.overflows[0].provider == "bedrock" and ledger.seen == []


def test_a_tightened_assembly_that_fails_names_the_refusal_as_its_cause() -> None:
    asm, send = FakeAssembler(fail_at=1), Provider(5)
    with pytest.raises(BudgetExceededError) as info:
        with_context_retry(send, asm, ["m"])
    assert info.value.__cause__ is send.raised[0] and len(send.sent) == 1


def test_a_first_assembly_that_fails_is_raised_as_is() -> None:
    with pytest.raises(BudgetExceededError) as info:
        with_context_retry(Provider(0), FakeAssembler(fail_at=0), ["m"])
    assert info.value.__cause__ is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_max_retries_must_be_an_integer_at_least_zero(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        with_context_retry(Provider(0), FakeAssembler(), [], max_retries=bad)
    assert info.value.key == "max_retries"
    with pytest.raises(ConfigError):
        asyncio.run(with_context_retry_async(Provider(0), FakeAssembler(), [], max_retries=bad))


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"send": "not callable"}, "send"),
        ({"assembler": object()}, "assembler"),
        ({"tighten": 1}, "tighten"),
        ({"token_ledger": rb.SideEffectLedger()}, "token_ledger"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict[str, Any], key: str) -> None:
    args: dict[str, Any] = {"send": Provider(0), "assembler": FakeAssembler(), "messages": []}
    args.update(kwargs)
    with pytest.raises(ConfigError) as info:
        with_context_retry(**args)
    assert info.value.key == key


def test_an_async_send_needs_the_async_retry() -> None:
    async def send(result: Any) -> str:
        return "reply"

    with pytest.raises(ConfigError) as info:
        with_context_retry(send, FakeAssembler(), [])
    assert info.value.key == "send"


# The async path ---------------------------------------------------------------------------


class AsyncProvider(Provider):
    async def __call__(self, result: Any) -> str:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().__call__(result)


@pytest.mark.parametrize("provider", [AsyncProvider, Provider], ids=["async-send", "sync-send"])
def test_async_retry_tightens_the_same_way(provider: type[Provider]) -> None:
    asm, send, ledger = FakeAssembler(), provider(2), Ledger()
    out = asyncio.run(with_context_retry_async(send, asm, ["m"], token_ledger=ledger, tools=[]))
    assert out.response == "reply 3" and out.retries == 2
    assert asm.calls == [("assemble_async", k, {"tools": []}) for k in range(3)]
    assert ledger.seen == [(1100, 1000), (990, 900)]


def test_async_retry_raises_the_last_refusal() -> None:
    asm, send = FakeAssembler(), AsyncProvider(3)
    with pytest.raises(Exception) as info:
        asyncio.run(with_context_retry_async(send, asm, ["m"], max_retries=1))
    assert info.value is send.raised[-1] and asm.notches == [0, 1]
    assert len(vars(info.value)["ringbound_overflows"]) == 2


def test_async_retry_lets_other_errors_through() -> None:
    err = ValueError("boom")
    asm, send = FakeAssembler(), AsyncProvider(1, make=lambda n: err)
    with pytest.raises(ValueError) as info:
        asyncio.run(with_context_retry_async(send, asm, ["m"]))
    assert info.value is err and asm.notches == [0]


# With the real Assembler ------------------------------------------------------------------


def session(rings: int = 30) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs of each day."}]
    for i in range(rings):
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read_log", "arguments": json.dumps({"day": i})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i}: " + "line " * 60},
        ]
    return messages


class Window:
    """A provider with a 2000-token window that counts 10% more than the local estimate."""

    def __init__(self) -> None:
        self.counted: list[int] = []

    def __call__(self, result: rb.AssemblyResult) -> str:
        counted = result.report.tokens_after * 110 // 100
        self.counted.append(counted)
        if counted > 2000:
            raise anthropic_error(f"prompt is too long: {counted} tokens > 2000 maximum")
        return "ok"


def real_assembler() -> rb.Assembler:
    return rb.Assembler(
        rb.AssemblyConfig(model_input_limit=2000, output_reserve_tokens=0, safety_margin_tokens=0)
    )


def test_real_assembler_tightens_until_the_provider_accepts() -> None:
    messages, send, ledger = session(), Window(), Ledger()
    out = with_context_retry(send, real_assembler(), messages, token_ledger=ledger)
    assert out.response == "ok" and out.retries >= 1
    assert out.result.report.tightened == out.retries
    assert send.counted == sorted(send.counted, reverse=True) and send.counted[-1] <= 2000
    assert all(o.provider == "anthropic" for o in out.overflows)
    assert [p for p, _ in ledger.seen] == send.counted[:-1]
    assert all(p * 100 // e in (109, 110) for p, e in ledger.seen)
    assert rb.validate(out.result.messages) == []


def test_real_assembler_async_matches_sync() -> None:
    messages = session()
    sync = with_context_retry(Window(), real_assembler(), messages)
    both = asyncio.run(with_context_retry_async(Window(), real_assembler(), messages))
    assert both.retries == sync.retries
    assert both.result.messages == sync.result.messages


def test_real_token_ledger_is_fed() -> None:
    from ringbound.ledgers.tokens import TokenLedger

    ledger = TokenLedger(2000)
    out = with_context_retry(Window(), real_assembler(), session(), token_ledger=ledger)
    assert out.retries >= 1 and ledger.ratio > 1.0
