"""Reports of a run directory (SPEC sections 9 and 10): ``aggregate_metrics.json``, ``benchmark_report.md``,
``failure_atlas.md``, and the paired comparison of two runs.

Everything is computed from the run directory alone (manifest + ``raw_runs.jsonl``), so ``report`` and
``verify`` can rebuild it offline::

    report = build_report(manifest, records)       # attributions + AggregateMetrics
    report.markdown, report.atlas, report.metrics_json()
    write_reports(directory, manifest, records)    # rebuild the three files (ReportFiles: as a run recorder)

The metrics pipeline (`aggregate`) reads an `EpisodeTable`; its sections are listed in
``contextdelta/report/_metrics.py``.
"""

from contextdelta.report._atlas import render_episode, render_failure_atlas
from contextdelta.report._build import (
    ReportFiles,
    RunReport,
    build_report,
    params_of,
    recorded_params,
    write_report_files,
    write_reports,
)
from contextdelta.report._compare import (
    ComparisonFamily,
    ComparisonReport,
    ConditionComparison,
    NotComparable,
    compare_runs,
    comparison_table,
    render_comparison,
)
from contextdelta.report._conditions import BASELINE_STRATEGY
from contextdelta.report._format import (
    NO_BLOCKED_WRITE,
    counted,
    crossing_text,
    holm_pvalue,
    num,
    pct,
    percent,
    plural,
    pp,
    primary_pvalue,
    pvalue,
    slope_text,
)
from contextdelta.report._markdown import FailedTrial, RunFacts, render_report
from contextdelta.report._metrics import aggregate, compute_metrics, metrics_json
from contextdelta.report._models import (
    METRICS_SCHEMA_VERSION,
    SHARD_WARNING,
    AggregateMetrics,
    AnalysisInfo,
    Breakdown,
    BreakdownCell,
    Comparison,
    ConditionKey,
    ConditionMetrics,
    DoseResponse,
    EpisodeCounts,
    HorizonCurve,
    HorizonPoint,
    ReportWarning,
    ResearchQuestion,
    RetriedEpisode,
    RetrySection,
    StoryUnits,
    TokenReduction,
    TokenTotal,
)
from contextdelta.report._power import (
    PlannedComparison,
    PowerPlan,
    no_comparison_message,
    no_data_message,
    plan_run,
    render_power_plan,
)
from contextdelta.report._questions import RQ_QUESTIONS, planned_questions
from contextdelta.report._table import (
    BREAKDOWN_METRICS,
    DOSE_METRICS,
    FAILURE_MODE_ROWS,
    FLIP_METRICS,
    MEAN_METRICS,
    METRIC_DEFINITIONS,
    RATE_METRICS,
    VERDICT_METRICS,
    EpisodeTable,
    episode_values,
)

__all__ = [
    "BASELINE_STRATEGY",
    "BREAKDOWN_METRICS",
    "DOSE_METRICS",
    "FAILURE_MODE_ROWS",
    "FLIP_METRICS",
    "MEAN_METRICS",
    "METRICS_SCHEMA_VERSION",
    "METRIC_DEFINITIONS",
    "NO_BLOCKED_WRITE",
    "RATE_METRICS",
    "RQ_QUESTIONS",
    "SHARD_WARNING",
    "VERDICT_METRICS",
    "AggregateMetrics",
    "AnalysisInfo",
    "Breakdown",
    "BreakdownCell",
    "Comparison",
    "ComparisonFamily",
    "ComparisonReport",
    "ConditionComparison",
    "ConditionKey",
    "ConditionMetrics",
    "DoseResponse",
    "EpisodeCounts",
    "EpisodeTable",
    "FailedTrial",
    "HorizonCurve",
    "HorizonPoint",
    "NotComparable",
    "PlannedComparison",
    "PowerPlan",
    "ReportFiles",
    "ReportWarning",
    "ResearchQuestion",
    "RetriedEpisode",
    "RetrySection",
    "RunFacts",
    "RunReport",
    "StoryUnits",
    "TokenReduction",
    "TokenTotal",
    "aggregate",
    "build_report",
    "compare_runs",
    "comparison_table",
    "compute_metrics",
    "counted",
    "crossing_text",
    "episode_values",
    "holm_pvalue",
    "metrics_json",
    "no_comparison_message",
    "no_data_message",
    "num",
    "params_of",
    "pct",
    "percent",
    "plan_run",
    "planned_questions",
    "plural",
    "pp",
    "primary_pvalue",
    "pvalue",
    "recorded_params",
    "render_comparison",
    "render_episode",
    "render_failure_atlas",
    "render_power_plan",
    "render_report",
    "slope_text",
    "write_report_files",
    "write_reports",
]
