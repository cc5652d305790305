"""atheris harness for ringbound's public Python API across the five providers.

The fuzzer's bytes pick a provider, an entry point and a list of edits of a small real session
(``sessions.py``): values replaced by hostile objects (a raising ``__getattr__``, raising
mapping and list subclasses, a list that changes while it is read, huge ints, lone surrogates,
10k-deep nesting, bytes and sets), keys dropped, items duplicated or removed. Any exception
that is not a ``ringbound.RingboundError`` is a finding, and so is a change to the caller's
messages. Inputs that open with ``arguments.ARGUMENTS`` fuzz the arguments beside the
messages instead, planted secrets and deep bodies (``arguments.py``); inputs that open with
``entry_points.ENTRY_POINTS`` fuzz the other entry points that read a caller's objects
(``entry_points.py``).

Run: ``python tests/fuzz/api.py -max_total_time=60 tests/fuzz/seeds`` (libFuzzer flags).
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import atheris
import orjson

sys.path.insert(0, str(Path(__file__).parent))
# The Python writers (``canonical_writers``) the harness builds native sessions with.
sys.path.insert(1, str(Path(__file__).parent.parent))

with atheris.instrument_imports():
    import ringbound as rb

from arguments import ARGUMENTS
from arguments import run as run_arguments
from entry_points import ENTRY_POINTS
from entry_points import run as run_entry_points
from sessions import SESSIONS, TOOLS
from translation import TRANSLATION
from translation import run as run_translation

PROVIDERS = sorted(SESSIONS)


class RaisingAttribute:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("hostile __getattr__")


class RaisingMapping(dict):  # type: ignore[type-arg]
    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("hostile get")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("hostile __getitem__")

    def items(self) -> Any:
        raise RuntimeError("hostile items")


class RaisingList(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("hostile __iter__")


class ChangingList(list):  # type: ignore[type-arg]
    """A list that deletes and inserts items while it is iterated (the caller's own change,
    so the input is not checked for changes after one)."""

    changed = False

    def __iter__(self) -> Any:
        for i, item in enumerate(list(list.__iter__(self))):
            if i == 1 and len(self) > 1:
                del self[0]
                self.append({"role": "user", "content": "late"})
                ChangingList.changed = True
            yield item


class StrSubclass(str):
    def __str__(self) -> str:
        raise RuntimeError("hostile __str__")


class DictSubclass(dict):  # type: ignore[type-arg]
    """A plain subclass: it must read as its items."""


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def hostile(fdp: atheris.FuzzedDataProvider) -> Any:
    """One value, hostile or merely unexpected."""
    pick = fdp.ConsumeIntInRange(0, 17)
    if pick == 0:
        return RaisingAttribute()
    if pick == 1:
        return RaisingMapping(role="user", content="x")
    if pick == 2:
        return RaisingList([1])
    if pick == 3:
        return nested(fdp.ConsumeIntInRange(1, 10_000))
    if pick == 4:
        return "\ud800" + fdp.ConsumeUnicodeNoSurrogates(8)
    if pick == 5:
        return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 40))
    if pick == 6:
        return 2 ** fdp.ConsumeIntInRange(31, 200) * (-1 if fdp.ConsumeBool() else 1)
    if pick == 7:
        return fdp.ConsumeBytes(8)
    if pick == 8:
        return {fdp.ConsumeInt(2)}
    if pick == 9:
        return fdp.ConsumeRegularFloat() if fdp.ConsumeBool() else float("nan")
    if pick == 10:
        return None
    if pick == 11:
        return StrSubclass(fdp.ConsumeUnicode(8))
    if pick == 12:
        return DictSubclass(role="user", content=fdp.ConsumeUnicode(16))
    if pick == 13:
        return ChangingList([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    if pick == 14:
        return {fdp.ConsumeInt(2): "non-str key"}
    if pick == 15:
        return [hostile(fdp) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    if pick == 16:
        return "x" * fdp.ConsumeIntInRange(0, 200_000)
    return fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 64))


def containers(value: Any, out: list[tuple[Any, Any]], depth: int = 0) -> None:
    """Every (container, key) place in ``value`` down to depth 12, depth first."""
    if depth > 12 or type(value) not in (dict, list):
        return
    for key in list(value) if isinstance(value, dict) else range(len(value)):
        out.append((value, key))
        containers(value[key], out, depth + 1)


def mutate(fdp: atheris.FuzzedDataProvider, messages: list[Any]) -> list[Any]:
    """``messages`` after a few edits the bytes choose."""
    for _ in range(fdp.ConsumeIntInRange(0, 4)):
        places: list[tuple[Any, Any]] = []
        containers(messages, places)
        if not places:
            break
        parent, key = places[fdp.ConsumeIntInRange(0, len(places) - 1)]
        edit = fdp.ConsumeIntInRange(0, 3)
        if edit == 0:
            parent[key] = hostile(fdp)
        elif edit == 1:
            del parent[key]
        elif edit == 2 and isinstance(parent, list):
            parent.insert(key, parent[key])
        elif isinstance(parent, dict):
            parent[fdp.ConsumeUnicode(6)] = hostile(fdp)
    if fdp.ConsumeIntInRange(0, 15) == 0:
        messages = (ChangingList if fdp.ConsumeBool() else RaisingList)(messages)
    return messages


def summarizer(fdp: atheris.FuzzedDataProvider) -> Any:
    reply = hostile(fdp) if fdp.ConsumeBool() else fdp.ConsumeUnicode(200)

    def summarize(request: Any) -> Any:
        return reply

    return summarize


def call(fdp: atheris.FuzzedDataProvider, provider: str, messages: list[Any]) -> None:
    tools = copy.deepcopy(TOOLS[provider]) if fdp.ConsumeBool() else None
    if tools is not None and fdp.ConsumeIntInRange(0, 7) == 0:
        tools = hostile(fdp)
    entry = fdp.ConsumeIntInRange(0, 6)
    if entry == 0:
        rb.count_tokens(messages, provider=provider, tools=tools)
    elif entry == 1:
        rb.validate(messages, provider=provider)
    elif entry == 2:
        anchor = hostile(fdp) if fdp.ConsumeBool() else "rb-" + fdp.ConsumeUnicode(16)
        rb.recover(messages, anchor, provider=provider)
    elif entry == 3:
        rb.detect_provider(messages)
    elif entry == 6:
        body_alike(fdp, provider, messages)
    else:
        config = rb.AssemblyConfig(
            model_input_limit=fdp.ConsumeIntInRange(200, 4000),
            output_reserve_tokens=100,
            safety_margin_tokens=0,
            recent_tool_rings=fdp.ConsumeIntInRange(0, 2),
            recent_user_turns=fdp.ConsumeIntInRange(0, 2),
            cache_stable=fdp.ConsumeBool(),
            summary_raw_units=fdp.ConsumeBool(),
            side_effect_tools=("get_reservation", "get_reservation_details"),
        )
        summarize = summarizer(fdp) if entry == 5 else None
        assembler = rb.Assembler(config, provider=provider, summarizer=summarize)
        res = assembler.assemble(messages, tools)
        if fdp.ConsumeBool():
            assembler.assemble(messages, tools, state=res.state)


#: Where each provider's body holds its history.
HISTORY = {
    "openai_chat": "messages",
    "openai_responses": "input",
    "anthropic": "messages",
    "gemini": "contents",
    "bedrock_converse": "messages",
}


def body_alike(fdp: atheris.FuzzedDataProvider, provider: str, messages: list[Any]) -> None:
    """The session as a request body: ``assemble_body`` gives the history ``assemble`` gives
    for the same parsed body, or the same error."""
    try:
        body = orjson.dumps({"model": "m", HISTORY[provider]: messages, "temperature": 0.5})
    except (TypeError, orjson.JSONEncodeError):
        return
    config = rb.AssemblyConfig(
        model_input_limit=fdp.ConsumeIntInRange(200, 4000),
        output_reserve_tokens=100,
        safety_margin_tokens=0,
    )
    assembler = rb.Assembler(config, provider=provider)
    parsed = orjson.loads(body)[HISTORY[provider]]
    try:
        expected: Any = assembler.assemble(parsed).messages
    except rb.RingboundError as e:
        expected = type(e)
    try:
        got: Any = orjson.loads(assembler.assemble_body(body).body)[HISTORY[provider]]
    except rb.RingboundError as e:
        got = type(e)
    if isinstance(expected, list) and isinstance(got, list):
        assert got == orjson.loads(orjson.dumps(expected)), provider
    elif isinstance(expected, type) and isinstance(got, type):
        # A body's error may be the narrower InvalidBodyError of the same message.
        assert issubclass(got, expected), (provider, got, expected)
    else:
        raise AssertionError((provider, got, expected))


def same(a: Any, b: Any) -> bool:
    """Whether ``b`` is unchanged from its copy ``a`` (by repr when NaN makes ``==`` false)."""
    try:
        return bool(a == b) or repr(a) == repr(b)
    except RecursionError:
        return True


def test_one_input(data: bytes) -> None:
    if data.startswith(ARGUMENTS):
        # The arguments beside the messages (system, pinned, config, ledger, stores), planted
        # secrets and deep bodies: ``arguments.py``.
        run_arguments(atheris.FuzzedDataProvider(data[len(ARGUMENTS) :]), SESSIONS)
        return
    if data.startswith(ENTRY_POINTS):
        # The other entry points that read a caller's objects (calibrate, read_usage,
        # is_context_length_error, for_model, the ledgers...): ``entry_points.py``.
        run_entry_points(atheris.FuzzedDataProvider(data[len(ENTRY_POINTS) :]))
        return
    if data.startswith(TRANSLATION):
        # Translation between providers: ``translation.py``.
        fdp = atheris.FuzzedDataProvider(data[len(TRANSLATION) :])
        run_translation(fdp, SESSIONS, TOOLS, mutate, hostile)
        return
    fdp = atheris.FuzzedDataProvider(data)
    ChangingList.changed = False
    provider = PROVIDERS[fdp.ConsumeIntInRange(0, len(PROVIDERS) - 1)]
    messages = mutate(fdp, copy.deepcopy(SESSIONS[provider]))
    try:
        before = copy.deepcopy(messages)
    except (RuntimeError, TypeError):  # hostile or too deep to copy: no mutation check
        before = None
    try:
        call(fdp, provider, messages)
    except rb.RingboundError:
        pass
    checked = before is not None and not ChangingList.changed and type(messages) is list
    if checked and not same(before, messages):
        raise AssertionError(f"{provider}: the caller's messages were changed")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
