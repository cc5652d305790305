"""RingboundHook called as the LiteLLM proxy calls it (``async_pre_call_hook`` with the body and
the route's call type), for what the proxy test cannot reach cheaply: every way to give configs,
the bodies it must leave alone, the caller's body never modified, tools dropped with the fields
that need them, and each ringbound error as the HTTP error the proxy answers."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import litellm
import pytest
import strategies as gen
import yaml
from fastapi import HTTPException
from hypothesis import given
from hypothesis import strategies as st
from litellm.integrations.custom_logger import CustomLogger

import ringbound as rb
from ringbound.integrations.litellm import ROUTES, RingboundHook, http_status, placed

from .litellm_sessions import anthropic_body, chat_body, responses_body
from .litellm_upstream import FakeUpstream

SMALL = rb.AssemblyConfig(
    model_input_limit=3_000,
    output_reserve_tokens=500,
    safety_margin_tokens=100,
    recent_tool_rings=2,
    side_effect_tools=["send_email"],
)
BODIES = {
    "acompletion": chat_body,
    "anthropic_messages": anthropic_body,
    "aresponses": responses_body,
}


def run(hook: RingboundHook, data: dict[str, Any], call_type: str) -> dict[str, Any] | None:
    return asyncio.run(hook.async_pre_call_hook(None, None, data, call_type))


class Sink:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def observe(self, report: rb.AssemblyReport, provider: str) -> None:
        self.events.append(("observe", provider, report.tokens_after))

    def reject(self, error: rb.RingboundError, provider: str) -> None:
        self.events.append(("reject", provider, type(error).__name__))


def test_it_is_a_litellm_callback_with_its_own_pre_call_hook() -> None:
    hook = RingboundHook(SMALL)
    assert isinstance(hook, CustomLogger)
    # The proxy runs only hooks a class defines itself.
    assert "async_pre_call_hook" in vars(RingboundHook)


@pytest.mark.parametrize("call_type", sorted(ROUTES))
def test_each_route_is_assembled_under_the_models_config_and_keeps_the_rest(
    call_type: str,
) -> None:
    route = ROUTES[call_type]
    sink = Sink()
    hook = RingboundHook({"m": SMALL}, sink=sink)
    data = BODIES[call_type]("m", 30)
    data["metadata"] = {"user_api_key": "hashed", "tags": ["audit"]}
    before = copy.deepcopy(data)
    out = run(hook, data, call_type)
    assert out is not None and out is not data
    assert data == before  # the proxy's body is left as it came
    system = data.get(route.system) if route.system else None
    # The body's own max_tokens (max_output_tokens) is the output reserve, whatever the config.
    reserved = dataclasses.replace(SMALL, output_reserve_tokens=256)
    expected = rb.Assembler(placed(reserved, route.provider), provider=route.provider).assemble(
        data[route.history], tools=data["tools"], system=system
    )
    assert out[route.history] == expected.messages
    given_ids = {id(m) for m in data[route.history]}
    kept = [id(m) for m in out[route.history] if id(m) in given_ids]
    assert kept == [id(m) for m in expected.messages if id(m) in given_ids]  # the same objects
    for key, value in data.items():
        if key not in (route.history, route.system):
            assert out[key] is value, key
    assert set(out) == set(data)
    assert sink.events == [("observe", route.provider, expected.report.tokens_after)]


def test_configs_by_model_callable_and_default() -> None:
    big = rb.AssemblyConfig(model_input_limit=200_000)
    by_name = RingboundHook({"a": SMALL}, default=big)
    assert by_name.config_for("a") is SMALL and by_name.config_for("b") is big
    assert by_name.config_for(None) is None
    table = {"a": SMALL}
    by_call = RingboundHook(table.get)
    assert by_call.config_for("a") is SMALL and by_call.config_for("zz") is None
    with_default = RingboundHook(table.get, default=big)
    assert with_default.config_for("zz") is big
    everyone = RingboundHook(SMALL)
    assert everyone.config_for("anything") is SMALL


def test_a_model_without_config_passes_through_untouched() -> None:
    hook = RingboundHook({"a": SMALL})
    assert run(hook, chat_body("other", 30), "acompletion") is None


@pytest.mark.parametrize(
    ("call_type", "data"),
    [
        ("aembedding", {"model": "m", "input": ["hello"]}),
        ("atext_completion", {"model": "m", "prompt": "hello"}),
        ("aresponses", {"model": "m", "input": "one string, no history"}),
        ("aresponses", dict(responses_body("m", 30), previous_response_id="resp_1")),
        ("aresponses", dict(responses_body("m", 30), conversation="conv_1")),
        ("acompletion", {"model": "m"}),
    ],
    ids=["embedding", "text", "string-input", "previous-response", "conversation", "no-messages"],
)
def test_bodies_it_cannot_or_need_not_assemble_pass_through(
    call_type: str, data: dict[str, Any]
) -> None:
    before = copy.deepcopy(data)
    assert run(RingboundHook(SMALL), data, call_type) is None
    assert data == before


def test_a_dropped_tools_schema_takes_the_fields_that_need_it() -> None:
    cfg = rb.AssemblyConfig(
        model_input_limit=1_200,
        output_reserve_tokens=100,
        safety_margin_tokens=0,
        recent_tool_rings=1,
        on_still_over_budget="drop_tools_schema_then_fail",
    )
    data = chat_body("m", 2)
    data["tools"] = data["tools"] * 40  # a schema too large to keep with the protected part
    data["parallel_tool_calls"] = False
    out = run(RingboundHook(cfg), data, "acompletion")
    assert out is not None
    assert "tools" not in out and "tool_choice" not in out and "parallel_tool_calls" not in out
    assert out["temperature"] == data["temperature"] and "tools" in data


def test_the_ledger_note_goes_in_the_top_level_system_where_the_provider_keeps_it() -> None:
    data = anthropic_body("m", 30)
    out = run(RingboundHook(SMALL), data, "anthropic_messages")
    assert out is not None
    assert out["system"].startswith(data["system"]) and "send_email" in out["system"]
    assert data["system"] != out["system"]
    kept = out["messages"]
    assert rb.validate(kept, provider="anthropic", system=out["system"]) == []


def test_errors_become_the_http_errors_the_proxy_answers() -> None:
    sink = Sink()
    hook = RingboundHook(SMALL, sink=sink)
    with pytest.raises(HTTPException) as broken:
        run(hook, chat_body("m", 30, broken=True), "acompletion")
    assert broken.value.status_code == 400
    detail = broken.value.detail
    assert detail["error"].startswith("ringbound: tool call pairing is broken")
    assert detail["ringbound"] == {
        "error": "PairingError",
        "issues": [{"kind": "missing_result", "call_id": "call_000", "index": 2}],
    }
    assert isinstance(broken.value.__cause__, rb.PairingError)

    with pytest.raises(HTTPException) as malformed:
        run(hook, {"model": "m", "messages": [{"role": "user"}]}, "acompletion")
    assert malformed.value.status_code == 400
    assert malformed.value.detail["ringbound"] == {"error": "InvalidMessageError", "index": 0}

    huge = {"model": "m", "messages": [{"role": "user", "content": "word " * 4_000}]}
    with pytest.raises(HTTPException) as over:
        run(hook, huge, "acompletion")
    fields = over.value.detail["ringbound"]
    assert over.value.status_code == 400 and fields["error"] == "BudgetExceededError"
    assert fields["budget"] == SMALL.budget and fields["tokens"] > SMALL.budget
    assert [e[2] for e in sink.events] == [
        "PairingError",
        "InvalidMessageError",
        "BudgetExceededError",
    ]


def test_a_config_source_returning_something_else_is_the_gateways_500() -> None:
    hook = RingboundHook(lambda model: {"model_input_limit": 1000})  # type: ignore[arg-type,return-value]
    with pytest.raises(HTTPException) as e:
        run(hook, chat_body("m", 3), "acompletion")
    assert e.value.status_code == 500
    assert e.value.detail["ringbound"] == {"error": "ConfigError", "key": "config"}


def test_a_summarizer_failing_closed_is_a_503_a_retry_may_get_past() -> None:
    def failing(request: rb.SummaryRequest) -> str:
        raise RuntimeError("model down")

    cfg = rb.AssemblyConfig(
        model_input_limit=3_000,
        output_reserve_tokens=500,
        safety_margin_tokens=100,
        on_summary_failure="fail_closed",
    )
    hook = RingboundHook(cfg, summarizer=failing)
    with pytest.raises(HTTPException) as e:
        run(hook, chat_body("m", 30), "acompletion")
    assert e.value.status_code == 503
    assert e.value.detail["ringbound"]["error"] == "SummaryError"
    assert http_status(rb.StaleStateError("x")) == 400


@pytest.mark.parametrize(
    ("config", "default"),
    [
        ({"model_input_limit": 1000}, None),
        ({"m": {"model_input_limit": 1000}}, None),
        ({1: SMALL}, None),
        (SMALL, {"model_input_limit": 1000}),
        (42, None),
    ],
    ids=["dict-config", "dict-value", "int-key", "dict-default", "int"],
)
def test_a_wrong_config_is_refused_at_start_up(config: Any, default: Any) -> None:
    with pytest.raises(rb.ConfigError) as e:
        RingboundHook(config, default=default)
    assert e.value.key in ("config", "default")


def test_a_wrong_sink_or_summarizer_is_refused_at_start_up() -> None:
    with pytest.raises(rb.ConfigError, match="sink"):
        RingboundHook(SMALL, sink=object())  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError, match="summarizer"):
        RingboundHook(SMALL, summarizer="not callable")


def test_one_assembler_per_config_and_route() -> None:
    hook = RingboundHook({"a": SMALL, "b": SMALL})
    first = hook.assembler(SMALL, "openai_chat")
    assert hook.assembler(SMALL, "openai_chat") is first
    assert hook.assembler(SMALL, "anthropic") is not first
    fresh = RingboundHook(lambda model: rb.AssemblyConfig(model_input_limit=20_000))
    for _ in range(200):  # a source building configs does not grow the hook without bound
        assert run(fresh, chat_body("m", 1), "acompletion") is not None
    assert len(fresh._assemblers) <= 64


@given(
    session=gen.sessions(images=False, max_units=10),
    limit=st.integers(1_500, 6_000),
    extra=st.dictionaries(st.sampled_from(["temperature", "seed", "stop", "n"]), st.integers()),
)
def test_the_hook_sends_what_the_assembler_makes_and_nothing_else_changes(
    session: list[dict[str, Any]], limit: int, extra: dict[str, int]
) -> None:
    cfg = rb.AssemblyConfig(
        model_input_limit=limit, output_reserve_tokens=500, safety_margin_tokens=100
    )
    data = {"model": "m", "messages": session, **extra}
    before = copy.deepcopy(data)
    try:
        expected = rb.Assembler(placed(cfg, "openai_chat")).assemble(session)
    except rb.RingboundError as error:
        with pytest.raises(HTTPException) as e:
            run(RingboundHook(cfg), data, "acompletion")
        assert e.value.status_code == http_status(error)
        assert isinstance(e.value.__cause__, type(error))
    else:
        out = run(RingboundHook(cfg), data, "acompletion")
        assert out is not None
        assert out["messages"] == expected.messages
        assert set(out) == set(data)
        assert all(out[k] is data[k] for k in data if k != "messages")
    assert data == before


def test_the_example_hook_sizes_every_model_of_the_example_proxy_from_the_model() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "litellm"
    config = yaml.safe_load((example / "config.yaml").read_text(encoding="utf-8"))
    module_name, instance = config["litellm_settings"]["callbacks"].rsplit(".", 1)
    spec = importlib.util.spec_from_file_location(module_name, example / f"{module_name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hook = getattr(module, instance)
    assert isinstance(hook, RingboundHook)
    for entry in config["model_list"]:
        cfg = hook.config_for(entry["model_name"])
        assert cfg is not None and "send_email" in cfg.side_effect_tools
        # No window is given: each model's comes from what the proxy knows of it.
        assert cfg.model_input_limit == rb.AssemblyConfig().model_input_limit
        facts = hook.facts_for(entry["litellm_params"]["model"], ("max_tokens", 1_000))
        assert facts.input_limit is not None and facts.output_reserve == 1_000


#: OpenAI's explicit prompt caching, which writes ``prompt_cache_options`` (issue 35).
CACHED = dataclasses.replace(SMALL, cache_stable=True, prompt_cache_mode="explicit")
OPTIONS = {"mode": "explicit", "ttl": "30m"}


def sent_upstream(body: dict[str, Any], call_type: str) -> dict[str, Any]:
    """The JSON LiteLLM sends an OpenAI upstream for ``body``, as the proxy would route it."""
    send = {k: v for k, v in body.items() if k != "user"}
    send["model"] = "openai/gpt-4o"
    call = litellm.acompletion if call_type == "acompletion" else litellm.aresponses
    with FakeUpstream() as upstream:
        asyncio.run(call(api_base=upstream.base_url + "/v1", api_key="sk-test", **send))
        (got,) = upstream.take()
    return got.body


#: Pydantic's warning on LiteLLM's own ``ReadOnly`` TypedDict items, met on its request path.
@pytest.mark.filterwarnings("ignore:Items? .* (is|are) using the `ReadOnly` qualifier")
@pytest.mark.parametrize("call_type", ["acompletion", "aresponses"])
def test_the_cache_options_go_in_the_body_and_litellm_sends_them_on(call_type: str) -> None:
    data = BODIES[call_type]("gpt-4o", 30)
    before = copy.deepcopy(data)
    out = run(RingboundHook({"gpt-4o": CACHED}), data, call_type)
    assert out is not None and out["prompt_cache_options"] == OPTIONS
    assert data == before
    assert sent_upstream(out, call_type)["prompt_cache_options"] == OPTIONS
    # Without prompt_cache_mode there are none, as before.
    plain = run(RingboundHook({"gpt-4o": dataclasses.replace(CACHED, prompt_cache_mode=None)}),
                data, call_type)  # fmt: skip
    assert plain is not None and "prompt_cache_options" not in plain


def test_the_bodys_own_cache_options_are_kept_and_a_retention_takes_the_ttl_out() -> None:
    hook = RingboundHook({"gpt-4o": CACHED})
    own = {"mode": "implicit"}
    out = run(hook, {**chat_body("gpt-4o", 30), "prompt_cache_options": own}, "acompletion")
    assert out is not None and out["prompt_cache_options"] is own
    data = {**chat_body("gpt-4o", 30), "prompt_cache_retention": "24h"}
    out = run(hook, data, "acompletion")
    assert out is not None and out["prompt_cache_options"] == {"mode": "explicit"}
    both = {**data, "prompt_cache_options": {"ttl": "30m"}}
    with pytest.raises(HTTPException) as e:
        run(hook, both, "acompletion")
    assert e.value.status_code == 400 and isinstance(e.value.__cause__, rb.InvalidBodyError)


def test_no_cache_options_for_a_model_that_does_not_speak_openais_format() -> None:
    hook = RingboundHook(CACHED)
    out = run(hook, chat_body("claude-sonnet-4-5", 30), "acompletion")
    assert out is not None and "prompt_cache_options" not in out
    out = run(hook, anthropic_body("claude-sonnet-4-5", 30), "anthropic_messages")
    assert out is not None and "prompt_cache_options" not in out
