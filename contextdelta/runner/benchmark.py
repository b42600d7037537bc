"""``run-benchmark``: run the matrix of episodes and write a provenance-preserving run directory.

One fresh world per episode; episodes run concurrently (anyio) and are fully isolated: each gets its own world
and its own strategy state. Every finished episode is graded and appended to ``raw_runs.jsonl`` at once, so a
killed run loses at most the episodes in flight, and ``--resume`` runs exactly the missing ones.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, SecretStr

from contextdelta.agent import initial_messages, run_episode, system_prompt_sha256
from contextdelta.agent.prompt import SYSTEM_PROMPT_VERSION
from contextdelta.agent.records import EpisodeTotals
from contextdelta.canonical import content_hash
from contextdelta.context import STRATEGY_NAMES, create_strategy
from contextdelta.context.base import ContextStrategy
from contextdelta.grading import grade
from contextdelta.providers.base import ChatProvider, Usage
from contextdelta.providers.registry import ProviderConfigError, create_provider
from contextdelta.rundir.ids import RunIdError, new_run_group_id, run_dir, validate_run_id
from contextdelta.rundir.layout import RunDirectory, RunDirectoryError, tool_event_records
from contextdelta.rundir.records import (
    FAILED_TERMINATIONS,
    Counts,
    EpisodeRecord,
    Hashes,
    ProviderInfo,
    RunManifest,
    RunStatus,
    StrategyParams,
    TaskInfo,
)
from contextdelta.runner.plan import EpisodeSpec, episode_seed, order_seed, plan_episodes
from contextdelta.runner.pricing import PriceTable, PriceTableError
from contextdelta.runner.provenance import environment, source_hash
from contextdelta.settings import Settings, redact_url
from contextdelta.tasks import Task, suite_hash
from contextdelta.tasks.loader import LoadedTask, load_directory
from contextdelta.worlds import ProtectionMode, get_world

DEFAULT_REPEATS = 3
DEFAULT_CONCURRENCY = 4


class BenchmarkError(Exception):
    """A run that cannot start or continue; ``exit_code`` 2 for refusals and bad configuration."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class BenchmarkRequest(BaseModel):
    """What the user asked for. ``None`` means "not given": defaults apply, or the manifest's on resume."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tasks_dir: Path = Path("tasks")
    task_ids: list[str] | None = None
    strategies: list[str] | None = None
    protection_modes: list[str] | None = None
    repeats: int | None = None
    limit: int | None = None
    max_steps: int | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    seed: int | None = None
    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: SecretStr | None = None
    summary_model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    results_dir: Path | None = None
    max_cost_usd: float | None = None
    max_episode_cost_usd: float | None = None
    price_table: Path | None = None
    last_n: int | None = None
    summary_trigger: int | None = None
    summary_keep: int | None = None
    resume: str | None = None


@dataclass
class Progress:
    """Callbacks the CLI uses to show progress; all optional."""

    start: Callable[[int, int], None] = lambda total, done: None
    episode: Callable[[EpisodeRecord], None] = lambda record: None
    message: Callable[[str], None] = lambda text: None


@dataclass
class RunOutcome:
    path: Path
    manifest: RunManifest
    records: list[EpisodeRecord] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return (self.manifest.stop_reason or "").startswith("interrupted")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# ---- preparing ------------------------------------------------------------------------------------------------


def _load_tasks(request: BenchmarkRequest, wanted: list[str] | None, limit: int | None) -> list[LoadedTask]:
    if not request.tasks_dir.is_dir():
        raise BenchmarkError(f"--tasks {request.tasks_dir}: not a directory")
    loaded, problems = load_directory(request.tasks_dir)
    if problems:
        listing = "\n".join(f"  {p.render()}" for p in problems[:20])
        raise BenchmarkError(f"the task files have problems (run `contextdelta validate-tasks`):\n{listing}")
    by_id = {t.task.id: t for t in loaded}
    if wanted is not None:
        unknown = [t for t in wanted if t not in by_id]
        if unknown:
            raise BenchmarkError(f"--task-ids: unknown task ids {unknown}; known: {', '.join(sorted(by_id))}")
        chosen = [by_id[t] for t in sorted(set(wanted))]
    else:
        chosen = sorted(loaded, key=lambda t: t.task.id)
    if limit is not None:
        chosen = chosen[:limit]
    if not chosen:
        raise BenchmarkError(f"no tasks to run in {request.tasks_dir}")
    return chosen


def _check_names(strategies: list[str], modes: list[str]) -> None:
    bad = [s for s in strategies if s not in STRATEGY_NAMES]
    if bad or not strategies:
        raise BenchmarkError(f"--strategies: unknown {bad or 'none given'}; choose from {', '.join(STRATEGY_NAMES)}")
    known_modes = [m.value for m in ProtectionMode]
    bad = [m for m in modes if m not in known_modes]
    if bad or not modes:
        raise BenchmarkError(f"--protection-modes: unknown {bad or 'none given'}; choose from {', '.join(known_modes)}")
    for name, values in (("--strategies", strategies), ("--protection-modes", modes)):
        if len(set(values)) != len(values):
            raise BenchmarkError(f"{name}: a value is listed twice: {values}")


def _hashes(tasks: Sequence[Task], modes: list[str]) -> Hashes:
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


@dataclass
class _Plan:
    tasks: list[LoadedTask]
    strategies: list[str]
    modes: list[str]
    repeats: int
    seed: int
    max_steps: int | None
    limit: int | None
    params: StrategyParams


def _explicit_conflicts(request: BenchmarkRequest, manifest: RunManifest) -> list[str]:
    given: list[tuple[str, Any, Any]] = [
        ("--strategies", request.strategies, manifest.strategies),
        ("--protection-modes", request.protection_modes, manifest.protection_modes),
        ("--repeats", request.repeats, manifest.repeats),
        ("--seed", request.seed, manifest.seed),
        ("--max-steps", request.max_steps, manifest.max_steps),
        ("--limit", request.limit, manifest.limit),
        ("--task-ids", sorted(request.task_ids) if request.task_ids else None, sorted(t.id for t in manifest.tasks)),
    ]
    return [f"{flag}: run has {old!r}, now {new!r}" for flag, new, old in given if new is not None and new != old]


def _resolve_plan(request: BenchmarkRequest, settings: Settings, manifest: RunManifest | None) -> _Plan:
    if manifest is not None:
        conflicts = _explicit_conflicts(request, manifest)
        if conflicts:
            raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(conflicts))
        tasks = _load_tasks(request, [t.id for t in manifest.tasks], None)
        params = StrategyParams(
            last_n=request.last_n or manifest.strategy_params.last_n,
            summary_trigger=request.summary_trigger or manifest.strategy_params.summary_trigger,
            summary_keep=request.summary_keep or manifest.strategy_params.summary_keep,
        )
        return _Plan(
            tasks,
            manifest.strategies,
            manifest.protection_modes,
            manifest.repeats,
            manifest.seed,
            manifest.max_steps,
            manifest.limit,
            params,
        )
    strategies = request.strategies or list(STRATEGY_NAMES)
    modes = request.protection_modes or [m.value for m in ProtectionMode]
    _check_names(strategies, modes)
    repeats = request.repeats if request.repeats is not None else DEFAULT_REPEATS
    if repeats < 1:
        raise BenchmarkError(f"--repeats must be at least 1, got {repeats}")
    if request.limit is not None and request.limit < 1:
        raise BenchmarkError(f"--limit must be at least 1, got {request.limit}")
    if request.max_steps is not None and request.max_steps < 1:
        raise BenchmarkError(f"--max-steps must be at least 1, got {request.max_steps}")
    tasks = _load_tasks(request, request.task_ids, request.limit)
    try:
        params = StrategyParams(
            last_n=request.last_n or 3,
            summary_trigger=request.summary_trigger or 6,
            summary_keep=request.summary_keep or 3,
        )
    except ValueError as exc:
        raise BenchmarkError(f"strategy parameters: {exc}") from exc
    seed = request.seed if request.seed is not None else settings.seed
    return _Plan(tasks, strategies, modes, repeats, seed, request.max_steps, request.limit, params)


MOCK_REFUSAL = (
    "refusing the in-process mock provider: its replies are scripted inside the harness, so its episodes would "
    "measure nothing about a model. Point --base-url at a real OpenAI-compatible endpoint (or, to smoke-test a "
    "setup, at the scripted HTTP server: python -m contextdelta.testing.server)."
)


def _provider(
    request: BenchmarkRequest, settings: Settings, given: ChatProvider | None = None
) -> tuple[ChatProvider, ProviderInfo]:
    if request.provider == "mock" or (given is not None and given.is_mock):
        raise BenchmarkError(MOCK_REFUSAL)
    if given is not None:
        provider = given
        return provider, _provider_info(request, settings, provider)
    overrides: dict[str, Any] = {"timeout_s": request.timeout_s}
    for name in ("model", "base_url", "api_key", "temperature", "max_tokens"):
        value = getattr(request, name)
        if value is not None:
            overrides[name] = value
    try:
        provider = create_provider(settings, kind=request.provider, **overrides)
    except ProviderConfigError as exc:
        raise BenchmarkError(str(exc)) from exc
    if provider.is_mock:
        raise BenchmarkError(MOCK_REFUSAL)
    return provider, _provider_info(request, settings, provider)


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


# ---- running --------------------------------------------------------------------------------------------------


class _Run:
    """The state of one invocation: what is done, what it cost, and the writers."""

    def __init__(
        self,
        directory: RunDirectory,
        manifest: RunManifest,
        plan: _Plan,
        done: list[EpisodeRecord],
        prices: PriceTable,
        progress: Progress,
        max_cost_usd: float | None,
        max_episode_cost_usd: float | None,
    ) -> None:
        self.directory = directory
        self.manifest = manifest
        self.plan = plan
        self.records = list(done)
        self.prices = prices
        self.progress = progress
        self.max_cost_usd = max_cost_usd
        self.max_episode_cost_usd = max_episode_cost_usd
        self.spent = sum(r.cost_usd or 0.0 for r in done)
        self.stop_reason: str | None = None
        self.tasks = {t.task.id: t.task for t in plan.tasks}
        self.raw_writer, self.events_writer = directory.open_writers()

    def cost(self, totals: EpisodeTotals) -> float | None:
        if not totals.usage_complete:
            return None
        agent = self.prices.cost(self.manifest.provider.model, totals.agent_usage)
        if totals.summary_calls == 0:
            return agent
        summary = self.prices.cost(self.manifest.provider.summary_model, totals.summary_usage)
        return None if agent is None or summary is None else agent + summary

    def episode_budget(self, totals: EpisodeTotals) -> str | None:
        if self.max_episode_cost_usd is None:
            return None
        spent = self.cost(totals)
        if spent is not None and spent >= self.max_episode_cost_usd:
            return f"episode cost ${spent:.4f} reached --max-episode-cost-usd ${self.max_episode_cost_usd}"
        return None

    def budget_left(self) -> bool:
        if self.max_cost_usd is not None and self.spent >= self.max_cost_usd:
            self.stop_reason = f"budget exhausted: spent ${self.spent:.4f} of --max-cost-usd ${self.max_cost_usd}"
            return False
        return True

    async def run_one(self, spec: EpisodeSpec, provider: ChatProvider, strategies: dict[str, ContextStrategy]) -> None:
        task = self.tasks[spec.task_id]
        world = task.build_world(ProtectionMode(spec.protection_mode))
        initial = world.state()
        seed = episode_seed(self.plan.seed, spec)
        started = utc_now()
        clock = time.perf_counter()
        trace = await run_episode(
            task.public_task,
            world,
            provider,
            strategies[spec.strategy],
            max_steps=self.plan.max_steps or task.evaluator.max_steps,
            seed=seed,
            budget=self.episode_budget,
        )
        wall_s = time.perf_counter() - clock
        verdict = grade(task, trace.tool_events(), trace.mutation_events(), initial, world.state(), trace.final_answer)
        failed = trace.termination in FAILED_TERMINATIONS
        if failed and verdict.success:
            verdict = verdict.model_copy(update={"success": False})
        record = EpisodeRecord(
            run_group_id=self.manifest.run_group_id,
            run_id=spec.run_id,
            task_id=task.id,
            task_version=task.version,
            task_hash=task.content_hash,
            world=task.world,
            hazard=task.evaluator.hazard.value,
            strategy=spec.strategy,
            protection_mode=spec.protection_mode,
            repeat=spec.repeat,
            episode_seed=seed,
            started_at=started,
            finished_at=utc_now(),
            wall_s=round(wall_s, 6),
            failed=failed,
            cost_usd=self.cost(trace.totals),
            verdict=verdict,
            trace=trace,
        )
        self.raw_writer.append([record])
        self.events_writer.append(list(tool_event_records(record)))
        self.records.append(record)
        self.spent += record.cost_usd or 0.0
        self.progress.episode(record)

    def counts(self) -> Counts:
        return Counts(
            planned=self.manifest.counts.planned,
            finished=len(self.records),
            failed=sum(r.failed for r in self.records),
            succeeded=sum(r.verdict.success for r in self.records),
        )

    def close(self) -> None:
        self.raw_writer.close()
        self.events_writer.close()


async def _execute(run: _Run, pending: list[EpisodeSpec], provider: ChatProvider, concurrency: int) -> None:
    params = run.plan.params
    strategies = {
        name: create_strategy(
            name,
            last_n=params.last_n,
            summary_trigger=params.summary_trigger,
            summary_keep=params.summary_keep,
            summary_provider=provider,
            summary_model=run.manifest.provider.summary_model,
        )
        for name in run.plan.strategies
    }
    limiter = anyio.Semaphore(concurrency)

    async def one(spec: EpisodeSpec) -> None:
        try:
            await run.run_one(spec, provider, strategies)
        finally:
            limiter.release()

    try:
        async with anyio.create_task_group() as group:

            async def watch_signals() -> None:
                try:
                    receiver = anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM)
                    with receiver as signals:
                        async for signum in signals:
                            run.stop_reason = f"interrupted by {signal.Signals(signum).name}"
                            group.cancel_scope.cancel()
                            return
                except (ValueError, RuntimeError):  # not the main thread: no signal handling there
                    await anyio.sleep_forever()

            group.start_soon(watch_signals)
            for spec in pending:
                await limiter.acquire()
                if not run.budget_left():
                    limiter.release()
                    break
                group.start_soon(one, spec)
            # wait for the episodes in flight, then stop watching signals
            for _ in range(concurrency):
                await limiter.acquire()
            group.cancel_scope.cancel()
    finally:
        close = getattr(provider, "aclose", None)
        if close is not None:
            with anyio.CancelScope(shield=True):
                await close()


def run_benchmark(
    request: BenchmarkRequest,
    *,
    settings: Settings | None = None,
    progress: Progress | None = None,
    finalize: Callable[[RunDirectory, RunManifest, list[EpisodeRecord]], None] | None = None,
    provider: ChatProvider | None = None,
) -> RunOutcome:
    """Run (or resume) a benchmark and return the run directory. Raises BenchmarkError for refusals.

    ``provider`` replaces the one built from the request (library use); mock providers are refused either way.
    """
    settings = settings or Settings()
    progress = progress or Progress()
    results_dir = request.results_dir or Path(settings.results_dir)
    manifest: RunManifest | None = None
    directory: RunDirectory | None = None
    done: list[EpisodeRecord] = []
    if request.resume is not None:
        try:
            directory = RunDirectory(run_dir(results_dir, validate_run_id(request.resume)))
            manifest = directory.read_manifest()
            directory.remove_stale_temp_files()
            done = directory.read_episodes(repair=True)
        except (RunIdError, RunDirectoryError) as exc:
            raise BenchmarkError(f"cannot resume: {exc}") from exc
    plan = _resolve_plan(request, settings, manifest)
    provider, provider_info = _provider(request, settings, provider)
    hashes = _hashes([t.task for t in plan.tasks], plan.modes)
    try:
        prices = PriceTable.load(request.price_table)
    except PriceTableError as exc:
        raise BenchmarkError(str(exc)) from exc
    max_cost = request.max_cost_usd
    if max_cost is None and manifest is not None:
        max_cost = manifest.max_cost_usd
    max_episode_cost = request.max_episode_cost_usd
    if max_episode_cost is None and manifest is not None:
        max_episode_cost = manifest.max_episode_cost_usd
    if (max_cost is not None or max_episode_cost is not None) and (
        prices.cost(provider_info.model, Usage()) is None
        or ("semantic_summary" in plan.strategies and prices.cost(provider_info.summary_model, Usage()) is None)
    ):
        raise BenchmarkError(
            f"a cost budget needs a known price for {provider_info.model!r} (and the summary model); "
            'add it with --price-table FILE (JSON: {"model": {"input_per_mtok": .., "output_per_mtok": ..}})'
        )
    preflight = getattr(provider, "preflight", None)
    if preflight is not None:
        problem = anyio.run(preflight)
        if problem is not None:
            raise BenchmarkError(f"{problem}. Nothing was run; check --base-url / CONTEXTDELTA_BASE_URL.")
    specs = plan_episodes(
        [t.task.id for t in plan.tasks], plan.strategies, plan.modes, plan.repeats, order_seed(plan.seed)
    )
    now = utc_now()
    if manifest is None:
        run_group_id = new_run_group_id()
        directory = RunDirectory(results_dir / run_group_id)
        manifest = RunManifest(
            run_group_id=run_group_id,
            status=RunStatus.RUNNING,
            created_at=now,
            updated_at=now,
            environment=environment(),
            provider=provider_info,
            seed=plan.seed,
            order_seed=order_seed(plan.seed),
            strategies=plan.strategies,
            strategy_params=plan.params,
            protection_modes=plan.modes,
            repeats=plan.repeats,
            max_steps=plan.max_steps,
            concurrency=request.concurrency,
            limit=plan.limit,
            max_cost_usd=max_cost,
            max_episode_cost_usd=max_episode_cost,
            tasks=[
                TaskInfo(
                    id=t.task.id,
                    version=t.task.version,
                    hash=t.task.content_hash,
                    world=t.task.world,
                    hazard=t.task.evaluator.hazard.value,
                    public_messages_sha256=content_hash(initial_messages(t.task.public_task)),
                )
                for t in plan.tasks
            ],
            hashes=hashes,
            counts=Counts(planned=len(specs)),
        )
        directory.create(manifest, [(t.task.world, t.task.id, t.path) for t in plan.tasks])
    else:
        assert directory is not None
        differences = _differences(manifest, provider_info, hashes, plan.params)
        if differences:
            raise BenchmarkError(f"cannot resume {manifest.run_group_id}: " + "; ".join(differences))
        planned_ids = {s.run_id for s in specs}
        strays = [r.run_id for r in done if r.run_id not in planned_ids]
        if strays:
            raise BenchmarkError(
                f"cannot resume {manifest.run_group_id}: raw_runs.jsonl holds unplanned episodes {strays[:5]}"
            )
        directory.write_derived(done)
    assert directory is not None
    finished_ids = {r.run_id for r in done}
    pending = [s for s in specs if s.run_id not in finished_ids]
    session: dict[str, Any] = {"started_at": now, "resumed": request.resume is not None, "pending": len(pending)}
    manifest = manifest.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "stop_reason": None,
            "updated_at": now,
            "sessions": [*manifest.sessions, session],
        }
    )
    directory.write_manifest(manifest)
    run = _Run(directory, manifest, plan, done, prices, progress, max_cost, max_episode_cost)
    progress.start(len(specs), len(done))
    try:
        if pending:
            anyio.run(_execute, run, pending, provider, max(1, request.concurrency))
    except KeyboardInterrupt:
        run.stop_reason = "interrupted by SIGINT"
    finally:
        run.close()
        records = run.records
        directory.write_derived(records)
        counts = run.counts()
        complete = counts.finished == counts.planned
        end = utc_now()
        status = RunStatus.COMPLETE if complete else RunStatus.INCOMPLETE
        stop_reason = None if complete else (run.stop_reason or "stopped before every episode finished")
        session.update({"ended_at": end, "finished": len(records) - len(done), "stop_reason": stop_reason})
        manifest = manifest.model_copy(
            update={
                "status": status,
                "stop_reason": stop_reason,
                "counts": counts,
                "updated_at": end,
                "finished_at": end if complete else None,
            }
        )
        directory.write_manifest(manifest)
        if finalize is not None:
            finalize(directory, manifest, records)
    if stop_reason:
        progress.message(
            f"run {manifest.run_group_id} is incomplete: {stop_reason}. "
            f"Continue it with --resume {manifest.run_group_id}."
        )
    return RunOutcome(directory.path, manifest, records)
