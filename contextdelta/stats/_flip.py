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

FLIP_NEEDS_REPEATS = "needs at least 2 repeats per task"
"""Why a flip rate of a sample whose tasks each have one repeat (with a value) is no data: part of its note."""


def flip_rates(samples: Mapping[K, ClusteredSample], params: AnalysisParams = DEFAULT_PARAMS) -> dict[K, Estimate]:
    """Share of tasks whose repeats disagree on a 0/1 outcome, per sample, over the tasks with at least two repeats.

    The interval resamples tasks; when no task (or every task) flips it is the exact bound over tasks. A sample
    without a task of two repeats is ``no_data``, its note saying that a flip rate `FLIP_NEEDS_REPEATS` where the
    sample has tasks (each with one repeat with a value).

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
    out = dict(zip(keys, task_level_estimates(jobs, params), strict=True))
    for key in keys:
        sample = samples[key]
        if sample.n_tasks and not (sample.counts >= 2).any():
            tasks = "the task has" if sample.n_tasks == 1 else f"each of the {sample.n_tasks} tasks has"
            note = f"no data: a flip rate {FLIP_NEEDS_REPEATS}, and {tasks} one repeat with a value"
            out[key] = out[key].model_copy(update={"note": note})
    return out
