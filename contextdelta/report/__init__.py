"""Reports of a run directory (SPEC sections 9 and 10): ``aggregate_metrics.json``, ``benchmark_report.md``,
``failure_atlas.md``, and the paired comparison of two runs.

Everything is computed from the run directory alone (manifest + ``raw_runs.jsonl``), so ``report`` and
``verify`` can rebuild it offline::

    report = build_report(manifest, records)       # attributions + AggregateMetrics
    report.markdown, report.atlas, report.metrics_json()
    write_reports(directory, manifest, records)    # rebuild the three files (ReportFiles: as a run recorder)
"""

from contextdelta.report._atlas import render_episode, render_failure_atlas
from contextdelta.report._build import (
    ReportFiles,
    RunReport,
    build_report,
    recorded_params,
    write_report_files,
    write_reports,
)
from contextdelta.report._compare import ComparisonReport, NotComparable, compare_runs, render_comparison
from contextdelta.report._markdown import render_report
from contextdelta.report._metrics import (
    METRIC_DEFINITIONS,
    AggregateMetrics,
    Comparison,
    ConditionKey,
    ConditionMetrics,
    ResearchQuestion,
    TokenReduction,
    compute_metrics,
    episode_values,
    metrics_json,
)

__all__ = [
    "METRIC_DEFINITIONS",
    "AggregateMetrics",
    "Comparison",
    "ComparisonReport",
    "ConditionKey",
    "ConditionMetrics",
    "NotComparable",
    "ReportFiles",
    "ResearchQuestion",
    "RunReport",
    "TokenReduction",
    "build_report",
    "compare_runs",
    "compute_metrics",
    "episode_values",
    "metrics_json",
    "recorded_params",
    "render_comparison",
    "render_episode",
    "render_failure_atlas",
    "render_report",
    "write_report_files",
    "write_reports",
]
