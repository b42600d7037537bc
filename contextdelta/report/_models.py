"""The records of ``aggregate_metrics.json``: every number the report prints, and nothing it does not."""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.providers import Price
from contextdelta.stats import (
    DetectableDifference,
    Estimate,
    HorizonCrossing,
    LogisticSlope,
    PairedComparison,
    PairTable,
    PassK,
    ShareInterval,
    SignFlipTest,
    TaskInterval,
)

METRICS_SCHEMA_VERSION = 2
"""2: task-level tests (sign-flip), exact bounds, breakdowns, flip rates, failed-trial sensitivity, power."""


class ConditionKey(BaseModel):
    """One condition of the matrix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: str = Field(description="The context strategy.")
    protection_mode: str = Field(description="The protection mode.")

    @property
    def label(self) -> str:
        return f"{self.strategy} / {self.protection_mode}"


class TokenTotal(BaseModel):
    """A sum over a condition's episodes, with how many episodes had no value."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    total: float = Field(description="Sum over the episodes with a value.")
    n_known: int = Field(description="Episodes with a value.")
    n_unknown: int = Field(description="Episodes without one (usage or price unknown).")


class ConditionMetrics(BaseModel):
    """Every per-condition number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey = Field(description="The condition.")
    episodes: int = Field(description="Finished episodes.")
    episodes_with_verdict: int = Field(description="Finished episodes that are not failed trials.")
    tasks: int = Field(description="Tasks with a finished episode in this condition.")
    failed_trials: int = Field(description="Finished episodes that are failed trials.")
    rates: dict[str, Estimate] = Field(description="RATE_METRICS: share of episodes, with interval or exact bound.")
    means: dict[str, Estimate] = Field(description="MEAN_METRICS: mean per episode, with interval.")
    totals: dict[str, TokenTotal] = Field(description="Token and cost sums over the condition's episodes.")
    pass_k: dict[str, PassK] = Field(description="pass^k of success for k = 1..repeats (keys are k).")
    flip_rates: dict[str, Estimate] = Field(
        description="FLIP_METRICS: share of tasks (with at least two repeats) whose repeats disagree."
    )
    failure_modes: dict[str, int] = Field(
        description="Failed episodes per failure mode of SPEC section 9 (FAILURE_MODE_ORDER), as failure_atlas.md "
        "counts them: every failed trial is provider_error, whatever its termination."
    )
    failed_trials_by_termination: dict[str, int] | None = Field(
        default=None,
        description="The failed trials (failure mode provider_error) per termination reason; absent where the "
        "condition has none (and from reports written before the field, whose failure_modes held these keys).",
    )


class BreakdownCell(BaseModel):
    """One condition's rates on the tasks of one hazard or world."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey = Field(description="The condition.")
    episodes: int = Field(description="Its episodes on these tasks.")
    failed_trials: int = Field(description="Of which failed trials.")
    rates: dict[str, Estimate] = Field(description="BREAKDOWN_METRICS on these tasks.")


class Breakdown(BaseModel):
    """The rates of every condition restricted to the tasks of one hazard (or one world)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dimension: Literal["hazard", "world"] = Field(description="hazard or world.")
    value: str = Field(description="The hazard (world).")
    tasks: int = Field(description="Tasks of the run with this hazard (world).")
    cells: list[BreakdownCell] = Field(description="One per condition.")


class Comparison(BaseModel):
    """A task-level paired comparison of condition a vs condition b on one 0/1 metric (one row of a research
    question), with its failed-trial accounting, sensitivity row and design sensitivity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(description="The comparison's name (a vs b).")
    metric: str = Field(description="The 0/1 metric compared (RATE_METRICS key).")
    a: ConditionKey = Field(description="Condition a.")
    b: ConditionKey = Field(description="Condition b.")
    rate_a: Estimate = Field(
        description="Condition a's rate over all its episodes (its row of the conditions table; the difference and "
        "the test are over the paired tasks, whose count the test states)."
    )
    rate_b: Estimate = Field(description="Condition b's rate over all its episodes, likewise.")
    difference: Estimate = Field(
        description="Mean over tasks of the per-task difference of means, a - b; its n_episodes counts the episodes "
        "of both conditions together (a + b)."
    )
    test: SignFlipTest = Field(description="The primary test; pvalue_holm is adjusted within the family.")
    episodes: PairTable = Field(description="Episode-level 2x2 table on (task, repeat) pairs: description only.")
    failed_pairs: int = Field(ge=0, description="(task, repeat) pairs in which either episode is a failed trial.")
    failed_discordant_tasks: int = Field(
        ge=0,
        description="Discordant units (tasks, or stories where tasks share them) with at least one pair that involves "
        "a failed trial.",
    )
    sensitivity: PairedComparison | None = Field(
        description="The comparison again without the pairs that involve a failed trial (None when there are none); "
        "Holm-adjusted within the question's sensitivity family."
    )
    detectable: DetectableDifference = Field(
        description="The smallest difference the primary test detects with the target power on this design."
    )


class ResearchQuestion(BaseModel):
    """One research question: a family of comparisons, Holm-adjusted over its testable members."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: str = Field(description="RQ1, RQ2 or RQ3.")
    question: str = Field(description="The question in words.")
    comparisons: list[Comparison] = Field(description="Its comparisons.")
    family: list[str] = Field(description="Names of the testable comparisons: the Holm family.")
    not_testable: list[str] = Field(description="Comparisons without a discordant task: left out of the family.")
    not_run: list[str] = Field(description="Planned comparisons left out because a condition was not run.")
    sensitivity_family: list[str] = Field(
        description="Names of the testable sensitivity rows (comparisons with failed-trial pairs removed)."
    )


class TokenReduction(BaseModel):
    """Token reduction of a strategy versus full_history on paired episodes (same mode, task and repeat)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey = Field(description="The strategy's condition.")
    baseline: ConditionKey = Field(description="full_history in the same mode.")
    agent_tokens: Estimate = Field(description="1 - sum(agent tokens, strategy) / sum(agent tokens, baseline).")
    total_tokens: Estimate = Field(description="The same for agent + summary tokens.")


class AnalysisInfo(BaseModel):
    """The analysis parameters, the methods' constants and the hash of the statistics code (the receipt)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    resamples: int = Field(description="Bootstrap resamples (--resamples).")
    seed: int = Field(description="Bootstrap seed (--bootstrap-seed).")
    confidence: float = Field(description="Confidence level of the intervals.")
    alpha: float = Field(description="Family-wise level of the Holm-adjusted tests.")
    power_datasets: int = Field(description="Simulated datasets per evaluated difference (power figures).")
    task_interval: TaskInterval | None = Field(
        default=None,
        description="Interval of the statistics with one value per task (paired differences, pass^k, flip rate): "
        "`expanded_percentile` (percentile levels widened for the number of tasks, Hesterberg 2015). Absent in a "
        "report written before 0.6.0, whose intervals are plain percentile intervals.",
    )
    cluster_interval: TaskInterval | None = Field(
        default=None,
        description="Interval of the hierarchical task-cluster bootstrap (rates, means, token reductions, rates per "
        "horizon): `expanded_percentile` (percentile levels widened for the number of tasks, as `task_interval`). "
        "Absent in a report written by 0.13.0 or earlier, whose such intervals are plain percentile intervals.",
    )
    share_interval: ShareInterval | None = Field(
        default=None,
        description="Interval of pass^k and the flip rate (a mean over tasks of one value in [0, 1] per task): "
        "`clopper_pearson` (the Clopper-Pearson interval with n = the tasks, or stories, and n times the mean as "
        "the count). Absent in a report written by 0.13.0 or earlier, whose pass^k and flip-rate intervals are the "
        "task bootstrap's, as `task_interval` says.",
    )
    target_power: float = Field(description="Power the detectable differences are computed for.")
    sign_flip_enumeration_limit: int = Field(
        description="Discordant tasks up to which non-integer sign-flip tests enumerate every pattern."
    )
    sign_flip_monte_carlo_patterns: int = Field(
        description="Seeded sign patterns a Monte-Carlo sign-flip test draws beyond that."
    )
    max_mc_se: float | None = Field(
        description="Largest Monte-Carlo standard error of a printed rate or difference interval end (None: none)."
    )
    rate_decimals: int = Field(description="Decimals of percentages in the report, justified by max_mc_se.")
    analysis_sha256: str = Field(description="SHA-256 of the statistics code (verify notes a difference).")


class MainMatrixCounts(BaseModel):
    """The episodes of the main matrix alone, in a run with control episodes."""

    model_config = ConfigDict(extra="forbid")

    finished: int = Field(description="Main-matrix episodes finished.")
    succeeded: int = Field(description="Main-matrix episodes that succeeded.")
    failed_trials: int = Field(description="Main-matrix episodes that are failed trials.")


class EpisodeCounts(BaseModel):
    """How many episodes were planned, finished, succeeded and failed, and how each ended."""

    model_config = ConfigDict(extra="forbid")

    planned: int = Field(description="Episodes planned.")
    finished: int = Field(description="Episodes finished.")
    succeeded: int = Field(description="Episodes that succeeded.")
    failed_trials: int = Field(description="Finished episodes that are failed trials.")
    with_verdict: int = Field(description="Finished episodes that are not failed trials.")
    by_termination: dict[str, int] = Field(description="Finished episodes per termination reason.")
    main_matrix: MainMatrixCounts | None = Field(
        default=None,
        description="In a run with control episodes (--controls), whose counts above include them: the main "
        "matrix's own (the control episodes ran with the hidden mutations off). Absent otherwise.",
    )


SHARD_WARNING: Final = "shard"
"""The warning code of a report of one shard of a plan (first of the warnings; the report's banner)."""


class ReportWarning(BaseModel):
    """A warning printed at the top of the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: Literal["shard", "failed_trials", "failed_discordance", "few_tasks"] = Field(
        description="shard (the run directory holds one shard of a plan, not the whole plan: its numbers cover that "
        "part alone; first, and absent from reports written before it), failed_trials (too many), "
        "failed_discordance (failed trials drive a comparison) or few_tasks (rates or comparisons rest on fewer "
        "tasks than the bootstrap intervals need to reach their level)."
    )
    message: str = Field(description="The warning's text.")


class ControlCondition(BaseModel):
    """One condition of a control (``--controls``): the same strategy and mode with nothing changing."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    control: str = Field(description="The control (no_mutation).")
    condition: ConditionKey = Field(description="The strategy and mode.")
    episodes: int = Field(description="Its episodes.")
    tasks: int = Field(description="Its tasks.")
    failed_trials: int = Field(description="Of its episodes, failed trials.")
    rates: dict[str, Estimate] = Field(
        description="success (graded by the task's no-mutation control), blocked_write (writes the contract "
        "refused although nothing changed), stale_action; task-cluster intervals or exact bounds."
    )
    means: dict[str, Estimate] = Field(description="steps and read_calls per episode, with intervals.")


class CachingCondition(BaseModel):
    """One condition's prompt tokens split by the provider's prompt cache, and its cost with and without caching."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey = Field(description="The condition.")
    episodes: int = Field(description="Its finished episodes.")
    cache_reported: int = Field(description="Episodes whose provider reported cached prompt tokens (even 0).")
    tokens: dict[str, TokenTotal] = Field(
        description="Sums of prompt_tokens, cached_prompt_tokens, cache_write_tokens and uncached_prompt_tokens."
    )
    cache_hit_ratio: float | None = Field(
        description="Cached / all prompt tokens over the episodes whose provider reported cached tokens; null: none."
    )
    costs: dict[str, TokenTotal] = Field(
        description="Sums of cost_with_caching_usd and cost_without_caching_usd (episodes with an unknown price or "
        "usage counted apart)."
    )
    means: dict[str, Estimate] = Field(
        description="cost_with_caching_usd and cost_without_caching_usd per episode, with task-cluster intervals."
    )


SurvivesCaching = Literal["yes", "reversed", "unclear", "no_saving", "no_price"]
"""Whether a strategy's saving versus full_history survives prompt caching (`CachingReduction.survives`)."""


class CachingReduction(BaseModel):
    """A strategy's cost saving versus full_history on paired episodes, without and with prompt caching."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey = Field(description="The strategy's condition.")
    baseline: ConditionKey = Field(description="full_history in the same mode.")
    without_caching: Estimate = Field(
        description="1 - sum(cost without caching, strategy) / sum(cost without caching, baseline)."
    )
    with_caching: Estimate = Field(description="The same with the cached prompt tokens at their rates.")
    survives: SurvivesCaching = Field(
        description="no_price: no (non-zero) cost to compare; no_saving: no saving even without caching (point "
        "estimate <= 0); yes: the saving with caching has an interval above 0; reversed: its interval is below 0 "
        "(the strategy costs more than full_history once the cache is counted); unclear: its interval spans 0."
    )


class CachingSection(BaseModel):
    """Prompt caching and cost at the run's recorded prices: per condition and per strategy vs full_history."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    prices: dict[str, Price | None] = Field(description="The run's recorded prices (run_manifest.json prices).")
    definitions: dict[str, str] = Field(description="CACHING_METRICS: the per-episode values summed and averaged.")
    conditions: list[CachingCondition] = Field(description="One per condition.")
    reductions: list[CachingReduction] = Field(
        description="One per strategy other than full_history whose mode has full_history."
    )


class RetriedEpisode(BaseModel):
    """One episode whose failed trial was re-run (``--retry-failed``): its attempts and how the latest ended."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(description="The episode.")
    attempts: int = Field(description="Its attempts in raw_runs.jsonl, the current one included.")
    superseded: list[str] = Field(description="The termination of each superseded attempt, in attempt order.")
    termination: str = Field(description="How the current (latest) attempt ended.")
    outcome: Literal["success", "failure", "failed_trial"] = Field(
        description="The current attempt: success, failure (a verdict that is not success) or failed_trial again."
    )


class RetrySection(BaseModel):
    """Failed trials re-run by ``run-benchmark --resume ID --retry-failed``. Every other number of the report counts
    each episode's current (latest) attempt only; the superseded attempts are counted here and nowhere else."""

    model_config = ConfigDict(extra="forbid")

    retried_episodes: int = Field(description="Episodes with at least one superseded attempt.")
    superseded_attempts: int = Field(description="Superseded attempts (failed trials a later attempt replaced).")
    with_verdict: int = Field(description="Retried episodes whose current attempt reached a verdict.")
    succeeded: int = Field(description="Retried episodes whose current attempt is a success.")
    failed_again: int = Field(description="Retried episodes whose current attempt is a failed trial again.")
    superseded_terminations: dict[str, int] = Field(description="Superseded attempts per termination reason.")
    superseded_failed_calls: dict[str, int] | None = Field(
        default=None,
        description="Superseded attempts per how their failed model call's last attempt ended: its HTTP status "
        "(`HTTP 503`) or, without an answer, its error (`APITimeoutError`); left out when no superseded attempt "
        "recorded one (records written before 0.14 keep no attempts).",
    )
    episodes: list[RetriedEpisode] = Field(description="Every retried episode, in run id order.")


class HorizonPoint(BaseModel):
    """One condition's rates on the tasks of one horizon."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    horizon: int = Field(description="The horizon (agent calls from the counted observation to the dependent write).")
    tasks: int = Field(description="Tasks of this horizon with an episode in the condition.")
    episodes: int = Field(description="Their finished episodes.")
    failed_trials: int = Field(description="Of which failed trials (failures for success, outside the stale rate).")
    rates: dict[str, Estimate] = Field(
        description="DOSE_METRICS (success, stale_action) on these tasks, with task-cluster intervals or exact bounds."
    )


class HorizonCurve(BaseModel):
    """One condition's dose-response: its rates at each horizon, a logistic slope per rate, and the horizon at which
    its stale-action rate first exceeds the threshold."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    hazard: str | None = Field(description="The hazard the curve is restricted to; null: every task with a horizon.")
    condition: ConditionKey = Field(description="The condition.")
    points: list[HorizonPoint] = Field(description="One per horizon at which the condition has episodes, ascending.")
    slopes: dict[str, LogisticSlope] = Field(
        description="Per DOSE_METRICS rate: the logistic slope on log2(horizon) (log-odds per doubling), fitted by "
        "maximum likelihood to the per-horizon rates weighted by tasks, with a task-cluster bootstrap interval."
    )
    stale_crossing: HorizonCrossing = Field(
        description="The smallest horizon whose stale-action rate exceeds the threshold (null: not reached), with a "
        "task-cluster bootstrap interval."
    )


class StoryUnits(BaseModel):
    """How a run's tasks group into stories, where some share one: the statistics' unit of inference."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: int = Field(ge=0, description="Tasks with episodes in the run.")
    stories: int = Field(ge=0, description="Their stories: the independent units every interval and test counts.")
    sizes: dict[str, int] = Field(
        description="Number of stories (values) with each number of tasks (keys, as strings), ascending."
    )


class DoseResponse(BaseModel):
    """Success and stale-action rate against the horizon, per condition (and per hazard when the tasks with a horizon
    have several). Only tasks with a horizon (generated tasks) count; absent from runs without one."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    horizons: list[int] = Field(description="The horizons of the run's tasks, ascending.")
    tasks: int = Field(description="Tasks with a horizon.")
    tasks_without_horizon: int = Field(description="The run's tasks without one (left out of this section).")
    hazards: list[str] = Field(description="Hazards of the tasks with a horizon, sorted.")
    metrics: list[str] = Field(description="The rates on the curves (DOSE_METRICS).")
    predictor: Literal["log2_horizon"] = Field(description="The slopes' predictor: log2 of the horizon.")
    crossing_threshold: float = Field(description="The stale-action rate a crossing horizon exceeds (strictly).")
    curves: list[HorizonCurve] = Field(
        description="Every condition on all tasks with a horizon (hazard null), then, when there are several "
        "hazards, every condition on each hazard's tasks."
    )


class AggregateMetrics(BaseModel):
    """The content of ``aggregate_metrics.json``. Sections are fields; a new section is a new field (with a
    default, so files written before it still load) built by its own function in the metrics pipeline."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: int = Field(default=METRICS_SCHEMA_VERSION, description="Metrics schema (METRICS_SCHEMA_VERSION).")
    run_group_id: str = Field(description="The run group.")
    status: str = Field(description="The run's status when the metrics were computed.")
    analysis: AnalysisInfo = Field(description="The analysis parameters and the statistics code's hash.")
    definitions: dict[str, str] = Field(description="Every metric's definition (RATE_METRICS and MEAN_METRICS).")
    episodes: EpisodeCounts = Field(description="Episode counts.")
    warnings: list[ReportWarning] = Field(description="Warnings printed at the top of the report.")
    conditions: list[ConditionMetrics] = Field(description="Every per-condition number.")
    breakdowns: list[Breakdown] = Field(description="Rates per hazard and per world.")
    token_reduction: list[TokenReduction] = Field(
        description="Each strategy's token reduction versus full_history on paired episodes."
    )
    research_questions: list[ResearchQuestion] = Field(
        description="RQ1-RQ3: task-level paired comparisons in Holm families."
    )
    failure_modes: dict[str, int] = Field(
        description="Failed episodes per failure mode of SPEC section 9, all conditions: the counts of "
        "failure_atlas.md (every failed trial is provider_error)."
    )
    failed_trials_by_termination: dict[str, int] | None = Field(
        default=None,
        description="The failed trials per termination reason, all conditions; absent from runs without failed "
        "trials (and from reports written before the field, whose failure_modes held these keys).",
    )
    controls: list[ControlCondition] | None = Field(
        default=None,
        description="Control conditions (--controls) beside the main ones; absent from runs without control episodes.",
    )
    caching: CachingSection | None = Field(
        default=None,
        description="Prompt caching and cost with and without it; absent from runs that recorded no prices "
        "(written before prices were recorded).",
    )
    retries: RetrySection | None = Field(
        default=None,
        description="Failed trials re-run by --retry-failed and their superseded attempts; absent from runs "
        "without any.",
    )
    stories: StoryUnits | None = Field(
        default=None,
        description="Where tasks share stories (a task family's story at several horizons, recorded since 0.8.0): "
        "the story is the unit of every interval and test (stories resampled and sign-flipped as wholes; the test's "
        "counts are stories); absent where every task is its own unit.",
    )
    dose_response: DoseResponse | None = Field(
        default=None,
        description="Success and stale-action rate against the horizon, slopes and crossing horizons; absent from "
        "runs whose tasks have no horizon (the hand-written suite) and from runs recorded before horizons were.",
    )
