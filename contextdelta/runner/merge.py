"""``contextdelta merge RUN... --out ID``: join the shard directories of one plan into one run group.

Shards (``run-benchmark --shard I/N``) of one plan share everything but their episodes: the model and endpoint,
the task suite, the harness, the analysis parameters and the plan itself (seed, matrix, and the plan hash over
every episode id and seed). :func:`merge_shards` refuses (:class:`MergeError`, exit 2, naming the field) when any
of these differ, and when an episode of the plan is missing or present twice; otherwise it writes a new run
directory exactly as a run does, through the recorders (the episodes in plan order, then the derived files, the
reports, and last the ``complete`` manifest), so the merged run group is an ordinary run directory that ``verify``
re-derives like any other. An episode a shard re-ran (``--retry-failed``) comes with every attempt, in the order
recorded: the merged ``raw_runs.jsonl`` keeps the superseded attempts before the current one. Nothing in the shard
directories is changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextdelta._words import plural
from contextdelta.canonical import sha256_hex
from contextdelta.rundir import (
    MERGING,
    RAW_RUNS,
    TASKS_SNAPSHOT,
    Counts,
    EpisodeAttempts,
    EpisodeRecord,
    MergedShard,
    Recorder,
    Recorders,
    RunDirectory,
    RunDirectoryError,
    RunDirectoryRecorder,
    RunEnd,
    RunIdError,
    RunManifest,
    RunStart,
    RunStatus,
    SessionLock,
    remove_abandoned_staging,
    run_dir,
    validate_run_id,
)
from contextdelta.runner.episode import utc_now
from contextdelta.runner.plan import manifest_episodes
from contextdelta.runner.provenance import environment


class MergeError(Exception):
    """Shards that cannot be merged; the message names the field or the episode. Exit code 2."""

    exit_code = 2


@dataclass(frozen=True)
class _ShardRun:
    run_id: str
    directory: RunDirectory
    manifest: RunManifest
    attempts: EpisodeAttempts

    @property
    def records(self) -> tuple[EpisodeRecord, ...]:
        """Each episode's current record."""
        return self.attempts.current


def _read(results_dir: Path, run_id: str) -> _ShardRun:
    try:
        directory = RunDirectory(run_dir(results_dir, validate_run_id(run_id)))
        manifest = directory.read_manifest()
        records = directory.read_attempts()
    except (RunIdError, RunDirectoryError) as exc:
        raise MergeError(f"cannot merge {run_id}: {exc}") from exc
    if manifest.shard is None:
        raise MergeError(f"cannot merge {run_id}: shard: it is not a shard (it was not run with --shard I/N)")
    if manifest.status is RunStatus.RUNNING:
        raise MergeError(f"cannot merge {run_id}: status: the shard is still running (or was killed: --resume it)")
    return _ShardRun(run_id, directory, manifest, records)


_Fields = Callable[[_ShardRun], Any]

# What must be equal across the shards of one plan, grouped under the name a refusal gives.
AGREEMENT: tuple[tuple[str, str, _Fields], ...] = (
    ("model", "provider.model", lambda s: s.manifest.provider.model),
    ("model", "provider.summary_model", lambda s: s.manifest.provider.summary_model),
    ("model", "provider.kind", lambda s: s.manifest.provider.kind),
    ("model", "provider.temperature", lambda s: s.manifest.provider.temperature),
    ("model", "provider.max_tokens", lambda s: s.manifest.provider.max_tokens),
    ("endpoint", "provider.base_url", lambda s: s.manifest.provider.base_url),
    ("suite", "hashes.suite_sha256", lambda s: s.manifest.hashes.suite_sha256),
    ("suite", "suite.sha256", lambda s: s.manifest.suite.sha256 if s.manifest.suite else None),
    ("suite", "tasks", lambda s: [t.model_dump() for t in s.manifest.tasks]),
    ("suite", "unlocked", lambda s: s.manifest.unlocked.model_dump() if s.manifest.unlocked else None),
    ("harness", "hashes.harness_sha256", lambda s: s.manifest.hashes.harness_sha256),
    ("harness", "hashes.system_prompt_sha256", lambda s: s.manifest.hashes.system_prompt_sha256),
    ("harness", "hashes.tool_schemas_sha256", lambda s: s.manifest.hashes.tool_schemas_sha256),
    ("harness", "hashes.public_messages_sha256", lambda s: s.manifest.hashes.public_messages_sha256),
    ("analysis", "aggregate_metrics.json analysis", lambda s: _analysis(s.directory)),
    ("plan", "plan_sha256", lambda s: s.manifest.plan_sha256),
    ("plan", "seed", lambda s: s.manifest.seed),
    ("plan", "order_seed", lambda s: s.manifest.order_seed),
    ("plan", "seed_rule", lambda s: s.manifest.seed_rule),
    ("plan", "strategies", lambda s: s.manifest.strategies),
    ("plan", "strategy_params", lambda s: s.manifest.strategy_params.model_dump()),
    ("plan", "strategy_configs", lambda s: [c.model_dump() for c in s.manifest.strategy_configs]),
    ("plan", "protection_modes", lambda s: s.manifest.protection_modes),
    ("plan", "controls", lambda s: s.manifest.controls),
    ("plan", "repeats", lambda s: s.manifest.repeats),
    ("plan", "max_steps", lambda s: s.manifest.max_steps),
    ("plan", "limit", lambda s: s.manifest.limit),
    ("plan", "max_episode_cost_usd", lambda s: s.manifest.max_episode_cost_usd),
    ("plan", "prices", lambda s: _prices(s.manifest)),
    ("plan", "shard.count", lambda s: s.manifest.shard.count if s.manifest.shard else None),
)


def _prices(manifest: RunManifest) -> dict[str, Any] | None:
    """The recorded prices as JSON values (every shard's episodes must have been costed alike)."""
    if manifest.prices is None:
        return None
    return {m: None if p is None else p.model_dump() for m, p in manifest.prices.items()}


def _analysis(directory: RunDirectory) -> dict[str, Any] | None:
    from contextdelta.report import recorded_params  # numpy/scipy: loaded only when a merge runs

    params = recorded_params(directory)
    return None if params is None else params.model_dump()


def check_shards(shards: Sequence[_ShardRun]) -> list[EpisodeRecord]:
    """Every episode of the plan exactly once (in one shard, with every attempt it has there), in plan order and
    each episode's attempts in the order they were recorded; raises MergeError naming the first problem."""
    first = shards[0]
    for group, name, value in AGREEMENT:
        expected = value(first)
        for other in shards[1:]:
            found = value(other)
            if found != expected:
                raise MergeError(
                    f"cannot merge: {group} differs ({name}): {first.run_id} has {_short(expected)}, "
                    f"{other.run_id} has {_short(found)}"
                )
    if first.manifest.plan_sha256 is None:
        raise MergeError(f"cannot merge {first.run_id}: plan_sha256: not recorded (a shard from an older version)")
    whole, _ = manifest_episodes(first.manifest)
    where: dict[str, str] = {}
    by_id: dict[str, EpisodeRecord] = {}
    for shard in shards:
        for record in shard.records:
            if record.run_id in where:
                raise MergeError(
                    f"cannot merge: episode {record.run_id} is present twice (in {where[record.run_id]} and "
                    f"{shard.run_id})"
                )
            where[record.run_id] = shard.run_id
            by_id[record.run_id] = record
    attempts = {
        record.run_id: shard.attempts.attempts_of(record.run_id) for shard in shards for record in shard.records
    }
    planned = {spec.run_id for spec in whole}
    strays = sorted(set(by_id) - planned)
    if strays:
        raise MergeError(f"cannot merge: episode {strays[0]} (in {where[strays[0]]}) is not in the plan")
    missing = [spec for spec in whole if spec.run_id not in by_id]
    if missing:
        count = first.manifest.shard.count if first.manifest.shard else 1
        index = whole.index(missing[0]) % count + 1
        given = {s.manifest.shard.index: s for s in shards if s.manifest.shard}
        hint = f"shard {index}/{count} was not given" if index not in given else _missing_hint(given[index])
        raise MergeError(
            f"cannot merge: {plural(len(missing), 'episode')} of the plan missing, first {missing[0].run_id} ({hint})"
        )
    return [attempt for spec in whole for attempt in attempts[spec.run_id]]


def _missing_hint(shard: _ShardRun) -> str:
    """What to do about a given shard that lacks episodes: resume a shard that stopped early; restore one that
    finished and then lost sealed records (``--resume`` refuses it: it would run them again and seal new ones)."""
    count = shard.manifest.shard.count if shard.manifest.shard else 1
    index = shard.manifest.shard.index if shard.manifest.shard else 1
    lost = shard.directory.sealed_records_lost(shard.manifest)
    if lost:
        return (
            f"shard {index}/{count}, {shard.run_id}, lost records it sealed: {lost}; restore {shard.directory.path} "
            f"as the run wrote it (`contextdelta verify {shard.run_id}` names what changed)"
        )
    return (
        f"shard {index}/{count}, {shard.run_id}, is incomplete: resume it "
        f"(`contextdelta run-benchmark --resume {shard.run_id}`)"
    )


def _short(value: Any, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def merge_shards(
    results_dir: Path,
    run_ids: Sequence[str],
    out_id: str,
    recorders: Sequence[Recorder] = (),
    changed_since_run: Callable[[Path], Sequence[str]] | None = None,
    repaired: Callable[[str], None] | None = None,
) -> RunDirectory:
    """Join the shard directories ``run_ids`` (under ``results_dir``) into the new run group ``out_id``.

    Raises MergeError (nothing written) when the shards disagree, an episode is missing or present twice, or
    ``changed_since_run`` (a shard's path -> what its seal finds changed since its run: ``verify``'s
    ``seal_problems``, which the CLI passes) names a change: the merged run would seal the changed bytes as its own.
    ``recorders`` get the merged episodes after the run directory and the report files (e.g. the trace store).
    Before it writes, the hidden folders that killed merges and run-benchmarks left in ``results_dir`` are removed
    (``remove_abandoned_staging``); ``repaired`` hears each, in words.
    """
    if not run_ids:
        raise MergeError("cannot merge: no run directories given")
    if len(set(run_ids)) != len(run_ids):
        raise MergeError(f"cannot merge: a run directory is given twice: {list(run_ids)}")
    try:
        target = run_dir(results_dir, validate_run_id(out_id), must_exist=False)
    except RunIdError as exc:
        raise MergeError(f"--out: {exc}") from exc
    if target.exists():
        raise MergeError(f"--out {out_id}: {target} already exists; choose a new run group id")
    shards = [_read(results_dir, run_id) for run_id in run_ids]
    ordered = check_shards(shards)
    for shard in shards:
        problems = list(changed_since_run(shard.directory.path)) if changed_since_run is not None else []
        if problems:
            shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
            raise MergeError(
                f"cannot merge: shard {shard.run_id} was changed after its run ({shown}); `contextdelta verify "
                f"{shard.run_id}` names every change: merge the shards as their runs wrote them"
            )
    # Built in a hidden folder beside the shards and renamed into place whole: a merge that is killed or fails
    # leaves no half-written run group under --out (the dashboard and `run_directories` skip hidden folders).
    # Locked while it is built, so that a run-benchmark's clean-up of what killed merges left
    # (remove_abandoned_staging) never takes it.
    for said in remove_abandoned_staging(results_dir):
        if repaired is not None:
            repaired(said)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_id}{MERGING}", dir=results_dir))
    locks = [SessionLock.acquire(staging)]
    try:
        locks.append(_write_merged(staging, target, out_id, shards, ordered, recorders))
        if target.exists():
            raise MergeError(f"--out {out_id}: {target} was created while merging; choose a new run group id")
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        for lock in locks:
            if lock is not None:
                lock.release()
    return RunDirectory(target)


def _write_merged(
    staging: Path,
    target: Path,
    out_id: str,
    shards: Sequence[_ShardRun],
    ordered: Sequence[EpisodeRecord],
    recorders: Sequence[Recorder],
) -> SessionLock:
    """Write the merged run directory into ``staging`` (it becomes ``target``); what :func:`merge_shards` does
    once the shards are checked. Returns the lock on the folder written, held (the caller releases it)."""
    from contextdelta.report import ReportFiles, recorded_params  # numpy/scipy: loaded only when a merge runs

    first = shards[0]
    now = utc_now()
    every = EpisodeAttempts.of(r.model_copy(update={"run_group_id": out_id}) for r in ordered)
    merged = list(every.current)
    manifest = first.manifest.model_copy(
        update={
            "run_group_id": out_id,
            "status": RunStatus.RUNNING,
            "stop_reason": None,
            "created_at": min(s.manifest.created_at for s in shards),
            "updated_at": now,
            "finished_at": None,
            "sessions": [{"started_at": now, "merged": [s.run_id for s in shards]}],
            "environment": environment(),
            "shard": None,
            "counts": Counts(planned=len(merged)),
            "merged_from": [_merged_shard(s) for s in sorted(shards, key=lambda s: s.manifest.shard.index)],  # type: ignore[union-attr]
        }
    )
    directory = RunDirectory(staging)
    snapshot = first.directory.file(TASKS_SNAPSHOT)
    # create() replaces the locked folder with one it locked itself: held until the merged directory is in place
    created = directory.create(manifest, [(t.world, t.id, snapshot / t.world / f"{t.id}.yaml") for t in manifest.tasks])
    group = Recorders(
        [RunDirectoryRecorder(directory), ReportFiles(directory, recorded_params(first.directory)), *recorders]
    )
    group.start(RunStart(path=target, manifest=manifest, planned=len(merged), done=(), pending=len(merged)))
    for record in every.records:  # superseded attempts too, each before the attempt that replaced it
        group.episode(record)
    end = utc_now()
    final = manifest.model_copy(
        update={
            "status": RunStatus.COMPLETE,
            "updated_at": end,
            "finished_at": end,
            "sessions": [{**manifest.sessions[0], "ended_at": end, "finished": len(merged)}],
            "counts": Counts(
                planned=len(merged),
                finished=len(merged),
                failed=sum(r.failed for r in merged),
                succeeded=sum(r.verdict.success for r in merged),
            ),
        }
    )
    group.finish(
        RunEnd(path=target, manifest=final, records=tuple(merged), new=len(merged), superseded=every.superseded)
    )
    try:
        directory.write_manifest(final)
    except BaseException:
        created.release()
        raise
    return created


def _merged_shard(shard: _ShardRun) -> MergedShard:
    m = shard.manifest
    assert m.shard is not None
    return MergedShard(
        run_group_id=m.run_group_id,
        shard=m.shard,
        episodes=len(shard.records),
        raw_runs_sha256=sha256_hex(shard.directory.file(RAW_RUNS).read_bytes()),
        created_at=m.created_at,
        finished_at=m.finished_at,
        environment=m.environment,
        sessions=m.sessions,
    )
