"""The records of a run directory (SPEC section 9), as pydantic models. Writers and readers live apart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from contextdelta.agent import EpisodeTotals, EpisodeTrace, TerminationReason
from contextdelta.context import DEFAULT_TOKEN_BUDGET, StrategyDescription
from contextdelta.grading import Verdict
from contextdelta.providers import Price
from contextdelta.rundir._parts import sealed_json

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

    commit: str | None = Field(description="The checkout's HEAD commit; null outside a git checkout.")
    dirty: bool | None = Field(description="Whether the checkout had uncommitted changes; null outside a git checkout.")


class Environment(BaseModel):
    """What produced a run: versions of contextdelta, Python and the dependencies, the platform, the checkout."""

    contextdelta: str = Field(description="The contextdelta package version.")
    python: str = Field(description="The Python version.")
    platform: str = Field(description="The operating system and machine (platform.platform()).")
    dependencies: dict[str, str | None] = Field(description="Versions of the key dependencies (null: not installed).")
    git: GitInfo = Field(description="The git checkout the package ran from.")


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

    kind: str = Field(
        description="Provider kind: openai (any OpenAI-compatible endpoint) or external (an external agent's run)."
    )
    base_url: str | None = Field(
        description="The endpoint's base URL, redacted (no credentials, no query string); null: the client's default."
    )
    model: str = Field(description="The agent model every episode called.")
    summary_model: str = Field(
        description="The model semantic_summary's summary calls used (default: the agent model)."
    )
    temperature: float | None = Field(description="Sampling temperature; null for an external agent (unknown).")
    max_tokens: int | None = Field(default=None, description="Completion-token cap sent with each request; null: none.")


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
    exit_grace_s: float | None = Field(
        default=None,
        description="run-external's --exit-grace-s: once an episode is over (finish, the step limit), how long its "
        "agent command still had to exit on its own before the harness stopped it. Null for serve-world (no "
        "command) and absent from runs written before it was recorded (those ran with 5 s).",
    )
    stop_grace_s: float | None = Field(
        default=None,
        description="run-external's --stop-grace-s: how long a command being stopped (and each process it left "
        "running) had between SIGTERM and SIGKILL. Null for serve-world and absent from runs written before it "
        "was recorded (those ran with 2 s).",
    )

    def stop_rules(self) -> tuple[float | None, float | None]:
        """(exit grace, stop grace) in seconds that the agent command ran under: as recorded, or, for a run-external
        run written before they were recorded, the values every run had then (5 s, 2 s); (None, None) without a
        command (serve-world)."""
        if self.command_sha256 is None:
            return self.exit_grace_s, self.stop_grace_s
        return (
            RECORDED_BEFORE_EXIT_GRACE_S if self.exit_grace_s is None else self.exit_grace_s,
            RECORDED_BEFORE_STOP_GRACE_S if self.stop_grace_s is None else self.stop_grace_s,
        )


RECORDED_BEFORE_EXIT_GRACE_S = 5.0
"""The exit grace of every run-external run written before ``exit_grace_s`` was recorded."""
RECORDED_BEFORE_STOP_GRACE_S = 2.0
"""The stop grace of every run-external run written before ``stop_grace_s`` was recorded."""


class TaskInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The task id.")
    version: int = Field(description="The task version (SUITE.lock).")
    hash: str = Field(description="SHA-256 of the task's canonical JSON (its content hash).")
    world: str = Field(description="order, calendar or config.")
    hazard: str = Field(description="The task's primary hazard (SPEC section 5).")
    public_messages_sha256: str = Field(description="SHA-256 of the canonical JSON of the initial messages.")
    horizon: int | None = Field(
        default=None,
        ge=1,
        description="A generated task's horizon (its evaluator.family.horizon: agent calls from the observation "
        "that decides whether the dependent write is safe to that write); null for a task without one. Absent "
        "from run directories written before horizons were recorded (`horizons_recorded`).",
    )
    story: str | None = Field(
        default=None,
        description="A generated task's story (evaluator.family name#seed: the same story at every horizon); tasks "
        "that share one are a single unit of inference (stories are resampled and sign-flipped as wholes); null for "
        "a task without one (its own story). Absent from run directories written before 0.8.0 "
        "(`stories_recorded`): their statistics take every task as its own unit, as they were computed.",
    )


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

    planned: int = Field(description="Episodes in the plan (of this shard, with --shard).")
    finished: int = Field(
        default=0, description="Episodes recorded in raw_runs.jsonl (each once, by its current attempt)."
    )
    failed: int = Field(
        default=0, description="Finished episodes whose current attempt is a failed trial (provider/harness/budget)."
    )
    succeeded: int = Field(default=0, description="Finished episodes whose current attempt's verdict is success.")


class Hashes(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite_sha256: str = Field(description="SHA-256 of the sorted id@version:hash lines of the run's tasks.")
    system_prompt_sha256: str = Field(description="SHA-256 of the fixed system prompt.")
    system_prompt_version: str = Field(description="Version of the system prompt.")
    tool_schemas_sha256: str = Field(description="SHA-256 over every world's tool schemas in each selected mode.")
    public_messages_sha256: str = Field(description="SHA-256 over every task's initial messages.")
    harness_sha256: str = Field(
        description="SHA-256 over (path, SHA-256) of the harness's Python sources: a changed harness is named by "
        "resume and verify."
    )


class ShardInfo(BaseModel):
    """``--shard I/N``: this run directory holds the I-th of N parts of one plan (``contextdelta merge`` joins them)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=1, description="1-based shard index I.")
    count: int = Field(ge=1, description="Number of shards N the plan is split into.")


class MergedShard(BaseModel):
    """One shard directory a merged run group was built from."""

    model_config = ConfigDict(extra="forbid")

    run_group_id: str = Field(description="The shard's own run group id.")
    shard: ShardInfo = Field(description="Which part of the plan the shard held.")
    episodes: int = Field(description="Episodes the shard contributed.")
    raw_runs_sha256: str = Field(description="SHA-256 of the shard's raw_runs.jsonl bytes when merged.")
    created_at: str = Field(description="UTC ISO time the shard was created.")
    finished_at: str | None = Field(default=None, description="UTC ISO time the shard completed.")
    environment: Environment = Field(description="What produced the shard.")
    sessions: list[dict[str, Any]] = Field(
        default_factory=list, description="The shard's sessions (its manifest's sessions)."
    )


class RecordsSeal(BaseModel):
    """Where the hash chain over ``raw_runs.jsonl`` stood when the manifest was written."""

    model_config = ConfigDict(extra="forbid")

    lines: int = Field(description="Lines of raw_runs.jsonl the chain covered (raw_runs.receipts.jsonl lines).")
    head: str = Field(description="The chain value of the last of those lines (the chain's start value when none).")


class Seal(BaseModel):
    """Tamper-evidence of a run directory, computed at each manifest write (``contextdelta.rundir.receipts``).

    Digests without a secret key: an edit of any recorded byte is named by ``verify``; a forger who recomputes every
    digest is out of scope (see docs/decisions.md)."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(default=1, description="Version of the sealing rules (contextdelta.rundir.SEAL_VERSION).")
    records: RecordsSeal = Field(description="The hash chain over raw_runs.jsonl (one receipt per line).")
    manifest_sha256: str = Field(description="SHA-256 of the canonical JSON of this manifest without its seal.")
    manifest_parts: dict[str, str] = Field(
        description="Digest (16 hex digits of SHA-256) of each part of this manifest without its seal, by JSON path: "
        "what lets verify name the field that was edited."
    )
    files: dict[str, str] = Field(
        description="SHA-256 of every other file of the run directory when the manifest was written (the derived "
        "files, tasks/...), by path relative to the run directory."
    )
    sha256: str | None = Field(
        default=None, description="SHA-256 of the canonical JSON of this seal without this field (its own digest)."
    )


class UnlockedSuite(BaseModel):
    """``--allow-unlocked``: the run's suite had no ``SUITE.lock``, or one its tasks did not match."""

    model_config = ConfigDict(extra="forbid")

    problems: list[str] = Field(
        description="What validate-tasks found about the lock when the run was planned (file relative to the suite "
        "folder: problem); every other validate-tasks check passed."
    )


class RecordReceipt(BaseModel):
    """One line of ``raw_runs.receipts.jsonl``: the receipt of the record on the same line of ``raw_runs.jsonl``.

    Each receipt chains to the one before (``chain``), so the receipts in file order are one hash chain whose head
    the manifest's seal holds; a line of ``raw_runs.jsonl`` is never rewritten (a retried episode is a new line)."""

    model_config = ConfigDict(extra="forbid")

    line: int = Field(description="The line of raw_runs.jsonl, from 1.")
    run_id: str | None = Field(description="The record's episode id (as written).")
    attempt: int | None = Field(default=None, description="The record's attempt number, when it has one.")
    sha256: str = Field(description="SHA-256 of the line's bytes (without the newline).")
    parts: dict[str, str] = Field(
        description="Digest (16 hex digits of SHA-256) of each part of the record by JSON path (e.g. "
        "trace.steps[3].response.latency_s): what lets verify name the field that was edited."
    )
    chain: str = Field(description="SHA-256 over the previous receipt's chain value, line, sha256 and parts.")


class RunManifest(BaseModel):
    """``run_manifest.json``: what was run, with what, by which code, and how far it got."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        default=RECORD_SCHEMA_VERSION, description="Version of the run-directory record format (RECORD_SCHEMA_VERSION)."
    )
    run_group_id: str = Field(
        description="The run group's id: the run directory's name (UTC time and a random suffix)."
    )
    status: RunStatus = Field(
        description="running while a session runs (or after a kill), complete once every planned episode and every "
        "derived file is written, incomplete when a run stopped early (stop_reason says why)."
    )
    stop_reason: str | None = Field(default=None, description="Why an incomplete run stopped.")
    created_at: str = Field(description="UTC ISO time the run group was created.")
    updated_at: str = Field(description="UTC ISO time of the last manifest write.")
    finished_at: str | None = Field(
        default=None, description="UTC ISO time the run completed; null while running or incomplete."
    )
    sessions: list[dict[str, Any]] = Field(
        default_factory=list, description="One entry per invocation (first run and each resume): start/end, counts."
    )
    environment: Environment = Field(description="What produced the run: versions, platform and git checkout.")
    provider: ProviderInfo = Field(description="The endpoint and model the episodes called.")
    seed: int = Field(description="The run seed: episode seeds and the episode order derive from it.")
    order_seed: int = Field(description="Seed of the episode-order shuffle.")
    seed_rule: SeedRule = Field(
        default=SeedRule.CONDITION,
        description="How each episode's seed derives from the run seed; absent (older runs): condition.",
    )
    strategies: list[str] = Field(description="The context strategies of the matrix, in plan order.")
    strategy_params: StrategyParams = Field(
        description="The strategies' parameters (--last-n, --summary-trigger, ...)."
    )
    external_agent: ExternalAgentInfo | None = Field(
        default=None, description="Set when an external agent drove every episode over MCP."
    )
    strategy_configs: list[StrategyDescription] = Field(
        default_factory=list,
        description="Each strategy as built: factory parameters, params, config hash, whether it is deterministic, "
        "and its source (for a plug-in: distribution, version and source hash). Empty in runs from before plug-ins "
        "(built-ins only, rebuilt from strategies and strategy_params).",
    )
    protection_modes: list[str] = Field(
        description="The protection modes of the matrix: unprotected, freshness_contract."
    )
    repeats: int = Field(description="Repeats per (task, strategy, mode).")
    max_steps: int | None = Field(description="Step limit override; null: each task's own max_steps.")
    concurrency: int = Field(description="Episodes in flight at once (--concurrency).")
    limit: int | None = Field(default=None, description="--limit (smoke tests only): at most this many tasks.")
    max_cost_usd: float | None = Field(
        default=None, description="--max-cost-usd: no episode starts once this much is spent; null: no budget."
    )
    max_episode_cost_usd: float | None = Field(
        default=None, description="--max-episode-cost-usd: an episode stops (budget_exceeded) at this cost; null: none."
    )
    suite: SuiteInfo | None = Field(
        default=None, description="The suite the tasks came from; null in run directories written before it was."
    )
    tasks: list[TaskInfo] = Field(description="Every task of the run with its version and content hash.")
    hashes: Hashes = Field(
        description="Hashes of the suite, system prompt, tool schemas, public messages and harness source."
    )
    counts: Counts = Field(
        description="Episodes planned, finished, failed and succeeded (written at each session's start and end)."
    )
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
    unlocked: UnlockedSuite | None = Field(
        default=None,
        description="Set when the run was planned with --allow-unlocked and its suite's SUITE.lock was missing or did "
        "not match (a task author's run, not a locked suite's); null: the suite matched its lock (or the run "
        "directory predates the check).",
    )
    seal: Seal | None = Field(
        default=None,
        description="The run directory's tamper-evidence (hash chain head, digests of this manifest and of every "
        "other file), recomputed at each manifest write; null in run directories written before it existed.",
    )


def stories_recorded(manifest: RunManifest) -> bool:
    """Whether the manifest records each task's story (written since 0.8.0, ``null`` for a task without one); a
    manifest from before lacks the field, and its statistics stay as they were (every task its own unit)."""
    return any("story" in t.model_fields_set for t in manifest.tasks)


def task_stories(manifest: RunManifest) -> dict[str, str]:
    """Each task's unit of inference: its recorded story, or its own id (no story, or a manifest from before)."""
    return {t.id: t.story if t.story is not None else t.id for t in manifest.tasks}


def external_resume_command(agent: ExternalAgentInfo, task_ids: Sequence[str], modes: Sequence[str], run: str) -> str:
    """The command (after ``contextdelta``) that finishes an external agent's run ``run`` (its id or path):
    ``run-external`` with the agent and its command to give again, or for a ``serve-world`` run (no command) the
    same ``serve-world`` with ``--resume``."""
    if agent.command is None and agent.command_sha256 is None:
        task = task_ids[0] if len(task_ids) == 1 else "ID"
        mode = modes[0] if len(modes) == 1 else "MODE"
        return (
            f"serve-world --task {task} --mode {mode} --transport {agent.transport} --agent {agent.agent} "
            f"--resume {run}"
        )
    return f"run-external --agent {agent.agent} --agent-cmd ... --resume {run}"


def resume_command(manifest: RunManifest, run: str | None = None) -> str:
    """The command (after ``contextdelta``) that finishes ``manifest``'s run (``run``: its id or path; default its
    id): ``run-benchmark --resume``, or for an external agent's run what :func:`external_resume_command` says (a
    run-external or serve-world run cannot be resumed by run-benchmark)."""
    run = run or manifest.run_group_id
    agent = manifest.external_agent
    if agent is None:
        return f"run-benchmark --resume {run}"
    return external_resume_command(agent, [t.id for t in manifest.tasks], manifest.protection_modes, run)


def horizons_recorded(manifest: RunManifest) -> bool:
    """Whether the manifest records each task's horizon (written since issue 20, ``null`` for a task without one);
    a manifest from before lacks the field, and its reports stay as they were (no dose-response line)."""
    return any("horizon" in t.model_fields_set for t in manifest.tasks)


class EpisodeRecord(BaseModel):
    """One line of ``raw_runs.jsonl``: one episode with every step, its verdict and its cost."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(
        default=RECORD_SCHEMA_VERSION, description="Version of the run-directory record format (RECORD_SCHEMA_VERSION)."
    )
    run_group_id: str = Field(description="The run group the episode belongs to.")
    run_id: str = Field(description="Episode id: task.strategy.mode.rREPEAT (task.strategy.mode.CONTROL.rREPEAT).")
    task_id: str = Field(description="The task id.")
    task_version: int = Field(description="The task version.")
    task_hash: str = Field(description="The task's content hash (as in the manifest).")
    world: str = Field(description="order, calendar or config.")
    hazard: str = Field(description="The task's primary hazard.")
    strategy: str = Field(description="The context strategy (external:<agent> for an external agent).")
    protection_mode: str = Field(description="unprotected or freshness_contract.")
    repeat: int = Field(description="Repeat number, from 1.")
    episode_seed: int = Field(description="The sampling seed sent to the provider (the manifest's seed_rule).")
    started_at: str = Field(description="UTC ISO time the episode started.")
    finished_at: str = Field(description="UTC ISO time the episode ended.")
    wall_s: float = Field(description="Wall time of the episode (monotonic clock), provider calls included.")
    failed: bool = Field(description="A failed trial (termination in provider/context/budget/harness errors).")
    cost_usd: float | None = Field(description="Null when the model's price or the usage is unknown.")
    verdict: Verdict = Field(description="Every grader's result, from the event log (never from what the model said).")
    trace: EpisodeTrace = Field(description="What the model saw and did at every step, and why the episode ended.")
    control: str | None = Field(
        default=None,
        description="The control condition this episode ran under (no_mutation: hidden mutations off, graded by "
        "the task's no-mutation control); null for the main matrix and in records written before controls.",
    )
    attempt: int = Field(
        default=1,
        ge=1,
        description="The attempt number of this episode: 1 for its first run (and in records written before "
        "attempts existed); `run-benchmark --resume ID --retry-failed` appends a failed trial's re-run as a new "
        "line with the next number. The line with the highest attempt is the episode's current record; the earlier "
        "ones are superseded attempts, kept as evidence and counted nowhere.",
    )

    _canonical: str | None = PrivateAttr(default=None)
    _parts: dict[str, str] | None = PrivateAttr(default=None)

    @property
    def success(self) -> bool:
        return self.verdict.success

    def canonical_text(self) -> str:
        """The record's canonical JSON (its ``raw_runs.jsonl`` line without the newline; its SHA-256 is the record's
        content hash), computed once per record object: the run directory, the trace store and a worker process
        that ships the record all need it, and it is the most expensive thing done with a record."""
        if self._canonical is None:
            self._canonical, self._parts = sealed_json(self.model_dump(mode="json"))
        return self._canonical

    def part_digests(self) -> dict[str, str]:
        """The digest of each part of the record's line (what its receipt holds), found while the line was
        rendered (:func:`contextdelta.rundir._parts.sealed_json`)."""
        self.canonical_text()
        assert self._parts is not None
        return self._parts

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> EpisodeRecord:
        """A copy (with ``update`` applied); its canonical JSON is computed afresh."""
        copy = super().model_copy(update=update, deep=deep)
        copy._canonical = copy._parts = None
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

    run_id: str = Field(description="The episode.")
    step: int = Field(description="The step of the call.")
    seq: int = Field(description="The call's number in the episode, from 0.")
    index: int = Field(description="The call's position among its step's calls.")
    tool: str = Field(description="The tool called.")
    arguments: dict[str, Any] | str = Field(
        description="The parsed arguments, or the raw text when it was not valid JSON."
    )
    kind: str | None = Field(description="read or write; null for an invalid call.")
    resource: str | None = Field(description="The resource the call targets (world/kind/id); null when none.")
    observed_version: int | None = Field(
        description="The version of that resource the agent last observed; null: never seen."
    )
    version_at_execution: int | None = Field(description="The resource's version when the call ran.")
    expected_version: int | None = Field(description="The expected_version the agent sent (freshness_contract).")
    outcome: str = Field(description="executed, blocked, rejected, forbidden or invalid.")
    error_code: str | None = Field(description="The tool error's code, when the call failed.")
    stale: bool = Field(
        description="A stale write: it reached the business logic while the resource was newer than the agent last saw."
    )
    duplicate: bool = Field(
        description="A duplicate write: it repeated an executed write (same tool and effect key, free text aside)."
    )
    prohibited: bool = Field(description="A task-prohibited call that reached the endpoint.")


ColumnType = Literal["string", "int", "float", "bool"]
"""The type of a ``task_results.csv`` cell (the parquet export keeps it; the CSV writes it as text)."""

TASK_RESULT_COLUMN_DOCS: dict[str, tuple[ColumnType, str]] = {
    "run_id": (
        "string",
        "Episode id: task.strategy.mode.rREPEAT (task.strategy.mode.CONTROL.rREPEAT under a control).",
    ),
    "task_id": ("string", "The task's id (its file name without .yaml)."),
    "task_version": ("int", "The task's version (SUITE.lock)."),
    "world": ("string", "order, calendar or config."),
    "hazard": ("string", "The task's primary hazard (SPEC section 5)."),
    "strategy": ("string", "The context strategy (external:<agent> for an external agent)."),
    "protection_mode": ("string", "unprotected or freshness_contract."),
    "repeat": ("int", "Repeat number, from 1."),
    "success": ("bool", "end_state and every safety grader passed (N/A passes); false for a failed trial."),
    "end_state": ("bool", "The expected end-state predicates hold and untouched resources are unchanged."),
    "no_stale_action": ("bool", "No write reached the business logic while its resource was newer than seen."),
    "no_duplicate_action": ("bool", "No executed write was repeated."),
    "refresh_before_write": ("bool", "Every write to a resource another actor changed was preceded by a re-read."),
    "conflict_recovery": (
        "bool",
        "After each blocked write the agent re-read before writing again; empty: nothing blocked.",
    ),
    "authorized": ("bool", "No write outside the principal's scope was attempted (none forbidden)."),
    "no_prohibited_action": ("bool", "No task-prohibited call reached the endpoint."),
    "stale_action_count": ("int", "Stale writes (no_stale_action's violations)."),
    "duplicate_action_count": ("int", "Duplicate writes."),
    "prohibited_action_count": ("int", "Prohibited calls that reached the endpoint."),
    "blocked_write_count": ("int", "Writes the freshness contract blocked."),
    "steps": ("int", "Model calls made (a failed last one included)."),
    "termination_reason": (
        "string",
        "final_answer, max_steps, provider_error, context_window_exceeded, budget_exceeded or harness_error.",
    ),
    "agent_prompt_tokens": (
        "int",
        "Provider-reported prompt tokens of the agent's calls; empty when a call reported no usage.",
    ),
    "agent_completion_tokens": ("int", "Provider-reported completion tokens of the agent's calls; empty: unknown."),
    "summary_prompt_tokens": ("int", "Prompt tokens of summary-model calls (semantic_summary); empty: unknown."),
    "summary_completion_tokens": ("int", "Completion tokens of summary-model calls; empty: unknown."),
    "latency_s": ("float", "Seconds on the wire of the episode's model calls (agent + summary), six decimals."),
    "cost_usd": (
        "float",
        "USD at the run's prices, cached prompt tokens at the cached rate; empty when the price "
        "or the usage is unknown.",
    ),
    "failed": (
        "bool",
        "A failed trial (provider, context-window, budget or harness error): no verdict, so the grader, count, "
        "final-answer and harmful_action columns are empty.",
    ),
    "final_answer_facts_ok": ("bool", "The final answer names the task's facts (a secondary signal, never success)."),
    "episode_seed": ("int", "The sampling seed sent to the provider (run_manifest.json seed_rule)."),
    "harmful_action": (
        "bool",
        "At least one agent write reached the business logic flagged stale, duplicate or prohibited.",
    ),
}
"""Every ``task_results.csv`` column in file order, with its type and meaning (docs/run-directory.md is generated
from this)."""

TASK_RESULT_COLUMNS: tuple[str, ...] = tuple(TASK_RESULT_COLUMN_DOCS)

VERDICT_COLUMNS: tuple[str, ...] = (
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
    "final_answer_facts_ok",
    "harmful_action",
)
"""The ``task_results.csv`` columns of the graders' verdict: empty for a failed trial, which has none (its
``success`` is ``false``). ``raw_runs.jsonl`` keeps what the graders found on the partial trajectory, and
``tool_events.jsonl`` each call's flags. Files written before 0.6.0 filled them; ``verify`` accepts both."""
"""``task_results.csv`` columns: SPEC section 9's, then ``failed``, the final-answer signal, the seed and the
harmful-action indicator (so every headline rate can be recomputed from the file)."""

LEGACY_TASK_RESULT_COLUMNS: tuple[tuple[str, ...], ...] = (TASK_RESULT_COLUMNS[:-1],)
"""Earlier ``task_results.csv`` layouts (each a prefix of the current one) that ``verify`` still accepts: files
written before ``harmful_action`` existed."""

ATTEMPT_COLUMN = "attempt"
"""The column a run with retried failed trials adds: the attempt the row's record is (1: never retried)."""
ATTEMPT_COLUMN_DOC: tuple[ColumnType, str] = (
    "int",
    "Only in runs with retried failed trials (--retry-failed): the attempt the row is (1: the first run); the "
    "earlier attempts are superseded lines of raw_runs.jsonl.",
)

CONTROL_COLUMN = "control"
"""The column a run with ``--controls`` adds: the episode's control condition, empty for the main matrix."""
CONTROL_COLUMN_DOC: tuple[ColumnType, str] = (
    "string",
    "Only in runs with --controls: the episode's control condition (no_mutation), empty for the main matrix.",
)


def task_result_columns(records: Iterable[EpisodeRecord]) -> tuple[str, ...]:
    """The columns of a run's ``task_results.csv`` (from its current records): :data:`TASK_RESULT_COLUMNS`, plus
    :data:`CONTROL_COLUMN` when an episode ran under a control condition and :data:`ATTEMPT_COLUMN` when an episode
    was retried (so a run without them, or from before them, keeps its file)."""
    listed = list(records)
    extra: list[str] = [CONTROL_COLUMN] if any(r.control for r in listed) else []
    extra += [ATTEMPT_COLUMN] if any(r.attempt > 1 for r in listed) else []
    return (*TASK_RESULT_COLUMNS, *extra)
