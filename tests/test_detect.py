"""``detect_provider``: the keys a format alone uses, then the providers' own parsers, then the
body's ``model`` as a hint; a refusal when a body still fits several formats."""

from __future__ import annotations

import pytest

import ringbound as rb

SYSTEM = {"role": "system", "content": "Be brief."}
USER = {"role": "user", "content": "hi"}


def test_a_system_message_is_no_anthropic_message() -> None:
    # The keys fit OpenAI Chat and Anthropic alike; Anthropic's parser refuses the role.
    assert rb.detect_provider({"model": "gpt-4o", "messages": [SYSTEM, USER]}) == "openai_chat"
    assert rb.detect_provider({"messages": [SYSTEM, USER]}) == "openai_chat"
    assert rb.detect_provider([SYSTEM, USER]) == "openai_chat"


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("gpt-4o", "openai_chat"),
        ("o3-mini", "openai_chat"),
        ("claude-opus-4-6", "anthropic"),
        ("Claude-Sonnet-4-6", "anthropic"),
    ],
)
def test_the_model_breaks_a_tie_between_formats_that_both_read_the_body(model, provider) -> None:
    assert rb.detect_provider({"model": model, "messages": [USER]}) == provider


@pytest.mark.parametrize(
    "body", [{"messages": [USER]}, {"model": "mistral-large", "messages": [USER]}]
)
def test_a_body_that_still_fits_several_formats_is_refused(body) -> None:
    with pytest.raises(rb.InvalidMessageError, match="ambiguous request body: it fits anthropic"):
        rb.detect_provider(body)


def test_the_model_never_overrules_the_parsers() -> None:
    # A Claude model named on a body only OpenAI Chat reads: the parsers decide.
    body = {"model": "claude-opus-4-6", "messages": [SYSTEM, USER]}
    assert rb.detect_provider(body) == "openai_chat"
    anthropic = {
        "model": "gpt-4o",
        "system": "rules",
        "messages": [USER, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}],
    }
    assert rb.detect_provider(anthropic) == "anthropic"
