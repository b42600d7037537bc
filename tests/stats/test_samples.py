"""Building dense task x repeat matrices from per-episode arrays, and pairing two conditions."""

from __future__ import annotations

import numpy as np
import pytest

from contextdelta.stats import cluster_by_task, pair_by_task_repeat, split_by_condition


def test_cluster_packs_each_task_left_in_repeat_order() -> None:
    sample = cluster_by_task(
        ["b", "a", "b", "a", "a", "c"],
        [2, 1, 0, 0, 5, 3],
        [1.0, 0.0, 0.5, 1.0, 0.25, 7.0],
    )
    assert sample.task_ids == ("a", "b", "c")
    assert sample.counts.tolist() == [3, 2, 1]
    assert sample.repeats.tolist() == [[0, 1, 5], [0, 2, 0], [3, 0, 0]]
    assert sample.values.tolist() == [[1.0, 0.0, 0.25], [0.5, 1.0, 0.0], [7.0, 0.0, 0.0]]
    assert sample.mask.tolist() == [[True, True, True], [True, True, False], [True, False, False]]
    assert (sample.n_tasks, sample.n_episodes, sample.n_missing) == (3, 6, 0)


def test_missing_values_are_dropped_and_counted() -> None:
    sample = cluster_by_task(["a", "a", "b", "c"], [0, 1, 0, 0], [True, None, float("nan"), False])
    assert sample.task_ids == ("a", "c")  # b had only a missing value
    assert sample.counts.tolist() == [1, 1]
    assert sample.values.tolist() == [[1.0], [0.0]]
    assert sample.n_missing == 2


def test_empty_input_gives_an_empty_sample() -> None:
    sample = cluster_by_task([], [], [])
    assert sample.n_tasks == 0
    assert sample.n_episodes == 0
    assert sample.values.shape == (0, 0)


@pytest.mark.parametrize(
    ("tasks", "repeats", "values", "message"),
    [
        (["a", "a"], [0, 0], [1, 0], "duplicated"),
        (["a", "b"], [0], [1, 0], "differ in length"),
        (["a"], [0], [float("inf")], "infinite"),
        ([["a"]], [[0]], [[1]], "one-dimensional"),
    ],
)
def test_invalid_input_is_refused(tasks: object, repeats: object, values: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cluster_by_task(tasks, repeats, values)  # type: ignore[arg-type]


def test_pairing_aligns_on_task_and_repeat_and_counts_what_it_drops() -> None:
    a = cluster_by_task(["x", "x", "y", "z", "z"], [0, 1, 0, 0, 2], [1, 0, 1, 1, 0])
    b = cluster_by_task(["z", "x", "x", "w", "z"], [2, 1, 2, 0, 1], [5, 6, 7, 8, 9])
    paired = pair_by_task_repeat(a, b)
    assert paired.task_ids == ("x", "z")
    assert paired.repeats[paired.mask].tolist() == [1, 2]
    assert paired.a[paired.mask].tolist() == [0.0, 0.0]
    assert paired.b[paired.mask].tolist() == [6.0, 5.0]
    assert paired.n_pairs == 2
    assert (paired.n_unpaired_a, paired.n_unpaired_b, paired.n_unpaired) == (3, 3, 6)


def test_pairing_matches_a_dictionary_join_on_random_ragged_data() -> None:
    rng = np.random.default_rng(11)

    def episodes() -> tuple[list[str], list[int], np.ndarray]:
        keys = {(f"t{rng.integers(15)}", int(rng.integers(-2, 6))) for _ in range(60)}
        tasks, reps = zip(*sorted(keys), strict=True)
        return list(tasks), list(reps), rng.random(len(keys))

    ta, ra, va = episodes()
    tb, rb, vb = episodes()
    paired = pair_by_task_repeat(cluster_by_task(ta, ra, va), cluster_by_task(tb, rb, vb))
    left = {(t, r): v for t, r, v in zip(ta, ra, va, strict=True)}
    right = {(t, r): v for t, r, v in zip(tb, rb, vb, strict=True)}
    expected = sorted((key, left[key], right[key]) for key in left.keys() & right.keys())
    rows = np.repeat(np.arange(paired.n_tasks), paired.counts)
    got = sorted(
        ((paired.task_ids[t], int(r)), float(x), float(y))
        for t, r, x, y in zip(
            rows, paired.repeats[paired.mask], paired.a[paired.mask], paired.b[paired.mask], strict=True
        )
    )
    assert got == expected
    assert paired.n_unpaired_a == len(left) - len(expected)
    assert paired.n_unpaired_b == len(right) - len(expected)


def test_pairing_with_an_empty_side_gives_no_pairs() -> None:
    a = cluster_by_task(["x"], [0], [1.0])
    paired = pair_by_task_repeat(a, cluster_by_task([], [], []))
    assert (paired.n_tasks, paired.n_pairs, paired.n_unpaired_a, paired.n_unpaired_b) == (0, 0, 1, 0)


def test_split_by_condition_equals_clustering_each_condition() -> None:
    conditions = [("full_history", "unprotected"), ("last_n", "unprotected")] * 3
    tasks = ["a", "a", "b", "b", "a", "a"]
    repeats = [0, 0, 0, 0, 1, 1]
    values = [1, 0, 1, 1, 0, 0]
    split = split_by_condition(conditions, tasks, repeats, values)
    assert list(split) == [("full_history", "unprotected"), ("last_n", "unprotected")]
    direct = cluster_by_task(["a", "b", "a"], [0, 0, 1], [1, 1, 0])
    got = split[("full_history", "unprotected")]
    assert got.task_ids == direct.task_ids
    np.testing.assert_array_equal(got.values, direct.values)
    np.testing.assert_array_equal(got.counts, direct.counts)
