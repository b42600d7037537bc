"""pass^k: the chance that a task passes k times out of k.

Two estimates per condition and k, over the tasks with at least k repeats:
- ``all_pass``: the share of tasks whose first k repeats (in repeat order) all pass; with exactly k repeats
  per task this is "the share of tasks whose k repeats all pass".
- ``unbiased``: the mean over tasks of C(c, k) / C(n, k), c passes out of n repeats: the probability that
  k repeats drawn without replacement all pass, unbiased for the per-task pass^k.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np
from scipy.special import comb

from contextdelta.stats._bootstrap import _Columns, _interval, _run
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import PassK
from contextdelta.stats._samples import ClusteredSample

K = TypeVar("K", bound=Hashable)


def _check_binary(sample: ClusteredSample) -> None:
    real = sample.values[sample.mask]
    if not np.isin(real, (0.0, 1.0)).all():
        raise ValueError("pass^k needs a 0/1 outcome (e.g. success)")


def _per_task(sample: ClusteredSample, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Included-task mask and, for those tasks, the unbiased and all-pass values."""
    included = sample.counts >= k
    passes = sample.values[included].sum(axis=1)
    n = sample.counts[included]
    unbiased = comb(passes, k) / comb(n, k)
    all_pass = (sample.values[included, :k] == 1.0).all(axis=1).astype(np.float64)
    return included, unbiased, all_pass


def pass_hat_k_many(
    samples: Mapping[K, ClusteredSample], ks: Sequence[int], params: AnalysisParams = DEFAULT_PARAMS
) -> dict[K, dict[int, PassK]]:
    """pass^k for every sample and every k in ``ks`` (each k >= 1), with task-level bootstrap intervals.

    Tasks are resampled with replacement; repeats are not (a duplicated repeat would count one pass twice).
    Samples whose included tasks number the same share one draw, so results equal `pass_hat_k` alone.

    Raises:
        ValueError: when a value is not 0/1 or a k is below 1.
    """
    if any(k < 1 for k in ks):
        raise ValueError(f"k must be at least 1, got {list(ks)}")
    jobs: list[tuple[K, int, ClusteredSample, np.ndarray, np.ndarray, np.ndarray]] = []
    for key, sample in samples.items():
        _check_binary(sample)
        for k in ks:
            jobs.append((key, k, sample, *_per_task(sample, k)))
    results = _run(
        (
            _Columns(np.ones(unbiased.size, dtype=np.int64), np.stack((unbiased, all_pass), axis=1)[:, None, :])
            for _, _, _, _, unbiased, all_pass in jobs
        ),
        params,
    )
    out: dict[K, dict[int, PassK]] = {key: {} for key in samples}
    for (key, k, sample, included, unbiased, all_pass), (sums, tasks) in zip(jobs, results, strict=True):
        n_tasks = int(included.sum())
        estimates = [
            _interval(
                float(column.mean()) if n_tasks else None,
                sums[:, i] / np.maximum(tasks, 1.0),
                n_tasks=n_tasks,
                n_episodes=int(sample.counts[included].sum()),
                constant=bool(n_tasks == 0 or (column == column[0]).all()),
                params=params,
                n_missing=sample.n_missing,
            )
            for i, column in enumerate((unbiased, all_pass))
        ]
        if n_tasks == 0:
            estimates = [e.model_copy(update={"note": f"no data: no task has {k} repeats"}) for e in estimates]
        out[key][k] = PassK(
            k=k, unbiased=estimates[0], all_pass=estimates[1], n_tasks_excluded=sample.n_tasks - n_tasks
        )
    return out


def pass_hat_k(sample: ClusteredSample, k: int, params: AnalysisParams = DEFAULT_PARAMS) -> PassK:
    """pass^k of one condition's 0/1 outcome (both estimates, with intervals and the excluded-task count)."""
    return pass_hat_k_many({0: sample}, [k], params)[0][k]
