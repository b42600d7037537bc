"""Result records of the statistics library.

Every number a report prints comes from one of these models. They never hold NaN or infinity
(`allow_inf_nan=False`): where a quantity cannot be computed the numeric fields are ``None`` and
``status`` says why, so a report can print "no data" instead of "nan". A slope that is infinite (separated data)
is the string ``"inf"`` or ``"-inf"``, which JSON can carry and ``float()`` reads.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.stats._precision import fixed


class EstimateStatus(StrEnum):
    """Why an interval looks the way it does.

    Precedence when several apply: ``no_data`` > ``undefined`` > ``exact_bound`` > ``single_task`` > ``constant``
    > ``ok``.
    """

    OK = "ok"
    """An interval from at least two tasks: a percentile bootstrap interval, or for a mean over tasks of values in
    [0, 1] (pass^k, flip rate) the Clopper-Pearson interval over tasks (`AnalysisParams.share_interval`)."""
    EXACT_BOUND = "exact_bound"
    """The bootstrap degenerates (every task at the same value, or one task) and the quantity is bounded (a rate,
    a share of tasks, a difference of rates): an exact Clopper-Pearson bound over tasks (`exact_bound`)."""
    CONSTANT = "constant"
    """An unbounded quantity (tokens, counts) with every observation equal: the bootstrap cannot vary, so there is
    no interval (``low`` and ``high`` are None), never a zero-width [v, v] that would read as certainty."""
    SINGLE_TASK = "single_task"
    """An unbounded quantity from one task (or one story): no between-task variation to resample, so there is no
    interval (``low`` and ``high`` are None)."""
    NO_DATA = "no_data"
    """Nothing to estimate from (empty condition, no paired episodes, no task with k repeats)."""
    UNDEFINED = "undefined"
    """There is data but the statistic is undefined (a ratio whose denominator is zero)."""


class Estimate(BaseModel):
    """A point estimate with its percentile bootstrap interval.

    ``estimate``, ``low`` and ``high`` are all ``None`` exactly when ``status`` is ``no_data`` or
    ``undefined``; ``low`` and ``high`` alone are ``None`` when it is ``constant`` or ``single_task`` (nothing for
    a bootstrap to resample: no interval); otherwise all three are finite and ``low <= high``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    estimate: float | None = Field(description="Point estimate on the observed episodes.")
    low: float | None = Field(
        description="Lower bound of the interval; null when there is none (status constant, single_task, no_data, "
        "undefined)."
    )
    high: float | None = Field(
        description="Upper bound of the interval; null when there is none (status constant, single_task, no_data, "
        "undefined)."
    )
    confidence: float = Field(description="Two-sided level of the interval, e.g. 0.95.")
    n_tasks: int = Field(ge=0, description="Tasks (clusters) the estimate is based on.")
    n_episodes: int = Field(
        ge=0,
        description="Episodes with a value that the estimate uses. A paired difference of task means (a comparison's "
        "`difference`) counts the episodes of both conditions together (a + b, in the tasks both have); a paired "
        "token reduction counts its (task, repeat) pairs.",
    )
    n_missing: int = Field(default=0, ge=0, description="Episodes left out because their value was missing.")
    n_unpaired: int = Field(default=0, ge=0, description="Episodes left out because the other condition lacks them.")
    status: EstimateStatus = Field(description="How to read the interval; see `EstimateStatus`.")
    note: str = Field(default="", description="One sentence for the report when status is not `ok`.")
    mc_se: float | None = Field(
        default=None,
        ge=0.0,
        description="Monte-Carlo standard error of the interval ends (the larger of the two) from the finite number "
        "of resamples; None where no resampling was involved (exact bounds, degenerate or empty data).",
    )

    @property
    def is_exact(self) -> bool:
        """True when the interval is an exact bound rather than a bootstrap interval."""
        return self.status is EstimateStatus.EXACT_BOUND

    @property
    def has_value(self) -> bool:
        """True when estimate, low and high are numbers."""
        return self.estimate is not None

    @property
    def no_interval(self) -> str:
        """Why an estimate has no interval, in a few words (``"1 task"``, ``"all 3 tasks equal"``); ``""`` when it
        has one or has no estimate."""
        if self.estimate is None or (self.low is not None and self.high is not None):
            return ""
        if self.status is EstimateStatus.CONSTANT:
            return "all stories alike" if " stories (" in self.note else f"all {self.n_tasks} tasks equal"
        return "1 task" if self.n_tasks == 1 else f"1 story of {self.n_tasks} tasks"

    def format(self, digits: int = 3, scale: float = 1.0, suffix: str = "") -> str:
        """Render as ``"0.625 [0.500, 0.750]"`` (values times ``scale``), ``"1.000 (no interval: 1 task)"`` where
        the bootstrap had nothing to resample, or ``"no data"`` / ``"undefined"``."""
        if self.estimate is None:
            return self.status.value.replace("_", " ")
        if self.low is None or self.high is None:
            point = f"{fixed(self.estimate, digits, scale=scale)}{suffix}"
            return f"{point} (no interval: {self.no_interval})"
        point, low, high = (f"{fixed(v, digits, scale=scale)}{suffix}" for v in (self.estimate, self.low, self.high))
        return f"{point} [{low}, {high}]"


class PassK(BaseModel):
    """pass^k of one condition: how reliably a task passes k times out of k.

    Only tasks with at least k repeats count (``n_tasks_excluded`` says how many had fewer). Both estimates
    carry a task-level bootstrap interval (tasks resampled with replacement; repeats are not resampled,
    since duplicated repeats would bias pass^k upwards).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    k: int = Field(ge=1, description="The number of repeats that must all pass.")
    unbiased: Estimate = Field(description="Mean over tasks of C(c, k) / C(n, k) (c passes in n repeats).")
    all_pass: Estimate = Field(description="Share of tasks whose first k repeats (in repeat order) all pass.")
    n_tasks_excluded: int = Field(ge=0, description="Tasks left out for having fewer than k repeats.")


class PairTable(BaseModel):
    """The episode-level 2x2 table of a 0/1 outcome on (task, repeat) pairs: a description, never a test.

    Repeats of a task are near copies, so the pairs are not independent: the inference is task-level
    (`SignFlipTest`). The table is ``[[both, only_a], [only_b, neither]]``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    n_pairs: int = Field(ge=0, description="(task, repeat) pairs present in both conditions.")
    n_tasks: int = Field(ge=0, description="Tasks with at least one pair.")
    both: int = Field(ge=0, description="Pairs where the outcome is 1 in both conditions.")
    only_a: int = Field(ge=0, description="Discordant pairs with the outcome only in condition a.")
    only_b: int = Field(ge=0, description="Discordant pairs with the outcome only in condition b.")
    neither: int = Field(ge=0, description="Pairs where the outcome is 0 in both conditions.")
    n_unpaired: int = Field(default=0, ge=0, description="Episodes left out because the other condition lacks them.")


class SignFlipMethod(StrEnum):
    """How a sign-flip p-value was obtained."""

    EXACT = "exact"
    """The whole sign-flip distribution: every one of the 2^m sign patterns of the m discordant tasks."""
    MONTE_CARLO = "monte_carlo"
    """``sign_patterns`` seeded random sign patterns (used only when the exact distribution is too large)."""
    NOT_TESTABLE = "not_testable"
    """No discordant task: the test cannot move (p would be 1 whatever happened), so there is no test."""


class SignFlipTest(BaseModel):
    """The primary paired test: an exact sign-flip permutation test over tasks.

    Per task, the mean outcome of each condition over its repeats and their difference ``d``; under the null
    hypothesis the two conditions are exchangeable within a task, so every sign pattern of the ``d`` is equally
    likely. The p-value is the two-sided share of sign patterns whose ``|sum d|`` is at least the observed one.
    With one repeat per task and a 0/1 outcome it is the exact McNemar test on tasks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    n_tasks: int = Field(ge=0, description="Tasks present in both conditions (the unit of the test).")
    n_discordant: int = Field(ge=0, description="Tasks whose mean differs between the conditions.")
    n_positive: int = Field(ge=0, description="Discordant tasks where condition a is higher.")
    n_negative: int = Field(ge=0, description="Discordant tasks where condition b is higher.")
    statistic: float = Field(description="Sum over tasks of the per-task differences a - b.")
    method: SignFlipMethod = Field(
        description="exact (computed or enumerated), monte_carlo (seeded sign patterns) or not_testable (no "
        "discordant task)."
    )
    pvalue: float | None = Field(ge=0.0, le=1.0, description="Two-sided p-value; None when not testable.")
    pvalue_holm: float | None = Field(
        default=None, ge=0.0, le=1.0, description="Holm-adjusted within its family (testable members only)."
    )
    family_size: int | None = Field(default=None, ge=1, description="Testable members of the Holm family.")
    sign_patterns: int | None = Field(
        default=None, ge=1, description="Monte Carlo only: the number of seeded random sign patterns."
    )
    seed: int | None = Field(default=None, description="Monte Carlo only: the seed of the sign patterns.")
    pvalue_mc_se: float | None = Field(default=None, ge=0.0, description="Monte Carlo only: standard error of p.")

    @property
    def testable(self) -> bool:
        """False when no task is discordant (the comparison leaves its Holm family)."""
        return self.method is not SignFlipMethod.NOT_TESTABLE


class PairedComparison(BaseModel):
    """A task-level paired comparison of conditions a and b on one outcome: effect, test and description."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    difference: Estimate = Field(
        description="Mean over tasks of (mean of a - mean of b over each task's repeats), with a task-cluster "
        "bootstrap interval, or an exact bound when every task has the same difference; its n_episodes counts the "
        "episodes of both conditions together (a + b)."
    )
    test: SignFlipTest = Field(description="The primary test: the exact sign-flip test over tasks.")
    episodes: PairTable = Field(description="Episode-level 2x2 table on (task, repeat) pairs: description only.")


InfiniteEnd = Literal["inf", "-inf"]
"""An infinite value in a JSON document (``float("inf")`` reads it back): the fitted slope of separated data."""


class SlopeStatus(StrEnum):
    """How to read a fitted logistic slope."""

    OK = "ok"
    """A finite maximum-likelihood slope."""
    SEPARATED = "separated"
    """The rate is at 0 below some horizon and at 1 above it (or the reverse): the likelihood grows without bound
    as the slope does, so the maximum-likelihood slope is infinite (``"inf"`` rising, ``"-inf"`` falling)."""
    NOT_ESTIMABLE = "not_estimable"
    """Nothing to fit a slope to: every horizon at 0, every horizon at 1, or a single horizon with data."""
    NO_DATA = "no_data"
    """No horizon has an episode with a value."""


class LogisticSlope(BaseModel):
    """The slope of a logistic regression of a rate on log2(horizon), with its task-cluster bootstrap interval.

    The slope is the change in log-odds per doubling of the horizon (``exp(slope)`` is the odds ratio per doubling).
    Interval ends are numbers, ``"inf"`` / ``"-inf"`` where the resamples' slopes are infinite (separated
    resamples), or null when there is no interval (not estimable, no data, or a finite slope that every resample
    reproduces because each horizon's tasks agree: its note says so).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    status: SlopeStatus = Field(description="ok, separated, not_estimable or no_data; see `SlopeStatus`.")
    estimate: float | InfiniteEnd | None = Field(
        description="The maximum-likelihood slope (log-odds per doubling); inf/-inf when separated; null when not "
        "estimable."
    )
    low: float | InfiniteEnd | None = Field(description="Lower end of the percentile bootstrap interval.")
    high: float | InfiniteEnd | None = Field(description="Upper end of the percentile bootstrap interval.")
    confidence: float = Field(description="Two-sided level of the interval.")
    n_horizons: int = Field(ge=0, description="Horizons with an episode with a value.")
    n_tasks: int = Field(ge=0, description="Tasks the fit weighs (each horizon weighted by its tasks).")
    n_episodes: int = Field(ge=0, description="Episodes with a value.")
    resamples_left_out: int = Field(
        default=0,
        ge=0,
        description="Resamples without a slope (no variation, or a horizon without an episode with a value), left "
        "out of the interval.",
    )
    note: str = Field(default="", description="One sentence for the report when status is not `ok`.")
    mc_se: float | None = Field(
        default=None,
        ge=0.0,
        description="Monte-Carlo standard error of the finite interval ends (the larger); None when no end is finite.",
    )


class HorizonCrossing(BaseModel):
    """The smallest horizon at which a rate exceeds a threshold, with its task-cluster bootstrap interval.

    ``horizon``, ``low`` and ``high`` are horizons of the curve, or null for "not reached": the rate stays at or
    below the threshold at every horizon (of the data, or of that resample). The interval ends are the
    inverted-CDF quantiles of the resamples' crossing horizons (a horizon of the grid, never an interpolation).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    threshold: float = Field(description="The rate the crossing must exceed (strictly).")
    status: Literal["ok", "constant", "no_data"] = Field(
        description="no_data: no horizon has an episode with a value; constant: every resample crosses at the "
        "crossing horizon itself, so there is no interval (low and high null, `note` says why)."
    )
    horizon: int | None = Field(description="The smallest horizon whose rate exceeds the threshold; null: not reached.")
    low: int | None = Field(description="Lower end of the interval; null: not reached (or no interval: `constant`).")
    high: int | None = Field(description="Upper end of the interval; null: not reached (or no interval: `constant`).")
    confidence: float = Field(description="Two-sided level of the interval.")
    largest_horizon: int | None = Field(description="The largest horizon with data (how far 'not reached' looked).")
    resamples_left_out: int = Field(
        default=0, ge=0, description="Resamples in which a horizon had no episode with a value, left out."
    )
    note: str = Field(
        default="",
        description="One sentence for the report when status is `constant`, or naming the horizons below the "
        "crossing (or below none reached) that have no episode with a value, where the first crossing may lie.",
    )
