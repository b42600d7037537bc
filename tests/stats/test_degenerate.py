"""Degenerate data: all pass, all fail, one task, empty condition, zero baseline. Finite and documented."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from contextdelta.stats import (
    AnalysisParams,
    Estimate,
    EstimateStatus,
    bootstrap_difference,
    bootstrap_mean,
    bootstrap_relative_reduction,
    cluster_by_task,
    mcnemar_exact,
    pair_by_task_repeat,
    pass_hat_k,
)

PARAMS = AnalysisParams(resamples=500, seed=0)
TASKS = np.repeat(["a", "b", "c", "d"], 3)
REPEATS = np.tile([0, 1, 2], 4)


@pytest.mark.parametrize("value", [1.0, 0.0, 0.1])
def test_constant_outcome_gives_a_zero_width_interval_at_that_value(value: float) -> None:
    result = bootstrap_mean(cluster_by_task(TASKS, REPEATS, np.full(12, value)), PARAMS)
    assert (result.low, result.high) == (result.estimate, result.estimate)
    assert result.estimate == pytest.approx(value)
    assert result.status is EstimateStatus.CONSTANT
    assert result.format() == f"{value:.3f} [{value:.3f}, {value:.3f}]"


def test_one_task_collapses_the_interval_and_says_so() -> None:
    result = bootstrap_mean(cluster_by_task(["a", "a", "a"], [0, 1, 2], [1, 0, 1]), PARAMS)
    assert result.estimate == pytest.approx(2 / 3)
    assert result.low == result.high == result.estimate
    assert (result.status, result.n_tasks, result.n_episodes) == (EstimateStatus.SINGLE_TASK, 1, 3)
    assert "one task" in result.note


def test_empty_condition_is_no_data_not_nan() -> None:
    empty = cluster_by_task([], [], [])
    results = [
        bootstrap_mean(empty, PARAMS),
        bootstrap_difference(pair_by_task_repeat(empty, empty), PARAMS),
        bootstrap_relative_reduction(pair_by_task_repeat(empty, empty), PARAMS),
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
            bootstrap_difference(paired, PARAMS),
            pass_hat_k(sample, 2, PARAMS),
            mcnemar_exact(paired),
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
