"""The run directory on disk: file names, creation, appending episodes, and the files derived from them.

``raw_runs.jsonl`` is the source of truth. ``tool_events.jsonl`` is appended per episode too, and both it and
``task_results.csv`` are rebuilt from ``raw_runs.jsonl`` whenever a run finishes or resumes, so a run killed
between two appends still ends consistent.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contextdelta._words import plural
from contextdelta.canonical import canonical_json
from contextdelta.grading import harmful_actions
from contextdelta.rundir.attempts import EpisodeAttempts
from contextdelta.rundir.ids import MANIFEST_NAME
from contextdelta.rundir.io import (
    SessionLock,
    atomic_write_json,
    atomic_write_text,
    parse_json,
    read_jsonl,
    repair_torn_tail,
)
from contextdelta.rundir.legacy import add_grader_details
from contextdelta.rundir.receipts import (
    RECEIPTS,
    UNSEALED,
    chain_state,
    complete_lines,
    file_digests,
    file_kind,
    lines_unlike_receipts,
    manifest_edits,
    odd_entries,
    read_receipts,
    reconcile_receipts,
    seal_directory,
    seal_sha256,
    version_writes_seal,
)
from contextdelta.rundir.records import (
    ATTEMPT_COLUMN,
    CONTROL_COLUMN,
    TASK_RESULT_COLUMNS,
    VERDICT_COLUMNS,
    EpisodeRecord,
    RunManifest,
    RunStatus,
    ToolEventRecord,
    task_result_columns,
)

MANIFEST = MANIFEST_NAME
RAW_RUNS = "raw_runs.jsonl"
TOOL_EVENTS = "tool_events.jsonl"
TASK_RESULTS = "task_results.csv"
AGGREGATE_METRICS = "aggregate_metrics.json"
FAILURE_ATLAS = "failure_atlas.md"
BENCHMARK_REPORT = "benchmark_report.md"
TASKS_SNAPSHOT = "tasks"
REQUIRED_FILES = (MANIFEST, RAW_RUNS, TOOL_EVENTS, TASK_RESULTS, AGGREGATE_METRICS, FAILURE_ATLAS, BENCHMARK_REPORT)
RAW_RUNS_RECEIPTS = RECEIPTS
"""The receipts of ``raw_runs.jsonl`` (one per line, a hash chain; absent in run directories from before)."""
DERIVED_FILES = (TOOL_EVENTS, TASK_RESULTS, AGGREGATE_METRICS, FAILURE_ATLAS, BENCHMARK_REPORT)
"""The files rebuilt from ``raw_runs.jsonl`` and the manifest whenever a run ends or resumes."""
SEALED_APART = (MANIFEST, RAW_RUNS, RECEIPTS)
"""Files the seal's file digests leave out: the manifest seals itself, raw_runs.jsonl is sealed by its receipts,
and the receipts by their chain."""


CREATING = ".creating"
"""The ending of the hidden folder a new run directory is built in (``.NAME.creating``)."""
MERGING = ".merging-"
"""What the hidden folder a merged run group is built in holds after its name (``.NAME.merging-XXXXXXXX``)."""
STAGING_GRACE_S = 10.0
"""A staging folder changed this recently is left alone even when no lock holds it: its builder may be between
making it and locking it."""


def remove_abandoned_staging(results_dir: Path) -> list[str]:
    """Remove the hidden folders a killed ``run-benchmark`` (``.NAME.creating``) or ``merge``
    (``.NAME.merging-XXXXXXXX``) left in ``results_dir``; returns what was done, in words, one entry per folder.

    A folder is removed only when this process takes its :class:`SessionLock` (the lock its builder holds while
    it builds it, released by the operating system when the builder dies, however it dies) and it has not changed
    for :data:`STAGING_GRACE_S`; one that a live process holds, a link, or anything where locks do not work is left
    alone. A folder that cannot be removed is named with the reason."""
    try:
        entries = sorted(os.scandir(results_dir), key=lambda e: e.name)
    except OSError:
        return []
    done: list[str] = []
    now = time.time()
    for entry in entries:
        name = entry.name
        merge = MERGING in name
        if not name.startswith(".") or not (name.endswith(CREATING) or merge):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or now - info.st_mtime < STAGING_GRACE_S:
            continue
        lock = SessionLock.acquire(Path(entry.path))
        if lock is None or not lock.held:  # a live process builds it, or nothing can tell: leave it
            continue
        what = "a merge" if merge else "a run-benchmark"
        try:
            done.append(_remove_staging(Path(entry.path), what, merge))
        finally:
            lock.release()
    return done


def _remove_staging(path: Path, what: str, merge: bool) -> str:
    """Remove one abandoned staging folder (its lock held); what was done, in words. A folder that holds anything
    a run does not write there is left alone: it is named like a staging folder, but it is not one."""
    written = {MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, TASKS_SNAPSHOT, *DERIVED_FILES}
    try:
        foreign = sorted(n for n in os.listdir(path) if n not in written and not n.endswith(UNSEALED))
    except OSError as exc:
        foreign = [f"(unreadable: {exc.strerror or exc})"]
    if foreign:
        return (
            f"left {path}: it is named like the hidden folder of {what} that was killed, but it holds "
            f"{', '.join(foreign[:3])}, which no run writes there; delete it by hand if it is a leftover"
        )
    kept = "the shards hold every episode" if merge else "nothing in it had run"
    try:
        shutil.rmtree(path)
    except OSError as exc:
        return (
            f"cannot remove {path}, the hidden folder left by {what} killed before its run directory existed "
            f"({exc.strerror or exc}); delete it by hand"
        )
    return f"removed {path}: the hidden folder left by {what} killed before its run directory existed ({kept})"


def _run_id(line: bytes) -> str | None:
    """The ``run_id`` of a record's line, or None when it is not a JSON object with one."""
    try:
        value = parse_json(line)
    except ValueError:
        return None
    run_id = value.get("run_id") if isinstance(value, dict) else None
    return run_id if isinstance(run_id, str) else None


class RunDirectoryError(ValueError):
    """A run directory that is malformed or incomplete; the message names the file and the problem."""


def _refuse_special(path: Path) -> None:
    """RunDirectoryError when ``path`` is (or links to) a FIFO, socket, device or folder: a run writes plain files,
    and opening a FIFO would wait for a writer forever. A missing path is left to the caller."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise RunDirectoryError(
            f"{path}: {file_kind(mode)}, not a regular file (not read); a run directory holds the plain files its run "
            "wrote: put that file in its place"
        )


def _read_utf8(path: Path) -> str:
    """The UTF-8 text of ``path``; RunDirectoryError naming the file and the first bad byte when it is not UTF-8
    (every file a run writes is), so a damaged file is a named problem, never a traceback."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise RunDirectoryError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}, line {line}); a run writes UTF-8 only, so the "
            "file was damaged or replaced after the run: restore it from a copy"
        ) from None


MIN_FREE_BYTES = 32 * 1024 * 1024
"""Free space a results folder needs before a run starts (a run directory takes tens of kB per episode)."""


def check_results_dir(path: Path, *, min_free_bytes: int = MIN_FREE_BYTES, flag: str = "--results-dir") -> None:
    """Refuse a results folder a run could not write to, before anything is created: a path that is not a folder
    (or under one that is not), a folder this process cannot create files in (read-only, no permission), or a
    file system with less than ``min_free_bytes`` free. A missing folder is fine when it can be created. Raises
    RunDirectoryError naming the folder (as ``flag``, where it came from) and the problem; writes nothing (the probe
    file has no name)."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        where = "is not a folder" if existing == path else f"cannot be created: {existing} is not a folder"
        raise RunDirectoryError(f"{flag} {path} {where}")
    try:
        with tempfile.TemporaryFile(dir=existing):  # O_TMPFILE where supported: no directory entry is made
            pass
    except OSError as exc:
        where = "" if existing == path else f" (it would be created in {existing})"
        raise RunDirectoryError(f"{flag} {path}{where} is not writable: {exc.strerror or exc}") from None
    free = shutil.disk_usage(existing).free
    if free < min_free_bytes:
        # a resumed run stays where it is: only freeing space helps there
        remedy = "free some space there" if flag == "--resume" else "free some space or choose another --results-dir"
        raise RunDirectoryError(
            f"{flag} {path}: only {free / 2**20:.1f} MiB free on its file system; a run needs at least "
            f"{min_free_bytes / 2**20:.0f} MiB ({remedy})"
        )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def task_result_values(record: EpisodeRecord, *, verdict_of_failed: bool = False) -> dict[str, Any]:
    """One ``task_results.csv`` row as typed values (None: N/A or unknown), control and attempt columns included.

    A failed trial has no verdict: its `VERDICT_COLUMNS` are None unless ``verdict_of_failed`` (the layout of files
    written before 0.6.0, which `verify` still accepts)."""
    v, totals = record.verdict, record.trace.totals
    values: dict[str, Any] = {
        "run_id": record.run_id,
        "task_id": record.task_id,
        "task_version": record.task_version,
        "world": record.world,
        "hazard": record.hazard,
        "strategy": record.strategy,
        "protection_mode": record.protection_mode,
        "repeat": record.repeat,
        "success": v.success,
        "end_state": v.end_state,
        "no_stale_action": v.no_stale_action,
        "no_duplicate_action": v.no_duplicate_action,
        "refresh_before_write": v.refresh_before_write,
        "conflict_recovery": v.conflict_recovery,
        "authorized": v.authorized,
        "no_prohibited_action": v.no_prohibited_action,
        "stale_action_count": v.stale_action_count,
        "duplicate_action_count": v.duplicate_action_count,
        "prohibited_action_count": v.prohibited_action_count,
        "blocked_write_count": v.blocked_write_count,
        "steps": record.trace.step_count,
        "termination_reason": record.trace.termination.value,
        "agent_prompt_tokens": totals.agent_usage.prompt_tokens if totals.usage_complete else None,
        "agent_completion_tokens": totals.agent_usage.completion_tokens if totals.usage_complete else None,
        "summary_prompt_tokens": totals.summary_usage.prompt_tokens if totals.usage_complete else None,
        "summary_completion_tokens": totals.summary_usage.completion_tokens if totals.usage_complete else None,
        "latency_s": round(totals.latency_s, 6),
        "cost_usd": record.cost_usd,
        "failed": record.failed,
        "final_answer_facts_ok": v.final_answer_facts_ok,
        "episode_seed": record.episode_seed,
        "harmful_action": bool(harmful_actions(record.trace.tool_events(), v.event_flags)),
        CONTROL_COLUMN: record.control,
        ATTEMPT_COLUMN: record.attempt,
    }
    if record.failed and not verdict_of_failed:
        values.update(dict.fromkeys(VERDICT_COLUMNS))
    return values


def task_result_row(record: EpisodeRecord, *, verdict_of_failed: bool = False) -> dict[str, str]:
    """One ``task_results.csv`` row: booleans ``true``/``false``, empty for N/A or unknown (see
    `task_result_values`)."""
    values = task_result_values(record, verdict_of_failed=verdict_of_failed)
    return {column: _cell(values[column]) for column in (*TASK_RESULT_COLUMNS, CONTROL_COLUMN, ATTEMPT_COLUMN)}


def render_task_results(records: Iterable[EpisodeRecord]) -> str:
    """The whole ``task_results.csv`` of the current ``records`` (one per episode), rows sorted by run id (stable
    across resumes and concurrency)."""
    ordered = sorted(records, key=lambda r: r.run_id)
    columns = task_result_columns(ordered)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for record in ordered:
        writer.writerow(task_result_row(record))
    return buffer.getvalue()


def tool_event_records(record: EpisodeRecord) -> list[ToolEventRecord]:
    """The ``tool_events.jsonl`` lines of one episode (agent calls, with the graders' flags)."""
    flags = {f.seq: f for f in record.verdict.event_flags}
    rows = []
    for event in record.trace.tool_events():
        flag = flags.get(event.seq)
        rows.append(
            ToolEventRecord(
                run_id=record.run_id,
                step=event.step,
                seq=event.seq,
                index=event.index,
                tool=event.tool,
                arguments=event.arguments,
                kind=event.kind.value if event.kind else None,
                resource=event.resource,
                observed_version=event.observed_version,
                version_at_execution=event.version_at_execution,
                expected_version=event.expected_version,
                outcome=event.outcome.value,
                error_code=event.error_code,
                stale=bool(flag and flag.stale),
                duplicate=bool(flag and flag.duplicate),
                prohibited=bool(flag and flag.prohibited),
            )
        )
    return rows


def render_tool_events(records: Iterable[EpisodeRecord]) -> str:
    return "".join(
        canonical_json(row.model_dump(mode="json")) + "\n" for record in records for row in tool_event_records(record)
    )


class RunDirectory:
    """One run group's directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def file(self, name: str) -> Path:
        return self.path / name

    def read_text(self, name: str) -> str:
        """The UTF-8 text of the file ``name``. RunDirectoryError (never a wait) when it is a FIFO or another
        special file; OSError when it cannot be read."""
        path = self.file(name)
        _refuse_special(path)
        return _read_utf8(path)

    # ---- writing ------------------------------------------------------------------------------------------

    def create(self, manifest: RunManifest, task_files: Sequence[tuple[str, str, Path]]) -> SessionLock:
        """Create the directory, copy the task files used (``world/id.yaml``), and write the manifest.

        All of it is made in a hidden folder beside the run directory (``.NAME.creating``) and renamed into place
        once the manifest is written, so a process killed meanwhile leaves no folder under the run's name without
        a manifest (which no command could resume, and the dashboard would list as unreadable); what it leaves is
        hidden, and every reader of a results folder skips hidden folders. The hidden folder is locked
        (:class:`SessionLock`) from the moment it exists, so :func:`remove_abandoned_staging` never removes it while
        this process builds it; the lock, which moves with the folder, is returned held: the caller's hold on the
        new run directory."""
        if self.path.exists() and any(self.path.iterdir()):
            raise RunDirectoryError(f"{self.path} already exists and is not empty")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        staging = RunDirectory(self.path.parent / f".{self.path.name}{CREATING}")
        shutil.rmtree(staging.path, ignore_errors=True)
        lock: SessionLock | None = None
        try:
            staging.path.mkdir()
            lock = SessionLock.acquire(staging.path) or SessionLock(None)
            snapshot = staging.path / TASKS_SNAPSHOT
            for world, task_id, source in task_files:
                target = snapshot / world / f"{task_id}.yaml"
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
            for name in (RAW_RUNS, RECEIPTS, TOOL_EVENTS):
                staging.file(name).touch()
            staging.write_manifest(manifest)
            os.replace(staging.path, self.path)  # onto a missing or empty folder only
        except BaseException:
            shutil.rmtree(staging.path, ignore_errors=True)
            if lock is not None:
                lock.release()
            raise
        return lock

    def write_manifest(self, manifest: RunManifest) -> RunManifest:
        """Write the manifest atomically with a fresh seal (``contextdelta.rundir.receipts``): the chain over
        ``raw_runs.jsonl`` as its receipts stand, the digests of the manifest itself and of every other file.
        Returns the manifest as written (with that seal)."""
        value = manifest.model_dump(mode="json", exclude={"seal"})
        chain = chain_state(self.file(RAW_RUNS_RECEIPTS), manifest.run_group_id)
        seal = seal_directory(self.path, value, chain, SEALED_APART)
        atomic_write_json(self.file(MANIFEST), {**value, "seal": seal.model_dump(mode="json")})
        return manifest.model_copy(update={"seal": seal})

    def reseal_files(self) -> bool:
        """Refresh the seal's file digests after derived files were rewritten on purpose (``report --write``),
        leaving every other part of the manifest and its seal as it was. False when the manifest has no seal."""
        path = self.file(MANIFEST)
        value = parse_json(path.read_text(encoding="utf-8"))
        if not isinstance(value, dict) or not isinstance(value.get("seal"), dict):
            return False
        value["seal"]["files"] = file_digests(self.path, SEALED_APART)
        value["seal"]["sha256"] = seal_sha256(value["seal"])
        atomic_write_json(path, value)
        return True

    def write_derived(self, records: Sequence[EpisodeRecord]) -> None:
        """Rebuild ``tool_events.jsonl`` and ``task_results.csv`` from the episodes (atomically)."""
        atomic_write_text(self.file(TOOL_EVENTS), render_tool_events(records))
        atomic_write_text(self.file(TASK_RESULTS), render_task_results(records))

    def repair_raw_runs(self) -> list[str]:
        """Cut a torn last line (a killed writer) from ``raw_runs.jsonl`` and bring its receipts in line (a kill
        between the two appends leaves a record without one). Returns what was repaired, in words (empty when the
        files were whole), for the session to report. RunDirectoryError when the receipts file is damaged other
        than at its end."""
        raw = self.file(RAW_RUNS)
        size = raw.stat().st_size if raw.is_file() else 0
        repairs: list[str] = []
        if repair_torn_tail(raw):
            repairs.append(
                f"{RAW_RUNS}: cut a torn last line ({size - raw.stat().st_size} bytes: the episode being written "
                "when the earlier session stopped; it runs again)"
            )
        try:
            manifest = self.read_manifest()
            dropped, added = reconcile_receipts(raw, self.file(RAW_RUNS_RECEIPTS), manifest.run_group_id)
        except ValueError as exc:
            raise RunDirectoryError(f"{exc}; `contextdelta verify` says what was changed") from None
        if dropped:
            repairs.append(
                f"{RAW_RUNS_RECEIPTS}: dropped {plural(dropped, 'line')} without a complete record (torn, or past the "
                f"last line of {RAW_RUNS})"
            )
        if added:
            repairs.append(
                f"{RAW_RUNS_RECEIPTS}: derived {plural(added, 'missing receipt')} from {RAW_RUNS} (the earlier "
                "session stopped between appending a record and its receipt)"
            )
        return repairs

    def remove_stale_temp_files(self) -> list[str]:
        """Remove the temp files left by an atomic write that was killed half way; returns their names."""
        removed = []
        for leftover in sorted(self.path.glob(".*.tmp")):
            leftover.unlink(missing_ok=True)
            removed.append(leftover.name)
        return removed

    # ---- reading ------------------------------------------------------------------------------------------

    def seal_expected(self, manifest: RunManifest) -> bool:
        """Whether this run directory must carry a seal: it has one, it has receipts (``raw_runs.receipts.jsonl``;
        only a sealing version writes them), or its manifest records a contextdelta version that seals every run
        directory (:data:`contextdelta.rundir.receipts.SEALED_SINCE`). Without a seal it is then a run whose seal
        was removed after the run, not one from before receipts."""
        return self._expects_seal(manifest.seal is not None, manifest.environment.contextdelta)

    def _expects_seal(self, sealed: bool, version: object) -> bool:
        return (
            sealed
            or os.path.lexists(self.file(RAW_RUNS_RECEIPTS))
            or version_writes_seal(version if isinstance(version, str) else "")
        )

    def entries_not_written_by_a_run(self) -> list[tuple[str, str]]:
        """(name, what it is) of each entry that a run writes or reads (the manifest, ``raw_runs.jsonl``, its
        receipts, the derived files, the task snapshot) and that is a symbolic link, a special file (a FIFO, a
        device, ...), or a folder where the run writes a file (a file where it keeps the snapshot folder), in name
        order: a session that appended through such a link would write outside the run directory, one that opened a
        FIFO would wait for a writer, and one that wrote onto a folder would fail half way. Temp files of atomic
        writes are left out."""
        written = {MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, *DERIVED_FILES}
        found = [
            (name, what)
            for name, what in odd_entries(self.path)
            if (name in written or name.split("/")[0] == TASKS_SNAPSHOT) and not name.endswith(UNSEALED)
        ]
        for name, folder in [*((n, False) for n in sorted(written)), (TASKS_SNAPSHOT, True)]:
            try:
                mode = os.lstat(self.file(name)).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) != folder and (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                found.append((name, f"{file_kind(mode)} where the run writes {'a folder' if folder else 'a file'}"))
        return sorted(found)

    def foreign_entries(self) -> list[str]:
        """The names, sorted, of the entries at the top of the run directory that no run writes (a note, a copy, an
        export written into it): the next manifest write would seal them as the run's files. Temp files of atomic
        writes cut short are left out (a resume removes them)."""
        written = {MANIFEST, RAW_RUNS, RAW_RUNS_RECEIPTS, TASKS_SNAPSHOT, *DERIVED_FILES}
        try:
            names = os.listdir(self.path)
        except OSError:
            return []
        return sorted(n for n in names if n not in written and not (n.startswith(".") and n.endswith(UNSEALED)))

    def manifest_edits(self) -> list[str]:
        """The fields of ``run_manifest.json`` edited since it was sealed (none for a manifest without a seal);
        ``seal (removed)`` for a run that must carry a seal and has none (:meth:`seal_expected`)."""
        try:
            value = parse_json(self.read_text(MANIFEST))
        except (OSError, ValueError):
            return []
        if not isinstance(value, dict):
            return []
        environment = value.get("environment")
        version = environment.get("contextdelta") if isinstance(environment, dict) else None
        if value.get("seal") is None and self._expects_seal(False, version):
            return ["seal (removed)"]
        return manifest_edits(value)

    def sealed_records_lost(self, manifest: RunManifest) -> str | None:
        """What a resume would have to seal that no receipt written with it vouches for, in words, or None.

        The seal counts the receipts at its manifest write, and a record is appended (and flushed) before its
        receipt, in one process. So no kill explains (a) fewer complete records or receipts than the seal counts,
        (b) more receipts than complete records, or (c) more than one record without a receipt, or one that is not
        the last complete line of a run still ``running``: a finished run flushed both files (to the disk) before
        its manifest sealed them. Each is an edit (or, for a run still ``running``, a machine crash that lost what
        had not reached the disk); a resume would run removed episodes again, or derive the missing receipts from
        the lines as they stand now, and seal the result as the run's. The one record a kill explains (the last
        line, its receipt not yet written) gets its receipt on resume: that line is as the next session found it,
        which nothing without a secret key can tell from an edit."""
        if manifest.seal is None:
            return None
        running = manifest.status is RunStatus.RUNNING
        later = " (or a machine crash lost it before it reached the disk)" if running else " after the run ended"
        sealed = manifest.seal.records.lines
        lines = complete_lines(self.file(RAW_RUNS))
        if lines:
            try:
                parse_json(lines[-1])
            except ValueError:  # what the repair cuts as torn
                lines = lines[:-1]
        try:
            receipts = read_receipts(self.file(RAW_RUNS_RECEIPTS))
        except ValueError as exc:
            return f"{RAW_RUNS_RECEIPTS} is damaged ({exc})"
        if len(lines) < sealed:
            return (
                f"{RAW_RUNS} holds {len(lines)} complete records, but the manifest sealed {sealed} (lines deleted, "
                f"cut short or overwritten{later}); resuming would run those episodes again and seal the new records "
                f"as the run's; restore {RAW_RUNS} as the run wrote it"
            )
        if len(receipts) < sealed:
            return (
                f"{RAW_RUNS_RECEIPTS} holds {len(receipts)} receipts, but the manifest sealed {sealed}; resuming would "
                f"derive the missing ones from the lines of {RAW_RUNS} as they stand now, sealing any edit of them; "
                f"restore {RAW_RUNS_RECEIPTS} as the run wrote it"
            )
        if len(receipts) > len(lines):
            gone = receipts[len(lines)]
            copied = (
                " (or this directory is a copy taken while its run was writing it, the receipts copied after the "
                "records: copy it again once the run is complete)"
                if running
                else ""
            )
            return (
                f"{RAW_RUNS_RECEIPTS} holds {len(receipts)} receipts, but {RAW_RUNS} only {len(lines)} complete "
                f"records: a record is written before its receipt, so no kill leaves a receipt without its record; "
                f"line {gone.line} ({gone.run_id or 'unknown episode'}) on were removed{later}{copied}; resuming "
                f"would run those episodes again; restore {RAW_RUNS} as the run wrote it"
            )
        allowed = 1 if running else 0
        missing = len(lines) - len(receipts)
        if missing <= allowed:
            return None
        first = len(receipts) + 1
        run_id = _run_id(lines[first - 1])
        span = f"line {first}" if missing == 1 else f"lines {first}-{len(lines)} ({missing} records)"
        keep = (
            f", or, to run those episodes again, keep only the first {first - 1} lines of {RAW_RUNS}" if running else ""
        )
        return (
            f"{RAW_RUNS} {span}, the first {run_id or 'an unknown episode'}, {'has' if missing == 1 else 'have'} no "
            f"receipt in {RAW_RUNS_RECEIPTS}: "
            + (
                "a kill leaves at most the last record without one, so receipts were deleted or cut short"
                if running
                else "a finished run wrote every record's receipt before it sealed them, so these were added or their "
                "receipts removed"
            )
            + f"{later}; resuming would derive receipts from those lines as they stand now, sealing any edit of them; "
            f"restore {RAW_RUNS_RECEIPTS} as the run wrote it{keep}"
        )

    def records_edited(self) -> list[int]:
        """The lines of ``raw_runs.jsonl`` edited since they were written: their bytes are not those their receipt
        sealed (empty for a run without receipts, or with receipts too damaged to compare: those are named
        elsewhere). A session that resumes would count them, and write the reports and the seal from them."""
        try:
            return lines_unlike_receipts(self.file(RAW_RUNS), self.file(RAW_RUNS_RECEIPTS))
        except (OSError, ValueError):
            return []

    def _sealed_files(self) -> tuple[Any, dict[str, Any] | None]:
        """The manifest's ``status`` and the file digests its seal holds, read leniently: (None, None) when the
        manifest cannot be read, its status and None when it has no seal with files."""
        try:
            value = parse_json(self.read_text(MANIFEST))
        except (OSError, ValueError):
            return None, None
        if not isinstance(value, dict):
            return None, None
        seal = value.get("seal")
        files = seal.get("files") if isinstance(seal, dict) else None
        return value.get("status"), files if isinstance(files, dict) else None

    def snapshot_edits(self) -> list[str]:
        """The files of the task snapshot changed, added or removed since the manifest sealed them (none for a
        manifest without a seal): a session that resumes would seal them as the run's."""
        _, files = self._sealed_files()
        if files is None:
            return []
        prefix = f"{TASKS_SNAPSHOT}/"
        found = {n: d for n, d in file_digests(self.path, SEALED_APART).items() if n.startswith(prefix)}
        sealed = {n: d for n, d in files.items() if isinstance(n, str) and n.startswith(prefix)}
        return sorted(n for n in set(found) | set(sealed) if found.get(n) != sealed.get(n))

    def derived_edits(self) -> list[str]:
        """The derived files (``DERIVED_FILES``) present whose bytes are not those the manifest sealed, sorted (none
        for a manifest without a seal, or one still ``running``, whose derived files are not sealed yet). A derived
        file that is missing is no edit: ``report --write`` rebuilds it from ``raw_runs.jsonl`` and the manifest; one
        that was edited is named by verify, and rebuilding it over the edit would hide what was changed."""
        status, files = self._sealed_files()
        if files is None or status == RunStatus.RUNNING.value:
            return []
        found = file_digests(self.path, SEALED_APART)
        return sorted(n for n in DERIVED_FILES if n in found and found[n] != files.get(n))

    def read_manifest(self) -> RunManifest:
        path = self.file(MANIFEST)
        _refuse_special(path)
        try:
            # a byte order mark an editor added changes no value: it is read past here and named by verify's seal
            text = _read_utf8(path).removeprefix("\ufeff")
            manifest = RunManifest.model_validate_json(text)
        except FileNotFoundError as exc:
            raise RunDirectoryError(f"{path}: missing (not a run directory?)") from exc
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in err["loc"]) or "(the whole file)"
            raise RunDirectoryError(f"{path}: {where}: {err['msg']}") from exc
        try:
            parse_json(text)  # pydantic reads NaN and Infinity, which no run writes and no digest can encode
        except ValueError as exc:
            raise RunDirectoryError(f"{path}: (the whole file): {exc}") from None
        return manifest

    def read_episodes(self, *, repair: bool = False) -> list[EpisodeRecord]:
        """Every episode's current record (its highest attempt: ``contextdelta.rundir.attempts``) in
        ``raw_runs.jsonl``, in file order; :meth:`read_attempts` gives the superseded attempts too. A torn last line
        (a killed writer) is dropped, and with ``repair`` also cut from the file. Any other malformed line, or an
        episode with two lines of the same attempt, is a RunDirectoryError naming the line. Records of earlier
        versions are brought up to date (``contextdelta.rundir.legacy``)."""
        return list(self.read_attempts(repair=repair).current)

    def read_attempts(self, *, repair: bool = False) -> EpisodeAttempts:
        """Every line of ``raw_runs.jsonl`` (current records and superseded attempts), checked and brought up to
        date as in :meth:`read_episodes`."""
        path = self.file(RAW_RUNS)
        if not path.exists():
            raise RunDirectoryError(f"{path}: missing")
        _refuse_special(path)
        if repair:
            repair_torn_tail(path)
        records: list[EpisodeRecord] = []
        seen: set[tuple[str, int]] = set()
        for number, record in self._episode_lines(path):
            key = (record.run_id, record.attempt)
            if key in seen:
                again = f" attempt {record.attempt}" if record.attempt > 1 else ""
                raise RunDirectoryError(f"{path}: line {number}: episode {record.run_id}{again} appears twice")
            seen.add(key)
            records.append(record)
        return EpisodeAttempts.of(self._upgraded(records))

    def read_readable_attempts(self) -> tuple[EpisodeAttempts, list[int], list[str]]:
        """The lines of ``raw_runs.jsonl`` that read as records, for verify of a sealed run (whose seal names every
        line that differs from what it sealed): every attempt as in :meth:`read_attempts`, the 1-based line number
        of each (in ``records`` order), and the run id (where one can be found) of each line left out: one that is
        empty, not JSON or not a record, a second line of an episode's attempt (the first one is kept), and a torn
        last line. RunDirectoryError when the file is missing or not a regular file."""
        path = self.file(RAW_RUNS)
        if not path.exists():
            raise RunDirectoryError(f"{path}: missing")
        _refuse_special(path)
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as exc:
            raise RunDirectoryError(f"{path}: {exc.strerror or exc}") from exc
        left_out = [_run_id(lines[-1]) or ""] if lines[-1] != b"" else []  # a torn last line
        records: list[EpisodeRecord] = []
        numbers: list[int] = []
        seen: set[tuple[str, int]] = set()
        for number, raw in enumerate(lines[:-1], start=1):
            try:
                value = parse_json(raw)
                record = EpisodeRecord.model_validate(value)
            except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
                left_out.append(_run_id(raw) or "")
                continue
            key = (record.run_id, record.attempt)
            if key in seen:
                continue
            seen.add(key)
            records.append(record)
            numbers.append(number)
        return EpisodeAttempts.of(self._upgraded(records)), numbers, [r for r in left_out if r]

    def read_episode(self, run_id: str, attempt: int | None = None) -> EpisodeRecord:
        """The episode ``run_id`` of ``raw_runs.jsonl``: its current record, or the given ``attempt``, validating
        only its lines (brought up to date like :meth:`read_episodes`). RunDirectoryError when the file is missing
        or malformed or lacks the episode (or that attempt)."""
        attempts = self.read_episode_attempts(run_id)
        if attempt is None:
            if attempts:
                return max(attempts, key=lambda r: r.attempt)
        else:
            for record in attempts:
                if record.attempt == attempt:
                    return record
        what = f"episode {run_id!r}" + (f" attempt {attempt}" if attempt is not None else "")
        raise RunDirectoryError(f"{self.file(RAW_RUNS)}: no {what}")

    def read_episode_attempts(self, run_id: str) -> list[EpisodeRecord]:
        """Every attempt of the episode ``run_id`` in file order (empty when it has none), validating only its
        lines. RunDirectoryError when the file is missing or malformed."""
        path = self.file(RAW_RUNS)
        if not path.exists():
            raise RunDirectoryError(f"{path}: missing")
        _refuse_special(path)
        return self._upgraded([record for _, record in self._episode_lines(path, only=run_id)])

    def _episode_lines(self, path: Path, only: str | None = None) -> Iterator[tuple[int, EpisodeRecord]]:
        try:
            for number, value in read_jsonl(path):
                if only is not None and value.get("run_id") != only:
                    continue
                try:
                    yield number, EpisodeRecord.model_validate(value)
                except ValidationError as exc:
                    err = exc.errors(include_url=False)[0]
                    where = ".".join(str(p) for p in err["loc"])
                    raise RunDirectoryError(f"{path}: line {number}: {where}: {err['msg']}") from exc
        except OSError as exc:
            raise RunDirectoryError(f"{path}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            if isinstance(exc, RunDirectoryError):
                raise
            raise RunDirectoryError(str(exc)) from exc

    def _upgraded(self, records: list[EpisodeRecord]) -> list[EpisodeRecord]:
        try:
            return add_grader_details(records, self.file(TASKS_SNAPSHOT))
        except ValueError as exc:
            raise RunDirectoryError(f"{self.path}: {exc}") from exc
