"""The flip rate: how often a task's repeats disagree, the direct measure of how far repeats are from copies."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np

from contextdelta.stats._bootstrap import TaskValues, check_binary, task_level_estimates
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import Estimate
from contextdelta.stats._samples import ClusteredSample

K = TypeVar("K", bound=Hashable)


def flip_rates(samples: Mapping[K, ClusteredSample], params: AnalysisParams = DEFAULT_PARAMS) -> dict[K, Estimate]:
    """Share of tasks whose repeats disagree on a 0/1 outcome, per sample, over the tasks with at least two repeats.

    The interval resamples tasks; when no task (or every task) flips it is the exact bound over tasks. A sample
    without a task of two repeats is ``no_data``.

    Raises:
        ValueError: when a value is not 0/1.
    """
    keys = list(samples)
    jobs = []
    for key in keys:
        sample = samples[key]
        check_binary(sample, "a flip rate")
        included = sample.counts >= 2
        passes = sample.values[included].sum(axis=1)
        flipped = ((passes > 0) & (passes < sample.counts[included])).astype(np.float64)
        groups = None if sample.groups is None else sample.groups[included]
        jobs.append(
            TaskValues(flipped, int(sample.counts[included].sum()), (0.0, 1.0), sample.n_missing, groups=groups)
        )
    return dict(zip(keys, task_level_estimates(jobs, params), strict=True))
