"""The models table: every bundled entry is valid and sizes a usable config, names are matched
as gateways spell them, and the table is extended or overridden only with valid entries."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ringbound as rb
from ringbound import models


@pytest.mark.parametrize("name", models.names())
def test_every_entry_sizes_a_config(name: str) -> None:
    info = models.lookup(name)
    assert info.source.startswith("https://")
    cfg = rb.AssemblyConfig.for_model(name)
    assert cfg.budget > 0
    assert cfg.output_reserve_tokens <= info.max_output_tokens
    assert cfg.encoding == info.encoding
    # The request never exceeds what the provider takes: the shared window for input and
    # output, the input cap where there is one.
    if info.context_window is not None:
        assert cfg.model_input_limit <= info.context_window
    if info.max_input_tokens is not None:
        assert cfg.budget <= info.max_input_tokens


@pytest.mark.parametrize(
    ("spelled", "entry"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("azure/gpt-4.1", "gpt-4.1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-sonnet-4-5"),
        ("bedrock/global.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-haiku-4-5"),
        ("amazon.nova-pro-v1:0", "amazon.nova-pro"),
        ("models/gemini-2.5-flash", "gemini-2.5-flash"),
        ("gemini/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
    ],
)
def test_names_as_gateways_spell_them(spelled: str, entry: str) -> None:
    info = models.find(spelled)
    assert info is not None and info.name == entry


@pytest.mark.parametrize("name", ["", "llama-3", "gpt", "gpt-4oo", "claude", 42, None])
def test_unknown_names(name: object) -> None:
    assert models.find(name) is None  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError, match="models table"):
        models.lookup(name)  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError):
        rb.AssemblyConfig.for_model(name)  # type: ignore[arg-type]


def test_overrides_win_and_the_input_cap_follows_the_reserve() -> None:
    cfg = rb.AssemblyConfig.for_model("gpt-4o", output_reserve_tokens=16_384, recent_tool_rings=1)
    assert (cfg.model_input_limit, cfg.budget, cfg.recent_tool_rings) == (128_000, 110_592, 1)
    # Gemini caps input on its own: whatever is reserved, the budget is the input cap less
    # the margin.
    for reserve in (1_000, 65_536):
        cfg = rb.AssemblyConfig.for_model("gemini-2.5-pro", output_reserve_tokens=reserve)
        assert cfg.budget == 1_048_576 - cfg.safety_margin_tokens
    # GPT-5 too: 272,000 input tokens at most, out of a 400,000 window.
    assert rb.AssemblyConfig.for_model("gpt-5").budget == 272_000 - 1024
    with pytest.raises(rb.ConfigError, match="output_reserve_tokens"):
        rb.AssemblyConfig.for_model("gpt-4o", output_reserve_tokens=-1)
    with pytest.raises(rb.ConfigError, match="no_such_key"):
        rb.AssemblyConfig.for_model("gpt-4o", no_such_key=1)


def test_small_windows_keep_room_for_the_request() -> None:
    cfg = rb.AssemblyConfig.for_model("gpt-4")
    assert cfg.output_reserve_tokens == 8192 // 4 and cfg.budget == 8192 - 2048 - 1024


def test_load_yaml_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n"
        "  - {name: acme-1, family: openai, context_window: 32000, max_output_tokens: 4000,"
        " source: 'https://acme.example/models'}\n",
        encoding="utf-8",
    )
    try:
        (added,) = models.load_yaml(path)
        assert models.find("acme-1-2026-01-01") == added
        assert rb.AssemblyConfig.for_model("acme-1").model_input_limit == 32_000
    finally:
        models._loaded().pop("acme-1")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: 3", "no `models:` list"),
        ("[", "not valid YAML"),
        ("models: [3]", "must be a mapping"),
        (
            "models: [{name: x, family: openai, max_output_tokens: 1, context_window: 9, y: 1}]",
            "unknown keys y",
        ),
        ("models: [{name: x, family: cohere, max_output_tokens: 1, context_window: 9}]", "family"),
        (
            "models: [{name: x, family: openai, max_output_tokens: 0, context_window: 9}]",
            "max_output_tokens",
        ),
        ("models: [{name: x, family: openai, max_output_tokens: 1}]", "context_window or"),
        (
            "models: [{name: x, family: openai, max_output_tokens: 1, context_window: 9,"
            " encoding: p50k}]",
            "encoding",
        ),
        (
            "models: [{name: x, family: openai, max_output_tokens: 1, context_window: 9,"
            " token_ratio: 99}]",
            "token_ratio",
        ),
        ("models: [{family: openai, max_output_tokens: 1, context_window: 9}]", "name"),
        (
            "models: [{name: x, family: openai, max_output_tokens: 1,"
            " context_window: 100000000000000000000}]",
            "context_window",
        ),
    ],
)
def test_bad_tables_are_config_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    before = models.names()
    with pytest.raises(rb.ConfigError, match=message):
        models.load_yaml(path)
    assert models.names() == before  # nothing half-loaded
    with pytest.raises(rb.ConfigError, match="cannot read"):
        models.load_yaml(tmp_path / "absent.yaml")
    with pytest.raises(rb.ConfigError, match="ModelInfo"):
        models.register({"name": "x"})  # type: ignore[arg-type]


@given(st.text(max_size=60))
def test_find_never_raises(name: str) -> None:
    info = models.find(name)
    assert info is None or info.name in models.names()
