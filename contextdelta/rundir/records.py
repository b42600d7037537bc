"""The records of a run directory (SPEC section 9), as pydantic models. Writers and readers live apart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from contextdelta.agent import EpisodeTotals, EpisodeTrace, TerminationReason
from contextdelta.canonical import canonical_json
from contextdelta.context import DEFAULT_TOKEN_BUDGET, StrategyDescription
from contextdelta.grading import Verdict
from contextdelta.providers import Price

RECORD_SCHEMA_VERSION = 1

FAILED_TERMINATIONS = frozenset(
    {
        TerminationReason.PROVIDER_ERROR,
        TerminationReason.CONTEXT_WINDOW_EXCEEDED,
        TerminationReason.BUDGET_EXCEEDED,
        TerminationReason.HARNESS_ERROR,
    }
)
"""Terminations that make an episode a failed trial: kept in the evidence, never counted as a success."""


class GitInfo(BaseModel):
    """The checkout the package ran from; nulls outside a git checkout."""

    commit: str | None
    dirty: bool | None


class Environment(BaseModel):
    """What produced a run: versions of contextdelta, Python and the dependencies, the platform, the checkout."""

    contextdelta: str
    python: str
    platform: str
    dependencies: dict[str, str | None]
    git: GitInfo


class SeedRule(StrEnum):
    """How an episode's sampling seed (sent to the provider) derives from the run seed; recorded in the manifest."""

    TASK_REPEAT = "task_repeat"
    """From (run seed, task, repeat) only: both episodes of every paired comparison (same task and repeat, another
    strategy or mode) share their seed (common random numbers), so sampling noise does not differ between them."""
    CONDITION = "condition"
    """From (run seed, task, strategy, mode, repeat): the rule of run directories written before the seed rule was
    recorded (a manifest without ``seed_rule`` means this one)."""


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETE = "complete"
    INCOMPLETE = "incomplete"


class StrategyParams(BaseModel):
    """Context-strategy parameters; part of the run configuration and of what resume compares. Zero is a value
    (``last_n`` 0 keeps no tool group), never a stand-in for the default."""

    model_config = ConfigDict(extra="forbid")

    last_n: int = Field(default=3, ge=0, description="last_n: tool groups kept.")
    summary_trigger: int = Field(default=6, ge=0, description="Summary/digest once more groups than this.")
    summary_keep: int = Field(default=3, ge=0, description="Groups kept verbatim after a summary/digest.")
    token_budget: int = Field(default=DEFAULT_TOKEN_BUDGET, ge=1, description="token_budget_trim: prompt tokens.")
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="--strategy-param values: {strategy name: {parameter: value}}."
    )


class ProviderInfo(BaseModel):
    """The endpoint and model. The base URL is stored redacted (no credentials, no query string)."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    base_url: str | None
    model: str
    summary_model: str
    temperature: float | None = Field(description="Sampling temperature; null for an external agent (unknown).")
    max_tokens: int | None = None


class ExternalAgentInfo(BaseModel):
    """The external agent of a ``run-external`` / ``serve-world`` run group (its provider kind is ``external``)."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The agent name; the run's one strategy is external:<agent>.")
    transport: str = Field(description="streamable-http or stdio.")
    command: str | None = Field(
        default=None, description="run-external's --agent-cmd with credentials redacted; null for serve-world."
    )
    command_sha256: str | None = Field(default=None, description="SHA-256 of the command as given (resume compares).")
    timeout_s: float | None = Field(default=None, description="Per-episode timeout of the agent command.")


class TaskInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    version: int
    hash: str
    world: str
    hazard: str
    public_messages_sha256: str = Field(description="SHA-256 of the canonical JSON of the initial messages.")


class SuiteInfo(BaseModel):
    """Which task suite a run read (``--tasks``): how it was named and the hash of the whole suite."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(
        description="package:NAME (a suite shipped in the package: `contextdelta suites` lists them) or the folder "
        "relative to the working directory the run started in; never an absolute path."
    )
    sha256: str = Field(
        description="Suite hash of every task in that suite (SPEC section 5), also when --task-ids or --limit ran "
        "only some of them; hashes.suite_sha256 is the hash of the tasks this run ran."
    )
    tasks: int = Field(description="Tasks in the suite.")


class Counts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    planned: int
    finished: int = 0
    failed: int = Field(default=0, description="Finished episodes that are failed trials (provider/harness/budget).")
    succeeded: int = 0


class Hashes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite_sha256: str
    system_prompt_sha256: str
    system_prompt_version: str
    tool_schemas_sha256: str = Field(description="SHA-256 over every world's tool schemas in each selected mode.")
    public_messages_sha256: str = Field(description="SHA-256 over every task's initial messages.")
    harness_sha256: str


class ShardInfo(BaseModel):
    """``--shard I/N``: this run directory holds the I-th of N parts of one plan (``contextdelta merge`` joins them)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=1, description="1-based shard index I.")
    count: int = Field(ge=1, description="Number of shards N the plan is split into.")


class MergedShard(BaseModel):
    """One shard directory a merged run group was built from."""

    model_config = ConfigDict(extra="forbid")

    run_group_id: str
    shard: ShardInfo
    episodes: int
    raw_runs_sha256: str = Field(description="SHA-256 of the shard's raw_runs.jsonl bytes when merged.")
    created_at: str
    finished_at: str | None = None
    environment: Environment
    sessions: list[dict[str, Any]] = Field(default_factory=list)


class RunManifest(BaseModel):
    """``run_manifest.json``: what was run, with what, by which code, and how far it got."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    run_group_id: str
    status: RunStatus
    stop_reason: str | None = Field(default=None, description="Why an incomplete run stopped.")
    created_at: str = Field(description="UTC ISO time the run group was created.")
    updated_at: str = Field(description="UTC ISO time of the last manifest write.")
    finished_at: str | None = None
    sessions: list[dict[str, Any]] = Field(
        default_factory=list, description="One entry per invocation (first run and each resume): start/end, counts."
    )
    environment: Environment
    provider: ProviderInfo
    seed: int
    order_seed: int = Field(description="Seed of the episode-order shuffle.")
    seed_rule: SeedRule = Field(
        default=SeedRule.CONDITION,
        description="How each episode's seed derives from the run seed; absent (older runs): condition.",
    )
    strategies: list[str]
    strategy_params: StrategyParams
    external_agent: ExternalAgentInfo | None = Field(
        default=None, description="Set when an external agent drove every episode over MCP."
    )
    strategy_configs: list[StrategyDescription] = Field(
        default_factory=list,
        description="Each strategy as built: factory parameters, params, config hash, whether it is deterministic, "
        "and its source (for a plug-in: distribution, version and source hash). Empty in runs from before plug-ins "
        "(built-ins only, rebuilt from strategies and strategy_params).",
    )
    protection_modes: list[str]
    repeats: int
    max_steps: int | None = Field(description="Step limit override; null: each task's own max_steps.")
    concurrency: int
    limit: int | None = Field(default=None, description="--limit (smoke tests only): at most this many tasks.")
    max_cost_usd: float | None = None
    max_episode_cost_usd: float | None = None
    suite: SuiteInfo | None = Field(
        default=None, description="The suite the tasks came from; null in run directories written before it was."
    )
    tasks: list[TaskInfo]
    hashes: Hashes
    counts: Counts
    plan_sha256: str | None = Field(
        default=None,
        description="SHA-256 of the whole plan (every episode id with its seed, in start order; all shards alike). "
        "Null in run directories written before it was recorded.",
    )
    shard: ShardInfo | None = Field(default=None, description="--shard I/N: the part of the plan this run holds.")
    controls: list[str] = Field(
        default_factory=list,
        description="--controls: control conditions run beside the main matrix (no_mutation: every episode again "
        "with the task's hidden mutations off). Empty in run directories written before controls existed.",
    )
    merged_from: list[MergedShard] | None = Field(
        default=None, description="A run group joined by `contextdelta merge`: the shard directories it came from."
    )
    prices: dict[str, Price | None] | None = Field(
        default=None,
        description="The price of the agent model and of the summary model (USD per million tokens; null: "
        "unknown) that every episode's cost_usd was computed with, from the built-in table or --price-table. "
        "Null in run directories written before prices were recorded (their costs ignore prompt caching).",
    )


class EpisodeRecord(BaseModel):
    """One line of ``raw_runs.jsonl``: one episode with every step, its verdict and its cost."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    run_group_id: str
    run_id: str = Field(description="Episode id: task.strategy.mode.rREPEAT (task.strategy.mode.CONTROL.rREPEAT).")
    task_id: str
    task_version: int
    task_hash: str
    world: str
    hazard: str
    strategy: str
    protection_mode: str
    repeat: int
    episode_seed: int
    started_at: str
    finished_at: str
    wall_s: float = Field(description="Wall time of the episode (monotonic clock), provider calls included.")
    failed: bool = Field(description="A failed trial (termination in provider/context/budget/harness errors).")
    cost_usd: float | None = Field(description="Null when the model's price or the usage is unknown.")
    verdict: Verdict
    trace: EpisodeTrace
    control: str | None = Field(
        default=None,
        description="The control condition this episode ran under (no_mutation: hidden mutations off, graded by "
        "the task's no-mutation control); null for the main matrix and in records written before controls.",
    )

    _canonical: str | None = PrivateAttr(default=None)

    @property
    def success(self) -> bool:
        return self.verdict.success

    def canonical_text(self) -> str:
        """The record's canonical JSON (its ``raw_runs.jsonl`` line without the newline; its SHA-256 is the record's
        content hash), computed once per record object: the run directory, the trace store and a worker process
        that ships the record all need it, and it is the most expensive thing done with a record."""
        if self._canonical is None:
            self._canonical = canonical_json(self.model_dump(mode="json"))
        return self._canonical

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> EpisodeRecord:
        """A copy (with ``update`` applied); its canonical JSON is computed afresh."""
        copy = super().model_copy(update=update, deep=deep)
        copy._canonical = None
        return copy


def episode_cost(
    totals: EpisodeTotals,
    prices: Mapping[str, Price | None],
    model: str,
    summary_model: str,
    *,
    caching: bool = True,
) -> float | None:
    """An episode's cost in USD: its agent calls at ``model``'s price plus its summary calls (if any) at
    ``summary_model``'s; None when a call reported no usage or a needed price is unknown. With ``caching`` the
    provider-reported cached and cache-write prompt tokens are billed at their rates (what ``cost_usd`` records),
    without it every prompt token at the input rate. The one definition of an episode's cost."""
    if not totals.usage_complete:
        return None
    agent_price = prices.get(model)
    if agent_price is None:
        return None
    cost = agent_price.cost(totals.agent_usage, caching=caching)
    if totals.summary_calls == 0:
        return cost
    summary_price = prices.get(summary_model)
    if summary_price is None:
        return None
    return cost + summary_price.cost(totals.summary_usage, caching=caching)


class ToolEventRecord(BaseModel):
    """One line of ``tool_events.jsonl``: one agent tool call with its flags."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    step: int
    seq: int
    index: int
    tool: str
    arguments: dict[str, Any] | str
    kind: str | None
    resource: str | None
    observed_version: int | None
    version_at_execution: int | None
    expected_version: int | None
    outcome: str
    error_code: str | None
    stale: bool
    duplicate: bool
    prohibited: bool


TASK_RESULT_COLUMNS: tuple[str, ...] = (
    "run_id",
    "task_id",
    "task_version",
    "world",
    "hazard",
    "strategy",
    "protection_mode",
    "repeat",
    "success",
    "end_state",
    "no_stale_action",
    "no_duplicate_action",
    "refresh_before_write",
    "conflict_recovery",
    "authorized",
    "no_prohibited_action",
    "stale_action_count",
    "duplicate_action_count",
    "prohibited_action_count",
    "blocked_write_count",
    "steps",
    "termination_reason",
    "agent_prompt_tokens",
    "agent_completion_tokens",
    "summary_prompt_tokens",
    "summary_completion_tokens",
    "latency_s",
    "cost_usd",
    "failed",
    "final_answer_facts_ok",
    "episode_seed",
    "harmful_action",
)
"""``task_results.csv`` columns: SPEC section 9's, then ``failed``, the final-answer signal, the seed and the
harmful-action indicator (so every headline rate can be recomputed from the file)."""

LEGACY_TASK_RESULT_COLUMNS: tuple[tuple[str, ...], ...] = (TASK_RESULT_COLUMNS[:-1],)
"""Earlier ``task_results.csv`` layouts (each a prefix of the current one) that ``verify`` still accepts: files
written before ``harmful_action`` existed."""

CONTROL_COLUMN = "control"
"""The column a run with ``--controls`` adds: the episode's control condition, empty for the main matrix."""


def task_result_columns(records: Iterable[EpisodeRecord]) -> tuple[str, ...]:
    """The columns of a run's ``task_results.csv``: :data:`TASK_RESULT_COLUMNS`, plus :data:`CONTROL_COLUMN` when
    an episode ran under a control condition (so a run without controls, or from before them, keeps its file)."""
    with_control = any(r.control for r in records)
    return (*TASK_RESULT_COLUMNS, CONTROL_COLUMN) if with_control else TASK_RESULT_COLUMNS
