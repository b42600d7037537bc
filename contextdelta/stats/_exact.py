"""Exact (Clopper-Pearson) bounds for the cases where a task-cluster bootstrap has nothing to resample.

When every task shows the same value (0 of 24 tasks with a stale action, or a single task), every bootstrap
resample reproduces that value and a percentile interval collapses to a point. A point says "certainly 0%", which
24 tasks cannot show. The honest statement is a binomial one over tasks: none of the ``n`` tasks deviated from the
common value ``c``, so the share of tasks in the population that deviate is at most the Clopper-Pearson upper bound
``u`` for 0 successes in ``n`` trials. A task that deviates moves the mean by at most the distance from ``c`` to
the end of the value range, so the mean lies in ``[c - (c - lo) * u, c + (hi - c) * u]``.

For a 0/1 rate at 0 this is exactly the Clopper-Pearson interval ``[0, u]`` (0 of 24 tasks: ``[0, 0.142]``), at 1
it is ``[1 - u, 1]``; for a paired difference of rates at 0 (no discordant task) it is ``[-u, u]``. The sample size
is the number of tasks, never the number of episodes: repeats of a task are not independent evidence.
"""

from __future__ import annotations

from functools import lru_cache

from scipy.stats import beta, binomtest


@lru_cache(maxsize=4096)
def zero_of_n_upper(n_tasks: int, confidence: float) -> float:
    """The two-sided Clopper-Pearson upper bound for 0 events in ``n_tasks`` trials (``1 - (alpha/2)**(1/n)``)."""
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be at least 1, got {n_tasks}")
    return float(binomtest(0, n_tasks).proportion_ci(confidence_level=confidence, method="exact").high)


def exact_bound(value: float, n_tasks: int, value_range: tuple[float, float], confidence: float) -> tuple[float, float]:
    """The exact bound around a value every one of ``n_tasks`` tasks showed (see the module docstring).

    Args:
        value: the common task-level value ``c``.
        n_tasks: the number of tasks that all showed it.
        value_range: ``(lo, hi)``, the range a task's value can take: ``(0, 1)`` for a rate, ``(-1, 1)`` for a
            paired difference of rates.
        confidence: two-sided level, e.g. 0.95.
    """
    lo, hi = value_range
    u = zero_of_n_upper(n_tasks, confidence)
    return max(lo, value - (value - lo) * u), min(hi, value + (hi - value) * u)


def share_bounds(mean: float, n_units: int, confidence: float) -> tuple[float, float]:
    """The Clopper-Pearson interval of a mean over ``n_units`` independent tasks (or stories) of values in [0, 1].

    The count is ``n_units * mean``, a whole number when every value is 0 or 1 (then this is the exact interval of
    a share of tasks) and a fraction otherwise (pass^k's C(c,k)/C(n,k)): the beta quantiles take it as it is. A
    value in [0, 1] with mean ``p`` varies at most as much as a 0/1 value with the same mean (variance at most
    ``p(1 - p)``), so the binomial over the units is the widest its mean can spread: where task values are skewed
    (most tasks near 0, a few near 1), the bootstrap's percentiles of the few tasks seen are too narrow and this is
    not.
    """
    if n_units < 1:
        raise ValueError(f"n_units must be at least 1, got {n_units}")
    tail = (1.0 - confidence) / 2.0
    count = min(max(mean, 0.0), 1.0) * n_units
    low = 0.0 if count <= 0.0 else float(beta.ppf(tail, count, n_units - count + 1.0))
    high = 1.0 if count >= n_units else float(beta.ppf(1.0 - tail, count + 1.0, n_units - count))
    return low, high
