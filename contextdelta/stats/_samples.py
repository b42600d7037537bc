"""Episode tables as dense task x repeat matrices: the input every statistic takes.

A condition's episodes become a `ClusteredSample`: row t holds task t's values in repeat order, packed
to the left (``values[t, :counts[t]]`` are real, the rest is padding set to 0). Packing to the left is what
lets the bootstrap draw a repeat of task t as ``floor(u * counts[t])`` without a per-task loop.
A `PairedSample` is the same shape holding two conditions aligned on (task, repeat), with the cells one
condition lacks dropped and counted.

Tasks may share a **story** (a task family tells one story at several horizons): then a sample carries, per task
row, its story (``clusters``), and every statistic treats the story as its independent unit: the bootstrap draws
stories (each drawn story brings all its tasks), and the sign-flip test flips a story's tasks together. Where every
task is its own story ``clusters`` is None and nothing changes.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

FloatMatrix = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# Per-episode metric values; None (like NaN) marks a missing value, e.g. an empty CSV cell.
Values = npt.ArrayLike | Sequence[float | bool | None]


class _Stories:
    """The story of each task row, for the three shapes below: ``clusters`` is None where every task is its own."""

    task_ids: tuple[str, ...]
    clusters: tuple[str, ...] | None

    @property
    def n_units(self) -> int:
        """Number of independent units: stories where tasks share them, else tasks."""
        return len(self.task_ids) if self.clusters is None else len(set(self.clusters))

    @property
    def groups(self) -> IntArray | None:
        """The story code of each row (codes in sorted story order), or None (every task its own story)."""
        return cluster_codes(self.clusters)


@dataclass(frozen=True, eq=False)
class ClusteredSample(_Stories):
    """One condition's per-episode values of one metric, grouped by task.

    Attributes:
        task_ids: task of each row, sorted.
        repeats: ``(n_tasks, max_repeats)`` repeat labels, ascending within a row; padding is 0.
        values: ``(n_tasks, max_repeats)`` metric values; padding is 0.
        counts: ``(n_tasks,)`` number of episodes of each task (every task has at least one).
        n_missing: episodes left out because their value was missing (NaN / None / empty CSV cell).
        clusters: the story of each row, where some tasks share one (the unit of inference); None where every task
            is its own story.
    """

    task_ids: tuple[str, ...]
    repeats: IntArray
    values: FloatMatrix
    counts: IntArray
    n_missing: int = 0
    clusters: tuple[str, ...] | None = None

    @property
    def n_tasks(self) -> int:
        """Number of tasks (rows)."""
        return len(self.task_ids)

    @property
    def n_episodes(self) -> int:
        """Number of episodes with a value."""
        return int(self.counts.sum())

    @property
    def mask(self) -> npt.NDArray[np.bool_]:
        """``(n_tasks, max_repeats)``: True on real cells, False on padding."""
        return np.arange(self.values.shape[1]) < self.counts[:, None]


@dataclass(frozen=True, eq=False)
class PairedSample(_Stories):
    """Two conditions' values of one metric on the (task, repeat) cells both have.

    ``a`` and ``b`` share ``task_ids``, ``repeats`` and ``counts`` (the layout of `ClusteredSample`), so
    ``a[t, j]`` and ``b[t, j]`` are the same task and repeat under the two conditions.
    ``n_unpaired_a`` / ``n_unpaired_b`` count the episodes of a / b whose partner was missing.
    """

    task_ids: tuple[str, ...]
    repeats: IntArray
    a: FloatMatrix
    b: FloatMatrix
    counts: IntArray
    n_unpaired_a: int = 0
    n_unpaired_b: int = 0
    clusters: tuple[str, ...] | None = None
    """The story of each row where tasks share stories (see `ClusteredSample`)."""

    @property
    def n_tasks(self) -> int:
        """Number of tasks (rows)."""
        return len(self.task_ids)

    @property
    def n_pairs(self) -> int:
        """Number of (task, repeat) pairs."""
        return int(self.counts.sum())

    @property
    def n_unpaired(self) -> int:
        """Episodes of either condition left out for lack of a partner."""
        return self.n_unpaired_a + self.n_unpaired_b

    @property
    def mask(self) -> npt.NDArray[np.bool_]:
        """``(n_tasks, max_repeats)``: True on real cells, False on padding."""
        return np.arange(self.a.shape[1]) < self.counts[:, None]


def _as_1d(name: str, array: Values, dtype: npt.DTypeLike) -> npt.NDArray[np.generic]:
    out = np.asarray(array, dtype=dtype)
    if out.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {out.shape}")
    return out


def cluster_codes(clusters: Sequence[str] | None) -> IntArray | None:
    """Each row's story as a code (stories in sorted order), or None when there are no shared stories."""
    if clusters is None:
        return None
    return np.unique(np.asarray(clusters, dtype=np.str_), return_inverse=True)[1].astype(np.int64).reshape(-1)


def _row_clusters(
    row_tasks: Sequence[str], tasks: npt.NDArray[np.generic], clusters: npt.NDArray[np.generic] | None
) -> tuple[str, ...] | None:
    """The story of each row task from per-episode (task, story) labels; None where every task is its own story.

    Raises:
        ValueError: when one task's episodes name two stories.
    """
    if clusters is None:
        return None
    story: dict[str, str] = {}
    for task, label in zip(map(str, tasks.tolist()), map(str, clusters.tolist()), strict=True):
        if story.setdefault(task, label) != label:
            raise ValueError(f"task {task!r} belongs to two stories: {story[task]!r} and {label!r}")
    out = tuple(story[t] for t in row_tasks)
    return None if len(set(out)) == len(out) else out


def _pack(
    task_codes: IntArray, repeats: IntArray, columns: FloatMatrix, n_tasks: int
) -> tuple[IntArray, FloatMatrix, IntArray]:
    """Left-pack long-form cells into ``(n_tasks, max_repeats[, n_columns])`` matrices, rows in code order.

    Raises ValueError on a duplicated (task, repeat) cell. Every code in ``range(n_tasks)`` must occur.
    """
    order = np.lexsort((repeats, task_codes))
    codes, reps, cols = task_codes[order], repeats[order], columns[order]
    duplicated = (codes[1:] == codes[:-1]) & (reps[1:] == reps[:-1])
    if duplicated.any():
        first = int(np.flatnonzero(duplicated)[0]) + 1
        raise ValueError(f"duplicated (task, repeat) cell: task #{int(codes[first])}, repeat {int(reps[first])}")
    counts = np.bincount(codes, minlength=n_tasks).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    position = np.arange(codes.size, dtype=np.int64) - starts[codes]
    width = int(counts.max()) if n_tasks else 0
    dense_repeats = np.zeros((n_tasks, width), dtype=np.int64)
    dense_values = np.zeros((n_tasks, width, cols.shape[1]), dtype=np.float64)
    dense_repeats[codes, position] = reps
    dense_values[codes, position] = cols
    return dense_repeats, dense_values, counts


def cluster_by_task(
    task_ids: npt.ArrayLike, repeats: npt.ArrayLike, values: Values, clusters: npt.ArrayLike | None = None
) -> ClusteredSample:
    """Build a `ClusteredSample` from parallel per-episode arrays of one condition.

    Args:
        task_ids: task id of each episode (anything convertible to str).
        repeats: integer repeat index of each episode; (task, repeat) must be unique.
        values: the metric per episode: bool, 0/1 or real. NaN or None means missing: the episode is left
            out and counted in ``n_missing`` (a task left with no episode disappears).
        clusters: the story of each episode's task, where tasks share stories (None: every task is its own).

    Raises:
        ValueError: on arrays of different lengths, an infinite value, a duplicated (task, repeat) or a task
            in two stories.
    """
    tasks = _as_1d("task_ids", task_ids, np.str_)
    reps = _as_1d("repeats", repeats, np.int64).astype(np.int64)
    vals = _as_1d("values", values, np.float64).astype(np.float64)
    stories = None if clusters is None else _as_1d("clusters", clusters, np.str_)
    if not tasks.size == reps.size == vals.size == (tasks.size if stories is None else stories.size):
        raise ValueError(f"task_ids, repeats and values differ in length: {tasks.size}, {reps.size}, {vals.size}")
    if np.isinf(vals).any():
        raise ValueError("values contain an infinite number")
    present = ~np.isnan(vals)
    unique_tasks, codes = np.unique(tasks[present], return_inverse=True)
    dense_repeats, dense_values, counts = _pack(
        codes.astype(np.int64), reps[present], vals[present][:, None], unique_tasks.size
    )
    row_tasks = tuple(str(t) for t in unique_tasks)
    return ClusteredSample(
        task_ids=row_tasks,
        repeats=dense_repeats,
        values=dense_values[:, :, 0],
        counts=counts,
        n_missing=int((~present).sum()),
        clusters=_row_clusters(row_tasks, tasks, stories),
    )


def _long_form(sample: ClusteredSample) -> tuple[npt.NDArray[np.str_], IntArray, FloatMatrix]:
    mask = sample.mask
    rows = np.repeat(np.arange(sample.n_tasks), sample.counts)
    return np.asarray(sample.task_ids, dtype=np.str_)[rows], sample.repeats[mask], sample.values[mask]


def _common_clusters(
    a: ClusteredSample | PairedSample, b: ClusteredSample | PairedSample, row_tasks: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The story of each of ``row_tasks`` (tasks of both samples) from the two samples' own; None where each of them
    is its own story.

    Raises:
        ValueError: when the two samples put a task in different stories.
    """
    known = [s for s in (a, b) if s.clusters is not None]
    if not known:
        return None
    tasks = np.asarray([t for s in known for t in s.task_ids], dtype=np.str_)
    labels = np.asarray([c for s in known for c in s.clusters or ()], dtype=np.str_)
    return _row_clusters(row_tasks, tasks, labels)


def pair_by_task_repeat(a: ClusteredSample, b: ClusteredSample) -> PairedSample:
    """Align two conditions on (task, repeat), keeping only the cells both have.

    The cells dropped from each side are counted in ``n_unpaired_a`` / ``n_unpaired_b``.
    """
    tasks_a, reps_a, vals_a = _long_form(a)
    tasks_b, reps_b, vals_b = _long_form(b)
    common = np.intersect1d(tasks_a, tasks_b)
    in_a, in_b = np.isin(tasks_a, common), np.isin(tasks_b, common)
    code_a, code_b = np.searchsorted(common, tasks_a[in_a]), np.searchsorted(common, tasks_b[in_b])
    low = min(int(reps_a.min(initial=0)), int(reps_b.min(initial=0)))
    span = max(int(reps_a.max(initial=0)), int(reps_b.max(initial=0))) - low + 1
    key_a = code_a.astype(np.int64) * span + (reps_a[in_a] - low)
    key_b = code_b.astype(np.int64) * span + (reps_b[in_b] - low)
    keys, idx_a, idx_b = np.intersect1d(key_a, key_b, assume_unique=True, return_indices=True)
    used_codes, codes = np.unique(keys // span, return_inverse=True)
    columns = np.stack((vals_a[in_a][idx_a], vals_b[in_b][idx_b]), axis=1)
    dense_repeats, dense_values, counts = _pack(codes.astype(np.int64), keys % span + low, columns, used_codes.size)
    row_tasks = tuple(str(t) for t in common[used_codes])
    return PairedSample(
        task_ids=row_tasks,
        repeats=dense_repeats,
        a=np.ascontiguousarray(dense_values[:, :, 0]),
        b=np.ascontiguousarray(dense_values[:, :, 1]),
        counts=counts,
        n_unpaired_a=a.n_episodes - keys.size,
        n_unpaired_b=b.n_episodes - keys.size,
        clusters=_common_clusters(a, b, row_tasks),
    )


def split_by_condition(
    conditions: Sequence[Hashable],
    task_ids: npt.ArrayLike,
    repeats: npt.ArrayLike,
    values: Values,
    clusters: npt.ArrayLike | None = None,
) -> dict[Hashable, ClusteredSample]:
    """Split a whole per-episode table into one `ClusteredSample` per condition.

    ``conditions[i]`` is episode i's condition, e.g. ``(strategy, protection_mode)``. Keys appear in order of
    first occurrence. ``clusters``: each episode's story where tasks share stories (see `cluster_by_task`).
    """
    tasks = _as_1d("task_ids", task_ids, np.str_)
    reps = _as_1d("repeats", repeats, np.int64)
    vals = _as_1d("values", values, np.float64)
    stories = None if clusters is None else _as_1d("clusters", clusters, np.str_)
    if not len(conditions) == tasks.size == reps.size == vals.size == (tasks.size if stories is None else stories.size):
        raise ValueError("conditions, task_ids, repeats, values and clusters differ in length")
    rows: dict[Hashable, list[int]] = {}
    for i, condition in enumerate(conditions):
        rows.setdefault(condition, []).append(i)
    return {
        condition: cluster_by_task(tasks[index], reps[index], vals[index], None if stories is None else stories[index])
        for condition, index in ((c, np.asarray(r, dtype=np.int64)) for c, r in rows.items())
    }


@dataclass(frozen=True, eq=False)
class TaskPairs(_Stories):
    """Two conditions summarised per task, on the tasks both have: the input of the task-level paired analysis.

    Each condition contributes, per task, the sum and the number of its episodes (its repeats with a value); the
    two sides need not have the same repeats, since the unit is the task. ``a_only`` / ``b_only`` count the tasks
    one side lacks (left out).
    """

    task_ids: tuple[str, ...]
    sum_a: npt.NDArray[np.float64]
    n_a: IntArray
    sum_b: npt.NDArray[np.float64]
    n_b: IntArray
    integral: bool
    """Every episode value is an integer (0/1 outcomes, counts): the differences lie on an exact lattice."""
    a_only: int = 0
    b_only: int = 0
    clusters: tuple[str, ...] | None = None
    """The story of each task where tasks share stories: the paired analysis then takes the story as its unit."""
    balanced: TaskPairs | None = None
    """What the sign-flip test takes where some task's two sides have different numbers of episodes (a failed trial
    left out of one condition, a resumed run): the same tasks, each such task cut to equally many episodes per side
    (the repeats both sides have first, then each side's earliest others), every other task as it is. None where
    every task's sides are equal (the test takes these pairs)."""

    @property
    def n_tasks(self) -> int:
        """Tasks present in both conditions."""
        return len(self.task_ids)

    @property
    def tested(self) -> TaskPairs:
        """The pairs the sign-flip test takes (`balanced` where some task's sides differ in size, else these): the
        same tasks, so the test, the effect and power count the same ones."""
        return self if self.balanced is None else self.balanced

    @property
    def mean_a(self) -> npt.NDArray[np.float64]:
        """Per-task mean of condition a over its repeats."""
        return self.sum_a / self.n_a

    @property
    def mean_b(self) -> npt.NDArray[np.float64]:
        """Per-task mean of condition b over its repeats."""
        return self.sum_b / self.n_b

    @property
    def differences(self) -> npt.NDArray[np.float64]:
        """Per-task difference of means, a - b."""
        return self.mean_a - self.mean_b


def _is_integral(sample: ClusteredSample) -> bool:
    real = sample.values[sample.mask]
    return bool((real == np.round(real)).all())


def _equal_sides(a: ClusteredSample, row_a: int, b: ClusteredSample, row_b: int) -> tuple[float, float, int]:
    """One task's two sides cut to equally many episodes, ``k = min(n_a, n_b)``: the repeats both sides have first
    (both episodes of such a pair share their sampling seed), then each side's earliest other repeats; returns
    ``(sum a, sum b, k)``. Which episodes are kept depends on repeat labels only, never on values."""
    n_a, n_b = int(a.counts[row_a]), int(b.counts[row_b])
    reps_a, reps_b = a.repeats[row_a, :n_a], b.repeats[row_b, :n_b]
    k = min(n_a, n_b)

    def chosen(own: IntArray, other: IntArray) -> npt.NDArray[np.bool_]:
        shared = np.isin(own, other)
        rest = np.flatnonzero(~shared)[: k - int(shared.sum())]
        keep = shared.copy()
        keep[rest] = True
        return keep

    keep_a, keep_b = chosen(reps_a, reps_b), chosen(reps_b, reps_a)
    return float(a.values[row_a, :n_a][keep_a].sum()), float(b.values[row_b, :n_b][keep_b].sum()), k


def _balanced(
    a: ClusteredSample, b: ClusteredSample, pairs: TaskPairs, idx_a: IntArray, idx_b: IntArray
) -> TaskPairs | None:
    """``pairs`` with each task whose sides differ in size cut to equally many episodes per side (`_equal_sides`;
    see `TaskPairs.balanced`); None when every task's sides are equal. Every task of ``pairs`` stays: a task enters
    a paired comparison when each side has an episode with a value, in the test as in the effect and in power."""
    unequal = np.flatnonzero(pairs.n_a != pairs.n_b)
    if not unequal.size:
        return None
    sum_a, sum_b = pairs.sum_a.copy(), pairs.sum_b.copy()
    n_a, n_b = pairs.n_a.copy(), pairs.n_b.copy()
    for t in unequal.tolist():
        sum_a[t], sum_b[t], k = _equal_sides(a, int(idx_a[t]), b, int(idx_b[t]))
        n_a[t] = n_b[t] = k
    return replace(pairs, sum_a=sum_a, n_a=n_a, sum_b=sum_b, n_b=n_b)


def pair_by_task(a: ClusteredSample, b: ClusteredSample) -> TaskPairs:
    """Summarise two conditions per task (sum and count of each side's episodes) on the tasks both have, with the
    balanced pairs the sign-flip test takes where some task's sides differ in size (`TaskPairs.balanced`)."""
    ids_a = np.asarray(a.task_ids, dtype=np.str_)
    ids_b = np.asarray(b.task_ids, dtype=np.str_)
    common, idx_a, idx_b = np.intersect1d(ids_a, ids_b, assume_unique=True, return_indices=True)
    row_tasks = tuple(str(t) for t in common)
    pairs = TaskPairs(
        task_ids=row_tasks,
        sum_a=a.values.sum(axis=1)[idx_a],
        n_a=a.counts[idx_a],
        sum_b=b.values.sum(axis=1)[idx_b],
        n_b=b.counts[idx_b],
        integral=_is_integral(a) and _is_integral(b),
        a_only=a.n_tasks - common.size,
        b_only=b.n_tasks - common.size,
        clusters=_common_clusters(a, b, row_tasks),
    )
    balanced = _balanced(a, b, pairs, idx_a.astype(np.int64), idx_b.astype(np.int64))
    return pairs if balanced is None else replace(pairs, balanced=balanced)
