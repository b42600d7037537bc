"""Analysis parameters: the few numbers every interval, test and power figure depends on, recorded in
``aggregate_metrics.json`` (``verify`` recomputes with the recorded values)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import norm, t

TaskInterval = Literal["expanded_percentile", "percentile"]
ShareInterval = Literal["clopper_pearson", "bootstrap"]


class AnalysisParams(BaseModel):
    """Parameters of the statistical analysis.

    They are part of the receipt: the same episodes, the same parameters and the same analysis source
    (`analysis_sha256`) give byte-identical intervals.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    resamples: int = Field(
        default=10_000,
        ge=1,
        le=100_000,
        description="Bootstrap resamples per interval (at most 100,000: each interval holds a resamples x tasks "
        "table, and Monte-Carlo error is negligible long before).",
    )
    seed: int = Field(default=0, ge=0, description="Seed of the numpy Generator that draws the resample indices.")
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0, description="Two-sided level of percentile intervals.")
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0, description="Family-wise level of the Holm-adjusted tests.")
    power_datasets: int = Field(
        default=2_000, ge=100, description="Simulated datasets per evaluated difference in the power figures."
    )
    task_interval: TaskInterval = Field(
        default="expanded_percentile",
        description="Interval of a statistic with one value per task (paired difference, pass^k, flip rate): "
        "`expanded_percentile` widens the percentile levels for the number of tasks (`task_percentiles`); "
        "`percentile` (reports written before 0.6.0) uses the plain levels.",
    )
    cluster_interval: TaskInterval = Field(
        default="expanded_percentile",
        description="Interval of the hierarchical task-cluster bootstrap (rates, means, token reductions, the rates "
        "per horizon): `expanded_percentile` widens the percentile levels for the number of tasks (stories), as "
        "`task_interval` does (`cluster_percentiles`); `percentile` (reports written by 0.13.0 and earlier) uses the "
        "plain levels, which held 0.92-0.94 at 12 tasks in `benchmarks/stats_coverage_grid.py`.",
    )
    share_interval: ShareInterval = Field(
        default="clopper_pearson",
        description="Interval of a mean over tasks of one value in [0, 1] per task (pass^k, flip rate): "
        "`clopper_pearson` is the Clopper-Pearson interval with n = the tasks (stories, where tasks share them) and "
        "n times the mean as the count (`share_bounds`: exact for a share of tasks, conservative for fractional "
        "task values); `bootstrap` (reports written by 0.13.0 and earlier) resamples tasks, bounded as "
        "`task_interval` says, and under-covers where task values are skewed.",
    )

    @property
    def percentiles(self) -> tuple[float, float]:
        """The lower and upper percentiles (0-100) of the bootstrap distribution that bound the interval."""
        tail = (1.0 - self.confidence) / 2.0
        return 100.0 * tail, 100.0 * (1.0 - tail)

    def cluster_percentiles(self, n_units: int) -> tuple[float, float]:
        """The percentiles bounding a hierarchical bootstrap interval over ``n_units`` tasks (stories): the expanded
        levels of `task_percentiles` under ``cluster_interval == "expanded_percentile"``, else the plain ones."""
        if self.cluster_interval == "percentile" or n_units < 2:
            return self.percentiles
        return _expanded_percentiles(self.confidence, n_units)

    def task_percentiles(self, n_tasks: int) -> tuple[float, float]:
        """The percentiles bounding the interval of a mean over ``n_tasks`` task values resampled alone.

        The plain percentile interval of such a mean is too narrow with few tasks: the bootstrap's spread is the
        standard error with divisor n instead of n - 1, and its tails are normal instead of Student's. The expanded
        percentile interval (Hesterberg 2015, "What teachers should know about the bootstrap", The American
        Statistician 69(4)) corrects both by taking the tail ``Phi(-sqrt(n / (n - 1)) * t_{n-1, 1 - tail})``
        instead of ``tail``: 1.73% instead of 2.5% for 24 tasks at 95%, 2.30% for 96.
        """
        if self.task_interval == "percentile" or n_tasks < 2:
            return self.percentiles
        return _expanded_percentiles(self.confidence, n_tasks)


@lru_cache(maxsize=256)
def _expanded_percentiles(confidence: float, n_tasks: int) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    expanded = float(norm.cdf(-math.sqrt(n_tasks / (n_tasks - 1)) * t.ppf(1.0 - tail, n_tasks - 1)))
    return 100.0 * expanded, 100.0 * (1.0 - expanded)


DEFAULT_PARAMS = AnalysisParams()

MIN_TASKS_FOR_COVERAGE = 12
"""Below this many tasks (stories, where tasks share them) the task-cluster bootstrap intervals under-cover: in
`benchmarks/stats_coverage.py`'s settings (3 repeats, 800 datasets a row, Monte-Carlo sd 0.008) the 95% intervals
of a rate and of a paired difference held the truth in 0.88-0.90 of datasets at 4 tasks and 0.93 at 6 and 10,
and 0.945-0.96 from 12 tasks on. The report warns when a rate or a comparison rests on fewer."""
