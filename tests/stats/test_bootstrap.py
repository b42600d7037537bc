"""Hierarchical cluster bootstrap: cross-checked against scipy and a naive two-stage loop."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

import contextdelta.stats._bootstrap as engine
from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    EstimateStatus,
    bootstrap_mean,
    bootstrap_means,
    bootstrap_rates,
    bootstrap_relative_reduction,
    cluster_by_task,
    pair_by_task_repeat,
    paired_comparison,
    paired_comparisons,
)

PARAMS = AnalysisParams(resamples=4000, seed=5)


def one_repeat(values: np.ndarray) -> ClusteredSample:
    return cluster_by_task([f"t{i:03d}" for i in range(values.size)], np.zeros(values.size, dtype=int), values)


def ragged(seed: int, n_tasks: int = 12, repeats: int | None = None) -> tuple[list[str], list[int], np.ndarray]:
    """Tasks with 1 to 4 repeats (or exactly ``repeats``), task-level effects, real values; in shuffled order."""
    rng = np.random.default_rng(seed)
    rows = [(f"t{t:02d}", r) for t in range(n_tasks) for r in range(repeats or int(rng.integers(1, 5)))]
    # Within-task noise dominates, so skipping the repeat stage would visibly narrow the interval.
    effect = rng.normal(0.0, 0.3, n_tasks)
    values = np.array([effect[int(t[1:])] + rng.normal(0.0, 1.0) for t, _ in rows])
    order = rng.permutation(len(rows))
    return [rows[i][0] for i in order], [rows[i][1] for i in order], values[order]


def test_point_estimate_pools_episodes() -> None:
    sample = cluster_by_task(["a", "a", "a", "b"], [0, 1, 2, 0], [1, 1, 0, 0])
    assert bootstrap_mean(sample, PARAMS).estimate == pytest.approx(0.5)


@pytest.mark.parametrize("kind", ["real", "binary"])
def test_one_repeat_per_task_matches_scipy_percentile_bootstrap(kind: str) -> None:
    rng = np.random.default_rng(42)
    values = rng.normal(3.0, 2.0, 40) if kind == "real" else (rng.random(40) < 0.35).astype(float)
    ours = bootstrap_mean(one_repeat(values), PARAMS)
    theirs = scipy_stats.bootstrap(
        (values,), np.mean, n_resamples=PARAMS.resamples, method="percentile", rng=np.random.default_rng(1)
    ).confidence_interval
    # Monte Carlo sd of a 2.5% percentile endpoint with 4000 resamples is about 0.04 standard errors.
    tolerance = 0.25 * values.std(ddof=1) / np.sqrt(values.size)
    assert ours.estimate == pytest.approx(values.mean())
    assert ours.low == pytest.approx(theirs.low, abs=tolerance)
    assert ours.high == pytest.approx(theirs.high, abs=tolerance)
    assert ours.status is EstimateStatus.OK


def naive_hierarchical_interval(
    tasks: list[str], repeats: list[int], values: np.ndarray, resamples: int, seed: int, levels: tuple[float, float]
) -> tuple[float, float]:
    """Two-stage bootstrap written as loops: tasks with replacement, then each task's repeats with replacement;
    the interval between the ``levels`` percentiles of the resampled means."""
    by_task: dict[str, list[float]] = {}
    for t, _, v in sorted(zip(tasks, repeats, values, strict=True)):
        by_task.setdefault(t, []).append(float(v))
    groups = [np.array(v) for v in by_task.values()]
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(resamples):
        drawn = [groups[i] for i in rng.integers(0, len(groups), len(groups))]
        episodes = np.concatenate([g[rng.integers(0, g.size, g.size)] for g in drawn])
        means.append(episodes.mean())
    low, high = np.percentile(means, list(levels))
    return float(low), float(high)


@pytest.mark.slow
@pytest.mark.parametrize("repeats", [None, 3], ids=["ragged", "balanced"])
def test_hierarchical_bootstrap_matches_a_naive_two_stage_loop(repeats: int | None) -> None:
    tasks, repeats_, values = ragged(3, repeats=repeats)
    ours = bootstrap_mean(cluster_by_task(tasks, repeats_, values), PARAMS)
    levels = PARAMS.cluster_percentiles(len(set(tasks)))  # expanded for the tasks: below 2.5% and above 97.5%
    assert levels[0] < 2.5 < 97.5 < levels[1]
    low, high = naive_hierarchical_interval(tasks, repeats_, values, PARAMS.resamples, seed=99, levels=levels)
    task_means = [values[[t == name for t in tasks]].mean() for name in sorted(set(tasks))]
    tolerance = 0.25 * np.std(task_means, ddof=1) / np.sqrt(len(task_means))
    assert ours.low == pytest.approx(low, abs=tolerance)
    assert ours.high == pytest.approx(high, abs=tolerance)


def test_every_resample_draws_exactly_the_sample_size_in_episodes() -> None:
    tasks, repeats, values = ragged(4)
    sample = cluster_by_task(tasks, repeats, values)
    ones = engine._Columns(sample.counts, sample.mask.astype(float)[:, :, None])
    ((sums, episodes),) = engine._run([ones], AnalysisParams(resamples=500, seed=1))
    np.testing.assert_array_equal(sums[:, 0], episodes)
    # Ragged: the resampled number of episodes varies with which tasks were drawn, and averages n.
    assert episodes.min() < episodes.max()
    assert episodes.mean() == pytest.approx(sample.n_episodes, rel=0.05)


def test_chunking_over_resamples_does_not_change_the_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    tasks, repeats, values = ragged(5)
    sample = cluster_by_task(tasks, repeats, values)
    whole = bootstrap_mean(sample, PARAMS)
    monkeypatch.setattr(engine, "_CELL_BUDGET", 7 * sample.n_tasks * sample.values.shape[1] + 3)
    chunked = bootstrap_mean(sample, PARAMS)  # chunks of 7 resamples, last one shorter
    assert chunked != whole
    task_means = [values[[t == name for t in tasks]].mean() for name in sorted(set(tasks))]
    tolerance = 0.25 * np.std(task_means, ddof=1) / np.sqrt(len(task_means))
    assert chunked.low == pytest.approx(whole.low, abs=tolerance)
    assert chunked.high == pytest.approx(whole.high, abs=tolerance)


def test_same_seed_gives_identical_intervals_and_another_seed_does_not() -> None:
    tasks, repeats, values = ragged(6)
    sample = cluster_by_task(tasks, repeats, values)
    first = bootstrap_mean(sample, PARAMS)
    again = bootstrap_mean(cluster_by_task(tasks, repeats, values), AnalysisParams(resamples=4000, seed=5))
    other = bootstrap_mean(sample, AnalysisParams(resamples=4000, seed=6))
    assert first == again
    assert (first.low, first.high) != (other.low, other.high)


def test_batch_results_equal_single_results() -> None:
    rng = np.random.default_rng(8)
    tasks = np.repeat([f"t{i}" for i in range(10)], 3)
    repeats = np.tile(np.arange(3), 10)
    samples = {name: cluster_by_task(tasks, repeats, rng.random(30) < p) for name, p in [("a", 0.3), ("b", 0.7)]}
    samples["ragged"] = cluster_by_task(tasks[:-1], repeats[:-1], rng.random(29) < 0.5)
    batch = bootstrap_means(samples, PARAMS)
    assert batch == {name: bootstrap_mean(sample, PARAMS) for name, sample in samples.items()}
    assert bootstrap_rates(samples, PARAMS) == {
        name: bootstrap_rates({name: sample}, PARAMS)[name] for name, sample in samples.items()
    }
    pairs = {"ab": (samples["a"], samples["b"]), "ba": (samples["b"], samples["a"])}
    found = paired_comparisons(pairs, PARAMS)
    assert found == {name: paired_comparison(a, b, PARAMS) for name, (a, b) in pairs.items()}
    ab_low, ba_high = found["ab"].difference.low, found["ba"].difference.high
    assert ab_low is not None and ba_high is not None
    assert ab_low == pytest.approx(-ba_high)


def test_paired_difference_is_the_mean_of_task_differences_resampling_tasks_only() -> None:
    """The effect is task-level: per task, mean of a minus mean of b over its repeats; tasks are resampled whole."""
    rng = np.random.default_rng(10)
    tasks = np.repeat([f"t{i:02d}" for i in range(15)], 3)
    repeats = np.tile(np.arange(3), 15)
    a = (rng.random(45) < np.repeat(rng.random(15), 3)).astype(float)
    b = (rng.random(45) < 0.4).astype(float)
    result = paired_comparison(cluster_by_task(tasks, repeats, a), cluster_by_task(tasks, repeats, b), PARAMS)
    task_differences = a.reshape(15, 3).mean(axis=1) - b.reshape(15, 3).mean(axis=1)
    assert result.difference.estimate == pytest.approx(task_differences.mean())
    # The expanded percentile interval: scipy's percentile bootstrap at the level whose tails are the expanded ones.
    tail = scipy_stats.norm.cdf(-np.sqrt(15 / 14) * scipy_stats.t.ppf(0.975, 14))
    assert tail == pytest.approx(0.01321, abs=1e-5)
    theirs = scipy_stats.bootstrap(
        (task_differences,),
        np.mean,
        n_resamples=PARAMS.resamples,
        method="percentile",
        confidence_level=1 - 2 * tail,
        rng=np.random.default_rng(4),
    ).confidence_interval
    tolerance = 0.1 * task_differences.std(ddof=1) / np.sqrt(15)
    assert result.difference.low == pytest.approx(theirs.low, abs=tolerance)
    assert result.difference.high == pytest.approx(theirs.high, abs=tolerance)
    assert (result.difference.n_tasks, result.difference.n_episodes) == (15, 90)
    plain = paired_comparison(
        cluster_by_task(tasks, repeats, a),
        cluster_by_task(tasks, repeats, b),
        PARAMS.model_copy(update={"task_interval": "percentile"}),
    ).difference
    theirs = scipy_stats.bootstrap(
        (task_differences,), np.mean, n_resamples=PARAMS.resamples, method="percentile", rng=np.random.default_rng(4)
    ).confidence_interval
    assert plain.low == pytest.approx(theirs.low, abs=tolerance)
    assert plain.high == pytest.approx(theirs.high, abs=tolerance)
    assert None not in (result.difference.low, result.difference.high, plain.low, plain.high)
    assert result.difference.low < plain.low and plain.high < result.difference.high  # type: ignore[operator]


@pytest.mark.parametrize(
    ("n_tasks", "tail"), [(2, 1.695e-70), (3, 6.834e-6), (24, 1.7294), (96, 2.2985), (10_000, 2.4980)]
)
def test_task_level_intervals_take_the_expanded_percentile_levels(n_tasks: int, tail: float) -> None:
    """Hesterberg's expanded percentile levels, Phi(-sqrt(n/(n-1)) t_{n-1, 0.975}), approach 2.5% as n grows."""
    low, high = AnalysisParams().task_percentiles(n_tasks)
    assert low == pytest.approx(tail, rel=1e-3) and high == pytest.approx(100 - tail, rel=1e-6)
    plain = AnalysisParams(task_interval="percentile")
    assert plain.task_percentiles(n_tasks) == plain.percentiles == pytest.approx((2.5, 97.5))
    assert AnalysisParams().task_percentiles(1) == pytest.approx((2.5, 97.5))  # one task never reaches a bootstrap


def test_paired_difference_of_identical_conditions_is_zero_with_an_exact_bound() -> None:
    tasks, repeats, values = ragged(9)
    sample = cluster_by_task(tasks, repeats, (values > 0).astype(float))
    result = paired_comparison(sample, sample, PARAMS)
    difference = result.difference
    assert difference.estimate == 0.0 and difference.status is EstimateStatus.EXACT_BOUND
    assert difference.low is not None and difference.high is not None
    assert difference.low == pytest.approx(-difference.high) and difference.high > 0.0
    assert not result.test.testable


def test_paired_resampling_uses_the_same_indices_for_both_conditions() -> None:
    rng = np.random.default_rng(10)
    tasks = np.repeat([f"t{i}" for i in range(15)], 3)
    repeats = np.tile(np.arange(3), 15)
    paired = pair_by_task_repeat(
        cluster_by_task(tasks, repeats, rng.random(45)), cluster_by_task(tasks, repeats, rng.random(45))
    )
    jobs = [
        engine._Columns(paired.counts, paired.a[:, :, None]),
        engine._Columns(paired.counts, paired.b[:, :, None]),
        engine._Columns(paired.counts, (paired.a - paired.b)[:, :, None]),
    ]
    (sum_a, _), (sum_b, _), (sum_delta, _) = engine._run(jobs, PARAMS)
    np.testing.assert_allclose(sum_delta, sum_a - sum_b, atol=1e-9)


def test_interval_ends_carry_their_monte_carlo_error_which_shrinks_with_resamples() -> None:
    tasks, repeats, values = ragged(11, n_tasks=24, repeats=3)
    sample = cluster_by_task(tasks, repeats, values)
    few, many = (bootstrap_mean(sample, AnalysisParams(resamples=r, seed=1)) for r in (1_000, 16_000))
    assert few.mc_se is not None and many.mc_se is not None
    # The order-statistic estimate scales like 1 / sqrt(resamples): 16x the resamples, about a quarter the error.
    assert 0.1 < many.mc_se / few.mc_se < 0.5
    # And it is of the size of the seed-to-seed spread of an interval end.
    ends = [bootstrap_mean(sample, AnalysisParams(resamples=1_000, seed=s)).low for s in range(40)]
    assert 0.5 < few.mc_se / float(np.std([e for e in ends if e is not None], ddof=1)) < 2.0


def test_relative_reduction_matches_scipy_paired_bootstrap_of_the_ratio() -> None:
    rng = np.random.default_rng(13)
    baseline = rng.gamma(8.0, 1000.0, 30).round()
    strategy = (baseline * rng.uniform(0.3, 0.7, 30)).round()
    ids = [f"t{i:02d}" for i in range(30)]
    paired = pair_by_task_repeat(cluster_by_task(ids, [0] * 30, strategy), cluster_by_task(ids, [0] * 30, baseline))
    ours = bootstrap_relative_reduction(paired, PARAMS)
    theirs = scipy_stats.bootstrap(
        (strategy, baseline),
        lambda x, y, axis: 1.0 - np.sum(x, axis=axis) / np.sum(y, axis=axis),
        paired=True,
        n_resamples=PARAMS.resamples,
        method="percentile",
        rng=np.random.default_rng(3),
    )
    assert ours.estimate == pytest.approx(1.0 - strategy.sum() / baseline.sum())
    tolerance = 0.25 * theirs.standard_error
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=tolerance)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=tolerance)
    assert ours.format(digits=1, scale=100, suffix="%").count("%") == 3


def test_relative_reduction_of_a_proportional_strategy_is_exact() -> None:
    tasks = np.repeat(["a", "b", "c"], 2)
    repeats = np.tile([0, 1], 3)
    baseline = np.array([1000.0, 2000.0, 1500.0, 500.0, 800.0, 1200.0])
    paired = pair_by_task_repeat(
        cluster_by_task(tasks, repeats, baseline / 4), cluster_by_task(tasks, repeats, baseline)
    )
    result = bootstrap_relative_reduction(paired, PARAMS)
    assert (result.estimate, result.low, result.high) == (0.75, None, None)  # no interval, not [0.75, 0.75]
    assert result.status is EstimateStatus.CONSTANT
