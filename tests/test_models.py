"""The models table: every bundled entry is valid and sizes a usable config, names are matched
as gateways spell them, and the table is extended or overridden only with valid entries."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
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
        # Aliases, as providers and proxies name the newest model of a line.
        ("claude-sonnet", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-latest", "claude-opus-4-5"),
        ("gpt-4o-latest", "gpt-4o"),
        ("chatgpt-4o-latest", "gpt-4o"),
        ("gemini/gemini-flash-latest", "gemini-2.5-flash"),
        # LiteLLM's and the gateways' own spellings.
        ("vertex_ai/claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("vertex_ai/gemini-2.5-pro", "gemini-2.5-pro"),
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("openrouter/openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("azure/gpt-4o-2024-11-20", "gpt-4o"),
        (
            "bedrock/converse/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-sonnet-4-5",
        ),
        ("claude-3.7-sonnet", "claude-3-7-sonnet"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "gpt-4o-mini"),
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


def test_aliases_load_from_yaml_and_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  - {name: acme-2, family: anthropic, context_window: 9000,"
        " max_output_tokens: 900, aliases: [Acme-Latest]}\n",
        encoding="utf-8",
    )
    try:
        (added,) = models.load_yaml(path)
        assert added.aliases == ("acme-latest",)
        assert models.find("anthropic/acme-latest") == added
    finally:
        models._loaded().pop("acme-2")
        models._aliases.pop("acme-latest")
    for aliases in ("acme", [3], [""]):
        with pytest.raises(rb.ConfigError, match="aliases"):
            models.ModelInfo(name="x", family="openai", context_window=9, max_output_tokens=1,
                             aliases=aliases)  # type: ignore[arg-type]  # fmt: skip


class CountingSink:
    def __init__(self) -> None:
        self.unknown: list[str] = []

    def observe(self, report: object, provider: str) -> None:
        pass

    def reject(self, error: object, provider: str) -> None:
        pass

    def unknown_model(self, provider: str) -> None:
        self.unknown.append(provider)


def test_an_unknown_model_is_logged_once_counted_every_time_or_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = CountingSink()
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        for _ in range(3):
            assert models.resolve("my-local-llama-9", where="the body's model",
                                  provider="anthropic", sink=sink) is None  # fmt: skip
    assert caplog.text.count("'my-local-llama-9' is not in the models table") == 1
    assert sink.unknown == ["anthropic"] * 3
    assert models.resolve("gpt-4o", where="w", sink=sink).name == "gpt-4o"
    assert len(sink.unknown) == 3
    with pytest.raises(rb.ConfigError) as e:
        models.resolve("my-local-llama-9", where="the body's model", strict=True)
    assert e.value.key == "model" and "refused" in str(e.value)
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    models.resolve("my-local-llama-9", where="w", provider="gemini",
                   sink=rb.PrometheusSink(registry))  # fmt: skip
    assert (
        registry.get_sample_value("context_assemble_unknown_model_total", {"provider": "gemini"})
        == 1.0
    )


def test_the_environment_turns_strictness_on() -> None:
    code = (
        "import ringbound as rb\n"
        "try:\n rb.models.resolve('x-1', where='w')\n"
        "except rb.ConfigError:\n print('refused')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, RINGBOUND_STRICT_MODELS="1"), check=True)  # fmt: skip
    assert out.stdout.strip() == "refused"


BODY = {"model": "my-local-llama", "max_tokens": 1000,
        "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip


def test_a_body_naming_an_unknown_model_is_said_by_the_cli_or_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36 finding 4: the default window was used with no word."""
    from ringbound.cli.main import main

    path = tmp_path / "body.json"
    path.write_text(json.dumps(dict(BODY, model="my-local-llama-cli")), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        assert main(["assemble", str(path), "--json", "-o", str(tmp_path / "out.json")]) == 0
    assert "the body's model 'my-local-llama-cli' is not in the models table" in caplog.text
    assert main(["assemble", str(path), "--strict-model", "-o", str(tmp_path / "o.json")]) != 0
    assert "refused" in capsys.readouterr().err
    # Sized by --limit instead, the body's model does not matter: nothing to say.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ringbound"):
        assert main(["assemble", str(path), "--limit", "50000", "--strict-model",
                     "-o", str(tmp_path / "p.json")]) == 0  # fmt: skip
    assert "not in the models table" not in caplog.text


def test_assemble_body_for_models_says_an_unknown_model_or_refuses_it() -> None:
    sink = CountingSink()
    asm = rb.Assembler.for_models(provider="openai_chat", sink=sink)
    body = json.dumps(dict(BODY, model="my-local-llama-body")).encode()
    res = asm.assemble_body(body)
    assert res.model is None and sink.unknown == ["openai_chat"]
    models.set_strict(True)
    try:
        with pytest.raises(rb.ConfigError) as e:
            asm.assemble_body(body)
        assert e.value.key == "model"
    finally:
        models.set_strict(False)
    known = asm.assemble_body(json.dumps(dict(BODY, model="claude-sonnet")).encode())
    assert known.model == "claude-sonnet-4-5" and sink.unknown == ["openai_chat"]
