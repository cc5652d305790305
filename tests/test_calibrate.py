"""Margin calibration: record shapes and their errors, the sample file, the report, coverage
and monotonicity properties, and the optional plot."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringbound.cli.calibrate import (
    MIN_RECORDS,
    Calibration,
    calibrate,
    cli_main,
    load_usage,
    plot,
)
from ringbound.errors import ConfigError

SAMPLE = Path(__file__).parent / "data" / "usage_sample.jsonl"

records_st = st.lists(
    st.tuples(st.integers(1, 200_000), st.integers(0, 250_000)), min_size=1, max_size=300
)
coverages = st.floats(0.01, 1.0)


def usage_sample(runs: int = 5, turns: int = 40, seed: int = 6) -> bytes:
    """The sample file's content: agent runs whose prompts grow turn by turn from 1k-3k local
    tokens up to 120k, compacting back to a quarter when they pass it; the provider reports
    the estimate times 1 + N(1.5%, 0.7%) plus 0-40 framing tokens."""
    rng = random.Random(seed)
    lines = []
    for run in range(runs):
        estimate = rng.randint(1_000, 3_000)
        for turn in range(turns):
            reported = round(estimate * (1 + rng.gauss(0.015, 0.007))) + rng.randint(0, 40)
            record = {
                "run": run,
                "turn": turn,
                "model": "gpt-4o-2024-08-06",
                "local_estimate": estimate,
                "prompt_tokens": reported,
            }
            lines.append(orjson.dumps(record))
            estimate = int(estimate * rng.uniform(1.05, 1.35)) + rng.randint(50, 2_000)
            if estimate > 120_000:
                estimate //= 4
    return b"\n".join(lines) + b"\n"


def test_sample_file_is_the_seeded_generator_output() -> None:
    # Regenerate with: python -c "import sys; sys.path.insert(0, 'tests'); import
    # test_calibrate as t; t.SAMPLE.write_bytes(t.usage_sample())"
    assert SAMPLE.read_bytes() == usage_sample()


def test_calibrate_on_the_sample_file() -> None:
    records = load_usage(SAMPLE)
    assert len(records) == 200
    assert 1_000 <= min(e for e, _ in records) and max(e for e, _ in records) <= 120_000
    cal = calibrate(records)
    assert cal.n == 200 and not cal.small_sample
    assert 1.0 < cal.ratio.p50 < 1.03
    assert cal.ratio.p50 <= cal.ratio.p90 <= cal.ratio.p99 <= cal.ratio.max
    assert cal.error.p50 <= cal.error.p90 <= cal.error.p99 <= cal.error.max
    # 200 records cannot resolve 99.9%: both recommendations cover every record.
    assert cal.token_ratio >= cal.ratio.max
    assert cal.safety_margin_tokens == cal.error.max
    assert all(rep <= est * cal.token_ratio for est, rep in records)
    assert sum(cal.histogram.counts) == 200
    report = cal.format()
    for text in ("200 usage records", "error (tokens)", "token_ratio: ", "cannot resolve", "#"):
        assert text in report
    assert "small sample" not in report


def test_cli_main_prints_the_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(SAMPLE, 0.99) == 0
    out = capsys.readouterr().out
    assert out == calibrate(load_usage(SAMPLE), 0.99).format() + "\n"
    assert "recommended for 99% coverage" in out
    assert "cannot resolve" not in out


def test_record_shapes() -> None:
    cal = calibrate(
        [
            (1_000, 1_010),
            [2_000, 2_040],
            {"local_estimate": 3_000, "prompt_tokens": 3_030, "model": "x"},
            {"estimate": 4_000.0, "reported": 4_000},
        ]
    )
    assert cal.records == ((1_000, 1_010), (2_000, 2_040), (3_000, 3_030), (4_000, 4_000))
    assert (cal.error.min, cal.error.max) == (0, 40)
    assert cal.token_ratio == 1.02


@pytest.mark.parametrize(
    ("bad", "text"),
    [
        ((1_000, 1_010, 3), "pair or an object"),
        ("1000,1010", "pair or an object"),
        ({"local_estimate": 1_000}, "prompt_tokens (or reported)"),
        ({"estimate": 0, "reported": 5}, "local_estimate must be a positive integer"),
        ((1_000, -1), "prompt_tokens must be a non-negative integer"),
        ((1_000, True), "prompt_tokens must be a non-negative integer"),
        ((1_000.5, 1_000), "local_estimate must be a positive integer"),
    ],
)
def test_bad_records_are_named_by_index(bad: object, text: str) -> None:
    with pytest.raises(ConfigError, match=r"^record 2: ") as info:
        calibrate([(1, 1), (2, 2), bad])
    assert text in str(info.value)


@pytest.mark.parametrize("coverage", [0, -0.5, 1.5, True, "0.9", math.nan])
def test_coverage_out_of_range(coverage: object) -> None:
    with pytest.raises(ConfigError) as info:
        calibrate([(1, 1)], coverage)  # type: ignore[arg-type]
    assert info.value.key == "coverage"


def test_no_records() -> None:
    with pytest.raises(ConfigError, match="no usage records"):
        calibrate([])


def test_small_sample_warns_in_the_report() -> None:
    cal = calibrate([(1_000 * k, 1_010 * k) for k in range(1, 6)])
    assert cal.small_sample
    assert f"small sample (5 records, fewer than {MIN_RECORDS})" in cal.format()
    assert not calibrate([(1_000, 1_010)] * MIN_RECORDS).small_sample


def test_identical_records_make_one_bin() -> None:
    cal = calibrate([(1_000, 1_000)] * 3)
    assert cal.histogram.counts == (3,)
    assert (cal.safety_margin_tokens, cal.token_ratio) == (0, 1.0)
    assert "+0.00%" in cal.format()


def test_margin_looks_at_the_largest_estimates() -> None:
    # Small requests are over-estimated, the largest quarter under-estimated by up to 870
    # tokens: the quantile over all records alone would miss the tail of the large ones.
    records = [(1_000, 900)] * 90 + [(100_000, 100_000 + 30 * k) for k in range(30)]
    cal = calibrate(records, coverage=0.9)
    assert cal.error.p90 == 510
    assert cal.safety_margin_tokens == 780


def test_load_usage_skips_blank_lines_and_names_bad_ones(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    path.write_text('{"estimate": 10, "reported": 11}\n\n  \n{"estimate": 20, "reported": 19}\n')
    assert load_usage(path) == [(10, 11), (20, 19)]
    for body, text in [
        ('{"estimate": 10, "reported": 11}\n\n{"estimate": 10,\n', "line 3: not JSON"),
        ('{"estimate": 10, "reported": 11}\n[10, 11]\n', "line 2: expected a JSON object"),
        ('\n{"estimate": 10, "prompt": 11}\n', "line 2: a usage record needs"),
        ('{"estimate": -10, "reported": 11}\n', "line 1: local_estimate must be"),
    ]:
        path.write_text(body)
        with pytest.raises(ConfigError, match=text):
            load_usage(path)


def test_load_usage_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_usage(tmp_path / "absent.jsonl")


@given(records_st, coverages, coverages)
def test_higher_coverage_never_lowers_the_recommendations(
    records: list[tuple[int, int]], a: float, b: float
) -> None:
    low, high = calibrate(records, min(a, b)), calibrate(records, max(a, b))
    assert low.safety_margin_tokens <= high.safety_margin_tokens
    assert low.token_ratio <= high.token_ratio


@given(records_st, coverages)
def test_recommendations_cover_the_requested_share(
    records: list[tuple[int, int]], coverage: float
) -> None:
    cal = calibrate(records, coverage)
    need = math.ceil(coverage * len(records) - 1e-9)
    assert sum(rep / est <= cal.token_ratio for est, rep in records) >= need
    assert sum(rep - est <= cal.safety_margin_tokens for est, rep in records) >= need
    assert cal.safety_margin_tokens >= 0
    assert cal.token_ratio == math.ceil(cal.token_ratio * 1000 - 1e-9) / 1000
    assert sum(cal.histogram.counts) == cal.n == len(records)
    assert len(cal.histogram.bins) == len(cal.histogram.counts) + 1
    assert list(cal.histogram.bins) == sorted(cal.histogram.bins)
    assert cal.format().count("\n") > 10


def test_plot_without_matplotlib_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    cal = calibrate([(1_000, 1_010)])
    with pytest.raises(ConfigError, match="pip install matplotlib"):
        plot(cal, tmp_path / "out.png")
    assert not (tmp_path / "out.png").exists()


def test_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "calibration.png"
    assert cli_main(SAMPLE, plot=out) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"plot written to {out}" in capsys.readouterr().out


def test_calibration_is_a_plain_value() -> None:
    cal = calibrate([(1_000, 1_010)])
    assert isinstance(cal, Calibration)
    assert "records" not in repr(cal)
    assert cal == calibrate([(1_000, 1_010)])


def test_docs_show_the_real_report(capsys: pytest.CaptureFixture[str]) -> None:
    docs = (Path(__file__).parent.parent / "docs" / "calibration.md").read_text(encoding="utf-8")
    block = docs.split("```text\n", 1)[1].split("```", 1)[0]
    command, shown = block.split("\n", 1)
    assert command == "$ ringbound calibrate tests/data/usage_sample.jsonl --coverage 0.99"
    cli_main(SAMPLE, 0.99)
    assert capsys.readouterr().out == shown
