"""pass^k against brute-force enumeration of repeat subsets."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from contextdelta.stats import AnalysisParams, EstimateStatus, cluster_by_task, pass_hat_k, pass_hat_k_many

PARAMS = AnalysisParams(resamples=2000, seed=3)


def random_outcomes(seed: int) -> tuple[list[str], list[int], list[int]]:
    """20 tasks with 1 to 5 repeats (non-contiguous labels), given in shuffled order."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(20):
        labels = sorted(rng.choice(10, size=int(rng.integers(1, 6)), replace=False).tolist())
        p = rng.uniform(0.0, 1.0)
        rows += [(f"task{t:02d}", label, int(rng.random() < p)) for label in labels]
    order = rng.permutation(len(rows))
    return [rows[i][0] for i in order], [rows[i][1] for i in order], [rows[i][2] for i in order]


def brute_force(tasks: list[str], repeats: list[int], outcomes: list[int], k: int) -> tuple[float, float, int]:
    """(unbiased, all_pass, excluded) by enumerating every k-subset of every task's repeats."""
    by_task: dict[str, list[tuple[int, int]]] = {}
    for t, r, o in zip(tasks, repeats, outcomes, strict=True):
        by_task.setdefault(t, []).append((r, o))
    unbiased, all_pass, excluded = [], [], 0
    for episodes in by_task.values():
        ordered = [o for _, o in sorted(episodes)]
        if len(ordered) < k:
            excluded += 1
            continue
        subsets = list(combinations(ordered, k))
        unbiased.append(sum(all(s) for s in subsets) / len(subsets))
        all_pass.append(float(all(ordered[:k])))
    return float(np.mean(unbiased)), float(np.mean(all_pass)), excluded


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pass_hat_k_matches_brute_force_enumeration(seed: int) -> None:
    tasks, repeats, outcomes = random_outcomes(seed)
    sample = cluster_by_task(tasks, repeats, outcomes)
    for k in range(1, 6):
        unbiased, all_pass, excluded = brute_force(tasks, repeats, outcomes, k)
        result = pass_hat_k(sample, k, PARAMS)
        assert result.k == k
        assert result.unbiased.estimate == pytest.approx(unbiased, abs=1e-12)
        assert result.all_pass.estimate == pytest.approx(all_pass, abs=1e-12)
        assert result.n_tasks_excluded == excluded
        assert result.unbiased.n_tasks == 20 - excluded


def test_pass_hat_1_is_the_mean_of_task_success_rates() -> None:
    tasks, repeats, outcomes = random_outcomes(4)
    sample = cluster_by_task(tasks, repeats, outcomes)
    task_rates = sample.values.sum(axis=1) / sample.counts
    assert pass_hat_k(sample, 1, PARAMS).unbiased.estimate == pytest.approx(task_rates.mean())


def test_interval_resamples_tasks_only_and_matches_batch() -> None:
    tasks, repeats, outcomes = random_outcomes(5)
    sample = cluster_by_task(tasks, repeats, outcomes)
    many = pass_hat_k_many({"x": sample, "y": sample}, ks=[1, 2, 3], params=PARAMS)
    for k in (1, 2, 3):
        single = pass_hat_k(sample, k, PARAMS)
        assert many["x"][k] == single == many["y"][k]
        low, high = single.unbiased.low, single.unbiased.high
        assert low is not None and high is not None and single.unbiased.estimate is not None
        assert 0.0 <= low <= single.unbiased.estimate <= high <= 1.0
        assert single.unbiased.status is EstimateStatus.OK


def test_no_task_with_k_repeats_is_no_data() -> None:
    sample = cluster_by_task(["a", "a", "b"], [0, 1, 0], [1, 1, 0])
    result = pass_hat_k(sample, 3, PARAMS)
    assert result.n_tasks_excluded == 2
    for estimate in (result.unbiased, result.all_pass):
        assert estimate.status is EstimateStatus.NO_DATA
        assert (estimate.estimate, estimate.low, estimate.high) == (None, None, None)
        assert "no task has 3 repeats" in estimate.note
        assert estimate.format() == "no data"


def test_all_pass_gives_one_with_the_exact_bound_over_tasks() -> None:
    sample = cluster_by_task(np.repeat(["a", "b", "c"], 3), np.tile([0, 1, 2], 3), np.ones(9))
    result = pass_hat_k(sample, 3, PARAMS)
    assert (result.unbiased.estimate, result.unbiased.high) == (1.0, 1.0)
    assert result.unbiased.low == pytest.approx(0.025 ** (1 / 3))  # Clopper-Pearson for 3 of 3 tasks
    assert result.all_pass.status is EstimateStatus.EXACT_BOUND


@pytest.mark.parametrize(("values", "ks"), [([0.5, 1.0], [1]), ([1.0, 0.0], [0])])
def test_invalid_input_is_refused(values: list[float], ks: list[int]) -> None:
    sample = cluster_by_task(["a", "a"], [0, 1], values)
    with pytest.raises(ValueError):
        pass_hat_k_many({"s": sample}, ks=ks, params=PARAMS)
