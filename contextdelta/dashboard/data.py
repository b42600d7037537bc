"""The dashboard's data layer: loading run directories, filtering the failure atlas, and shaping the report's
numbers into table rows. Pure functions of the files on disk (no Streamlit here), unit-tested directly, so the
page scripts stay thin.

Nothing is recomputed that the report already computes: condition rates, intervals, pass^k, breakdowns and the
task-level comparisons come from the run's ``aggregate_metrics.json`` (or, when that file is missing, stale or
unreadable, from `contextdelta.report.build_report` on the recorded episodes), and failure modes from
`contextdelta.attribution.attribute_run`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contextdelta.attribution import MODE_PRECEDENCE, Attribution, ObservationRef, attribute_run
from contextdelta.report import (
    AggregateMetrics,
    build_report,
    counted,
    num,
    pct,
    pp,
    primary_pvalue,
    pvalue,
    recorded_params,
)
from contextdelta.rundir import (
    AGGREGATE_METRICS,
    MANIFEST,
    RAW_RUNS,
    EpisodeRecord,
    RunDirectory,
    RunDirectoryError,
    RunManifest,
    RunStatus,
)
from contextdelta.stats import DEFAULT_PARAMS

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


def run_directories(results_dir: Path) -> list[Path]:
    """Every candidate run directory under ``results_dir`` (its sub-folders, hidden ones left out), by name."""
    try:
        entries = list(results_dir.iterdir())
    except OSError:
        return []
    return sorted((p for p in entries if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def results_signature(results_dir: Path) -> tuple[Signature, ...]:
    """The signatures of every run directory under ``results_dir``: the cache key of the run list."""
    return tuple(run_signature(p) for p in run_directories(results_dir))


def results_dir_problem(results_dir: Path) -> str | None:
    """Why there is nothing to show in ``results_dir`` (missing, not a folder, or no run directory), or None."""
    if not results_dir.exists():
        return (
            f"The results folder `{results_dir}` does not exist. Run `contextdelta run-benchmark` to create a run, "
            "or start the dashboard with `--results-dir DIR`."
        )
    if not results_dir.is_dir():
        return f"`{results_dir}` is not a folder of run directories."
    if not run_directories(results_dir):
        return (
            f"No run directories in `{results_dir}` yet. Run `contextdelta run-benchmark` (its last line is the new "
            "run directory), or point the dashboard elsewhere with `--results-dir DIR`."
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
        planned=counts.planned,
        finished=_complete_lines(path / RAW_RUNS) if running else counts.finished,
        succeeded=None if running else counts.succeeded,
        failed_trials=None if running else counts.failed,
    )


def list_runs(results_dir: Path) -> list[RunSummary]:
    """Every run directory under ``results_dir``, newest first (by creation time, then name)."""
    summaries = [summarize_run(p) for p in run_directories(results_dir)]
    return sorted(summaries, key=lambda s: (s.created_at or "", s.run_group_id), reverse=True)


def runs_rows(summaries: Iterable[RunSummary]) -> list[dict[str, Any]]:
    """The Runs page table: one row per readable run."""
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
                "episodes": f"{s.finished} / {s.planned}",
                "success": None if s.success_rate is None else round(100 * s.success_rate, 1),
                "failed trials": s.failed_trials,
                "strategies": ", ".join(s.strategies),
                "protection modes": ", ".join(s.protection_modes),
                "tasks": s.tasks,
                "repeats": s.repeats,
                "suite hash": (s.suite_sha256 or "")[:12],
            }
        )
    return rows


# ---- one run --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeSummary:
    """One episode in the episode picker."""

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

    @property
    def label(self) -> str:
        """``run_id: success`` or ``run_id: FAIL (mode)``, plus the number of hidden mutations and of attempts."""
        outcome = "success" if self.success else f"FAIL ({self.failure_mode or 'failed'})"
        mutations = f", {self.hidden_mutations} hidden mutation(s)" if self.hidden_mutations else ""
        attempts = f", attempt {self.attempts} of {self.attempts}" if self.attempts > 1 else ""
        return f"{self.run_id}: {outcome}{mutations}{attempts}"


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
            "error": self.error or "",
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

    def row(self) -> dict[str, Any]:
        """The atlas table row."""
        return {
            "episode": self.run_id,
            "failure mode": self.failure_mode,
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
    """Everything the Conditions and Failure atlas pages show about one run directory."""

    path: Path
    manifest: RunManifest
    metrics: AggregateMetrics
    metrics_source: str
    episodes: tuple[EpisodeSummary, ...]
    failures: tuple[FailureRow, ...]
    attributions: Mapping[str, Attribution] = field(default_factory=dict)

    @property
    def run_group_id(self) -> str:
        return self.manifest.run_group_id

    @property
    def in_progress(self) -> bool:
        return self.manifest.status is RunStatus.RUNNING


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
            f"{m.mutation_id} by {m.actor} at step {m.step}: {m.resource} v{m.version_before} -> v{m.version_after}"
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
        failed_graders=tuple(attribution.failed_graders),
        action=action,
        relied_on=_observation_text(attribution.relied_on) if attribution.action is not None else "",
        mutation=mutation,
        explanation=attribution.explanation,
    )


def _recorded_metrics(directory: RunDirectory, manifest: RunManifest, finished: int) -> AggregateMetrics | None:
    """``aggregate_metrics.json`` when it is readable and describes exactly these episodes; else None."""
    try:
        metrics = AggregateMetrics.model_validate_json(directory.file(AGGREGATE_METRICS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        metrics.run_group_id != manifest.run_group_id
        or metrics.status != manifest.status.value
        or metrics.episodes.finished != finished
    ):
        return None
    return metrics


def load_run(path: Path) -> RunData:
    """Read a run directory: manifest, episodes, metrics and the attribution of every failure.

    A run in progress is loaded as far as it got (a torn last line of ``raw_runs.jsonl`` is ignored, never
    repaired: the runner may still be writing it) and its metrics are recomputed from the episodes so far.

    Raises:
        RunLoadError: the directory is malformed (missing or invalid manifest, a bad ``raw_runs.jsonl`` line).
    """
    directory = RunDirectory(path)
    try:
        manifest = directory.read_manifest()
        every = directory.read_attempts()
        records = sorted(every.current, key=lambda r: r.run_id)
    except (RunDirectoryError, OSError, ValueError) as exc:
        raise RunLoadError(str(exc)) from exc
    try:
        running = manifest.status is RunStatus.RUNNING
        recorded = None if running else _recorded_metrics(directory, manifest, len(records))
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


# ---- the failure atlas filter ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class FilterField:
    """One atlas filter: its query parameter, the `FailureRow` attribute it tests, and its label."""

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

_MODE_ORDER = {m.value: i for i, m in enumerate(MODE_PRECEDENCE)}


@dataclass(frozen=True)
class AtlasFilter:
    """Selected values per filter parameter; a parameter with no value does not filter."""

    selected: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def values(self, param: str) -> tuple[str, ...]:
        return self.selected.get(param, ())

    def matches(self, row: FailureRow) -> bool:
        """Whether ``row`` has one of the selected values of every active filter."""
        return all(
            str(getattr(row, f.attribute)) in self.selected[f.param]
            for f in ATLAS_FILTERS
            if self.selected.get(f.param)
        )

    @property
    def active(self) -> bool:
        return any(self.selected.values())


def filter_failures(rows: Iterable[FailureRow], atlas_filter: AtlasFilter) -> list[FailureRow]:
    """The rows the filter keeps, in their order."""
    return [row for row in rows if atlas_filter.matches(row)]


def filter_options(rows: Iterable[FailureRow]) -> dict[str, list[str]]:
    """The values each filter can take in ``rows``: failure modes in the atlas order, the rest sorted."""
    rows = list(rows)
    options: dict[str, list[str]] = {}
    for f in ATLAS_FILTERS:
        found = {str(getattr(r, f.attribute)) for r in rows}
        if f.param == "mode":
            options[f.param] = sorted(found, key=lambda v: (_MODE_ORDER.get(v, len(_MODE_ORDER)), v))
        else:
            options[f.param] = sorted(found)
    return options


def _split(value: str | Sequence[str]) -> list[str]:
    values = [value] if isinstance(value, str) else list(value)
    return [part.strip() for v in values for part in str(v).split(",") if part.strip()]


def filter_from_query(
    params: Mapping[str, str | Sequence[str]], options: Mapping[str, Sequence[str]] | None = None
) -> tuple[AtlasFilter, list[str]]:
    """The filter a URL's query parameters describe, and the values it ignored.

    Each parameter may repeat (``?mode=a&mode=b``) or hold a comma-separated list (``?mode=a,b``). With
    ``options``, values the run does not have are dropped and returned as ``param=value`` strings.
    """
    selected: dict[str, tuple[str, ...]] = {}
    ignored: list[str] = []
    for f in ATLAS_FILTERS:
        if f.param not in params:
            continue
        values = list(dict.fromkeys(_split(params[f.param])))
        if options is not None:
            known = set(options.get(f.param, ()))
            ignored += [f"{f.param}={v}" for v in values if v not in known]
            values = [v for v in values if v in known]
        if values:
            selected[f.param] = tuple(values)
    return AtlasFilter(selected), ignored


def filter_query(atlas_filter: AtlasFilter) -> dict[str, list[str]]:
    """The query parameters of a filter (active filters only, in `ATLAS_FILTERS` order)."""
    return {f.param: list(atlas_filter.values(f.param)) for f in ATLAS_FILTERS if atlas_filter.values(f.param)}


def failure_mode_counts(rows: Iterable[FailureRow]) -> list[dict[str, Any]]:
    """Failures per mode (atlas order) and condition: the atlas's summary table."""
    rows = list(rows)
    conditions = sorted({(r.strategy, r.protection_mode) for r in rows})
    out = []
    for mode in MODE_PRECEDENCE:
        mine = [r for r in rows if r.failure_mode == mode.value]
        if not mine:
            continue
        line: dict[str, Any] = {"failure mode": mode.value}
        for s, p in conditions:
            line[f"{s} / {p}"] = sum(1 for r in mine if (r.strategy, r.protection_mode) == (s, p))
        line["total"] = len(mine)
        out.append(line)
    return out


# ---- the conditions page --------------------------------------------------------------------------------------

CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("success", "success"),
    ("stale_action", "stale action"),
    ("harmful_action", "harmful action"),
)
"""The rates of the Conditions page's chart and matrices: (metric key, label)."""


def rate_points(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """One point per condition and chart metric with its interval (``rate``/``low``/``high`` None: no data)."""
    points = []
    for c in metrics.conditions:
        for key, label in CHART_METRICS:
            e = c.rates[key]
            points.append(
                {
                    "condition": c.condition.label,
                    "strategy": c.condition.strategy,
                    "protection_mode": c.condition.protection_mode,
                    "metric": label,
                    "rate": e.estimate,
                    "low": e.low,
                    "high": e.high,
                    "interval": pct(e),
                    "episodes": e.n_episodes,
                    "tasks": e.n_tasks,
                    "status": e.status.value,
                }
            )
    return points


def rate_matrix(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """The strategy x protection-mode matrix of the `CHART_METRICS` rates: one row per strategy, one column per
    (rate, mode), cells ``"62.5% [40.0%, 80.0%]"`` (``"not run"`` for a condition outside the run)."""
    modes = list(dict.fromkeys(c.condition.protection_mode for c in metrics.conditions))
    strategies = list(dict.fromkeys(c.condition.strategy for c in metrics.conditions))
    by_condition = {(c.condition.strategy, c.condition.protection_mode): c for c in metrics.conditions}
    rows = []
    for s in strategies:
        row: dict[str, Any] = {"strategy": s}
        for key, label in CHART_METRICS:
            for m in modes:
                found = by_condition.get((s, m))
                decimals = metrics.analysis.rate_decimals
                row[f"{label} · {m}"] = pct(found.rates[key], decimals) if found is not None else "not run"
        rows.append(row)
    return rows


def _pass_k_columns(pass_k: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in sorted(pass_k, key=int):
        p = pass_k[key]
        out[f"pass^{key}"] = pct(p.all_pass)
        if int(key) > 1:
            out[f"pass^{key} unbiased"] = pct(p.unbiased)
    return out


def _total(value: float, known: int, unknown: int, digits: int = 0) -> str:
    if not known:
        return "unknown"
    text = f"{value:,.{digits}f}"
    return text + (f" ({unknown} unknown)" if unknown else "")


def condition_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Per condition: episodes, the three rates, pass^k, and token cost (mean per episode and total)."""
    rows = []
    for c in metrics.conditions:
        tokens, cost = c.totals["total_tokens"], c.totals["cost_usd"]
        rows.append(
            {
                "condition": c.condition.label,
                "episodes": c.episodes,
                "tasks": c.tasks,
                "failed trials": c.failed_trials,
                "episodes with a verdict": c.episodes_with_verdict,
                "success": pct(c.rates["success"], metrics.analysis.rate_decimals),
                "stale action": pct(c.rates["stale_action"], metrics.analysis.rate_decimals),
                "harmful action": pct(c.rates["harmful_action"], metrics.analysis.rate_decimals),
                "flip rate (success)": pct(c.flip_rates["success"], metrics.analysis.rate_decimals),
                **_pass_k_columns(c.pass_k),
                "tokens / episode": num(c.means["total_tokens"]),
                "agent tokens / episode": num(c.means["agent_tokens"]),
                "summary tokens / episode": num(c.means["summary_tokens"]),
                "total tokens": _total(tokens.total, tokens.n_known, tokens.n_unknown),
                "cost (USD)": _total(cost.total, cost.n_known, cost.n_unknown, 4),
            }
        )
    return rows


def token_reduction_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Token reduction of each reduced strategy versus full_history, paired (percent of the baseline)."""
    return [
        {
            "condition": t.condition.label,
            "baseline": t.baseline.label,
            "agent tokens saved": pct(t.agent_tokens),
            "agent + summary tokens saved": pct(t.total_tokens),
        }
        for t in metrics.token_reduction
    ]


def comparison_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Every comparison of every research question: the task-level effect and test, the failed-trial pairs, the
    design's detectable difference, and the episode-level 2x2 counts (a description)."""
    d = metrics.analysis.rate_decimals
    rows = []
    for q in metrics.research_questions:
        for c in q.comparisons:
            t, e = c.test, c.episodes
            found = c.detectable.difference
            rows.append(
                {
                    "question": q.id,
                    "comparison": c.name,
                    "metric": c.metric,
                    "rate a": pct(c.rate_a, d),
                    "rate b": pct(c.rate_b, d),
                    "difference a - b (task means)": pp(c.difference, d),
                    "tasks": t.n_tasks,
                    "discordant tasks": t.n_discordant,
                    "a higher": t.n_positive,
                    "b higher": t.n_negative,
                    "p (sign-flip)": primary_pvalue(t),
                    "p (Holm)": pvalue(t.pvalue_holm),
                    "pairs with a failed trial": c.failed_pairs,
                    "p without them (Holm)": pvalue(c.sensitivity.test.pvalue_holm) if c.sensitivity else "-",
                    "detectable (80% power)": "none" if found is None else f"{100 * found:.0f} pp",
                    "episode pairs": e.n_pairs,
                    "both": e.both,
                    "only a": e.only_a,
                    "only b": e.only_b,
                    "neither": e.neither,
                }
            )
    return rows


BREAKDOWN_CHOICES: tuple[tuple[str, str], ...] = CHART_METRICS
"""The rates the breakdown tables offer: (metric key, label)."""


def breakdown_rows(metrics: AggregateMetrics, dimension: str, metric: str) -> list[dict[str, Any]]:
    """One row per hazard (or world): its tasks, then each condition's rate of ``metric`` on those tasks, with its
    counts where they differ from the row's."""
    d = metrics.analysis.rate_decimals
    rows = []
    for b in metrics.breakdowns:
        if b.dimension != dimension:
            continue
        episodes = max((cell.episodes for cell in b.cells), default=0)
        row: dict[str, Any] = {dimension: b.value, "tasks": b.tasks, "episodes per condition": episodes}
        for cell in b.cells:
            row[cell.condition.label] = counted(cell.rates[metric], d, b.tasks, episodes)
        rows.append(row)
    return rows
