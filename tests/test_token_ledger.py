"""The shared token ledger: calibration from provider usage, per-tool return sizes, admission
decisions against a simple oracle, the tail reserve, round trips and concurrent use."""

from __future__ import annotations

import math
import threading

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringbound.errors import ConfigError
from ringbound.ledgers.tokens import DEFAULT_TOOL_TOKENS, HISTORY, Admission, TokenLedger, ToolStats

TOOLS = ("read_file", "grep", "run_tests", "web_fetch")

usage = st.tuples(st.integers(0, 200_000), st.integers(1, 200_000))
tool_results = st.tuples(st.sampled_from(TOOLS), st.integers(0, 50_000))


@st.composite
def ledgers(draw: st.DrawFn) -> TokenLedger:
    budget = draw(st.integers(1, 200_000))
    ledger = TokenLedger(
        budget,
        hard_cap=draw(st.none() | st.integers(0, 1_000_000)),
        margin_tokens=draw(st.integers(0, 5_000)),
    )
    for prompt, estimate in draw(st.lists(usage, max_size=30)):
        ledger.observe_usage(prompt_tokens=prompt, local_estimate=estimate)
    for tool, tokens in draw(st.lists(tool_results, max_size=40)):
        ledger.observe_tool_result(tool, tokens)
    return ledger


def scale(tokens: int, ratio: float) -> int:
    return max(0, math.ceil(tokens * ratio - 1e-9))


def test_ratio_is_one_until_usage_is_observed_then_the_p95() -> None:
    ledger = TokenLedger(100_000)
    assert ledger.ratio == 1.0
    assert ledger.calibrated(1_000) == 1_000
    for i in range(100):
        ledger.observe_usage(prompt_tokens=1_000 + i, local_estimate=1_000)
    assert ledger.ratio == pytest.approx(1.094)
    assert ledger.calibrated(10_000) == 10_940


def test_ratio_may_fall_below_one_when_observed_lower() -> None:
    ledger = TokenLedger(100_000)
    ledger.observe_usage(prompt_tokens=900, local_estimate=1_000)
    assert ledger.ratio == pytest.approx(0.9)
    assert ledger.calibrated(1_000) == 900


def test_ratio_follows_the_recent_observations() -> None:
    ledger = TokenLedger(100_000)
    ledger.observe_usage(prompt_tokens=2_000, local_estimate=1_000)
    for _ in range(HISTORY):
        ledger.observe_usage(prompt_tokens=1_010, local_estimate=1_000)
    assert ledger.ratio == pytest.approx(1.01)


def test_tool_stats_count_max_and_p95() -> None:
    ledger = TokenLedger(100_000)
    assert ledger.tool_stats("grep") == ToolStats(0, 0, 0)
    for tokens in (300, 100, 200):
        ledger.observe_tool_result("grep", tokens)
    # Below 20 observations the nearest-rank p95 is the max.
    assert ledger.tool_stats("grep") == ToolStats(3, 300, 300)
    for tokens in range(1, 101):
        ledger.observe_tool_result("read_file", tokens)
    assert ledger.tool_stats("read_file") == ToolStats(100, 100, 95)
    assert ledger.tool_tokens_total == 600 + 5050


def test_admit_predicts_from_p95_then_default() -> None:
    ledger = TokenLedger(100_000)
    assert ledger.default_tool_tokens == DEFAULT_TOOL_TOKENS
    assert ledger.admit("web_fetch", current_tokens=0).predicted_tokens == DEFAULT_TOOL_TOKENS
    assert TokenLedger(8_000).default_tool_tokens == 2_000
    for tokens in range(1, 101):
        ledger.observe_tool_result("read_file", tokens * 100)
    assert ledger.admit("read_file", current_tokens=0).predicted_tokens == 9_500
    assert ledger.admit("read_file", 123, current_tokens=0).predicted_tokens == 123


def test_admit_decisions() -> None:
    ledger = TokenLedger(10_000, margin_tokens=500)
    ledger.observe_tool_result("read_file", 4_000)
    assert ledger.admit("read_file", current_tokens=5_500) == Admission(
        "allow", 4_000, 4_000, "read_file: 4000 predicted, 4000 free"
    )
    second = ledger.admit("read_file", current_tokens=5_501)
    assert (second.decision, second.remaining_tokens) == ("compact_first", 3_999)
    assert "after compaction" in second.reason
    third = ledger.admit("read_file", 9_501, current_tokens=0)
    assert third.decision == "deny"
    assert "exceeds the budget 10000" in third.reason


def test_admit_denies_past_the_hard_cap() -> None:
    # The cap counts the run's observed returns plus the predicted one.
    ledger = TokenLedger(100_000, hard_cap=10_000)
    ledger.observe_tool_result("grep", 3_000)
    assert ledger.admit("grep", current_tokens=0).decision == "allow"
    ledger.observe_tool_result("grep", 4_000)
    denied = ledger.admit("grep", current_tokens=0)
    assert denied.decision == "deny"
    assert "hard cap 10000" in denied.reason
    assert ledger.admit("grep", 1_000, current_tokens=0).decision == "allow"


def test_calibration_scales_admission() -> None:
    ledger = TokenLedger(10_000)
    ledger.observe_usage(prompt_tokens=1_250, local_estimate=1_000)
    adm = ledger.admit("grep", 2_000, current_tokens=4_000)
    assert (adm.predicted_tokens, adm.remaining_tokens) == (2_500, 5_000)


@given(
    ledgers(), st.sampled_from(TOOLS), st.none() | st.integers(0, 300_000), st.integers(0, 300_000)
)
def test_admit_matches_the_rule(
    ledger: TokenLedger, tool: str, predicted: int | None, current: int
) -> None:
    adm = ledger.admit(tool, predicted, current_tokens=current)
    ratio = ledger.ratio
    stats = ledger.tool_stats(tool)
    local = predicted if predicted is not None else (stats.p95 if stats.count else None)
    expected_predicted = scale(local if local is not None else ledger.default_tool_tokens, ratio)
    assert adm.predicted_tokens == expected_predicted
    free = ledger.budget - scale(current, ratio) - ledger.margin_tokens
    assert adm.remaining_tokens == free
    over_cap = (
        ledger.hard_cap is not None
        and scale(ledger.tool_tokens_total, ratio) + adm.predicted_tokens > ledger.hard_cap
    )
    if adm.decision == "allow":
        # allow ⇒ the calibrated context plus the return plus the margin fits the budget.
        assert scale(current, ratio) + adm.predicted_tokens + ledger.margin_tokens <= ledger.budget
        assert not over_cap
    elif adm.decision == "compact_first":
        assert adm.predicted_tokens > free
        assert adm.predicted_tokens + ledger.margin_tokens <= ledger.budget
        assert not over_cap
    else:
        assert adm.decision == "deny"
        assert over_cap or adm.predicted_tokens + ledger.margin_tokens > ledger.budget


@given(ledgers(), st.none() | st.lists(st.sampled_from(TOOLS), min_size=1, unique=True))
def test_tail_reserve_free_space_admits_every_tool_in_play(
    ledger: TokenLedger, tools: list[str] | None
) -> None:
    reserve = ledger.tail_reserve(tools)
    in_play = tools if tools is not None else [t for t in TOOLS if ledger.tool_stats(t).count]
    worst = max(
        (
            ledger.tool_stats(t).max if ledger.tool_stats(t).count else ledger.default_tool_tokens
            for t in in_play
        ),
        default=0,
    )
    assert reserve == scale(worst, ledger.ratio) + ledger.margin_tokens
    if reserve > ledger.budget:
        return  # the reserve alone exceeds the budget: no compaction can leave it free
    # The largest context that leaves at least the reserve free.
    ratio = ledger.ratio
    current = int((ledger.budget - reserve) / ratio) + 1 if ratio else ledger.budget
    while ledger.budget - ledger.calibrated(current) < reserve:
        current -= 1
    for tool in in_play:
        adm = ledger.admit(tool, current_tokens=current)
        assert adm.decision == "allow" or "hard cap" in adm.reason


def test_tail_reserve_without_observations_is_the_margin() -> None:
    ledger = TokenLedger(10_000, margin_tokens=256)
    assert ledger.tail_reserve() == 256
    assert ledger.tail_reserve([]) == 256
    assert ledger.tail_reserve(["grep"]) == ledger.default_tool_tokens + 256


@given(ledgers())
def test_round_trip(ledger: TokenLedger) -> None:
    data = orjson.loads(orjson.dumps(ledger.to_dict()))
    again = TokenLedger.from_dict(data)
    assert again.to_dict() == ledger.to_dict()
    assert again.ratio == ledger.ratio
    for tool in TOOLS:
        assert again.tool_stats(tool) == ledger.tool_stats(tool)
        assert again.admit(tool, current_tokens=1_000) == ledger.admit(tool, current_tokens=1_000)
    assert again.tail_reserve() == ledger.tail_reserve()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"version": 3}, "version"),
        ({"budget": 0}, "budget"),
        ({"ratios": [1.0, "x"]}, "ratios"),
        ({"tools": {"grep": {"count": 1, "max": 5, "recent": [6]}}}, "tools.grep"),
        ({"tools": {"grep": {"count": 0, "max": 5, "recent": [5]}}}, "tools.grep"),
        ({"tools": []}, "tools"),
        ({"tool_tokens_total": -1}, "tool_tokens_total"),
    ],
)
def test_from_dict_rejects_malformed_data(change: dict[str, object], key: str) -> None:
    data = TokenLedger(1_000).to_dict() | change
    with pytest.raises(ConfigError) as info:
        TokenLedger.from_dict(data)
    assert info.value.key == key


def test_from_dict_names_a_missing_key() -> None:
    data = TokenLedger(1_000).to_dict()
    del data["margin_tokens"]
    with pytest.raises(ConfigError, match="margin_tokens"):
        TokenLedger.from_dict(data)


@pytest.mark.parametrize(
    "call",
    [
        lambda: TokenLedger(0),
        lambda: TokenLedger(True),  # type: ignore[arg-type]
        lambda: TokenLedger(10, hard_cap=-1),
        lambda: TokenLedger(10, margin_tokens=1.5),  # type: ignore[arg-type]
        lambda: TokenLedger(10).observe_usage(prompt_tokens=10, local_estimate=0),
        lambda: TokenLedger(10).observe_usage(prompt_tokens=-1, local_estimate=10),
        lambda: TokenLedger(10).observe_tool_result("", 5),
        lambda: TokenLedger(10).observe_tool_result("grep", -5),
        lambda: TokenLedger(10).admit("grep", current_tokens=-1),
        lambda: TokenLedger(10).admit("grep", "5", current_tokens=0),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_raise_config_error(call: object) -> None:
    with pytest.raises(ConfigError):
        call()  # type: ignore[operator]


def test_concurrent_use_loses_no_observation() -> None:
    ledger = TokenLedger(100_000, hard_cap=10**12)
    threads_n, per_thread = 8, 500
    failures: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def work(k: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                ledger.observe_tool_result(TOOLS[(k + i) % len(TOOLS)], i)
                ledger.observe_usage(prompt_tokens=1_000 + k, local_estimate=1_000)
                ledger.admit(TOOLS[i % len(TOOLS)], current_tokens=i)
                ledger.tail_reserve()
                ledger.to_dict()
        except BaseException as e:  # surfaced below
            failures.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert sum(ledger.tool_stats(t).count for t in TOOLS) == threads_n * per_thread
    assert ledger.tool_tokens_total == threads_n * sum(range(per_thread))
    assert 1.0 <= ledger.ratio <= 1.007
