"""Building and writing the derived report files of a run directory from its manifest and episodes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from contextdelta.attribution import Attribution, attribute_run
from contextdelta.report._atlas import render_failure_atlas
from contextdelta.report._controls import main_records
from contextdelta.report._markdown import RunFacts, render_report, shard_warning
from contextdelta.report._metrics import compute_metrics, metrics_json
from contextdelta.report._models import AggregateMetrics
from contextdelta.rundir import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    FAILURE_ATLAS,
    EpisodeRecord,
    RunDirectory,
    RunEnd,
    RunManifest,
    RunStart,
    atomic_write_json,
    atomic_write_text,
    parse_json,
)
from contextdelta.stats import DEFAULT_PARAMS, AnalysisParams


@dataclass(frozen=True)
class RunReport:
    """Everything the report files of one run are made of."""

    manifest: RunManifest
    records: list[EpisodeRecord]
    attributions: list[Attribution]
    metrics: AggregateMetrics

    @property
    def markdown(self) -> str:
        """``benchmark_report.md``."""
        return render_report(self.manifest, RunFacts.from_records(self.records), self.metrics)

    @property
    def atlas(self) -> str:
        """``failure_atlas.md``."""
        shard = shard_warning(self.metrics)
        return render_failure_atlas(
            self.manifest, len(self.records), self.attributions, None if shard is None else shard.message
        )

    def metrics_json(self) -> dict[str, Any]:
        """``aggregate_metrics.json`` as a JSON value."""
        return metrics_json(self.metrics)


def build_report(
    manifest: RunManifest,
    records: list[EpisodeRecord],
    params: AnalysisParams = DEFAULT_PARAMS,
    superseded: Sequence[EpisodeRecord] = (),
) -> RunReport:
    """Attribute every failure and compute every aggregate of a run (complete or not) from each episode's current
    record; the ``superseded`` attempts of retried failed trials get their own section and count nowhere else."""
    ordered = main_records(sorted(records, key=lambda r: r.run_id))  # control episodes: a section of their own
    attributions = attribute_run(ordered)
    metrics = compute_metrics(manifest, records, params, attributions=attributions, superseded=superseded)
    return RunReport(manifest, ordered, attributions, metrics)


def params_of(analysis: Any) -> AnalysisParams:
    """The analysis parameters in the ``analysis`` object of an ``aggregate_metrics.json`` (fields a file written
    before they existed lacks take their defaults, except ``task_interval``: such a file's intervals are plain
    percentile intervals, ``cluster_interval``: such a file's rate and mean intervals are plain percentile
    intervals, and ``share_interval``: such a file's pass^k and flip-rate intervals are the task bootstrap's).

    Raises:
        ValueError, KeyError, TypeError: when the object does not hold them.
    """
    if not isinstance(analysis, dict):
        raise TypeError(f"analysis must be an object, got {type(analysis).__name__}")
    fields = {name: analysis[name] for name in AnalysisParams.model_fields if name in analysis}
    for required in ("resamples", "seed", "confidence"):
        fields[required] = analysis[required]
    if fields.get("task_interval") is None:  # written before 0.6.0: plain percentile intervals throughout
        fields["task_interval"] = "percentile"
    if fields.get("cluster_interval") is None:  # written by 0.13.0 or earlier: plain percentile rate intervals
        fields["cluster_interval"] = "percentile"
    if fields.get("share_interval") is None:  # written by 0.13.0 or earlier: pass^k and flip rate bootstrapped
        fields["share_interval"] = "bootstrap"
    return AnalysisParams(**fields)


def recorded_params(directory: RunDirectory) -> AnalysisParams | None:
    """The analysis parameters recorded in the run's ``aggregate_metrics.json``; None when absent or unreadable."""
    try:
        value = parse_json(directory.read_text(AGGREGATE_METRICS))
        return params_of(value["analysis"])
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return None


def write_report_files(directory: RunDirectory, report: RunReport) -> None:
    """Write ``aggregate_metrics.json``, ``failure_atlas.md`` and ``benchmark_report.md`` atomically."""
    atomic_write_json(directory.file(AGGREGATE_METRICS), report.metrics_json())
    atomic_write_text(directory.file(FAILURE_ATLAS), report.atlas)
    atomic_write_text(directory.file(BENCHMARK_REPORT), report.markdown)


def write_reports(
    directory: RunDirectory,
    manifest: RunManifest,
    records: list[EpisodeRecord],
    params: AnalysisParams | None = None,
    superseded: Sequence[EpisodeRecord] = (),
) -> None:
    """Rebuild the report files of a run directory (after every run or resume, complete or not), with ``params``,
    else the analysis parameters already recorded there, else the defaults."""
    chosen = params or recorded_params(directory) or DEFAULT_PARAMS
    write_report_files(directory, build_report(manifest, records, chosen, superseded))


class ReportFiles:
    """The report files as a recorder (``contextdelta.rundir.Recorder``): written when the run ends, from the final
    manifest and every episode, before the runner commits that manifest."""

    def __init__(self, directory: RunDirectory, params: AnalysisParams | None = None) -> None:
        self.directory = directory
        self.params = params
        """The analysis parameters (None: those recorded in the directory, else the defaults)."""

    def start(self, run: RunStart) -> None:
        """Nothing to write until the run ends."""

    def episode(self, record: EpisodeRecord) -> None:
        """Nothing to write until the run ends."""

    def finish(self, run: RunEnd) -> None:
        write_reports(self.directory, run.manifest, list(run.records), self.params, run.superseded)
