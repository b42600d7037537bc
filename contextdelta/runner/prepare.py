"""Phase 1 of a run, *plan*: everything decided and checked before any file is written.

:func:`plan_run` turns a request (and, on ``--resume``, the run directory's manifest and episodes) into a
:class:`RunPlan`: the tasks, the matrix of episodes, the provider and what is recorded about it, the hashes resume
compares, prices and budgets, and which episodes are still to run. A refusal raises BenchmarkError (exit 2) and
leaves the results folder untouched. Order: every check that needs no network, in one pass whose refusal names
every problem it found (:class:`Problems`): the flags, the results folder, the prices, the strategies, every
``validate-tasks`` check of the suite (:func:`preflight_suite`: the slow part), the executor; then the endpoint
check (``preflight``: it answers, takes the key, serves the model and accepts tools); then resume's comparisons.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
from pydantic import ValidationError

from contextdelta._words import plural
from contextdelta.agent import SYSTEM_PROMPT_VERSION, external_strategy, initial_messages, system_prompt_sha256
from contextdelta.canonical import content_hash
from contextdelta.context import (
    BUILTIN_STRATEGIES,
    WINDOWED_STRATEGIES,
    StrategyDescription,
    StrategyError,
    StrategyServices,
    check_window,
    configure_strategies,
    probe_strategy,
    resolve_strategy,
    source_changes,
)
from contextdelta.providers import (
    PRICE_TABLE_FORMAT,
    ChatProvider,
    EndpointBusy,
    EndpointLimits,
    KeyRefused,
    Price,
    PriceTable,
    PriceTableError,
    ProviderConfigError,
    RetryPolicy,
)
from contextdelta.rundir import (
    CREATING,
    RAW_RUNS,
    RAW_RUNS_RECEIPTS,
    EpisodeAttempts,
    EpisodeRecord,
    ExternalAgentInfo,
    Hashes,
    ProviderInfo,
    ReceiptsError,
    RunDirectory,
    RunDirectoryError,
    RunIdError,
    RunManifest,
    SeedRule,
    SessionLock,
    ShardInfo,
    StrategyParams,
    SuiteInfo,
    TaskInfo,
    UnlockedSuite,
    check_results_dir,
    external_resume_command,
    read_receipts,
    run_dir,
)
from contextdelta.rundir import (
    resume_command as run_resume_command,
)
from contextdelta.runner.execute import ProviderSpec
from contextdelta.runner.plan import SEED_RULE, EpisodeSpec, Shard, order_seed, plan_episodes, plan_sha256
from contextdelta.runner.provenance import source_hash
from contextdelta.runner.request import (
    DEFAULT_REPEATS,
    BenchmarkError,
    BenchmarkRequest,
    SeveralProblems,
    UnknownTaskIdsError,
)
from contextdelta.settings import Settings, redact_url
from contextdelta.tasks import (
    Control,
    LoadedTask,
    SuiteError,
    SuiteSource,
    Task,
    recorded_source,
    resolve_suite,
    suite_hash,
)
from contextdelta.validation import SuiteRefused, runnable_suite
from contextdelta.worlds import ProtectionMode, get_world

MOCK_REFUSAL = (
    "refusing the in-process mock provider: its replies are scripted inside the harness, so its episodes would "
    "measure nothing about a model. Point --base-url at a real OpenAI-compatible endpoint (or, to smoke-test a "
    "setup, at the scripted HTTP server: python -m contextdelta.testing.server)."
)


@dataclass
class Matrix:
    """What to run: tasks x strategies x protection modes x repeats, with the run seed and step limit."""

    tasks: list[LoadedTask]
    strategies: list[str]
    """Strategy names (as in episode run ids)."""
    strategy_specs: list[str]
    """What builds each strategy (a name, or ``package.module:factory`` for a plug-in given by path)."""
    modes: list[str]
    repeats: int
    seed: int
    max_steps: int | None
    limit: int | None
    params: StrategyParams
    shard: Shard | None = None
    seed_rule: SeedRule = SEED_RULE
    """How episode seeds derive from the run seed: the current rule, or on resume the manifest's."""
    controls: list[str] = field(default_factory=list)
    """Control conditions: the whole matrix again under each (``no_mutation``)."""
    suite: SuiteInfo | None = None
    """The suite the tasks come from (``--tasks``), as the manifest records it."""
    unlocked: UnlockedSuite | None = None
    """What ``--allow-unlocked`` accepted about the suite's lock (None: the suite matched it)."""

    @property
    def task_infos(self) -> list[TaskInfo]:
        """The manifest's description of each task."""
        return [
            TaskInfo(
                id=t.task.id,
                version=t.task.version,
                hash=t.task.content_hash,
                world=t.task.world,
                hazard=t.task.evaluator.hazard.value,
                public_messages_sha256=content_hash(initial_messages(t.task.public_task)),
                horizon=t.task.evaluator.horizon,
                story=t.task.evaluator.story,
            )
            for t in self.tasks
        ]

    def episodes(self) -> list[EpisodeSpec]:
        """Every planned episode of the whole plan (all shards), in the recorded shuffled order."""
        return plan_episodes(
            [t.task.id for t in self.tasks],
            self.strategies,
            self.modes,
            self.repeats,
            order_seed(self.seed),
            self.controls,
        )

    def shard_episodes(self) -> list[EpisodeSpec]:
        """The episodes this run directory holds: the whole plan, or with ``--shard I/N`` its I-th part."""
        specs = self.episodes()
        return self.shard.select(specs) if self.shard is not None else specs

    @property
    def plan_sha256(self) -> str:
        """The hash of the whole plan (identical in every shard's manifest)."""
        return plan_sha256(self.seed, self.episodes(), self.seed_rule)

    @property
    def shard_info(self) -> ShardInfo | None:
        return ShardInfo(index=self.shard.index, count=self.shard.count) if self.shard is not None else None


EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutionPlan:
    """Where the episodes run and under which rate limits (operational: never part of what resume compares)."""

    kind: str = "local"
    """``local`` or ``ray``."""
    workers: int | None = 1
    """Worker processes (local; 1: in this process) or actors (ray; None: one per CPU of the cluster)."""
    ray_address: str | None = None
    limits: EndpointLimits = field(default_factory=EndpointLimits)


@dataclass
class RunPlan:
    """A checked plan: what the execute phase runs and the finalise phase records. Nothing is written yet."""

    request: BenchmarkRequest
    results_dir: Path
    matrix: Matrix
    provider: ChatProvider | None
    """None for an external agent's run (the agent brings its own model)."""
    provider_info: ProviderInfo
    hashes: Hashes
    prices: dict[str, Price | None]
    """The agent and summary models' prices every episode is costed with (recorded in the manifest)."""
    max_cost_usd: float | None
    max_episode_cost_usd: float | None
    strategy_configs: list[StrategyDescription]
    """Every strategy as built: what the manifest records and executors build from."""
    specs: list[EpisodeSpec]
    """Every planned episode of this run directory (with ``--shard``, of this shard), in the order they start."""
    pending: list[EpisodeSpec]
    """The planned episodes this session runs (all of them, or on resume the ones not yet recorded)."""
    execution: ExecutionPlan = field(default_factory=ExecutionPlan)
    provider_spec: ProviderSpec | None = None
    """How workers build their own provider (None: a provider object was handed over; episodes run in-process)."""
    existing: RunDirectory | None = None
    """On resume: the run directory."""
    manifest: RunManifest | None = None
    """On resume: its manifest as read."""
    done: list[EpisodeRecord] = field(default_factory=list)
    """On resume: the episodes already in ``raw_runs.jsonl`` (each one's current record)."""
    superseded: list[EpisodeRecord] = field(default_factory=list)
    """On resume: the earlier attempts in ``raw_runs.jsonl`` that a later attempt replaced."""
    retries: dict[str, int] = field(default_factory=dict)
    """With ``--retry-failed``: the pending failed trials, each run id with the attempt its re-run will be."""

    @property
    def tasks(self) -> dict[str, Task]:
        return {t.task.id: t.task for t in self.matrix.tasks}

    @property
    def resumed(self) -> bool:
        return self.existing is not None

    def attempt(self, spec: EpisodeSpec) -> int:
        """The attempt a pending episode's run will be: 1, or for a failed trial re-run one above its latest."""
        return self.retries.get(spec.run_id, 1)


# ---- the matrix ------------------------------------------------------------------------------------------------


def task_suite(request: BenchmarkRequest, manifest: RunManifest | None) -> SuiteSource:
    """The suite a run reads: ``--tasks`` as given, else on resume the one the manifest records, else the default
    (``./tasks`` when it is a folder, otherwise the packaged ``core`` suite)."""
    if request.tasks_dir is not None:
        return SuiteSource(request.suite_source or recorded_source(request.tasks_dir), request.tasks_dir)
    try:
        return resolve_suite(manifest.suite.source if manifest is not None and manifest.suite is not None else None)
    except SuiteError as exc:
        raise BenchmarkError(str(exc)) from None


def _load_tasks(
    suite: SuiteSource, wanted: list[str] | None, limit: int | None, *, allow_unlocked: bool = False
) -> tuple[list[LoadedTask], SuiteInfo, UnlockedSuite | None]:
    """The tasks to run (all, or ``wanted``, then at most ``limit``), the suite they come from, and what
    ``allow_unlocked`` accepted about its lock. The whole suite must pass every ``validate-tasks`` check first
    (:func:`preflight_suite`)."""
    if not suite.path.is_dir():
        raise BenchmarkError(f"--tasks {suite.source}: not a directory")
    loaded, unlocked = preflight_suite(suite, allow_unlocked=allow_unlocked)
    by_id = {t.task.id: t for t in loaded}
    if wanted is not None:
        unknown = [t for t in wanted if t not in by_id]
        if unknown:
            raise UnknownTaskIdsError(unknown, sorted(by_id))
        chosen = [by_id[t] for t in sorted(set(wanted))]
    else:
        chosen = sorted(loaded, key=lambda t: t.task.id)
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        raise BenchmarkError(f"no tasks to run in {suite.source}")
    info = SuiteInfo(source=suite.source, sha256=suite_hash([t.task for t in loaded]), tasks=len(loaded))
    return chosen, info, unlocked


def preflight_suite(
    suite: SuiteSource, *, allow_unlocked: bool = False
) -> tuple[list[LoadedTask], UnlockedSuite | None]:
    """Every ``validate-tasks`` check of the suite (schema, semantic checks, trajectory replays, the no-mutation
    and null-agent controls, ``SUITE.lock``), before any file is written: a suite with any problem is refused
    (exit 2, each problem listed). A missing or stale lock is accepted only with ``allow_unlocked`` (a task
    author's run), and what it accepted is returned for the manifest; None: the suite matched its lock. The one
    rule (:func:`contextdelta.validation.runnable_suite`) the scripted server loads its tasks by too."""
    try:
        runnable = runnable_suite(suite.path, suite.source, allow_unlocked=allow_unlocked)
    except SuiteRefused as exc:
        raise BenchmarkError(str(exc)) from None
    return runnable.loaded, UnlockedSuite(problems=runnable.unlocked) if runnable.unlocked else None


def _strategy_names(specs: list[str]) -> list[str]:
    """The name of each strategy spec (resolved through the registry, not built yet)."""
    if not specs:
        raise BenchmarkError(f"--strategies: none given; choose from {', '.join(BUILTIN_STRATEGIES)} or plug-ins")
    try:
        return [resolve_strategy(spec).name for spec in specs]
    except StrategyError as exc:
        raise BenchmarkError(f"--strategies: {exc}") from exc


def _check_names(strategies: list[str], modes: list[str]) -> None:
    known_modes = [m.value for m in ProtectionMode]
    bad = [m for m in modes if m not in known_modes]
    if bad or not modes:
        raise BenchmarkError(f"--protection-modes: unknown {bad or 'none given'}; choose from {', '.join(known_modes)}")
    for name, values in (("--strategies", strategies), ("--protection-modes", modes)):
        if len(set(values)) != len(values):
            raise BenchmarkError(f"{name}: a value is listed twice: {values}")


def _check_task_ids(task_ids: list[str] | None) -> None:
    """As --strategies and --protection-modes: a repeated id is a typo, never read as the ids without it."""
    if task_ids is not None and len(set(task_ids)) != len(task_ids):
        raise BenchmarkError(f"--task-ids: a value is listed twice: {task_ids}")


def _explicit_conflicts(request: BenchmarkRequest, manifest: RunManifest) -> list[str]:
    agent = request.external_agent
    # serve-world names the one task and mode of its episode --task and --mode
    serve_world = agent is not None and agent.command_sha256 is None
    task_flag, mode_flag = ("--task", "--mode") if serve_world else ("--task-ids", "--protection-modes")
    given: list[tuple[str, Any, Any]] = [
        ("--strategies", _as_recorded(request.strategies, manifest), manifest.strategies),
        (mode_flag, request.protection_modes, manifest.protection_modes),
        ("--repeats", request.repeats, manifest.repeats),
        ("--seed", request.seed, manifest.seed),
        ("--max-steps", request.max_steps, manifest.max_steps),
        ("--limit", request.limit, manifest.limit),
        (task_flag, sorted(request.task_ids) if request.task_ids else None, sorted(t.id for t in manifest.tasks)),
        ("--shard", _shard_text(request), f"{manifest.shard.index}/{manifest.shard.count}" if manifest.shard else None),
        ("--strategy-param", request.strategy_params, manifest.strategy_params.overrides),
        ("--controls", request.controls, manifest.controls),
    ]
    return [f"{flag}: run has {old!r}, now {new!r}" for flag, new, old in given if new is not None and new != old]


def _shard_text(request: BenchmarkRequest) -> str | None:
    shard = _parse_shard(request.shard)
    return shard.render() if shard is not None else None


def _parse_shard(text: str | None) -> Shard | None:
    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as exc:
        raise BenchmarkError(str(exc)) from None


def _as_recorded(given: list[str] | None, manifest: RunManifest) -> list[str] | None:
    """``--strategies`` on resume may name a plug-in by path or by name: compare names."""
    if given is None:
        return None
    by_spec = {c.spec: c.name for c in manifest.strategy_configs}
    return [by_spec.get(spec, spec) for spec in given]


def recorded_specs(manifest: RunManifest) -> list[str]:
    """What builds each strategy of a recorded run (runs from before plug-ins record built-in names only)."""
    return [c.spec for c in manifest.strategy_configs] or list(manifest.strategies)


def resolve_matrix(request: BenchmarkRequest, settings: Settings, manifest: RunManifest | None) -> Matrix:
    """The matrix from the request, or on resume from the manifest (a flag that contradicts it is refused)."""
    if manifest is not None:
        conflicts = _explicit_conflicts(request, manifest)
        if conflicts:
            raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(conflicts))
        allow = request.allow_unlocked or manifest.unlocked is not None  # resume keeps the recorded escape hatch
        source = task_suite(request, manifest)
        if request.tasks_dir is None and not source.path.is_dir():  # a folder recorded relative to where it started
            raise BenchmarkError(
                f"cannot resume {manifest.run_group_id}: its suite {source.source!r} (recorded relative to the folder "
                f"the run started in) is not a folder from here ({Path.cwd()}): resume from the folder the run "
                "started in, or give --tasks with the path of the same suite"
            )
        try:
            tasks, suite, unlocked = _load_tasks(source, [t.id for t in manifest.tasks], None, allow_unlocked=allow)
        except UnknownTaskIdsError as exc:  # another suite than the run's: say so, not which ids the new one has
            recorded = manifest.suite.source if manifest.suite is not None else "(not recorded)"
            missing = ", ".join(exc.unknown[:5]) + (f" and {len(exc.unknown) - 5} more" if len(exc.unknown) > 5 else "")
            raise BenchmarkError(
                f"cannot resume {manifest.run_group_id}: --tasks: run has suite {recorded!r}, now {source.source!r}, "
                f"which lacks {len(exc.unknown)} of the run's {len(manifest.tasks)} tasks ({missing}); leave --tasks "
                "out to resume with the run's own suite"
            ) from None
        params = strategy_params(request, manifest.strategy_params)
        return Matrix(
            tasks,
            manifest.strategies,
            recorded_specs(manifest),
            manifest.protection_modes,
            manifest.repeats,
            manifest.seed,
            manifest.max_steps,
            manifest.limit,
            params,
            Shard(manifest.shard.index, manifest.shard.count) if manifest.shard is not None else None,
            manifest.seed_rule,
            list(manifest.controls),
            suite=suite,
            unlocked=unlocked,
        )
    modes = request.protection_modes or [m.value for m in ProtectionMode]
    if request.external_agent is not None:
        if request.strategies is not None:
            raise BenchmarkError(
                "--strategies: an external agent manages its own context; its one strategy is external"
            )
        specs = strategies = [_external_name(request.external_agent.agent)]
    else:
        specs = request.strategies or list(BUILTIN_STRATEGIES)
        strategies = _strategy_names(specs)
    _check_names(strategies, modes)
    _check_task_ids(request.task_ids)
    repeats = request.repeats if request.repeats is not None else DEFAULT_REPEATS
    params = strategy_params(request, StrategyParams(overrides=request.strategy_params or {}))
    tasks, suite, unlocked = _load_tasks(
        task_suite(request, None), request.task_ids, request.limit, allow_unlocked=request.allow_unlocked
    )
    seed = request.seed if request.seed is not None else settings.seed
    shard = _parse_shard(request.shard)
    controls = _controls(request.controls)
    _check_plan_size(len(tasks), strategies, modes, repeats, controls)
    return Matrix(
        tasks,
        strategies,
        specs,
        modes,
        repeats,
        seed,
        request.max_steps,
        request.limit,
        params,
        shard,
        controls=controls,
        suite=suite,
        unlocked=unlocked,
    )


MAX_PLANNED_EPISODES = 1_000_000
"""The most episodes one plan may hold: the plan lists every episode before the first one runs, so a typo such as
``--repeats 30000000`` would otherwise fill the memory instead of being refused."""


def _check_plan_size(tasks: int, strategies: list[str], modes: list[str], repeats: int, controls: list[str]) -> None:
    """Refuse a plan of more than MAX_PLANNED_EPISODES episodes, naming the factors and the flag to lower."""
    conditions = 1 + len(controls)
    total = tasks * len(strategies) * len(modes) * repeats * conditions
    if total > MAX_PLANNED_EPISODES:
        raise BenchmarkError(
            f"--repeats {repeats}: the plan would hold {total:,} episodes ({plural(tasks, 'task')} x "
            f"{plural(len(strategies), 'strategy', 'strategies')} x {plural(len(modes), 'mode')} x "
            f"{plural(repeats, 'repeat')} x {plural(conditions, 'condition')}), more than the "
            f"{MAX_PLANNED_EPISODES:,} one run takes; lower --repeats, or run fewer tasks or strategies per run"
        )


def _controls(given: list[str] | None) -> list[str]:
    """The control conditions asked for, checked: known names, each once."""
    names = given or []
    known = [c.value for c in Control]
    unknown = [c for c in names if c not in known]
    if unknown:
        raise BenchmarkError(f"--controls: unknown control condition {unknown[0]!r}; choose from {', '.join(known)}")
    if len(set(names)) != len(names):
        raise BenchmarkError(f"--controls: a value is listed twice: {names}")
    return list(names)


def _external_name(agent: str) -> str:
    try:
        return external_strategy(agent)
    except ValueError as exc:
        raise BenchmarkError(str(exc)) from None


def external_provider_info(agent: ExternalAgentInfo) -> ProviderInfo:
    """What the manifest says about the model of an external agent's run: the agent, nothing else known."""
    return ProviderInfo(
        kind="external", base_url=None, model=agent.agent, summary_model=agent.agent, temperature=None, max_tokens=None
    )


def _external_differences(manifest: RunManifest, agent: ExternalAgentInfo) -> list[str]:
    old = manifest.external_agent
    if old is None:
        return ["external agent: the run is not an external agent's run (resume it with run-benchmark)"]
    if (old.command_sha256 is None) != (agent.command_sha256 is None):  # serve-world's run, or run-external's
        kind = "serve-world" if old.command_sha256 is None else "run-external"
        finish = run_resume_command(manifest, manifest.run_group_id)
        return [f"it is a {kind} run: finish it with `contextdelta {finish}`"]
    checks = [
        ("agent", old.agent, agent.agent),
        ("transport", old.transport, agent.transport),
        ("--agent-cmd (its SHA-256)", old.command_sha256, agent.command_sha256),
        ("--timeout-s", old.timeout_s, agent.timeout_s),
        ("--exit-grace-s", old.stop_rules()[0], agent.stop_rules()[0]),
        ("--stop-grace-s", old.stop_rules()[1], agent.stop_rules()[1]),
    ]
    return [f"{name}: run has {a!r}, now {b!r}" for name, a, b in checks if a != b]


def configure(matrix: Matrix, services: StrategyServices) -> list[StrategyDescription]:
    """Build every strategy of the matrix once (a broken plug-in or a bad parameter is refused here, before
    anything is written) and describe it for the manifest."""
    return _configure(matrix.strategy_specs, matrix.params, services)


def _configure(specs: list[str], params: StrategyParams, services: StrategyServices) -> list[StrategyDescription]:
    try:
        built = configure_strategies(
            specs,
            last_n=params.last_n,
            summary_trigger=params.summary_trigger,
            summary_keep=params.summary_keep,
            token_budget=params.token_budget,
            overrides=params.overrides,
            services=services,
        )
    except StrategyError as exc:
        raise BenchmarkError(str(exc)) from exc
    for strategy, description in built:
        if description.source.kind == "builtin":
            continue
        problem = probe_strategy(strategy, getattr(services.summary_provider, "timeout_s", None))
        if problem is not None:  # it would fail every episode's first step: refused before anything is written
            raise BenchmarkError(
                f"plug-in strategy {description.name!r} ({description.source.label()}) gives no valid context for "
                f"the smallest history (the system prompt and the instruction): {problem}"
            )
    return [description for _, description in built]


_FLAG_PARAMETERS: dict[str, tuple[tuple[str, str], ...]] = {
    "last_n": (("last_n", "n"),),
    "summary_trigger": tuple((name, "trigger") for name in WINDOWED_STRATEGIES),
    "summary_keep": tuple((name, "keep") for name in WINDOWED_STRATEGIES),
    "token_budget": (("token_budget_trim", "budget"),),
}
"""The built-in strategy parameter (strategy, key) each shared flag sets (``contextdelta.context.builtin_params``)."""


def strategy_params(request: BenchmarkRequest, base: StrategyParams) -> StrategyParams:
    """``base`` (the defaults, or on resume the manifest's) with every parameter the request gives: a given 0 is
    kept (zero is a value, never "not given"). The compaction window must satisfy ``keep <= trigger``."""
    given = {name: value for name in StrategyParams.model_fields if (value := getattr(request, name, None)) is not None}
    for flag, value in sorted(given.items()):  # a flag and a --strategy-param setting one parameter: refuse both
        for name, key in _FLAG_PARAMETERS.get(flag, ()):
            if key in base.overrides.get(name, {}):
                raise BenchmarkError(
                    f"--{flag.replace('_', '-')} {value} and --strategy-param {name}.{key}="
                    f"{base.overrides[name][key]} set the same parameter of {name}; give only one of them"
                )
    try:
        params = StrategyParams.model_validate({**base.model_dump(), **given})
        check_window(params.summary_trigger, params.summary_keep)
    except ValueError as exc:
        flags = ", ".join(f"--{name.replace('_', '-')} {value}" for name, value in sorted(given.items()))
        raise BenchmarkError(
            f"strategy parameters ({flags or 'defaults'}): {exc}; --summary-keep must not exceed --summary-trigger"
        ) from None
    return params


def run_hashes(tasks: Sequence[Task], modes: list[str]) -> Hashes:
    """The hashes recorded in the manifest and compared on resume."""
    worlds = sorted({t.world for t in tasks})
    schemas = {w: {m: get_world(w).tool_schemas(ProtectionMode(m)) for m in sorted(modes)} for w in worlds}
    messages = {t.id: initial_messages(t.public_task) for t in tasks}
    return Hashes(
        suite_sha256=suite_hash(list(tasks)),
        system_prompt_sha256=system_prompt_sha256(),
        system_prompt_version=SYSTEM_PROMPT_VERSION,
        tool_schemas_sha256=content_hash(schemas),
        public_messages_sha256=content_hash(messages),
        harness_sha256=source_hash(),
    )


# ---- resume ----------------------------------------------------------------------------------------------------


def _resume_target(results_dir: Path, run_id: str) -> tuple[RunDirectory, RunManifest]:
    """The run directory to resume (its name under the results folder, or its path) and its manifest."""
    try:
        directory = RunDirectory(run_dir(results_dir, run_id))
        manifest = directory.read_manifest()
    except (RunIdError, RunDirectoryError) as exc:
        where = Path(run_id) if "/" in run_id else results_dir / run_id
        staging = where.parent / f".{where.name}{CREATING}"
        if where.name and not where.exists() and staging.is_dir():
            raise BenchmarkError(
                f"cannot resume {where.name}: that run was never created (a run-benchmark was killed while it "
                f"built the run directory in {staging}, before any episode ran); nothing of it can be resumed: start "
                "the run again without --resume (the next run-benchmark in that results folder removes the leftover "
                "folder)"
            ) from exc
        raise BenchmarkError(f"cannot resume: {exc}") from exc
    linked = directory.entries_not_written_by_a_run()
    if linked:  # through a link it would write outside the run directory; a FIFO waits for a writer
        name, what = linked[0]
        more = f" (and {len(linked) - 1} more)" if len(linked) > 1 else ""
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: {directory.file(name)} is {what}{more}, not what the run wrote "
            "there; a resume never writes through a link (it would write outside the run directory), into a special "
            "file or onto a folder, and nothing was changed: put what the run wrote in its place (`contextdelta "
            f"verify {manifest.run_group_id} --allow-incomplete` names each such entry)"
        )
    foreign = directory.foreign_entries()
    if foreign:  # the next manifest write seals every file of the directory: these would pass for the run's
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        entries = plural(len(foreign), "entry", "entries")
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: {directory.path} holds {entries} that no run writes ({shown}); "
            f"the resume would seal {'it' if len(foreign) == 1 else 'them'} as the run's files. Nothing was changed: "
            "move them out of the run directory, then resume"
        )
    edited = directory.manifest_edits()
    if edited:  # resuming would seal the edit: refuse, and let verify name it
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: run_manifest.json was edited after it was sealed "
            f"({', '.join(edited[:5])}); `contextdelta verify {manifest.run_group_id} --allow-incomplete` names it"
        )
    snapshot = directory.snapshot_edits()
    if snapshot:  # likewise: the next manifest write would seal the changed task files as the run's
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: the task snapshot was changed after it was sealed "
            f"({', '.join(snapshot[:5])}); `contextdelta verify {manifest.run_group_id} --allow-incomplete` names it"
        )
    lost = directory.sealed_records_lost(manifest)
    if lost:  # the repair would drop them and the resume run those episodes again, sealing the new records
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: {lost} (in {directory.path}; `contextdelta verify "
            f"{manifest.run_group_id} --allow-incomplete` names what changed)"
        )
    edited_lines = directory.records_edited()
    if edited_lines:  # a kill never changes a line it wrote: resuming would count the edit and report it as the run's
        shown = ", ".join(str(n) for n in edited_lines[:10]) + (", ..." if len(edited_lines) > 10 else "")
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: {RAW_RUNS} {'line' if len(edited_lines) == 1 else 'lines'} "
            f"{shown} changed after they were written (not "
            f"the bytes their receipts sealed): restore {directory.path} as the run wrote it "
            f"(`contextdelta verify {manifest.run_group_id} --allow-incomplete` names what changed)"
        )
    resume = f"contextdelta {run_resume_command(manifest, str(directory.path))}" if manifest.external_agent else None
    lock_run(directory, resume).release()  # said now, before the endpoint and suite checks; taken again to open
    return directory, manifest


def resume_command(request: BenchmarkRequest, path: Path) -> str:
    """The command that resumes the run at ``path`` that ``request`` started or resumed: an external agent's run
    resumes with ``run-external`` (``run-benchmark`` refuses it), with its agent and its command to give again, or,
    for serve-world's, with ``serve-world ... --resume``."""
    agent = request.external_agent
    if agent is not None:
        modes = request.protection_modes or []
        return f"contextdelta {external_resume_command(agent, request.task_ids or [], modes, str(path))}"
    return f"contextdelta run-benchmark --resume {path}" + (" --retry-failed" if request.retry_failed else "")


def lock_run(directory: RunDirectory, resume: str | None = None) -> SessionLock:
    """This session's exclusive hold on ``directory`` for as long as it writes it. BenchmarkError (exit 2, nothing
    changed) while another session holds it: two sessions appending to one run would record episodes twice and
    break its hash chain. ``resume`` is the command that resumes the run (default: ``run-benchmark --resume``)."""
    lock = SessionLock.acquire(directory.path)
    if lock is None:
        command = resume or f"contextdelta run-benchmark --resume {directory.path}"
        raise BenchmarkError(
            f"run {directory.path.name} is being written by another session right now (a run-benchmark, --resume, "
            f"run-external, serve-world or report --write still running on {directory.path}); nothing was changed: "
            f"wait for that session to end (or stop it with Ctrl-C), then run `{command}` if the run is still "
            "incomplete"
        )
    return lock


def recorded_provider(request: BenchmarkRequest, manifest: RunManifest) -> BenchmarkRequest:
    """On resume, the endpoint, models, temperature and token cap the run recorded, wherever the request gives none:
    the printed ``--resume PATH`` line then works as it is, whatever ``.env`` or the environment now say (a flag
    that differs from the recording is still refused, naming it). The key still comes from the settings."""
    info = manifest.provider
    if info.kind != "openai" or manifest.external_agent is not None:
        return request
    recorded = {
        "base_url": info.base_url,
        "model": info.model,
        "summary_model": info.summary_model,
        "temperature": info.temperature,
        "max_tokens": info.max_tokens,
    }
    missing = {name: value for name, value in recorded.items() if getattr(request, name) is None and value is not None}
    return request.model_copy(update=missing) if missing else request


def _read_done(directory: RunDirectory) -> EpisodeAttempts:
    """The episodes of the run to resume, current records and superseded attempts (a torn last line is ignored,
    not cut yet); its receipts must be readable (a torn last one is repaired when the run opens)."""
    try:
        read_receipts(directory.file(RAW_RUNS_RECEIPTS))
        return directory.read_attempts()
    except ReceiptsError as exc:
        raise BenchmarkError(
            f"cannot resume: {exc}; `contextdelta verify --allow-incomplete` names what changed"
        ) from exc
    except RunDirectoryError as exc:
        raise BenchmarkError(f"cannot resume: {exc}") from exc


def _differences(manifest: RunManifest, provider: ProviderInfo, hashes: Hashes, params: StrategyParams) -> list[str]:
    """What changed since the run started, in words (resume refuses any of these)."""
    old = manifest
    checks: list[tuple[str, Any, Any]] = [
        ("model", old.provider.model, provider.model),
        ("summary model", old.provider.summary_model, provider.summary_model),
        ("base URL", old.provider.base_url, provider.base_url),
        ("provider", old.provider.kind, provider.kind),
        ("temperature", old.provider.temperature, provider.temperature),
        ("max tokens", old.provider.max_tokens, provider.max_tokens),
        ("task set (suite hash)", old.hashes.suite_sha256, hashes.suite_sha256),
        ("strategy parameters", old.strategy_params.model_dump(), params.model_dump()),
        ("system prompt", old.hashes.system_prompt_sha256, hashes.system_prompt_sha256),
        ("tool schemas", old.hashes.tool_schemas_sha256, hashes.tool_schemas_sha256),
        ("harness source (harness hash)", old.hashes.harness_sha256, hashes.harness_sha256),
    ]
    return [f"{name}: run has {a!r}, now {b!r}" for name, a, b in checks if a != b]


def pending_episodes(
    specs: list[EpisodeSpec], done: Sequence[EpisodeRecord], *, retry_failed: bool = False
) -> list[EpisodeSpec]:
    """The planned episodes that no recorded episode answers yet, and with ``retry_failed`` also those whose
    current record is a failed trial, in plan order (``done``: each episode's current record)."""
    finished = {r.run_id: r for r in done}
    return [s for s in specs if (record := finished.get(s.run_id)) is None or (retry_failed and record.failed)]


def retry_attempts(pending: Sequence[EpisodeSpec], done: Sequence[EpisodeRecord]) -> dict[str, int]:
    """For each pending episode that already has a record (a failed trial run again), the attempt its re-run is:
    one above its current record's."""
    current = {r.run_id: r.attempt for r in done}
    return {s.run_id: current[s.run_id] + 1 for s in pending if s.run_id in current}


def _strategy_differences(manifest: RunManifest, configs: Sequence[StrategyDescription]) -> list[str]:
    """Strategies whose configuration hash changed (same parameters, different resolved params)."""
    differences: list[str] = []
    recorded = {c.name: c.config_hash for c in manifest.strategy_configs}
    for config in configs:
        old = recorded.get(config.name)
        if old is not None and old != config.config_hash:
            differences.append(
                f"strategy {config.name!r}: configuration hash changed ({old[:12]} -> {config.config_hash[:12]})"
            )
    return differences


def _check_resumable(
    manifest: RunManifest,
    provider_info: ProviderInfo,
    hashes: Hashes,
    matrix: Matrix,
    done: list[EpisodeRecord],
    configs: Sequence[StrategyDescription],
) -> None:
    differences = [
        *_differences(manifest, provider_info, hashes, matrix.params),
        *_strategy_differences(manifest, configs),
    ]
    if differences:
        raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(differences))
    if manifest.plan_sha256 is not None and manifest.plan_sha256 != matrix.plan_sha256:
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: plan_sha256: the plan (episodes and seeds) re-derives differently"
        )
    planned = {s.run_id for s in matrix.shard_episodes()}
    strays = [r.run_id for r in done if r.run_id not in planned]
    if strays:
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: raw_runs.jsonl holds unplanned episodes {strays[:5]}"
        )


# ---- provider, prices, budgets ----------------------------------------------------------------------------------


def _provider(
    request: BenchmarkRequest, settings: Settings, given: ChatProvider | None = None
) -> tuple[ChatProvider, ProviderInfo, ProviderSpec | None]:
    if request.provider == "mock" or (given is not None and given.is_mock):
        raise BenchmarkError(MOCK_REFUSAL)
    if given is not None:
        return given, _provider_info(request, settings, given), None
    # the retries' time budget grows with --timeout-s: a budget shorter than it would cut every call short of it
    max_attempts = None if request.max_retries is None else request.max_retries + 1
    overrides: dict[str, Any] = {
        "timeout_s": request.timeout_s,
        "retry": RetryPolicy.for_timeout(request.timeout_s, max_attempts),
    }
    for name in ("model", "base_url", "api_key", "temperature", "max_tokens"):
        value = getattr(request, name)
        if value is not None:
            overrides[name] = value
    spec = ProviderSpec(request.provider, settings, overrides)
    try:
        provider = spec.build()
    except ProviderConfigError as exc:
        raise BenchmarkError(str(exc)) from exc
    if provider.is_mock:
        raise BenchmarkError(MOCK_REFUSAL)
    return provider, _provider_info(request, settings, provider), spec


WORKERS_PER_CORE = 4
"""The most local worker processes per core: episodes wait on the endpoint within each worker's event loop, so more
processes than cores add no throughput, only memory (about 100 MB each)."""


def _execution(request: BenchmarkRequest, settings: Settings, spec: ProviderSpec | None) -> ExecutionPlan:
    """The executor and the rate limits the flags ask for (checked; nothing started)."""
    if request.executor not in EXECUTORS:
        raise BenchmarkError(f"--executor {request.executor!r}: choose from {', '.join(EXECUTORS)}")
    workers = request.workers if request.workers is not None else settings.workers
    if request.ray_address is not None and request.executor != "ray":
        raise BenchmarkError("--ray-address needs --executor ray")
    try:
        limits = EndpointLimits(
            max_concurrent_requests=request.max_concurrent_requests,
            requests_per_minute=request.requests_per_minute,
            tokens_per_minute=request.tokens_per_minute,
            adaptive=request.adaptive_concurrency,
        )
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        flag = {"adaptive": "--adaptive-concurrency"}.get(
            str(err["loc"][0]), "--" + str(err["loc"][0]).replace("_", "-")
        )
        raise BenchmarkError(f"{flag}: {err['msg']}, got {err.get('input')!r}") from None
    if request.executor == "ray":
        if importlib.util.find_spec("ray") is None:
            raise BenchmarkError(
                "--executor ray needs Ray: install the ray extra (pip install 'contextdelta[ray]'), or use "
                "--executor local"
            )
        if spec is None:
            raise BenchmarkError("--executor ray needs a provider built from settings, not a provider object")
        if request.ray_address is not None:
            problem = ray_address_problem(request.ray_address)
            if problem is not None:
                raise BenchmarkError(
                    f"--ray-address {request.ray_address!r}: cannot reach a Ray cluster there: {problem}; start it "
                    "(ray start --head) or correct the address, or leave --ray-address out for a local cluster"
                )
        return ExecutionPlan("ray", min(workers, request.concurrency) if workers else None, request.ray_address, limits)
    if spec is None:  # a provider object cannot be rebuilt in another process
        return ExecutionPlan("local", 1, None, limits)
    cores = os.cpu_count() or 1
    chosen = workers if workers is not None else cores
    if chosen > WORKERS_PER_CORE * cores:
        given = "--workers" if request.workers is not None else "CONTEXTDELTA_WORKERS"
        raise BenchmarkError(
            f"{given} {chosen}: this machine has {cores} cores, and each worker is an interpreter of its own (a "
            f"typo here fills the memory); give at most {WORKERS_PER_CORE * cores} ({WORKERS_PER_CORE} per core), or "
            "use --executor ray for more machines"
        )
    return ExecutionPlan("local", max(1, min(chosen, request.concurrency)), None, limits)


RAY_CONNECT_TIMEOUT_S = 5.0
"""How long the check of ``--ray-address`` waits for a connection to its host and port."""
RAY_DEFAULT_PORTS = {"": 6379, "ray": 10001}
"""The port Ray assumes when an address names none: a head node's GCS (``host``), the Ray Client server
(``ray://host``)."""


def ray_address_problem(address: str, timeout_s: float = RAY_CONNECT_TIMEOUT_S) -> str | None:
    """Why nothing can answer at ``--ray-address`` (the host does not resolve, or nothing listens on the port), or
    None. ``ray.init`` retries such an address for many minutes, in a thread that Ctrl-C and SIGTERM cannot stop, so
    the run checks it first. ``auto``, ``local`` and schemes other than ``ray://`` are left to Ray."""
    if address in ("auto", "local"):
        return None
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "", address
    if scheme not in RAY_DEFAULT_PORTS:
        return None
    try:
        parts = urllib.parse.urlsplit("//" + rest)
        host, port = parts.hostname, parts.port or RAY_DEFAULT_PORTS[scheme]
    except ValueError as exc:
        return f"not a host:port address ({exc})"
    if not host:
        return "no host in it"
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        return f"nothing answers at {host}:{port} ({exc.strerror or exc})"
    return None


def _provider_info(request: BenchmarkRequest, settings: Settings, provider: ChatProvider) -> ProviderInfo:
    model = provider.model
    temperature = request.temperature if request.temperature is not None else settings.temperature
    return ProviderInfo(
        kind=provider.name,
        base_url=redact_url(request.base_url or settings.base_url),
        model=model,
        summary_model=request.summary_model or settings.summary_model or model,
        temperature=temperature,
        max_tokens=request.max_tokens,
    )


def _prices(request: BenchmarkRequest) -> PriceTable:
    try:
        return PriceTable.load(request.price_table)
    except PriceTableError as exc:  # the message names the file; this names the flag it came from
        raise BenchmarkError(f"--price-table {exc}" if request.price_table is not None else str(exc)) from exc


def _run_prices(
    table: PriceTable, info: ProviderInfo, manifest: RunManifest | None, given: Path | None
) -> dict[str, Price | None]:
    """The prices the run's episodes are costed with: the table's for the agent and summary models; on resume the
    recorded ones, since the episodes already recorded were costed with them (a --price-table that prices those
    models differently is refused)."""
    wanted = table.for_models([info.model, info.summary_model])
    if manifest is None or manifest.prices is None:
        return wanted
    if given is not None and wanted != manifest.prices:
        changed = sorted(m for m in {*wanted, *manifest.prices} if wanted.get(m) != manifest.prices.get(m))
        raise BenchmarkError(
            f"cannot resume {manifest.run_group_id}: --price-table {given} prices {', '.join(changed)} differently "
            "from the prices its episodes were costed with (run_manifest.json prices); resume without --price-table"
        )
    return dict(manifest.prices)


def _check_budget_prices(
    prices: dict[str, Price | None],
    provider_info: ProviderInfo,
    matrix: Matrix,
    budgets: tuple[float | None, float | None],
) -> None:
    if all(b is None for b in budgets):
        return
    if prices.get(provider_info.model) is None or (
        "semantic_summary" in matrix.strategies and prices.get(provider_info.summary_model) is None
    ):
        raise BenchmarkError(
            f"a cost budget needs a known price for {provider_info.model!r} (and the summary model); "
            f"add it with --price-table FILE ({PRICE_TABLE_FORMAT})"
        )


def _preflight(provider: ChatProvider) -> None:
    preflight = getattr(provider, "preflight", None)
    if preflight is not None:
        problem = anyio.run(preflight)
        if problem is not None:
            end = "" if problem.endswith((".", "?", "!")) else "."
            # a busy or failing endpoint (429, 5xx) is at the right URL: only waiting helps; a refused key is the key
            fix = "" if isinstance(problem, EndpointBusy | KeyRefused) else "; check --base-url / CONTEXTDELTA_BASE_URL"
            raise BenchmarkError(f"{problem}{end} Nothing was run{fix}.")


def _check_summary_model(provider: ChatProvider, info: ProviderInfo) -> None:
    """A summary model apart from the agent's is checked too: the endpoint check only asked for the agent's."""
    check = getattr(provider, "check_summary_model", None)
    if check is None or not info.summary_model or info.summary_model == info.model:
        return
    problem = anyio.run(check, info.summary_model)
    if problem is not None:
        raise BenchmarkError(f"{problem}. Nothing was run.")


def _close(provider: ChatProvider | None) -> None:
    """Release a provider the plan will not hand on (its connection pool, its I/O thread)."""
    close = getattr(provider, "aclose", None)
    if close is not None:
        anyio.run(close)


def _results_dir(path: Path, flag: str = "--results-dir") -> None:
    try:
        check_results_dir(path, flag=flag)
    except RunDirectoryError as exc:
        raise BenchmarkError(str(exc)) from None


def _check_request(request: BenchmarkRequest, problems: Problems) -> None:
    """The local checks of a new run's flags: strategy and mode names, strategy parameters, task ids, controls, the
    shard; each problem is added to ``problems`` (none stops the others)."""
    modes = request.protection_modes or [m.value for m in ProtectionMode]
    problems.check(lambda: strategy_params(request, StrategyParams(overrides=request.strategy_params or {})))
    if request.external_agent is None:
        problems.check(lambda: _check_names(_strategy_names(request.strategies or list(BUILTIN_STRATEGIES)), modes))
    else:
        problems.check(lambda: _check_names([], modes))
    problems.check(lambda: _check_task_ids(request.task_ids))
    problems.check(lambda: _controls(request.controls))
    problems.check(lambda: _parse_shard(request.shard))


T = TypeVar("T")


class Problems:
    """The refusals of the checks that need no network, gathered in one pass so that one message names every one
    (a broken task folder and a wrong flag together), before the endpoint is contacted."""

    def __init__(self) -> None:
        self.refusals: list[BenchmarkError] = []

    @property
    def found(self) -> list[str]:
        return [refusal.message for refusal in self.refusals]

    def check(self, run: Callable[[], T]) -> T | None:
        """``run()``, or None when it refuses (kept once: two checks may say the same thing)."""
        try:
            return run()
        except BenchmarkError as exc:
            if exc.message not in self.found:
                self.refusals.append(exc)
            return None

    def raise_any(self) -> None:
        """Refuse the run (exit 2) naming every problem found, if any; one problem is raised as it was (its type
        tells a caller such as serve-world which flag to name)."""
        if len(self.refusals) == 1:
            raise self.refusals[0]
        if self.refusals:
            raise SeveralProblems(self.refusals)


def _check_strategies(request: BenchmarkRequest, chat: ChatProvider, provider_info: ProviderInfo) -> None:
    """Build a new run's strategies once with their parameters (a bad parameter or a broken plug-in is named)
    before the endpoint is contacted."""
    params = strategy_params(request, StrategyParams(overrides=request.strategy_params or {}))
    services = StrategyServices(summary_provider=chat, summary_model=provider_info.summary_model)
    _configure(request.strategies or list(BUILTIN_STRATEGIES), params, services)


# ---- the phase -------------------------------------------------------------------------------------------------


def plan_run(request: BenchmarkRequest, settings: Settings, provider: ChatProvider | None = None) -> RunPlan:
    """Check the request and decide the run (see the module docstring). Raises BenchmarkError for refusals.

    ``provider`` replaces the one built from the request (library use); mock providers are refused either way.
    """
    results_dir = request.results_dir or Path(settings.results_dir)
    target: tuple[RunDirectory, RunManifest] | None = None
    if request.retry_failed and request.resume is None:
        raise BenchmarkError(
            "--retry-failed re-runs the failed trials of an earlier run: give that run with --resume ID "
            "(e.g. contextdelta run-benchmark --resume results/RUN_ID --retry-failed)"
        )
    if request.resume is not None:
        target = _resume_target(results_dir, request.resume)
        results_dir = target[0].path.parent
        request = recorded_provider(request, target[1])
    # everything that needs no network first, in one pass that names every problem (the task folder, the flags, the
    # results folder): a user with a broken task folder and no endpoint running hears of both, the folder first
    problems = Problems()
    if target is None:
        _check_request(request, problems)
    # a folder from the environment is named by its variable: the user gave no --results-dir
    from_env = target is None and request.results_dir is None
    flag = "--resume" if target else "CONTEXTDELTA_RESULTS_DIR" if from_env else "--results-dir"
    problems.check(lambda: _results_dir(target[0].path if target else results_dir, flag))
    prices = problems.check(lambda: _prices(request))
    chat: ChatProvider | None = None
    provider_info: ProviderInfo | None = None
    provider_spec: ProviderSpec | None = None
    if request.external_agent is None:
        built = problems.check(lambda: _provider(request, settings, provider))  # builds a client; no request
        if built is not None:
            chat, provider_info, provider_spec = built
    try:
        # the strategies built once: not when their names or parameters were refused already (said once)
        if target is None and chat is not None and provider_info is not None and not problems.found:
            problems.check(lambda: _check_strategies(request, chat, provider_info))
        manifest = target[1] if target else None
        if target is None:  # the task folder on its own, whatever else was refused (its report is reused below)
            problems.check(
                lambda: _load_tasks(
                    task_suite(request, None), request.task_ids, request.limit, allow_unlocked=request.allow_unlocked
                )
            )
        matrix = problems.check(lambda: resolve_matrix(request, settings, manifest))
        execution = problems.check(lambda: _execution(request, settings, provider_spec))
        if target is None and prices is not None and provider_info is not None and matrix is not None:
            run_prices = _run_prices(prices, provider_info, None, request.price_table)
            budgets = (request.max_cost_usd, request.max_episode_cost_usd)
            problems.check(lambda: _check_budget_prices(run_prices, provider_info, matrix, budgets))
        problems.raise_any()
        assert prices is not None and matrix is not None and execution is not None
        if chat is not None:
            # then the endpoint: it answers, takes the key, serves the model and accepts tools
            _preflight(chat)
            # a new run's summary model (a resume refuses a summary model other than the one its run was served)
            wanted = request.strategies or BUILTIN_STRATEGIES
            if target is None and provider_info is not None and "semantic_summary" in wanted:
                _check_summary_model(chat, provider_info)
        return _plan(
            request, settings, results_dir, target, chat, provider_info, prices, matrix, execution, provider_spec
        )
    except BaseException:
        _close(chat)
        raise


def _plan(
    request: BenchmarkRequest,
    settings: Settings,
    results_dir: Path,
    target: tuple[RunDirectory, RunManifest] | None,
    chat: ChatProvider | None,
    provider_info: ProviderInfo | None,
    prices: PriceTable,
    matrix: Matrix,
    execution: ExecutionPlan,
    provider_spec: ProviderSpec | None = None,
) -> RunPlan:
    manifest = target[1] if target else None
    attempts = _read_done(target[0]) if target else EpisodeAttempts.of(())
    done = list(attempts.current)
    if request.external_agent is not None:
        # an external agent brings its own model and context: no provider, no strategies to build
        chat, provider_info, configs = None, external_provider_info(request.external_agent), []
        if manifest is not None:
            changed = _external_differences(manifest, request.external_agent)
            if changed:
                raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(changed))
    else:
        assert chat is not None and provider_info is not None
        if manifest is not None:
            if manifest.external_agent is not None:
                raise BenchmarkError(
                    f"cannot resume {manifest.run_group_id} with run-benchmark: it is an external agent's run "
                    "(resume it with run-external)"
                )
            # before building anything: a plug-in that changed (or is gone) is named, not reported as unknown
            changed = source_changes(manifest.strategy_configs)
            if changed:
                raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(changed))
        services = StrategyServices(summary_provider=chat, summary_model=provider_info.summary_model)
        configs = configure(matrix, services)
    hashes = run_hashes([t.task for t in matrix.tasks], matrix.modes)
    max_cost = request.max_cost_usd
    max_episode_cost = request.max_episode_cost_usd
    if manifest is not None:
        max_cost = manifest.max_cost_usd if max_cost is None else max_cost
        max_episode_cost = manifest.max_episode_cost_usd if max_episode_cost is None else max_episode_cost
        _check_resumable(manifest, provider_info, hashes, matrix, done, configs)
    run_prices = _run_prices(prices, provider_info, manifest, request.price_table)
    _check_budget_prices(run_prices, provider_info, matrix, (max_cost, max_episode_cost))
    specs = matrix.shard_episodes()
    pending = pending_episodes(specs, done, retry_failed=request.retry_failed)
    return RunPlan(
        request=request,
        results_dir=results_dir,
        matrix=matrix,
        provider=chat,
        provider_info=provider_info,
        hashes=hashes,
        prices=run_prices,
        max_cost_usd=max_cost,
        max_episode_cost_usd=max_episode_cost,
        strategy_configs=configs,
        specs=specs,
        pending=pending,
        existing=target[0] if target else None,
        execution=execution,
        provider_spec=provider_spec,
        manifest=manifest,
        done=done,
        superseded=list(attempts.superseded),
        retries=retry_attempts(pending, done),
    )
