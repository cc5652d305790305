"""AssemblyConfig: every key validated at construction (ConfigError naming the key and what is
allowed), the ``context_assembly:`` YAML block, the dict round trip, and the Assembler's own
arguments (provider, summarizer, config)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import ringbound as rb

INTEGER_KEYS = {
    "model_input_limit": 1,
    "output_reserve_tokens": 0,
    "safety_margin_tokens": 0,
    "recent_tool_rings": 0,
    "recent_user_turns": 0,
    "summary_max_tokens": 1,
    "summary_timeout_ms": 1,
    "short_error_result_tokens": 0,
    "max_held_error_rings": 0,
    "max_messages": 1,
    "max_request_bytes": 1,
}
CHOICES = {
    "on_pairing_error": ("fail_closed", "synthesize_error_results"),
    "on_still_over_budget": ("fail_closed", "drop_tools_schema_then_fail"),
    "token_counter": ("provider_or_tiktoken_model_encoding", "tiktoken"),
    "encoding": ("o200k_base", "cl100k_base"),
    "tokenizer_backend": ("tiktoken", "bpe_openai"),
    "on_summary_failure": ("fallback", "fail_closed"),
    "summary_fallback": ("extractive", "none"),
}
LISTS = {
    "pin": ("first_user_message", "side_effect_ledger", "security_system_prompt"),
    "stages": rb.config.STAGES,
}


def bad(key: str, value: Any, *allowed: str) -> Any:
    return pytest.param(key, value, allowed, id=f"{key}={value!r}")


BAD_VALUES = [
    *(
        bad(key, value, f"[{low}, 2**40]")
        for key, low in INTEGER_KEYS.items()
        # Huge ints are refused here, not left to overflow in the core.
        for value in (low - 1, "7", 7.0, True, None, 2**40 + 1, 2**65, 10**20)
    ),
    *(bad(key, value, *allowed) for key, allowed in CHOICES.items() for value in ("nope", 1, "")),
    bad("on_pairing_error", None, *CHOICES["on_pairing_error"]),
    bad("encoding", "p50k_base", *CHOICES["encoding"]),
    bad("encoding", "O200K_BASE", *CHOICES["encoding"]),
    *(
        bad("summarize_trigger_ratio", v, "(0, 1]")
        for v in (0, 0.0, -0.5, 1.01, "0.8", True, None, float("nan"), float("inf"))
    ),
    *(bad(key, ["nope"], *allowed) for key, allowed in LISTS.items()),
    *(
        bad(key, value, "list of strings")
        for key in (*LISTS, "side_effect_tools")
        for value in ("drop_rings", [1], None, {"a": 1})
    ),
    bad("stages", ["compress"], *LISTS["stages"]),
    *(
        bad("ledger_fields", value, "map tool names to lists of argument names")
        for value in ([], {"send": "to"}, {"send": [1]}, {1: ["to"]}, None)
    ),
]


@pytest.mark.parametrize(("key", "value", "allowed"), BAD_VALUES)
def test_bad_value_names_key_and_allowed_values(key: str, value: Any, allowed: tuple[str]) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig(**{key: value})
    err = info.value
    assert err.key == key
    assert f"`{key}`" in str(err)
    for text in allowed:
        assert text in err.reason
    assert err.reason in str(err)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    "values",
    [
        {"model_input_limit": 1000, "output_reserve_tokens": 1000, "safety_margin_tokens": 0},
        {"model_input_limit": 1000, "output_reserve_tokens": 500, "safety_margin_tokens": 600},
        {"model_input_limit": 1000},  # the defaults reserve 8192 + 1024
    ],
)
def test_no_budget_left_is_rejected(values: dict[str, int]) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig(**values)
    assert info.value.key == "model_input_limit"
    assert "leaves no budget" in str(info.value)


def test_budget_is_limit_minus_reserve_minus_margin() -> None:
    cfg = rb.AssemblyConfig(
        model_input_limit=10_000, output_reserve_tokens=3_000, safety_margin_tokens=999
    )
    assert cfg.budget == 6_001
    one = rb.AssemblyConfig(model_input_limit=1, output_reserve_tokens=0, safety_margin_tokens=0)
    assert one.budget == 1
    assert rb.AssemblyConfig().budget == 128_000 - 8192 - 1024


def test_every_valid_choice_is_accepted() -> None:
    for key, allowed in CHOICES.items():
        for value in allowed:
            assert getattr(rb.AssemblyConfig(**{key: value}), key) == value
    assert rb.AssemblyConfig(tokenizer_backend=None).tokenizer_backend is None
    assert rb.AssemblyConfig(pin=[]).pin == ()
    assert rb.AssemblyConfig(stages=["drop_plain_turns"]).stages == ("drop_plain_turns",)
    assert rb.AssemblyConfig(summarize_trigger_ratio=1).summarize_trigger_ratio == 1


def test_lists_become_tuples_and_the_config_is_frozen() -> None:
    cfg = rb.AssemblyConfig(side_effect_tools=["send"], ledger_fields={"send": ["to", "cc"]})
    assert cfg.side_effect_tools == ("send",)
    assert cfg.ledger_fields == {"send": ("to", "cc")}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.model_input_limit = 5  # type: ignore[misc]


def test_constructor_rejects_unknown_keyword() -> None:
    with pytest.raises(TypeError, match="bogus"):
        rb.AssemblyConfig(bogus=1)  # type: ignore[call-arg]


@pytest.mark.parametrize("value", ["tool_ring", "message", 1])
def test_a_removed_key_is_refused_with_its_replacement(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"context_assembly:\n  middle_delete_unit: {value}\n", encoding="utf-8")
    for build in (
        lambda: rb.AssemblyConfig(middle_delete_unit=value),
        lambda: rb.AssemblyConfig.from_dict({"middle_delete_unit": value}),
        lambda: rb.AssemblyConfig.from_yaml(path),
    ):
        with pytest.raises(rb.ConfigError) as info:
            build()
        assert info.value.key == "middle_delete_unit"
        assert "removed" in info.value.reason and "`stages`" in info.value.reason
    assert "middle_delete_unit" not in rb.AssemblyConfig().to_dict()


def test_from_dict_rejects_unknown_key_by_name() -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig.from_dict({"model_input_limit": 64_000, "modle_input_limit": 1})
    assert info.value.key == "modle_input_limit"
    assert "model_input_limit" in str(info.value)  # the known keys are listed
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig.from_dict(["model_input_limit"])  # type: ignore[arg-type]
    assert info.value.key == "context_assembly"


def test_to_dict_round_trip() -> None:
    cfg = rb.AssemblyConfig(
        model_input_limit=64_000,
        pin=["first_user_message"],
        side_effect_tools=["send_email"],
        ledger_fields={"send_email": ["to"]},
        stages=["drop_plain_turns", "drop_rings"],
        tokenizer_backend="bpe_openai",
        encoding="cl100k_base",
        summarize_trigger_ratio=0.5,
    )
    plain = cfg.to_dict()
    assert set(plain) == {f.name for f in dataclasses.fields(rb.AssemblyConfig)}
    assert plain["pin"] == ["first_user_message"]
    assert plain["ledger_fields"] == {"send_email": ["to"]}
    assert rb.AssemblyConfig.from_dict(plain) == cfg
    assert rb.AssemblyConfig.from_dict(rb.AssemblyConfig().to_dict()) == rb.AssemblyConfig()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ringbound.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_from_yaml_reads_the_context_assembly_block(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
other_service:
  model_input_limit: 1   # not ours: ignored
context_assembly:
  model_input_limit: 32000
  output_reserve_tokens: 4000
  safety_margin_tokens: 0
  on_pairing_error: synthesize_error_results
  pin: [first_user_message, side_effect_ledger]
  tokenizer_backend: null
  side_effect_tools: [send_email]
  ledger_fields: {send_email: [to]}
""",
    )
    cfg = rb.AssemblyConfig.from_yaml(path)
    assert cfg.budget == 28_000
    assert cfg.on_pairing_error == "synthesize_error_results"
    assert cfg.pin == ("first_user_message", "side_effect_ledger")
    assert cfg.tokenizer_backend is None
    assert cfg.ledger_fields == {"send_email": ("to",)}
    assert rb.AssemblyConfig.from_yaml(str(path)) == cfg


def test_from_yaml_round_trips_to_dict(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    cfg = rb.AssemblyConfig(side_effect_tools=["a"], ledger_fields={"a": ["x"]}, pin=[])
    path = write(tmp_path, yaml.safe_dump({"context_assembly": cfg.to_dict()}))
    assert rb.AssemblyConfig.from_yaml(path) == cfg


def test_empty_block_means_defaults(tmp_path: Path) -> None:
    assert (
        rb.AssemblyConfig.from_yaml(write(tmp_path, "context_assembly:\n")) == rb.AssemblyConfig()
    )


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        pytest.param(
            "context_assembly:\n  model_input_limit: 1000\n  stages: [drop_rings]\n"
            "  bogus_key: 1\n",
            "bogus_key",
            "bogus_key",
            id="unknown-key",
        ),
        pytest.param(
            "context_assembly:\n  encoding: p50k_base\n", "encoding", "o200k_base", id="bad-value"
        ),
        pytest.param(
            "context_assembly:\n  pin: first_user_message\n",
            "pin",
            "list of strings",
            id="pin-not-a-list",
        ),
        pytest.param(
            "other:\n  model_input_limit: 1000\n",
            "context_assembly",
            "no `context_assembly:` block",
            id="missing-block",
        ),
        pytest.param("", "context_assembly", "no `context_assembly:` block", id="empty-file"),
        pytest.param(
            "- context_assembly\n",
            "context_assembly",
            "no `context_assembly:` block",
            id="top-level-list",
        ),
        pytest.param(
            "context_assembly: [1, 2]\n",
            "context_assembly",
            "must be a mapping",
            id="block-not-a-mapping",
        ),
        pytest.param(
            "context_assembly:\n  model_input_limit: [\n",
            "context_assembly",
            "cannot read",
            id="invalid-yaml",
        ),
    ],
)
def test_from_yaml_errors_name_the_key(tmp_path: Path, text: str, key: str, message: str) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig.from_yaml(write(tmp_path, text))
    assert info.value.key == key
    assert message in str(info.value)


def test_from_yaml_missing_file(tmp_path: Path) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig.from_yaml(tmp_path / "absent.yaml")
    assert info.value.key == "context_assembly"
    assert "absent.yaml" in str(info.value)


def test_assembler_rejects_unsupported_provider() -> None:
    for provider in ("cohere", "OpenAI_Chat", "claude", ""):
        with pytest.raises(rb.ConfigError) as info:
            rb.Assembler(rb.AssemblyConfig(), provider=provider)
        assert info.value.key == "provider"
        assert "supported: openai_chat, openai_responses, anthropic, gemini" in str(info.value)
    for call in (
        lambda: rb.count_tokens([], provider="cohere"),
        lambda: rb.validate([], provider="mistral"),
    ):
        with pytest.raises(rb.ConfigError, match="bedrock_converse"):
            call()


def test_assembler_rejects_a_summarizer_that_is_not_callable() -> None:
    for summarizer in ("yes", 3, {"model": "x"}):
        with pytest.raises(rb.ConfigError) as info:
            rb.Assembler(rb.AssemblyConfig(), summarizer=summarizer)
        assert info.value.key == "summarizer"
        assert "callable" in str(info.value)


def test_summary_keys_are_checked() -> None:
    for key, value in (
        ("summary_target_tokens", 3),
        ("summarizer_input_limit", "big"),
        ("max_tool_result_tokens", 0),
        ("redact_patterns", ["(unclosed"]),
        ("redact_patterns", "sk-.*"),
    ):
        with pytest.raises(rb.ConfigError) as info:
            rb.AssemblyConfig(**{key: value})
        assert info.value.key == key


def test_assembler_requires_an_assembly_config() -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.Assembler({"model_input_limit": 1000})  # type: ignore[arg-type]
    assert info.value.key == "config"
    asm = rb.Assembler()
    assert asm.config == rb.AssemblyConfig()


def test_count_functions_reject_unknown_encoding_and_backend() -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.count_tokens([], encoding="p50k_base")
    assert info.value.key == "encoding"
    with pytest.raises(rb.ConfigError) as info:
        rb.count_text("x", tokenizer_backend="hf")
    assert info.value.key == "tokenizer_backend"
    assert "tiktoken, bpe_openai" in str(info.value)


def test_backends_and_encodings_are_all_usable() -> None:
    text = "Tools already executed — do not repeat 🚫"
    for encoding in CHOICES["encoding"]:
        counts = {
            rb.count_text(text, encoding, tokenizer_backend=backend)
            for backend in (None, *CHOICES["tokenizer_backend"])
        }
        assert len(counts) == 1
        cfg = rb.AssemblyConfig(encoding=encoding, tokenizer_backend="tiktoken")
        res = rb.Assembler(cfg).assemble([{"role": "user", "content": text}])
        assert res.report.tokens_after == rb.count_tokens(res.messages, encoding=encoding)
