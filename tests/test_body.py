"""``Assembler.assemble_body``: a whole request body in, the body to send out. Every field but
the history, the system and the tools comes back as it was; kept OpenAI Chat messages come back
as the input's own bytes; the history is what ``assemble`` makes of the same messages."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
import time
from typing import Any

import orjson
import pytest
from canonical_writers import from_canonical
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import budget_for, fractions, policies, sessions, tools_schema

import ringbound as rb
from ringbound import _core
from ringbound.cli.simulate import SIDE_EFFECT_TOOLS, agent_session

#: Fields a gateway sends next to the history, none of which assembly may touch.
EXTRA = {
    "temperature": 0.2,
    "stream": True,
    "metadata": {"user": "u-1", "nested": [1, 2.5, None, "é"]},
    "response_format": {"type": "json_object"},
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Runs {name}.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name in ("read_file", "grep", "list_dir", "run_tests", "http_get", *SIDE_EFFECT_TOOLS)
]


def chat_body(messages: list[Any], **fields: Any) -> tuple[bytes, list[bytes]]:
    """A body written the way orjson never writes one (indented, spaced), and each message's
    own bytes in it."""
    raws = [json.dumps(m, indent=2, ensure_ascii=False).encode() for m in messages]
    head = {"model": "gpt-4o", **EXTRA, **fields}
    parts = [f'"{k}" : {json.dumps(v, indent=1)}'.encode() for k, v in head.items()]
    parts.insert(1, b'"messages":  [\n' + b",\n ".join(raws) + b"\n]")
    return b"{\n " + b",\n ".join(parts) + b"\n}", raws


def config(**kwargs: Any) -> rb.AssemblyConfig:
    defaults = {"output_reserve_tokens": 0, "safety_margin_tokens": 0}
    defaults["side_effect_tools"] = SIDE_EFFECT_TOOLS
    return rb.AssemblyConfig(**{**defaults, **kwargs})


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


# OpenAI Chat, native -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy",
    [
        {},
        {"stages": ("drop_rings",)},
    ],
    ids=["default", "drop-only"],
)
def test_chat_body_keeps_every_field_and_the_kept_bytes(policy: dict[str, Any]) -> None:
    messages = agent_session(turns=30)
    cfg = config(model_input_limit=rb.count_tokens(messages) // 3, **policy)
    body, raws = chat_body(messages, tools=TOOLS, tool_choice="auto")
    res = rb.Assembler(cfg).assemble_body(body)
    expected = rb.Assembler(cfg).assemble(messages, TOOLS)

    assert res.path == "native" and res.path_reason is None
    out = orjson.loads(res.body)
    assert without(out, "messages") == without(orjson.loads(body), "messages")
    assert list(out) == list(orjson.loads(body))  # the fields' order too
    assert out["messages"] == expected.messages
    assert res.report.dropped_rings == expected.report.dropped_rings
    assert res.report.tokens_after == expected.report.tokens_after <= res.report.budget
    assert res.report.stages and res.report.messages_before == len(messages)
    kept = [m for m in expected.messages if any(m is x for x in messages)]
    for m in kept:
        assert raws[next(i for i, x in enumerate(messages) if x is m)] in res.body
    # Values of the other fields are the input's own bytes, spacing included.
    assert b'"metadata":{\n "user": "u-1"' in res.body


def test_chat_insertions_match_the_dict_path() -> None:
    """A ledger note for dropped side effects and a synthesized result for a call without
    one, each rendered by the core as the Python adapter writes it (rewritten results are
    drawn by the property below)."""
    messages = agent_session(turns=40)
    last_call = next(i for i in range(len(messages) - 1, 0, -1) if messages[i].get("tool_calls"))
    broken = [*messages[: last_call + 1], {"role": "user", "content": 'go on "now"\n'}]
    cfg = config(
        model_input_limit=rb.count_tokens(messages) // 4,
        on_pairing_error="synthesize_error_results",
        max_tool_result_tokens=80,
        min_result_tokens=16,
    )
    body, _ = chat_body(broken)
    res = rb.Assembler(cfg).assemble_body(body)
    expected = rb.Assembler(cfg).assemble(broken)
    assert res.path == "native"
    assert orjson.loads(res.body)["messages"] == expected.messages
    assert res.report.repairs and res.report.ledger_entries


def test_media_rewrite_matches_the_dict_path() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    messages = [{"role": "user", "content": "goal"}]
    for k in range(12):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"look {k}"}, image]},
            {"role": "assistant", "content": f"seen {k} " * 20},
        ]
    stages = ("degrade_media", "drop_plain_turns")
    cfg = config(model_input_limit=rb.count_tokens(messages) - 400, stages=stages)
    res = rb.Assembler(cfg).assemble_body(chat_body(messages)[0])
    expected = rb.Assembler(cfg).assemble(messages)
    assert [r.kind for r in res.report.rewrites] == [r.kind for r in expected.report.rewrites]
    assert any(r.kind == "media" for r in res.report.rewrites)
    assert orjson.loads(res.body)["messages"] == expected.messages


def test_a_dropped_tools_schema_takes_tool_choice_with_it() -> None:
    messages = [{"role": "user", "content": "hi " * 50}]
    tools = TOOLS * 30
    cfg = config(
        model_input_limit=rb.count_tokens(messages) + 40,
        on_still_over_budget="drop_tools_schema_then_fail",
    )
    body, _ = chat_body(messages, tools=tools, tool_choice="auto", parallel_tool_calls=False)
    res = rb.Assembler(cfg).assemble_body(body)
    assert res.report.tools_dropped
    out = orjson.loads(res.body)
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(out)
    assert without(out, "messages") == without(
        orjson.loads(body), "messages", "tools", "tool_choice", "parallel_tool_calls"
    )


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_the_bodys_max_tokens_is_the_output_reserve(field: str) -> None:
    messages = agent_session(turns=20)
    cfg = config(model_input_limit=30_000, output_reserve_tokens=8000, emergency_ratio=0.9)
    res = rb.Assembler(cfg).assemble_body(chat_body(messages, **{field: 12_000})[0])
    assert res.report.budget == int(0.9 * (30_000 - 12_000))
    same = dataclasses.replace(cfg, output_reserve_tokens=12_000)
    assert orjson.loads(res.body)["messages"] == rb.Assembler(same).assemble(messages).messages
    plain = rb.Assembler(cfg).assemble_body(chat_body(messages)[0])
    assert plain.report.budget == int(0.9 * 22_000)


#: Each provider's body and where it names its output reserve; the chat body twice, once on
#: the native path and once on the dict path (a cache-stable config plans in Python).
RESERVE_FIELDS = {
    "openai_chat": "max_tokens",
    "openai_chat/dict": "max_completion_tokens",
    "anthropic": "max_tokens",
    "openai_responses": "max_output_tokens",
    "gemini": "generationConfig.maxOutputTokens",
    "bedrock_converse": "inferenceConfig.maxTokens",
}


def reserved_body(name: str, field: str, reserve: int) -> bytes:
    """``name``'s body whose ``field`` asks for ``reserve`` output tokens."""
    provider = name.split("/")[0]
    if provider == "openai_chat":
        return chat_body([{"role": "user", "content": "hi"}], **{field: reserve})[0]
    body = provider_body(provider, turns=2)[0]
    outer, _, inner = field.partition(".")
    body[outer] = {inner: reserve} if inner else reserve
    return orjson.dumps(body)


@pytest.mark.parametrize("name", sorted(RESERVE_FIELDS))
@pytest.mark.parametrize("detect", [False, True], ids=["given", "detected"])
def test_a_reserve_that_leaves_no_budget_is_the_same_error_on_every_path(
    name: str, detect: bool
) -> None:
    """Native or dict, given or detected: the body's field takes the place of
    ``output_reserve_tokens``, so the error names the key that can still change."""
    field = RESERVE_FIELDS[name]
    cfg = config(model_input_limit=5000, safety_margin_tokens=300)
    if name.endswith("/dict"):
        cfg = dataclasses.replace(cfg, cache_stable=True)
    provider = None if detect else name.split("/")[0]
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler(cfg, provider=provider).assemble_body(reserved_body(name, field, 4800))
    assert e.value.key == "model_input_limit"
    assert str(e.value) == (
        f"config `model_input_limit`: 5000 leaves no budget for the body's {field} 4800 (its "
        f"output reserve, in place of output_reserve_tokens) and safety_margin_tokens 300: "
        f"5000 - 4800 - 300 = -100; raise model_input_limit or send a smaller {field}"
    )
    assert e.value.reason in str(e.value)


def test_a_models_table_reserve_that_leaves_no_budget_is_the_same_error() -> None:
    asm = rb.Assembler.for_models(provider="openai_chat", config=config())
    body = chat_body([{"role": "user", "content": "hi"}], model="gpt-4o", max_tokens=130_000)[0]
    with pytest.raises(rb.ConfigError) as e:
        asm.assemble_body(body)
    assert e.value.key == "model_input_limit"
    assert "the body's max_tokens 130000" in str(e.value) and "= -2000;" in str(e.value)


def test_for_models_sizes_each_body_by_its_model() -> None:
    asm = rb.Assembler.for_models(provider="openai_chat", config=config(model_input_limit=9000))
    messages = [{"role": "user", "content": "hi"}]
    mini = asm.assemble_body(chat_body(messages, model="openai/gpt-4o-mini")[0])
    assert mini.model == "gpt-4o-mini" and mini.path == "native"
    info = rb.models.lookup("gpt-4o-mini")
    assert mini.report.budget == info.input_limit(8192) - 8192
    sized = asm.assemble_body(chat_body(messages, model="gpt-4o-mini", max_tokens=1000)[0])
    assert sized.report.budget == info.input_limit(1000) - 1000
    unknown = asm.assemble_body(chat_body(messages, model="my-own-model")[0])
    assert unknown.model is None and unknown.report.budget == 9000


def test_paths_that_need_python_say_why() -> None:
    messages = agent_session(turns=10)
    body = chat_body(messages)[0]
    cfg = config(model_input_limit=rb.count_tokens(messages) // 2)
    summarized = rb.Assembler(cfg, summarizer=lambda req: "what happened").assemble_body(body)
    assert summarized.path == "dict" and "summarizer" in (summarized.path_reason or "")
    assert summarized.report.summarized
    assert "what happened" in summarized.body.decode()
    first = rb.Assembler(config(model_input_limit=10**6, cache_stable=True)).assemble_body(body)
    assert first.path == "dict" and first.state is not None
    again = rb.Assembler(config(model_input_limit=10**6)).assemble_body(body, state=first.state)
    assert again.path == "dict" and again.state is not None


@settings(max_examples=40, deadline=None)
@given(
    messages=sessions(cheap=True),
    policy=policies(cheap=True),
    fraction=fractions,
    tools=st.booleans(),
)
def test_body_path_equals_the_dict_path(
    messages: list[dict[str, Any]], policy: dict[str, Any], fraction: float, tools: bool
) -> None:
    schema = tools_schema(["search_flights", "send_email"]) if tools else None
    full = rb.count_tokens(messages, tools=schema)
    cfg = rb.AssemblyConfig(**policy, model_input_limit=budget_for(full, fraction))
    fields = {"tools": schema} if tools else {}
    body = chat_body(messages, **fields)[0]
    try:
        expected = rb.Assembler(cfg).assemble(messages, schema)
    except rb.RingboundError as e:
        with pytest.raises(type(e)):
            rb.Assembler(cfg).assemble_body(body)
        return
    res = rb.Assembler(cfg).assemble_body(body)
    out = orjson.loads(res.body)
    assert out["messages"] == expected.messages
    assert ("tools" in out) == (expected.tools is not None)
    assert res.report.tokens_after == expected.report.tokens_after <= cfg.budget
    rb.validate(out["messages"])  # pairing intact


# The other formats ---------------------------------------------------------------------------

TOOLS_BY_PROVIDER = {
    "anthropic": ("tools", [{"name": "read_file", "input_schema": {"type": "object"}}]),
    "openai_responses": ("tools", [{"type": "function", "name": "read_file", "parameters": {}}]),
    "gemini": ("tools", [{"functionDeclarations": [{"name": "read_file"}]}]),
    "bedrock_converse": (
        "toolConfig",
        {"tools": [{"toolSpec": {"name": "read_file", "inputSchema": {"json": {}}}}]},
    ),
}
SHAPES = {
    "anthropic": ("messages", "system", {"max_tokens": 1000, "top_k": 5}),
    "openai_responses": ("input", "instructions", {"max_output_tokens": 1000, "store": False}),
    "gemini": ("contents", "systemInstruction", {"generationConfig": {"maxOutputTokens": 1000}}),
    "bedrock_converse": ("messages", "system", {"inferenceConfig": {"maxTokens": 1000}}),
}


def provider_body(provider: str, turns: int = 30) -> tuple[dict[str, Any], list[Any], Any, Any]:
    messages, system = from_canonical(provider, agent_session(turns=turns))
    history, system_key, fields = SHAPES[provider]
    tools_key, tools = TOOLS_BY_PROVIDER[provider]
    body = {"model": "m-1", history: messages, system_key: system, tools_key: tools, **fields}
    body.update(EXTRA)
    listed = tools["tools"] if provider == "bedrock_converse" else tools
    return body, messages, system, listed


@pytest.mark.parametrize("provider", sorted(SHAPES))
def test_other_formats_keep_every_field(provider: str) -> None:
    body, messages, system, tools = provider_body(provider)
    history, system_key, _ = SHAPES[provider]
    cfg = config(model_input_limit=rb.count_tokens(messages, provider=provider) // 3 + 1000)
    res = rb.Assembler(cfg, provider=provider).assemble_body(orjson.dumps(body))
    same = dataclasses.replace(cfg, output_reserve_tokens=1000)
    expected = rb.Assembler(same, provider=provider).assemble(messages, tools, system=system)
    out = orjson.loads(res.body)
    # Trimmed by whole rings with the ledger note: the core writes the whole body.
    assert res.path == "native" and res.provider == provider and res.path_reason is None
    assert out[history] == orjson.loads(orjson.dumps(expected.messages))
    assert out[system_key] == orjson.loads(orjson.dumps(expected.system))
    assert without(out, history, system_key) == without(body, history, system_key)
    assert res.report.dropped_rings and res.report.budget == same.budget
    detected = rb.Assembler(cfg, provider=None).assemble_body(orjson.dumps(body))
    assert detected.provider == provider and detected.body == res.body


@pytest.mark.parametrize("detect", [False, True])
@pytest.mark.parametrize("provider", sorted(SHAPES))
def test_other_formats_write_kept_items_as_their_own_bytes(provider: str, detect: bool) -> None:
    """The history's items stay bytes: those the assembly keeps unchanged go back as the
    input's own bytes (spacing and key order included), everything else as the dict path
    writes it; a body whose format is detected too."""
    body, messages, system, tools = provider_body(provider)
    history = SHAPES[provider][0]
    data = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    _, array, spans = _core.split_body(data, history, 1 << 30)
    raws = [array[s:e] for s, e in spans]
    cfg = config(model_input_limit=rb.count_tokens(messages, provider=provider) // 3 + 1000)
    res = rb.Assembler(cfg, provider=None if detect else provider).assemble_body(data)
    assert res.provider == provider
    same = dataclasses.replace(cfg, output_reserve_tokens=1000)
    expected = rb.Assembler(same, provider=provider).assemble(messages, tools, system=system)
    out = orjson.loads(res.body)
    assert res.path == "native"
    assert out[history] == orjson.loads(orjson.dumps(expected.messages))
    kept = [i for i, m in enumerate(messages) if any(m is e for e in expected.messages)]
    assert kept and b"\n  " in raws[kept[-1]]
    for i in kept:
        assert raws[i] in res.body, i
    assert body[history] == messages  # the input is read, never changed


@pytest.mark.parametrize("provider", sorted(SHAPES))
def test_a_damaged_item_of_another_format_is_refused_as_the_dict_path_refuses_it(
    provider: str,
) -> None:
    body, messages, _, _ = provider_body(provider, turns=3)
    history = SHAPES[provider][0]
    asm = rb.Assembler(config(model_input_limit=10**6), provider=provider)
    asm.assemble_body(orjson.dumps(body))  # its items cached
    good = orjson.dumps(body)
    last = orjson.dumps(messages[-1])
    with pytest.raises(rb.InvalidBodyError, match="not valid JSON"):
        asm.assemble_body(good.replace(last, last[:-1] + b",}"))
    seven = good.replace(last, b"7")
    with pytest.raises(rb.InvalidMessageError) as got:
        asm.assemble_body(seven)
    with pytest.raises(rb.InvalidMessageError) as dict_path:
        asm.assemble(orjson.loads(seven)[history])
    assert str(got.value) == str(dict_path.value)
    assert got.value.index == len(messages) - 1


def test_detected_chat_bodies_run_natively() -> None:
    messages = agent_session(turns=10)
    body = chat_body(messages, tools=TOOLS)[0]
    res = rb.Assembler(config(model_input_limit=5000), provider=None).assemble_body(body)
    assert res.provider == "openai_chat" and res.path == "native"
    direct = rb.Assembler(config(model_input_limit=5000)).assemble_body(body)
    assert res.body == direct.body


def test_assemble_detects_the_format_of_the_messages() -> None:
    _, messages, system, _ = provider_body("gemini", turns=5)
    asm = rb.Assembler(config(model_input_limit=10**5), provider=None)
    res = asm.assemble(messages, system=system)
    assert res.messages == messages and res.system == system


# Malformed bodies ----------------------------------------------------------------------------

CHAT_BAD = [
    b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}',  # truncated
    b"",
    b"[]",
    b'"messages"',
    b'{"messages": {"role": "user"}}',
    b'{"messages": "hi"}',
    b'{"model": "x"}',
    b'{"messages": [], "max_tokens": "many"}',
    b'{"messages": [], "max_tokens": -3}',
    b'{"messages": [], "tools": {"a": 1}}',
    b'{"messages": [{"role": "user", "content": "\xff"}]}',  # invalid UTF-8
    b'{"messages": []} trailing',
    # Damage inside a message or between the fields once the messages are read past.
    b'{"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "a",}]}',
    b'{"messages": [{"role": "user", "content": "hi"}] "model": "x"}',
    b'{"messages": [{"role": "user", "content": "hi"}], "model": "x",}',
    b'{"messages": [{"role": "user", "content": "h\x01i"}]}',
    b'{"messages": [{"role": "user", "content": "hi"}}]}',
    b'{"messages": [{"role": "user", "content": "hi"}], "messages": [{"role": }]}',
]


@pytest.mark.parametrize("provider", ["openai_chat", "anthropic", "gemini", None])
@pytest.mark.parametrize("bad", CHAT_BAD)
def test_malformed_bodies_are_typed_errors(provider: str | None, bad: bytes) -> None:
    asm = rb.Assembler(config(model_input_limit=10_000), provider=provider)
    with pytest.raises(rb.InvalidMessageError) as e:
        asm.assemble_body(bad)
    if provider == "openai_chat":
        assert isinstance(e.value, rb.InvalidBodyError)


@pytest.mark.parametrize("cached", [False, True], ids=["cold", "cached"])
def test_a_body_damaged_next_to_cached_messages_is_still_refused(cached: bool) -> None:
    """The messages of a cached session are not read again: damage anywhere else in the body,
    or in a message that is new, is still the error that reading the whole body gives."""
    messages = agent_session(turns=10)
    good, raws = chat_body(messages)
    asm = rb.Assembler(config(model_input_limit=10**6))
    if cached:
        asm.assemble_body(good)
    damaged = [
        good.replace(raws[-1], raws[-1][:-1] + b",}"),  # a trailing comma in the last message
        good.replace(b'"temperature" : 0.2', b'"temperature" : 0.2.'),
        good.replace(b'"model" : "gpt-4o"', b'"model" : "gpt-4o" "x"'),
        good[:-1] + b"]",
    ]
    for bad in damaged:
        assert bad != good
        with pytest.raises(rb.InvalidBodyError, match="not valid JSON"):
            asm.assemble_body(bad)
    # A repeated key reads as its last value, as JSON parsers read it.
    twice = good[:-2] + b',"messages": [{"role": "user", "content": "only this"}]}'
    out = orjson.loads(asm.assemble_body(twice).body)
    assert out["messages"] == [{"role": "user", "content": "only this"}]


def test_a_malformed_message_names_its_index() -> None:
    body = b'{"messages": [{"role": "user", "content": "hi"}, {"role": 7}]}'
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.Assembler().assemble_body(body)
    assert e.value.index == 1 and not isinstance(e.value, rb.InvalidBodyError)


def test_bodies_over_max_request_bytes_are_refused_before_parsing() -> None:
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (64 * 1024 * 1024) + b'"}]}'
    for provider in ("openai_chat", "anthropic"):
        with pytest.raises(rb.InvalidBodyError, match="max_request_bytes"):
            rb.Assembler(provider=provider).assemble_body(big)
    small = rb.Assembler(config(max_request_bytes=100))
    with pytest.raises(rb.InvalidBodyError, match="max_request_bytes"):
        small.assemble_body(chat_body([{"role": "user", "content": "x" * 200}])[0])


def test_bodies_must_be_bytes_and_are_not_modified() -> None:
    body = bytearray(chat_body([{"role": "user", "content": "hi"}])[0])
    copy = bytes(body)
    rb.Assembler().assemble_body(body)
    rb.Assembler().assemble_body(memoryview(body))
    assert bytes(body) == copy
    with pytest.raises(rb.InvalidBodyError):
        rb.Assembler().assemble_body(copy.decode())  # type: ignore[arg-type]


# Async and threads ---------------------------------------------------------------------------


def test_async_variant_gives_the_same_body() -> None:
    messages = agent_session(turns=20)
    cfg = config(model_input_limit=rb.count_tokens(messages) // 2)
    body = chat_body(messages)[0]

    async def summarize(req: Any) -> str:
        return "async summary"

    async def run() -> tuple[rb.BodyResult, rb.BodyResult]:
        native = await rb.Assembler(cfg).assemble_body_async(body)
        summarized = await rb.Assembler(cfg, summarizer=summarize).assemble_body_async(body)
        return native, summarized

    native, summarized = asyncio.run(run())
    assert native.body == rb.Assembler(cfg).assemble_body(body).body
    assert summarized.path == "dict" and b"async summary" in summarized.body


def test_the_native_path_releases_the_gil() -> None:
    """With a switch interval of minutes, a thread waiting for the GIL runs during another's
    calls only if they let the GIL go: the second thread's step must land inside the first
    one's calls."""
    messages = agent_session(turns=400)
    body = chat_body(messages)[0]
    asm = rb.Assembler(config(model_input_limit=20_000), cache=False)
    asm.assemble_body(body)  # tables built, imports done
    entered = threading.Event()
    seen: list[float] = []
    span: list[float] = []

    def other() -> None:
        entered.wait()
        seen.append(time.perf_counter())

    def call() -> None:
        # Calls until the other thread has run: on a loaded machine the scheduler may wake it
        # only after the first call, and it can run only while a call lets the GIL go.
        start = time.perf_counter()
        entered.set()
        while not seen and time.perf_counter() - start < 30:
            asm.assemble_body(body)
        span.extend((start, time.perf_counter()))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(300)
    try:
        t = threading.Thread(target=other)
        t.start()
        call()
        t.join()
    finally:
        sys.setswitchinterval(interval)
    assert seen, "the other thread never ran during assemble_body: the GIL was held"
    assert span[0] < seen[0] < span[1]
