"""Rendering the plan items of the cheap stages and of summaries in every provider's shape:
``Insertion.Rewrite`` (a truncated or deduplicated tool result, images made text) and
``Insertion.Summary``. For each provider the caller's objects are never changed, the
provider's own validator accepts the rendering, and its canonical view reads back the new
texts, with the summary note as its own message right after the ledger note. The rendering
is the Python one the tests keep as the oracle for the core's writing (``oracle_render``)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import oracle_render
import pydantic
import pytest
import strategies as gen
from canonical_writers import from_canonical

import ringbound as rb
from ringbound import _core
from ringbound._core import Insertion
from ringbound.adapted import read_canonical
from ringbound.providers import adapter
from ringbound.providers.base import Canonical, join_system_note, split_system_note
from ringbound.providers.openai_chat import rewritten, summary_note

LEDGER = _core.LEDGER_MARKER + "\nTools already executed: send_email (call s1), status ok."
SUMMARY = _core.SUMMARY_MARKER + "\nUser goal: ship the report.\n\nDecisions: use app.log."
NEWER_SUMMARY = _core.SUMMARY_MARKER + "\nUser goal: ship the report.\n\nDecisions: none yet."
PLACEHOLDER = _core.MEDIA_PLACEHOLDER
BIG = "".join(f"line {i}: ok\n" for i in range(400))
CUT = (
    "line 0: ok\n[ringbound: 2000 of 2400 tokens of this tool result were cut. To read them, "
    'call expand_message with {"message_id": "' + _core.content_id(BIG) + '"}]\nline 399: ok\n'
)
STUB = "[ringbound: superseded by a later read_log call with the same arguments; this older "
STUB += "result was removed]"
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5E"
    "rkJggg=="
)


def texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [p["text"] for p in content or () if p.get("type") == "text"]


def holds_image(native: Any) -> bool:
    """Whether native items (dicts or SDK objects) still carry the test image's data."""
    return PNG in repr(native)


def tool_index(canonical: Canonical, call_id: str) -> int:
    return next(
        k
        for k, m in enumerate(canonical.messages)
        if m["role"] == "tool" and m["tool_call_id"] == call_id
    )


def image_indices(canonical: Canonical, messages: Sequence[Any]) -> list[int]:
    """The canonical user messages that carry images: the core prices a native item's images
    (a tool result's included) on its user message, whose text alone is in the view."""
    return [
        k
        for k, m in enumerate(canonical.messages)
        if m["role"] == "user"
        and canonical.spans[k][0] >= 0
        and holds_image([messages[i] for i in range(*canonical.spans[k])])
    ]


def notes(canonical: Canonical) -> list[str]:
    """The kinds of the leading system-side messages, in order."""
    out = []
    for m in canonical.messages:
        if m["role"] not in ("system", "developer"):
            break
        first = (texts(m) or [""])[0]
        out.append(
            "ledger"
            if first.startswith(_core.LEDGER_MARKER)
            else "summary"
            if first.startswith(_core.SUMMARY_MARKER)
            else "system"
        )
    return out


# Sessions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    provider: str
    messages: list[Any]
    system: Any
    #: Whether the notes sit in the top-level system (else they are messages).
    system_side: bool


def anthropic_case(system: Any) -> Case:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    messages = [
        {"role": "user", "content": "Read both logs."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "read_log", "input": {"f": "a"}},
                {"type": "tool_use", "id": "t2", "name": "read_log", "input": {"f": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": BIG}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "is_error": True,
                    "content": [{"type": "text", "text": "Error: boom"}, image],
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Both read.", "signature": "sig-1"},
                {"type": "text", "text": "Both read. Anything else?"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "Look at this."}, image]},
        {"role": "assistant", "content": "A pixel."},
        {"role": "user", "content": "Thanks."},
    ]
    return Case("anthropic", messages, system, True)


def gemini_case(system: Any) -> Case:
    image = {"inlineData": {"mimeType": "image/png", "data": PNG}}
    messages = [
        {"role": "user", "parts": [{"text": "Read both logs."}]},
        {
            "role": "model",
            "parts": [
                {"functionCall": {"name": "read_log", "args": {"f": "a"}, "id": "t1"}},
                {"functionCall": {"name": "read_log", "args": {"f": "b"}, "id": "t2"}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read_log", "id": "t1", "response": {"output": BIG}}},
                {
                    "functionResponse": {
                        "name": "read_log",
                        "id": "t2",
                        "response": {"error": "Error: boom"},
                        "parts": [image],
                    }
                },
            ],
        },
        {"role": "model", "parts": [{"text": "Both read.", "thoughtSignature": "sig-1"}]},
        {"role": "user", "parts": [{"text": "Look at this."}, image]},
        {"role": "model", "parts": [{"text": "A pixel."}]},
        {"role": "user", "parts": [{"text": "Thanks."}]},
    ]
    return Case("gemini", messages, system, True)


def bedrock_case(system: Any) -> Case:
    image = {"image": {"format": "png", "source": {"bytes": PNG}}}
    messages = [
        {"role": "user", "content": [{"text": "Read both logs."}]},
        {
            "role": "assistant",
            "content": [
                {"text": "Reading."},
                {"toolUse": {"toolUseId": "t1", "name": "read_log", "input": {"f": "a"}}},
                {"toolUse": {"toolUseId": "t2", "name": "read_log", "input": {"f": "b"}}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "t1", "content": [{"text": BIG}]}},
                {
                    "toolResult": {
                        "toolUseId": "t2",
                        "status": "error",
                        "content": [{"text": "Error: boom"}, image],
                    }
                },
            ],
        },
        {"role": "assistant", "content": [{"text": "Both read. Anything else?"}]},
        {"role": "user", "content": [{"text": "Look at this."}, image]},
        {"role": "assistant", "content": [{"text": "A pixel."}]},
        {"role": "user", "content": [{"text": "Thanks."}]},
    ]
    return Case("bedrock_converse", messages, system, True)


def responses_case() -> Case:
    messages = [
        {"type": "message", "role": "user", "content": "Read both logs."},
        {"type": "function_call", "call_id": "t1", "name": "read_log", "arguments": '{"f":"a"}'},
        {"type": "function_call", "call_id": "t2", "name": "read_log", "arguments": '{"f":"b"}'},
        {"type": "function_call_output", "call_id": "t1", "output": BIG},
        {
            "type": "function_call_output",
            "call_id": "t2",
            "output": [{"type": "input_text", "text": "Error: boom"}],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Both read."}],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Look at this."},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            ],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "A pixel."}],
        },
        {"type": "message", "role": "user", "content": "Thanks."},
    ]
    return Case("openai_responses", messages, "You are careful.", False)


CASES: dict[str, Callable[[], Case]] = {
    "anthropic-str": lambda: anthropic_case(join_system_note("You are careful.", LEDGER)),
    "anthropic-blocks": lambda: anthropic_case(
        [{"type": "text", "text": "You are careful."}, {"type": "text", "text": LEDGER}]
    ),
    "gemini-parts": lambda: gemini_case(
        {"parts": [{"text": "You are careful."}, {"text": LEDGER}]}
    ),
    "gemini-str": lambda: gemini_case(join_system_note("You are careful.", LEDGER)),
    "bedrock": lambda: bedrock_case([{"text": "You are careful."}, {"text": LEDGER}]),
    "responses": responses_case,
}


def plan(case: Case, canonical: Canonical, *, summary: str | None = SUMMARY) -> list[Any]:
    """Every canonical message kept, the big result truncated, the error result deduplicated,
    every image made text, and a summary note right after the ledger note."""
    cut, stub = tool_index(canonical, "t1"), tool_index(canonical, "t2")
    media = image_indices(canonical, case.messages)
    items: list[Any] = []
    for k in range(len(canonical.messages)):
        if k == cut:
            items.append(Insertion.Rewrite(index=k, kind="truncated", text=CUT))
        elif k == stub:
            items.append(Insertion.Rewrite(index=k, kind="deduped", text=STUB))
        elif k in media:
            items.append(Insertion.Rewrite(index=k, kind="media", text=PLACEHOLDER))
        else:
            items.append(k)
        if case.system_side and notes(canonical)[k : k + 1] == ["ledger"] and summary:
            items.append(Insertion.Summary(text=summary, role="system"))
        if not case.system_side and k == 1:
            items += [Insertion.LedgerNote(text=LEDGER, role="developer")]
            if summary:
                items.append(Insertion.Summary(text=summary, role="developer"))
    return items


@pytest.mark.parametrize("name", sorted(CASES))
def test_rewrites_and_a_summary_render_in_the_providers_shape(name: str) -> None:
    case = CASES[name]()
    ad = adapter(case.provider)
    canonical = read_canonical(ad, case.messages, case.system)
    before = copy.deepcopy((case.messages, case.system))
    items = plan(case, canonical)

    out = oracle_render.render(ad.key, case.messages, items, canonical, system=case.system)

    assert (case.messages, case.system) == before
    assert ad.validate(out.messages, system=out.system) == []
    back = read_canonical(ad, out.messages, out.system)
    cut, stub = tool_index(back, "t1"), tool_index(back, "t2")
    if case.provider == "gemini":
        assert json.loads(back.messages[cut]["content"]) == {"output": CUT}
        assert back.messages[stub]["content"] == "Error: " + STUB
    else:
        assert "".join(texts(back.messages[cut])) == CUT
        assert STUB in "".join(texts(back.messages[stub]))
    # Images are gone, one placeholder each.
    assert not holds_image(out.messages)
    placeholders = sum("".join(texts(m)).count(PLACEHOLDER) for m in back.messages)
    assert placeholders == (1 if case.provider == "openai_responses" else 2)
    # The summary is its own message, right after the ledger note.
    kinds = notes(back)
    if case.system_side:
        assert kinds == ["system", "ledger", "summary"]
    else:
        roles = [texts(m)[0][:20] for m in back.messages if m["role"] == "developer"]
        assert roles == [LEDGER[:20], SUMMARY[:20]]
        at = next(k for k, m in enumerate(back.messages) if texts(m)[0] == LEDGER)
        assert texts(back.messages[at + 1]) == [SUMMARY]
    assert SUMMARY in [t for m in back.messages for t in texts(m)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_untouched_messages_stay_the_callers_objects(name: str) -> None:
    case = CASES[name]()
    ad = adapter(case.provider)
    canonical = read_canonical(ad, case.messages, case.system)
    out = oracle_render.render(
        ad.key, case.messages, plan(case, canonical), canonical, system=case.system
    )
    changed = {2, 4} if case.provider != "openai_responses" else {3, 4, 6}
    same = [i for i, m in enumerate(case.messages) if any(o is m for o in out.messages)]
    assert same == [i for i in range(len(case.messages)) if i not in changed]


def test_anthropic_keeps_thinking_and_rewrites_only_the_answering_block() -> None:
    case = CASES["anthropic-str"]()
    ad = adapter("anthropic")
    canonical = read_canonical(ad, case.messages, case.system)
    k = tool_index(canonical, "t1")
    items = [
        i if i != k else Insertion.Rewrite(index=k, kind="truncated", text=CUT)
        for i in range(len(canonical.messages))
    ]
    out = oracle_render.render(ad.key, case.messages, items, canonical, system=case.system)
    results = out.messages[2]["content"]
    assert results[0] == {"type": "tool_result", "tool_use_id": "t1", "content": CUT}
    assert results[1] is case.messages[2]["content"][1]
    assert out.messages[3] is case.messages[3]
    assert out.system is case.system


def test_a_truncated_result_keeps_its_images_and_error_flag() -> None:
    case = CASES["bedrock"]()
    ad = adapter("bedrock_converse")
    canonical = read_canonical(ad, case.messages, case.system)
    k = tool_index(canonical, "t2")
    items = [
        i if i != k else Insertion.Rewrite(index=k, kind="truncated", text="Error: bo")
        for i in range(len(canonical.messages))
    ]
    out = oracle_render.render(ad.key, case.messages, items, canonical, system=case.system)
    result = out.messages[2]["content"][1]["toolResult"]
    assert result["status"] == "error"
    assert result["content"] == [
        {"text": "Error: bo"},
        case.messages[2]["content"][1]["toolResult"]["content"][1],
    ]


def test_responses_mcp_call_and_approval_results_are_rewritten_in_their_fields() -> None:
    messages = [
        {"type": "message", "role": "user", "content": "go"},
        {
            "type": "mcp_call",
            "id": "m1",
            "server_label": "files",
            "name": "read",
            "arguments": "{}",
            "error": "boom",
            "output": "partial " * 50,
        },
        {
            "type": "mcp_approval_request",
            "id": "a1",
            "server_label": "files",
            "name": "rm",
            "arguments": "{}",
        },
        {
            "type": "mcp_approval_response",
            "approval_request_id": "a1",
            "approve": False,
            "reason": "no " * 40,
        },
    ]
    ad = adapter("openai_responses")
    canonical = read_canonical(ad, messages, None)
    m1, a1 = tool_index(canonical, "m1"), tool_index(canonical, "a1")
    items: list[Any] = list(range(len(canonical.messages)))
    items[m1] = Insertion.Rewrite(index=m1, kind="truncated", text="Error: boom\npartial [cut]")
    items[a1] = Insertion.Rewrite(index=a1, kind="deduped", text=STUB)
    before = copy.deepcopy(messages)
    out = oracle_render.render(ad.key, messages, items, canonical)
    assert messages == before
    assert ad.validate(out.messages) == []
    back = read_canonical(ad, out.messages, None)
    assert "".join(texts(back.messages[tool_index(back, "m1")])) == "Error: boom\npartial [cut]"
    assert "".join(texts(back.messages[tool_index(back, "a1")])) == STUB


# Earlier summary notes in the system ---------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "note", "summary"),
    [
        ("rules", None, None),
        ("rules", LEDGER, None),
        ("rules", None, SUMMARY),
        ("rules", LEDGER, SUMMARY),
        ("", LEDGER, SUMMARY),
        ("", None, SUMMARY),
        ("", LEDGER, None),
        ("rules\n\nmore rules", LEDGER, SUMMARY),
    ],
)
def test_system_notes_split_as_they_were_joined(
    base: str, note: str | None, summary: str | None
) -> None:
    assert split_system_note(join_system_note(base, note, summary)) == (base, note, summary)


SYSTEM_SIDE = [n for n in sorted(CASES) if CASES[n]().system_side]


def rendered_with_summary(name: str) -> tuple[Any, Any, Any]:
    """A case rendered once with a summary: (adapter, messages, system) of the result."""
    case = CASES[name]()
    ad = adapter(case.provider)
    canonical = read_canonical(ad, case.messages, case.system)
    out = oracle_render.render(
        ad.key, case.messages, plan(case, canonical), canonical, system=case.system
    )
    return ad, out.messages, out.system


def summary_texts(canonical: Canonical) -> list[str]:
    return [t for m in canonical.messages for t in texts(m) if t.startswith(_core.SUMMARY_MARKER)]


@pytest.mark.parametrize("name", SYSTEM_SIDE)
def test_a_kept_summary_note_stays_in_the_system_as_it_is(name: str) -> None:
    ad, messages, system = rendered_with_summary(name)
    canonical = read_canonical(ad, messages, system)
    assert notes(canonical) == ["system", "ledger", "summary"]
    assert [s for s, e in canonical.spans[:3]] == [-1, -1, -1]
    out = oracle_render.render(
        ad.key, messages, list(range(len(canonical.messages))), canonical, system=system
    )
    assert out.system is system
    assert out.messages == messages


@pytest.mark.parametrize("name", SYSTEM_SIDE)
def test_a_new_summary_note_replaces_the_earlier_one(name: str) -> None:
    ad, messages, system = rendered_with_summary(name)
    canonical = read_canonical(ad, messages, system)
    earlier = notes(canonical).index("summary")
    items: list[Any] = [k for k in range(len(canonical.messages)) if k != earlier]
    items.insert(earlier, Insertion.Summary(text=NEWER_SUMMARY, role="system"))
    snapshot = copy.deepcopy(system)
    out = oracle_render.render(ad.key, messages, items, canonical, system=system)
    assert system == snapshot
    back = read_canonical(ad, out.messages, out.system)
    assert notes(back) == ["system", "ledger", "summary"]
    assert summary_texts(back) == [NEWER_SUMMARY]


@pytest.mark.parametrize("name", SYSTEM_SIDE)
def test_a_summary_note_the_items_leave_out_leaves_the_system(name: str) -> None:
    ad, messages, system = rendered_with_summary(name)
    canonical = read_canonical(ad, messages, system)
    earlier = notes(canonical).index("summary")
    items = [k for k in range(len(canonical.messages)) if k != earlier]
    out = oracle_render.render(ad.key, messages, items, canonical, system=system)
    back = read_canonical(ad, out.messages, out.system)
    assert notes(back) == ["system", "ledger"]
    assert summary_texts(back) == []


@pytest.mark.parametrize("provider", ["anthropic", "gemini", "bedrock_converse"])
def test_from_canonical_puts_the_summary_after_the_ledger_in_the_system(provider: str) -> None:
    chat = [
        {"role": "system", "content": "You are careful."},
        {"role": "system", "content": LEDGER},
        {"role": "system", "content": SUMMARY},
        {"role": "user", "content": "Go on."},
    ]
    messages, system = from_canonical(provider, chat)
    canonical = read_canonical(adapter(provider), messages, system)
    assert notes(canonical) == ["system", "ledger", "summary"]
    assert summary_texts(canonical) == [SUMMARY]


# SDK objects --------------------------------------------------------------------------------


class Part(pydantic.BaseModel):
    """A stand-in for ``google.genai.types.Part``."""

    model_config = pydantic.ConfigDict(extra="forbid")
    text: str | None = None
    thought_signature: str | None = None
    inline_data: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None
    function_response: dict[str, Any] | None = None


class Content(pydantic.BaseModel):
    """A stand-in for ``google.genai.types.Content``."""

    role: str | None = None
    parts: list[Part]


def test_gemini_sdk_contents_are_rewritten_into_new_sdk_objects() -> None:
    image = Part(inline_data={"mime_type": "image/png", "data": PNG}, thought_signature="s")
    contents = [
        Content(role="user", parts=[Part(text="go")]),
        Content(role="model", parts=[Part(function_call={"name": "read", "args": {}, "id": "t1"})]),
        Content(
            role="user",
            parts=[Part(function_response={"name": "read", "id": "t1", "response": {"out": BIG}})],
        ),
        Content(role="model", parts=[Part(text="ok"), image]),
        Content(role="user", parts=[Part(text="thanks")]),
    ]
    snapshot = [c.model_dump() for c in contents]
    ad = adapter("gemini")
    canonical = read_canonical(ad, contents, None)
    k, (media,) = tool_index(canonical, "t1"), image_indices(canonical, contents)
    items: list[Any] = list(range(len(canonical.messages)))
    items[k] = Insertion.Rewrite(index=k, kind="truncated", text=CUT)
    items[media] = Insertion.Rewrite(index=media, kind="media", text=PLACEHOLDER)
    out = oracle_render.render(ad.key, contents, items, canonical)
    assert [c.model_dump() for c in contents] == snapshot
    assert all(isinstance(c, Content) for c in out.messages)
    assert out.messages[2].parts[0].function_response["response"] == {"out": CUT}
    assert out.messages[3].parts[1] == Part(text=PLACEHOLDER, thought_signature="s")
    assert ad.validate(out.messages) == []


# OpenAI Chat --------------------------------------------------------------------------------


class ChatMessage(pydantic.BaseModel):
    role: str
    content: Any = None
    tool_call_id: str | None = None
    name: str | None = None


def test_chat_summary_note_is_an_instruction_message() -> None:
    assert summary_note(SUMMARY, "developer") == {"role": "developer", "content": SUMMARY}


@pytest.mark.parametrize("kind", ["truncated", "deduped"])
def test_chat_rewritten_result_is_a_new_message_with_the_text(kind: str) -> None:
    message = {
        "role": "tool",
        "tool_call_id": "t1",
        "name": "read",
        "content": [{"type": "text", "text": BIG}],
    }
    before = copy.deepcopy(message)
    out = rewritten(message, kind, CUT)
    assert message == before
    assert out == {"role": "tool", "tool_call_id": "t1", "name": "read", "content": CUT}


def test_chat_rewritten_reads_sdk_objects() -> None:
    message = ChatMessage(role="tool", tool_call_id="t1", content=BIG)
    out = rewritten(message, "truncated", CUT)
    assert out == {"role": "tool", "tool_call_id": "t1", "content": CUT}
    assert message.content == BIG


def test_chat_media_rewrite_turns_each_image_into_text() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    message = {"role": "user", "content": [{"type": "text", "text": "look"}, image, image]}
    before = copy.deepcopy(message)
    out = rewritten(message, "media", PLACEHOLDER)
    assert message == before
    assert out["content"] == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": PLACEHOLDER},
        {"type": "text", "text": PLACEHOLDER},
    ]
    assert out["content"][0] is message["content"][0]
    assert rb.validate([{"role": "user", "content": "hi"}, out]) == []


def test_chat_rewritten_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown rewrite kind"):
        rewritten({"role": "tool", "tool_call_id": "t1", "content": "x"}, "shrunk", "y")


# End to end: the default stages through each adapter ------------------------------------------


def chat_session() -> list[dict[str, Any]]:
    """Reads repeated with the same arguments, one huge result, screenshots: every cheap stage
    has something to do."""
    image = {"type": "image_url", "image_url": {"url": gen.png_data_url(1600, 1200)}}
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "Watch the logs and the screen."},
    ]
    for i in range(10):
        args = json.dumps({"day": 99 if i == 6 else i % 3})
        tool_call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_log", "arguments": args},
        }
        chat += [
            {"role": "assistant", "content": None, "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": BIG * 4 if i == 6 else BIG},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": [{"type": "text", "text": f"screen {i}"}, image]},
        ]
    chat.append({"role": "assistant", "content": "Done."})
    return chat


@pytest.mark.parametrize("provider", rb.providers.PROVIDERS)
def test_default_stages_render_valid_requests_in_every_shape(provider: str) -> None:
    chat = chat_session()
    if provider == "openai_chat":
        messages, system = chat, None
    else:
        messages, system = from_canonical(provider, chat)
    before = copy.deepcopy((messages, system))
    full = rb.count_tokens(messages, provider=provider, system=system)
    cfg = rb.AssemblyConfig(
        model_input_limit=full * 2 // 5, output_reserve_tokens=0, safety_margin_tokens=0
    )
    res = rb.Assembler(cfg, provider=provider).assemble(messages, system=system)
    assert (messages, system) == before
    assert rb.validate(res.messages, provider=provider, system=res.system) == []
    assert {r.kind for r in res.report.rewrites} == {"deduped", "truncated", "media"}
    assert res.report.tokens_after <= cfg.budget
    assert rb.count_tokens(res.messages, provider=provider, system=res.system) <= cfg.budget


@pytest.mark.parametrize("synthesized", [False, True])
def test_a_responses_result_with_an_item_folded_in_is_counted_as_sent(synthesized: bool) -> None:
    """An assistant message met while a call is still open is folded into the output before
    it (the canonical view pairs by adjacency). A cut of that output would leave the folded
    message beside it, which the limit does not bound, so such an output is not cut; at every
    budget the plan either fits as counted or is refused, with or without the open call's
    result synthesized."""
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "a", "name": "read", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "b", "output": "log line " * 400},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "while a runs, b said a lot"}],
        },
        {"type": "function_call_output", "call_id": "a", "output": "done"},
        {"role": "user", "content": "and now?"},
    ]
    if synthesized:
        del items[5]
    fitted = 0
    for budget in range(200, 1200, 50):
        cfg = rb.AssemblyConfig(
            model_input_limit=budget,
            output_reserve_tokens=0,
            safety_margin_tokens=0,
            max_tool_result_tokens=200,
            min_result_tokens=100,
            on_pairing_error="synthesize_error_results",
        )
        try:
            res = rb.Assembler(cfg, provider="openai_responses").assemble(items)
        except rb.BudgetExceededError:
            continue
        fitted += 1
        sent = rb.count_tokens(list(res.messages), provider="openai_responses")
        assert res.report.tokens_after == sent <= budget
        assert not res.report.truncated_results
    assert fitted
