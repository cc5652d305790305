"""Malformed input: every shape the OpenAI Chat parser refuses, the request limits, pinned
indices, broken pairing and hostile sizes. Each case names the exact exception type, the index
it points at, a substring of its message, and checks the caller's input was left as it was.
A hypothesis test throws random JSON-ish structures at every entry point: only ringbound's own
errors (never a bare Exception, never a Rust panic) may come out."""

from __future__ import annotations

import asyncio
import base64
import struct
import time
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringbound as rb

USER = {"role": "user", "content": "hi"}


def call(call_id: Any = "c1", name: str = "f", arguments: Any = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asking(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def result(call_id: Any = "c1", content: Any = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def nested_list(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def config(**values: Any) -> rb.AssemblyConfig:
    values = {"model_input_limit": 100_000, **values}
    return rb.AssemblyConfig(output_reserve_tokens=0, safety_margin_tokens=0, **values)


def snapshot(value: Any, depth: int = 0) -> Any:
    """A structural copy to compare after the call: values by content (floats by repr, so NaN
    equals itself), other objects by identity; below depth 50 only identity and size, so the
    10 000-deep case does not hit Python's recursion limit."""
    if depth > 50:
        return ("deep", id(value), len(value) if isinstance(value, (list, dict)) else None)
    if isinstance(value, dict):
        return ("dict", [(k, snapshot(v, depth + 1)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [snapshot(v, depth + 1) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return ("object", id(value))


Entry = Callable[[Any, Any, list[Any], rb.AssemblyConfig], Any]
ENTRIES: dict[str, Entry] = {
    "assemble": lambda m, tools, pins, cfg: rb.Assembler(cfg).assemble(m, tools, pinned=pins),
    "count_tokens": lambda m, tools, pins, cfg: rb.count_tokens(m, tools=tools),
    "validate": lambda m, tools, pins, cfg: rb.validate(m),
}
#: Which entry points a case applies to: the message parser is shared by all three; tools
#: are not an argument of validate; limits and pins belong to the assembler's config.
ALL = ("assemble", "count_tokens", "validate")
WITH_TOOLS = ("assemble", "count_tokens")
ASSEMBLE = ("assemble",)

M = rb.InvalidMessageError
C = rb.ConfigError
P = rb.PairingError


def case(
    id_: str,
    messages: Any,
    error: type[rb.RingboundError],
    index: Any,
    text: str,
    entries: tuple[str, ...] = ALL,
    tools: Any = None,
    pinned: tuple[Any, ...] = (),
    cfg: dict[str, Any] | None = None,
) -> list[Any]:
    """One malformed input, expanded to a test per entry point that takes it."""
    return [
        pytest.param(
            entry, messages, error, index, text, tools, pinned, cfg or {}, id=f"{entry}-{id_}"
        )
        for entry in entries
    ]


CASES = [
    # The request as a whole.
    *case("messages-dict", {"role": "user", "content": "x"}, M, None, "must be a list"),
    *case("messages-str", "hello", M, None, "must be a list"),
    *case("messages-none", None, M, None, "must be a list"),
    *case("messages-int", 3, M, None, "must be a list"),
    *case(
        "max-messages",
        [USER, USER, USER],
        M,
        None,
        "over max_messages = 2",
        ASSEMBLE,
        cfg={"max_messages": 2},
    ),
    *case(
        "max-request-bytes",
        [USER, {"role": "user", "content": "x" * 200}],
        M,
        None,
        "over max_request_bytes = 100",
        ASSEMBLE,
        cfg={"max_request_bytes": 100},
    ),
    # One message.
    *case("message-not-dict", [USER, 5], M, 1, "must be an object"),
    *case("message-list", [USER, ["role", "user"]], M, 1, "must be an object"),
    *case("missing-role", [{"content": "x"}], M, 0, "missing `role`"),
    *case("unknown-role", [{"role": "robot", "content": "x"}], M, 0, "unknown role 'robot'"),
    *case(
        "legacy-function-role",
        [USER, {"role": "function", "name": "f", "content": "x"}],
        M,
        1,
        "legacy role 'function'",
    ),
    *case("role-not-string", [{"role": 1, "content": "x"}], M, 0, "`role` must be a string"),
    *case("role-null", [{"role": None, "content": "x"}], M, 0, "`role` must be a string"),
    *case(
        "content-int",
        [{"role": "user", "content": 1}],
        M,
        0,
        "`content` must be a string or a list",
    ),
    *case(
        "content-dict", [{"role": "user", "content": {"a": 1}}], M, 0, "`content` must be a string"
    ),
    *case("system-without-content", [{"role": "system"}], M, 0, "missing `content`"),
    *case("user-without-content", [{"role": "user"}], M, 0, "missing `content`"),
    *case(
        "tool-without-content",
        [USER, asking(call()), {"role": "tool", "tool_call_id": "c1"}],
        M,
        2,
        "missing `content`",
    ),
    *case(
        "part-not-object",
        [{"role": "user", "content": ["hi"]}],
        M,
        0,
        "content[0] must be an object",
    ),
    *case(
        "part-without-type",
        [{"role": "user", "content": [{"text": "x"}]}],
        M,
        0,
        "content[0] has no string `type`",
    ),
    *case(
        "unknown-part-type",
        [{"role": "user", "content": [{"type": "video", "video": "x"}]}],
        M,
        0,
        "type 'video'",
    ),
    *case(
        "image-part-in-assistant",
        [
            USER,
            {
                "role": "assistant",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}],
            },
        ],
        M,
        1,
        "type 'image_url'",
    ),
    *case(
        "text-part-non-string",
        [{"role": "user", "content": [{"type": "text", "text": 5}]}],
        M,
        0,
        "content[0].text must be a string",
    ),
    *case(
        "text-part-without-text",
        [{"role": "user", "content": [{"type": "text"}]}],
        M,
        0,
        "content[0] has no `text`",
    ),
    *case(
        "image-url-without-url",
        [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        M,
        0,
        "image_url.url must be a string",
    ),
    *case(
        "image-url-not-object",
        [{"role": "user", "content": [{"type": "image_url", "image_url": "https://x/a.png"}]}],
        M,
        0,
        "image_url must be an object",
    ),
    *case(
        "image-bad-detail",
        [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://x/a.png", "detail": "ultra"},
                    }
                ],
            }
        ],
        M,
        0,
        "detail must be one of auto, low, high",
    ),
    *case(
        "name-not-string",
        [{"role": "user", "content": "x", "name": 3}],
        M,
        0,
        "`name` must be a string",
    ),
    # Tool calls.
    *case(
        "tool-calls-not-list",
        [USER, {"role": "assistant", "tool_calls": {"id": "c1"}}],
        M,
        1,
        "`tool_calls` must be a list",
    ),
    *case(
        "tool-calls-empty",
        [USER, {"role": "assistant", "content": "x", "tool_calls": []}],
        M,
        1,
        "`tool_calls` is an empty list",
    ),
    *case(
        "tool-calls-on-user",
        [{"role": "user", "content": "x", "tool_calls": [call()]}],
        M,
        0,
        "role 'user' cannot carry `tool_calls`",
    ),
    *case("call-not-object", [USER, asking("c1")], M, 1, "tool_calls[0] must be an object"),
    *case(
        "call-without-id",
        [
            USER,
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
        ],
        M,
        1,
        "tool_calls[0] has no `id`",
    ),
    *case("call-id-not-string", [USER, asking(call(7))], M, 1, "tool_calls[0].id must be a string"),
    *case("call-id-empty", [USER, asking(call(""))], M, 1, "tool_calls[0].id is empty"),
    *case(
        "call-unknown-type",
        [USER, asking({**call(), "type": "code"})],
        M,
        1,
        "tool_calls[0].type 'code' is not one of function, custom",
    ),
    *case(
        "call-without-function",
        [USER, asking({"id": "c1", "type": "function"})],
        M,
        1,
        "tool_calls[0].function must be an object",
    ),
    *case(
        "call-without-name",
        [USER, asking({"id": "c1", "type": "function", "function": {"arguments": "{}"}})],
        M,
        1,
        "tool_calls[0].function.name must be a string",
    ),
    *case(
        "arguments-dict",
        [USER, asking(call(arguments={"a": 1}))],
        M,
        1,
        "arguments must be a JSON-encoded string",
    ),
    *case(
        "arguments-missing",
        [USER, asking({"id": "c1", "type": "function", "function": {"name": "f"}})],
        M,
        1,
        "has no `arguments`",
    ),
    *case(
        "legacy-function-call",
        [
            USER,
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "f", "arguments": "{}"},
            },
        ],
        M,
        1,
        "legacy `function_call`",
    ),
    # Tool results.
    *case(
        "tool-without-tool-call-id",
        [USER, asking(call()), {"role": "tool", "content": "x"}],
        M,
        2,
        "needs `tool_call_id`",
    ),
    *case(
        "tool-call-id-not-string",
        [USER, asking(call()), result(1)],
        M,
        2,
        "`tool_call_id` must be a string",
    ),
    *case(
        "tool-call-id-list",
        [USER, asking(call()), {"role": "tool", "content": "x", "tool_call_ids": ["c1"]}],
        M,
        2,
        "needs `tool_call_id`",
    ),
    *case(
        "tool-call-id-empty", [USER, asking(call()), result("")], M, 2, "`tool_call_id` is empty"
    ),
    # Values JSON cannot carry.
    *case(
        "unserializable-object",
        [USER, {"role": "user", "content": object()}],
        M,
        1,
        "cannot be serialized as JSON",
    ),
    *case(
        "unserializable-set",
        [USER, USER, {"role": "user", "content": "x", "meta": {1, 2}}],
        M,
        2,
        "cannot be serialized as JSON",
    ),
    *case(
        "int-over-64-bits",
        [{"role": "user", "content": "x", "seed": 2**70}],
        M,
        0,
        "cannot be serialized as JSON",
    ),
    *case(
        "lone-surrogate-content",
        [{"role": "user", "content": "a\ud800b"}],
        M,
        0,
        "cannot be serialized as JSON",
    ),
    *case(
        "lone-surrogate-key",
        [USER, {"role": "user", "content": "a", "\udc00": 1}],
        M,
        1,
        "cannot be serialized as JSON",
    ),
    *case(
        "lone-surrogate-call-id",
        [USER, asking(call("c\udfff"))],
        M,
        1,
        "cannot be serialized as JSON",
    ),
    # orjson writes NaN as null (documented in docs/providers/openai_chat.md): a required
    # field holding NaN is still refused.
    *case("nan-user-content", [{"role": "user", "content": float("nan")}], M, 0, "content"),
    *case(
        "deep-nesting-10k",
        [{"role": "user", "content": nested_list(10_000)}],
        M,
        0,
        "ecursion limit",
    ),
    *case(
        "deep-nesting-200",
        [USER, {"role": "user", "content": "x", "meta": nested_list(200)}],
        M,
        1,
        "ecursion limit",
    ),
    # The tools parameter.
    *case("tools-dict", [USER], M, None, "tools must be a list", WITH_TOOLS, tools={"a": 1}),
    *case("tools-str", [USER], M, None, "tools must be a list", WITH_TOOLS, tools="f"),
    *case(
        "tools-entry-int", [USER], M, None, "tools[0]: expected an object", WITH_TOOLS, tools=[1]
    ),
    *case(
        "tools-entry-without-function",
        [USER],
        M,
        None,
        "tools[0]: `function` must be an object",
        WITH_TOOLS,
        tools=[{"type": "function"}],
    ),
    *case(
        "tools-entry-without-name",
        [USER],
        M,
        None,
        "tools[1]: `function.name` must be a string",
        WITH_TOOLS,
        tools=[
            {"type": "function", "function": {"name": "f"}},
            {"type": "function", "function": {"description": "d"}},
        ],
    ),
    *case(
        "tools-parameters-str",
        [USER],
        M,
        None,
        "`function.parameters` must be an object",
        WITH_TOOLS,
        tools=[{"type": "function", "function": {"name": "f", "parameters": "{}"}}],
    ),
    *case(
        "tools-unserializable",
        [USER],
        M,
        None,
        "tools cannot be serialized",
        WITH_TOOLS,
        tools=[{"type": "function", "function": {"name": "f", "x": object()}}],
    ),
    *case(
        "tools-deep",
        [USER],
        M,
        None,
        "ecursion limit",
        WITH_TOOLS,
        tools=[
            {"type": "function", "function": {"name": "f", "parameters": {"x": nested_list(300)}}}
        ],
    ),
    # Pinned indices.
    *case(
        "pinned-out-of-range",
        [USER],
        C,
        None,
        "integers in [0, 1) for 1 messages, got 5",
        ASSEMBLE,
        pinned=(5,),
    ),
    *case(
        "pinned-negative",
        [USER],
        C,
        None,
        "integers in [0, 1) for 1 messages, got -1",
        ASSEMBLE,
        pinned=(-1,),
    ),
    *case(
        "pinned-bool",
        [USER],
        C,
        None,
        "integers in [0, 1) for 1 messages, got True",
        ASSEMBLE,
        pinned=(True,),
    ),
    *case(
        "pinned-str",
        [USER],
        C,
        None,
        "integers in [0, 1) for 1 messages, got '0'",
        ASSEMBLE,
        pinned=("0",),
    ),
    *case(
        "pinned-float",
        [USER],
        C,
        None,
        "integers in [0, 1) for 1 messages, got 0.0",
        ASSEMBLE,
        pinned=(0.0,),
    ),
    # Broken pairing: the messages parse, the assembler refuses to send them.
    *case(
        "missing-result",
        [USER, asking(call())],
        P,
        [1],
        "must be followed by tool messages",
        ASSEMBLE,
    ),
    *case(
        "partial-results",
        [USER, asking(call("c1"), call("c2")), result("c1")],
        P,
        [1],
        "did not have response messages: c2",
        ASSEMBLE,
    ),
    *case(
        "orphan-result",
        [USER, result("c9")],
        P,
        [1],
        "must be a response to a preceeding message",
        ASSEMBLE,
    ),
    *case(
        "result-not-adjacent",
        [USER, asking(call()), USER, result()],
        P,
        [3],
        "messages[2] (user) comes between",
        ASSEMBLE,
    ),
    *case(
        "result-before-call",
        [USER, result(), asking(call())],
        P,
        [1, 2],
        "only called later",
        ASSEMBLE,
    ),
    *case(
        "duplicate-id-in-one-turn",
        [USER, asking(call(), call()), result(), result()],
        P,
        [1, 3],
        "Duplicate value for 'tool_call_id'",
        ASSEMBLE,
    ),
]


@pytest.mark.parametrize(
    ("entry", "messages", "error", "index", "text", "tools", "pinned", "cfg"), CASES
)
def test_bad_input_is_a_typed_error(
    entry: str,
    messages: Any,
    error: type[rb.RingboundError],
    index: Any,
    text: str,
    tools: Any,
    pinned: tuple[Any, ...],
    cfg: dict[str, Any],
) -> None:
    before = snapshot(messages)
    tools_before = snapshot(tools)
    with pytest.raises(rb.RingboundError) as info:
        ENTRIES[entry](messages, tools, list(pinned), config(**cfg))
    err = info.value
    assert type(err) is error, f"{type(err).__name__}: {err}"
    assert text in str(err)
    if error is P:
        assert [i.index for i in err.issues] == index
    elif error is M:
        assert err.index == index
        assert err.reason
        if index is not None:
            assert str(err).startswith(f"messages[{index}]: ")
            assert err.reason in str(err)
    else:
        assert err.key == "pinned"
    assert snapshot(messages) == before
    assert snapshot(tools) == tools_before


@pytest.mark.parametrize(
    ("messages", "kinds"),
    [
        pytest.param([USER, asking(call())], ["missing_result"], id="missing-result"),
        pytest.param([USER, result("c9")], ["orphan_result"], id="orphan-result"),
        pytest.param(
            [USER, asking(call()), USER, result()],
            ["result_not_adjacent"],
            id="result-not-adjacent",
        ),
        pytest.param(
            [USER, result(), asking(call())],
            ["result_before_call", "missing_result"],
            id="result-before-call",
        ),
        pytest.param(
            [USER, asking(call(), call()), result(), result()],
            ["duplicate_id", "duplicate_id"],
            id="duplicate-id-in-one-turn",
        ),
    ],
)
def test_validate_and_count_accept_broken_pairing(messages: list[Any], kinds: list[str]) -> None:
    """Broken pairing is a verdict of validate and an error of assemble, not a parse error:
    count_tokens still counts, validate lists the same issues PairingError carries."""
    issues = rb.validate(messages)
    assert [i.kind for i in issues] == kinds
    with pytest.raises(rb.PairingError) as info:
        rb.Assembler(config()).assemble(messages)
    assert info.value.issues == issues
    assert rb.count_tokens(messages) > 0


def png_data_url(width: int, height: int, padding: int) -> str:
    """A PNG whose IHDR says ``width`` x ``height``, padded to ``padding`` more bytes."""
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    data = b"\x89PNG\r\n\x1a\n" + chunk + b"\0" * padding
    return "data:image/png;base64," + base64.b64encode(data).decode()


def image_message(url: str, detail: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": url, "detail": detail}}],
        }
    ]


FIVE_MB = 5 * 1024 * 1024


def test_five_megabyte_data_url_image_is_priced_by_the_formula() -> None:
    """The image is priced from its header (OpenAI's formula), never by tokenizing the base64:
    the 5 MB payload costs what a 1024x1024 image costs, as text it costs thousands of times
    more, and counting it takes milliseconds."""
    url = png_data_url(1024, 1024, FIVE_MB)
    frame = rb.count_tokens([{"role": "user", "content": []}])
    # 1024x1024 high: shortest side scaled to 768 -> 768x768 -> 2x2 tiles.
    high = 85 + 170 * 4
    start = time.perf_counter()
    assert rb.count_tokens(image_message(url, "high")) == frame + high
    assert rb.count_tokens(image_message(url, "auto")) == frame + high
    assert rb.count_tokens(image_message(url, "low")) == frame + 85
    res = rb.Assembler(config()).assemble(image_message(url, "high"))
    elapsed = time.perf_counter() - start
    assert res.report.tokens_after == frame + high
    assert elapsed < 2.0
    assert rb.count_tokens([{"role": "user", "content": url}]) > 1000 * high


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (512, 512, 85 + 170),
        (2048, 4096, 85 + 170 * 6),  # -> 1024x2048 -> 768x1536: 2x3 tiles
        (100, 5000, 85 + 170 * 4),  # -> 40x2048 (short side under 768): 1x4 tiles
    ],
)
def test_image_formula(width: int, height: int, tokens: int) -> None:
    frame = rb.count_tokens([{"role": "user", "content": []}])
    url = png_data_url(width, height, 0)
    assert rb.count_tokens(image_message(url, "high")) == frame + tokens


def test_image_of_unknown_size_is_priced_at_the_maximum() -> None:
    """Garbage, truncated or remote images: the formula's maximum, 768x2048 (2x4 tiles)."""
    frame = rb.count_tokens([{"role": "user", "content": []}])
    for url in (
        "https://example.com/a.png",
        "data:image/png;base64,!!!!",
        "data:image/png;base64," + "A" * FIVE_MB,
        png_data_url(0, 10, 0),
    ):
        assert rb.count_tokens(image_message(url, "high")) == frame + 85 + 170 * 8


def test_five_megabyte_tool_result_of_one_character() -> None:
    """A pathological BPE input (one long run of one character) counts fast and plausibly: as
    a hundred times the count of a 50 000-character run, within the few tokens at the seams."""
    messages = [USER, asking(call()), result(content="a" * 5_000_000)]
    start = time.perf_counter()
    tokens = rb.count_tokens(messages)
    res = rb.Assembler(config(model_input_limit=1_000_000)).assemble(messages)
    assert time.perf_counter() - start < 5.0
    run = rb.count_text("a" * 50_000)
    assert abs(tokens - 100 * run) < 100
    assert res.report.tokens_after == tokens
    assert rb.count_text("a" * 5_000_000) == tokens - rb.count_tokens(
        [USER, asking(call()), result(content="")]
    )


def test_count_text_with_a_lone_surrogate_is_not_a_unicode_error() -> None:
    """Like the message entry points, count_text must answer a lone surrogate with its own
    typed error, or count it the way tiktoken does (the surrogate as U+FFFD)."""
    try:
        tokens = rb.count_text("a\ud800b")
    except rb.RingboundError:
        return
    except UnicodeError as e:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"count_text raised {type(e).__name__}: {e}")
    assert tokens == rb.count_text("a\ufffdb")


# Random JSON-ish structures, biased towards the keys and values the parser looks at so that
# the structures get past the first checks into pairing, counting and planning.
KEYS = [
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "id",
    "function",
    "name",
    "arguments",
    "type",
    "text",
    "image_url",
    "url",
    "detail",
    "refusal",
    "custom",
    "input",
    "parameters",
    "properties",
    "description",
    "enum",
]
WORDS = [
    "system",
    "developer",
    "user",
    "assistant",
    "tool",
    "function",
    "text",
    "image_url",
    "low",
    "high",
    "c1",
    "c2",
    "{}",
    "data:image/png;base64,iVBORw0KGgo=",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(WORDS)
    | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
)
json_ish = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=30,
)
ids = st.sampled_from(["c1", "c2", "c3"])
calls = st.fixed_dictionaries(
    {
        "id": ids,
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.sampled_from(["f", "send"]),
                "arguments": st.sampled_from(["{}", '{"to": 1}', "x"]),
            }
        ),
    }
)
contents = (
    st.none()
    | st.text(max_size=30)
    | st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["text", "refusal", "image_url"]),
                "text": st.text(max_size=10),
            }
        )
        | json_ish,
        max_size=3,
    )
)
messages = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "developer", "user"]), "content": contents}
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": contents},
        optional={"tool_calls": st.lists(calls, min_size=1, max_size=3)},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "content": contents, "tool_call_id": ids}),
    json_ish,
)
CONFIGS = [
    config(
        model_input_limit=limit,
        side_effect_tools=["send"],
        on_pairing_error=policy,
        recent_tool_rings=recent,
        recent_user_turns=recent,
    )
    for limit in (30, 300, 5000)
    for policy in ("fail_closed", "synthesize_error_results")
    for recent in (0, 2)
]


def only_ringbound_errors(f: Callable[[], Any]) -> None:
    try:
        f()
    except rb.RingboundError:
        pass
    except BaseException as e:
        # PanicException derives from BaseException, so nothing slips past this clause.
        pytest.fail(f"{type(e).__module__}.{type(e).__name__} escaped: {e!r}")


@given(
    st.lists(messages, max_size=12) | json_ish,
    st.sampled_from(CONFIGS),
    st.lists(st.integers(0, 14), max_size=2),
    st.none() | st.lists(json_ish, max_size=2),
)
def test_fuzzed_input_raises_only_ringbound_errors(
    session: Any, cfg: rb.AssemblyConfig, pinned: list[int], tools: Any
) -> None:
    before = snapshot(session)
    only_ringbound_errors(lambda: rb.Assembler(cfg).assemble(session, tools, pinned=pinned))
    only_ringbound_errors(lambda: rb.count_tokens(session, tools=tools))
    only_ringbound_errors(lambda: rb.validate(session))
    assert snapshot(session) == before


def test_a_system_for_openai_chat_is_refused_not_silently_ignored() -> None:
    """OpenAI Chat has no top-level system: a ``system=`` was neither counted nor sent (a
    1,000-token system reported 8 tokens against a budget of 300)."""
    messages = [{"role": "user", "content": "hi"}]
    system = "Be brief. " * 300
    cfg = rb.AssemblyConfig(model_input_limit=300, output_reserve_tokens=0, safety_margin_tokens=0)
    asm = rb.Assembler(cfg)
    for call in (
        lambda: asm.assemble(messages, system=system),
        lambda: asm.assemble(messages, system=system, pinned=[0]),
        lambda: asyncio.run(asm.assemble_async(messages, system=system)),
        lambda: rb.count_tokens(messages, system=system),
        lambda: rb.validate(messages, system=system),
    ):
        with pytest.raises(rb.InvalidMessageError, match="first message") as e:
            call()
        assert e.value.index is None
    # As a message it is counted, and here does not fit.
    with pytest.raises(rb.BudgetExceededError):
        asm.assemble([{"role": "system", "content": system}, *messages])
    assert asm.assemble(messages).report.tokens_after < 300


def test_another_providers_messages_get_a_hint_naming_it() -> None:
    anthropic = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        },
    ]
    with pytest.raises(rb.InvalidMessageError, match='pass provider="anthropic"') as e:
        rb.Assembler(rb.AssemblyConfig(model_input_limit=100_000)).assemble(anthropic)
    assert e.value.index == 1
    gemini = [{"role": "model", "content": "hi"}]
    with pytest.raises(rb.InvalidMessageError, match='pass provider="gemini"'):
        rb.count_tokens(gemini)
