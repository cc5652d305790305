"""What the core does not write fails closed: the request planned is the request sent, so a
plan the core cannot write, a system the notes cannot go into and a request that would not
pair as sent are typed errors, and the caller's input is left as it was."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import ringbound as rb
from ringbound.adapted import NativeRequest

NATIVE = ["openai_responses", "anthropic", "gemini", "bedrock_converse"]


def _sends_session(provider: str) -> tuple[list[Any], Any]:
    """A session whose early rings ran the side-effect tool `send_email`, long enough that
    a small budget drops them and the ledger note goes out."""
    from canonical_writers import from_canonical

    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Mail the team, then report."},
    ]
    for k in range(6):
        cid = f"call_{k}"
        chat += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to": "team"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": cid, "content": "sent " * 80},
            {"role": "assistant", "content": "Sent; next. " * 20},
            {"role": "user", "content": "go on " * 20},
        ]
    return from_canonical(provider, chat)


def _assembler(provider: str) -> rb.Assembler:
    cfg = rb.AssemblyConfig(
        model_input_limit=900,
        output_reserve_tokens=0,
        safety_margin_tokens=0,
        side_effect_tools=["send_email"],
    )
    return rb.Assembler(cfg, provider=provider)


@pytest.mark.parametrize("provider", NATIVE)
def test_a_plan_the_core_does_not_write_is_refused(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the core would not write a plan, nothing else writes it: an InternalError,
    not a request nobody counted."""
    native, system = _sends_session(provider)
    before = copy.deepcopy((native, system))
    monkeypatch.setattr(NativeRequest, "written", lambda self, items, dropped: None)
    with pytest.raises(rb.InternalError, match=f"planned a {provider} request"):
        _assembler(provider).assemble(native, system=system)
    assert (native, system) == before


def test_a_system_the_note_cannot_go_into_is_a_typed_error() -> None:
    """An Anthropic system block holding an int JSON cannot carry (the other providers'
    readers refuse a field they do not know): sent as it is where no note goes, refused
    naming the system where the ledger note must join it."""
    provider = "anthropic"
    native, _ = _sends_session(provider)
    system = [{"type": "text", "text": "Be brief.", "extra": 2**70}]
    before = copy.deepcopy((native, system))
    with pytest.raises(rb.InvalidMessageError, match="system: cannot be written as JSON") as e:
        _assembler(provider).assemble(native, system=system)
    assert e.value.index is None
    assert (native, system) == before
    wide = rb.Assembler(rb.AssemblyConfig(model_input_limit=10**6), provider=provider)
    assert wide.assemble(native, system=system).system is system
