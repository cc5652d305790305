"""``detect_provider`` on OpenAI Responses inputs made only of the item types beyond function
calls (compaction, computer, shell, local_shell, apply_patch, custom and MCP items, hosted tool
calls): each votes for Responses on its own, as a bare list or under any key, and the list
of types the vote knows is the core parser's."""

from __future__ import annotations

import re
from typing import Any

import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound.cli.simulate import agent_session
from ringbound.detect import _RESPONSES_ITEMS

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8Dw"
    "HwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
)

#: Each call/output family as its pair, keyed by the call's type.
PAIRS: dict[str, list[dict[str, Any]]] = {
    "computer_call": [
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "c_computer",
            "action": {"type": "click", "button": "left", "x": 10, "y": 20},
            "pending_safety_checks": [],
            "status": "completed",
        },
        {
            "type": "computer_call_output",
            "call_id": "c_computer",
            "output": {"type": "computer_screenshot", "image_url": PNG},
        },
    ],
    "shell_call": [
        {"type": "shell_call", "call_id": "c_shell", "action": {"commands": ["ls"]}},
        {
            "type": "shell_call_output",
            "call_id": "c_shell",
            "output": [
                {"stdout": "a.py", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
            ],
        },
    ],
    "local_shell_call": [
        {
            "type": "local_shell_call",
            "id": "lsh_1",
            "call_id": "c_local",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
            "status": "completed",
        },
        {"type": "local_shell_call_output", "call_id": "c_local", "output": "a.py"},
    ],
    "apply_patch_call": [
        {
            "type": "apply_patch_call",
            "call_id": "c_patch",
            "operation": {"type": "update_file", "path": "a.py", "diff": "-a\n+b\n"},
            "status": "completed",
        },
        {"type": "apply_patch_call_output", "call_id": "c_patch", "status": "completed"},
    ],
    "custom_tool_call": [
        {"type": "custom_tool_call", "call_id": "c_custom", "name": "sql", "input": "select 1"},
        {"type": "custom_tool_call_output", "call_id": "c_custom", "output": "1"},
    ],
    "mcp_approval_request": [
        {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "docs",
            "name": "search",
            "arguments": "{}",
        },
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True},
    ],
}
#: Items that stand alone.
SINGLES: dict[str, dict[str, Any]] = {
    "compaction": {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAABp" * 20},
    "web_search_call": {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "weather"},
    },
    "message": {"type": "message", "role": "user", "content": "hi"},
}
#: A reasoning item goes with the item it precedes.
REASONING = [
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Check the logs."}],
    },
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
]
SESSIONS = {**PAIRS, **{k: [v] for k, v in SINGLES.items()}, "reasoning": REASONING}


def wrapped(items: list[dict[str, Any]]) -> list[Any]:
    """The ways a caller hands the items over: a bare list, a body under ``messages`` (with
    and without a model that names another format) or ``input``."""
    return [
        items,
        {"messages": items},
        {"model": "gpt-4o", "messages": items},
        {"model": "claude-opus-4-6", "messages": items},
        {"input": items},
    ]


def test_the_types_the_vote_knows_are_the_cores() -> None:
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.validate([{"type": "no_such_item"}], "openai_responses")
    listed = re.search(r"\(supported: ([a-z_, ]+)\)", str(e.value))
    assert listed is not None, str(e.value)
    assert set(listed.group(1).split(", ")) | {"item_reference"} == _RESPONSES_ITEMS


@pytest.mark.parametrize("kind", sorted(SESSIONS))
def test_each_item_type_alone_is_a_responses_input(kind: str) -> None:
    items = SESSIONS[kind]
    assert rb.validate(items, "openai_responses") == []  # items the core reads
    for given in wrapped(items):
        assert rb.detect_provider(given) == "openai_responses", given


def test_the_item_types_mixed_are_a_responses_input() -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": "Tidy the repository."}]
    for kind in sorted(PAIRS):
        items += PAIRS[kind]
    items += [*SINGLES.values(), *REASONING]
    items.append({"role": "assistant", "content": [{"type": "output_text", "text": "Done."}]})
    assert rb.validate(items, "openai_responses") == []
    for given in wrapped(items):
        assert rb.detect_provider(given) == "openai_responses"


@pytest.mark.parametrize("kind", sorted(SESSIONS))
def test_a_detecting_assembler_takes_them_as_responses(kind: str) -> None:
    items = [{"role": "user", "content": "Go."}, *SESSIONS[kind]]
    cfg = rb.AssemblyConfig(model_input_limit=100_000)
    detected = rb.Assembler(cfg, provider=None).assemble(items)
    given = rb.Assembler(cfg, provider="openai_responses").assemble(items)
    assert detected.messages == given.messages == items
    assert detected.report.tokens_after == given.report.tokens_after


def test_an_item_reference_gets_the_parsers_refusal_not_ambiguous() -> None:
    items = [{"role": "user", "content": "Go."}, {"type": "item_reference", "id": "msg_1"}]
    assert rb.detect_provider(items) == "openai_responses"
    with pytest.raises(rb.InvalidMessageError, match="item_reference' is not supported"):
        rb.Assembler(rb.AssemblyConfig(), provider=None).assemble(items)


@pytest.mark.parametrize(
    "provider", ["openai_chat", "openai_responses", "anthropic", "gemini", "bedrock_converse"]
)
def test_every_formats_sessions_still_detect_as_theirs(provider: str) -> None:
    messages = agent_session(turns=10)
    if provider != "openai_chat":
        messages, _ = from_canonical(provider, messages)
    assert rb.detect_provider(messages) == provider


def test_a_content_block_named_like_an_item_is_not_an_item() -> None:
    """Anthropic's ``compaction`` block shares its name with a Responses item; only top-level
    items vote."""
    messages = [
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": [{"type": "compaction", "content": "Summary."}]},
    ]
    assert rb.detect_provider(messages) == "anthropic"


@pytest.mark.parametrize("kind", [{"x": 1}, ["message"], 3])
def test_a_type_that_is_not_a_string_is_no_vote_and_no_crash(kind: Any) -> None:
    items = [{"type": kind, "role": "user", "content": [{"type": kind}]}]
    with pytest.raises(rb.InvalidMessageError) as e:
        rb.detect_provider(items)
    assert "ambiguous" in str(e.value) and "raised" not in str(e.value)
