"""The printed forms of p-values and differences: what a reader compares with alpha or reads as a size."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from benchmarks.stats_scaling import make_manifest
from contextdelta.report import AggregateMetrics, aggregate, pct, percent, pp, pvalue, render_report
from contextdelta.report._format import pp_change
from contextdelta.report._markdown import _METRIC_WORDS, _statement
from contextdelta.rundir.layout import AGGREGATE_METRICS
from contextdelta.stats import AnalysisParams, Estimate, EstimateStatus, cluster_by_task, fixed, paired_comparison
from tests.report import runs
from tests.report.test_synthetic import FACTS, no_stale_table


def _side(value: float, alpha: float) -> int:
    return (value > alpha) - (value < alpha)


@pytest.mark.parametrize(
    ("value", "alpha", "printed"),
    [
        (0.0496, 0.05, "0.0496"),  # two decimals would print 0.05: "significant" next to "0.05"
        (0.0504, 0.05, "0.0504"),
        (0.04999, 0.05, "0.04999"),
        (0.049996, 0.05, "0.049996"),  # four decimals would print 0.0500
        (0.050004, 0.05, "0.050004"),
        (0.0099996, 0.01, "0.0099996"),
        (0.05, 0.05, "0.05"),
        (0.015625, 0.05, "0.016"),
        (0.5, 0.05, "0.5"),
        (0.00996, 0.01, "0.00996"),
        (0.99997, 0.05, "0.99997"),  # never "1" unless it is exactly 1
        (1.0, 0.05, "1"),
        (3.1e-7, 0.05, "3.1e-07"),  # never "0" / "<0.0001"
        (0.0, 0.05, "0"),
        (None, 0.05, "-"),
    ],
)
def test_pvalue_prints_on_the_same_side_of_alpha(value: float | None, alpha: float, printed: str) -> None:
    assert pvalue(value, alpha) == printed


def test_pvalue_side_of_alpha_holds_for_holm_adjusted_values_near_alpha() -> None:
    """Holm-adjusted p-values (checked against statsmodels) close to alpha print on their own side of it."""
    rng = np.random.default_rng(3)
    for alpha in (0.05, 0.01, 0.1):
        raw = alpha / 3 + rng.normal(0.0, alpha / 300, size=(200, 3))
        for row in np.clip(raw, 1e-12, 1.0):
            adjusted = multipletests(row, alpha=alpha, method="holm")[1]
            for value in adjusted:
                text = pvalue(float(value), alpha)
                assert _side(float(text), alpha) == _side(float(value), alpha), (value, text)
                assert float(text) not in (0.0, 1.0)


@pytest.mark.parametrize(
    ("value", "decimals", "printed"),
    [
        (0.004, 0, "less than 0.5 pp higher"),  # rounds to 0 at whole points, yet is not 0
        (-0.004, 0, "less than 0.5 pp lower"),
        (-0.0004, 1, "less than 0.05 pp lower"),
        (0.006, 0, "1 pp higher"),
        (-0.083, 0, "8 pp lower"),
        (0.015, 1, "1.5 pp higher"),
        (0.0, 0, "no different"),
    ],
)
def test_a_difference_that_rounds_to_zero_is_less_than_half_a_unit(value: float, decimals: int, printed: str) -> None:
    assert pp_change(value, decimals) == printed


def test_the_statement_of_a_tiny_difference_never_says_zero_pp() -> None:
    metrics = AggregateMetrics.model_validate_json((runs.trusting_run() / AGGREGATE_METRICS).read_text())
    c = next(c for q in metrics.research_questions for c in q.comparisons if c.test.testable)
    assert c.difference.low is not None and c.difference.high is not None
    tiny = c.model_copy(update={"difference": c.difference.model_copy(update={"estimate": 0.002})})
    text = _statement(tiny, 1, 0.05, 0)
    assert "is less than 0.5 pp higher under" in text and " 0 pp " not in text
    none = c.model_copy(update={"difference": c.difference.model_copy(update={"estimate": 0.0})})
    assert f"no difference: {_METRIC_WORDS.get(c.metric, c.metric)} is equal on average" in _statement(none, 1, 0.05, 0)


def test_a_comparison_untestable_on_the_shared_repeats_says_where_its_tasks_agree() -> None:
    """Task t1 lost two of its three repeats to failed trials under b: on the repeat both conditions have, a and b
    agree, so the test has no discordant task, while the effect over every episode is (1/3 - 1) / 2 = -1/3."""
    a = cluster_by_task(["t1"] * 3 + ["t2"] * 3, [0, 1, 2] * 2, [1, 0, 0, 0, 0, 0])
    b = cluster_by_task(["t1", "t2", "t2", "t2"], [0, 0, 1, 2], [1, 0, 0, 0])
    found = paired_comparison(a, b, AnalysisParams(resamples=200))
    assert not found.test.testable and found.difference.estimate == pytest.approx(-1 / 3)
    metrics = AggregateMetrics.model_validate_json((runs.trusting_run() / AGGREGATE_METRICS).read_text())
    c = next(c for q in metrics.research_questions for c in q.comparisons)
    untestable = c.model_copy(update={"difference": found.difference, "test": found.test, "episodes": found.episodes})
    text = _statement(untestable, 1, 0.05, 0)
    assert "differs between" in text and "on equally many repeats of each condition" in text
    assert "The difference of task means is -33 [" in text
    # every task's difference 0 (no failed trial in the way): the sentence of a run without one, as before
    agreeing = untestable.model_copy(update={"difference": found.difference.model_copy(update={"estimate": 0.0})})
    assert "on equally many repeats of each condition" not in _statement(agreeing, 1, 0.05, 0)
    assert f"- {c.name}: no task differs between {c.a.label} and {c.b.label} (2 tasks, all concordant)" in (
        _statement(agreeing, 1, 0.05, 0)
    )


def test_a_slope_end_that_rounds_to_zero_is_not_negative_zero() -> None:
    """A slope interval whose lower end was -0.001 printed as `[-0.00, +0.41]`."""
    from contextdelta.report import slope_text
    from contextdelta.stats import LogisticSlope, SlopeStatus

    slope = LogisticSlope(
        status=SlopeStatus.OK, estimate=0.2, low=-0.001, high=0.41, confidence=0.95, n_horizons=3, n_tasks=9,
        n_episodes=27, resamples_left_out=0, note="",
    )  # fmt: skip
    assert "-0.00" not in slope_text(slope)
    assert slope_text(slope).startswith("+0.20 [+0.00, +0.41]")


def _estimate(value: float, low: float, high: float) -> Estimate:
    return Estimate(
        estimate=value, low=low, high=high, confidence=0.95, n_tasks=8, n_episodes=8, status=EstimateStatus.OK
    )


@pytest.mark.parametrize(
    ("value", "decimals", "printed"),
    [(0.125, 0, "13"), (0.145, 0, "15"), (0.375, 0, "38"), (0.00125, 2, "0.13"), (0.0625, 1, "6.3"), (0.0, 0, "0")],
)
def test_percentages_round_half_up_as_a_reader_rounds(value: float, decimals: int, printed: str) -> None:
    """12.5% printed "12%" (Python rounds half to even; 0.145 even read 14.499999999999998)."""
    assert fixed(value, decimals, scale=100.0) == percent(value, decimals) == printed
    assert pct(_estimate(value, value, value), decimals) == f"{printed}% [{printed}%, {printed}%]"
    assert pp(_estimate(-value, -value, value), decimals) == (
        f"{'+' if value == 0 else '-'}{printed} [{'+' if value == 0 else '-'}{printed}, +{printed}] pp"
    )
    if value:
        assert pp_change(value, decimals) == f"{printed} pp higher"


def test_every_percentage_of_a_report_rounds_half_up() -> None:
    """The failed-trial warning, a condition's rate and the exact-bound cells of a report print 1 of 8 as 13%."""
    table = no_stale_table(8, 1)
    first = (table.strategy == "full_history") & (table.protection_mode == "unprotected")
    row = int(np.flatnonzero(first)[0])
    table.values["stale_action"][row] = 1.0
    table.values["harmful_action"][row] = 1.0
    manifest = make_manifest(8, len(table)).model_copy(update={"repeats": 1})
    metrics = aggregate(manifest, table, AnalysisParams(resamples=200, power_datasets=100))
    (stale,) = [
        c.rates["stale_action"] for c in metrics.conditions if c.condition.label == "full_history / unprotected"
    ]
    assert stale.estimate == 0.125
    text = render_report(manifest, FACTS, metrics)
    assert "| 13% [" in text and "| 12% [" not in text
