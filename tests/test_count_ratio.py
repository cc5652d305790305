"""``count_tokens(..., token_ratio=...)`` scales the count exactly as the Assembler does, for
every provider, so ``report.tokens_after`` recounts exactly at any ratio; a ratio the config
would refuse is refused here too."""

from __future__ import annotations

from typing import Any

import pytest
from canonical_writers import from_canonical

import ringbound as rb
from ringbound.providers import PROVIDERS


def conversation() -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Look it up. " * 30},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "found it " * 50},
        {"role": "user", "content": "Thanks."},
    ]


def native(provider: str) -> tuple[list[Any], Any]:
    if provider == "openai_chat":
        return conversation(), None
    items, system = from_canonical(provider, conversation())
    return items, system


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("ratio", [1.0, 1.3, 2.0])
def test_count_tokens_recounts_the_assembler_at_any_ratio(provider: str, ratio: float) -> None:
    items, system = native(provider)
    cfg = rb.AssemblyConfig(model_input_limit=100_000, token_ratio=ratio)
    res = rb.Assembler(cfg, provider=provider).assemble(items, system=system)
    assert res.report.dropped_rings == [] and res.report.dropped_turns == []
    counted = rb.count_tokens(res.messages, provider=provider, system=res.system, token_ratio=ratio)
    assert counted == res.report.tokens_after


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_ratio_scales_every_provider(provider: str) -> None:
    items, system = native(provider)
    one = rb.count_tokens(items, provider=provider, system=system, token_ratio=1.0)
    two = rb.count_tokens(items, provider=provider, system=system, token_ratio=2.0)
    assert abs(two - 2 * one) <= 4  # the reply priming (3 tokens) is not scaled


@pytest.mark.parametrize("ratio", ["2", True, 0.01, 11, float("nan")])
@pytest.mark.parametrize("provider", ["openai_chat", "anthropic"])
def test_a_bad_ratio_is_a_config_error(provider: str, ratio: Any) -> None:
    items, system = native(provider)
    with pytest.raises(rb.ConfigError) as info:
        rb.count_tokens(items, provider=provider, system=system, token_ratio=ratio)
    assert info.value.key == "token_ratio"
