"""Result records of the statistics library.

Every number a report prints comes from one of these models. They never hold NaN or infinity
(`allow_inf_nan=False`): where a quantity cannot be computed the numeric fields are ``None`` and
``status`` says why, so a report can print "no data" instead of "nan".
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class EstimateStatus(StrEnum):
    """Why an interval looks the way it does.

    Precedence when several apply: ``no_data`` > ``undefined`` > ``single_task`` > ``constant`` > ``ok``.
    """

    OK = "ok"
    """A percentile bootstrap interval from at least two tasks."""
    CONSTANT = "constant"
    """Every observation has the same value (e.g. all pass): the interval is that value, [v, v]."""
    SINGLE_TASK = "single_task"
    """Only one task: there is no between-task variation to resample, so the interval collapses to the estimate."""
    NO_DATA = "no_data"
    """Nothing to estimate from (empty condition, no paired episodes, no task with k repeats)."""
    UNDEFINED = "undefined"
    """There is data but the statistic is undefined (a ratio whose denominator is zero)."""


class Estimate(BaseModel):
    """A point estimate with its percentile bootstrap interval.

    ``estimate``, ``low`` and ``high`` are all ``None`` exactly when ``status`` is ``no_data`` or
    ``undefined``; otherwise all three are finite and ``low <= high``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    estimate: float | None = Field(description="Point estimate on the observed episodes.")
    low: float | None = Field(description="Lower bound of the interval.")
    high: float | None = Field(description="Upper bound of the interval.")
    confidence: float = Field(description="Two-sided level of the interval, e.g. 0.95.")
    n_tasks: int = Field(ge=0, description="Tasks (clusters) the estimate is based on.")
    n_episodes: int = Field(ge=0, description="Episodes (or (task, repeat) pairs for paired statistics) used.")
    n_missing: int = Field(default=0, ge=0, description="Episodes left out because their value was missing.")
    n_unpaired: int = Field(default=0, ge=0, description="Episodes left out because the other condition lacks them.")
    status: EstimateStatus = Field(description="How to read the interval; see `EstimateStatus`.")
    note: str = Field(default="", description="One sentence for the report when status is not `ok`.")

    @property
    def has_value(self) -> bool:
        """True when estimate, low and high are numbers."""
        return self.estimate is not None

    def format(self, digits: int = 3, scale: float = 1.0, suffix: str = "") -> str:
        """Render as ``"0.625 [0.500, 0.750]"`` (values times ``scale``), or ``"no data"`` / ``"undefined"``."""
        if self.estimate is None or self.low is None or self.high is None:
            return self.status.value.replace("_", " ")
        point, low, high = (f"{scale * v:.{digits}f}{suffix}" for v in (self.estimate, self.low, self.high))
        return f"{point} [{low}, {high}]"


class PassK(BaseModel):
    """pass^k of one condition: how reliably a task passes k times out of k.

    Only tasks with at least k repeats count (``n_tasks_excluded`` says how many had fewer). Both estimates
    carry a task-level bootstrap interval (tasks resampled with replacement; repeats are not resampled,
    since duplicated repeats would bias pass^k upwards).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    k: int = Field(ge=1)
    unbiased: Estimate = Field(description="Mean over tasks of C(c, k) / C(n, k) (c passes in n repeats).")
    all_pass: Estimate = Field(description="Share of tasks whose first k repeats (in repeat order) all pass.")
    n_tasks_excluded: int = Field(ge=0, description="Tasks left out for having fewer than k repeats.")


class McNemarResult(BaseModel):
    """Exact McNemar test of two conditions on (task, repeat) pairs of a 0/1 outcome.

    The 2x2 table is ``[[both, only_a], [only_b, neither]]``; the test is the two-sided binomial test of
    ``only_a`` successes in ``only_a + only_b`` discordant pairs with p = 0.5, and p = 1 when there are none.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    n_pairs: int = Field(ge=0, description="(task, repeat) pairs present in both conditions.")
    n_tasks: int = Field(ge=0)
    both: int = Field(ge=0, description="Pairs where the outcome is 1 in both conditions.")
    only_a: int = Field(ge=0, description="Discordant pairs with the outcome only in condition a (McNemar's b).")
    only_b: int = Field(ge=0, description="Discordant pairs with the outcome only in condition b (McNemar's c).")
    neither: int = Field(ge=0, description="Pairs where the outcome is 0 in both conditions.")
    pvalue: float = Field(ge=0.0, le=1.0, description="Exact two-sided p-value.")
    pvalue_holm: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Holm-adjusted p-value within its family, once adjusted."
    )
    n_unpaired: int = Field(default=0, ge=0, description="Episodes left out because the other condition lacks them.")
    status: EstimateStatus = Field(description="`no_data` when there are no pairs, else `ok`.")
    note: str = ""
