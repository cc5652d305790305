"""``token_ratio: auto`` and ``safety_margin_tokens: auto``: a ratio planted in the mock
provider is found from its counts, starting conservative and tightening as samples arrive, in
a number of samples the test pins; the learned figures survive serialization."""

from __future__ import annotations

import math

import pytest
from sdk_mocks import FORMAT, Provider, counter_for, session

import ringbound as rb
from ringbound.ledgers.calibrator import MIN_SAMPLES, PRIOR_ERROR

PLANTED = 1.18  # the fit of Claude's reported size over ringbound's count
NOISE = 0.02


def grow(asm: rb.Assembler, fmt: str, turns: int) -> list[rb.ProviderCount]:
    """Assemblies of one session growing by a ring a turn; their provider counts."""
    checks = []
    for turn in range(turns):
        messages, system = session(fmt, 2 + turn, words=10 + 7 * (turn % 5))
        checks.append(asm.assemble(messages, system=system).report.provider_count)
    return checks


# The providers without a public tokenizer, where the ratio is an estimate to begin with.
@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_the_ratio_converges_on_the_planted_one(name: str) -> None:
    fmt = FORMAT[name]
    p = Provider(ratio=PLANTED, noise=NOISE, seed=11)
    cfg = rb.AssemblyConfig(
        model_input_limit=20_000,
        output_reserve_tokens=1_000,
        safety_margin_tokens=0,
        token_ratio="auto",
        token_counter="provider",
    )
    asm = rb.Assembler(cfg, provider=fmt, counter=counter_for(name, p))
    checks = grow(asm, fmt, 60)
    prior = rb.Assembler(rb.AssemblyConfig(), provider=fmt)._ratio
    # Conservative start: the provider's documented ratio (or the largest seen) plus 25%.
    assert checks[0].token_ratio == math.ceil(prior * (1 + PRIOR_ERROR) * 1000) / 1000
    assert all(c.token_ratio >= PLANTED * (1 + NOISE) for c in checks[:MIN_SAMPLES])
    # Tightened: the first assembly whose ratio is within 5% of the worst planted one (a
    # 99.9% normal-theory bound over +-2% uniform noise sits about 4% above the planted
    # ratio). The seeded noise makes the count exact: the first one with its own figures.
    close = PLANTED * (1 + NOISE) * 1.05
    needed = next(i for i, c in enumerate(checks) if c.token_ratio <= close)
    assert needed == MIN_SAMPLES == 5, [c.token_ratio for c in checks[:16]]
    assert all(c.token_ratio <= close for c in checks[needed:])
    # ... and it still covers: every request's estimate was at or above the provider's count.
    assert all(c.tokens <= c.local_tokens for c in checks[needed:])
    figures = asm._gate.calibrator.figures(f"{name}-model", prior_ratio=prior)
    # The estimate rounds each message up after scaling, so the raw count read back from it
    # is a little high and the mean a little under the planted ratio.
    assert abs(figures.ratio_mean / PLANTED - 1) < 0.02


def test_a_learned_margin_starts_at_five_percent_and_shrinks() -> None:
    p = Provider(ratio=1.0, noise=0.01, seed=3)
    cfg = rb.AssemblyConfig(
        model_input_limit=20_000,
        output_reserve_tokens=1_000,
        safety_margin_tokens="auto",
        token_counter="provider",
    )
    asm = rb.Assembler(cfg, provider="anthropic", counter=counter_for("anthropic", p))
    assert cfg.budget == 19_000  # before the margin: it is learned
    checks = grow(asm, "anthropic", 30)
    assert checks[0].safety_margin_tokens == 960  # 5% of 19,000, rounded up to 64
    assert checks[-1].safety_margin_tokens < checks[0].safety_margin_tokens
    # With the ratio fixed at Anthropic's 1.3 and the provider at 1.0, the estimate is above
    # every count: the margin goes to 0.
    assert checks[-1].safety_margin_tokens == 0


def test_usage_reported_through_the_ledger_calibrates_without_a_counter() -> None:
    cal = rb.Calibrator()
    cfg = rb.AssemblyConfig(
        model_input_limit=20_000, output_reserve_tokens=1_000, token_ratio="auto"
    )
    asm = rb.Assembler(cfg, provider="anthropic", calibrator=cal)
    ledger = rb.TokenLedger(19_000, model="claude-sonnet-4-5", calibrator=cal)
    ratios = []
    for turn in range(20):
        messages, system = session("anthropic", 2 + turn)
        res = asm.assemble(messages, system=system, token_ledger=ledger)
        check = res.report.provider_count
        assert check.checked is False and check.counter is None
        ratios.append(check.token_ratio)
        raw = res.report.tokens_after / check.token_ratio
        ledger.observe_usage(
            {"input_tokens": math.ceil(raw * 1.1), "output_tokens": 5},
            local_estimate=res.report.tokens_after,
            token_ratio=check.token_ratio,
        )
    assert ratios[0] == 1.625 and 1.1 <= ratios[-1] < 1.12
    assert ledger.account.responses == 20 and ledger.account.output == 100


def test_the_calibrator_round_trips_and_rejects_bad_data() -> None:
    cal = rb.Calibrator(coverage=0.99)
    for i in range(10):
        cal.observe("m", 1_000 + i, 1_200 + i)
    again = rb.Calibrator.from_dict(cal.to_dict())
    assert again.to_dict() == cal.to_dict()
    assert again.figures("m", prior_ratio=1.3) == cal.figures("m", prior_ratio=1.3)
    for bad in ({"version": 9}, {**cal.to_dict(), "models": {"m": [[1, 2, 3]]}}, [1]):
        with pytest.raises(rb.ConfigError):
            rb.Calibrator.from_dict(bad)  # type: ignore[arg-type]
    with pytest.raises(rb.ConfigError):
        cal.observe("m", 0, 5)
    with pytest.raises(rb.ConfigError) as info:
        rb.AssemblyConfig(calibration_coverage=1.0)
    assert info.value.key == "calibration_coverage"
    for key, value in (("token_ratio", "sometimes"), ("safety_margin_tokens", "auto!")):
        with pytest.raises(rb.ConfigError) as info:
            rb.AssemblyConfig(**{key: value})  # type: ignore[arg-type]
        assert info.value.key == key
