"""The arguments beside the messages, for the atheris harness (``api.py``): inputs that open
with ``ARGUMENTS`` fuzz them instead of the messages (issue 36's findings 8, 9 and 13b).

The bytes pick a provider and one attack:

- a hostile or malformed value (a lone surrogate, a mapping or list whose methods raise, an
  object whose ``__str__``/``__eq__``/``__hash__`` raise, huge or non-finite numbers) as the
  top-level ``system`` (bare or in the provider's shape), ``pinned=``, ``tighten=``,
  ``session_id=``, a key of ``AssemblyConfig.from_dict``, a field of
  ``SideEffectLedger.record``, or a session store's option; any exception that is not a
  ``RingboundError`` is a finding;
- a secret planted in a tool result that gets summarized, after a separator JSON writes as an
  escape, as text, as a JSON string (once or twice encoded) or as a structured result: the
  secret reaching ``SummaryRequest.text`` or ``.units`` is a finding;
- a request body whose ``metadata`` is nested deeper than the JSON parser reads: the
  assembly with the provider named and detected must agree.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import atheris
import orjson
from canonical_writers import from_canonical

import ringbound as rb

#: The prefix that sends an input here.
ARGUMENTS = b"ringbound-arguments:"
#: A Redis URL nothing listens on: a store's calls fail at once (a StoreError).
UNREACHABLE = "redis://127.0.0.1:1/0"
#: The ttl bounds stores document (docs/session-store.md).
MIN_TTL_S, MAX_TTL_S = 1, 10 * 365 * 24 * 3600


class RaisingObject:
    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")

    def __repr__(self) -> str:
        raise RuntimeError("hostile __repr__")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("hostile __eq__")

    def __hash__(self) -> int:
        raise RuntimeError("hostile __hash__")


class RaisingMapping(Mapping[str, Any]):
    """Not a dict: read only through its own methods, which raise."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("hostile __getitem__")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("hostile __iter__")

    def __len__(self) -> int:
        return 1

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("hostile get")


class RaisingDict(dict):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("hostile __iter__")

    def keys(self) -> Any:
        raise RuntimeError("hostile keys")

    def items(self) -> Any:
        raise RuntimeError("hostile items")

    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("hostile get")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("hostile __getitem__")


class RaisingList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("hostile __iter__")

    def __len__(self) -> int:
        raise RuntimeError("hostile __len__")

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("hostile __getitem__")


class RaisingStr(str):
    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("hostile __eq__")

    def __hash__(self) -> int:
        raise RuntimeError("hostile __hash__")


class EmptyServer:
    """A redis-py client in front of an empty server: it encodes every key and argument as
    redis-py does before sending (so a key that is not UTF-8 fails as it would on a real
    server), finds nothing and writes every compare-and-set."""

    class _Pool:
        connection_kwargs: ClassVar[dict[str, Any]] = {"socket_timeout": 0.1}

    connection_pool = _Pool()

    def __init__(self) -> None:
        try:
            from redis.connection import Encoder
        except ImportError:  # without redis-py, RedisStore refuses to be made (ConfigError)
            self._encode: Any = str.encode
            return
        self._encode = Encoder("utf-8", "strict", False).encode

    def register_script(self, script: str) -> Any:
        def run(keys: list[Any], args: list[Any]) -> int:
            for value in (*keys, *args):
                self._encode(value)
            return 1

        return run

    def hmget(self, key: Any, fields: list[str]) -> list[None]:
        self._encode(key)
        return [None for _ in fields]

    def delete(self, key: Any) -> int:
        self._encode(key)
        return 0

    def close(self) -> None:
        pass


def argument(fdp: atheris.FuzzedDataProvider) -> Any:
    """One hostile or malformed argument value."""
    pick = fdp.ConsumeIntInRange(0, 15)
    text = fdp.ConsumeUnicodeNoSurrogates(6)
    values: list[Any] = [
        "r\ud800" + text,
        ["\ud800"],
        RaisingObject(),
        RaisingMapping(),
        RaisingDict(a=1),
        RaisingList([text]),
        RaisingStr(text or "x"),
        [RaisingObject()],
        {"parts": RaisingList([{"text": text}])},
        {"parts": [{"text": "\ud800"}]},
        [{"text": "\ud800"}],
        [RaisingMapping()],
        float("inf"),
        1e300,
        2**70,
        1e-9,
    ]
    return values[pick]


def _session(provider: str, result: Any, structured: bool) -> tuple[list[Any], Any]:
    """A session long enough that its oldest tool result, ``result``, is summarized."""
    chat: list[dict[str, Any]] = [{"role": "user", "content": "Read the logs."}]
    for i in range(16):
        call = {"name": "read_log", "arguments": json.dumps({"day": i})}
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": call}],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"day {i}: " + "line " * 80},
        ]
    chat.append({"role": "user", "content": "What next?"})
    marker = chat[2]["content"]
    if provider == "openai_chat":
        chat[2]["content"] = result
        return chat, None
    native, system = from_canonical(provider, chat)

    def put(value: Any) -> Any:
        if isinstance(value, dict):
            if structured and value == {"text": marker} and provider == "bedrock_converse":
                return {"json": result}
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        return result if value == marker else value

    return put(native), system


#: Secrets to plant, and the part of each that must not reach the summarizer.
SECRETS = (
    ("AKIAQ7K2LMPA9RSKD4YW", "AKIAQ7K2LMPA9RSKD4YW"),
    ("sk-Zq7abcdefghijklmnopqrstu", "sk-Zq7abcdefghijklmnopqrstu"),
    ("Bearer Zq7f8e7d6c5b4a3928", "Zq7f8e7d6c5b4a3928"),
    ("ghs_Zq7e42F292c6912E7710c838", "ghs_Zq7e42F292c6912E7710c838"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7bq9xZ1pZ0mZc3Qm0x1u\n"
        "k2d9vXw+Qe1r8Yb0p3LqYt7ZsLQ9n2Hc0Q==",
        "k2d9vXw+Qe1r8Yb0p3LqYt7ZsLQ9n2Hc0Q==",
    ),
)
SEPARATORS = ("\n", "\t", "\r", "\b", "\f", '"', "\\", "/", "é", "\n  ")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def planted_secret(fdp: atheris.FuzzedDataProvider, provider: str) -> None:
    secret, core = SECRETS[fdp.ConsumeIntInRange(0, len(SECRETS) - 1)]
    left = SEPARATORS[fdp.ConsumeIntInRange(0, len(SEPARATORS) - 1)]
    right = SEPARATORS[fdp.ConsumeIntInRange(0, len(SEPARATORS) - 1)]
    output = f"env {fdp.ConsumeUnicodeNoSurrogates(12)}{left}{secret}{right}done"
    shape = fdp.ConsumeIntInRange(0, 4)
    structured = shape == 4 and provider in ("gemini", "bedrock_converse")
    result: Any = [
        output,
        json.dumps({"output": output}, ensure_ascii=False),
        json.dumps({"output": output}),
        json.dumps(json.dumps({"output": output})),
        {"output": output} if structured else json.dumps({"output": output}),
    ][shape]
    messages, system = _session(provider, result, structured)
    seen: list[rb.SummaryRequest] = []

    def summarize(request: rb.SummaryRequest) -> str:
        seen.append(request)
        return "The agent read the logs."

    config = rb.AssemblyConfig(
        model_input_limit=2500, output_reserve_tokens=400, safety_margin_tokens=100
    )
    rb.Assembler(config, provider=provider, summarizer=summarize).assemble(messages, system=system)
    for request in seen:
        leaked = [t for t in (request.text, *_strings(request.units)) if core in t]
        assert not leaked, f"{provider}: a planted secret reached the summarizer"


def deep_body(fdp: atheris.FuzzedDataProvider) -> None:
    depth = fdp.ConsumeIntInRange(1025, 100_000)
    deep = "[" * depth + "]" * depth if fdp.ConsumeBool() else '{"a":' * depth + "1" + "}" * depth
    body = (
        '{"model": "gpt-4o", "messages": [{"role": "user", "content": '
        + json.dumps(fdp.ConsumeUnicodeNoSurrogates(40) or "hi")
        + '}], "metadata": '
        + deep
        + "}"
    ).encode()
    results: list[Any] = []
    for provider in ("openai_chat", None):
        try:
            results.append(rb.Assembler(provider=provider).assemble_body(body).body)
        except rb.RingboundError as e:
            results.append(type(e))
    assert results[0] == results[1], "provider named and detected disagree on a deep body"


CONFIG_KEYS = (
    "side_effect_tools",
    "pin",
    "stages",
    "redact_patterns",
    "ledger_fields",
    "encoding",
    "model_input_limit",
    "safety_margin_tokens",
    "token_ratio",
    "note_placement",
)


def hostile_argument(fdp: atheris.FuzzedDataProvider, provider: str, messages: Any) -> None:
    attack = fdp.ConsumeIntInRange(0, 7)
    value = argument(fdp)
    if attack == 0:
        system = value
        if provider == "openai_chat":
            return  # no top-level system: refused whatever it holds
        entry = fdp.ConsumeIntInRange(0, 4)
        asm = rb.Assembler(provider=provider)
        if entry == 0:
            rb.count_tokens(messages, provider=provider, system=system)
        elif entry == 1:
            rb.validate(messages, provider=provider, system=system)
        elif entry == 2:
            asm.assemble(messages, system=system)
        elif entry == 3:
            asyncio.run(asm.assemble_async(messages, system=system))
        else:
            rb.recover(messages, "rb-0000000000000000", provider=provider, system=system)
    elif attack == 1:
        rb.Assembler(provider=provider).assemble(messages, pinned=value)
    elif attack == 2:
        rb.Assembler(provider=provider).assemble(messages, tighten=value)
    elif attack == 3:
        # A store whose server is down, failing soft: a bad id must still be refused typed,
        # before any call, not escape from the client's encoding.
        config = rb.AssemblyConfig(on_store_error="stateless")
        store = rb.RedisStore(EmptyServer())
        rb.Assembler(config, provider=provider, store=store).assemble(messages, session_id=value)
    elif attack == 4:
        key = CONFIG_KEYS[fdp.ConsumeIntInRange(0, len(CONFIG_KEYS) - 1)]
        config = rb.AssemblyConfig.from_dict(value if fdp.ConsumeBool() else {key: value})
        # A config taken must assemble: a value it kept must not fail later, untyped.
        rb.Assembler(config, provider=provider).assemble(messages)
    elif attack == 5:
        fields = {"tool": "send", "call_id": "c1"}
        name = ("tool", "call_id", "args", "status", "idempotency_key", "resource_id", "turn")[
            fdp.ConsumeIntInRange(0, 6)
        ]
        fields[name] = value
        ledger = rb.SideEffectLedger()
        ledger.record(fields.pop("tool"), fields.pop("call_id"), **fields)
    elif attack == 6:
        option = ("ttl_s", "timeout_s", "prefix")[fdp.ConsumeIntInRange(0, 2)]
        # A timeout is the store's own client's; the other options go to any client.
        target = UNREACHABLE if option == "timeout_s" else EmptyServer()
        redis = rb.RedisStore(target, **{option: value})
        # Taken options are usable: a ttl a server keeps and a timeout a socket takes.
        assert redis.ttl_s is None or MIN_TTL_S <= redis.ttl_s <= MAX_TTL_S, "ttl out of range"
        config = rb.AssemblyConfig(on_store_error="stateless")
        rb.Assembler(config, provider=provider, store=redis).assemble(messages, session_id="s")
    else:
        memory = rb.MemoryStore(ttl_s=value if fdp.ConsumeBool() else None)
        assert memory.ttl_s is None or MIN_TTL_S <= memory.ttl_s <= MAX_TTL_S, "ttl out of range"
        memory.put(value, b"x", None)


def run(fdp: atheris.FuzzedDataProvider, sessions: Mapping[str, list[Any]]) -> None:
    """One argument attack; RingboundErrors are the expected refusals."""
    providers = sorted(sessions)
    provider = providers[fdp.ConsumeIntInRange(0, len(providers) - 1)]
    kind = fdp.ConsumeIntInRange(0, 2)
    try:
        if kind == 0:
            messages = orjson.loads(orjson.dumps(sessions[provider]))
            hostile_argument(fdp, provider, messages)
        elif kind == 1:
            planted_secret(fdp, provider)
        else:
            deep_body(fdp)
    except rb.RingboundError:
        pass
