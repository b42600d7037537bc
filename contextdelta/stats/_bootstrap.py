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

Where tasks share stories (``groups``: a story code per task row), a resample draws stories instead of tasks, each
drawn story bringing every one of its tasks (then repeats within each task as before): the story is the
independent unit, its tasks (the same story at several horizons) a fixed part of the design. Every ratio stays a
ratio (a resample's episodes or tasks count in its denominator), so the point estimates do not change.

Memory is bounded by drawing resamples in chunks of about ``_CELL_BUDGET`` cells.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from scipy.stats import beta, norm

from contextdelta.stats._exact import exact_bound, share_bounds
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import Estimate, EstimateStatus
from contextdelta.stats._samples import ClusteredSample, FloatMatrix, IntArray, PairedSample

K = TypeVar("K", bound=Hashable)

# Cells (resample x task x repeat slot) per chunk: about 16 MiB per int64 working array.
_CELL_BUDGET = 1 << 21

FloatVector = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class TaskValues:
    """One value per task (a task-level statistic), with what the summary should say about its data."""

    values: FloatVector
    n_episodes: int
    bounds: tuple[float, float] | None = None
    n_missing: int = 0
    n_unpaired: int = 0
    divisor: int = 1
    """The per-task values are ``values / divisor``: exact fractions keep every resampled sum exact, so a batch
    gives the same bits as one statistic alone, and equal data give equal numbers."""
    groups: IntArray | None = None
    """The story code of each task where tasks share stories (the bootstrap then draws stories); None otherwise."""


@dataclass(frozen=True, eq=False)
class _Columns:
    """Value columns on one layout: ``cells`` is ``(n_tasks, width, n_columns)``, padding 0."""

    counts: IntArray
    cells: npt.NDArray[np.float64]
    groups: IntArray | None = None

    @property
    def layout(self) -> tuple[int, int, bytes, bytes]:
        stories = b"" if self.groups is None else self.groups.tobytes()
        return self.counts.size, self.cells.shape[1], self.counts.tobytes(), stories


def story_groups(groups: IntArray | None) -> IntArray | None:
    """Story codes renumbered 0..n-1 (in code order); None when there are none or every story has one task
    (the plain task bootstrap, bit for bit)."""
    if groups is None:
        return None
    unique, codes = np.unique(groups, return_inverse=True)
    return None if unique.size == groups.size else codes.astype(np.int64).reshape(-1)


def _story_members(groups: IntArray, n_tasks: int) -> IntArray:
    """``(n_stories, largest story)``: each story's task rows, padded with ``n_tasks`` (a task of no episode)."""
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    members = np.full((sizes.size, int(sizes.max())), n_tasks, dtype=np.int64)
    position = np.arange(groups.size) - starts[groups[order]]
    members[groups[order], position] = order
    return members


def _resampled_sums(
    counts: IntArray, cells: npt.NDArray[np.float64], params: AnalysisParams, groups: IntArray | None = None
) -> tuple[FloatMatrix, FloatVector]:
    """Sums of each column over the episodes of every resample, and each resample's episode count.

    Returns ``(sums, episodes)`` of shapes ``(resamples, n_columns)`` and ``(resamples,)``.
    """
    if groups is not None:
        return _resampled_story_sums(counts, cells, params, groups)
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


def _resampled_story_sums(
    counts: IntArray, cells: npt.NDArray[np.float64], params: AnalysisParams, groups: IntArray
) -> tuple[FloatMatrix, FloatVector]:
    """`_resampled_sums` drawing stories: each resample draws ``n_stories`` stories with replacement, takes every
    task of each, and ``counts[t]`` of each such task's repeats with replacement."""
    n_tasks, width, n_columns = cells.shape
    n_cells = n_tasks * width
    table = np.zeros((n_cells + 1, n_columns), dtype=np.float64)
    table[:n_cells] = cells.reshape(n_cells, n_columns)
    members = _story_members(groups, n_tasks)
    n_stories, largest = members.shape
    padded_counts = np.append(counts, 0)  # the padding task has no episode
    slots = np.arange(width)
    rng = np.random.default_rng(params.seed)
    chunk = max(1, _CELL_BUDGET // (n_stories * largest * width))
    sums = np.empty((params.resamples, n_columns), dtype=np.float64)
    episodes = np.empty(params.resamples, dtype=np.float64)
    for start in range(0, params.resamples, chunk):
        size = min(chunk, params.resamples - start)
        stories = rng.integers(0, n_stories, size=(size, n_stories), dtype=np.int64)
        tasks = members[stories].reshape(size, n_stories * largest)
        base = (np.arange(size, dtype=np.int64) * (n_cells + 1))[:, None, None]
        n = padded_counts[tasks][:, :, None]
        picks = np.minimum((rng.random((size, tasks.shape[1], width)) * n).astype(np.int64), np.maximum(n - 1, 0))
        flat = np.where(slots < n, base + tasks[:, :, None] * width + picks, base + n_cells)
        weights = np.bincount(flat.ravel(), minlength=size * (n_cells + 1)).reshape(size, n_cells + 1)
        sums[start : start + size] = weights.astype(np.float64) @ table
        episodes[start : start + size] = n.sum(axis=(1, 2))
    return sums, episodes


def _run(jobs: Iterable[_Columns], params: AnalysisParams) -> list[tuple[FloatMatrix, FloatVector]]:
    """Resample every job, drawing indices once per distinct layout; returns each job's (sums, episodes)."""
    job_list = [_Columns(job.counts, job.cells, story_groups(job.groups)) for job in jobs]
    layouts: dict[tuple[int, int, bytes, bytes], list[int]] = {}
    for i, job in enumerate(job_list):
        layouts.setdefault(job.layout, []).append(i)
    out: list[tuple[FloatMatrix, FloatVector]] = [(np.empty((0, 0)), np.empty(0))] * len(job_list)
    for members in layouts.values():
        counts = job_list[members[0]].counts
        if counts.size == 0:
            for i in members:
                out[i] = (np.zeros((params.resamples, job_list[i].cells.shape[2])), np.zeros(params.resamples))
            continue
        stacked = np.concatenate([job_list[i].cells for i in members], axis=2)
        sums, episodes = _resampled_sums(counts, stacked, params, job_list[members[0]].groups)
        offset = 0
        for i in members:
            width = job_list[i].cells.shape[2]
            out[i] = (sums[:, offset : offset + width], episodes)
            offset += width
    return out


@lru_cache(maxsize=256)
def _order_statistic_levels(resamples: int, level: float) -> tuple[float, float]:
    """Percentile levels (0-100) one standard error either side of the ``level`` quantile of ``resamples`` draws.

    The k-th of B order statistics sits at a Beta(k, B - k + 1) quantile of the distribution, so the empirical
    quantile at ``level`` varies from one seed to another like the quantiles of Beta(Bq + 1, B(1 - q) + 1) at
    the normal +-1 sd points (the order-statistic estimate of a quantile's Monte-Carlo error).
    """
    q = level / 100.0
    low, high = beta.ppf([norm.cdf(-1.0), norm.cdf(1.0)], resamples * q + 1.0, resamples * (1.0 - q) + 1.0)
    return 100.0 * float(low), 100.0 * float(high)


def _percentile_interval(finite: FloatVector, percentiles: tuple[float, float]) -> tuple[float, float, float]:
    """``(low, high, mc_se)``: the interval between the ``percentiles`` (0-100) of the replicates, and the Monte-Carlo
    standard error of its ends (the larger).

    The six quantiles (both ends and one standard error either side of each) interpolate linearly between order
    statistics, as `np.percentile` does by default, from one partial sort.
    """
    q_low, q_high = percentiles
    levels = np.array(
        [q_low, q_high, *_order_statistic_levels(finite.size, q_low), *_order_statistic_levels(finite.size, q_high)]
    )
    position = levels / 100.0 * (finite.size - 1)
    below = np.floor(position).astype(np.int64)
    above = np.minimum(below + 1, finite.size - 1)
    ordered = np.partition(finite, np.unique(np.concatenate((below, above))))
    fraction = position - below
    start, end = ordered[below], ordered[above]
    # Linear interpolation between order statistics (`np.percentile`'s default), from the nearer end.
    values = np.where(fraction >= 0.5, end - (end - start) * (1.0 - fraction), start + (end - start) * fraction)
    low, high, a, b, c, d = values.tolist()
    return float(low), float(high), float(max(b - a, d - c) / 2.0)


def _interval(
    point: float | None,
    replicates: FloatVector,
    *,
    n_tasks: int,
    n_episodes: int,
    constant: bool,
    params: AnalysisParams,
    bounds: tuple[float, float] | None = None,
    n_missing: int = 0,
    n_unpaired: int = 0,
    undefined_note: str = "the statistic is undefined on this data",
    percentiles: tuple[float, float] | None = None,
    n_stories: int | None = None,
) -> Estimate:
    """Turn a point estimate and bootstrap replicates into an `Estimate`, applying the degenerate-case rules.

    ``percentiles``: the levels (0-100) bounding the interval; None: ``params.cluster_percentiles`` of the tasks
    (stories). ``constant``: every
    value the bootstrap resamples is equal, so every replicate equals the point. ``bounds``: the range of a task's
    value for a bounded quantity (a rate: (0, 1)); then a degenerate case (constant, or a single task) gets the
    exact bound of `exact_bound` instead of a zero-width interval. ``n_stories``: the independent units where tasks
    share stories (the exact bound's n); None where every task is its own.
    """
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
    units = n_tasks if n_stories is None else n_stories
    # Stories alike (each with the same tasks' values, e.g. every story failing at horizon 1 only) make every
    # resample equal although the tasks differ: as degenerate as equal tasks, so the same rules apply.
    alike = not constant and units > 1 and resamples_all_equal(replicates)
    if (units == 1 or constant or alike) and bounds is not None:
        low, high = exact_bound(point, units, bounds, params.confidence)
        tasks = "the one task" if n_tasks == 1 else f"all {n_tasks} tasks"
        n = (
            f"{n_tasks} task{'' if n_tasks == 1 else 's'}"
            if n_stories is None
            else f"{n_stories} {'story' if n_stories == 1 else 'stories'}"
        )
        why = (
            f"{_alike(n_tasks, n_stories)} show the same value, so every resample gives it"
            if alike
            else f"{tasks} at the same value, nothing for a bootstrap to resample"
        )
        return Estimate(
            estimate=point,
            low=low,
            high=high,
            status=EstimateStatus.EXACT_BOUND,
            note=f"exact Clopper-Pearson bound with n = {n}: {why}",
            **common,
        )
    # An unbounded quantity with nothing to resample has no interval: [v, v] would read as certainty.
    if units == 1:
        return Estimate(
            estimate=point,
            low=None,
            high=None,
            status=EstimateStatus.SINGLE_TASK,
            note="no interval: one task, so there is no between-task variation for a bootstrap to resample"
            if n_stories is None
            else f"no interval: one story ({n_tasks} tasks), so there is no between-story variation for a bootstrap "
            "to resample",
            **common,
        )
    if constant or alike:
        return Estimate(
            estimate=point,
            low=None,
            high=None,
            status=EstimateStatus.CONSTANT,
            note=f"no interval: {_alike(n_tasks, n_stories)} show the same value, so the bootstrap cannot vary"
            if alike
            else f"no interval: all {n_tasks} tasks have the same value, so the bootstrap cannot vary",
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
    low, high, mc_se = _percentile_interval(finite, percentiles or params.cluster_percentiles(units))
    return Estimate(estimate=point, low=low, high=high, status=EstimateStatus.OK, note=note, mc_se=mc_se, **common)


MIN_RESAMPLES_TO_CALL_CONSTANT = 30
"""Resamples that must all agree before a bootstrap counts as degenerate although its tasks differ. A bootstrap that
can vary rarely repeats one value (two stories that differ: the mixed draw, probability 1/2), so 30 agreeing
resamples by chance are about as likely as 1 in 2^29 there; with fewer (``--resamples 1``) agreement says nothing."""


def resamples_all_equal(values: FloatVector) -> bool:
    """At least `MIN_RESAMPLES_TO_CALL_CONSTANT` resample values, all finite and equal: the bootstrap degenerated
    (stories alike, or tasks alike over their repeats) whatever the tasks' own values."""
    return bool(
        values.size >= MIN_RESAMPLES_TO_CALL_CONSTANT and np.isfinite(values).all() and (values == values[0]).all()
    )


def _alike(n_tasks: int, n_stories: int | None) -> str:
    """Who agrees when every resample is equal but the tasks are not: the stories, or the tasks' means."""
    if n_stories is None:
        return f"all {n_tasks} tasks (over their repeats)"
    return f"all {n_stories} stories ({n_tasks} tasks)"


def _mean_job(sample: ClusteredSample) -> _Columns:
    return _Columns(sample.counts, sample.values[:, :, None], sample.groups)


def _is_constant(values: FloatMatrix, mask: npt.NDArray[np.bool_]) -> bool:
    real = values[mask]
    return bool(real.size == 0 or (real == real[0]).all())


Bounds = tuple[float, float] | None
"""The range of a bounded quantity (a rate: (0, 1)), for the exact bound of a degenerate sample; None: unbounded."""


def _embedded_job(sample: ClusteredSample, design: ClusteredSample) -> _Columns:
    """``sample``'s values placed in ``design``'s (task, repeat) grid, with a presence column: the job resamples
    the design's tasks and repeats and leaves the cells without a value out of both sums.

    Raises:
        ValueError: when the sample has a (task, repeat) the design lacks.
    """
    rows = np.repeat(np.arange(design.n_tasks, dtype=np.int64), design.counts)
    span = int(max(design.repeats.max(initial=0), sample.repeats.max(initial=0))) + 1
    design_keys = rows * span + design.repeats[design.mask]
    order = np.argsort(design_keys, kind="stable")
    sample_rows = np.searchsorted(np.asarray(design.task_ids), np.asarray(sample.task_ids))
    sample_keys = np.repeat(sample_rows, sample.counts) * span + sample.repeats[sample.mask]
    at = np.searchsorted(design_keys[order], sample_keys)
    if (at >= design_keys.size).any() or (
        design_keys[order][np.minimum(at, design_keys.size - 1)] != sample_keys
    ).any():
        raise ValueError("the sample has a (task, repeat) cell that its design lacks")
    flat = np.flatnonzero(design.mask.ravel())[order[at]]
    cells = np.zeros((design.values.size, 2), dtype=np.float64)
    cells[flat, 0] = sample.values[sample.mask]
    cells[flat, 1] = 1.0
    return _Columns(design.counts, cells.reshape(design.n_tasks, design.values.shape[1], 2), design.groups)


def bootstrap_means(
    samples: Mapping[K, ClusteredSample],
    params: AnalysisParams = DEFAULT_PARAMS,
    bounds: Bounds | Mapping[K, Bounds] = None,
    designs: Mapping[K, ClusteredSample] | None = None,
) -> dict[K, Estimate]:
    """Mean of a per-episode metric for each sample, with hierarchical cluster bootstrap intervals.

    The mean pools episodes: sum of values over number of episodes (equal to the mean of task means when
    every task has the same number of repeats). Results equal `bootstrap_mean` of each sample alone (see the
    module docstring on rounding); samples with the same layout share one draw of resample indices, so one call
    with many samples (every metric of every condition) costs about one draw per layout.

    ``bounds``: the metric's range when it is bounded, one for all samples or one per sample. ``designs``: for a
    sample with values missing (failed trials for a safety rate, N/A cells), the sample of every episode of its
    condition: the bootstrap then resamples the design's tasks and repeats and leaves the episodes without a value
    out of each resample's sums (a ratio estimator), so every metric of a condition shares one draw.
    """
    return {key: found[0] for key, found in means_with_replicates(samples, params, bounds, designs).items()}


def means_with_replicates(
    samples: Mapping[K, ClusteredSample],
    params: AnalysisParams = DEFAULT_PARAMS,
    bounds: Bounds | Mapping[K, Bounds] = None,
    designs: Mapping[K, ClusteredSample] | None = None,
) -> dict[K, tuple[Estimate, FloatVector]]:
    """`bootstrap_means` with each sample's bootstrap replicates of the mean (NaN where a resample's denominator is
    zero): statistics built from several samples' means (the dose-response curve) resample them in the same draw."""
    keys = list(samples)
    per_sample = bounds if isinstance(bounds, Mapping) else dict.fromkeys(keys, bounds)
    embedded = designs or {}
    jobs = [_embedded_job(samples[k], embedded[k]) if k in embedded else _mean_job(samples[k]) for k in keys]
    results = _run(jobs, params)
    out: dict[K, tuple[Estimate, FloatVector]] = {}
    for key, (sums, episodes) in zip(keys, results, strict=True):
        sample = samples[key]
        n = sample.n_episodes
        with np.errstate(divide="ignore", invalid="ignore"):
            replicates = sums[:, 0] / (sums[:, 1] if key in embedded else np.maximum(episodes, 1.0))
        estimate = _interval(
            float(sample.values.sum() / n) if n else None,
            replicates,
            n_tasks=sample.n_tasks,
            n_episodes=n,
            constant=_is_constant(sample.values, sample.mask),
            params=params,
            bounds=per_sample.get(key),
            n_missing=sample.n_missing,
            n_stories=None if sample.clusters is None else sample.n_units,
        )
        out[key] = (estimate, replicates)
    return out


def bootstrap_mean(sample: ClusteredSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Mean of a per-episode metric (mean tokens, steps...) with its hierarchical bootstrap interval."""
    return bootstrap_means({0: sample}, params)[0]


def check_binary(sample: ClusteredSample, what: str) -> None:
    """Raise ValueError unless every value of ``sample`` is 0 or 1."""
    if not np.isin(sample.values[sample.mask], (0.0, 1.0)).all():
        raise ValueError(f"{what} needs a 0/1 outcome")


def bootstrap_rates(samples: Mapping[K, ClusteredSample], params: AnalysisParams = DEFAULT_PARAMS) -> dict[K, Estimate]:
    """Rate (share of episodes) of a 0/1 metric for each sample, with hierarchical cluster bootstrap intervals.

    Where the bootstrap degenerates (every episode 0, every episode 1, or one task) the interval is the exact
    Clopper-Pearson bound with n = the number of tasks (status ``exact_bound``), never a zero-width interval.

    Raises:
        ValueError: when a value is not 0/1.
    """
    for sample in samples.values():
        check_binary(sample, "a rate")
    return bootstrap_means(samples, params, bounds=(0.0, 1.0))


def bootstrap_rate(sample: ClusteredSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Rate of a 0/1 metric with its interval or exact bound (see `bootstrap_rates`)."""
    return bootstrap_rates({0: sample}, params)[0]


def task_level_estimates(jobs: Sequence[TaskValues], params: AnalysisParams = DEFAULT_PARAMS) -> list[Estimate]:
    """The mean over tasks of one value per task, for each job, with a bootstrap that resamples tasks only.

    Used for statistics defined per task (pass^k, flip rate, the paired difference of task means): resampling
    repeats inside a task would change what the per-task value means. Jobs with the same number of tasks share
    one draw of task indices. The interval is bounded by ``params.task_percentiles(n_tasks)``: a one-level
    percentile interval of a mean is too narrow with few tasks, and the expanded levels correct it. A job whose
    tasks share stories (``groups``) resamples stories, each with all its tasks (the mean stays the mean over the
    resampled tasks), and its levels are expanded for the number of stories.

    A job of values in [0, 1] (``bounds == (0, 1)``: pass^k, flip rate) gets, under ``params.share_interval ==
    "clopper_pearson"``, the Clopper-Pearson interval over its tasks or stories (`share_bounds`) instead of the
    percentile interval: such values are often skewed (most tasks at 0, a few near 1), where percentiles of the
    tasks seen under-cover. The degenerate cases keep their rules (`_interval`).
    """
    results = _run(
        (_Columns(np.ones(job.values.size, dtype=np.int64), job.values[:, None, None], job.groups) for job in jobs),
        params,
    )
    out = []
    for job, (sums, tasks) in zip(jobs, results, strict=True):
        n = job.values.size
        grouped = story_groups(job.groups)
        stories = None if grouped is None else int(grouped.max()) + 1
        out.append(
            _interval(
                float(job.values.sum()) / n / job.divisor if n else None,
                sums[:, 0] / np.maximum(tasks, 1.0) / job.divisor,
                n_tasks=n,
                n_episodes=job.n_episodes if n else 0,
                constant=bool(n == 0 or (job.values == job.values[0]).all()),
                params=params,
                bounds=job.bounds,
                n_missing=job.n_missing,
                n_unpaired=job.n_unpaired,
                percentiles=params.task_percentiles(n if stories is None else stories),
                n_stories=stories,
            )
        )
        found = out[-1]
        if (
            found.status is EstimateStatus.OK
            and job.bounds == (0.0, 1.0)
            and params.share_interval == "clopper_pearson"
        ):
            low, high = share_bounds(float(job.values.sum()) / n / job.divisor, stories or n, params.confidence)
            out[-1] = found.model_copy(update={"low": low, "high": high, "mc_se": None})
    return out


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
    results = _run(
        (_Columns(samples[k].counts, np.stack((samples[k].a, samples[k].b), axis=2), samples[k].groups) for k in keys),
        params,
    )
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
            n_stories=None if sample.clusters is None else sample.n_units,
        )
    return out


def bootstrap_relative_reduction(sample: PairedSample, params: AnalysisParams = DEFAULT_PARAMS) -> Estimate:
    """Paired relative reduction ``1 - sum(a) / sum(b)`` (a: strategy, b: baseline) with its interval."""
    return bootstrap_relative_reductions({0: sample}, params)[0]
