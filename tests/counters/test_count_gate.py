"""``token_counter`` with a real counter: the provider's count of the assembled request, above
or below the local estimate, tightening until it fits, failing closed, falling back when the
counter times out, and the report, the metrics and the token account saying so."""

from __future__ import annotations

import asyncio

import prometheus_client
import pytest
from sdk_mocks import FORMAT, Provider, bedrock_client, counter_for, session

import ringbound as rb


def config(**kw: object) -> rb.AssemblyConfig:
    values: dict[str, object] = {
        "model_input_limit": 3_000,
        "output_reserve_tokens": 200,
        "safety_margin_tokens": 100,
        "token_counter": "provider",
    }
    values.update(kw)
    return rb.AssemblyConfig(**values)  # type: ignore[arg-type]


def run(asm: rb.Assembler, rings: int) -> rb.AssemblyResult:
    messages, system = session("anthropic", rings)
    return asm.assemble(messages, system=system)


def assemble(asm: rb.Assembler, messages: list, system: object, asynchronous: bool, **kw: object):
    if asynchronous:
        return asyncio.run(asm.assemble_async(messages, system=system, **kw))  # type: ignore[arg-type]
    return asm.assemble(messages, system=system, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_count_below_the_estimate_is_taken_as_it_is(name: str, asynchronous: bool) -> None:
    fmt = FORMAT[name]
    p = Provider(ratio=0.8)
    asm = rb.Assembler(
        config(), provider=fmt, counter=counter_for(name, p, asynchronous=asynchronous)
    )
    messages, system = session(fmt, 30)
    res = assemble(asm, messages, system, asynchronous)
    check = res.report.provider_count
    assert check is not None and check.checked and not check.failed
    assert check.tokens < check.local_tokens == res.report.tokens_after <= res.report.budget
    assert check.rechecks == 0 and len(p.bodies) == 1
    assert check.counter == name and check.model == f"{name}-model"


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_count_above_the_estimate_but_in_budget_is_sent(name: str, asynchronous: bool) -> None:
    fmt = FORMAT[name]
    p = Provider(ratio=2.0)
    asm = rb.Assembler(
        config(), provider=fmt, counter=counter_for(name, p, asynchronous=asynchronous)
    )
    messages, system = session(fmt, 2)
    res = assemble(asm, messages, system, asynchronous)
    check = res.report.provider_count
    assert check.local_tokens < check.tokens <= res.report.budget
    assert res.messages == messages and check.rechecks == 0


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_over_budget_per_the_provider_is_tightened_until_it_fits(
    name: str, asynchronous: bool
) -> None:
    fmt = FORMAT[name]
    # The provider counts 1.6x what ringbound counts raw: for OpenAI (ratio 1.0) and the
    # others (1.3, 1.25) alike, a request planned to the budget is over it per the provider.
    p = Provider(ratio=1.6)
    asm = rb.Assembler(
        config(), provider=fmt, counter=counter_for(name, p, asynchronous=asynchronous)
    )
    messages, system = session(fmt, 40)
    res = assemble(asm, messages, system, asynchronous)
    check = res.report.provider_count
    assert check.rechecks >= 1 and len(p.bodies) == 1 + check.rechecks
    assert check.tokens <= res.report.budget == config().budget
    assert check.tokens == p.count(fmt, res.messages, res.system, None)
    assert rb.validate(res.messages, provider=fmt, system=res.system) == []
    # Tighter than the local plan alone would have made it.
    local = rb.Assembler(config(token_counter="tiktoken"), provider=fmt).assemble(
        messages, system=system
    )
    assert len(res.messages) < len(local.messages)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_still_over_after_two_tightenings_fails_closed(asynchronous: bool) -> None:
    p = Provider(tokens=2_701)  # one over the budget, whatever is sent
    sink = rb.PrometheusSink(prometheus_client.CollectorRegistry())
    asm = rb.Assembler(
        config(),
        provider="anthropic",
        counter=counter_for("anthropic", p, asynchronous=asynchronous),
        sink=sink,
    )
    messages, system = session("anthropic", 40)
    before = [dict(m) for m in messages]
    with pytest.raises(rb.BudgetExceededError, match="after 2 tightenings") as info:
        assemble(asm, messages, system, asynchronous)
    assert (info.value.tokens, info.value.budget) == (2_701, 2_700)
    assert len(p.bodies) == 3  # the first count and two re-checks
    assert messages == before
    reject = {"provider": "anthropic", "reason": "BudgetExceededError"}
    assert sink.registry.get_sample_value("context_assemble_reject_total", reject) == 1.0


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_counter_timeout_falls_back_to_the_estimate(name: str, asynchronous: bool) -> None:
    fmt = FORMAT[name]
    registry = prometheus_client.CollectorRegistry()
    counter = counter_for(name, Provider(delay_s=0.5), asynchronous=asynchronous, timeout=0.05)
    asm = rb.Assembler(config(), provider=fmt, counter=counter, sink=rb.PrometheusSink(registry))
    messages, system = session(fmt, 30)
    res = assemble(asm, messages, system, asynchronous)
    check = res.report.provider_count
    assert check.checked and check.failed and check.reason == "timeout" and check.tokens is None
    local = rb.Assembler(config(token_counter="tiktoken"), provider=fmt).assemble(
        messages, system=system
    )
    assert res.messages == local.messages  # the local plan, as it was
    assert 0.05 <= check.elapsed_s < 0.4
    labels = {"provider": fmt, "outcome": "timeout"}
    assert registry.get_sample_value("context_assemble_provider_count_total", labels) == 1.0


def test_a_failing_counter_is_reported_as_an_error() -> None:
    registry = prometheus_client.CollectorRegistry()
    counter = counter_for("anthropic", Provider(status=400))
    asm = rb.Assembler(
        config(), provider="anthropic", counter=counter, sink=rb.PrometheusSink(registry)
    )
    res = run(asm, 3)
    assert res.report.provider_count.reason == "exception:BadRequestError"
    labels = {"provider": "anthropic", "outcome": "error"}
    assert registry.get_sample_value("context_assemble_provider_count_total", labels) == 1.0


def test_the_default_mode_checks_only_requests_near_the_budget() -> None:
    p = Provider(ratio=1.0)
    cfg = config(token_counter="provider_or_tiktoken_model_encoding")
    asm = rb.Assembler(cfg, provider="anthropic", counter=counter_for("anthropic", p))
    small = run(asm, 1)
    assert not small.report.provider_count.checked and p.bodies == []
    near = run(asm, 40)
    assert near.report.provider_count.checked and len(p.bodies) == 1


def test_bedrock_through_the_assembler() -> None:
    client, stub = bedrock_client()
    messages, system = session("bedrock_converse", 30)
    stub.add_response("count_tokens", {"inputTokens": 3_500})  # over: tighten
    stub.add_response("count_tokens", {"inputTokens": 2_100})
    counter = rb.counters.bedrock(client, model="anthropic.claude-sonnet-4-5")
    asm = rb.Assembler(config(), provider="bedrock_converse", counter=counter)
    with stub:
        res = asm.assemble(messages, system=system)
    stub.assert_no_pending_responses()
    check = res.report.provider_count
    assert (check.tokens, check.rechecks) == (2_100, 1)
    assert res.report.tokens_after < 2_700 * 2_700 / 3_500


def test_the_token_account_reconciles_estimate_count_and_usage() -> None:
    import anthropic.types

    p = Provider(ratio=1.1)
    cal = rb.Calibrator()
    ledger = rb.TokenLedger(2_700, model="anthropic-model", calibrator=cal)
    asm = rb.Assembler(
        config(), provider="anthropic", counter=counter_for("anthropic", p), calibrator=cal
    )
    messages, system = session("anthropic", 5)
    res = asm.assemble(messages, system=system, token_ledger=ledger)
    usage = anthropic.types.Usage(
        input_tokens=100,
        cache_read_input_tokens=res.report.provider_count.tokens - 150,
        cache_creation_input_tokens=50,
        output_tokens=42,
    )
    ledger.observe_usage(usage, local_estimate=res.report.tokens_after, token_ratio=1.3)
    account = ledger.account
    assert res.report.token_account.checked == 1
    assert account.estimated == res.report.tokens_after
    assert account.provider_counted == res.report.provider_count.tokens == account.reported_prompt
    assert (account.input, account.cached_input, account.cache_write, account.output) == (
        100,
        res.report.provider_count.tokens - 150,
        50,
        42,
    )
    assert cal.samples("anthropic-model") == 2  # the count, then the usage
    again = rb.TokenLedger.from_dict(ledger.to_dict())
    assert again.account == account and again.calibrator.to_dict() == cal.to_dict()


def test_configuration_mistakes_are_config_errors() -> None:
    counter = counter_for("anthropic", Provider())
    with pytest.raises(rb.ConfigError) as info:
        rb.Assembler(config(), provider="anthropic")
    assert info.value.key == "token_counter"
    with pytest.raises(rb.ConfigError) as info:
        rb.Assembler(config(token_counter="tiktoken"), provider="anthropic", counter=counter)
    assert info.value.key == "token_counter"
    with pytest.raises(rb.ConfigError, match="reads anthropic"):
        rb.Assembler(config(), provider="gemini", counter=counter)
    with pytest.raises(rb.ConfigError) as info:
        rb.Assembler(config(), provider="anthropic", counter=lambda *a: 1)
    assert info.value.key == "counter"
    async_counter = counter_for("anthropic", Provider(), asynchronous=True)
    asm = rb.Assembler(config(), provider="anthropic", counter=async_counter)
    with pytest.raises(rb.ConfigError, match="async"):
        run(asm, 1)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_session_id_runs_through_the_gate_and_saves_its_checkpoint(asynchronous: bool) -> None:
    """With a store, the count gate's assemblies are the session's: the provider counts each
    one, a tightened plan is what is saved, and the next turn plans from that checkpoint."""
    # Cache-stable assembly compacts to its low-water mark: a provider counting 3x the raw
    # tokens still finds that plan over the budget, so the gate tightens it.
    p = Provider(ratio=3.0)
    asm = rb.Assembler(
        config(),
        provider="anthropic",
        counter=counter_for("anthropic", p, asynchronous=asynchronous),
        store=rb.MemoryStore(),
    )
    messages, system = session("anthropic", 40)
    first = assemble(asm, messages, system, asynchronous, session_id="gated")
    check = first.report.provider_count
    assert check is not None and check.checked and check.rechecks >= 1
    assert check.tokens <= first.report.budget and len(p.bodies) == 1 + check.rechecks
    assert first.report.store.loaded == "new" and first.report.store.saved == "saved"
    longer, _ = session("anthropic", 41)
    second = assemble(asm, longer, system, asynchronous, session_id="gated")
    assert second.report.store.loaded == "loaded"
    assert second.report.provider_count.checked
    assert second.report.provider_count.tokens <= second.report.budget
