"""The core writes a Responses, Anthropic, Gemini or Bedrock Converse body itself when the plan
only drops whole items (``path == "native"``, ``ringbound.items_body``). Whatever path a body
takes, the result must be what ``assemble`` gives for the same history: the same items, system
and report, every other field as it was, and on the native path the kept items as the input's
own bytes. Generated sessions, with and without side-effect tools (whose ledger note only the
adapter renders), at budgets from a few messages to everything."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import strategies as gen
from canonical_writers import from_canonical
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_anthropic import _conversation, _events
from test_api import session

import ringbound as rb
from ringbound import _core
from ringbound.errors import RingboundError

#: Where each body keeps its history and system.
KEYS = {
    "openai_responses": ("input", "instructions"),
    "anthropic": ("messages", "system"),
    "gemini": ("contents", "systemInstruction"),
    "bedrock_converse": ("messages", "system"),
}
EXTRA = {"model": "m-1", "temperature": 0.3, "metadata": {"user": "u-1"}}
MARKED = {"cache_control": {"type": "ephemeral"}}


def body_of(provider: str, native: list[Any], system: Any, indent: bool) -> bytes:
    history, system_key = KEYS[provider]
    body: dict[str, Any] = {**EXTRA, history: native}
    if system is not None:
        body[system_key] = system
    return orjson.dumps(body, option=orjson.OPT_INDENT_2 if indent else 0)


def report_fields(report: rb.AssemblyReport) -> dict[str, Any]:
    fields = dataclasses.asdict(report)
    fields.pop("elapsed_s")
    return fields


def assembled(provider: str, data: bytes, cfg: rb.AssemblyConfig) -> tuple[Any, Any]:
    """``assemble_body`` of ``data``, and ``assemble`` of the same history: each a result or
    the exception class it raised."""
    history, system_key = KEYS[provider]
    parsed = orjson.loads(data)
    try:
        res: Any = rb.Assembler(cfg, provider=provider).assemble_body(data)
    except RingboundError as e:
        res = type(e)
    try:
        expected: Any = rb.Assembler(cfg, provider=provider).assemble(
            parsed[history], system=parsed.get(system_key)
        )
    except RingboundError as e:
        expected = type(e)
    return res, expected


def _drawn_config(
    provider: str, native: list[Any], system: Any, fraction: float, notes: bool, **extra: Any
) -> rb.AssemblyConfig:
    """A budget of ``fraction`` of the session's tokens, no reserve or margin, the side-effect
    tools when ``notes``, and ``extra`` options."""
    full = rb.count_tokens(native, provider=provider, system=system)
    return rb.AssemblyConfig(
        model_input_limit=max(50, int(full * fraction)),
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=list(gen.TOOLS) if notes else [],
        **extra,
    )


def check_same(provider: str, data: bytes, res: Any, expected: Any) -> None:
    if isinstance(expected, type) or isinstance(res, type):
        assert res == expected
        return
    history, system_key = KEYS[provider]
    parsed, out = orjson.loads(data), orjson.loads(res.body)
    assert out[history] == orjson.loads(orjson.dumps(expected.messages))
    if system_key in parsed or expected.system is not None:
        assert out[system_key] == orjson.loads(orjson.dumps(expected.system))
    rest = {k: v for k, v in out.items() if k not in (history, system_key)}
    assert rest == {k: v for k, v in parsed.items() if k not in (history, system_key)}
    assert report_fields(res.report) == report_fields(expected.report)
    if res.path == "native":
        assert res.path_reason is None
        _, array, spans = _core.split_body(data, history, 1 << 30)
        raws = [array[s:e] for s, e in spans]
        kept = orjson.loads(res.body)[history]
        # The kept items are the input's own bytes: each kept item an input item is (by
        # value: two items may differ only in key order) goes out as one of their bytes.
        values = [orjson.loads(raw) for raw in raws]
        for item in kept:
            same = [raw for raw, value in zip(raws, values, strict=True) if value == item]
            assert not same or any(raw in res.body for raw in same)
        assert len(kept) == res.report.messages_after


@pytest.mark.parametrize("provider", sorted(KEYS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chat=st.one_of(gen.sessions(max_units=10), gen.sessions(max_units=10, cheap=True)),
    fraction=st.floats(0.2, 1.2),
    notes=st.booleans(),
    indent=st.booleans(),
    cap=st.sampled_from([4000, 60]),
)
def test_every_path_gives_what_assemble_gives(
    provider: str,
    chat: list[dict[str, Any]],
    fraction: float,
    notes: bool,
    indent: bool,
    cap: int,
) -> None:
    native, system = from_canonical(provider, chat)
    data = body_of(provider, native, system, indent)
    cfg = _drawn_config(
        provider,
        native,
        system,
        fraction,
        notes,
        max_tool_result_tokens=cap,
        min_result_tokens=min(cap, 500),
    )
    res, expected = assembled(provider, data, cfg)
    if isinstance(res, type):
        event(res.__name__)
    else:
        kinds = sorted({r.kind for r in res.report.rewrites} - {"blank_text"})
        merged = ["merged"] if res.report.merged else []
        event(", ".join([res.path, *merged, *kinds]))
    check_same(provider, data, res, expected)


@pytest.mark.parametrize("provider", sorted(KEYS))
@pytest.mark.parametrize("notes", [False, True])
def test_cut_results_are_written_by_the_core(provider: str, notes: bool) -> None:
    """Results over ``max_tool_result_tokens`` are cut, and the core writes the body: each
    cut result edited where it lies in its item, every other item the input's own bytes, the
    report and the request what the dict path gives, and the request counted as planned."""
    chat = session(rings=30, result="log line " * 150)
    native, system = from_canonical(provider, chat)
    data = body_of(provider, native, system, indent=False)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=full * 2 // 3,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        max_tool_result_tokens=200,
        min_result_tokens=100,
        side_effect_tools=["send_email"] if notes else [],
    )
    res, expected = assembled(provider, data, cfg)
    assert res.path == "native", res.path_reason
    assert res.report.truncated_results
    check_same(provider, data, res, expected)
    history, system_key = KEYS[provider]
    out = orjson.loads(res.body)
    sent = rb.count_tokens(out[history], provider=provider, system=out.get(system_key))
    assert sent == res.report.tokens_after <= res.report.budget


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_a_trimmed_body_is_written_by_the_core(provider: str) -> None:
    """A session trimmed by whole rings, without side-effect tools: the core writes the
    body, and the report says what the dict path's would."""
    native, system = from_canonical(provider, session(rings=30))
    data = body_of(provider, native, system, indent=True)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=full // 2, output_reserve_tokens=0, safety_margin_tokens=0
    )
    res, expected = assembled(provider, data, cfg)
    assert res.path == "native", res.path_reason
    assert res.report.dropped_rings and res.report.messages_after < len(native)
    check_same(provider, data, res, expected)


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_images_made_text_are_written_by_the_core(provider: str) -> None:
    """Screenshots in the middle of a session, the budget just under it: the media stage
    makes the older ones text, the core writes each into its item where the image was, and
    the result is what the dict path gives, counted as planned."""
    image = {"type": "image_url", "image_url": {"url": gen.png_data_url(1024, 768)}}
    screenshot = {"role": "user", "content": [{"type": "text", "text": "see"}, image]}
    chat: list[dict[str, Any]] = []
    for k, message in enumerate(session(rings=12)):
        chat.append(message)
        if message["role"] == "tool" and k % 3 == 0:
            chat.append(screenshot)
    native, system = from_canonical(provider, chat)
    data = body_of(provider, native, system, indent=False)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=full - 1500, output_reserve_tokens=0, safety_margin_tokens=0
    )
    res, expected = assembled(provider, data, cfg)
    assert res.path == "native", res.path_reason
    assert any(r.kind == "media" for r in res.report.rewrites)
    check_same(provider, data, res, expected)
    history, system_key = KEYS[provider]
    out = orjson.loads(res.body)
    sent = rb.count_tokens(out[history], provider=provider, system=out.get(system_key))
    assert sent == res.report.tokens_after <= res.report.budget


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_the_ledger_note_is_written_where_the_adapter_writes_it(provider: str) -> None:
    """With side-effect tools the dropped rings leave a ledger note: the core writes it in
    the system (an input item for Responses), as the adapter does, on the native path."""
    native, system = from_canonical(provider, session(rings=30))
    for sent in (system, None):
        data = body_of(provider, native, sent, indent=False)
        full = rb.count_tokens(native, provider=provider, system=sent)
        cfg = rb.AssemblyConfig(
            model_input_limit=full // 2,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            side_effect_tools=list(gen.TOOLS),
        )
        res, expected = assembled(provider, data, cfg)
        # Where a ring dropped with the reply it holds leaves two Bedrock user turns to merge
        # beside the note, the core writes that too, the body counted as sent with the note.
        assert res.path == "native", res.path_reason
        assert res.report.ledger_entries > 0
        assert _core.LEDGER_MARKER in res.body.decode()
        check_same(provider, data, res, expected)


@pytest.mark.parametrize("provider", sorted(KEYS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    chat=gen.sessions(max_units=10, cheap=True),
    fraction=st.floats(0.2, 1.2),
    notes=st.booleans(),
)
def test_repaired_bodies_give_what_assemble_gives(
    provider: str, data: st.DataObject, chat: list[dict[str, Any]], fraction: float, notes: bool
) -> None:
    """Sessions whose calls lost results, repaired: every body path gives what ``assemble``
    gives, the core's native path included."""
    chat = data.draw(gen.drop_some_results(chat))
    native, system = from_canonical(provider, chat)
    body = body_of(provider, native, system, False)
    cfg = _drawn_config(
        provider, native, system, fraction, notes, on_pairing_error="synthesize_error_results"
    )
    res, expected = assembled(provider, body, cfg)
    event(res.__name__ if isinstance(res, type) else res.path)
    check_same(provider, body, res, expected)


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_a_synthesized_result_is_written_by_the_core(provider: str) -> None:
    """A result the plan synthesizes for an unanswered call is written by the core where the
    provider puts it, the body counted as sent, with the result ``assemble`` gives; without
    the repair asked for, the body path refuses it as ``assemble`` does."""
    chat = session(rings=30)
    chat.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "open", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    )
    native, system = from_canonical(provider, chat)
    data = body_of(provider, native, system, indent=False)
    cfg = rb.AssemblyConfig(model_input_limit=10**6, on_pairing_error="synthesize_error_results")
    res, expected = assembled(provider, data, cfg)
    assert res.path == "native", res.path_reason
    assert res.report.repairs == ["open"]
    check_same(provider, data, res, expected)
    refused, expected = assembled(provider, data, rb.AssemblyConfig(model_input_limit=10**6))
    assert refused is expected is rb.PairingError


def test_claude_code_sessions_agree_on_every_path(corpus: Path) -> None:
    """The real Claude Code sessions (blank text blocks, cache markers, unanswered calls) as
    Anthropic bodies, with three kinds of system, at four budgets, with and without
    side-effect tools: the same result on whichever path each takes, and every request the
    core writes (the notes beside merged turns included): none takes the items path."""
    paths: Counter[str] = Counter()
    systems = (None, "You are Claude Code.", [{"type": "text", "text": "rules", **MARKED}])
    for log in sorted((corpus / "claude-code").glob("*.jsonl")):
        msgs, _ = _conversation(_events(log))
        for system in systems:
            data = body_of("anthropic", msgs, system, indent=False)
            full = rb.count_tokens(msgs, provider="anthropic", system=system)
            for fraction in (1.0, 0.9, 0.6, 0.3):
                for tools in ([], ["Edit", "MultiEdit", "TodoWrite"]):
                    cfg = rb.AssemblyConfig(
                        model_input_limit=max(50, int(full * fraction)),
                        output_reserve_tokens=0,
                        safety_margin_tokens=0,
                        side_effect_tools=tools,
                    )
                    res, expected = assembled("anthropic", data, cfg)
                    check_same("anthropic", data, res, expected)
                    paths[res if isinstance(res, type) else res.path] += 1
    assert paths["native"] and not paths["items"], paths


def test_cache_markers_over_the_limit_are_refused_on_every_path() -> None:
    """Anthropic refuses a fifth ``cache_control`` marker: a body whose system and kept items
    carry five is the adapter's to refuse, naming the message; four go out as given."""
    turns = [
        {"role": role, "content": [{"type": "text", "text": f"turn {i}", **MARKED}]}
        for i, role in enumerate(["user", "assistant", "user"])
    ]
    for markers, expected in ((1, "native"), (2, rb.InvalidMessageError)):
        system = [{"type": "text", "text": f"rules {k}", **MARKED} for k in range(markers)]
        data = body_of("anthropic", turns, system, indent=False)
        cfg = rb.AssemblyConfig(model_input_limit=10_000, output_reserve_tokens=0)
        res, same = assembled("anthropic", data, cfg)
        check_same("anthropic", data, res, same)
        assert (res if isinstance(res, type) else res.path) == expected


@pytest.mark.parametrize("provider", sorted(KEYS))
def test_one_assembler_across_turns_and_heads_agrees_with_new_ones(provider: str) -> None:
    """A gateway's assembler sees the same head (model, system, tools, reserve) turn after
    turn, and reads each distinct head once: every turn, under heads that differ in their
    system or their output reserve, gives what a new assembler gives, and a head it refuses is
    refused every time."""
    chat = session(rings=24)
    native, system = from_canonical(provider, chat)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=full // 2, output_reserve_tokens=0, safety_margin_tokens=0
    )
    kept = rb.Assembler(cfg, provider=provider)
    _, system_key = KEYS[provider]
    reserve = {
        "openai_responses": "max_output_tokens",
        "anthropic": "max_tokens",
        "gemini": "maxOutputTokens",
        "bedrock_converse": "maxTokens",
    }[provider]
    heads = [{}, {system_key: None}, {reserve: 64}]
    seen: Counter[str] = Counter()
    for turn in range(len(native) // 2, len(native) + 1, 5):
        for extra in heads:
            body = orjson.loads(body_of(provider, native[:turn], system, indent=False))
            for key, value in extra.items():
                if value is None:
                    body.pop(key, None)
                elif provider == "gemini":
                    body["generationConfig"] = {key: value}
                elif provider == "bedrock_converse":
                    body["inferenceConfig"] = {key: value}
                else:
                    body[key] = value
            data = orjson.dumps(body)
            res = kept.assemble_body(data)
            fresh = rb.Assembler(cfg, provider=provider).assemble_body(data)
            assert res.body == fresh.body
            assert (res.path, res.path_reason) == (fresh.path, fresh.path_reason)
            assert report_fields(res.report) == report_fields(fresh.report)
            seen[res.path] += 1
    assert seen["native"], seen
    bad = orjson.loads(body_of(provider, native, system, indent=False))
    bad["toolConfig" if provider == "bedrock_converse" else "tools"] = (
        {"tools": "none"} if provider == "bedrock_converse" else "none"
    )
    for _ in range(2):
        with pytest.raises(rb.InvalidBodyError, match="must be a list"):
            kept.assemble_body(orjson.dumps(bad))


def _chatty(turns: int, thinking: bool) -> list[dict[str, Any]]:
    """An Anthropic session of plain turns (string and block contents), then a ring: dropping
    an assistant turn brings two user turns together. With ``thinking``, every assistant
    turn opens with a thinking block and follows another assistant turn. One block carries a
    cache marker."""
    pad = "word " * 120
    out: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug in the parser"}]
    for k in range(turns):
        if thinking:
            out.append({"role": "assistant", "content": [{"type": "text", "text": f"aside {k}"}]})
        blocks: list[dict[str, Any]] = [{"type": "text", "text": f"thoughts {k} {pad}"}]
        if thinking:
            blocks.insert(0, {"type": "thinking", "thinking": "hm", "signature": f"s{k}"})
        out.append({"role": "assistant", "content": blocks})
        text = [{"type": "text", "text": f"more {k}"}] + ([MARKED_TEXT] if k == 0 else [])
        out.append({"role": "user", "content": f"note {k}" if k % 2 else text})
    out.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}],
        }
    )
    out.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    )
    return out


MARKED_TEXT = {"type": "text", "text": "see above", "cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize("thinking", [False, True])
@pytest.mark.parametrize("fraction", [0.9, 0.6, 0.3])
def test_neighbours_a_drop_brings_together_are_merged_as_the_adapter_merges_them(
    thinking: bool, fraction: float
) -> None:
    """Dropping an assistant turn brings two user turns together, which the adapter sends as
    one message (a string content as a text block): the core writes that message itself and
    counts the request as sent. An assistant turn that opens with thinking behind another is
    the adapter's (it places a user turn between them)."""
    native = _chatty(12 if not thinking else 3, thinking)
    data = body_of("anthropic", native, None, indent=True)
    full = rb.count_tokens(native, provider="anthropic")
    cfg = rb.AssemblyConfig(
        model_input_limit=int(full * fraction), output_reserve_tokens=0, safety_margin_tokens=0
    )
    res, expected = assembled("anthropic", data, cfg)
    if isinstance(res, type):
        assert res == expected
        return
    check_same("anthropic", data, res, expected)
    if not thinking:
        assert res.path == "native" and res.report.merged > 0, (res.path, res.path_reason)
        assert res.report.tokens_after < res.report.budget


@pytest.mark.parametrize("provider", sorted(KEYS))
@pytest.mark.parametrize("fraction", [0.8, 0.5, 0.25])
def test_plain_turns_dropped_between_turns_of_one_role(provider: str, fraction: float) -> None:
    """A chat of plain turns converted to each format: dropping an assistant turn leaves two
    user turns together. Anthropic, Bedrock and Gemini bodies go out merged by the core, as
    their adapters merge them; every format gives what ``assemble`` gives."""
    pad = "word " * 150
    chat: list[dict[str, Any]] = [{"role": "user", "content": "fix the parser"}]
    for k in range(10):
        chat.append({"role": "assistant", "content": f"thoughts {k} {pad}"})
        chat.append({"role": "user", "content": f"and also {k}"})
    chat += session(rings=1)[1:]
    native, system = from_canonical(provider, chat)
    data = body_of(provider, native, system, indent=False)
    full = rb.count_tokens(native, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=int(full * fraction), output_reserve_tokens=0, safety_margin_tokens=0
    )
    res, expected = assembled(provider, data, cfg)
    check_same(provider, data, res, expected)
    if provider in ("anthropic", "bedrock_converse", "gemini"):
        assert not isinstance(res, type)
        assert res.path == "native" and res.report.merged > 0, (res.path, res.path_reason)


@pytest.mark.parametrize("fraction", [1.2, 0.6, 0.3])
def test_whitespace_only_text_is_stripped_by_the_core_as_the_adapter_strips_it(
    fraction: float,
) -> None:
    """Opus writes ``"\\n\\n"`` text blocks, which Anthropic refuses: the core strips them from
    the kept messages (the last assistant turn's included), as the adapter does, each a
    ``blank_text`` rewrite, and leaves a message of blank text alone as the adapter leaves it.
    Python's whitespace (``str.isspace``) is the rule, U+001C to U+001F included."""
    pad = "word " * 80
    native: list[dict[str, Any]] = [{"role": "user", "content": "fix the parser"}]
    for k in range(8):
        blanks = ["\n\n", " \t", "\x1c\u3000", "\n"]
        native.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": blanks[k % 4]},
                    {"type": "text", "text": f"step {k} {pad}"},
                    {"type": "tool_use", "id": f"t{k}", "name": "f", "input": {"k": k}},
                ],
                "id": f"msg_{k}",
            }
        )
        native.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"t{k}", "content": pad},
                    {"type": "text", "text": "\n\n"} if k % 2 else {"type": "text", "text": "ok"},
                ],
            }
        )
    native.append({"role": "assistant", "content": [{"type": "text", "text": "  "}]})
    native.append({"role": "user", "content": "  "})
    native.append(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "\n\n"}, {"type": "text", "text": "done"}],
        }
    )
    data = body_of("anthropic", native, None, indent=False)
    full = rb.count_tokens(native, provider="anthropic")
    cfg = rb.AssemblyConfig(
        model_input_limit=int(full * fraction), output_reserve_tokens=0, safety_margin_tokens=0
    )
    res, expected = assembled("anthropic", data, cfg)
    check_same("anthropic", data, res, expected)
    assert res.path == "native", res.path_reason
    stripped = [r.index for r in res.report.rewrites if r.kind == "blank_text"]
    assert stripped and len(native) - 1 in stripped
    out = orjson.loads(res.body)["messages"]
    assert out[-1]["content"] == [{"type": "text", "text": "done"}]
    if not res.report.dropped_turns:
        # Left alone, unless dropping the blank reply before it merged it into the results
        # turn (the plain turns between the latest rings are middle).
        assert {"role": "user", "content": "  "} in out
