"""The dashboard's data layer: loading run directories, filtering episodes and failures, searching their text,
and comparing two run groups. Pure functions of the files on disk (no Streamlit here), unit-tested directly, so
the page scripts stay thin; `contextdelta.dashboard.tables` shapes the report's numbers into table rows.

Nothing is recomputed that the report already computes: condition rates, intervals, pass^k, breakdowns and the
task-level comparisons come from the run's ``aggregate_metrics.json`` (or, when that file is missing, stale or
unreadable, from `contextdelta.report.build_report` on the recorded episodes), a comparison of two run groups from
`contextdelta.report.compare_runs` (what ``contextdelta compare`` prints), and failure modes from
`contextdelta.attribution.attribute_run`.

The report package (and with it scipy) is imported only by the functions that analyse a run, so the Runs page,
which reads manifests only, is up before the statistics code is loaded.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from contextdelta._words import plural
from contextdelta.attribution import MODE_PRECEDENCE, Attribution, ObservationRef, attribute_run
from contextdelta.dashboard._text import code, visible
from contextdelta.replay import message_content, version_text
from contextdelta.rundir import (
    AGGREGATE_METRICS,
    MANIFEST,
    RAW_RUNS,
    EpisodeRecord,
    RunDirectory,
    RunDirectoryError,
    RunManifest,
    RunStatus,
    parse_json,
    resume_command,
)

if TYPE_CHECKING:
    from contextdelta.report import AggregateMetrics, ComparisonReport

MALFORMED = "malformed"
"""The status shown for a directory whose manifest cannot be read."""


class RunLoadError(Exception):
    """A run directory the dashboard cannot show; the message names the file and the problem."""


# ---- the results folder -------------------------------------------------------------------------------------

FileStamp = tuple[str, int, int] | None
Signature = tuple[FileStamp, ...]
"""(name, mtime_ns, size) of a run directory and its key files: the cache key of everything loaded from it."""


def _stamp(path: Path) -> FileStamp:
    try:
        st = path.stat()
    except OSError:
        return None
    return (path.name, st.st_mtime_ns, st.st_size)


def run_signature(path: Path) -> Signature:
    """The directory's own stamp plus its manifest's, episodes' and metrics' stamps.

    Appending an episode to ``raw_runs.jsonl`` does not change the directory's mtime, so the files are part of
    the key: any write to them gives a new signature, hence a fresh load.
    """
    return (_stamp(path), *(_stamp(path / name) for name in (MANIFEST, RAW_RUNS, AGGREGATE_METRICS)))


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8, which Python hands over as lone surrogates
        return False
    return True


def _folders(results_dir: Path) -> list[Path]:
    try:
        entries = list(results_dir.iterdir())
    except OSError:
        return []
    return sorted((p for p in entries if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def run_directories(results_dir: Path) -> list[Path]:
    """Every candidate run directory under ``results_dir`` (its sub-folders, hidden ones left out), by name; a
    folder whose name is not UTF-8 text is left out (`unnamed_folders`): no page could show or link it."""
    return [p for p in _folders(results_dir) if _utf8(p.name)]


def unnamed_folders(results_dir: Path) -> list[str]:
    """The folders of ``results_dir`` that `run_directories` leaves out because their names are not UTF-8 text,
    each name as Python writes its bytes (``b'run\\xff'``)."""
    return [repr(os.fsencode(p.name)) for p in _folders(results_dir) if not _utf8(p.name)]


def results_signature(results_dir: Path) -> tuple[Signature, ...]:
    """The signatures of every run directory under ``results_dir``: the cache key of the run list."""
    return tuple(run_signature(p) for p in run_directories(results_dir))


def results_dir_problem(results_dir: Path) -> str | None:
    """Why there is nothing to show in ``results_dir`` (missing, not a folder, or no run directory), or None."""
    if not results_dir.exists():
        return (
            f"The results folder {code(results_dir)} does not exist. Run `contextdelta run-benchmark` to create a run, "
            "or start the dashboard with `--results-dir DIR`."
        )
    if not results_dir.is_dir():
        return f"{code(results_dir)} is not a folder of run directories."
    if (results_dir / MANIFEST).is_file():  # the path run-benchmark prints last: one run, not the folder of runs
        parent = results_dir.resolve().parent
        return (
            f"{code(results_dir)} is a run directory, not a folder of run directories: start the dashboard on the "
            f"folder that holds it, {code(f'contextdelta dashboard --results-dir {parent}')}, and pick "
            f"{code(results_dir.name)} in the sidebar."
        )
    if not run_directories(results_dir):
        return (
            f"No run directories in {code(results_dir)} yet. Run `contextdelta run-benchmark` (its last line is the "
            "new run directory), or point the dashboard elsewhere with `--results-dir DIR`."
        )
    return None


@dataclass(frozen=True)
class RunSummary:
    """One row of the Runs page: what a run directory's manifest says, or why it cannot be read."""

    run_group_id: str
    path: Path
    status: str
    model: str | None = None
    created_at: str | None = None
    finished_at: str | None = None
    suite_sha256: str | None = None
    strategies: tuple[str, ...] = ()
    protection_modes: tuple[str, ...] = ()
    tasks: int | None = None
    repeats: int | None = None
    planned: int | None = None
    finished: int | None = None
    succeeded: int | None = None
    failed_trials: int | None = None
    error: str | None = None
    part: str = ""
    """What part of a plan the directory holds: ``shard I/N`` (``--shard``, its counts are the shard's),
    ``merged from N shards``, or empty for a whole run."""

    @property
    def name(self) -> str:
        """The folder's name: the RUN_ID every command takes, and what the dashboard picks a run by (two folders can
        hold the same run group, a copy of a run directory for one)."""
        return self.path.name

    @property
    def label(self) -> str:
        """The run as the pickers name it: its folder, and the run group its manifest names where that differs."""
        return self.name if self.run_group_id == self.name else f"{self.name} (run group {self.run_group_id})"

    @property
    def readable(self) -> bool:
        """Whether the manifest could be read."""
        return self.error is None

    @property
    def in_progress(self) -> bool:
        """The manifest says the run is still going (or was killed without finishing its manifest)."""
        return self.status == RunStatus.RUNNING.value

    @property
    def success_rate(self) -> float | None:
        """Succeeded / finished episodes; None while running, for a malformed run, or with no finished episode."""
        if self.succeeded is None or not self.finished:
            return None
        return self.succeeded / self.finished


def _complete_lines(path: Path) -> int:
    """Complete lines in a JSONL file (a torn last line is not counted); 0 when it is missing."""
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def summarize_run(path: Path) -> RunSummary:
    """The Runs-page row of one run directory. Never raises: a malformed manifest becomes ``status=malformed``
    with the error. The manifest's counts are written at the start and the end of a run, so while a run is in
    progress the finished count is that of ``raw_runs.jsonl``'s complete lines and success is left unknown."""
    try:
        manifest = RunDirectory(path).read_manifest()
    except (RunDirectoryError, OSError, ValueError) as exc:
        return RunSummary(run_group_id=path.name, path=path, status=MALFORMED, error=str(exc))
    counts = manifest.counts
    running = manifest.status is RunStatus.RUNNING
    planned, finished, failed = counts.planned, counts.finished, counts.failed
    succeeded: int | None = counts.succeeded
    if manifest.controls and not running:  # the manifest's counts include the control episodes
        main = _main_matrix_counts(path)
        if main is not None:  # every control condition repeats the whole main matrix
            planned = counts.planned // (1 + len(manifest.controls))
            finished, succeeded, failed = main
        else:  # written before 0.6.0: the counts stay whole, and success (which would pool them) unknown
            succeeded = None
    return RunSummary(
        run_group_id=manifest.run_group_id,
        path=path,
        status=manifest.status.value,
        model=manifest.provider.model,
        created_at=manifest.created_at,
        finished_at=manifest.finished_at,
        suite_sha256=manifest.hashes.suite_sha256,
        strategies=tuple(manifest.strategies),
        protection_modes=tuple(manifest.protection_modes),
        tasks=len(manifest.tasks),
        repeats=manifest.repeats,
        planned=planned,
        finished=_complete_lines(path / RAW_RUNS) if running else finished,
        succeeded=None if running else succeeded,
        failed_trials=None if running else failed,
        part=_part(manifest),
    )


def _part(manifest: RunManifest) -> str:
    if manifest.shard is not None and manifest.shard.count > 1:
        return f"shard {manifest.shard.index}/{manifest.shard.count}"
    if manifest.merged_from:
        return f"merged from {plural(len(manifest.merged_from), 'shard')}"
    return ""


def _main_matrix_counts(path: Path) -> tuple[int, int, int] | None:
    """(finished, succeeded, failed trials) of the main matrix of a run with control episodes, from its
    ``aggregate_metrics.json``; None when that file does not say (unreadable, or written before 0.6.0)."""
    try:
        counts = parse_json((path / AGGREGATE_METRICS).read_text(encoding="utf-8"))["episodes"]["main_matrix"]
        return int(counts["finished"]), int(counts["succeeded"]), int(counts["failed_trials"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_runs(results_dir: Path) -> list[RunSummary]:
    """Every run directory under ``results_dir``, newest first (by creation time, then name)."""
    summaries = [summarize_run(p) for p in run_directories(results_dir)]
    return sorted(summaries, key=lambda s: (s.created_at or "", s.run_group_id, s.name), reverse=True)


def shared_run_groups(summaries: Iterable[RunSummary]) -> dict[str, list[str]]:
    """The run groups that more than one folder holds (a copied run directory), with those folders' names."""
    folders: dict[str, list[str]] = {}
    for s in summaries:
        if s.readable:
            folders.setdefault(s.run_group_id, []).append(s.name)
    return {group: sorted(names) for group, names in sorted(folders.items()) if len(names) > 1}


def runs_rows(summaries: Iterable[RunSummary]) -> list[dict[str, Any]]:
    """The Runs page table: one row per readable run (success in percent, rounded half up as the report prints)."""
    from contextdelta.stats import fixed  # numpy only once the page has rows to show

    rows = []
    for s in summaries:
        if not s.readable:
            continue
        rows.append(
            {
                "run group": s.run_group_id,
                "model": s.model,
                "created (UTC)": (s.created_at or "").replace("T", " ").removesuffix("Z"),
                "status": s.status,
                "part": s.part,
                "episodes": f"{s.finished} / {s.planned}",
                "success": None if s.success_rate is None else float(fixed(s.success_rate, 1, scale=100.0)),
                "failed trials": s.failed_trials,
                "strategies": ", ".join(s.strategies),
                "protection modes": ", ".join(s.protection_modes),
                "tasks": s.tasks,
                "repeats": s.repeats,
                "suite hash": (s.suite_sha256 or "")[:12],
                "folder": s.name,
            }
        )
    return rows


# ---- one run --------------------------------------------------------------------------------------------------


OUTCOMES = ("success", "fail", "failed trial")
"""An episode's outcome: it succeeded, it failed (a verdict against it), or it is a failed trial (no verdict)."""
NO_FAILURE = "none"
"""The failure-mode filter value of an episode that succeeded."""


@dataclass(frozen=True)
class EpisodeSummary:
    """One episode of a run: the Episodes page's row and the episode picker's entry."""

    run_id: str
    task_id: str
    world: str
    hazard: str
    strategy: str
    protection_mode: str
    repeat: int
    success: bool
    failed_trial: bool
    termination: str
    steps: int
    hidden_mutations: int
    failure_mode: str | None
    attempts: int = 1
    """Attempts in ``raw_runs.jsonl`` (above 1: failed trials re-run by ``--retry-failed``); this is the latest."""
    control: str | None = None

    @property
    def outcome(self) -> str:
        """One of `OUTCOMES`."""
        return "success" if self.success else ("failed trial" if self.failed_trial else "fail")

    @property
    def failure(self) -> str:
        """The failure mode, `NO_FAILURE` for a success (what the failure-mode filter tests)."""
        return self.failure_mode or NO_FAILURE

    @property
    def label(self) -> str:
        """``run_id: success`` or ``run_id: FAIL (mode)``, plus the number of hidden mutations and of attempts."""
        outcome = "success" if self.success else f"FAIL ({self.failure_mode or 'failed'})"
        mutations = f", {plural(self.hidden_mutations, 'hidden mutation')}" if self.hidden_mutations else ""
        attempts = f", attempt {self.attempts} of {self.attempts}" if self.attempts > 1 else ""
        return f"{self.run_id}: {outcome}{mutations}{attempts}"

    def row(self) -> dict[str, Any]:
        """The Episodes page's table row."""
        return {
            "episode": self.run_id,
            "outcome": self.outcome,
            "failure mode": self.failure_mode or "",
            "task": self.task_id,
            "strategy": self.strategy,
            "protection mode": self.protection_mode,
            "repeat": self.repeat,
            "steps": self.steps,
            "hidden mutations": self.hidden_mutations,
            "termination": self.termination,
            "world": self.world,
            "hazard": self.hazard,
            "control": self.control or "",
            "attempts": self.attempts,
        }


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of an episode on the Episode page: the current one, or one a re-run superseded."""

    attempt: int
    current: bool
    started_at: str
    finished_at: str
    termination: str
    outcome: str
    """success, FAIL (a verdict that is not a success) or failed trial."""
    steps: int
    error: str | None

    def row(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "status": "current" if self.current else "superseded",
            "started": self.started_at,
            "finished": self.finished_at,
            "termination": self.termination,
            "outcome": self.outcome,
            "steps": self.steps,
            "error": visible(self.error or ""),  # a provider's text: no control character or lone surrogate
        }


def attempt_rows(attempts: Sequence[EpisodeRecord]) -> list[AttemptRow]:
    """Every attempt of one episode (in attempt order), the highest marked current."""
    ordered = sorted(attempts, key=lambda r: r.attempt)
    last = ordered[-1].attempt if ordered else None
    return [
        AttemptRow(
            attempt=r.attempt,
            current=r.attempt == last,
            started_at=r.started_at,
            finished_at=r.finished_at,
            termination=r.trace.termination.value,
            outcome="failed trial" if r.failed else ("success" if r.verdict.success else "FAIL"),
            steps=r.trace.step_count,
            error=r.trace.error,
        )
        for r in ordered
    ]


@dataclass(frozen=True)
class FailureRow:
    """One failed episode in the failure atlas, flattened from its `Attribution`."""

    run_id: str
    failure_mode: str
    world: str
    task_id: str
    hazard: str
    strategy: str
    protection_mode: str
    repeat: int
    termination: str
    failed_graders: tuple[str, ...]
    action: str
    relied_on: str
    mutation: str
    explanation: str
    control: str | None = None
    """The control condition (``--controls``, e.g. no_mutation) of a control episode; None in the main matrix."""

    @property
    def condition(self) -> str:
        """``strategy / mode``, with ``(no_mutation control)`` for a control episode: the report counts the main
        matrix's failures per condition, and a control episode's failure is none of them."""
        label = f"{self.strategy} / {self.protection_mode}"
        return f"{label} ({self.control} control)" if self.control else label

    def row(self) -> dict[str, Any]:
        """The atlas table row."""
        return {
            "episode": self.run_id,
            "failure mode": self.failure_mode,
            "control": self.control or "",
            "world": self.world,
            "task": self.task_id,
            "hazard": self.hazard,
            "strategy": self.strategy,
            "protection mode": self.protection_mode,
            "repeat": self.repeat,
            "failed graders": ", ".join(self.failed_graders),
            "decisive action": self.action,
            "relied on": self.relied_on,
            "hidden mutation": self.mutation,
            "termination": self.termination,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class RunData:
    """Everything the pages show about one run directory (loaded once per change of its files, shared read-only)."""

    path: Path
    manifest: RunManifest
    metrics: AggregateMetrics
    metrics_source: str
    episodes: tuple[EpisodeSummary, ...]
    failures: tuple[FailureRow, ...]
    attributions: Mapping[str, Attribution] = field(default_factory=dict)
    search: SearchIndex = field(default_factory=dict)
    """The searchable text of every episode (`episode_search_fields`), by run id."""
    changed: tuple[str, ...] = ()
    """What the seal of the run finds changed since its run (`contextdelta.verify.seal_problems`); the
    numbers are then recomputed from the episodes as they now stand, never read from the changed files."""

    @property
    def run_group_id(self) -> str:
        return self.manifest.run_group_id

    @property
    def name(self) -> str:
        """The folder's name, which the pages' links and ``?run=`` name the run by (`RunSummary.name`)."""
        return self.path.name

    @property
    def in_progress(self) -> bool:
        return self.manifest.status is RunStatus.RUNNING

    @property
    def partial(self) -> str | None:
        """`partial_notice` of this run (None for a complete, unsharded run)."""
        return partial_notice(self.manifest, len(self.episodes), self.name)


def partial_notice(manifest: RunManifest, finished: int, name: str) -> str | None:
    """Markdown saying that a run directory holds part of what its run planned: a run still in progress, an
    incomplete run (stopped early: its reason and the command that finishes it), a complete run whose directory
    lost episodes, or one shard of a plan (``--shard I/N``, whose status says complete); None for a whole run.
    ``finished``: the episodes it holds; ``name``: its folder. The command-line readers say the same on stderr."""
    run = code(manifest.run_group_id)
    planned = manifest.counts.planned
    finishing = code(f"contextdelta {resume_command(manifest, name)}")
    if manifest.status is RunStatus.RUNNING:
        return (
            f"Run {run} is still in progress: {finished} of {planned} episodes are finished. The figures below cover "
            "those episodes only; reload the page for newer ones. A run whose session was killed stays in progress "
            f"too: if no session is running it, {finishing} finishes it."
        )
    if manifest.status is RunStatus.INCOMPLETE:
        reason = f" ({code(manifest.stop_reason)})" if manifest.stop_reason else ""
        return (
            f"Run {run} is incomplete: it stopped early{reason} with {finished} of {planned} planned episodes "
            f"finished. The figures below cover those episodes only; {finishing} finishes it."
        )
    if finished < manifest.counts.finished:  # a complete run's directory holds fewer episodes than it finished
        return (
            f"Run {run} is complete, but its directory holds {finished} of the {manifest.counts.finished} episodes "
            "its run finished: episodes were lost or cut after the run. The figures below cover those left; "
            f"{code(f'contextdelta verify {name}')} names what changed."
        )
    shard = manifest.shard
    if shard is not None and shard.count > 1:
        return (
            f"Run {run} is shard {shard.index}/{shard.count} of its plan ({planned} of the plan's episodes): the "
            "figures below cover this part only, and the paired comparisons leave out each pair whose other episode "
            f"is in another shard; {code('contextdelta merge')} joins the shards into the run group."
        )
    return None


def _observation_text(o: ObservationRef | None) -> str:
    if o is None:
        return "nothing: no message sent at that step showed the resource"
    where = f"step {o.step}, call #{o.seq} {o.tool}" if o.seq is not None else "a summary/digest claim"
    return f"{o.resource} v{o.version} ({where}, {o.via.value})"


def failure_row(record: EpisodeRecord, attribution: Attribution) -> FailureRow:
    """The atlas row of one failed episode."""
    action = ""
    if attribution.action is not None:
        a = attribution.action
        action = f"step {a.step} #{a.seq} {a.tool}" + (f" on {a.resource}" if a.resource else "") + f" ({a.outcome})"
        if a.flags:
            action += f": {', '.join(a.flags)}"
    mutation = ""
    if attribution.mutation is not None:
        m = attribution.mutation
        mutation = (
            f"{m.mutation_id} by {m.actor} at step {m.step}: {m.resource} {version_text(m.version_before)} -> "
            f"{version_text(m.version_after)}"
        )
    return FailureRow(
        run_id=record.run_id,
        failure_mode=attribution.mode.value,
        world=record.world,
        task_id=record.task_id,
        hazard=record.hazard,
        strategy=record.strategy,
        protection_mode=record.protection_mode,
        repeat=record.repeat,
        termination=attribution.termination,
        failed_graders=() if attribution.failed_trial else tuple(attribution.failed_graders),
        action=action,
        relied_on=_observation_text(attribution.relied_on) if attribution.action is not None else "",
        mutation=mutation,
        explanation=attribution.explanation,
        control=record.control,
    )


def _recorded_metrics(directory: RunDirectory, manifest: RunManifest, finished: int) -> AggregateMetrics | None:
    """``aggregate_metrics.json`` when it is readable and describes exactly these episodes; else None."""
    from contextdelta.report import AggregateMetrics

    try:
        metrics = AggregateMetrics.model_validate_json(directory.read_text(AGGREGATE_METRICS))
    except (OSError, ValueError):
        return None
    if (
        metrics.run_group_id != manifest.run_group_id
        or metrics.status != manifest.status.value
        or metrics.episodes.finished != finished
    ):
        return None
    return metrics


def _seal_problems(path: Path) -> tuple[str, ...]:
    from contextdelta.verify import seal_problems

    try:
        return tuple(seal_problems(path, derived_files=True, unsealed_ok=True))
    except (RunDirectoryError, OSError, ValueError) as exc:
        return (str(exc),)


_IDENTIFIERS = ("run_id", "task_id", "strategy", "protection_mode", "world", "hazard")
"""The fields of an episode the pages offer as choices and put into links."""


def _check_identifiers(path: Path, records: Sequence[EpisodeRecord]) -> None:
    """Refuse a record whose identifier holds a lone surrogate: no page could offer it as a choice or link it."""
    for record in records:
        for name in _IDENTIFIERS:
            value = str(getattr(record, name))
            if not _utf8(value):
                raise RunLoadError(
                    f"{path / RAW_RUNS}: episode '{visible(value)}' has a {name} with a lone UTF-16 surrogate (a "
                    "\\uD800-\\uDFFF escape without its pair), which the runner never writes: the file was edited "
                    "or damaged after its run"
                )


def load_run(path: Path) -> RunData:
    """Read a run directory: manifest, episodes, metrics and the attribution of every failure.

    A run in progress is loaded as far as it got (a torn last line of ``raw_runs.jsonl`` is ignored, never
    repaired: the runner may still be writing it) and its metrics are recomputed from the episodes so far.

    Raises:
        RunLoadError: the directory is malformed (missing or invalid manifest, a bad ``raw_runs.jsonl`` line).
    """
    from contextdelta.report import build_report, recorded_params
    from contextdelta.stats import DEFAULT_PARAMS

    directory = RunDirectory(path)
    try:
        manifest = directory.read_manifest()
        every = directory.read_attempts()
        records = sorted(every.current, key=lambda r: r.run_id)
    except (RunDirectoryError, OSError, ValueError) as exc:
        raise RunLoadError(str(exc)) from exc
    _check_identifiers(path, records)
    # a run from before receipts has no seal to check; one whose seal was removed is named as changed; a run still
    # running (or killed) is checked as far as it is sealed: what a kill leaves is no change
    changed = _seal_problems(path)
    try:
        running = manifest.status is RunStatus.RUNNING
        recorded = None if running or changed else _recorded_metrics(directory, manifest, len(records))
        if recorded is not None:
            metrics, source = recorded, AGGREGATE_METRICS
            attributions = attribute_run(records)
        else:
            report = build_report(manifest, records, recorded_params(directory) or DEFAULT_PARAMS, every.superseded)
            metrics, attributions = report.metrics, report.attributions
            source = f"recomputed from {RAW_RUNS} ({len(records)} episodes)"
    except (ValueError, KeyError, ValidationError) as exc:
        raise RunLoadError(f"{path}: the episodes cannot be analysed: {exc}") from exc
    by_run = {a.run_id: a for a in attributions}
    episodes = tuple(
        EpisodeSummary(
            run_id=r.run_id,
            task_id=r.task_id,
            world=r.world,
            hazard=r.hazard,
            strategy=r.strategy,
            protection_mode=r.protection_mode,
            repeat=r.repeat,
            success=r.success and not r.failed,
            failed_trial=r.failed,
            termination=r.trace.termination.value,
            steps=r.trace.step_count,
            hidden_mutations=len(r.trace.mutation_events()),
            failure_mode=by_run[r.run_id].mode.value if r.run_id in by_run else None,
            attempts=len(every.by_episode.get(r.run_id, ())) or 1,
            control=r.control,
        )
        for r in records
    )
    failures = tuple(failure_row(r, by_run[r.run_id]) for r in records if r.run_id in by_run)
    return RunData(
        path=path,
        manifest=manifest,
        metrics=metrics,
        metrics_source=source,
        episodes=episodes,
        failures=failures,
        attributions=by_run,
        search={r.run_id: episode_search_fields(r) for r in records},
        changed=changed,
    )


def load_episode(path: Path, run_id: str, attempt: int | None = None) -> EpisodeRecord:
    """One episode of a run directory (its current record, or the given ``attempt``), validating only its lines of
    ``raw_runs.jsonl``.

    Raises:
        RunLoadError: the file is missing or malformed, or has no episode ``run_id`` (or no such attempt).
    """
    try:
        return RunDirectory(path).read_episode(run_id, attempt)
    except RunDirectoryError as exc:
        raise RunLoadError(str(exc)) from exc


def load_attempts(path: Path, run_id: str) -> list[AttemptRow]:
    """Every attempt of one episode (the current one and those a ``--retry-failed`` re-run superseded).

    Raises:
        RunLoadError: the file is missing or malformed.
    """
    try:
        return attempt_rows(RunDirectory(path).read_episode_attempts(run_id))
    except RunDirectoryError as exc:
        raise RunLoadError(str(exc)) from exc


def default_episode(episodes: Sequence[EpisodeSummary]) -> EpisodeSummary | None:
    """The episode the Episode page opens on without a choice: the first failure with a hidden mutation, else
    the first failure, else the first episode."""
    for wanted in (
        lambda e: not e.success and e.hidden_mutations > 0,
        lambda e: not e.success,
        lambda e: True,
    ):
        for episode in episodes:
            if wanted(episode):
                return episode
    return None


# ---- filters: the failure atlas and the episode list -----------------------------------------------------------


@dataclass(frozen=True)
class FilterField:
    """One filter: its query parameter, the row attribute it tests (`FailureRow`, `EpisodeSummary`), its label."""

    param: str
    attribute: str
    label: str


ATLAS_FILTERS: tuple[FilterField, ...] = (
    FilterField("mode", "failure_mode", "Failure mode"),
    FilterField("world", "world", "World"),
    FilterField("strategy", "strategy", "Strategy"),
    FilterField("protection", "protection_mode", "Protection mode"),
    FilterField("task", "task_id", "Task"),
    FilterField("hazard", "hazard", "Hazard"),
)
"""The atlas filters in page order; ``param`` is the name in the page's URL (``?mode=a&mode=b&task=t``)."""

EPISODE_FILTERS: tuple[FilterField, ...] = (
    FilterField("strategy", "strategy", "Strategy"),
    FilterField("protection", "protection_mode", "Protection mode"),
    FilterField("outcome", "outcome", "Outcome"),
    FilterField("mode", "failure", "Failure mode"),
    FilterField("hazard", "hazard", "Hazard"),
    FilterField("world", "world", "World"),
    FilterField("task", "task_id", "Task"),
)
"""The Episodes page's filters over `EpisodeSummary` rows, in page order (same parameter names as the atlas)."""

Row = TypeVar("Row")

_MODE_ORDER = {m.value: i for i, m in enumerate(MODE_PRECEDENCE)} | {NO_FAILURE: len(MODE_PRECEDENCE)}
_OUTCOME_ORDER = {o: i for i, o in enumerate(OUTCOMES)}


@dataclass(frozen=True)
class RowFilter:
    """Selected values per filter parameter of ``fields``; a parameter with no value does not filter."""

    selected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fields: tuple[FilterField, ...] = ATLAS_FILTERS

    def values(self, param: str) -> tuple[str, ...]:
        return self.selected.get(param, ())

    def matches(self, row: object) -> bool:
        """Whether ``row`` has one of the selected values of every active filter."""
        return all(
            str(getattr(row, f.attribute)) in self.selected[f.param] for f in self.fields if self.selected.get(f.param)
        )

    @property
    def active(self) -> bool:
        return any(self.selected.values())


def filter_rows(rows: Iterable[Row], row_filter: RowFilter) -> list[Row]:
    """The rows the filter keeps, in their order."""
    return [row for row in rows if row_filter.matches(row)]


def _ordered(param: str, found: set[str]) -> list[str]:
    order = {"mode": _MODE_ORDER, "outcome": _OUTCOME_ORDER}.get(param)
    if order is None:
        return sorted(found)
    return sorted(found, key=lambda v: (order.get(v, len(order)), v))


def filter_options(rows: Iterable[object], fields: tuple[FilterField, ...] = ATLAS_FILTERS) -> dict[str, list[str]]:
    """The values each filter can take in ``rows``: failure modes in the atlas order (successes last), outcomes in
    `OUTCOMES` order, the rest sorted."""
    rows = list(rows)
    return {f.param: _ordered(f.param, {str(getattr(r, f.attribute)) for r in rows}) for f in fields}


def _split(value: str | Sequence[str]) -> list[str]:
    values = [value] if isinstance(value, str) else list(value)
    return [part.strip() for v in values for part in str(v).split(",") if part.strip()]


def filter_from_query(
    params: Mapping[str, str | Sequence[str]],
    options: Mapping[str, Sequence[str]] | None = None,
    fields: tuple[FilterField, ...] = ATLAS_FILTERS,
) -> tuple[RowFilter, list[str]]:
    """The filter a URL's query parameters describe, and the values it ignored.

    Each parameter may repeat (``?mode=a&mode=b``) or hold a comma-separated list (``?mode=a,b``). With
    ``options``, values the run does not have are dropped and returned as ``param=value`` strings.
    """
    selected: dict[str, tuple[str, ...]] = {}
    ignored: list[str] = []
    for f in fields:
        if f.param not in params:
            continue
        values = list(dict.fromkeys(_split(params[f.param])))
        if options is not None:
            known = set(options.get(f.param, ()))
            ignored += [f"{f.param}={v}" for v in values if v not in known]
            values = [v for v in values if v in known]
        if values:
            selected[f.param] = tuple(values)
    return RowFilter(selected, fields), ignored


def filter_query(row_filter: RowFilter) -> dict[str, list[str]]:
    """The query parameters of a filter (active filters only, in its fields' order)."""
    return {f.param: list(row_filter.values(f.param)) for f in row_filter.fields if row_filter.values(f.param)}


def failure_mode_counts(rows: Iterable[FailureRow]) -> list[dict[str, Any]]:
    """Failures per mode (atlas order) and condition: the atlas's summary table. Control episodes (``--controls``)
    are columns of their own, after the main conditions, so a main condition's column is the report's count."""
    rows = list(rows)
    conditions = [
        r.condition
        for r in sorted(rows, key=lambda r: (r.control is not None, r.control or "", r.strategy, r.protection_mode))
    ]
    conditions = list(dict.fromkeys(conditions))
    out = []
    for mode in MODE_PRECEDENCE:
        mine = [r for r in rows if r.failure_mode == mode.value]
        if not mine:
            continue
        line: dict[str, Any] = {"failure mode": mode.value}
        for condition in conditions:
            line[condition] = sum(1 for r in mine if r.condition == condition)
        line["total"] = len(mine)
        out.append(line)
    return out


# ---- text search over episodes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchField:
    """One searchable piece of an episode: where it is (``step 3 call #4 update_order``) and its text."""

    where: str
    text: str
    folded: str
    """``text`` case-folded: what a search term is looked up in."""


SearchIndex = Mapping[str, tuple[SearchField, ...]]
"""The searchable fields of every episode of a run, by run id."""


def _field(where: str, text: str | None) -> SearchField | None:
    return SearchField(where, text, text.casefold()) if text else None


def episode_search_fields(record: EpisodeRecord) -> tuple[SearchField, ...]:
    """What a text search looks through in one episode: the instruction (the task message; the system prompt, the
    same in every episode, is left out), and per step the model's reply, each tool call (name and arguments) and
    the result it received, the messages the strategy wrote (summaries, digests), then the final answer and the
    episode's error."""
    trace = record.trace
    found = [_field("instruction", message_content(m)) for m in trace.initial_messages if m.get("role") != "system"]
    for step in trace.steps:
        k = step.step
        if step.response is not None:
            found.append(_field(f"step {k} reply", step.response.content))
        events = step.evaluator.tool_events
        for position, call in enumerate(step.tool_calls):
            seq = f"#{events[position].seq} " if position < len(events) else ""
            found.append(_field(f"step {k} call {seq}{call.name}", f"{call.name}({call.arguments})"))
            found.append(_field(f"step {k} result of {seq}{call.name}", call.result))
        for index in step.context.inserted:
            if index < len(step.messages):
                found.append(_field(f"step {k} written by the strategy", message_content(step.messages[index])))
        found.append(_field(f"step {k} error", step.error))
    if trace.final_answer and not (
        trace.steps and trace.steps[-1].response and trace.final_answer == trace.steps[-1].response.content
    ):
        found.append(_field("final answer", trace.final_answer))
    found.append(_field("episode error", trace.error))
    return tuple(f for f in found if f is not None)


def search_terms(query: str) -> list[str]:
    """The case-folded terms of a query: words, or ``"quoted phrases"`` kept whole (an unbalanced quote is read
    as a plain character); repeated terms once."""
    try:
        parts = shlex.split(query)
    except ValueError:
        parts = query.split()
    return list(dict.fromkeys(p.casefold() for p in parts if p.strip()))


@dataclass(frozen=True)
class SearchHit:
    """An episode that holds every term of a query: the first field that holds a term, with a snippet around it,
    and how many fields hold one."""

    run_id: str
    where: str
    snippet: str
    fields: int


def _snippet(found: SearchField, term: str, width: int) -> str:
    """The text around the first occurrence of ``term``: a short lead (a third of ``width``), so the term is in
    view at the start of a table cell, and ``width`` characters after it."""
    at = found.folded.find(term)
    text = found.text if len(found.text) == len(found.folded) else found.folded
    start, end = max(0, at - width // 3), min(len(text), at + len(term) + width)
    inner = visible(" ".join(text[start:end].split()))  # a table cell: no control character or lone surrogate
    return ("…" if start > 0 else "") + inner + ("…" if end < len(text) else "")


def search_episodes(
    index: SearchIndex, query: str, run_ids: Iterable[str] | None = None, *, context: int = 80
) -> dict[str, SearchHit]:
    """The episodes (of ``run_ids``, default all, in that order) whose fields together hold every term of
    ``query``, case-insensitively, each with its first matching field and a snippet around the term (``context``
    characters after it, a third of that before); an empty query matches nothing."""
    terms = search_terms(query)
    if not terms:
        return {}
    hits: dict[str, SearchHit] = {}
    for run_id in index if run_ids is None else run_ids:
        fields = index.get(run_id, ())
        if not all(any(t in f.folded for f in fields) for t in terms):
            continue
        matching = [f for f in fields if any(t in f.folded for t in terms)]
        first = matching[0]
        term = next(t for t in terms if t in first.folded)
        hits[run_id] = SearchHit(run_id, first.where, _snippet(first, term, context), len(matching))
    return hits


# ---- two run groups -------------------------------------------------------------------------------------------


def load_comparison(path_a: Path, path_b: Path) -> ComparisonReport:
    """``contextdelta compare`` of two run directories: `contextdelta.report.compare_runs` on their manifests and
    episodes, with its default analysis parameters, exactly as the command computes it.

    Raises:
        RunLoadError: a directory is malformed.
        NotComparable: the runs differ in task set, system prompt or tool schemas (its ``reasons`` say how).
    """
    from contextdelta.report import compare_runs

    loaded = []
    for path in (path_a, path_b):
        directory = RunDirectory(path)
        try:
            loaded.append((directory.read_manifest(), directory.read_episodes()))
        except (RunDirectoryError, OSError, ValueError) as exc:
            raise RunLoadError(str(exc)) from exc
    (manifest_a, records_a), (manifest_b, records_b) = loaded
    return compare_runs(manifest_a, records_a, manifest_b, records_b)
