"""Issue 36, finding 8: the arguments beside the messages (``system``, ``pinned=``,
``tighten=``, ``session_id=``, ``side_effect_tools``, ``AssemblyConfig.from_dict``,
``SideEffectLedger.record``) with a lone surrogate or a hostile object in them give a typed
``RingboundError``, never the caller's own exception, a ``UnicodeEncodeError`` or an
``OverflowError``, on every entry point, as the same values inside a message do."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

import ringbound as rb


class Boom(RuntimeError):
    """What the hostile objects raise: a test fails if it escapes."""


class RaisingMapping(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise Boom("__getitem__")

    def __iter__(self) -> Iterator[str]:
        raise Boom("__iter__")

    def __len__(self) -> int:
        return 1

    def keys(self) -> Any:
        raise Boom("keys")

    def items(self) -> Any:
        raise Boom("items")

    def get(self, key: str, default: Any = None) -> Any:
        raise Boom("get")


class RaisingDict(dict[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise Boom("__getitem__")

    def __iter__(self) -> Iterator[str]:
        raise Boom("__iter__")

    def keys(self) -> Any:
        raise Boom("keys")

    def items(self) -> Any:
        raise Boom("items")

    def get(self, key: str, default: Any = None) -> Any:
        raise Boom("get")


class RaisingList(list[Any]):
    def __iter__(self) -> Iterator[Any]:
        raise Boom("__iter__")

    def __len__(self) -> int:
        raise Boom("__len__")

    def __getitem__(self, i: Any) -> Any:
        raise Boom("__getitem__")


class RaisingObject:
    def __str__(self) -> str:
        raise Boom("__str__")

    def __repr__(self) -> str:
        raise Boom("__repr__")

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __hash__(self) -> int:
        raise Boom("__hash__")


class RaisingStr(str):
    def __str__(self) -> str:
        raise Boom("__str__")

    def __repr__(self) -> str:
        raise Boom("__repr__")

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __hash__(self) -> int:
        raise Boom("__hash__")


SURROGATE = "r\ud800"
HISTORY = {
    "anthropic": [{"role": "user", "content": "hi"}],
    "openai_responses": [{"role": "user", "content": "hi"}],
    "gemini": [{"role": "user", "parts": [{"text": "hi"}]}],
    "bedrock_converse": [{"role": "user", "content": [{"text": "hi"}]}],
}
#: Per provider, systems in its own shape that hold a lone surrogate or a hostile object.
BAD_SYSTEMS: dict[str, list[Any]] = {
    "anthropic": [
        SURROGATE,
        [{"type": "text", "text": SURROGATE}],
        RaisingList([{"type": "text", "text": "x"}]),
        [RaisingMapping()],
    ],
    "openai_responses": [SURROGATE],
    "gemini": [
        SURROGATE,
        {"parts": [{"text": SURROGATE}]},
        RaisingMapping(),
        RaisingDict(parts=[{"text": "x"}]),
        {"parts": RaisingList([{"text": "x"}])},
        {"parts": [RaisingMapping()]},
    ],
    "bedrock_converse": [
        [{"text": SURROGATE}],
        RaisingList([{"text": "x"}]),
        [RaisingMapping()],
    ],
}
SYSTEM_CASES = [(p, i) for p, systems in BAD_SYSTEMS.items() for i in range(len(systems))]


def entry_points(provider: str, system: Any) -> list[Callable[[], Any]]:
    messages = HISTORY[provider]
    asm = rb.Assembler(rb.AssemblyConfig(), provider=provider)
    return [
        lambda: rb.count_tokens(messages, provider=provider, system=system),
        lambda: rb.validate(messages, provider=provider, system=system),
        lambda: asm.assemble(messages, system=system),
        lambda: asm.assemble(messages, system=system, pinned=[0]),
        lambda: asyncio.run(asm.assemble_async(messages, system=system)),
        lambda: rb.recover(messages, "rb-0000000000000000", provider=provider, system=system),
    ]


@pytest.mark.parametrize(("provider", "case"), SYSTEM_CASES)
def test_a_bad_system_is_an_invalid_message_error_everywhere(provider: str, case: int) -> None:
    system = BAD_SYSTEMS[provider][case]
    for call in entry_points(provider, system):
        with pytest.raises(rb.InvalidMessageError) as e:
            call()
        assert e.value.index is None and "system" in str(e.value)


def test_a_good_system_still_passes() -> None:
    for provider, messages in HISTORY.items():
        system: Any = {
            "anthropic": "Be brief.",
            "openai_responses": "Be brief.",
            "gemini": {"parts": [{"text": "Be brief."}]},
            "bedrock_converse": [{"text": "Be brief."}],
        }[provider]
        assert rb.count_tokens(messages, provider=provider, system=system) > 0
        res = rb.Assembler(provider=provider).assemble(messages, system=system)
        assert res.system is system


@pytest.mark.parametrize(
    "pinned",
    [
        RaisingMapping(),
        RaisingDict(a=1),
        RaisingList([RaisingObject()]),
        RaisingObject(),
        [RaisingObject()],
        [RaisingStr("0")],
        [True],
        [2**70],
    ],
)
def test_hostile_pinned_is_a_config_error(pinned: Any) -> None:
    for provider, messages in [
        ("openai_chat", [{"role": "user", "content": "hi"}]),
        *HISTORY.items(),
    ]:
        asm = rb.Assembler(rb.AssemblyConfig(), provider=provider)
        with pytest.raises(rb.ConfigError) as e:
            asm.assemble(messages, pinned=pinned)
        assert e.value.key == "pinned"


def test_pinned_lists_and_session_ids_are_read_as_stored() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert rb.Assembler().assemble(messages, pinned=RaisingList([0])).messages == messages
    res = rb.Assembler().assemble(messages, session_id=RaisingStr("s-1"))
    assert res.report.store.saved == "saved"
    assert rb.AssemblyConfig(side_effect_tools=RaisingList(["send"])).side_effect_tools == ("send",)


def test_pinned_of_int_subclasses_is_read_as_plain_ints() -> None:
    class Index(int):
        def __eq__(self, other: object) -> bool:
            raise Boom("__eq__")

        def __hash__(self) -> int:
            raise Boom("__hash__")

    messages = [{"role": "user", "content": "hi"}]
    assert rb.Assembler().assemble(messages, pinned=(Index(0),)).messages == messages


@pytest.mark.parametrize("tighten", [RaisingObject(), [RaisingObject()]])
def test_hostile_tighten_is_a_config_error(tighten: Any) -> None:
    with pytest.raises(rb.ConfigError) as e:
        rb.Assembler().assemble([{"role": "user", "content": "hi"}], tighten=tighten)
    assert e.value.key == "tighten"


@pytest.mark.parametrize("session_id", [SURROGATE, RaisingObject(), RaisingStr("\ud800")])
def test_a_bad_session_id_is_a_config_error(session_id: Any) -> None:
    asm = rb.Assembler(rb.AssemblyConfig(on_store_error="stateless"))
    with pytest.raises(rb.ConfigError) as e:
        asm.assemble([{"role": "user", "content": "hi"}], session_id=session_id)
    assert e.value.key == "session_id"


@pytest.mark.parametrize(
    "tools",
    [
        [SURROGATE],
        ["\ud800"],
        RaisingList([RaisingObject()]),
        RaisingObject(),
        [RaisingObject()],
        ("send", RaisingObject()),
    ],
)
def test_bad_side_effect_tools_are_a_config_error(tools: Any) -> None:
    for make in (
        lambda: rb.AssemblyConfig(side_effect_tools=tools),
        lambda: rb.AssemblyConfig.from_dict({"side_effect_tools": tools}),
    ):
        with pytest.raises(rb.ConfigError) as e:
            make()
        assert e.value.key == "side_effect_tools"


def test_side_effect_tools_of_str_subclasses_are_kept_as_plain_strings() -> None:
    cfg = rb.AssemblyConfig(side_effect_tools=[RaisingStr("send_email")])
    assert cfg.side_effect_tools == ("send_email",)
    assert type(cfg.side_effect_tools[0]) is str


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"pin": RaisingList([RaisingObject()])}, "pin"),
        ({"stages": [RaisingObject()]}, "stages"),
        ({"redact_patterns": RaisingList([SURROGATE])}, "redact_patterns"),
        ({"ledger_fields": RaisingDict(send=[RaisingObject()])}, "ledger_fields"),
        ({"ledger_fields": {"send": RaisingList([RaisingObject()])}}, "ledger_fields"),
        ({"ledger_fields": {SURROGATE: ["to"]}}, "ledger_fields"),
        ({"encoding": RaisingObject()}, "encoding"),
        ({"encoding": RaisingStr("o200k_base")}, None),
        ({"model_input_limit": RaisingObject()}, "model_input_limit"),
        ({"safety_margin_tokens": RaisingObject()}, "safety_margin_tokens"),
        ({"note_placement": RaisingObject()}, "note_placement"),
    ],
)
def test_from_dict_with_hostile_values_is_a_config_error(
    values: dict[str, Any], key: str | None
) -> None:
    if key is None:  # a str subclass is read as the plain str it holds
        assert rb.AssemblyConfig.from_dict(values).encoding == "o200k_base"
        return
    with pytest.raises(rb.ConfigError) as e:
        rb.AssemblyConfig.from_dict(values)
    assert e.value.key == key


def test_from_dict_reads_a_dict_subclass_as_stored() -> None:
    hostile = RaisingDict()
    dict.__setitem__(hostile, "model_input_limit", 64_000)
    assert rb.AssemblyConfig.from_dict(hostile).model_input_limit == 64_000
    odd: dict[Any, Any] = {}
    dict.__setitem__(odd, 7, 1)  # a key that is not a string
    with pytest.raises(rb.ConfigError):
        rb.AssemblyConfig.from_dict(odd)
    cfg = rb.AssemblyConfig.from_dict(
        {
            "pin": RaisingList(["first_user_message"]),
            "redact_patterns": RaisingList(["x+y"]),
            "ledger_fields": RaisingDict(send=RaisingList(["to"])),
        }
    )
    assert cfg.pin == ("first_user_message",) and cfg.redact_patterns == ("x+y",)
    assert cfg.ledger_fields == {"send": ("to",)}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"args": RaisingMapping()},
        {"args": RaisingDict(to="a@b.c")},
        {"args": {"to": SURROGATE}},
        {"args": {"to": RaisingObject()}},
        {"tool": SURROGATE},
        {"tool": RaisingStr("send")},
        {"call_id": RaisingObject()},
        {"status": RaisingStr("ok")},
        {"idempotency_key": SURROGATE},
        {"resource_id": RaisingObject()},
        {"turn": RaisingObject()},
    ],
)
def test_record_with_hostile_fields_is_a_config_error_or_plain(kwargs: dict[str, Any]) -> None:
    ledger = rb.SideEffectLedger()
    fields: dict[str, Any] = {"tool": "send", "call_id": "c1", **kwargs}
    tool, call_id = fields.pop("tool"), fields.pop("call_id")
    try:
        entry = ledger.record(tool, call_id, **fields)
    except rb.ConfigError as e:
        assert e.key is not None and e.key.startswith("ledger")
        assert len(ledger) == 0
        return
    # A str subclass that can be read is kept as the plain str it holds.
    assert all(type(v) is str for v in (entry.tool, entry.call_id, entry.status, entry.args))


def test_record_reads_a_dict_subclass_of_args_as_stored() -> None:
    args = RaisingDict()
    dict.__setitem__(args, "to", "a@b.c")
    entry = rb.SideEffectLedger().record("send", "c1", args=args)
    assert json.loads(entry.args) == {"to": "a@b.c"}


def test_extend_with_hostile_entries_is_a_config_error() -> None:
    ledger = rb.SideEffectLedger()
    with pytest.raises(rb.ConfigError):
        ledger.extend(RaisingList([rb.LedgerEntry("t", "c")]))
    with pytest.raises(rb.ConfigError):
        ledger.extend([rb.LedgerEntry(RaisingStr("\ud800"), "c")])
    ledger.extend([rb.LedgerEntry(RaisingStr("t"), "c")])
    assert [type(e.tool) for e in ledger] == [str]


# --- the sweep: other arguments with the same holes ---


class RaisingInt(int):
    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    def __hash__(self) -> int:
        raise Boom("__hash__")

    def __lt__(self, other: object) -> bool:
        raise Boom("__lt__")

    def __repr__(self) -> str:
        raise Boom("__repr__")


@pytest.mark.parametrize(
    "provider", [RaisingObject(), RaisingStr("openai_chat"), [RaisingObject()], 7]
)
def test_a_hostile_provider_is_a_config_error_everywhere(provider: Any) -> None:
    messages = [{"role": "user", "content": "hi"}]
    for call in (
        lambda: rb.count_tokens(messages, provider=provider),
        lambda: rb.validate(messages, provider=provider),
        lambda: rb.recover(messages, "rb-0000000000000000", provider=provider),
        lambda: rb.expand_message_tool(provider),
        lambda: rb.Assembler(provider=provider),
    ):
        try:
            call()
        except rb.ConfigError as e:
            assert e.key == "provider" and not isinstance(provider, str)
        except rb.AnchorNotFoundError:  # read as the plain text it holds, then looked up
            assert isinstance(provider, str)
        else:  # a str subclass is read as the plain text it holds
            assert isinstance(provider, str)


def test_a_str_subclass_provider_is_read_as_its_text() -> None:
    asm = rb.Assembler(provider=RaisingStr("anthropic"))
    assert type(asm.provider) is str and asm.provider == "anthropic"
    messages = [{"role": "user", "content": "hi"}]
    assert rb.count_tokens(messages, provider=RaisingStr("anthropic")) > 0


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"encoding": RaisingObject()}, "encoding"),
        ({"encoding": RaisingStr("nope")}, "encoding"),
        ({"tokenizer_backend": SURROGATE}, "tokenizer_backend"),
        ({"tokenizer_backend": 3}, "tokenizer_backend"),
        ({"tokenizer_backend": RaisingObject()}, "tokenizer_backend"),
    ],
)
def test_count_options_are_config_errors(kwargs: dict[str, Any], key: str) -> None:
    for call in (
        lambda: rb.count_tokens([{"role": "user", "content": "hi"}], **kwargs),
        lambda: rb.count_text("hi", **kwargs),
    ):
        with pytest.raises(rb.ConfigError) as e:
            call()
        assert e.value.key == key


@pytest.mark.parametrize(
    "data",
    [RaisingMapping(), RaisingDict(version=2), {"version": 2, "ratios": RaisingList([1.0])}],
)
def test_a_hostile_token_ledger_is_a_config_error(data: Any) -> None:
    with pytest.raises(rb.ConfigError):
        rb.TokenLedger.from_dict(data)


def test_a_token_ledger_round_trips_through_from_dict() -> None:
    ledger = rb.TokenLedger(10_000)
    assert rb.TokenLedger.from_dict(ledger.to_dict()).to_dict() == ledger.to_dict()


def test_memory_store_max_sessions_of_an_int_subclass_is_read_as_its_value() -> None:
    assert rb.MemoryStore(max_sessions=RaisingInt(3)).max_sessions == 3
    with pytest.raises(rb.ConfigError):
        rb.MemoryStore(max_sessions=RaisingInt(0))
