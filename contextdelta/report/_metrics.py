"""``aggregate_metrics.json``: every number of the report, computed from the run directory's episodes alone.

The pipeline: episodes -> `EpisodeTable` (one definition of each per-episode metric, `episode_values`) ->
`MetricsContext` (conditions, parameters, shared samples) -> one function per section of `AggregateMetrics`:

    conditions_section       per condition: rates, means, totals, pass^k, flip rates, failure modes
    breakdowns_section       rates per hazard and per world
    token_reduction_section  tokens versus full_history on paired episodes
    questions_section        RQ1-RQ3: task-level paired tests, Holm families, sensitivity rows, power
    warnings_section         failed trials that could drive the conclusions
    caching_section          prompt caching: tokens split by the cache, cost with and without it, whether each
                             strategy's saving survives it (runs that recorded their prices)
    retries_section          failed trials re-run by --retry-failed and their superseded attempts (runs with any)
    dose_response_section    success and stale-action rate against the horizon, logistic slopes, the horizon
                             where the stale-action rate first exceeds 10% (runs whose tasks have horizons)

A new section is a function of the context, a field of `AggregateMetrics` and a renderer in `_markdown`.
Episodes are sorted by run id first, so nothing depends on the order of ``raw_runs.jsonl``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from contextdelta.attribution import Attribution, attribute_run
from contextdelta.report._conditions import breakdowns_section, conditions_section, token_reduction_section
from contextdelta.report._context import MetricsContext
from contextdelta.report._controls import controls_section, main_records
from contextdelta.report._costs import caching_section
from contextdelta.report._dose import dose_response_section
from contextdelta.report._format import percent, plural
from contextdelta.report._models import (
    SHARD_WARNING,
    AggregateMetrics,
    AnalysisInfo,
    Breakdown,
    ConditionMetrics,
    DoseResponse,
    EpisodeCounts,
    MainMatrixCounts,
    ReportWarning,
    ResearchQuestion,
    StoryUnits,
)
from contextdelta.report._questions import questions_section
from contextdelta.report._retries import retries_section
from contextdelta.report._table import (
    FAILED_TERMINATION_ORDER,
    FAILURE_MODE_ORDER,
    METRIC_DEFINITIONS,
    EpisodeTable,
)
from contextdelta.rundir import EpisodeRecord, RunManifest
from contextdelta.stats import (
    DEFAULT_PARAMS,
    ENUMERATION_LIMIT,
    MIN_TASKS_FOR_COVERAGE,
    MONTE_CARLO_PATTERNS,
    TARGET_POWER,
    AnalysisParams,
    Estimate,
    analysis_sha256,
    printed_decimals,
)


def shard_warnings(manifest: RunManifest) -> list[ReportWarning]:
    """The warning that the run directory is one shard of a plan (``run-benchmark --shard I/N``, N > 1), not the
    whole plan; none for an unsharded or merged run."""
    shard = manifest.shard
    if shard is None or shard.count == 1:
        return []
    return [
        ReportWarning(
            code=SHARD_WARNING,
            message=f"shard {shard.index}/{shard.count}, not the whole plan: this run directory holds the "
            f"{plural(manifest.counts.planned, 'episode')} of part {shard.index} of {shard.count}, so every number "
            "here covers that part alone, and each paired comparison leaves out the pairs whose other episode is in "
            f"another shard. `contextdelta merge` joins the {shard.count} shard directories into the run group.",
        )
    ]


FAILED_TRIAL_WARNING_SHARE = 0.05
"""Above this share of failed trials among finished episodes the report warns at the top."""


def warnings_section(
    episodes: EpisodeCounts,
    questions: Sequence[ResearchQuestion],
    conditions: Sequence[ConditionMetrics],
    stories: StoryUnits | None = None,
) -> list[ReportWarning]:
    """Failed trials above `FAILED_TRIAL_WARNING_SHARE` of the episodes, and comparisons most of whose discordant
    tasks (stories, where tasks share them) involve a failed trial."""
    out = []
    if episodes.finished and episodes.failed_trials > FAILED_TRIAL_WARNING_SHARE * episodes.finished:
        kinds = Counter[str]()
        for c in conditions:
            kinds.update(c.failed_trials_by_termination or {})
        detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        out.append(
            ReportWarning(
                code="failed_trials",
                message=f"{episodes.failed_trials} of {plural(episodes.finished, 'episode')} "
                f"({percent(episodes.failed_trials / episodes.finished)}%) "
                f"{'is a failed trial' if episodes.failed_trials == 1 else 'are failed trials'} ({detail}): "
                f"{'it counts' if episodes.failed_trials == 1 else 'they count'} as failures in success rates and "
                f"{'is' if episodes.failed_trials == 1 else 'are'} left out of the safety rates; each comparison "
                "shows how many of its pairs involve one, with a sensitivity row without them.",
            )
        )
    unit, units = ("task", "tasks") if stories is None else ("story", "stories")
    for q in questions:
        for row in q.comparisons:
            if row.test.n_discordant and 2 * row.failed_discordant_tasks > row.test.n_discordant:
                out.append(
                    ReportWarning(
                        code="failed_discordance",
                        message=f"{q.id}, {row.name}: {row.failed_discordant_tasks} of its "
                        f"{row.test.n_discordant} discordant {unit if row.test.n_discordant == 1 else units} "
                        f"{'involves' if row.failed_discordant_tasks == 1 else 'involve'} a failed trial, so "
                        "infrastructure failures, not behaviour, may drive this comparison; see its sensitivity row.",
                    )
                )
    out.extend(_few_tasks(questions, conditions, stories))
    return out


def _few_tasks(
    questions: Sequence[ResearchQuestion], conditions: Sequence[ConditionMetrics], stories: StoryUnits | None
) -> list[ReportWarning]:
    """Rates and comparisons resting on fewer than `MIN_TASKS_FOR_COVERAGE` independent units (tasks, or stories
    where tasks share them), where the task-cluster bootstrap intervals are too narrow."""
    floor = MIN_TASKS_FOR_COVERAGE
    one, many = ("task", "tasks") if stories is None else ("story", "stories")

    def count(n: int) -> str:
        return f"{n} {one if n == 1 else many}"

    why = (
        f"below {floor} {many} the bootstrap intervals are too narrow (95% intervals held the true value in about "
        "88-93% of simulated runs with 4 to 10 tasks, `benchmarks/stats_coverage.py`): read them as optimistic; "
        "the sign-flip p-values stay exact."
    )
    out = []
    if stories is None:
        sizes = sorted({c.rates["success"].n_tasks for c in conditions} - {0})
    else:
        sizes = [stories.stories] if stories.stories else []
    low = [n for n in sizes if n < floor]
    if low:
        rest = count(low[0]) if len(low) == 1 else f"{low[0]} to {count(low[-1])}"
        out.append(ReportWarning(code="few_tasks", message=f"the per-condition rates rest on {rest}: {why}"))
    small = {q.id: [row.test.n_tasks for row in q.comparisons if 0 < row.test.n_tasks < floor] for q in questions}
    found = [n for sizes in small.values() for n in sizes]
    if found:
        total = sum(len(q.comparisons) for q in questions)
        where = ", ".join(f"{q} {len(sizes)}" for q, sizes in small.items() if sizes)
        out.append(
            ReportWarning(
                code="few_tasks",
                message=f"{len(found)} of {plural(total, 'comparison')} ({where}) "
                f"{'rests' if len(found) == 1 else 'rest'} on fewer than {floor} {many} (as few as "
                f"{count(min(found))}): {why}",
            )
        )
    return out


def _printed_estimates(
    conditions: Sequence[ConditionMetrics],
    breakdowns: Sequence[Breakdown],
    questions: Sequence[ResearchQuestion],
    dose: DoseResponse | None = None,
) -> Iterator[Estimate]:
    """Every rate or difference the report prints as a percentage."""
    for c in conditions:
        yield from c.rates.values()
        yield from c.flip_rates.values()
        for p in c.pass_k.values():
            yield from (p.unbiased, p.all_pass)
    for b in breakdowns:
        for cell in b.cells:
            yield from cell.rates.values()
    for q in questions:
        for comparison in q.comparisons:
            yield comparison.difference
            if comparison.sensitivity is not None:
                yield comparison.sensitivity.difference
    for curve in dose.curves if dose is not None else ():
        for point in curve.points:
            yield from point.rates.values()


def aggregate(manifest: RunManifest, table: EpisodeTable, params: AnalysisParams = DEFAULT_PARAMS) -> AggregateMetrics:
    """Every aggregate of a run (complete or not) from its manifest and its episode table."""
    ctx = MetricsContext.build(manifest, table, params)
    conditions = conditions_section(ctx)
    breakdowns = breakdowns_section(ctx)
    questions = questions_section(ctx, conditions)
    failed = int(table.failed.sum())
    episodes = EpisodeCounts(
        planned=manifest.counts.planned,
        finished=len(table),
        succeeded=int((table.values["success"] == 1.0).sum()),
        failed_trials=failed,
        with_verdict=len(table) - failed,
        by_termination=dict(sorted(Counter(table.termination.tolist()).items())),
    )
    dose = dose_response_section(ctx)
    stories = _story_units(table)
    failure_modes, failed_by_termination = _failure_totals(conditions)
    errors = [e.mc_se for e in _printed_estimates(conditions, breakdowns, questions, dose) if e.mc_se is not None]
    max_mc_se = max(errors) if errors else None
    return AggregateMetrics(
        run_group_id=manifest.run_group_id,
        status=manifest.status.value,
        analysis=AnalysisInfo(
            resamples=params.resamples,
            seed=params.seed,
            confidence=params.confidence,
            alpha=params.alpha,
            power_datasets=params.power_datasets,
            task_interval=None if params.task_interval == "percentile" else params.task_interval,
            cluster_interval=None if params.cluster_interval == "percentile" else params.cluster_interval,
            share_interval=None if params.share_interval == "bootstrap" else params.share_interval,
            target_power=TARGET_POWER,
            sign_flip_enumeration_limit=ENUMERATION_LIMIT,
            sign_flip_monte_carlo_patterns=MONTE_CARLO_PATTERNS,
            max_mc_se=max_mc_se,
            rate_decimals=printed_decimals(max_mc_se),
            analysis_sha256=analysis_sha256(),
        ),
        definitions=dict(METRIC_DEFINITIONS),
        episodes=episodes,
        warnings=shard_warnings(manifest) + warnings_section(episodes, questions, conditions, stories),
        conditions=conditions,
        breakdowns=breakdowns,
        token_reduction=token_reduction_section(ctx),
        research_questions=questions,
        failure_modes=failure_modes,
        failed_trials_by_termination=failed_by_termination,
        caching=caching_section(ctx),
        dose_response=dose,
        stories=stories,
    )


def _story_units(table: EpisodeTable) -> StoryUnits | None:
    """The run's stories, where tasks share them (the table's story column)."""
    if table.story is None:
        return None
    story_of = dict(zip(table.task_id.tolist(), table.story.tolist(), strict=True))
    sizes = Counter(Counter(story_of.values()).values())
    return StoryUnits(
        tasks=len(story_of),
        stories=len(set(story_of.values())),
        sizes={str(size): sizes[size] for size in sorted(sizes)},
    )


def _failure_totals(conditions: Sequence[ConditionMetrics]) -> tuple[dict[str, int], dict[str, int] | None]:
    """All conditions' failure modes, and their failed trials per termination (None: no failed trial)."""
    modes, terminations = Counter[str](), Counter[str]()
    for c in conditions:
        modes.update(c.failure_modes)
        terminations.update(c.failed_trials_by_termination or {})
    by_mode = {key: modes[key] for key in FAILURE_MODE_ORDER if modes[key]}
    return by_mode, {key: terminations[key] for key in FAILED_TERMINATION_ORDER if terminations[key]} or None


def compute_metrics(
    manifest: RunManifest,
    records: Sequence[EpisodeRecord],
    params: AnalysisParams = DEFAULT_PARAMS,
    attributions: Sequence[Attribution] | None = None,
    superseded: Sequence[EpisodeRecord] = (),
) -> AggregateMetrics:
    """All aggregate metrics of a run (complete or not) from its manifest and episodes (each one's current
    record). Control episodes (``--controls``) stay out of every main section and get `controls_section`; the
    episode counts then cover every episode of the run. The ``superseded`` attempts of retried failed trials are
    counted in `retries_section` only."""
    main = main_records(records)
    if attributions is None:
        attributions = attribute_run(sorted(main, key=lambda r: r.run_id))
    metrics = aggregate(manifest, EpisodeTable.from_records(main, attributions, manifest), params)
    metrics = metrics.model_copy(update={"retries": retries_section(records, superseded)})
    controls = controls_section(manifest, records, params)
    if controls is None:
        return metrics
    every = EpisodeTable.from_records(records, [])
    failed = int(every.failed.sum())
    main_counts = metrics.episodes
    episodes = metrics.episodes.model_copy(
        update={
            "main_matrix": MainMatrixCounts(
                finished=main_counts.finished,
                succeeded=main_counts.succeeded,
                failed_trials=main_counts.failed_trials,
            ),
            "finished": len(every),
            "succeeded": int((every.values["success"] == 1.0).sum()),
            "failed_trials": failed,
            "with_verdict": len(every) - failed,
            "by_termination": dict(sorted(Counter(every.termination.tolist()).items())),
        }
    )
    return metrics.model_copy(update={"controls": controls, "episodes": episodes})


OPTIONAL_SECTIONS = ("controls", "caching", "retries", "dose_response", "stories")
"""Sections a run may not have: left out of the JSON document when absent, so that a run directory written before
they existed recomputes to the same document."""


def metrics_json(metrics: AggregateMetrics) -> dict[str, Any]:
    """The JSON document of ``aggregate_metrics.json`` (absent optional sections left out, and the analysis's
    ``task_interval``, ``cluster_interval`` and ``share_interval`` when they are the methods of a report written
    before the field existed)."""
    exclude: dict[str, Any] = {name: True for name in OPTIONAL_SECTIONS if getattr(metrics, name) is None}
    methods = ("task_interval", "cluster_interval", "share_interval")
    absent = {name for name in methods if getattr(metrics.analysis, name) is None}
    if absent:
        exclude["analysis"] = absent
    if metrics.episodes.main_matrix is None:
        exclude["episodes"] = {"main_matrix"}
    if metrics.failed_trials_by_termination is None:
        exclude["failed_trials_by_termination"] = True
    if metrics.retries is not None and metrics.retries.superseded_failed_calls is None:
        exclude["retries"] = {"superseded_failed_calls"}  # as in reports written before the field existed
    without = {
        i: {"failed_trials_by_termination"}
        for i, c in enumerate(metrics.conditions)
        if c.failed_trials_by_termination is None
    }
    if without:  # a condition without failed trials reads as one written before the field existed
        exclude["conditions"] = without
    # a design with data has no `no_data` reason: left out, as in reports written before the field existed
    with_data = {
        i: {
            "comparisons": {
                j: {"detectable": {"no_data"}} for j, c in enumerate(q.comparisons) if c.detectable.no_data is None
            }
        }
        for i, q in enumerate(metrics.research_questions)
    }
    if any(entry["comparisons"] for entry in with_data.values()):
        exclude["research_questions"] = {i: e for i, e in with_data.items() if e["comparisons"]}
    return metrics.model_dump(mode="json", exclude=exclude or None)
