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

from contextdelta.stats._bootstrap import TaskValues, check_binary, task_level_estimates
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import PassK
from contextdelta.stats._samples import ClusteredSample

K = TypeVar("K", bound=Hashable)


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
    Where every task has the same value (e.g. all pass) the interval is the exact bound over tasks. Samples whose
    included tasks number the same share one draw, so results equal `pass_hat_k` alone.

    Raises:
        ValueError: when a value is not 0/1 or a k is below 1.
    """
    if any(k < 1 for k in ks):
        raise ValueError(f"k must be at least 1, got {list(ks)}")
    jobs: list[tuple[K, int, ClusteredSample, np.ndarray]] = []
    columns: list[TaskValues] = []
    for key, sample in samples.items():
        check_binary(sample, "pass^k")
        for k in ks:
            included, unbiased, all_pass = _per_task(sample, k)
            jobs.append((key, k, sample, included))
            episodes = int(sample.counts[included].sum())
            groups = None if sample.groups is None else sample.groups[included]
            columns += [
                TaskValues(column, episodes, (0.0, 1.0), sample.n_missing, groups=groups)
                for column in (unbiased, all_pass)
            ]
    estimates = task_level_estimates(columns, params)
    out: dict[K, dict[int, PassK]] = {key: {} for key in samples}
    for i, (key, k, sample, included) in enumerate(jobs):
        pair = estimates[2 * i : 2 * i + 2]
        if not included.any():
            pair = [
                e.model_copy(update={"note": f"no data: no task has {k} repeat{'' if k == 1 else 's'}"}) for e in pair
            ]
        out[key][k] = PassK(
            k=k, unbiased=pair[0], all_pass=pair[1], n_tasks_excluded=sample.n_tasks - int(included.sum())
        )
    return out


def pass_hat_k(sample: ClusteredSample, k: int, params: AnalysisParams = DEFAULT_PARAMS) -> PassK:
    """pass^k of one condition's 0/1 outcome (both estimates, with intervals and the excluded-task count)."""
    return pass_hat_k_many({0: sample}, [k], params)[0][k]
