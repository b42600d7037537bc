"""Tasks that share a story (one family story told at several horizons) are one unit of inference: behaviour tests
that fail if the story labels were ignored, and that the labels change nothing where every task is its own story.

References are computed here by hand: the story-level sign-flip p-value by enumerating the 2^S sign patterns of the
story sums (as exact fractions), the task-level bootstrap of the distinct tasks a story copies, the Clopper-Pearson
bound of `zero_of_n_upper` with n = stories.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest
from scipy.stats import permutation_test

from contextdelta.stats import (
    AnalysisParams,
    ClusteredSample,
    Estimate,
    EstimateStatus,
    SignFlipMethod,
    StoryPilotModel,
    TaskPairs,
    bootstrap_means,
    bootstrap_rates,
    bootstrap_relative_reductions,
    cluster_by_task,
    flip_rates,
    pair_by_task,
    pair_by_task_repeat,
    paired_comparison,
    pass_hat_k,
    pilot_design,
    sign_flip_test,
    split_by_condition,
    unit_differences,
)
from contextdelta.stats._bootstrap import means_with_replicates
from contextdelta.stats._exact import zero_of_n_upper

PARAMS = AnalysisParams(resamples=2000, seed=5)


def long_form(
    outcomes: npt.NDArray[np.float64], stories: list[str] | None = None
) -> tuple[list[str], list[int], list[float], list[str] | None]:
    """Per-episode (task, repeat, value, story) lists of a ``(tasks, repeats)`` matrix; task i is ``t{i:03d}``."""
    n_tasks, repeats = outcomes.shape
    tasks = [f"t{i:03d}" for i in range(n_tasks) for _ in range(repeats)]
    reps = [j for _ in range(n_tasks) for j in range(repeats)]
    labels = None if stories is None else [stories[i] for i in range(n_tasks) for _ in range(repeats)]
    return tasks, reps, [float(v) for v in outcomes.ravel()], labels


def sample(outcomes: npt.NDArray[np.float64], stories: list[str] | None = None) -> ClusteredSample:
    tasks, reps, values, labels = long_form(outcomes, stories)
    return cluster_by_task(tasks, reps, values, labels)


def story_labels(n_stories: int, size: int) -> list[str]:
    """Task i belongs to story ``i // size`` (the story's tasks are adjacent rows)."""
    return [f"s{i // size:02d}" for i in range(n_stories * size)]


def random_outcomes(seed: int, n_tasks: int, repeats: int) -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(seed)
    rates = rng.random(n_tasks)[:, None]
    return (rng.random((n_tasks, repeats)) < rates).astype(np.float64)


def ends(estimate: Estimate) -> tuple[float, float]:
    assert estimate.low is not None and estimate.high is not None
    return estimate.low, estimate.high


def width(estimate: Estimate) -> float:
    low, high = ends(estimate)
    return high - low


# --- no shared story: bit for bit the task-level analysis ---------------------------------------------------------


@pytest.mark.parametrize("own_labels", [False, True], ids=["clusters=None", "one-story-per-task"])
def test_without_shared_stories_every_statistic_is_the_task_level_one(own_labels: bool) -> None:
    """clusters=None, or a distinct label per task, give exactly (==) the numbers of the call without labels."""
    n_tasks, repeats = 14, 3
    a_out, b_out = random_outcomes(1, n_tasks, repeats), random_outcomes(2, n_tasks, repeats)
    labels = [f"story-{i}" for i in range(n_tasks)] if own_labels else None
    plain_a, plain_b = sample(a_out), sample(b_out)
    a, b = sample(a_out, labels), sample(b_out, labels)
    assert a.clusters is None and b.clusters is None
    assert bootstrap_rates({0: a, 1: b}, PARAMS) == bootstrap_rates({0: plain_a, 1: plain_b}, PARAMS)
    assert paired_comparison(a, b, PARAMS) == paired_comparison(plain_a, plain_b, PARAMS)
    for k in (1, 2, 3):
        assert pass_hat_k(a, k, PARAMS) == pass_hat_k(plain_a, k, PARAMS)
    assert flip_rates({0: a, 1: b}, PARAMS) == flip_rates({0: plain_a, 1: plain_b}, PARAMS)
    pairs = pair_by_task(a, b)
    assert pairs.clusters is None
    assert sign_flip_test(pairs) == sign_flip_test(pair_by_task(plain_a, plain_b))
    model, units, per_unit = pilot_design(pairs, repeats)
    assert (units, per_unit) == (n_tasks, repeats)
    assert np.array_equal(model.rate_a, pairs.mean_a) and np.array_equal(model.rate_b, pairs.mean_b)


def test_shared_stories_change_the_intervals() -> None:
    """The guard of the test above: with stories shared, the same outcomes give other intervals (labels are used)."""
    a_out, b_out = random_outcomes(1, 12, 3), random_outcomes(2, 12, 3)
    labels = story_labels(4, 3)
    assert bootstrap_rates({0: sample(a_out, labels)}, PARAMS) != bootstrap_rates({0: sample(a_out)}, PARAMS)
    clustered = paired_comparison(sample(a_out, labels), sample(b_out, labels), PARAMS)
    plain = paired_comparison(sample(a_out), sample(b_out), PARAMS)
    assert clustered.difference.estimate == plain.difference.estimate  # the effect is still the mean over tasks
    assert ends(clustered.difference) != ends(plain.difference)
    assert clustered.test.n_tasks == 4 and plain.test.n_tasks == 12


# --- the sign-flip test over stories ------------------------------------------------------------------------------


def task_fractions(pairs: TaskPairs) -> list[Fraction]:
    """Each task's difference of means as an exact fraction."""
    return [
        Fraction(int(sa), int(na)) - Fraction(int(sb), int(nb))
        for sa, na, sb, nb in zip(pairs.sum_a, pairs.n_a, pairs.sum_b, pairs.n_b, strict=True)
    ]


def story_sums(pairs: TaskPairs) -> dict[str, Fraction]:
    assert pairs.clusters is not None
    sums: dict[str, Fraction] = {}
    for story, d in zip(pairs.clusters, task_fractions(pairs), strict=True):
        sums[story] = sums.get(story, Fraction(0)) + d
    return sums


def enumerated_pvalue(units: list[Fraction]) -> Fraction:
    """Share of the 2^S sign patterns of the unit sums whose |total| is at least the observed |total| (exact)."""
    observed = abs(sum(units, Fraction(0)))
    patterns = list(itertools.product((1, -1), repeat=len(units)))
    hits = sum(
        abs(sum((s * d for s, d in zip(signs, units, strict=True)), Fraction(0))) >= observed for signs in patterns
    )
    return Fraction(hits, len(patterns))


def paired_outcomes(
    differences: list[tuple[int, int]], repeats: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Outcomes of a and b with ``passes_a`` and ``passes_b`` of ``repeats`` per task (in that order)."""
    slots = np.arange(repeats)
    a = np.array([(slots < pa).astype(float) for pa, _ in differences])
    b = np.array([(slots < pb).astype(float) for _, pb in differences])
    return a, b


def test_three_stories_of_three_tasks_match_the_enumeration_of_story_sign_patterns() -> None:
    # two repeats: task differences on the 1/2 grid; stories sum to +5/2, +3/2, -1/2 (all discordant)
    passes = [(2, 0), (2, 0), (1, 0), (2, 0), (1, 0), (1, 1), (0, 1), (1, 1), (0, 0)]
    a_out, b_out = paired_outcomes(passes, repeats=2)
    labels = story_labels(3, 3)
    a, b = sample(a_out, labels), sample(b_out, labels)
    pairs = pair_by_task(a, b)
    sums = story_sums(pairs)
    assert list(sums.values()) == [Fraction(5, 2), Fraction(3, 2), Fraction(-1, 2)]

    test = sign_flip_test(pairs)
    expected = enumerated_pvalue(list(sums.values()))
    assert expected == Fraction(1, 2)  # |+-5/2 +-3/2 +-1/2| >= 7/2 in 4 of 8 patterns
    assert test.method is SignFlipMethod.EXACT
    assert test.pvalue == pytest.approx(float(expected), rel=1e-12)
    # scipy's enumeration on the story sums agrees
    story_d = np.array([float(d) for d in sums.values()])
    reference = permutation_test(
        (story_d,),
        lambda x, axis: np.sum(x, axis=axis),
        permutation_type="samples",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert test.pvalue == pytest.approx(float(reference.pvalue), rel=1e-12)
    # counts are of stories; the statistic is still the sum over tasks of the task differences
    assert (test.n_tasks, test.n_discordant, test.n_positive, test.n_negative) == (3, 3, 2, 1)
    assert test.statistic == pytest.approx(float(sum(task_fractions(pairs), Fraction(0))), abs=1e-12)
    assert test.statistic == pytest.approx(float(pairs.differences.sum()), abs=1e-12)
    units, unit_d = unit_differences(pairs)
    assert units == ("s00", "s01", "s02")
    assert unit_d.tolist() == [2.5, 1.5, -0.5]

    # the task-level test on the same outcomes counts 6 discordant tasks of 9 and gives another p-value
    task_test = sign_flip_test(pair_by_task(sample(a_out), sample(b_out)))
    assert (task_test.n_tasks, task_test.n_discordant) == (9, 6)
    assert task_test.statistic == pytest.approx(test.statistic, abs=1e-12)
    assert task_test.pvalue == pytest.approx(float(enumerated_pvalue([d for d in task_fractions(pairs) if d])))
    assert task_test.pvalue != pytest.approx(test.pvalue)
    # paired_comparison runs the same story test
    assert paired_comparison(a, b, PARAMS).test == test


@pytest.mark.parametrize("seed", range(12))
def test_random_story_designs_match_the_enumeration(seed: int) -> None:
    """Ragged designs: stories of 1 to 4 tasks, 1 to 4 repeats per task and condition (mixed lattices), random
    outcomes; the story test's p-value is the enumeration over the story sums (a task whose sides differ in size on
    the repeats both have), its counts are of stories."""
    rng = np.random.default_rng(100 + seed)
    n_stories = int(rng.integers(2, 9))
    sizes = rng.integers(1, 5, size=n_stories)
    tasks, reps, labels, values_a, values_b = [], [], [], [], []
    for s, size in enumerate(sizes):
        for h in range(int(size)):
            n = int(rng.integers(1, 5))
            rate_a, rate_b = rng.random(2)
            for r in range(n):
                tasks.append(f"s{s}-h{h}")
                reps.append(r)
                labels.append(f"s{s}")
                values_a.append(float(rng.random() < rate_a))
                values_b.append(float(rng.random() < rate_b))
    # b misses some episodes: tasks with different repeats in a and b
    keep = rng.random(len(tasks)) < 0.85
    a = cluster_by_task(tasks, reps, values_a, labels)
    b = cluster_by_task(
        np.asarray(tasks)[keep], np.asarray(reps)[keep], np.asarray(values_b)[keep], np.asarray(labels)[keep]
    )
    pairs = pair_by_task(a, b)
    test = sign_flip_test(pairs)
    if pairs.clusters is None:  # every remaining story has one task: the task-level test
        assert test == sign_flip_test(pair_by_task(cluster_by_task(tasks, reps, values_a), b))
        return
    # the reference, from the lists: a task whose b side lost episodes is tested on the repeats b kept (a has them
    # all), every other task on all its episodes; each story's sum of its tasks' differences, as exact fractions
    kept_cells: dict[str, list[int]] = {}
    for i in np.flatnonzero(keep).tolist():
        kept_cells.setdefault(tasks[i], []).append(i)
    by_story: dict[str, Fraction] = {}
    for cells in kept_cells.values():
        mean_a = Fraction(int(sum(values_a[i] for i in cells)), len(cells))
        mean_b = Fraction(int(sum(values_b[i] for i in cells)), len(cells))
        by_story[labels[cells[0]]] = by_story.get(labels[cells[0]], Fraction(0)) + mean_a - mean_b
    sums = list(by_story.values())
    assert test.n_tasks == len(sums) == pairs.n_units
    assert test.n_discordant == sum(d != 0 for d in sums)
    assert test.n_positive == sum(d > 0 for d in sums) and test.n_negative == sum(d < 0 for d in sums)
    assert test.statistic == pytest.approx(float(sum(sums, Fraction(0))), abs=1e-9)
    if test.n_discordant == 0:
        assert test.pvalue is None and test.method is SignFlipMethod.NOT_TESTABLE
    else:
        assert test.pvalue == pytest.approx(float(enumerated_pvalue(sums)), rel=1e-9)


def test_a_story_whose_tasks_cancel_is_not_discordant() -> None:
    # two repeats: +1/2 and -1/2 in story s00 (sum exactly 0); story s01 +1/2 + 0; story s02 -1/2 + -1
    passes = [(1, 0), (0, 1), (1, 0), (1, 1), (0, 1), (0, 2)]
    a_out, b_out = paired_outcomes(passes, repeats=2)
    labels = story_labels(3, 2)
    pairs = pair_by_task(sample(a_out, labels), sample(b_out, labels))
    test = sign_flip_test(pairs)
    assert unit_differences(pairs)[1].tolist() == [0.0, 0.5, -1.5]
    assert (test.n_tasks, test.n_discordant, test.n_positive, test.n_negative) == (3, 2, 1, 1)
    assert test.pvalue == pytest.approx(float(enumerated_pvalue([Fraction(1, 2), Fraction(-3, 2)])), rel=1e-12)

    # only cancelling stories: nothing to test, although 4 of the 4 tasks are discordant
    only = pair_by_task(*(sample(x, story_labels(2, 2)) for x in paired_outcomes(passes[:2] * 2, repeats=2)))
    cancelled = sign_flip_test(only)
    assert (cancelled.n_tasks, cancelled.n_discordant) == (2, 0)
    assert cancelled.method is SignFlipMethod.NOT_TESTABLE and cancelled.pvalue is None
    assert cancelled.statistic == 0.0


def test_a_story_that_cancels_only_in_exact_arithmetic_is_exactly_zero() -> None:
    """Three repeats: (0 - 1/3) + (1 - 2/3) + 0 is 5.55e-17 in floating point, 0 exactly; the story is
    concordant."""
    passes = [(0, 1), (3, 2), (0, 0)]
    a_out, b_out = paired_outcomes(passes, repeats=3)
    pairs = pair_by_task(sample(a_out, ["s"] * 3), sample(b_out, ["s"] * 3))
    # the rounding residue that adding the float differences leaves, and the story test must not
    assert np.bincount(np.zeros(3, dtype=np.int64), weights=pairs.differences)[0] != 0.0
    found = unit_differences(pairs)[1]
    assert found.tolist() == [0.0]
    test = sign_flip_test(pairs)
    assert test.n_discordant == 0 and test.method is SignFlipMethod.NOT_TESTABLE


# --- the bootstrap over stories -----------------------------------------------------------------------------------


def constant_story_design(n_stories: int, size: int, repeats: int) -> tuple[npt.NDArray[np.float64], list[str]]:
    """Every task of a story has the same repeat outcomes (story rates 0, 1/3, 2/3, 1, ... over its repeats), so
    stories differ and a story's tasks agree."""
    story_rows = np.array([(np.arange(repeats) < (s % (repeats + 1))).astype(float) for s in range(n_stories)])
    return np.repeat(story_rows, size, axis=0), story_labels(n_stories, size)


def test_a_rate_interval_over_stories_is_wider_than_over_their_tasks() -> None:
    """Stories of 3 identical tasks: the task bootstrap treats 24 tasks as independent, the story bootstrap 8; the
    spread of a mean of 8 draws is sqrt(3) times that of 24 (it is the same 8 values, each thrice)."""
    outcomes, labels = constant_story_design(n_stories=8, size=3, repeats=3)
    clustered = bootstrap_rates({0: sample(outcomes, labels)}, PARAMS)[0]
    plain = bootstrap_rates({0: sample(outcomes)}, PARAMS)[0]
    assert clustered.status is EstimateStatus.OK and plain.status is EstimateStatus.OK
    assert clustered.estimate == plain.estimate
    assert width(clustered) >= width(plain)
    assert width(clustered) / width(plain) == pytest.approx(math.sqrt(3), rel=0.2)


def test_every_replicate_is_a_mean_over_whole_stories() -> None:
    """Stories of 3 tasks, each story's 9 episodes all 0 or all 1: a replicate drawing stories (all tasks of each)
    is a multiple of 1/8; a replicate drawing tasks alone would be a multiple of 1/24."""
    outcomes = np.repeat(np.array([[1.0] * 3] * 3 + [[0.0] * 3] * 5), 3, axis=0)  # 3 of 8 stories pass
    labels = story_labels(8, 3)
    (_, replicates) = means_with_replicates({0: sample(outcomes, labels)}, PARAMS)[0]
    assert np.allclose(replicates * 8, np.round(replicates * 8), atol=1e-12)
    (_, task_replicates) = means_with_replicates({0: sample(outcomes)}, PARAMS)[0]
    assert not np.allclose(task_replicates * 8, np.round(task_replicates * 8), atol=1e-12)


def close_intervals(clustered: Estimate, alone: Estimate) -> None:
    """The two intervals agree within Monte-Carlo error: both are percentile intervals of the same bootstrap
    distribution (a mean of k story values drawn with replacement, each story's copies repeating its value), each
    end estimated from ``resamples`` replicates with standard error ``mc_se``; 4 combined standard errors leave a
    chance below 1e-4 of a false failure per end. (With the same seed both routes in fact draw the same indices,
    the first numbers of the generator, so the two usually agree to the last bit.) A Clopper-Pearson interval over
    the units (pass^k) has no Monte-Carlo error: the two agree exactly."""
    assert clustered.status is EstimateStatus.OK and alone.status is EstimateStatus.OK
    assert (clustered.mc_se is None) == (alone.mc_se is None)
    tolerance = 4.0 * math.hypot(clustered.mc_se or 0.0, alone.mc_se or 0.0) + 1e-12
    assert clustered.estimate == pytest.approx(alone.estimate, abs=1e-12)
    for got, want in zip(ends(clustered), ends(alone), strict=True):
        assert abs(got - want) <= tolerance


@pytest.mark.parametrize("copies", [2, 3, 5])
def test_stories_of_identical_copies_have_the_interval_of_the_distinct_tasks(copies: int) -> None:
    """k stories, each m identical copies of one task, give (about) the interval of the k tasks alone: pass^k and the
    paired difference (one value per task, nothing resampled within a task) and a rate whose tasks' repeats agree
    (resampling repeats of a task whose repeats all agree changes nothing). The expanded percentile levels of the
    task-level statistics are those of k units."""
    k, repeats = 10, 3
    rng = np.random.default_rng(copies)
    passes = rng.integers(0, repeats + 1, size=(k, 2))
    a_out, b_out = paired_outcomes([(int(x), int(y)) for x, y in passes], repeats)
    labels = story_labels(k, copies)
    copied_a, copied_b = (sample(np.repeat(x, copies, axis=0), labels) for x in (a_out, b_out))
    alone_a, alone_b = sample(a_out), sample(b_out)
    assert copied_a.n_tasks == k * copies and copied_a.n_units == k

    close_intervals(
        paired_comparison(copied_a, copied_b, PARAMS).difference, paired_comparison(alone_a, alone_b, PARAMS).difference
    )
    for kk in (1, 2):
        copied, alone = pass_hat_k(copied_a, kk, PARAMS), pass_hat_k(alone_a, kk, PARAMS)
        close_intervals(copied.unbiased, alone.unbiased)
        close_intervals(copied.all_pass, alone.all_pass)
    flips_copied = flip_rates({0: copied_a}, PARAMS)[0]
    flips_alone = flip_rates({0: alone_a}, PARAMS)[0]
    if flips_alone.status is EstimateStatus.OK:
        close_intervals(flips_copied, flips_alone)

    constant = np.repeat((np.arange(k) % 3 == 0).astype(float)[:, None], repeats, axis=1)
    constant[1] = 1.0
    close_intervals(
        bootstrap_rates({0: sample(np.repeat(constant, copies, axis=0), labels)}, PARAMS)[0],
        bootstrap_rates({0: sample(constant)}, PARAMS)[0],
    )
    # the task-level bootstrap of the copies is too narrow: it takes k * m tasks for independent evidence
    plain = paired_comparison(
        sample(np.repeat(a_out, copies, axis=0)), sample(np.repeat(b_out, copies, axis=0)), PARAMS
    )
    assert width(plain.difference) < width(paired_comparison(copied_a, copied_b, PARAMS).difference) / 1.2


def test_a_paired_relative_reduction_resamples_stories() -> None:
    """Token reductions (paired episodes of two conditions) take the story as the unit too: stories of identical
    copies give the interval of their distinct tasks, while the task-level bootstrap of the copies is narrower."""
    k, copies, repeats = 12, 3, 2
    rng = np.random.default_rng(4)
    tokens_a = np.repeat(rng.integers(100, 1000, size=(k, 1)).astype(float), repeats, axis=1)
    tokens_b = np.repeat(rng.integers(500, 1500, size=(k, 1)).astype(float), repeats, axis=1)
    labels = story_labels(k, copies)

    def reduction(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64], stories: list[str] | None) -> Estimate:
        paired = pair_by_task_repeat(sample(a, stories), sample(b, stories))
        return bootstrap_relative_reductions({0: paired}, PARAMS)[0]

    copied_a, copied_b = (np.repeat(x, copies, axis=0) for x in (tokens_a, tokens_b))
    clustered = reduction(copied_a, copied_b, labels)
    alone = reduction(tokens_a, tokens_b, None)
    assert clustered.estimate == pytest.approx(alone.estimate, rel=1e-12)
    close_intervals(clustered, alone)
    assert width(reduction(copied_a, copied_b, None)) < width(clustered) / 1.2


# --- exact bounds over stories ------------------------------------------------------------------------------------


def test_exact_bound_takes_n_stories_when_every_episode_is_0() -> None:
    n_stories, size, repeats = 4, 3, 2
    zeros = np.zeros((n_stories * size, repeats))
    labels = story_labels(n_stories, size)
    a, b = sample(zeros, labels), sample(zeros, labels)
    upper = zero_of_n_upper(n_stories, PARAMS.confidence)
    assert upper > zero_of_n_upper(n_stories * size, PARAMS.confidence)

    rate = bootstrap_rates({0: a}, PARAMS)[0]
    assert rate.status is EstimateStatus.EXACT_BOUND
    assert ends(rate) == (0.0, upper)
    assert f"n = {n_stories} stories" in rate.note and "stories" in rate.note
    assert rate.n_tasks == n_stories * size

    difference = paired_comparison(a, b, PARAMS).difference
    assert difference.status is EstimateStatus.EXACT_BOUND
    assert ends(difference) == pytest.approx((-upper, upper), abs=1e-15)
    assert "stories" in difference.note
    for estimate in (
        pass_hat_k(a, 2, PARAMS).unbiased,
        pass_hat_k(a, 2, PARAMS).all_pass,
        flip_rates({0: a}, PARAMS)[0],
    ):
        assert estimate.status is EstimateStatus.EXACT_BOUND
        assert ends(estimate) == (0.0, upper)
        assert "stories" in estimate.note

    one = bootstrap_rates({0: sample(np.zeros((3, repeats)), ["s"] * 3)}, PARAMS)[0]
    assert ends(one) == (0.0, zero_of_n_upper(1, PARAMS.confidence))
    assert "n = 1 story" in one.note


def test_stories_alike_but_tasks_not_get_the_exact_bound_never_a_zero_width_interval() -> None:
    # a horizon suite under a strategy that fails every story's horizon-1 task only: the tasks differ (0 and 1) but
    # every story holds the same values, so every resample of stories gives 75%; [75%, 75%] read as certainty
    n_stories = 6
    outcomes = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]] * n_stories)
    labels = story_labels(n_stories, 4)
    rate = bootstrap_rates({0: sample(outcomes, labels)}, PARAMS)[0]
    upper = zero_of_n_upper(n_stories, PARAMS.confidence)
    assert rate.status is EstimateStatus.EXACT_BOUND and rate.estimate == 0.75
    assert ends(rate) == pytest.approx((0.75 - 0.75 * upper, 0.75 + 0.25 * upper), abs=1e-15)
    assert "n = 6 stories" in rate.note and "all 6 stories (24 tasks) show the same value" in rate.note
    difference = paired_comparison(sample(outcomes, labels), sample(1.0 - outcomes, labels), PARAMS).difference
    assert difference.status is EstimateStatus.EXACT_BOUND and difference.estimate == pytest.approx(0.5)
    assert difference.low is not None and difference.high is not None and difference.low < 0.5 < difference.high
    for estimate in (pass_hat_k(sample(outcomes, labels), 2, PARAMS).all_pass,):
        assert estimate.status is EstimateStatus.EXACT_BOUND and estimate.low != estimate.high
    # an unbounded mean with stories alike has no interval, and says why
    tokens = bootstrap_means({0: sample(outcomes * 100.0 + 7.0, labels)}, PARAMS)[0]
    assert tokens.status is EstimateStatus.CONSTANT and tokens.low is None and tokens.high is None
    assert tokens.no_interval == "all stories alike" and "6 stories" in tokens.note
    # stories that differ keep their bootstrap interval
    varied = outcomes.copy()
    varied[1] = 0.0
    assert bootstrap_rates({0: sample(varied, labels)}, PARAMS)[0].status is EstimateStatus.OK
    # one resample always agrees with itself: that says nothing, so it is no reason for an exact bound
    one = AnalysisParams(resamples=1, seed=5)
    assert bootstrap_rates({0: sample(varied, labels)}, one)[0].status is EstimateStatus.OK


# --- building samples with stories --------------------------------------------------------------------------------


def test_a_task_in_two_stories_is_an_error() -> None:
    with pytest.raises(ValueError, match="two stories"):
        cluster_by_task(["t1", "t1", "t2"], [0, 1, 0], [1, 0, 1], ["s1", "s2", "s1"])
    with pytest.raises(ValueError, match="differ in length"):
        cluster_by_task(["t1", "t2"], [0, 0], [1, 0], ["s1"])
    a = cluster_by_task(["t1", "t2", "t3"], [0, 0, 0], [1, 0, 1], ["s1", "s1", "s2"])
    b = cluster_by_task(["t1", "t2", "t3"], [0, 0, 0], [1, 0, 1], ["s1", "s2", "s2"])
    with pytest.raises(ValueError, match="two stories"):
        pair_by_task(a, b)
    with pytest.raises(ValueError, match="two stories"):
        pair_by_task_repeat(a, b)


def test_stories_travel_with_the_samples() -> None:
    tasks = ["t1", "t1", "t2", "t2", "t3", "t3", "t1", "t2", "t3"]
    conditions = ["a"] * 6 + ["b"] * 3
    reps = [0, 1, 0, 1, 0, 1, 0, 0, 0]
    labels = ["x", "x", "x", "x", "y", "y", "x", "x", "y"]
    split = split_by_condition(conditions, tasks, reps, [1, 0, 1, 1, 0, 0, 1, 0, 1], labels)
    assert split["a"].clusters == ("x", "x", "y") and split["b"].clusters == ("x", "x", "y")
    assert split["a"].n_units == 2
    assert pair_by_task(split["a"], split["b"]).clusters == ("x", "x", "y")
    assert pair_by_task_repeat(split["a"], split["b"]).clusters == ("x", "x", "y")
    # a sample without labels takes the other's
    plain_b = cluster_by_task(tasks[6:], reps[6:], [1, 0, 1])
    assert pair_by_task(split["a"], plain_b).clusters == ("x", "x", "y")
    # pairing only the tasks of different stories leaves no shared story
    only = cluster_by_task(["t1", "t3"], [0, 0], [1, 1])
    assert pair_by_task(split["a"], only).clusters is None


# --- power planning over stories ----------------------------------------------------------------------------------


def test_pilot_design_draws_stories_of_tasks_with_their_own_rates() -> None:
    n_stories, size, repeats = 5, 3, 4
    a_out, b_out = random_outcomes(7, n_stories * size, repeats), random_outcomes(8, n_stories * size, repeats)
    labels = story_labels(n_stories, size)
    pairs = pair_by_task(sample(a_out, labels), sample(b_out, labels))
    model, units, per_unit = pilot_design(pairs, repeats)
    assert isinstance(model, StoryPilotModel)
    assert (units, per_unit) == (n_stories, repeats * size) and model.n_tasks == n_stories
    np.testing.assert_array_equal(model.rate_a, a_out.mean(axis=1))  # each task keeps its own rate
    np.testing.assert_array_equal(model.rate_b, b_out.mean(axis=1))
    null = model.difference_pmf(0.0, per_unit)
    assert null.size == 2 * per_unit + 1 and null.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(null, null[::-1], atol=1e-15)  # swapped conditions: symmetric under the null

    # stories of different sizes: the lattice of the largest story
    uneven = ["p", "p", "q", "q", "r", "r", "r", "s", "s", "s", "u", "u", "u", "u", "w"]
    pairs = pair_by_task(sample(a_out, uneven), sample(b_out, uneven))
    _, units, per_unit = pilot_design(pairs, repeats)
    assert (units, per_unit) == (6, repeats * 4)


def test_the_story_pilot_model_equals_brute_force_enumeration() -> None:
    # two stories of two tasks, one repeat: a story's D is the sum of its tasks' Bernoulli differences, the
    # conditions swapped for the whole story with probability 1/2 (null), or every task of a switched to 1
    rate_a, rate_b = np.array([0.2, 0.9, 0.5, 0.1]), np.array([0.6, 0.3, 0.5, 0.7])
    model = StoryPilotModel(rate_a=rate_a, rate_b=rate_b, groups=np.array([0, 0, 1, 1], dtype=np.int64))

    def story_pmf(a: list[float], b: list[float]) -> np.ndarray:
        out = np.zeros(5)
        for xs in itertools.product((0, 1), repeat=4):
            p = 1.0
            for x, q in zip(xs, [a[0], a[1], b[0], b[1]], strict=True):
                p *= q if x else 1.0 - q
            out[xs[0] + xs[1] - xs[2] - xs[3] + 2] += p
        return out

    def expected(share: float) -> np.ndarray:
        total = np.zeros(5)
        for s in (0, 1):
            a, b = list(rate_a[2 * s : 2 * s + 2]), list(rate_b[2 * s : 2 * s + 2])
            on = [1.0, 1.0] if model.direction == "increase" else [0.0, 0.0]
            null = (story_pmf(a, b) + story_pmf(b, a)) / 2
            moved = (story_pmf(on, b) + story_pmf(on, a)) / 2
            total += ((1 - share) * null + share * moved) / 2
        return total

    np.testing.assert_allclose(model.difference_pmf(0.0, 2), expected(0.0), atol=1e-15)
    half = model.largest_difference / 2
    np.testing.assert_allclose(model.difference_pmf(half, 2), expected(0.5), atol=1e-15)


def test_story_pilot_repeats_of_deterministic_tasks_only_rescale_the_lattice() -> None:
    # at temperature 0 (every task's rate 0 or 1) repeats are copies: three repeats put the same masses on every
    # third lattice point, so the sign-flip test (scale-free) cannot gain from them
    model = StoryPilotModel(
        rate_a=np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0]),
        rate_b=np.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0]),
        groups=np.array([0, 0, 1, 1, 2, 2], dtype=np.int64),
    )
    one, three = model.difference_pmf(0.0, 2), model.difference_pmf(0.0, 6)
    np.testing.assert_allclose(three[::3], one, atol=1e-15)
    assert three.sum() == pytest.approx(1.0) and three[::3].sum() == pytest.approx(1.0)
