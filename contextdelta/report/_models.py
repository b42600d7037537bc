"""The records of ``aggregate_metrics.json``: every number the report prints, and nothing it does not."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.providers import Price
from contextdelta.stats import DetectableDifference, Estimate, PairedComparison, PairTable, PassK, SignFlipTest

METRICS_SCHEMA_VERSION = 2
"""2: task-level tests (sign-flip), exact bounds, breakdowns, flip rates, failed-trial sensitivity, power."""


class ConditionKey(BaseModel):
    """One condition of the matrix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    strategy: str
    protection_mode: str

    @property
    def label(self) -> str:
        return f"{self.strategy} / {self.protection_mode}"


class TokenTotal(BaseModel):
    """A sum over a condition's episodes, with how many episodes had no value."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    total: float
    n_known: int
    n_unknown: int


class ConditionMetrics(BaseModel):
    """Every per-condition number."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey
    episodes: int = Field(description="Finished episodes.")
    episodes_with_verdict: int = Field(description="Finished episodes that are not failed trials.")
    tasks: int
    failed_trials: int
    rates: dict[str, Estimate] = Field(description="RATE_METRICS: share of episodes, with interval or exact bound.")
    means: dict[str, Estimate] = Field(description="MEAN_METRICS: mean per episode, with interval.")
    totals: dict[str, TokenTotal] = Field(description="Token and cost sums over the condition's episodes.")
    pass_k: dict[str, PassK] = Field(description="pass^k of success for k = 1..repeats (keys are k).")
    flip_rates: dict[str, Estimate] = Field(
        description="FLIP_METRICS: share of tasks (with at least two repeats) whose repeats disagree."
    )
    failure_modes: dict[str, int] = Field(
        description="Failed episodes per FAILURE_MODE_ROWS key: failed trials by termination, others by failure mode."
    )


class BreakdownCell(BaseModel):
    """One condition's rates on the tasks of one hazard or world."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey
    episodes: int
    failed_trials: int
    rates: dict[str, Estimate] = Field(description="BREAKDOWN_METRICS on these tasks.")


class Breakdown(BaseModel):
    """The rates of every condition restricted to the tasks of one hazard (or one world)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dimension: Literal["hazard", "world"]
    value: str
    tasks: int = Field(description="Tasks of the run with this hazard (world).")
    cells: list[BreakdownCell]


class Comparison(BaseModel):
    """A task-level paired comparison of condition a vs condition b on one 0/1 metric (one row of a research
    question), with its failed-trial accounting, sensitivity row and design sensitivity."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    metric: str
    a: ConditionKey
    b: ConditionKey
    rate_a: Estimate
    rate_b: Estimate
    difference: Estimate = Field(description="Mean over tasks of the per-task difference of means, a - b.")
    test: SignFlipTest = Field(description="The primary test; pvalue_holm is adjusted within the family.")
    episodes: PairTable = Field(description="Episode-level 2x2 table on (task, repeat) pairs: description only.")
    failed_pairs: int = Field(ge=0, description="(task, repeat) pairs in which either episode is a failed trial.")
    failed_discordant_tasks: int = Field(
        ge=0, description="Discordant tasks with at least one pair that involves a failed trial."
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

    id: str
    question: str
    comparisons: list[Comparison]
    family: list[str] = Field(description="Names of the testable comparisons: the Holm family.")
    not_testable: list[str] = Field(description="Comparisons without a discordant task: left out of the family.")
    not_run: list[str] = Field(description="Planned comparisons left out because a condition was not run.")
    sensitivity_family: list[str] = Field(
        description="Names of the testable sensitivity rows (comparisons with failed-trial pairs removed)."
    )


class TokenReduction(BaseModel):
    """Token reduction of a strategy versus full_history on paired episodes (same mode, task and repeat)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey
    baseline: ConditionKey
    agent_tokens: Estimate = Field(description="1 - sum(agent tokens, strategy) / sum(agent tokens, baseline).")
    total_tokens: Estimate = Field(description="The same for agent + summary tokens.")


class AnalysisInfo(BaseModel):
    """The analysis parameters, the methods' constants and the hash of the statistics code (the receipt)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    resamples: int
    seed: int
    confidence: float
    alpha: float = Field(description="Family-wise level of the Holm-adjusted tests.")
    power_datasets: int = Field(description="Simulated datasets per evaluated difference (power figures).")
    target_power: float
    sign_flip_enumeration_limit: int
    sign_flip_monte_carlo_patterns: int
    max_mc_se: float | None = Field(
        description="Largest Monte-Carlo standard error of a printed rate or difference interval end (None: none)."
    )
    rate_decimals: int = Field(description="Decimals of percentages in the report, justified by max_mc_se.")
    analysis_sha256: str


class EpisodeCounts(BaseModel):
    """How many episodes were planned, finished, succeeded and failed, and how each ended."""

    model_config = ConfigDict(extra="forbid")

    planned: int
    finished: int
    succeeded: int
    failed_trials: int
    with_verdict: int = Field(description="Finished episodes that are not failed trials.")
    by_termination: dict[str, int]


class ReportWarning(BaseModel):
    """A warning printed at the top of the report."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: Literal["failed_trials", "failed_discordance"]
    message: str


class ControlCondition(BaseModel):
    """One condition of a control (``--controls``): the same strategy and mode with nothing changing."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    control: str
    condition: ConditionKey
    episodes: int
    tasks: int
    failed_trials: int
    rates: dict[str, Estimate] = Field(
        description="success (graded by the task's no-mutation control), blocked_write (writes the contract "
        "refused although nothing changed), stale_action; task-cluster intervals or exact bounds."
    )
    means: dict[str, Estimate] = Field(description="steps and read_calls per episode, with intervals.")


class CachingCondition(BaseModel):
    """One condition's prompt tokens split by the provider's prompt cache, and its cost with and without caching."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    condition: ConditionKey
    episodes: int
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

    condition: ConditionKey
    baseline: ConditionKey
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
    conditions: list[CachingCondition]
    reductions: list[CachingReduction]


class AggregateMetrics(BaseModel):
    """The content of ``aggregate_metrics.json``. Sections are fields; a new section is a new field (with a
    default, so files written before it still load) built by its own function in the metrics pipeline."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: int = METRICS_SCHEMA_VERSION
    run_group_id: str
    status: str
    analysis: AnalysisInfo
    definitions: dict[str, str]
    episodes: EpisodeCounts
    warnings: list[ReportWarning]
    conditions: list[ConditionMetrics]
    breakdowns: list[Breakdown]
    token_reduction: list[TokenReduction]
    research_questions: list[ResearchQuestion]
    failure_modes: dict[str, int] = Field(description="Failed episodes per FAILURE_MODE_ROWS key, all conditions.")
    controls: list[ControlCondition] | None = Field(
        default=None,
        description="Control conditions (--controls) beside the main ones; absent from runs without control episodes.",
    )
    caching: CachingSection | None = Field(
        default=None,
        description="Prompt caching and cost with and without it; absent from runs that recorded no prices "
        "(written before prices were recorded).",
    )
