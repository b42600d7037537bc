"""The primary paired test (sign-flip over tasks), Holm over its family, and the 2x2 description: checked against
statsmodels' exact McNemar, scipy's permutation test and hand-built cases."""

from __future__ import annotations

import itertools
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import permutation_test
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

import contextdelta.stats._signflip as signflip
from contextdelta.stats import (
    MONTE_CARLO_PATTERNS,
    AnalysisParams,
    ClusteredSample,
    SignFlipMethod,
    SignFlipTest,
    TaskPairs,
    cluster_by_task,
    holm_adjust,
    holm_family,
    pair_by_task,
    pair_by_task_repeat,
    pair_table,
    paired_comparisons,
    sign_flip_test,
)

PARAMS = AnalysisParams(resamples=2000, seed=3)


def one_repeat(a: list[int], b: list[int]) -> tuple[ClusteredSample, ClusteredSample]:
    ids = [f"t{i:03d}" for i in range(len(a))]
    return cluster_by_task(ids, [0] * len(a), a), cluster_by_task(ids, [0] * len(b), b)


def design(seed: int, n_tasks: int, repeats: int, ragged: bool = False) -> tuple[ClusteredSample, ClusteredSample]:
    """Two conditions with task-level rates (so tasks differ and repeats agree), optionally with missing repeats."""
    rng = np.random.default_rng(seed)
    tasks = np.repeat([f"t{i:03d}" for i in range(n_tasks)], repeats)
    reps = np.tile(np.arange(repeats), n_tasks)
    rate_a, rate_b = np.repeat(rng.random(n_tasks), repeats), np.repeat(rng.random(n_tasks), repeats)
    a, b = (rng.random(tasks.size) < rate_a).astype(float), (rng.random(tasks.size) < rate_b).astype(float)
    keep_a = rng.random(tasks.size) < 0.8 if ragged else np.ones(tasks.size, dtype=bool)
    keep_b = rng.random(tasks.size) < 0.8 if ragged else np.ones(tasks.size, dtype=bool)
    return cluster_by_task(tasks[keep_a], reps[keep_a], a[keep_a]), cluster_by_task(
        tasks[keep_b], reps[keep_b], b[keep_b]
    )


def scipy_pvalue(pairs: TaskPairs) -> float:
    """The same test by scipy's full enumeration of sign patterns (slow: small cases only)."""
    return scipy_sign_flip(pairs.differences)


def scipy_sign_flip(differences: np.ndarray) -> float:
    d = differences[differences != 0]
    result = permutation_test(
        (d,), lambda x, axis: np.sum(x, axis=axis), permutation_type="samples", n_resamples=np.inf, vectorized=True
    )
    return float(result.pvalue)


def cells(sample: ClusteredSample) -> dict[str, dict[int, float]]:
    """A sample as {task: {repeat: value}}."""
    return {
        task: {int(r): float(v) for r, v in zip(sample.repeats[i, :n], sample.values[i, :n], strict=True)}
        for i, (task, n) in enumerate(zip(sample.task_ids, sample.counts.tolist(), strict=True))
    }


def balanced_differences(a: ClusteredSample, b: ClusteredSample) -> np.ndarray:
    """Per task both conditions have: the difference of means over all episodes where the two sides have equally
    many, else over equally many per side (the repeats both sides have first, then each side's earliest others; no
    task left out), by plain dictionaries."""
    ca, cb = cells(a), cells(b)
    out = []
    for task in sorted(set(ca) & set(cb)):
        ra, rb = ca[task], cb[task]
        if len(ra) != len(rb):
            k, shared = min(len(ra), len(rb)), set(ra) & set(rb)
            ra = {r: ra[r] for r in sorted(ra, key=lambda r: (r not in shared, r))[:k]}
            rb = {r: rb[r] for r in sorted(rb, key=lambda r: (r not in shared, r))[:k]}
        out.append(sum(ra.values()) / len(ra) - sum(rb.values()) / len(rb))
    return np.asarray(out)


counts = st.integers(min_value=0, max_value=60)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(both=counts, only_a=counts, only_b=counts, neither=counts)
def test_one_repeat_equals_statsmodels_exact_mcnemar(both: int, only_a: int, only_b: int, neither: int) -> None:
    a = [1] * both + [1] * only_a + [0] * only_b + [0] * neither
    b = [1] * both + [0] * only_a + [1] * only_b + [0] * neither
    test = sign_flip_test(pair_by_task(*one_repeat(a, b)))
    if only_a + only_b == 0:
        assert test.method is SignFlipMethod.NOT_TESTABLE and test.pvalue is None
        return
    expected = mcnemar(np.array([[both, only_a], [only_b, neither]]), exact=True).pvalue
    assert test.pvalue == expected  # the same scipy call: bit for bit
    assert (test.n_positive, test.n_negative, test.method) == (only_a, only_b, SignFlipMethod.EXACT)


@pytest.mark.parametrize(("seed", "repeats", "ragged"), [(1, 3, False), (2, 3, True), (3, 2, False), (4, 5, True)])
def test_lattice_route_equals_scipy_full_enumeration(seed: int, repeats: int, ragged: bool) -> None:
    a, b = design(seed, 14, repeats, ragged)
    pairs = pair_by_task(a, b)
    test = sign_flip_test(pairs)
    assert test.method is SignFlipMethod.EXACT and test.testable
    expected = balanced_differences(a, b)  # with equal sides everywhere: every task's own difference of means
    assert test.pvalue == pytest.approx(scipy_sign_flip(expected), rel=1e-12)
    assert test.statistic == pytest.approx(expected.sum())
    assert ragged == bool((pairs.n_a != pairs.n_b).any())


def test_unequal_sides_are_tested_on_the_repeats_both_sides_have() -> None:
    """A failed trial left out of one condition only: the test flips the tasks' differences over their shared
    repeats (a swap of the two sides is a symmetry of the null only with equally many episodes per side)."""
    rng = np.random.default_rng(12)
    tasks = np.repeat([f"t{i:02d}" for i in range(12)], 5)
    reps = np.tile(np.arange(5), 12)
    rates = np.repeat(rng.uniform(0.05, 0.4, 12), 5)
    a_values, b_values = (rng.random(tasks.size) < rates).astype(float), (rng.random(tasks.size) < rates).astype(float)
    kept_b = (reps == 0) | (rng.random(tasks.size) < 0.3)  # b lost most of its repeats to failed trials
    a = cluster_by_task(tasks, reps, a_values)
    b = cluster_by_task(tasks[kept_b], reps[kept_b], b_values[kept_b])
    pairs = pair_by_task(a, b)
    assert (pairs.n_a != pairs.n_b).sum() >= 10
    test = sign_flip_test(pairs)
    expected = balanced_differences(a, b)
    assert test.method is SignFlipMethod.EXACT
    assert test.pvalue == pytest.approx(scipy_sign_flip(expected), rel=1e-12)
    assert test.n_discordant == int((expected != 0).sum())
    assert pairs.differences.sum() != pytest.approx(expected.sum())  # the effect still uses every episode


def test_unequal_sides_keep_the_size_of_the_test() -> None:
    """The exact size of the test under the null, by enumerating every outcome of 4 tasks with 5 repeats in a and 1
    in b (every episode passes with probability 0.2 whatever its condition): P(p <= alpha) must not exceed alpha.
    Flipping the signs of the unbalanced differences rejected 27.2% of datasets at alpha 0.25."""
    n_tasks, rest, p = 4, 4, 0.2
    # a task's outcome: its shared repeat in a and in b, and how many of a's other 4 repeats pass
    kinds = [(a0, b0, k) for a0 in (0, 1) for b0 in (0, 1) for k in range(rest + 1)]

    def probability(kind: tuple[int, int, int]) -> float:
        passes = kind[0] + kind[1] + kind[2]
        return math.comb(rest, kind[2]) * p**passes * (1 - p) ** (rest + 2 - passes)

    size = {0.25: 0.0, 0.125: 0.0}
    for outcome in itertools.combinations_with_replacement(kinds, n_tasks):
        ways = math.factorial(n_tasks) // math.prod(math.factorial(outcome.count(k)) for k in set(outcome))
        a_tasks, a_reps, a_values, b_tasks = [], [], [], []
        for t, (a0, _, k) in enumerate(outcome):
            a_tasks += [f"t{t}"] * (rest + 1)
            a_reps += list(range(rest + 1))
            a_values += [a0] + [1] * k + [0] * (rest - k)
            b_tasks.append(f"t{t}")
        b_values = [kind[1] for kind in outcome]
        test = sign_flip_test(
            pair_by_task(cluster_by_task(a_tasks, a_reps, a_values), cluster_by_task(b_tasks, [0] * n_tasks, b_values))
        )
        chance = ways * math.prod(probability(kind) for kind in outcome)
        for alpha in size:
            size[alpha] += chance if test.pvalue is not None and test.pvalue <= alpha else 0.0
    assert size[0.25] <= 0.25 and size[0.125] <= 0.125, size


def test_enumeration_route_for_values_off_any_lattice() -> None:
    rng = np.random.default_rng(5)
    ids = [f"t{i}" for i in range(12)]
    pairs = pair_by_task(cluster_by_task(ids, [0] * 12, rng.random(12)), cluster_by_task(ids, [0] * 12, rng.random(12)))
    assert not pairs.integral
    test = sign_flip_test(pairs)
    assert test.method is SignFlipMethod.EXACT
    assert test.pvalue == pytest.approx(scipy_pvalue(pairs), rel=1e-12)


def test_monte_carlo_route_is_seeded_stated_and_close_to_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = pair_by_task(*design(6, 40, 3))
    exact = sign_flip_test(pairs)
    monkeypatch.setattr(signflip, "_LATTICE_WORK_LIMIT", 0)  # neither exact route is "affordable"
    found = sign_flip_test(pairs, seed=11)
    assert found.method is SignFlipMethod.MONTE_CARLO
    assert (found.sign_patterns, found.seed) == (MONTE_CARLO_PATTERNS, 11) and MONTE_CARLO_PATTERNS >= 100_000
    assert found.pvalue is not None and exact.pvalue is not None and found.pvalue_mc_se is not None
    assert abs(found.pvalue - exact.pvalue) < 4 * found.pvalue_mc_se + 1e-5
    assert sign_flip_test(pairs, seed=11) == found


def test_copying_every_repeat_three_times_changes_no_task_level_number() -> None:
    a, b = design(7, 24, 3, ragged=True)

    def tripled(sample: ClusteredSample) -> ClusteredSample:
        mask = sample.mask
        rows = np.repeat(np.arange(sample.n_tasks), sample.counts)
        tasks = np.asarray(sample.task_ids)[rows]
        reps, values = sample.repeats[mask], sample.values[mask]
        return cluster_by_task(np.tile(tasks, 3), np.concatenate([reps, reps + 100, reps + 200]), np.tile(values, 3))

    before = paired_comparisons({"x": (a, b)}, PARAMS)["x"]
    after = paired_comparisons({"x": (tripled(a), tripled(b))}, PARAMS)["x"]
    assert after.test == before.test
    assert after.difference.model_dump(exclude={"n_episodes"}) == before.difference.model_dump(exclude={"n_episodes"})
    assert after.difference.n_episodes == 3 * before.difference.n_episodes
    assert after.episodes.n_pairs == 3 * before.episodes.n_pairs  # the description counts episodes; the test does not


def test_repeats_do_not_count_as_evidence() -> None:
    """One task per row of the issue: the same per-task behaviour with 1 and with 3 repeats gives the same p."""
    a, b = [1] * 5 + [0] * 19, [0] * 24
    single = sign_flip_test(pair_by_task(*one_repeat(a, b)))
    ids = np.repeat([f"t{i:03d}" for i in range(24)], 3)
    reps = np.tile(np.arange(3), 24)
    triple = sign_flip_test(
        pair_by_task(cluster_by_task(ids, reps, np.repeat(a, 3)), cluster_by_task(ids, reps, np.repeat(b, 3)))
    )
    assert single.pvalue == triple.pvalue == pytest.approx(0.0625)


def test_no_discordant_task_is_not_testable_and_leaves_the_holm_family() -> None:
    tests = {
        "strong": sign_flip_test(pair_by_task(*one_repeat([1] * 12 + [0], [0] * 12 + [1]))),
        "weak": sign_flip_test(pair_by_task(*one_repeat([1] * 6 + [0] * 2, [0] * 6 + [1] * 2))),
        "still": sign_flip_test(pair_by_task(*one_repeat([1, 0, 1], [1, 0, 1]))),
    }
    family = holm_family(tests)
    assert list(family) == ["strong", "weak", "still"]
    assert not family["still"].testable and family["still"].pvalue_holm is None and family["still"].family_size is None
    pvalues = [tests["strong"].pvalue, tests["weak"].pvalue]
    assert None not in pvalues
    assert [family[k].pvalue_holm for k in ("strong", "weak")] == pytest.approx(
        list(statsmodels_holm([p for p in pvalues if p is not None]))
    )
    assert family["strong"].family_size == family["weak"].family_size == 2
    assert all(tests[k].pvalue_holm is None for k in tests)  # the inputs are untouched


def test_pair_table_describes_episode_pairs() -> None:
    rng = np.random.default_rng(21)
    tasks = np.repeat([f"t{i:02d}" for i in range(24)], 3)
    repeats = np.tile(np.arange(3), 24)
    a = (rng.random(72) < 0.7).astype(int)
    b = np.where(rng.random(72) < 0.3, 1 - a, a)
    paired = pair_by_task_repeat(cluster_by_task(tasks, repeats, a), cluster_by_task(tasks[2:], repeats[2:], b[2:]))
    table = pair_table(paired)
    a_kept, b_kept = a[2:], b[2:]
    assert [[table.both, table.only_a], [table.only_b, table.neither]] == [
        [int(((a_kept == 1) & (b_kept == 1)).sum()), int(((a_kept == 1) & (b_kept == 0)).sum())],
        [int(((a_kept == 0) & (b_kept == 1)).sum()), int(((a_kept == 0) & (b_kept == 0)).sum())],
    ]
    assert (table.n_pairs, table.n_tasks, table.n_unpaired) == (70, 24, 2)
    with pytest.raises(ValueError, match="0/1"):
        pair_table(pair_by_task_repeat(cluster_by_task(["a"], [0], [2.0]), cluster_by_task(["a"], [0], [1.0])))


pvalue_lists = st.lists(
    st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0])),
    min_size=1,
    max_size=15,
)


def statsmodels_holm(pvalues: list[float]) -> np.ndarray:
    """statsmodels' Holm adjustment. ``multipletests`` runs ``gc.collect()`` on every call, which costs time in
    proportion to everything else alive in the test process (most of a minute over a whole suite), and has
    nothing to do with the numbers: it is switched off for the call."""
    with mock.patch("gc.collect", lambda *args: 0):
        adjusted: np.ndarray = multipletests(pvalues, method="holm")[1]
    return adjusted


@settings(deadline=None)
@given(pvalues=pvalue_lists)
def test_holm_equals_statsmodels(pvalues: list[float]) -> None:
    expected = statsmodels_holm(pvalues)
    np.testing.assert_allclose(holm_adjust(pvalues), expected, rtol=1e-12, atol=1e-15)


def test_holm_worked_example_and_edge_cases() -> None:
    np.testing.assert_allclose(holm_adjust([0.01, 0.04, 0.03, 0.5]), [0.04, 0.09, 0.09, 0.5])
    assert holm_adjust([]).size == 0
    assert holm_family({}) == {}
    with pytest.raises(ValueError):
        holm_adjust([0.1, float("nan")])
    with pytest.raises(ValueError):
        holm_adjust([1.5])


def test_a_test_record_has_no_nan_and_says_whether_it_is_testable() -> None:
    test = SignFlipTest(
        n_tasks=3, n_discordant=0, n_positive=0, n_negative=0, statistic=0.0, method="not_testable", pvalue=None
    )
    assert not test.testable and "NaN" not in test.model_dump_json()
