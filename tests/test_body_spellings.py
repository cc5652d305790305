"""Gemini bodies spell their top-level fields either way: ``systemInstruction`` or the proto
name ``system_instruction`` (``toolConfig`` / ``tool_config``, ``generationConfig`` /
``generation_config``). The body path reads and counts the system under either spelling,
writes it back under the caller's own, and refuses a body that gives one field twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_body import config, provider_body

import ringbound as rb

#: camelCase (the JSON name) -> the proto field name Gemini's REST API also reads.
SNAKE = {
    "systemInstruction": "system_instruction",
    "toolConfig": "tool_config",
    "generationConfig": "generation_config",
}
TOOL_CONFIG = {"functionCallingConfig": {"mode": "AUTO"}}


def gemini_body(spell: str, turns: int = 30) -> tuple[dict[str, Any], Any]:
    """A Gemini body (system, tools, tool config, reserve) with every aliased field spelled
    ``camel`` or ``snake``, and its system."""
    body, _, system, _ = provider_body("gemini", turns=turns)
    body["toolConfig"] = TOOL_CONFIG
    if spell == "snake":
        body = {SNAKE.get(k, k): v for k, v in body.items()}
    return body, system


def assemble(body: dict[str, Any], cfg: rb.AssemblyConfig, provider: str | None = "gemini"):
    data = orjson.dumps(body)
    res = rb.Assembler(cfg, provider=provider).assemble_body(data)
    assert data == orjson.dumps(body)  # the caller's body untouched
    return res


def budget_cfg(body: dict[str, Any]) -> rb.AssemblyConfig:
    """A limit that drops rings from ``body`` (whose reserve is 1000)."""
    contents = body["contents"]
    return config(model_input_limit=rb.count_tokens(contents, provider="gemini") // 3 + 1000)


@pytest.mark.parametrize("provider", ["gemini", None], ids=["given", "detected"])
@pytest.mark.parametrize("spell", ["camel", "snake"])
def test_each_spelling_is_counted_and_written_back_as_given(
    spell: str, provider: str | None
) -> None:
    body, system = gemini_body(spell)
    camel, _ = gemini_body("camel")
    cfg = budget_cfg(body)
    res = assemble(body, cfg, provider)
    ref = assemble(camel, cfg)
    key = "systemInstruction" if spell == "camel" else "system_instruction"
    other = "system_instruction" if spell == "camel" else "systemInstruction"
    out = orjson.loads(res.body)
    assert res.provider == "gemini" and res.report.dropped_rings
    # The system is counted whichever its spelling: the same plan as the camelCase body.
    assert res.report.tokens_after == ref.report.tokens_after
    assert res.report.tokens_before == ref.report.tokens_before
    expected = orjson.loads(ref.body)
    assert out["contents"] == expected["contents"]
    # The system (with the ledger note the assembly added to it) under the caller's key.
    assert out[key] == expected["systemInstruction"] != system and other not in out
    # Every other field comes back as it was, in its place.
    assert list(out) == list(body)
    for k in body:
        if k not in ("contents", key):
            assert orjson.dumps(out[k]) == orjson.dumps(body[k]), k
    # The reserve is read under either spelling.
    assert res.report.budget == cfg.model_input_limit - 1000


def test_a_snake_case_system_is_counted() -> None:
    """Without the fix the snake-case system was kept as an ordinary field: the counts
    were those of a body without a system."""
    body, system = gemini_body("snake", turns=4)
    bare = {k: v for k, v in body.items() if k != "system_instruction"}
    cfg = config(model_input_limit=10**6)
    with_system = assemble(body, cfg).report.tokens_after
    without_system = assemble(bare, cfg).report.tokens_after
    contents = body["contents"]
    cost = rb.count_tokens(contents, "gemini", system=system) - rb.count_tokens(contents, "gemini")
    assert cost > 100 and with_system - without_system == cost


def test_mixed_spellings_keep_each_fields_own() -> None:
    body, system = gemini_body("camel", turns=6)
    body["tool_config"] = body.pop("toolConfig")
    body["generation_config"] = {"max_output_tokens": 700}
    del body["generationConfig"]
    res = assemble(body, config(model_input_limit=10**5))
    out = orjson.loads(res.body)
    assert out["systemInstruction"] == system and out["tool_config"] == TOOL_CONFIG
    assert "toolConfig" not in out and "system_instruction" not in out
    assert res.report.budget == 10**5 - 700


@pytest.mark.parametrize("spell", ["camel", "snake"])
def test_a_dropped_tools_schema_takes_the_tool_config_with_it(spell: str) -> None:
    body, _ = gemini_body(spell, turns=1)
    body["tools"] = [
        {"functionDeclarations": [{"name": f"tool_{i}", "description": "Reads. " * 40}]}
        for i in range(30)
    ]
    contents = rb.count_tokens(body["contents"], provider="gemini")
    system = body["systemInstruction" if spell == "camel" else "system_instruction"]
    floor = contents + rb.count_tokens([{"role": "user", "parts": system["parts"]}], "gemini")
    cfg = config(model_input_limit=floor + 1200, on_still_over_budget="drop_tools_schema_then_fail")
    res = assemble(body, cfg)
    assert res.report.tools_dropped
    out = orjson.loads(res.body)
    assert not {"tools", "toolConfig", "tool_config"} & set(out)
    assert out["temperature"] == body["temperature"]


@pytest.mark.parametrize(
    ("camel", "snake"),
    [*SNAKE.items(), ("generationConfig.maxOutputTokens", "generationConfig.max_output_tokens")],
)
@pytest.mark.parametrize("provider", ["gemini", None], ids=["given", "detected"])
def test_a_field_given_under_both_spellings_is_refused(
    camel: str, snake: str, provider: str | None
) -> None:
    body, _ = gemini_body("camel", turns=3)
    outer, _, inner = snake.partition(".")
    if inner:
        body[outer] = {"maxOutputTokens": 100, "max_output_tokens": 100}
        named = ("maxOutputTokens", "max_output_tokens")
    else:
        body[snake] = body[camel]
        named = (camel, snake)
    with pytest.raises(rb.InvalidBodyError) as e:
        assemble(body, config(model_input_limit=10**5), provider)
    assert e.value.index is None
    assert f"both {named[0]} and {named[1]}" in str(e.value)
    assert isinstance(e.value, rb.InvalidMessageError)


def test_a_snake_case_reserve_that_leaves_no_budget_names_its_field() -> None:
    body, _ = gemini_body("snake", turns=2)
    body["generation_config"] = {"max_output_tokens": 4800}
    cfg = config(model_input_limit=5000, safety_margin_tokens=300)
    with pytest.raises(rb.ConfigError) as e:
        assemble(body, cfg)
    assert "the body's generation_config.max_output_tokens 4800" in str(e.value)
    body["generation_config"] = {"max_output_tokens": "lots"}
    with pytest.raises(rb.InvalidBodyError) as bad:
        assemble(body, cfg)
    assert "generation_config.max_output_tokens must be a non-negative" in str(bad.value)


# The command line --------------------------------------------------------------------------


def run(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringbound", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_keeps_the_callers_spelling_and_counts_it(tmp_path: Path) -> None:
    reports, counts = {}, {}
    for spell in ("camel", "snake"):
        body, system = gemini_body(spell)
        src = tmp_path / f"{spell}.json"
        src.write_text(json.dumps(body), encoding="utf-8")
        proc = run("assemble", src, "--limit", 6000, "--margin", 0)
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        key = "systemInstruction" if spell == "camel" else "system_instruction"
        assert out[key] == system and len(out["contents"]) < len(body["contents"])
        assert {k for k in out if k in SNAKE or k in SNAKE.values()} == {
            k for k in body if k in SNAKE or k in SNAKE.values()
        }
        proc = run("assemble", src, "--limit", 6000, "--margin", 0, "--json")
        reports[spell] = json.loads(proc.stdout)
        counts[spell] = int(run("count", src).stdout)
    for key in ("tokens_before", "tokens_after", "budget", "messages_after"):
        assert reports["snake"][key] == reports["camel"][key], key
    assert counts["snake"] == counts["camel"]


@pytest.mark.parametrize("command", ["assemble", "count", "validate"])
def test_the_cli_refuses_a_system_given_twice(tmp_path: Path, command: str) -> None:
    body, system = gemini_body("camel", turns=3)
    body["system_instruction"] = system
    src = tmp_path / "both.json"
    src.write_text(json.dumps(body), encoding="utf-8")
    proc = run(command, src)
    assert proc.returncode == 2, proc
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert "both systemInstruction and system_instruction" in proc.stderr


# The core reads the reserve as the dict path does ---------------------------------------------


BOTH = "the body gives both {} and {}, two spellings of one field; send only one of them"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ({"generationConfig": {"maxOutputTokens": 7}}, ("generationConfig.maxOutputTokens", 7)),
        (
            {"generation_config": {"max_output_tokens": 8}},
            ("generation_config.max_output_tokens", 8),
        ),
        ({"generationConfig": {"max_output_tokens": 6}}, ("generationConfig.max_output_tokens", 6)),
        ({"generation_config": {"maxOutputTokens": 5}}, ("generation_config.maxOutputTokens", 5)),
        ({"generation_config": {"max_output_tokens": None}, "max_tokens": 4}, ("max_tokens", 4)),
        (
            {"generation_config": {"max_output_tokens": "many"}},
            "generation_config.max_output_tokens must be a non-negative integer",
        ),
        ({"generation_config": 3}, None),
        (
            {"generationConfig": {"maxOutputTokens": 1}, "generation_config": {}},
            BOTH.format("generationConfig", "generation_config"),
        ),
        (
            {"generation_config": {"maxOutputTokens": 1, "max_output_tokens": 1}},
            BOTH.format("maxOutputTokens", "max_output_tokens"),
        ),
    ],
)
def test_the_core_reads_each_spelling_of_the_reserve_as_the_dict_path(
    head: dict[str, Any], expected: Any
) -> None:
    """``_core.body_head`` (the native path's reading of a body) and ``output_reserve`` (the
    dict path's) give the same field and count, or the same error, for every spelling."""
    from ringbound import _core
    from ringbound.body import output_reserve

    def outcome(read: Any) -> Any:
        try:
            return read()
        except rb.InvalidBodyError as e:
            return str(e).split(", got ")[0]  # the value is quoted as each language writes it

    assert outcome(lambda: _core.body_head(orjson.dumps(head), 10**6)[1]) == expected
    assert outcome(lambda: output_reserve(head)) == expected
