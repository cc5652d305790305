"""The core reads a native request from the caller's objects (``_core.read_native_objects``):
items it met before come from its cache by a walk of their contents, and only the others are
serialized. Whatever it reads must be what reading the serialized items gives, cold or warm,
for every provider; an item changed in place is read again; an SDK object leaves the reading
to the serializer; and the facts rendering relies on are the ones the adapter would read."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pydantic
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import given, settings

import ringbound as rb
from ringbound import _core
from ringbound.core_config import default_core
from ringbound.providers import adapter

PROVIDERS = ("anthropic", "openai_responses", "gemini", "bedrock_converse")


def views(provider: str, messages: list[Any], system: Any) -> tuple[Any, Any]:
    """The keyed reading and the reading of the serialized items, each with its own cache."""
    ad = adapter(provider)
    texts = ad.system_texts(system)
    core = default_core()
    keyed = _core.read_native_objects(provider, messages, texts, None, core, _core.CountCache())
    read = _core.read_native(
        provider, ad.native_parts(messages), texts, None, core, _core.CountCache()
    )
    return keyed, read


def same(keyed: Any, read: Any) -> None:
    assert keyed is not None
    for name in ("issues", "spans", "groups", "binds_next", "pinned", "facts"):
        assert getattr(keyed, name) == getattr(read, name), name
    assert keyed.count() == read.count()
    assert [keyed.message(k) for k in range(len(keyed))] == [
        read.message(k) for k in range(len(read))
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
@settings(max_examples=25, deadline=None)
@given(chat=gen.sessions())
def test_a_keyed_reading_is_the_reading_of_the_serialized_items(
    provider: str, chat: list[dict[str, Any]]
) -> None:
    messages, system = from_canonical(provider, chat)
    before = copy.deepcopy(messages)
    same(*views(provider, messages, system))
    # Warm: every item comes from the cache now, and reads the same.
    same(*views(provider, messages, system))
    assert messages == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_item_changed_in_place_is_read_again(provider: str) -> None:
    chat = [
        {"role": "user", "content": "Summarize the report."},
        {"role": "assistant", "content": "It says sales rose."},
    ]
    messages, system = from_canonical(provider, chat)
    first, _ = views(provider, messages, system)
    text_of = {"anthropic": "content", "openai_responses": "content"}
    last = messages[-1]
    if provider in text_of:
        last[text_of[provider]] = [
            {
                "type": "output_text" if provider == "openai_responses" else "text",
                "text": "x " * 300,
            }
        ]
    elif provider == "gemini":
        last["parts"] = [{"text": "x " * 300}]
    else:
        last["content"] = [{"text": "x " * 300}]
    again, read = views(provider, messages, system)
    same(again, read)
    assert again.count() > first.count() + 250


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_an_item_the_walk_cannot_write_is_serialized(value: float) -> None:
    """An item missed is written as JSON from its walk, but a float JSON cannot carry is left
    to the serializer (which writes null): the reading is still the serialized items'."""
    messages: list[Any] = [
        {"role": "user", "content": "Measure it."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "measure", "input": {"x": value}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    same(*views("anthropic", messages, None))
    res = rb.Assembler(rb.AssemblyConfig(model_input_limit=10_000), provider="anthropic").assemble(
        messages
    )
    assert res.messages[1] is messages[1]


class _SdkText(pydantic.BaseModel):
    type: str = "text"
    text: str


class _SdkMessage(pydantic.BaseModel):
    role: str
    content: list[_SdkText]


def test_sdk_objects_are_serialized_by_the_adapter_and_the_rest_walked() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        _SdkMessage(role="assistant", content=[_SdkText(text="hello")]),
        {"role": "user", "content": "and now?"},
    ]
    ad = adapter("anthropic")
    asked: list[list[int]] = []

    def dump(indices: list[int]) -> list[bytes]:
        asked.append(indices)
        return ad.native_parts([messages[i] for i in indices])  # type: ignore[no-any-return]

    core = default_core()
    assert _core.read_native_objects("anthropic", messages, [], None, core, None) is None
    for _ in range(2):
        keyed = _core.read_native_objects("anthropic", messages, [], None, core, None, dump)
        same(keyed, _core.read_native("anthropic", ad.native_parts(messages), [], None, core))
    assert asked == [[1], [1]], "the SDK object is serialized on every reading, alone"
    res = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=10_000, output_reserve_tokens=0),
        provider="anthropic",
    ).assemble(messages)
    assert res.messages[1] is messages[1]


class _Unwritable(pydantic.BaseModel):
    role: str
    content: Any


def test_an_sdk_object_that_cannot_be_serialized_is_named_by_its_index() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        _Unwritable(role="user", content={1, 2}),
    ]
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.Assembler(provider="anthropic").assemble(messages)
    assert e.value.index == 2, e.value


def test_the_facts_are_what_the_adapter_reads() -> None:
    marker = {"type": "ephemeral"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": marker}]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "\n\n"}, {"type": "text", "text": "ok"}],
        },
        {"role": "user", "content": "again"},
    ]
    keyed, _ = views("anthropic", messages, None)
    roles, blank, markers = keyed.facts
    assert roles == ["user", "assistant", "user"]
    assert blank == [False, True, False]
    assert markers == [1, 0, 0]
    res = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=10_000, output_reserve_tokens=0),
        provider="anthropic",
    ).assemble(messages)
    assert res.messages[1]["content"] == [{"type": "text", "text": "ok"}]
    assert res.messages[0] is messages[0]


def test_more_than_four_cache_markers_are_still_refused() -> None:
    marker = {"type": "ephemeral"}
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"turn {i}", "cache_control": marker}],
        }
        for i in range(5)
    ]
    asm = rb.Assembler(
        rb.AssemblyConfig(model_input_limit=10_000, output_reserve_tokens=0),
        provider="anthropic",
    )
    with pytest.raises(rb.InvalidMessageError, match="cache_control"):
        asm.assemble(messages)


@pytest.mark.parametrize("provider", ["anthropic", "gemini"])
def test_a_list_changed_by_another_thread_gives_a_valid_request_or_a_typed_error(
    provider: str,
) -> None:
    chat: list[dict[str, Any]] = [{"role": "user", "content": "Start."}]
    for i in range(30):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        chat += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " * 50},
        ]
    chat.append({"role": "assistant", "content": "done"})
    messages, system = from_canonical(provider, chat)
    spare = copy.deepcopy(messages)
    stop = threading.Event()

    def churn() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            # Replaced by equal copies: the request stays valid, the objects are new.
            for i in range(2, len(messages), 2):
                messages[i] = copy.deepcopy(spare[i])

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        asm = rb.Assembler(
            rb.AssemblyConfig(model_input_limit=2_000, output_reserve_tokens=0), provider=provider
        )
        for _ in range(100):
            try:
                res = asm.assemble(messages, system=system)
            except rb.InvalidMessageError as e:
                assert "changed while it was read" in str(e)
                continue
            assert rb.validate(res.messages, provider=provider, system=res.system) == []
    finally:
        stop.set()
        thread.join()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_repeated_request_is_read_again_for_whatever_it_does_not_share(provider: str) -> None:
    """The core keeps the reading of a whole request; a request that repeats its items but not
    its system, its tools or its count cache must not get that reading back."""
    chat = [
        {"role": "user", "content": "Look up the order."},
        {"role": "assistant", "content": "It shipped on Monday."},
    ]
    messages, _ = from_canonical(provider, chat)
    ad = adapter(provider)
    core = default_core()
    tools = b'[{"type":"function","function":{"name":"lookup","parameters":{}}}]'
    cache = _core.CountCache()

    def count(system_texts: list[list[str]], tools_json: bytes | None, cache: Any) -> int:
        view = _core.read_native_objects(provider, messages, system_texts, tools_json, core, cache)
        by_json = _core.read_native(
            provider, ad.native_parts(messages), system_texts, tools_json, core, cache
        )
        assert view.count() == by_json.count()
        return view.count()  # type: ignore[no-any-return]

    bare = count([], None, cache)
    assert count([], None, cache) == bare
    assert count([["You answer in one line."]], None, cache) > bare
    assert count([], tools, cache) > bare
    assert count([], None, _core.CountCache()) == bare
    _core.cache_clear()
    assert count([], None, None) == bare


@pytest.mark.parametrize("provider", PROVIDERS)
def test_mappings_that_are_not_dicts_are_read_by_the_core(provider: str) -> None:
    """The core is the only reader: a read-only mapping reaches it as the dict it holds and is
    counted, validated and kept as the caller's own object."""
    from types import MappingProxyType

    plain, _ = from_canonical(provider, [{"role": "user", "content": "Where is my parcel?"}])
    wrapped = [MappingProxyType(m) if isinstance(m, dict) else m for m in plain]
    assert rb.count_tokens(wrapped, provider=provider) == rb.count_tokens(plain, provider=provider)
    assert rb.validate(wrapped, provider=provider) == []
    res = rb.Assembler(rb.AssemblyConfig(model_input_limit=10_000), provider=provider).assemble(
        wrapped
    )
    assert all(a is b for a, b in zip(res.messages, wrapped, strict=True))


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (
            "anthropic",
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": b"\x89PNG"},
                    }
                ],
            },
        ),
        ("openai_responses", {"role": "user", "content": [{"type": "input_text", "text": b"hi"}]}),
    ],
)
def test_raw_bytes_are_refused_where_the_sdk_takes_none(provider: str, message: Any) -> None:
    """Anthropic's and OpenAI's SDKs send no raw bytes: every entry point refuses them the
    same way, naming the item (Gemini's and Bedrock's SDKs take bytes: sent as base64)."""
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    messages.append(message)
    at = len(messages) - 1
    for run in (
        lambda: rb.count_tokens(messages, provider=provider),
        lambda: rb.validate(messages, provider=provider),
        lambda: rb.Assembler(
            rb.AssemblyConfig(model_input_limit=10_000), provider=provider
        ).assemble(messages),
    ):
        with pytest.raises(rb.InvalidMessageError) as info:
            run()
        assert info.value.index == at
        assert "bytes" in str(info.value)


@pytest.mark.parametrize(
    ("provider", "message"),
    [
        (
            "bedrock_converse",
            {
                "role": "user",
                "content": [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}],
            },
        ),
        (
            "gemini",
            {
                "role": "user",
                "parts": [{"inlineData": {"mimeType": "image/png", "data": b"\x89PNG"}}],
            },
        ),
    ],
)
def test_raw_bytes_are_read_where_the_sdk_takes_them(provider: str, message: Any) -> None:
    """boto3 and the Gemini SDK send raw bytes: validated, counted and kept like base64 text
    (``rb.validate`` refused them before, in its size check)."""
    assert rb.validate([message], provider=provider) == []
    assert rb.count_tokens([message], provider=provider) > 0
