"""Task-level paired comparisons: the effect (difference of task means) with its interval, the primary test and the
episode-level 2x2 description, for many comparisons at once."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np

from contextdelta.stats._bootstrap import TaskValues, task_level_estimates
from contextdelta.stats._params import DEFAULT_PARAMS, AnalysisParams
from contextdelta.stats._results import PairedComparison
from contextdelta.stats._samples import ClusteredSample, pair_by_task, pair_by_task_repeat
from contextdelta.stats._signflip import lattice_differences, sign_flip_test
from contextdelta.stats._significance import pair_table

K = TypeVar("K", bound=Hashable)


def _binary(sample: ClusteredSample) -> bool:
    return bool(np.isin(sample.values[sample.mask], (0.0, 1.0)).all())


def paired_comparisons(
    samples: Mapping[K, tuple[ClusteredSample, ClusteredSample]], params: AnalysisParams = DEFAULT_PARAMS
) -> dict[K, PairedComparison]:
    """Compare condition a with condition b of each entry, task by task, on a 0/1 outcome.

    Per task, the mean of each condition over the repeats it has and their difference ``d``: the effect is the
    mean of ``d`` over the tasks both conditions have, with a task-cluster bootstrap interval (tasks resampled;
    an exact bound over tasks when every task has the same ``d``, e.g. no discordant task); the test is the
    sign-flip test of `sign_flip_test` (its Monte-Carlo route seeded with ``params.seed``). Copying every
    repeat leaves both unchanged: the unit is the task, or the story where tasks share stories (the interval then
    resamples stories and the test flips them; the effect is still the mean over tasks). Holm's adjustment is left
    to the caller (`holm_family`), which knows the family.

    Raises:
        ValueError: when a value is not 0/1.
    """
    keys = list(samples)
    jobs: list[TaskValues] = []
    by_task = []
    for key in keys:
        a, b = samples[key]
        if not (_binary(a) and _binary(b)):
            raise ValueError(f"paired comparison {key!r} needs a 0/1 outcome in both conditions")
        pairs = pair_by_task(a, b)
        by_task.append(pairs)
        exact = lattice_differences(pairs)
        values, divisor = (pairs.differences, 1) if exact is None else (exact[0].astype(np.float64), exact[1])
        jobs.append(
            TaskValues(
                values,
                int(pairs.n_a.sum() + pairs.n_b.sum()),
                bounds=(-1.0, 1.0),
                n_unpaired=int(a.counts.sum() - pairs.n_a.sum() + b.counts.sum() - pairs.n_b.sum()),
                divisor=divisor,
                groups=pairs.groups,
            )
        )
    differences = task_level_estimates(jobs, params)
    out: dict[K, PairedComparison] = {}
    for key, pairs, difference in zip(keys, by_task, differences, strict=True):
        a, b = samples[key]
        out[key] = PairedComparison(
            difference=difference,
            test=sign_flip_test(pairs, params.seed),
            episodes=pair_table(pair_by_task_repeat(a, b)),
        )
    return out


def paired_comparison(
    a: ClusteredSample, b: ClusteredSample, params: AnalysisParams = DEFAULT_PARAMS
) -> PairedComparison:
    """One task-level paired comparison of a 0/1 outcome, a vs b (see `paired_comparisons`)."""
    return paired_comparisons({0: (a, b)}, params)[0]
