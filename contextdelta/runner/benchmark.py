"""``run-benchmark``: run the matrix of episodes and write a provenance-preserving run directory.

A run goes through three phases around one set of recorders (``contextdelta.rundir.Recorder``):

1. **plan** (:func:`contextdelta.runner.prepare.plan_run`): check the request, load the tasks, build the
   provider, decide the episodes; on ``--resume`` compare with the manifest. Nothing is written.
2. **open** (:func:`open_run`) and **execute** (:func:`execute`): create (or repair) the run directory, write the
   ``running`` manifest, start the recorders, then run the pending episodes on an executor; each record goes to
   every recorder as it arrives, so a killed run loses at most the episodes in flight, and ``--resume`` runs
   exactly the missing ones.
3. **finalise** (:func:`finalise`): every recorder's ``finish`` (derived files, reports, store, display), then
   the final manifest, written last: a ``complete`` manifest means everything else is on disk.

One fresh world per episode; episodes are fully isolated: each gets its own world and its own strategy state.
"""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from contextdelta._collector import tuned_for_episodes
from contextdelta._words import plural
from contextdelta.providers import ChatProvider, EndpointLimiter, LimiterStats, one_line
from contextdelta.rundir import (
    MANIFEST,
    RAW_RUNS,
    TASK_RESULTS,
    Counts,
    EpisodeRecord,
    Recorder,
    Recorders,
    RunDirectory,
    RunDirectoryError,
    RunDirectoryRecorder,
    RunEnd,
    RunManifest,
    RunStart,
    RunStatus,
    SessionLock,
    new_run_group_id,
    remove_abandoned_staging,
)
from contextdelta.runner.episode import Costing, EpisodeJob, utc_now
from contextdelta.runner.execute import (
    AccessRefused,
    CircuitBreaker,
    CostBudget,
    EpisodeRuntime,
    Executor,
    InProcessExecutor,
    StopRule,
    WriteFailure,
    drive,
)
from contextdelta.runner.plan import episode_seed, order_seed
from contextdelta.runner.pool import WorkerPoolExecutor
from contextdelta.runner.prepare import RunPlan, lock_run, plan_run, resume_command
from contextdelta.runner.provenance import environment
from contextdelta.runner.request import EXIT_INCOMPLETE, BenchmarkError, BenchmarkRequest
from contextdelta.settings import Settings, load_settings, redact_url


@dataclass
class RunOutcome:
    """What ``run_benchmark`` returns: the run directory, its final manifest and every episode (current records,
    and the attempts a ``--retry-failed`` re-run superseded)."""

    path: Path
    manifest: RunManifest
    records: list[EpisodeRecord] = field(default_factory=list)
    superseded: list[EpisodeRecord] = field(default_factory=list)
    retried: bool = False
    """This session re-ran failed trials (``--retry-failed``)."""
    note: str | None = None
    """Something the user should hear about a complete run: a signal that arrived after the last episode."""
    repairs: list[str] = field(default_factory=list)
    """What this session repaired of what a killed session left (a torn last line, missing receipts, temp files),
    in words; also in the manifest (this session's ``repairs``)."""

    @property
    def interrupted(self) -> bool:
        return (self.manifest.stop_reason or "").startswith("interrupted")

    def other_models(self) -> str | None:
        """The models the endpoint named in its replies that are not the one asked for (``--model``), counted, as a
        sentence: a router that falls back to another model, or an alias that resolves elsewhere, measures another
        model than the manifest says. A name that only adds a version or a tag (``gpt-4o`` answered as
        ``gpt-4o-2024-08-06``, ``llama3`` as ``llama3:latest``) or a vendor prefix is the same model. None when
        every reply named it, or none named a model."""
        asked = self.manifest.provider.model
        if self.manifest.provider.kind != "openai":
            return None
        served = Counter(
            step.response.model
            for record in self.records
            for step in record.trace.steps
            if step.response is not None and step.response.model and not same_model(asked, step.response.model)
        )
        if not served:
            return None
        replies = sum(step.response is not None for record in self.records for step in record.trace.steps)
        named = ", ".join(f"'{one_line(name)[:200]}' ({count})" for name, count in served.most_common(5))
        more = f" and {len(served) - 5} more" if len(served) > 5 else ""
        return (
            f"{sum(served.values())} of {plural(replies, 'model reply', 'model replies')} named another model than "
            f"{asked!r} (--model): {named}{more}; each step's response.model in raw_runs.jsonl says which"
        )

    def all_failed(self) -> str | None:
        """Why a run that finished every planned episode has no result: each is a failed trial (their
        terminations counted, the last error, where they are recorded). None when any episode has a verdict, or
        the run stopped early (its stop reason says why)."""
        counts = self.manifest.counts
        if self.manifest.stop_reason or not counts.finished or counts.failed < counts.finished:
            return None
        tally = Counter(record.trace.termination.value for record in self.records if record.failed)
        kinds = ", ".join(f"{count} {termination}" for termination, count in sorted(tally.items()))
        last = next((record.trace.error for record in reversed(self.records) if record.trace.error), None)
        return (
            f"every episode of run {self.manifest.run_group_id} is a failed trial ({kinds}): no episode has a "
            f"verdict{f'; last error: {last}' if last else ''}. Each is recorded in {self.path / RAW_RUNS} and "
            f"{TASK_RESULTS} (column termination_reason)"
        )


@dataclass
class ActiveRun:
    """An opened run: its directory, the manifest on disk, the recorders, and what finished so far."""

    plan: RunPlan
    directory: RunDirectory
    manifest: RunManifest
    session: dict[str, Any]
    recorders: Recorders
    records: list[EpisodeRecord]
    """Each finished episode's current record (its latest attempt), in the order recorded."""
    superseded: list[EpisodeRecord] = field(default_factory=list)
    """Earlier attempts a later one replaced (``--retry-failed``), in the order recorded."""
    new: int = 0
    """Episodes this session recorded (first runs and re-runs of failed trials)."""
    stop_reason: str | None = None
    write_error: str | None = None
    """Set when a recorder could not write (a full disk): no further episode starts, the run ends incomplete."""
    lock: SessionLock | None = None
    """This session's hold on the run directory (:func:`lock_run`), released when :func:`finalise` ends."""
    repairs: list[str] = field(default_factory=list)
    """What opening the run repaired of a killed session's files, in words (:attr:`RunOutcome.repairs`)."""

    def record(self, record: EpisodeRecord) -> None:
        """One finished episode: hand it to every recorder and keep it (called by the driver only); a re-run of a
        failed trial replaces its earlier attempt, which is kept as superseded. An episode the run directory could
        not take is not kept: it is missing (or still its earlier attempt), and ``--resume`` runs it again."""
        if self.write_error is not None:
            return
        try:
            self.recorders.episode(record)
        except OSError as exc:
            self.write_error = f"cannot write the run directory ({_describe_os_error(exc)})"
            return
        earlier = next((i for i, r in enumerate(self.records) if r.run_id == record.run_id), None)
        if earlier is not None:
            self.superseded.append(self.records.pop(earlier))
        self.records.append(record)
        self.new += 1

    def jobs(self) -> list[EpisodeJob]:
        """The pending episodes as executor jobs, in plan order."""
        matrix, tasks = self.plan.matrix, self.plan.tasks
        return [
            EpisodeJob(
                run_group_id=self.manifest.run_group_id,
                spec=spec,
                task=tasks[spec.task_id],
                seed=episode_seed(matrix.seed, spec, matrix.seed_rule),  # a re-run keeps the episode's seed
                max_steps=matrix.max_steps or tasks[spec.task_id].evaluator.max_steps,
                attempt=self.plan.attempt(spec),
            )
            for spec in self.plan.pending
        ]

    def counts(self) -> Counts:
        return Counts(
            planned=self.manifest.counts.planned,
            finished=len(self.records),
            failed=sum(r.failed for r in self.records),
            succeeded=sum(r.verdict.success for r in self.records),
        )


# ---- open ------------------------------------------------------------------------------------------------------


def _new_manifest(plan: RunPlan, now: str) -> RunManifest:
    matrix = plan.matrix
    return RunManifest(
        run_group_id=new_run_group_id(),
        status=RunStatus.RUNNING,
        created_at=now,
        updated_at=now,
        environment=environment(),
        provider=plan.provider_info,
        seed=matrix.seed,
        order_seed=order_seed(matrix.seed),
        seed_rule=matrix.seed_rule,
        strategies=matrix.strategies,
        strategy_params=matrix.params,
        strategy_configs=plan.strategy_configs,
        external_agent=plan.request.external_agent,
        protection_modes=matrix.modes,
        repeats=matrix.repeats,
        max_steps=matrix.max_steps,
        concurrency=plan.request.concurrency,
        limit=matrix.limit,
        max_cost_usd=plan.max_cost_usd,
        max_episode_cost_usd=plan.max_episode_cost_usd,
        suite=matrix.suite,
        tasks=matrix.task_infos,
        hashes=plan.hashes,
        counts=Counts(planned=len(plan.specs)),
        plan_sha256=matrix.plan_sha256,
        shard=matrix.shard_info,
        controls=matrix.controls,
        prices=plan.prices,
        unlocked=matrix.unlocked,
    )


def open_run(plan: RunPlan, recorders: Sequence[Recorder] = ()) -> ActiveRun:
    """Create the run directory (or, on resume, repair the existing one), write the ``running`` manifest with
    this session, and start the recorders: the run directory's own first, then the report files, then
    ``recorders`` in order. A signal meanwhile (KeyboardInterrupt) raises :class:`OpenInterrupted` (exit 130),
    whose message names the run and how to resume it."""
    now = utc_now()
    repairs: list[str] = []
    directory: RunDirectory | None = None
    try:
        if plan.existing is None or plan.manifest is None:
            manifest = _new_manifest(plan, now)
            directory = RunDirectory(plan.results_dir / manifest.run_group_id)
            # what an earlier run-benchmark or merge killed while it built its directory left in the folder
            repairs = remove_abandoned_staging(plan.results_dir)
            lock = directory.create(manifest, [(t.task.world, t.task.id, t.path) for t in plan.matrix.tasks])
        else:
            directory, manifest = plan.existing, plan.manifest
            lock = lock_run(directory, resume_command(plan.request, directory.path))
            try:
                _unchanged_since_plan(directory, manifest)
                removed = directory.remove_stale_temp_files()
                repairs = directory.repair_raw_runs()
                if removed:
                    repairs.append(f"removed the temp files of atomic writes cut short: {', '.join(removed)}")
                repairs.extend(remove_abandoned_staging(directory.path.parent))
            except BaseException:
                lock.release()
                raise
        try:
            return _open(plan, recorders, directory, manifest, now, lock, repairs)
        except BaseException:
            lock.release()
            raise
    except KeyboardInterrupt as exc:
        raise OpenInterrupted(_interrupted_opening(plan, directory, exc), 130) from None
    except OSError as exc:  # a full disk, a folder that cannot be written: named with what is on disk
        raise _open_failed(plan, directory, exc) from None


def _open_failed(plan: RunPlan, directory: RunDirectory | None, exc: OSError) -> BenchmarkError:
    """What a write error while the run opened means: no run directory (a new run's folder is made whole or not at
    all: exit 2), or a run that can be resumed once the cause is gone (exit 3); no episode of this session ran."""
    if directory is None or not directory.file(MANIFEST).exists():
        return BenchmarkError(
            f"cannot create a run directory in {plan.results_dir}: {_describe_os_error(exc)}; nothing was written"
        )
    return BenchmarkError(
        f"cannot open run {directory.path.name}: {_describe_os_error(exc)}; this session ran no episode: "
        f"`{resume_command(plan.request, directory.path)}` goes on once there is room",
        EXIT_INCOMPLETE,
    )


class OpenInterrupted(BenchmarkError):
    """A signal arrived while the run was being opened; the message says whether it can be resumed, and how."""


def _interrupted_opening(plan: RunPlan, directory: RunDirectory | None, exc: KeyboardInterrupt) -> str:
    signal_name = exc.args[0] if exc.args else "SIGINT"
    if directory is None or not directory.file(MANIFEST).exists():  # a new run's folder is made whole or not at all
        return f"interrupted by {signal_name} before the run directory was created; nothing was written"
    return (
        f"interrupted by {signal_name} while opening run {directory.path.name}, before any episode of this session "
        f"ran; `{resume_command(plan.request, directory.path)}` runs what is missing"
    )


def _unchanged_since_plan(directory: RunDirectory, planned: RunManifest) -> None:
    """Refuse (exit 2, nothing changed) when another session wrote the run between this session's plan (which read
    the episodes done) and its lock: its plan would run episodes that are recorded by now."""
    try:
        current = directory.read_manifest()
    except RunDirectoryError as exc:
        raise BenchmarkError(f"cannot resume: {exc}") from exc
    if current != planned:
        raise BenchmarkError(
            f"run {directory.path.name} was written by another session while this one was preparing "
            f"(run_manifest.json changed: now {current.status.value}, {len(current.sessions)} sessions); nothing "
            f"was changed: run the same command again"
        )


def _open(
    plan: RunPlan,
    recorders: Sequence[Recorder],
    directory: RunDirectory,
    manifest: RunManifest,
    now: str,
    lock: SessionLock,
    repairs: Sequence[str] = (),
) -> ActiveRun:
    session: dict[str, Any] = {
        "started_at": now,
        "resumed": plan.resumed,
        "pending": len(plan.pending),
        **({"repairs": list(repairs)} if repairs else {}),
        **({"retry_failed": True, "retries": len(plan.retries)} if plan.request.retry_failed else {}),
        # how this session called the endpoint (operational, not part of what resume compares)
        "timeout_s": plan.request.timeout_s,
        "max_retries": plan.request.max_retries,
    }
    manifest = manifest.model_copy(
        update={
            "status": RunStatus.RUNNING,
            "stop_reason": None,
            "updated_at": now,
            "sessions": [*manifest.sessions, session],
        }
    )
    manifest = directory.write_manifest(manifest)
    from contextdelta.report import ReportFiles  # numpy/scipy: loaded once a run really starts, not at import

    group = Recorders([RunDirectoryRecorder(directory), ReportFiles(directory), *recorders])
    run = ActiveRun(
        plan,
        directory,
        manifest,
        session,
        group,
        list(plan.done),
        list(plan.superseded),
        lock=lock,
        repairs=list(repairs),
    )
    group.start(
        RunStart(
            path=directory.path,
            manifest=manifest,
            planned=len(plan.specs),
            done=tuple(plan.done),
            pending=len(plan.pending),
            superseded=tuple(plan.superseded),
        )
    )
    return run


# ---- execute ---------------------------------------------------------------------------------------------------


def runtime(plan: RunPlan) -> EpisodeRuntime:
    """What every executor needs to run this plan's episodes, as data a worker process or Ray actor can receive."""
    info = plan.provider_info
    return EpisodeRuntime(
        provider=plan.provider_spec,
        strategies=tuple(plan.strategy_configs),
        summary_model=info.summary_model,
        costing=Costing(plan.prices, info.model, info.summary_model, plan.max_episode_cost_usd, plan.max_cost_usd),
        limits=plan.execution.limits,
        concurrency=plan.request.concurrency,
    )


def default_executor(plan: RunPlan) -> Executor:
    """The executor the plan asks for: in this process (``--workers 1``), over worker processes (``--workers N``),
    or on a Ray cluster (``--executor ray``); with rate limits, one limiter shared by all of them."""
    if plan.provider is None:
        raise BenchmarkError("an external agent's run has no provider: run it with run-external")
    execution, shipped = plan.execution, runtime(plan)
    if execution.kind == "ray":
        from contextdelta.runner.ray_executor import RayExecutor  # Ray is an optional extra, imported only here

        return RayExecutor(shipped, execution.workers, execution.ray_address)
    limiter = (
        EndpointLimiter(execution.limits, concurrency=plan.request.concurrency) if execution.limits.active else None
    )
    if (execution.workers or 1) > 1:
        return WorkerPoolExecutor(shipped, execution.workers or 1, limiter)
    if limiter is not None:
        if not hasattr(plan.provider, "gate"):
            raise BenchmarkError(f"rate limits need a provider that supports them; {plan.provider.name!r} does not")
        plan.provider.gate = limiter  # type: ignore[attr-defined]
    return InProcessExecutor(plan.provider, plan.strategy_configs, shipped.summary_model, shipped.costing, limiter)


def _execution_record(plan: RunPlan, executor: Executor) -> dict[str, Any]:
    """What this session ran on and what the rate limiter did (the session entry of the manifest)."""
    execution = plan.execution
    report = getattr(executor, "rate_stats", None)  # an executor handed over by a library caller may not have it
    stats: LimiterStats | None = report() if report is not None else None
    record: dict[str, Any] = {
        "executor": execution.kind,
        "workers": getattr(executor, "workers", execution.workers),
        "rate_control": None,
    }
    if execution.kind == "ray":
        address = execution.ray_address
        # ray://user:pass@host:port may carry credentials; a bare host:port has none to hide
        record["ray_address"] = redact_url(address) if address and "://" in address else address
    if execution.limits.active or stats is not None:
        record["rate_control"] = {
            "endpoint": plan.provider_info.base_url,
            "limits": execution.limits.model_dump(mode="json"),
            "stats": stats.model_dump(mode="json") if stats is not None else None,
        }
    return record


def stop_rules(run: ActiveRun, executor: Executor | None = None) -> list[StopRule]:
    """What may stop a run from starting further episodes: a write error, the run-level budget, the circuit
    breaker (``--max-consecutive-failures``, ``--max-failed-share``). The budget tells ``executor`` (its
    ``budget_spent``, when it has one) what the run spent, so that its running episodes stop at the budget too."""
    request = run.plan.request
    info = run.plan.provider_info
    on_spent = getattr(executor, "budget_spent", None)
    return [
        WriteFailure(lambda: run.write_error),
        # a superseded attempt cost money too
        CostBudget(run.plan.max_cost_usd, [*run.records, *run.superseded], on_spent, info.base_url),
        # before the breaker: a refused key is said as what it is, not as "failed trials in a row"
        AccessRefused(info.base_url, info.model, info.summary_model),
        CircuitBreaker(request.max_consecutive_failures, request.max_failed_share),
    ]


def execute(run: ActiveRun, executor: Executor | None = None, rules: Sequence[StopRule] | None = None) -> None:
    """Run the pending episodes (on ``executor``, in-process by default, under ``rules``, by default
    :func:`stop_rules`); sets ``run.stop_reason`` when a stop rule or a signal ended the run early. The plan's
    provider (the endpoint check's) is closed afterwards, whichever executor ran the episodes."""
    try:
        jobs = run.jobs()
        if not jobs:
            return
        chosen = executor or default_executor(run.plan)
        try:
            run.stop_reason = anyio.run(
                lambda: drive(
                    jobs,
                    chosen,
                    run.record,
                    rules=stop_rules(run, chosen) if rules is None else rules,
                    concurrency=run.plan.request.concurrency,
                )
            )
        finally:
            run.session["execution"] = _execution_record(run.plan, chosen)
    finally:
        # worker processes and Ray actors build providers of their own: without this, the one that checked the
        # endpoint keeps its connection pool and I/O thread open (and aiohttp warns "Unclosed client session")
        _release_provider(run.plan)


def _release_provider(plan: RunPlan) -> None:
    """Close the plan's provider (the endpoint check's connection pool and I/O thread; idempotent): a resume with
    nothing left to run, or worker processes with providers of their own, never hand it to an executor that closes
    it, and an unclosed pool is reported on stderr ("Unclosed client session") when it is collected."""
    close = getattr(plan.provider, "aclose", None)
    if close is not None:
        anyio.run(close)


# ---- finalise --------------------------------------------------------------------------------------------------


class FinaliseInterrupted(BenchmarkError):
    """A signal arrived while the run was being finalised; the message says what state the run is in."""


def _describe_os_error(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename else ""
    return f"{exc.strerror or exc}{where}"


def run_state(run: ActiveRun) -> str:
    """What is on disk now, in words: the manifest's status and the episodes kept (for a run cut short)."""
    try:
        status = f"says {run.directory.read_manifest().status.value!r}"
    except Exception:  # a manifest cut short is exactly the state to report
        status = "cannot be read"
    return (
        f"run_manifest.json {status}; raw_runs.jsonl keeps the {len(run.records)} recorded episodes"
        + (f" (and {len(run.superseded)} superseded attempts)" if run.superseded else "")
        + f". `{resume_command(run.plan.request, run.directory.path)}` rebuilds the derived files and runs what is "
        "missing"
    )


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt("SIGTERM"), as SIGINT raises KeyboardInterrupt (main thread only): while
    the run is finalised, and around the driver (which watches both itself while episodes run)."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def finalise(run: ActiveRun) -> RunOutcome:
    """End the run: every recorder's ``finish`` with the final manifest, then that manifest written (last).

    A write error (a full disk) leaves the run ``incomplete`` with the error as its stop reason; if even the
    manifest cannot be written, BenchmarkError (exit 3) says what is on disk. A signal meanwhile raises
    :class:`FinaliseInterrupted` (exit 130), whose message says what state the run is in."""
    try:
        with _signals_interrupt():
            return _finalise(run)
    except KeyboardInterrupt:
        message = f"interrupted while finalising run {run.directory.path.name}: {run_state(run)}"
        raise FinaliseInterrupted(message, 130) from None
    finally:
        if run.lock is not None:
            run.lock.release()


def _finalise(run: ActiveRun) -> RunOutcome:
    counts = run.counts()
    # complete: every planned episode has a record and this session ran all it meant to (a re-run of a failed
    # trial that never started leaves the episode recorded, but the session unfinished)
    complete = counts.finished == counts.planned and run.new == len(run.plan.pending)
    end = utc_now()
    complete = complete and run.write_error is None
    stop_reason = None if complete else (run.write_error or run.stop_reason or "stopped before every episode finished")
    run.session.update({"ended_at": end, "finished": run.new, "stop_reason": stop_reason})
    if complete and run.stop_reason is not None:
        # a signal (or a stop rule) after the last episode was recorded: nothing is missing, so the run is finalised
        # as complete, and the session says what arrived
        run.session["late_stop"] = run.stop_reason
    manifest = run.manifest.model_copy(
        update={
            "status": RunStatus.COMPLETE if complete else RunStatus.INCOMPLETE,
            "stop_reason": stop_reason,
            "counts": counts,
            "updated_at": end,
            "finished_at": end if complete else None,
        }
    )
    try:
        run.recorders.finish(
            RunEnd(
                path=run.directory.path,
                manifest=manifest,
                records=tuple(run.records),
                new=run.new,
                superseded=tuple(run.superseded),
            )
        )
    except OSError as exc:  # the derived files or reports could not be written: the run is not complete
        run.write_error = f"cannot write the run directory ({_describe_os_error(exc)})"
        manifest = manifest.model_copy(
            update={"status": RunStatus.INCOMPLETE, "stop_reason": run.write_error, "finished_at": None}
        )
    try:
        manifest = run.directory.write_manifest(manifest)
    except OSError as exc:
        # the first write that failed (an episode's record, a derived file) is what stopped the run: say it too
        first = f" (the run had stopped: {run.write_error})" if run.write_error else ""
        raise BenchmarkError(
            f"run {run.directory.path.name} could not be finalised: cannot write run_manifest.json "
            f"({_describe_os_error(exc)}){first}; {run_state(run)}",
            EXIT_INCOMPLETE,
        ) from None
    run.manifest = manifest
    late = run.session.get("late_stop")
    note = f"{late} after every episode had finished: the run was finalised and is complete" if late else None
    return RunOutcome(
        run.directory.path,
        manifest,
        list(run.records),
        list(run.superseded),
        run.plan.request.retry_failed,
        note,
        list(run.repairs),
    )


def same_model(asked: str, named: str) -> bool:
    """Whether a reply that names model ``named`` came from model ``asked``: the same name (case aside), one with a
    version added (``gpt-4o-2024-08-06``: a dash or dot and a digit) or a tag (``llama3:latest``, ``name@v2``), or
    one with a vendor prefix either way (``openai/gpt-4o``). ``gpt-4o-mini`` is another model than ``gpt-4o``."""
    a, n = asked.strip().lower(), named.strip().lower()
    a, n = a.rsplit("/", 1)[-1], n.rsplit("/", 1)[-1]
    short, long = sorted((a, n), key=len)
    if not short or not long.startswith(short):
        return False
    added = long[len(short) :]
    return not added or added[0] in ":@" or (added[0] in "-." and added[1:2].isdigit())


def run_benchmark(
    request: BenchmarkRequest,
    *,
    settings: Settings | None = None,
    recorders: Sequence[Recorder] = (),
    provider: ChatProvider | None = None,
    executor: Executor | None = None,
) -> RunOutcome:
    """Run (or resume) a benchmark and return the run directory. Raises BenchmarkError for refusals.

    ``recorders`` get every episode after the run directory and the report files (the trace store, a progress
    display, an export). ``provider`` replaces the one built from the request (library use; mock providers are
    refused either way); ``executor`` replaces the in-process one.
    """
    return run_plan(plan_run(request, settings or load_settings(), provider), recorders, executor)


def run_plan(plan: RunPlan, recorders: Sequence[Recorder] = (), executor: Executor | None = None) -> RunOutcome:
    """Open, execute and finalise a checked plan (what :func:`run_benchmark` does after :func:`plan_run`)."""
    with tuned_for_episodes():
        try:
            with _signals_interrupt():  # SIGTERM as SIGINT while the run directory is created or repaired
                run = open_run(plan, recorders)
        except BaseException:
            _release_provider(plan)  # refused (another session holds the run): nothing will take the provider
            raise
        try:
            with _signals_interrupt():  # SIGTERM as SIGINT wherever the driver is not watching signals itself
                execute(run, executor)
        except KeyboardInterrupt as exc:
            run.stop_reason = f"interrupted by {exc.args[0] if exc.args else 'SIGINT'}"
        finally:
            outcome = finalise(run)
    return outcome
