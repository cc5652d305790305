"""What each kind of part becomes in each target (errors, images in results, documents,
instructions, tools and their schemas, compaction, ids), the body's other fields, and the
typed errors of bad input."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import strategies as gen
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ringbound as rb
from ringbound.providers import PROVIDERS

PAIRS = [(a, b) for a in PROVIDERS for b in PROVIDERS if a != b]

PNG = gen.png_data_url(2, 2)
PNG_DATA = PNG.split(",", 1)[1]
PDF_DATA = "JVBERi0xLjQK"


def anthropic_ring(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", **result}]},
    ]


def dumped(out: rb.Translation) -> str:
    return json.dumps(out.messages)


def test_an_error_result_keeps_its_flag_where_the_target_has_one() -> None:
    msgs = anthropic_ring({"content": "disk full", "is_error": True})
    got = {t: rb.translate(msgs, source="anthropic", target=t) for t in PROVIDERS}
    assert got["openai_chat"].messages[-1]["content"] == "Error: disk full"
    assert got["openai_responses"].messages[-1]["output"] == "Error: disk full"
    assert got["bedrock_converse"].messages[-1]["content"][0]["toolResult"]["status"] == "error"
    response = got["gemini"].messages[-1]["parts"][0]["functionResponse"]["response"]
    assert response == {"error": "disk full"}
    for t in ("openai_chat", "openai_responses"):
        assert [c.what for c in got[t].report.changes if c.action == "rewritten"] == ["is_error"]


def test_an_image_in_a_result_is_carried_where_it_can_be_and_refused_where_not() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_DATA},
    }
    msgs = anthropic_ring({"content": [{"type": "text", "text": "here"}, image]})
    bedrock = rb.translate(msgs, source="anthropic", target="bedrock_converse").messages
    assert bedrock[-1]["content"][0]["toolResult"]["content"][1]["image"]["format"] == "png"
    gemini = rb.translate(msgs, source="anthropic", target="gemini").messages
    assert gemini[-1]["parts"][0]["functionResponse"]["parts"][0]["inlineData"]["data"] == PNG_DATA
    responses = rb.translate(msgs, source="anthropic", target="openai_responses").messages
    assert responses[-1]["output"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{PNG_DATA}",
        "detail": "auto",
    }
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.translate(msgs, source="anthropic", target="openai_chat")
    assert e.value.index == 2 and "image" in e.value.reason
    out = rb.translate(msgs, source="anthropic", target="openai_chat", unsupported="placeholder")
    assert out.messages[-1]["content"].startswith("here\n[image omitted: image/png")
    assert [(c.item, c.action, c.what) for c in out.report.changes] == [(2, "placeholder", "image")]


def test_a_remote_image_cannot_go_to_bedrock() -> None:
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        }
    ]
    with pytest.raises(rb.InvalidMessageError):
        rb.translate(msgs, source="openai_chat", target="bedrock_converse")
    out = rb.translate(
        msgs, source="openai_chat", target="bedrock_converse", unsupported="placeholder"
    )
    assert out.messages[0]["content"][1] == {
        "text": "[image omitted: at https://example.com/a.png]"
    }
    url = rb.translate(msgs, source="openai_chat", target="anthropic").messages[0]["content"][1]
    assert url == {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}


def test_a_pdf_becomes_each_targets_document() -> None:
    msgs = [
        {
            "role": "user",
            "content": [
                {
                    "type": "file",
                    "file": {
                        "file_data": f"data:application/pdf;base64,{PDF_DATA}",
                        "filename": "report q3.pdf",
                    },
                }
            ],
        }
    ]
    anthropic = rb.translate(msgs, source="openai_chat", target="anthropic").messages
    assert anthropic[0]["content"][0]["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": PDF_DATA,
    }
    bedrock = rb.translate(msgs, source="openai_chat", target="bedrock_converse").messages
    assert bedrock[0]["content"][0]["document"] == {
        "format": "pdf",
        "name": "report q3 pdf",
        "source": {"bytes": PDF_DATA},
    }
    gemini = rb.translate(msgs, source="openai_chat", target="gemini").messages
    assert gemini[0]["parts"][0] == {
        "inlineData": {"mimeType": "application/pdf", "data": PDF_DATA}
    }


def test_instructions_after_the_start_become_user_text_where_the_system_is_top_level() -> None:
    msgs = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "developer", "content": "now be terse"},
        {"role": "user", "content": "and?"},
    ]
    out = rb.translate(msgs, source="openai_chat", target="anthropic")
    assert out.system == "rules"
    assert out.messages[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "now be terse"}, {"type": "text", "text": "and?"}],
    }
    assert [(c.item, c.what) for c in out.report.changes] == [(3, "instruction")]
    responses = rb.translate(msgs, source="openai_chat", target="openai_responses")
    assert responses.system == "rules"
    assert responses.messages[2]["role"] == "developer"


def test_tools_take_the_targets_shape_and_gemini_its_schema_subset() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "read a file",
                "parameters": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"path": {"type": ["string", "null"]}},
                },
            },
        }
    ]
    msgs = [{"role": "user", "content": "hi"}]
    shapes = {
        t: rb.translate(msgs, source="openai_chat", target=t, tools=tools).tools for t in PROVIDERS
    }
    assert shapes["openai_chat"] == tools
    assert shapes["anthropic"][0]["input_schema"] == tools[0]["function"]["parameters"]
    assert shapes["bedrock_converse"][0]["toolSpec"]["inputSchema"]["json"]["type"] == "object"
    gemini = rb.translate(msgs, source="openai_chat", target="gemini", tools=tools)
    assert gemini.tools == [
        {
            "functionDeclarations": [
                {
                    "name": "read",
                    "description": "read a file",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string", "nullable": True}},
                    },
                }
            ]
        }
    ]
    assert [c.what for c in gemini.report.dropped] == ["schema:read.additionalProperties"]
    back = rb.translate(gemini.messages, source="gemini", target="openai_chat", tools=gemini.tools)
    assert back.tools and back.tools[0]["function"]["name"] == "read"


def test_a_hosted_tool_is_refused_or_left_out_and_reported() -> None:
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(rb.InvalidMessageError, match="web_search_20250305"):
        rb.translate(msgs, source="anthropic", target="openai_chat", tools=tools)
    out = rb.translate(
        msgs, source="anthropic", target="openai_chat", tools=tools, unsupported="placeholder"
    )
    assert out.tools is None and [c.what for c in out.report.dropped] == [
        "tool:web_search_20250305"
    ]


def test_a_readable_compaction_survives_as_text_and_what_it_replaced_is_dropped() -> None:
    msgs = [
        {"role": "user", "content": "old question"},
        {
            "role": "assistant",
            "content": [
                {"type": "compaction", "content": "we chose plan B"},
                {"type": "text", "text": "continuing"},
            ],
        },
        {"role": "user", "content": "next"},
    ]
    out = rb.translate(msgs, source="anthropic", target="openai_chat")
    assert [m["content"] for m in out.messages] == ["we chose plan B", "continuing", "next"]
    assert [(c.item, c.action, c.what) for c in out.report.changes] == [
        (0, "dropped", "before_compaction"),
        (1, "as_text", "compaction"),
    ]


def test_an_opaque_compaction_needs_a_summarizer() -> None:
    msgs = [
        {"role": "user", "content": "old question"},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA-opaque"},
        {"role": "user", "content": "next"},
    ]
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.translate(msgs, source="openai_responses", target="anthropic")
    assert e.value.index == 1 and "summarizer" in e.value.reason
    seen: list[Any] = []

    def summarize(before: list[Any]) -> str:
        seen.append(before)
        return "the user asked an old question"

    out = rb.translate(msgs, source="openai_responses", target="anthropic", summarizer=summarize)
    assert seen == [msgs[:1]]
    assert "opaque" not in dumped(out) and "the user asked an old question" in dumped(out)
    assert ("summarized", "compaction") in [(c.action, c.what) for c in out.report.changes]
    with pytest.raises(rb.SummaryError):
        rb.translate(msgs, source="openai_responses", target="gemini", summarizer=lambda b: 1 / 0)
    with pytest.raises(rb.SummaryError):
        rb.translate(msgs, source="openai_responses", target="gemini", summarizer=lambda b: None)


def test_ids_are_the_same_for_a_session_and_its_prefixes() -> None:
    ring = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.read:0",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.read:0", "content": "text"},
    ]
    session = [{"role": "user", "content": "go"}, *ring, {"role": "user", "content": "more"}, *ring]
    for target in ("anthropic", "bedrock_converse", "openai_responses", "gemini"):
        short = rb.translate(session[:3], source="openai_chat", target=target).report.ids
        full = rb.translate(session, source="openai_chat", target=target).report.ids
        assert full[: len(short)] == short and len(full) == 2 and full[0] != full[1]
        assert all(set(new) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-") for _, new in full)


def test_gemini_call_steps_carry_the_documented_sentinel_unless_asked_not_to() -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    out = rb.translate(msgs, source="openai_chat", target="gemini")
    assert out.messages[1]["parts"][0]["thoughtSignature"] == "skip_thought_signature_validator"
    bare = rb.translate(msgs, source="openai_chat", target="gemini", gemini_sentinel=False)
    assert "thoughtSignature" not in bare.messages[1]["parts"][0]


def test_a_body_maps_its_fields_and_reports_the_rest() -> None:
    body = {
        "model": "gpt-4.1",
        "max_tokens": 300,
        "temperature": 0.2,
        "stop": "END",
        "stream": True,
        "user": "u-1",
        "tool_choice": {"type": "function", "function": {"name": "read"}},
        "tools": [
            {
                "type": "function",
                "function": {"name": "read", "parameters": {"type": "object", "properties": {}}},
            }
        ],
        "messages": [{"role": "system", "content": "rules"}, {"role": "user", "content": "hi"}],
    }
    given = copy.deepcopy(body)
    out, report = rb.translate_body(body, source="openai_chat", target="anthropic")
    assert body == given
    assert out == {
        "model": "gpt-4.1",
        "max_tokens": 300,
        "temperature": 0.2,
        "stop_sequences": ["END"],
        "stream": True,
        "tools": [
            {
                "name": "read",
                "description": "",
                "input_schema": {"type": "object", "properties": {}},
            }
        ],
        "tool_choice": {"type": "tool", "name": "read"},
        "system": "rules",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert [c.what for c in report.dropped] == ["field:user"]
    raw, _ = rb.translate_body(
        json.dumps(out).encode(), source="anthropic", target="bedrock_converse"
    )
    bedrock = json.loads(raw)
    assert bedrock["inferenceConfig"] == {
        "maxTokens": 300,
        "temperature": 0.2,
        "stopSequences": ["END"],
    }
    assert bedrock["toolConfig"]["toolChoice"] == {"tool": {"name": "read"}}
    responses, report = rb.translate_body(body, source="openai_chat", target="openai_responses")
    assert responses["instructions"] == "rules" and responses["max_output_tokens"] == 300
    assert {c.what for c in report.dropped} == {"field:user", "field:stop"}


def test_anthropic_gets_the_max_tokens_it_requires() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    out, report = rb.translate_body(body, source="gemini", target="anthropic")
    assert out["max_tokens"] == 4096
    assert ("inserted", "field:max_tokens") in [(c.action, c.what) for c in report.changes]


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (
            lambda: rb.translate("hi", source="openai_chat", target="anthropic"),
            rb.InvalidMessageError,
        ),
        (lambda: rb.translate([], source="openai_chat", target="mistral"), rb.ConfigError),
        (
            lambda: rb.translate([], source="openai_chat", target="gemini", reasoning="keep"),
            rb.ConfigError,
        ),
        (
            lambda: rb.translate([], source="openai_chat", target="gemini", unsupported=3),
            rb.ConfigError,
        ),
        (
            lambda: rb.translate(
                [{"role": "user", "content": object()}], source="openai_chat", target="gemini"
            ),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate(
                [{"role": "user", "content": "\ud800"}], source="openai_chat", target="gemini"
            ),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate(
                [{"role": "user", "content": "x", "n": 2**70}],
                source="openai_chat",
                target="gemini",
            ),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate(
                [{"role": "tool", "tool_call_id": "x", "content": "orphan"}],
                source="openai_chat",
                target="gemini",
            ),
            rb.PairingError,
        ),
        (
            lambda: rb.translate(
                [{"role": "user", "content": 5}], source="anthropic", target="gemini"
            ),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate(
                [{"role": "user", "content": "x"}],
                source="anthropic",
                target="gemini",
                system={"bad": 1},
            ),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate([], source="openai_chat", target="gemini", tools="x"),
            rb.InvalidMessageError,
        ),
        (
            lambda: rb.translate_body("x", source="openai_chat", target="gemini"),
            rb.InvalidBodyError,
        ),
        (
            lambda: rb.translate_body(b"{", source="openai_chat", target="gemini"),
            rb.InvalidBodyError,
        ),
        (
            lambda: rb.translate_body(b"[]", source="openai_chat", target="gemini"),
            rb.InvalidBodyError,
        ),
        (
            lambda: rb.translate_body({"model": "m"}, source="openai_chat", target="gemini"),
            rb.InvalidBodyError,
        ),
        (
            lambda: rb.translate_body({"messages": "hi"}, source="openai_chat", target="gemini"),
            rb.InvalidBodyError,
        ),
    ],
)
def test_bad_input_gets_a_typed_error(call: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        call()


def test_deep_nesting_is_a_typed_error() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(rb.InvalidMessageError):
        rb.translate([{"role": "user", "content": deep}], source="openai_chat", target="gemini")


def test_what_only_the_source_reads_beside_content_is_reported() -> None:
    msgs = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    out = rb.translate(msgs, source="anthropic", target="gemini")
    assert [(c.item, c.what) for c in out.report.dropped] == [(0, "cache_control")]
    named = [{"role": "user", "name": "alice", "content": "hi"}]
    out = rb.translate(named, source="openai_chat", target="anthropic")
    assert [(c.item, c.what) for c in out.report.dropped] == [(0, "name")]


def test_a_history_already_in_the_target_shape_is_returned_as_it_is() -> None:
    msgs = anthropic_ring({"content": "ok"})
    msgs[1]["content"].insert(0, {"type": "thinking", "thinking": "t", "signature": "s"})
    out = rb.translate(msgs, source="anthropic", target="anthropic", system="rules")
    assert out.messages == msgs and out.system == "rules" and out.report.changes == ()


def test_a_request_over_the_default_limits_is_refused_before_it_is_read() -> None:
    limit = rb.AssemblyConfig().max_request_bytes
    big = [{"role": "user", "content": "x" * (limit + 1)}]
    with pytest.raises(rb.InvalidMessageError, match="max_request_bytes"):
        rb.translate(big, source="openai_chat", target="anthropic")
    with pytest.raises(rb.InvalidBodyError, match="max_request_bytes"):
        rb.translate_body(
            json.dumps({"messages": big}).encode(), source="openai_chat", target="anthropic"
        )


def test_a_body_is_translated_then_fitted_as_the_targets_body() -> None:
    chat = [{"role": "system", "content": "rules"}, {"role": "user", "content": "go"}]
    for k in range(30):
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call.{k}",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"call.{k}", "content": "word " * 200},
        ]
    body = json.dumps({"model": "m", "max_tokens": 500, "messages": chat}).encode()
    config = rb.AssemblyConfig(model_input_limit=4_000, output_reserve_tokens=500)
    asm = rb.Assembler(config, provider="openai_chat")
    res = asm.assemble_body(body, target="gemini")
    sent = json.loads(res.body)
    assert res.provider == "gemini" and res.translation is not None
    assert [c.what for c in res.translation.dropped] == ["field:model"]
    assert sent["generationConfig"] == {"maxOutputTokens": 500}
    assert res.report.tokens_after <= res.report.budget < 4_000
    assert rb.validate(sent["contents"], provider="gemini", system=sent["systemInstruction"]) == []
    assert asm.assemble_body(body).translation is None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.text(max_size=6)
    | st.sampled_from(
        [
            "user",
            "assistant",
            "model",
            "tool",
            "text",
            "image",
            "tool_use",
            "tool_result",
            "function_call",
            "functionCall",
            "toolUse",
            "toolResult",
            "reasoning",
            "compaction",
            "thinking",
            "message",
            "id",
            "call_id",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "role",
                    "content",
                    "type",
                    "text",
                    "parts",
                    "id",
                    "name",
                    "input",
                    "tool_use_id",
                    "tool_call_id",
                    "call_id",
                    "arguments",
                    "output",
                    "functionCall",
                    "functionResponse",
                    "toolUse",
                    "toolResult",
                    "toolUseId",
                    "source",
                    "tool_calls",
                    "function",
                    "summary",
                    "encrypted_content",
                    "thought",
                    "thoughtSignature",
                    "status",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(messages=st.lists(json_values, max_size=5), pair=st.sampled_from(PAIRS))
def test_hostile_input_gets_a_typed_error_never_a_crash(
    messages: list[Any], pair: tuple[str, str]
) -> None:
    source, target = pair
    try:
        rb.translate(messages, source=source, target=target, unsupported="placeholder")
    except rb.InternalError:
        raise
    except rb.RingboundError:
        pass


def test_citations_of_either_vendor_are_reported_when_left_behind() -> None:
    msgs = [
        {"role": "user", "content": "cite"},
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "output_text",
                    "text": "see [1]",
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url": "https://example.com",
                            "start_index": 4,
                            "end_index": 7,
                            "title": "x",
                        }
                    ],
                }
            ],
        },
    ]
    out = rb.translate(msgs, source="openai_responses", target="anthropic")
    assert [(c.item, c.what) for c in out.report.dropped] == [(1, "annotations")]
    ring = anthropic_ring(
        {"content": [{"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}]}
    )
    out = rb.translate(ring, source="anthropic", target="openai_chat")
    assert [(c.item, c.what) for c in out.report.dropped] == [(2, "cache_control")]
