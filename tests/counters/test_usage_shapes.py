"""Usage as each SDK returns it (its own objects, and their JSON) read into one record, fed to
the token ledger and to ``ringbound calibrate``."""

from __future__ import annotations

from pathlib import Path

import anthropic.types
import anthropic.types.beta
import openai.types
import openai.types.responses
import orjson
import pytest
from google.genai import types as genai_types

import ringbound as rb
from ringbound.cli.calibrate import cli_main

CHAT = openai.types.CompletionUsage(
    prompt_tokens=1_200,
    completion_tokens=30,
    total_tokens=1_230,
    prompt_tokens_details={"cached_tokens": 1_024},
)
RESPONSES = openai.types.responses.ResponseUsage(
    input_tokens=900,
    input_tokens_details={"cached_tokens": 512, "cache_write_tokens": 100},
    output_tokens=40,
    output_tokens_details={"reasoning_tokens": 10},
    total_tokens=940,
)
ANTHROPIC = anthropic.types.Usage(
    input_tokens=20,
    cache_read_input_tokens=5_000,
    cache_creation_input_tokens=300,
    output_tokens=77,
)
GEMINI = genai_types.GenerateContentResponseUsageMetadata(
    prompt_token_count=2_000,
    cached_content_token_count=1_500,
    candidates_token_count=60,
    thoughts_token_count=40,
    total_token_count=2_100,
)
BEDROCK = {
    "inputTokens": 10,
    "outputTokens": 9,
    "totalTokens": 4_019,
    "cacheReadInputTokens": 4_000,
    "cacheWriteInputTokens": 0,
}


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (CHAT, rb.Usage("openai_chat", 1_200, 176, 1_024, 0, 30)),
        (RESPONSES, rb.Usage("openai_responses", 900, 288, 512, 100, 40)),
        (ANTHROPIC, rb.Usage("anthropic", 5_320, 20, 5_000, 300, 77)),
        (GEMINI, rb.Usage("gemini", 2_000, 500, 1_500, 0, 100)),
        (BEDROCK, rb.Usage("bedrock", 4_010, 10, 4_000, 0, 9)),
    ],
)
def test_every_sdk_shape_reads_the_same_way_as_object_and_json(
    usage: object, expected: rb.Usage
) -> None:
    assert rb.read_usage(usage) == expected
    dumped = usage.model_dump(mode="json", by_alias=True) if hasattr(usage, "model_dump") else usage
    assert rb.read_usage(orjson.loads(orjson.dumps(dumped))) == expected
    assert rb.read_usage({"id": "resp_1", "usage": dumped}) == expected


def test_gemini_rest_json_is_camel_case() -> None:
    usage = rb.read_usage(
        {
            "usageMetadata": {
                "promptTokenCount": 50,
                "candidatesTokenCount": 5,
                "totalTokenCount": 55,
            }
        }
    )
    assert (usage.shape, usage.prompt_tokens, usage.output_tokens) == ("gemini", 50, 5)


def test_anthropic_compaction_iterations_are_billed_but_give_no_request_size() -> None:
    compacted = anthropic.types.beta.BetaUsage.model_validate(
        {
            "input_tokens": 23_000,
            "output_tokens": 1_000,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": 180_000,
                    "output_tokens": 3_500,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
                {
                    "type": "message",
                    "input_tokens": 23_000,
                    "output_tokens": 1_000,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
            ],
        }
    )
    usage = rb.read_usage(compacted)
    assert usage.compaction_iterations == 1 and usage.prompt_tokens is None
    assert (usage.input_tokens, usage.output_tokens) == (203_000, 4_500)
    tool_loop = {
        "input_tokens": 9_000,
        "output_tokens": 50,
        "iterations": [
            {"type": "message", "input_tokens": 4_000, "output_tokens": 20},
            {"type": "message", "input_tokens": 5_000, "output_tokens": 30},
        ],
    }
    assert rb.read_usage(tool_loop).prompt_tokens == 4_000  # the request as it was sent
    ledger = rb.TokenLedger(200_000, model="claude-opus-4-6")
    ledger.observe_usage(compacted, local_estimate=190_000)
    assert ledger.calibrator.samples("claude-opus-4-6") == 0  # nothing to compare
    assert ledger.account.compaction_iterations == 1


@pytest.mark.parametrize(
    "bad", [None, 5, {"nothing": 1}, {"prompt_tokens": -1}, {"iterations": 3, "input_tokens": 1}]
)
def test_what_is_not_usage_is_a_config_error(bad: object) -> None:
    with pytest.raises(rb.ConfigError) as info:
        rb.read_usage(bad)
    assert info.value.key == "usage"


def test_summarizer_usage_is_billed_apart_and_calibrates_nothing() -> None:
    ledger = rb.TokenLedger(10_000)
    ledger.observe_usage(CHAT, local_estimate=1_000, summarizer=True)
    account = ledger.account
    assert (account.summarizer_input, account.summarizer_output, account.responses) == (
        1_200,
        30,
        0,
    )
    assert ledger.ratio == 1.0 and ledger.calibrator.samples("default") == 0
    with pytest.raises(rb.ConfigError):
        ledger.observe_usage(CHAT, prompt_tokens=5)


def test_calibrate_reads_sdk_usage_and_responses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        (1_000, CHAT),
        {"local_estimate": 4_000, "usage": ANTHROPIC.model_dump(mode="json")},
        {"local_estimate": 2_000, "response": {"usageMetadata": {"promptTokenCount": 2_100}}},
        {"estimate": 4_000, "usage": BEDROCK},
    ]
    cal = rb.calibrate(records, coverage=0.9)
    assert cal.records == ((1_000, 1_200), (4_000, 5_320), (2_000, 2_100), (4_000, 4_010))
    path = tmp_path / "usage.jsonl"
    lines = [
        {"local_estimate": 1_000, "usage": CHAT.model_dump(mode="json")},
        {"local_estimate": 900, "response": {"usage": RESPONSES.model_dump(mode="json")}},
        {
            "local_estimate": 150_000,
            "usage": {
                "input_tokens": 1,
                "output_tokens": 1,
                "iterations": [{"type": "compaction", "input_tokens": 9}],
            },
        },
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    assert rb.load_usage(path) == [(1_000, 1_200), (900, 900)]
    assert cli_main(path) == 0
    out = capsys.readouterr().out
    assert "2 usage records" in out and "1 records left out" in out
