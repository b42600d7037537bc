"""Exact McNemar and Holm, checked against statsmodels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests

from contextdelta.stats import (
    EstimateStatus,
    McNemarResult,
    cluster_by_task,
    holm_adjust,
    holm_family,
    mcnemar_exact,
    mcnemar_pvalue,
    pair_by_task_repeat,
)

counts = st.integers(min_value=0, max_value=80)


@settings(max_examples=150, deadline=None)
@given(both=counts, only_a=counts, only_b=counts, neither=counts)
def test_mcnemar_pvalue_equals_statsmodels_exact(both: int, only_a: int, only_b: int, neither: int) -> None:
    table = np.array([[both, only_a], [only_b, neither]])
    expected = mcnemar(table, exact=True).pvalue
    assert mcnemar_pvalue(only_a, only_b) == pytest.approx(expected, rel=1e-9, abs=1e-15)


def test_mcnemar_on_paired_episodes_builds_the_table_and_matches_statsmodels() -> None:
    rng = np.random.default_rng(21)
    tasks = np.repeat([f"t{i:02d}" for i in range(24)], 3)
    repeats = np.tile(np.arange(3), 24)
    a = (rng.random(72) < 0.7).astype(int)
    b = np.where(rng.random(72) < 0.3, 1 - a, a)
    paired = pair_by_task_repeat(cluster_by_task(tasks, repeats, a), cluster_by_task(tasks[2:], repeats[2:], b[2:]))
    result = mcnemar_exact(paired)
    a_kept, b_kept = a[2:], b[2:]
    table = [
        [int(((a_kept == 1) & (b_kept == 1)).sum()), int(((a_kept == 1) & (b_kept == 0)).sum())],
        [int(((a_kept == 0) & (b_kept == 1)).sum()), int(((a_kept == 0) & (b_kept == 0)).sum())],
    ]
    assert [[result.both, result.only_a], [result.only_b, result.neither]] == table
    assert result.pvalue == pytest.approx(mcnemar(np.array(table), exact=True).pvalue, rel=1e-9)
    assert (result.n_pairs, result.n_tasks, result.n_unpaired) == (70, 24, 2)


def test_mcnemar_without_discordant_pairs_is_one() -> None:
    sample = cluster_by_task(["a", "b", "c"], [0, 0, 0], [1, 0, 1])
    result = mcnemar_exact(pair_by_task_repeat(sample, sample))
    assert result.pvalue == 1.0
    assert result.status is EstimateStatus.OK
    assert "no discordant" in result.note


def test_mcnemar_without_pairs_is_no_data() -> None:
    a = cluster_by_task(["a"], [0], [1])
    b = cluster_by_task(["b"], [0], [1])
    result = mcnemar_exact(pair_by_task_repeat(a, b))
    assert (result.n_pairs, result.pvalue, result.status) == (0, 1.0, EstimateStatus.NO_DATA)


def test_mcnemar_refuses_a_non_binary_outcome() -> None:
    sample = cluster_by_task(["a"], [0], [2.0])
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact(pair_by_task_repeat(sample, sample))


pvalue_lists = st.lists(
    st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0.0, 0.01, 0.05, 0.5, 1.0])),
    min_size=1,
    max_size=15,
)


@settings(max_examples=150, deadline=None)
@given(pvalues=pvalue_lists)
def test_holm_equals_statsmodels(pvalues: list[float]) -> None:
    expected = multipletests(pvalues, method="holm")[1]
    np.testing.assert_allclose(holm_adjust(pvalues), expected, rtol=1e-12, atol=1e-15)


def test_holm_worked_example_and_edge_cases() -> None:
    np.testing.assert_allclose(holm_adjust([0.01, 0.04, 0.03, 0.5]), [0.04, 0.09, 0.09, 0.5])
    assert holm_adjust([]).size == 0
    with pytest.raises(ValueError):
        holm_adjust([0.1, float("nan")])
    with pytest.raises(ValueError):
        holm_adjust([1.5])


def test_holm_family_fills_adjusted_pvalues_in_place_of_none() -> None:
    def result(only_a: int, only_b: int) -> McNemarResult:
        sample_a = cluster_by_task(
            [f"t{i}" for i in range(only_a + only_b)], [0] * (only_a + only_b), [1] * only_a + [0] * only_b
        )
        sample_b = cluster_by_task(
            [f"t{i}" for i in range(only_a + only_b)], [0] * (only_a + only_b), [0] * only_a + [1] * only_b
        )
        return mcnemar_exact(pair_by_task_repeat(sample_a, sample_b))

    family = {"x": result(12, 1), "y": result(6, 2), "z": result(3, 3)}
    adjusted = holm_family(family)
    assert list(adjusted) == ["x", "y", "z"]
    expected = multipletests([family[k].pvalue for k in family], method="holm")[1]
    assert [adjusted[k].pvalue_holm for k in family] == pytest.approx(list(expected))
    assert all(family[k].pvalue_holm is None for k in family)  # the inputs are untouched
