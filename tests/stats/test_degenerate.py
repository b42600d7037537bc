"""Degenerate data: all pass, all fail, one task, empty condition, zero baseline. Finite, documented, and for bounded
quantities never a zero-width interval."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from contextdelta.stats import (
    AnalysisParams,
    Estimate,
    EstimateStatus,
    bootstrap_mean,
    bootstrap_rate,
    bootstrap_relative_reduction,
    cluster_by_task,
    exact_bound,
    flip_rates,
    pair_by_task_repeat,
    pair_table,
    paired_comparison,
    pass_hat_k,
)

PARAMS = AnalysisParams(resamples=500, seed=0)
TASKS = np.repeat(["a", "b", "c", "d"], 3)
REPEATS = np.tile([0, 1, 2], 4)


@pytest.mark.parametrize("value", [3.0, 0.0, 0.1])
def test_constant_unbounded_mean_has_no_interval_and_says_why(value: float) -> None:
    """A zero-width [v, v] reads as certainty: the estimate stands alone, and the JSON has no interval ends."""
    result = bootstrap_mean(cluster_by_task(TASKS, REPEATS, np.full(12, value)), PARAMS)
    assert (result.low, result.high) == (None, None)
    assert result.estimate == pytest.approx(value)
    assert result.status is EstimateStatus.CONSTANT
    assert "all 4 tasks have the same value" in result.note and "cannot vary" in result.note
    assert result.format() == f"{value:.3f} (no interval: all 4 tasks equal)"
    assert json.loads(result.model_dump_json())["low"] is None


def test_zero_of_576_episodes_over_24_tasks_is_an_exact_bound_over_tasks() -> None:
    """The issue's headline cell: 0 stale actions in 576 episodes of 24 tasks is not "certainly 0%"."""
    tasks = np.repeat([f"t{i:02d}" for i in range(24)], 24)
    repeats = np.tile(np.arange(24), 24)
    result = bootstrap_rate(cluster_by_task(tasks, repeats, np.zeros(576)), PARAMS)
    assert (result.estimate, result.low, result.status) == (0.0, 0.0, EstimateStatus.EXACT_BOUND)
    assert result.high == pytest.approx(1 - 0.025 ** (1 / 24))  # 14.2%: n is the 24 tasks, not the 576 episodes
    assert result.high == pytest.approx(0.1425, abs=5e-4)
    assert (result.n_tasks, result.n_episodes) == (24, 576)
    assert result.is_exact and "exact Clopper-Pearson bound with n = 24 tasks" in result.note


@pytest.mark.parametrize(("value", "expected"), [(0.0, (0.0, 0.6024)), (1.0, (0.3976, 1.0))])
def test_a_rate_at_zero_or_one_gets_the_clopper_pearson_interval(value: float, expected: tuple[float, float]) -> None:
    result = bootstrap_rate(cluster_by_task(TASKS, REPEATS, np.full(12, value)), PARAMS)
    assert result.status is EstimateStatus.EXACT_BOUND
    assert (result.low, result.high) == pytest.approx(expected, abs=1e-4)  # binomtest(0 or 4, 4): 4 tasks


def test_one_task_gets_the_exact_bound_with_n_one_and_says_so() -> None:
    rate = bootstrap_rate(cluster_by_task(["a", "a", "a"], [0, 1, 2], [1, 0, 1]), PARAMS)
    assert rate.estimate == pytest.approx(2 / 3)
    assert rate.low is not None and rate.high is not None and rate.low < 0.05 and rate.high > 0.99
    assert (rate.status, rate.n_tasks, rate.n_episodes) == (EstimateStatus.EXACT_BOUND, 1, 3)
    mean = bootstrap_mean(cluster_by_task(["a", "a", "a"], [0, 1, 2], [1.0, 5.0, 3.0]), PARAMS)
    assert mean.estimate == 3.0 and mean.low is None and mean.high is None
    assert mean.status is EstimateStatus.SINGLE_TASK and "one task" in mean.note
    assert mean.format(digits=1) == "3.0 (no interval: 1 task)"


def test_exact_bound_scales_the_deviation_to_the_range() -> None:
    assert exact_bound(0.0, 24, (-1.0, 1.0), 0.95) == pytest.approx((-0.14247, 0.14247), abs=1e-5)
    assert exact_bound(1.0, 24, (-1.0, 1.0), 0.95) == pytest.approx((1 - 2 * 0.14247, 1.0), abs=1e-5)
    assert exact_bound(0.5, 1, (0.0, 1.0), 0.95) == pytest.approx((0.0125, 0.9875))


def test_no_discordant_task_and_no_flip_are_exact_bounds_not_points() -> None:
    sample = cluster_by_task(TASKS, REPEATS, np.repeat([1.0, 0.0, 1.0, 0.0], 3))
    comparison = paired_comparison(sample, sample, PARAMS)
    assert comparison.difference.status is EstimateStatus.EXACT_BOUND
    assert comparison.difference.high == pytest.approx(0.6024, abs=1e-4)
    flips = flip_rates({"s": sample}, PARAMS)["s"]
    assert (flips.estimate, flips.status) == (0.0, EstimateStatus.EXACT_BOUND)


def test_empty_condition_is_no_data_not_nan() -> None:
    empty = cluster_by_task([], [], [])
    results = [
        bootstrap_mean(empty, PARAMS),
        paired_comparison(empty, empty, PARAMS).difference,
        bootstrap_relative_reduction(pair_by_task_repeat(empty, empty), PARAMS),
        flip_rates({"e": empty}, PARAMS)["e"],
        pass_hat_k(empty, 1, PARAMS).unbiased,
    ]
    for result in results:
        assert result.status is EstimateStatus.NO_DATA
        assert (result.estimate, result.low, result.high) == (None, None, None)
        assert result.format() == "no data"
        assert result.n_episodes == 0


def test_condition_with_only_missing_values_is_no_data_and_counts_them() -> None:
    result = bootstrap_mean(cluster_by_task(["a", "b"], [0, 0], [None, None]), PARAMS)
    assert (result.status, result.n_missing) == (EstimateStatus.NO_DATA, 2)


def test_zero_baseline_makes_relative_reduction_undefined() -> None:
    zeros = cluster_by_task(TASKS, REPEATS, np.zeros(12))
    result = bootstrap_relative_reduction(pair_by_task_repeat(zeros, zeros), PARAMS)
    assert result.status is EstimateStatus.UNDEFINED
    assert result.format() == "undefined"
    assert "zero" in result.note


def test_resamples_with_a_zero_baseline_are_left_out_and_counted() -> None:
    baseline = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 10.0, 12.0, 8.0])
    strategy = baseline / 2 + np.arange(12) % 2
    tasks = cluster_by_task(TASKS, REPEATS, strategy)
    result = bootstrap_relative_reduction(pair_by_task_repeat(tasks, cluster_by_task(TASKS, REPEATS, baseline)), PARAMS)
    assert result.status is EstimateStatus.OK
    assert "resamples had a zero denominator" in result.note
    assert result.low is not None and result.high is not None and np.isfinite([result.low, result.high]).all()


def test_all_results_serialise_to_json_without_nan() -> None:
    degenerate = [np.ones(12), np.zeros(12), np.arange(12) % 2]
    for values in degenerate:
        sample = cluster_by_task(TASKS, REPEATS, values)
        paired = pair_by_task_repeat(sample, sample)
        models = [
            bootstrap_mean(sample, PARAMS),
            bootstrap_rate(sample, PARAMS),
            paired_comparison(sample, sample, PARAMS),
            pass_hat_k(sample, 2, PARAMS),
            pair_table(paired),
        ]
        for model in models:
            text = model.model_dump_json()
            assert "NaN" not in text and "Infinity" not in text
            json.loads(text)


def test_an_estimate_cannot_hold_nan() -> None:
    with pytest.raises(ValidationError):
        Estimate(
            estimate=float("nan"),
            low=0.0,
            high=1.0,
            confidence=0.95,
            n_tasks=2,
            n_episodes=2,
            status=EstimateStatus.OK,
        )


def test_a_value_that_rounds_to_zero_prints_without_a_sign() -> None:
    from contextdelta.stats import Estimate

    found = Estimate(
        estimate=0.12, low=-0.002, high=0.22, confidence=0.95, n_tasks=3, n_episodes=6, status=EstimateStatus.OK
    )
    assert found.format(digits=0, scale=100.0, suffix="%") == "12% [0%, 22%]"
    assert found.format(digits=3) == "0.120 [-0.002, 0.220]"
