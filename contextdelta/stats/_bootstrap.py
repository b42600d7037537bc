"""Hierarchical task-cluster bootstrap, vectorised.

One resample draws ``n_tasks`` tasks with replacement, then, for each drawn task t, ``counts[t]`` of its
repeats with replacement. Every statistic here is a ratio of sums over the resampled episodes, so a resample
is fully described by how often it uses each (task, repeat) cell: a weight matrix ``W`` of shape
``(resamples, cells)``. The sums of any number of value columns are then one matrix product ``W @ columns``.

The resample indices depend only on the seed and the sample's layout (its ``counts`` vector), never on the
values. Hence samples with the same layout (the usual case: every condition ran the same tasks and repeats)
are resampled with exactly the same task and repeat indices, a single draw serves all of them, and a statistic
computed in a batch equals the same statistic computed alone: bit for bit for integer-valued metrics (0/1
outcomes, counts, tokens), up to the last bits of the BLAS product's summation order for other real values.
For a `PairedSample` both conditions share its layout, which is the paired resampling: same tasks, same
repeat indices, pairs kept together.

Memory is bounded by drawing resamples in chunks of about ``_CELL_BUDGET`` cells.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import Estimate, EstimateStatus
from contextdelta.stats._samples import ClusteredSample, FloatMatrix, IntArray, PairedSample

K = TypeVar("K", bound=Hashable)

# Cells (resample x task x repeat slot) per chunk: about 16 MiB per int64 working array.
_CELL_BUDGET = 1 << 21

FloatVector = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class _Columns:
    """Value columns on one layout: ``cells`` is ``(n_tasks, width, n_columns)``, padding 0."""

    counts: IntArray
    cells: npt.NDArray[np.float64]

    @property
    def layout(self) -> tuple[int, int, bytes]:
        return self.counts.size, self.cells.shape[1], self.counts.tobytes()


def _resampled_sums(
    counts: IntArray, cells: npt.NDArray[np.float64], params: AnalysisParams
) -> tuple[FloatMatrix, FloatVector]:
    """Sums of each column over the episodes of every resample, and each resample's episode count.

    Returns ``(sums, episodes)`` of shapes ``(resamples, n_columns)`` and ``(resamples,)``.
    """
    n_tasks, width, n_columns = cells.shape
    n_cells = n_tasks * width
    # One extra all-zero row absorbs the slots beyond a drawn task's own repeat count.
    table = np.zeros((n_cells + 1, n_columns), dtype=np.float64)
    table[:n_cells] = cells.reshape(n_cells, n_columns)
    balanced = bool((counts == width).all())
    slots = np.arange(width)
    rng = np.random.default_rng(params.seed)
    chunk = max(1, _CELL_BUDGET // n_cells)
    sums = np.empty((params.resamples, n_columns), dtype=np.float64)
    episodes = np.empty(params.resamples, dtype=np.float64)
    pick_dtype = np.uint8 if width <= np.iinfo(np.uint8).max else np.int64
    for start in range(0, params.resamples, chunk):
        size = min(chunk, params.resamples - start)
        tasks = rng.integers(0, n_tasks, size=(size, n_tasks), dtype=np.int64)
        # Index of the drawn task's first cell in a flattened (resample, cell) weight matrix.
        first_cell = (tasks * width + (np.arange(size, dtype=np.int64) * (n_cells + 1))[:, None])[:, :, None]
        if width == 1:
            flat = first_cell
        elif balanced:
            flat = first_cell + rng.integers(0, width, size=(size, n_tasks, width), dtype=pick_dtype)
        else:
            n = counts[tasks][:, :, None]
            picks = np.minimum((rng.random((size, n_tasks, width)) * n).astype(np.int64), n - 1)
            padding = (np.arange(size, dtype=np.int64) * (n_cells + 1) + n_cells)[:, None, None]
            flat = np.where(slots < n, first_cell + picks, padding)
        weights = np.bincount(flat.ravel(), minlength=size * (n_cells + 1)).reshape(size, n_cells + 1)
        sums[start : start + size] = weights.astype(np.float64) @ table
        episodes[start : start + size] = n_cells if balanced else counts[tasks].sum(axis=1)
    return sums, episodes


def _run(jobs: Iterable[_Columns], params: AnalysisParams) -> list[tuple[FloatMatrix, FloatVector]]:
    """Resample every job, drawing indices once per distinct layout; returns each job's (sums, episodes)."""
    job_list = list(jobs)
    groups: dict[tuple[int, int, bytes], list[int]] = {}
    for i, job in enumerate(job_list):
        groups.setdefault(job.layout, []).append(i)
    out: list[tuple[FloatMatrix, FloatVector]] = [(np.empty((0, 0)), np.empty(0))] * len(job_list)
    for members in groups.values():
        counts = job_list[members[0]].counts
        if counts.size == 0:
            for i in members:
                out[i] = (np.zeros((params.resamples, job_list[i].cells.shape[2])), np.zeros(params.resamples))
            continue
        stacked = np.concatenate([job_list[i].cells for i in members], axis=2)
        sums, episodes = _resampled_sums(counts, stacked, params)
        offset = 0
        for i in members:
            width = job_list[i].cells.shape[2]
            out[i] = (sums[:, offset : offset + width], episodes)
            offset += width
    return out


def _interval(
    point: float | None,
    replicates: FloatVector,
    *,
    n_tasks: int,
    n_episodes: int,
    constant: bool,
    params: AnalysisParams,
    n_missing: int = 0,
    n_unpaired: int = 0,
    undefined_note: str = "the statistic is undefined on this data",
) -> Estimate:
    """Turn a point estimate and bootstrap replicates into an `Estimate`, applying the degenerate-case rules."""
    common = {
        "confidence": params.confidence,
        "n_tasks": n_tasks,
        "n_episodes": n_episodes,
        "n_missing": n_missing,
        "n_unpaired": n_unpaired,
    }
    if n_episodes == 0:
        return Estimate(estimate=None, low=None, high=None, status=EstimateStatus.NO_DATA, note="no data", **common)
    if point is None:
        return Estimate(
            estimate=None, low=None, high=None, status=EstimateStatus.UNDEFINED, note=undefined_note, **common
        )
    if n_tasks == 1:
        return Estimate(
            estimate=point,
            low=point,
            high=point,
            status=EstimateStatus.SINGLE_TASK,
            note="one task: no between-task variation, interval collapsed to the estimate",
            **common,
        )
    if constant:
        return Estimate(
            estimate=point,
            low=point,
            high=point,
            status=EstimateStatus.CONSTANT,
            note="every observation has the same value",
            **common,
        )
    finite = replicates[np.isfinite(replicates)]
    note = ""
    if finite.size < replicates.size:
        dropped = replicates.size - finite.size
        note = f"{dropped} of {replicates.size} resamples had a zero denominator and were left out"
    if finite.size == 0:
        note = "every resample had a zero denominator"
        return Estimate(estimate=None, low=None, high=None, status=EstimateStatus.UNDEFINED, note=note, **common)
    low, high = np.percentile(finite, params.percentiles)
    return Estimate(estimate=point, low=float(low), high=float(high), status=EstimateStatus.OK, note=note, **common)


def _mean_job(sample: ClusteredSample) -> _Columns:
    return _Columns(sample.counts, sample.values[:, :, None])


def _is_constant(values: FloatMatrix, mask: npt.NDArray[np.bool_]) -> bool:
    real = values[mask]
    return bool(real.size == 0 or (real == real[0]).all())


def bootstrap_means(samples: Mapping[K, ClusteredSample], params: AnalysisParams = DEFAULT_PARAMS) -> dict[K, Estimate]:
    """Mean of a per-episode metric for each sample, with hierarchical cluster bootstrap intervals.

    The mean pools episodes: sum of values over number of episodes (equal to the mean of task means when
    every task has the same number of repeats). Results equal `bootstrap_mean` of each sample alone (see the
    module docstring on rounding); samples with the same layout share one draw of resample indices.
    """
    keys = list(samples)
    results = _run((_mean_job(samples[k]) for k in keys), params)
    out: dict[K, Estimate] = {}
    for key, (sums, episodes) in zip(keys, results, strict=True):
        sample = samples[key]
        n = sample.n_episodes
        out[key] = _interval(
            float(sample.values.sum() / n) if n else None,
            sums[:, 0] / np.maximum(episodes, 1.0),
            n_tasks=sample.n_tasks,
            n_episodes=n,
            constant=_is_constant(sample.values, sample.mask),
            params=params,
            n_missing=sample.n_missing,
        )
    return out


def bootstrap_mean(sample: ClusteredSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Mean of a per-episode metric (success rate, stale-action rate, mean tokens...) with its interval."""
    return bootstrap_means({0: sample}, params)[0]


def bootstrap_differences(
    samples: Mapping[K, PairedSample], params: AnalysisParams = DEFAULT_PARAMS
) -> dict[K, Estimate]:
    """Paired difference of means, ``mean(a) - mean(b)``, for each paired sample, with paired intervals.

    Both conditions are resampled with the same task and repeat indices, so identical conditions give
    exactly [0, 0].
    """
    keys = list(samples)
    results = _run((_Columns(samples[k].counts, (samples[k].a - samples[k].b)[:, :, None]) for k in keys), params)
    out: dict[K, Estimate] = {}
    for key, (sums, episodes) in zip(keys, results, strict=True):
        sample = samples[key]
        n = sample.n_pairs
        delta = sample.a - sample.b
        out[key] = _interval(
            float(delta.sum() / n) if n else None,
            sums[:, 0] / np.maximum(episodes, 1.0),
            n_tasks=sample.n_tasks,
            n_episodes=n,
            constant=_is_constant(delta, sample.mask),
            params=params,
            n_unpaired=sample.n_unpaired,
        )
    return out


def bootstrap_difference(sample: PairedSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Paired difference ``mean(a) - mean(b)`` on (task, repeat) pairs with its paired bootstrap interval."""
    return bootstrap_differences({0: sample}, params)[0]


def bootstrap_relative_reductions(
    samples: Mapping[K, PairedSample], params: AnalysisParams = DEFAULT_PARAMS
) -> dict[K, Estimate]:
    """Relative reduction ``1 - sum(a) / sum(b)`` for each paired sample, with paired intervals.

    For tokens, ``a`` is the strategy and ``b`` is `full_history`: 0.4 means the strategy used 40% fewer
    tokens on the same episodes (multiply by 100 for percent; ``1 - estimate`` is the ratio). Undefined
    (status ``undefined``) when ``sum(b)`` is 0; resamples whose ``b`` sum is 0 are left out and counted in
    the note.
    """
    keys = list(samples)
    results = _run((_Columns(samples[k].counts, np.stack((samples[k].a, samples[k].b), axis=2)) for k in keys), params)
    out: dict[K, Estimate] = {}
    for key, (sums, _) in zip(keys, results, strict=True):
        sample = samples[key]
        total_b = float(sample.b.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            replicates = 1.0 - sums[:, 0] / sums[:, 1]
        ratio_constant = total_b != 0 and _is_constant(sample.a - (sample.a.sum() / total_b) * sample.b, sample.mask)
        out[key] = _interval(
            1.0 - float(sample.a.sum()) / total_b if total_b != 0 else None,
            replicates,
            n_tasks=sample.n_tasks,
            n_episodes=sample.n_pairs,
            constant=bool(ratio_constant),
            params=params,
            n_unpaired=sample.n_unpaired,
            undefined_note="the baseline sum is zero: a relative reduction is undefined",
        )
    return out


def bootstrap_relative_reduction(sample: PairedSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Paired relative reduction ``1 - sum(a) / sum(b)`` (a: strategy, b: baseline) with its interval."""
    return bootstrap_relative_reductions({0: sample}, params)[0]
