"""pass^k against brute-force enumeration of repeat subsets."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy.stats import beta, binom, binomtest

from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    EstimateStatus,
    cluster_by_task,
    flip_rates,
    pass_hat_k,
    pass_hat_k_many,
)

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


def skewed_sample() -> ClusteredSample:
    """20 tasks of 3 repeats: 4 pass all 3, 6 pass 2 of 3, 10 pass none (pass^3 = 4/20; pass^2 unbiased: 6/20)."""
    rows = [[1, 1, 1]] * 4 + [[1, 1, 0]] * 6 + [[0, 0, 0]] * 10
    return cluster_by_task(
        np.repeat([f"t{i:02d}" for i in range(20)], 3), np.tile([0, 1, 2], 20), np.asarray(rows).ravel()
    )


def test_pass_k_of_a_share_of_tasks_is_the_clopper_pearson_interval_over_tasks() -> None:
    """pass^3 all-pass is 4 of 20 tasks: its interval is the exact binomial one for 4 of 20 (the ends where
    P(X >= 4) and P(X <= 4) are 2.5%), not a bootstrap's percentiles, and it has no Monte-Carlo error."""
    found = pass_hat_k(skewed_sample(), 3, PARAMS).all_pass
    assert found.estimate == pytest.approx(0.2) and found.status is EstimateStatus.OK
    assert found.low is not None and found.high is not None and found.mc_se is None
    assert binom.sf(3, 20, found.low) == pytest.approx(0.025, abs=1e-9)
    assert binom.cdf(4, 20, found.high) == pytest.approx(0.025, abs=1e-9)
    exact = binomtest(4, 20).proportion_ci(confidence_level=0.95, method="exact")
    assert (found.low, found.high) == pytest.approx((exact.low, exact.high), abs=1e-12)
    assert (round(found.low, 4), round(found.high, 4)) == (0.0573, 0.4366)


def test_the_unbiased_pass_k_takes_its_fractional_count_over_tasks() -> None:
    """pass^2 unbiased: 4 tasks at 1, 6 at C(2,2)/C(3,2) = 1/3, 10 at 0, so 6/20 = 0.3 and a count of 6 of 20
    tasks: the Clopper-Pearson interval of 6 of 20; the flip rate, 6 of 20 tasks whose repeats disagree, alike."""
    sample = skewed_sample()
    found = pass_hat_k(sample, 2, PARAMS).unbiased
    assert found.estimate == pytest.approx(0.3)
    exact = binomtest(6, 20).proportion_ci(confidence_level=0.95, method="exact")
    assert (found.low, found.high) == pytest.approx((exact.low, exact.high), abs=1e-9)
    flip = flip_rates({0: sample}, PARAMS)[0]
    assert (flip.estimate, flip.low, flip.high) == pytest.approx((0.3, exact.low, exact.high), abs=1e-9)
    # a fraction of a count: 10 tasks at 1/3 and 10 at 0 give 10/3 of 20, between the intervals of 3 and 4 of 20
    thirds = cluster_by_task(
        np.repeat([f"t{i:02d}" for i in range(20)], 3),
        np.tile([0, 1, 2], 20),
        np.asarray([[1, 1, 0]] * 10 + [[0, 0, 0]] * 10).ravel(),
    )
    fraction = pass_hat_k(thirds, 2, PARAMS).unbiased
    assert fraction.estimate == pytest.approx(1 / 6)
    assert (fraction.low, fraction.high) == pytest.approx(
        (beta.ppf(0.025, 10 / 3, 20 - 10 / 3 + 1), beta.ppf(0.975, 10 / 3 + 1, 20 - 10 / 3)), abs=1e-12
    )
    three, four = (binomtest(c, 20).proportion_ci(method="exact") for c in (3, 4))
    assert fraction.low is not None and fraction.high is not None
    assert three.low < fraction.low < four.low and three.high < fraction.high < four.high


def test_the_bootstrap_method_of_reports_written_before_still_gives_the_bootstrap_interval() -> None:
    """`share_interval="bootstrap"` (reports written by 0.13.0 and earlier): the expanded-percentile task bootstrap,
    with its Monte-Carlo error, narrower here than the Clopper-Pearson interval and lower at its top (the skew of a
    share of 4 in 20 that the percentiles of the tasks seen miss)."""
    old = PARAMS.model_copy(update={"share_interval": "bootstrap"})
    before = pass_hat_k(skewed_sample(), 3, old).all_pass
    now = pass_hat_k(skewed_sample(), 3, PARAMS).all_pass
    assert before.mc_se is not None and before.status is EstimateStatus.OK
    assert before.estimate == now.estimate
    assert before.low is not None and before.high is not None and now.low is not None and now.high is not None
    assert before.high < now.high and before.low != now.low
    assert before.high - before.low < now.high - now.low
