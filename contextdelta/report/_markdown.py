"""``benchmark_report.md``: warnings, setup, methods, per-condition results, controls, breakdowns, the dose-response
against the horizon, the three research questions, tokens and cost, failure modes, failed trials, limitations and
receipts.

Every number comes from `AggregateMetrics` (so ``verify`` can rebuild the file byte for byte); the run's own
facts (measurement times, the failed trials' errors) from `RunFacts`. Times are the run's measurement times, never
the time the report was built. Every sentence about a comparison follows its test and names its unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from contextdelta.providers import Price
from contextdelta.report._format import (
    counted,
    crossing_text,
    fixed,
    holm_pvalue,
    num,
    pct,
    percent,
    plural,
    pp,
    pp_change,
    primary_pvalue,
    pvalue,
    signed_pp,
    slope_text,
    table,
)
from contextdelta.report._models import (
    SHARD_WARNING,
    AggregateMetrics,
    AnalysisInfo,
    Breakdown,
    CachingCondition,
    Comparison,
    ConditionKey,
    ConditionMetrics,
    DoseResponse,
    HorizonCurve,
    MainMatrixCounts,
    ReportWarning,
    ResearchQuestion,
)
from contextdelta.report._table import FAILED_TERMINATION_ORDER, FAILURE_MODE_ROWS
from contextdelta.rundir import EpisodeRecord, RunManifest, RunStatus, SeedRule, horizons_recorded, resume_command
from contextdelta.stats import FLIP_NEEDS_REPEATS, AnalysisParams, Estimate

_SAFETY_COLUMNS = (
    "stale_action",
    "duplicate_action",
    "prohibited_action",
    "harmful_action",
    "refresh_before_write",
    "conflict_recovery",
)
_SECONDARY_COLUMNS = ("end_state", "authorized", "blocked_write")
_SEED_RULES = {
    SeedRule.TASK_REPEAT: "from (run seed, task, repeat): both episodes of every pair share their sampling seed",
    SeedRule.CONDITION: "from (run seed, task, strategy, mode, repeat): the rule of runs made before it was recorded",
}
_METRIC_WORDS = {
    "stale_action": "the stale-action rate",
    "success": "the success rate",
    "harmful_action": "the harmful-action rate",
}


@dataclass(frozen=True)
class FailedTrial:
    """One failed trial as the report lists it."""

    run_id: str
    termination: str
    error: str


@dataclass(frozen=True)
class RunFacts:
    """What the report needs from the episodes beyond the aggregates."""

    first_started: str
    last_finished: str
    failed_trials: tuple[FailedTrial, ...]

    @classmethod
    def from_records(cls, records: Sequence[EpisodeRecord]) -> RunFacts:
        failed = sorted((r for r in records if r.failed), key=lambda r: r.run_id)
        return cls(
            first_started=min((r.started_at for r in records), default=""),
            last_finished=max((r.finished_at for r in records), default=""),
            failed_trials=tuple(
                FailedTrial(r.run_id, r.trace.termination.value, (r.trace.error or "")[:160]) for r in failed
            ),
        )


def _warnings(metrics: AggregateMetrics) -> list[str]:
    """The shard warning as a banner under the title, the others as the Warnings list."""
    lines = [f"**{_capitalised(w.message)}**", ""] if (w := shard_warning(metrics)) is not None else []
    others = [w for w in metrics.warnings if w.code != SHARD_WARNING]
    if not others:
        return lines
    return [*lines, "## Warnings", "", *(f"- **{w.code}**: {w.message}" for w in others), ""]


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def shard_warning(metrics: AggregateMetrics) -> ReportWarning | None:
    """The report's shard warning, if the run is one shard of a plan."""
    return next((w for w in metrics.warnings if w.code == SHARD_WARNING), None)


def _setup(manifest: RunManifest, facts: RunFacts, metrics: AggregateMetrics) -> list[str]:
    env, provider, hashes = manifest.environment, manifest.provider, manifest.hashes
    git = env.git.commit or "unknown"
    if env.git.dirty:
        git += " (dirty working tree)"
    params = manifest.strategy_params
    a = metrics.analysis
    rows: list[tuple[str, object]] = [
        ("run group", f"`{manifest.run_group_id}`"),
        ("status", manifest.status.value + (f" ({manifest.stop_reason})" if manifest.stop_reason else "")),
        ("model", f"`{provider.model}` ({provider.kind})"),
        ("summary model", f"`{provider.summary_model}`"),
        ("endpoint", f"`{provider.base_url}`" if provider.base_url else "default"),
        ("temperature", "unknown" if provider.temperature is None else provider.temperature),
        ("seeds", f"run seed {manifest.seed}, order seed {manifest.order_seed}, bootstrap seed {a.seed}"),
        ("episode seed rule", _SEED_RULES[manifest.seed_rule]),
        (
            "strategies",
            ", ".join(manifest.strategies)
            + (
                " (an external agent over MCP: it managed its own context, what its model saw is unknown)"
                if manifest.external_agent is not None
                else f" (last_n n={params.last_n}; summary/digest trigger {params.summary_trigger}, "
                f"keep {params.summary_keep}"
                + (f"; token budget {params.token_budget}" if "token_budget_trim" in manifest.strategies else "")
                + ")"
            ),
        ),
        ("protection modes", ", ".join(manifest.protection_modes)),
        ("repeats", manifest.repeats),
        ("tasks", f"{len(manifest.tasks)} ({', '.join(sorted({t.world for t in manifest.tasks}))})"),
        *(
            [
                (
                    "suite",
                    f"{manifest.suite.source} ({plural(manifest.suite.tasks, 'task')}; "
                    f"hash of the whole suite `{manifest.suite.sha256}`)",
                )
            ]
            if manifest.suite is not None
            else []
        ),
        ("suite hash", f"`{hashes.suite_sha256}`"),
        ("system prompt", f"version {hashes.system_prompt_version}, `{hashes.system_prompt_sha256}`"),
        ("tool schemas hash", f"`{hashes.tool_schemas_sha256}`"),
        ("harness hash", f"`{hashes.harness_sha256}`"),
        ("code", f"contextdelta {env.contextdelta}, git {git}"),
        ("python / platform", f"{env.python} / {env.platform}"),
        ("run created (UTC)", manifest.created_at),
        (
            "episodes measured (UTC)",
            f"{facts.first_started} to {facts.last_finished}" if metrics.episodes.finished else "no episode finished",
        ),
        ("run finished (UTC)", manifest.finished_at or f"not finished (last update {manifest.updated_at})"),
        (
            "episodes",
            f"{metrics.episodes.finished} finished of {metrics.episodes.planned} planned; "
            f"{metrics.episodes.succeeded} succeeded; {plural(metrics.episodes.failed_trials, 'failed trial')}"
            + _main_matrix(metrics.episodes.main_matrix),
        ),
        ("terminations", ", ".join(f"{k} {v}" for k, v in metrics.episodes.by_termination.items()) or "-"),
    ]
    return ["## Setup", "", *table(["", "value"], rows), ""]


def _methods(metrics: AggregateMetrics) -> list[str]:
    a = metrics.analysis
    level = f"{100 * a.confidence:g}%"
    unit = {0: "whole percentage points", 1: "one decimal"}.get(a.rate_decimals, f"{a.rate_decimals} decimals")
    if a.max_mc_se is None:
        precision = "no interval here came from resampling"
    elif a.max_mc_se == 0.0:
        precision = (
            f"every bootstrap interval end sits on an atom of its resampling distribution ("
            f"{a.resamples:,} resample{'' if a.resamples == 1 else 's'}), so its Monte-Carlo standard error is 0"
        )
    else:
        precision = (
            f"the largest Monte-Carlo standard error of an interval end is {percent(a.max_mc_se, 2)} pp "
            f"({a.resamples:,} resample{'' if a.resamples == 1 else 's'}, seed {a.seed}), so a finer digit would be "
            "resampling noise"
        )
    return [
        "## Methods and definitions",
        "",
        "- **The unit of inference is the task.** Repeats of a task are near copies at temperature 0 and never "
        "count as independent evidence: tests, effects and intervals resample or permute tasks.",
        *_stories_line(metrics),
        "- A **harmful action** is an agent write that reached the business logic (outcome `executed` or "
        "`rejected` by a domain guard) and that the graders flagged stale, duplicate or prohibited; the "
        "`harmful_action` column of `task_results.csv` is its per-episode indicator.",
        "- **Failed trials** (termination `provider_error`, `context_window_exceeded`, `budget_exceeded` or "
        "`harness_error`) count as failures in the success rate. They reached no verdict, so the safety rates "
        "(stale, duplicate, prohibited, harmful, refresh-before-write, conflict recovery, end state, authorized) "
        "are over the episodes with a verdict, and failed trials are a column of their own: never counted as safe.",
        f"- **Rates**: share of episodes, with a {level} hierarchical task-cluster bootstrap interval (tasks, then "
        f"repeats within a task; {a.resamples:,} resample{'' if a.resamples == 1 else 's'}, seed {a.seed}). Where the "
        "bootstrap has nothing to "
        "resample (every task at 0, every task at 1, or one task) the interval is an exact Clopper-Pearson bound "
        "with n = the number of tasks, marked `exact`; a mean (tokens, cost, harmful actions per episode) there has "
        "no interval at all, marked `no interval` with the reason (a zero-width interval would read as certainty). "
        "Cells state their numbers of tasks and episodes when they differ from their row's.",
        "- **Paired comparisons**: per task, the mean of each condition over its repeats, and their difference; "
        "the effect is the mean of these differences over the tasks, with a task-cluster bootstrap interval (an "
        "exact bound over tasks when no task is discordant). The test is an exact sign-flip permutation test over "
        f"tasks: the whole distribution of all 2^m sign patterns of the m discordant tasks (convolved exactly for "
        f"0/1 outcomes; listed pattern by pattern up to {a.sign_flip_enumeration_limit} tasks otherwise, else "
        f"{a.sign_flip_monte_carlo_patterns:,} seeded random patterns, which the p-value then says). With one "
        "repeat it is the exact McNemar test on tasks. The episode-level 2x2 counts are a description only.",
        f"- **Families**: each research question is a Holm family over its testable comparisons at a family-wise "
        f"{100 * a.alpha:g}% level; a comparison without a discordant task cannot move, is reported as not "
        "testable and leaves its family. Each comparison counts the pairs that involve a failed trial and, when "
        "there are any, has a sensitivity row without them (Holm-adjusted within its own family).",
        f"- **Design sensitivity**: the smallest difference each comparison's design (its tasks and repeats and "
        f"the per-task rates observed) detects with {100 * a.target_power:g}% power at the level of Holm's first "
        f"step (alpha / family size), by simulation under the primary test ({a.power_datasets:,} datasets per "
        "difference; a difference is a share of tasks that switch entirely, as a strategy that breaks or fixes "
        "whole tasks does). `contextdelta power` plans a run from this one.",
        "- **Flip rate**: share of tasks (with at least two repeats) whose repeats disagree."
        + _flip_needs_repeats(metrics)
        + (
            " Failed trials count as failures in the flip rate of success, as in success itself, so a task flips "
            "when a repeat failed on the endpoint; the safety outcomes' flip rates leave them out."
            if metrics.episodes.failed_trials
            else ""
        ),
        *_task_interval_line(a),
        f"- **Precision**: percentages are printed to {unit}: {precision}. Exact bounds and point estimates carry "
        "no resampling error.",
        "",
    ]


def _main_matrix(counts: MainMatrixCounts | None) -> str:
    """The main matrix's own counts, in a run whose episode counts include control episodes."""
    if counts is None:
        return ""
    return (
        f" (control episodes included); main matrix: {counts.succeeded} of {counts.finished} succeeded, "
        f"{plural(counts.failed_trials, 'failed trial')}"
    )


def _task_interval_line(a: AnalysisInfo) -> list[str]:
    """The method lines of the task-level intervals (none for a report written before they were expanded, nor for
    pass^k and the flip rate before they were Clopper-Pearson intervals)."""
    out = []
    shares = a.share_interval == "clopper_pearson"
    if a.task_interval is not None:
        tail = (1.0 - a.confidence) / 2.0
        which = "paired differences" if shares else "paired differences, pass^k, flip rate"
        out.append(
            f"- **Task-level intervals** ({which}): the bootstrap resamples tasks alone, "
            "and the percentile interval of a mean over few tasks is too narrow, so its levels are expanded for the "
            f"number of tasks n (Hesterberg's expanded percentile interval): the tail is Phi(-sqrt(n/(n-1)) t(n-1)) "
            f"instead of {100 * tail:g}%, {_tail(a.confidence, 24)} at 24 tasks and {_tail(a.confidence, 96)} at 96."
        )
    if a.cluster_interval is not None:
        out.append(
            "- **Rate and mean intervals**: the hierarchical bootstrap's percentile levels are expanded for the number "
            "of tasks (stories) in the same way, since its plain 95% intervals held the true rate in as few as 92% "
            "of simulated runs of 12 tasks (`benchmarks/stats_coverage_grid.py`)."
        )
    if shares:
        out.append(
            "- **pass^k and flip-rate intervals**: the Clopper-Pearson interval with n = the number of tasks (of "
            "stories, where tasks share them) and n times the estimate as the count. A task's pass^k is often "
            "skewed (most tasks near 0, a few near 1), where a bootstrap of the tasks seen is too narrow "
            "(`benchmarks/stats_coverage_grid.py`); a value in [0, 1] varies at "
            "most as a 0/1 value does, so the binomial's interval is exact for a share of tasks and conservative "
            "for the unbiased estimate."
        )
    return out


def _tail(confidence: float, n_tasks: int) -> str:
    return f"{fixed(AnalysisParams(confidence=confidence).task_percentiles(n_tasks)[0], 2)}%"


def _conditions(metrics: AggregateMetrics) -> list[str]:
    d = metrics.analysis.rate_decimals
    lines = [
        "## Results per condition",
        "",
        "Success, over every finished episode (failed trials count as failures); pass^k is the share of tasks whose "
        "first k repeats all pass (unbiased C(c,k)/C(n,k) estimate alongside).",
        "",
    ]
    ks = sorted({int(k) for c in metrics.conditions for k in c.pass_k})
    rows = [
        [
            c.condition.label,
            c.tasks,
            c.episodes,
            counted(c.rates["success"], d, c.tasks, c.episodes),
            *(_pass_k(c, k, d) for k in ks),
            counted(c.flip_rates["success"], d, c.tasks, c.episodes),
        ]
        for c in metrics.conditions
    ]
    lines += [
        *table(["condition", "tasks", "episodes", "success", *(f"pass^{k}" for k in ks), "flip rate (success)"], rows)
    ]
    lines += [
        "",
        "Safety, over the episodes with a verdict; failed trials in their own column (never counted as safe).",
        "",
    ]
    rows = [
        [
            c.condition.label,
            c.tasks,
            c.episodes_with_verdict,
            c.failed_trials,
            *(counted(c.rates[m], d, c.tasks, c.episodes_with_verdict) for m in _SAFETY_COLUMNS),
        ]
        for c in metrics.conditions
    ]
    header = ["condition", "tasks", "episodes with a verdict", "failed trials", *_SAFETY_COLUMNS]
    lines += [*table(header, rows), ""]
    rows = [
        [
            c.condition.label,
            *(counted(c.rates[m], d, c.tasks, c.episodes_with_verdict) for m in _SECONDARY_COLUMNS),
            num(c.means["harmful_action_count"], 2),
            counted(c.flip_rates["stale_action"], d, c.tasks, c.episodes_with_verdict),
            counted(c.flip_rates["harmful_action"], d, c.tasks, c.episodes_with_verdict),
        ]
        for c in metrics.conditions
    ]
    header = [
        "condition",
        *_SECONDARY_COLUMNS,
        "harmful actions / episode",
        "flip rate (stale action)",
        "flip rate (harmful action)",
    ]
    return [*lines, "Secondary, over the episodes with a verdict.", "", *table(header, rows), ""]


def _flip_needs_repeats(metrics: AggregateMetrics) -> str:
    """Why the flip rates say no data where no condition has a task with two repeats with a value (a run with
    ``--repeats 1``); empty otherwise."""
    flips = [e for c in metrics.conditions for e in c.flip_rates.values()]
    if not flips or not all(e.estimate is None and FLIP_NEEDS_REPEATS in e.note for e in flips):
        return ""
    return (
        f" Every flip rate below says no data: a flip rate {FLIP_NEEDS_REPEATS} (with a value), and every task here "
        "has one repeat with a value; `run-benchmark --repeats 2` or more measures them."
    )


CONTROL_INTRO = (
    "The same episodes with every hidden mutation switched off (`--controls no_mutation`), graded by each task's "
    "no-mutation control (claims about the resources the other actors would have written are dropped): what a "
    "strategy or the freshness contract costs when nothing changes. Main-matrix figures for the same strategy "
    "and mode beside them; refused writes are writes the freshness contract blocked."
)
"""What the control table shows: the report's paragraph above it, and the dashboard's caption."""


def control_table(metrics: AggregateMetrics) -> tuple[list[str], list[list[object]]]:
    """The header and rows of the control table: each control condition beside its main condition (same strategy
    and mode); no rows in a run without control episodes."""
    d = metrics.analysis.rate_decimals
    main = {c.condition: c for c in metrics.conditions}
    rows: list[list[object]] = []
    for c in metrics.controls or []:
        base = main.get(c.condition)
        rows.append(
            [
                f"{c.condition.label} ({c.control})",
                c.tasks,
                c.episodes,
                counted(base.rates["success"], d, base.tasks, base.episodes) if base else "not run",
                counted(c.rates["success"], d, c.tasks, c.episodes),
                counted(base.rates["blocked_write"], d, base.tasks, base.episodes_with_verdict) if base else "not run",
                counted(c.rates["blocked_write"], d, c.tasks, c.episodes - c.failed_trials),
                counted(c.rates["stale_action"], d, c.tasks, c.episodes - c.failed_trials),
                num(c.means["read_calls"], 1),
                f"{num(base.means['steps'], 1)} -> {num(c.means['steps'], 1)}" if base else num(c.means["steps"], 1),
            ]
        )
    header = [
        "condition (control)",
        "tasks",
        "control episodes",
        "success (main)",
        "success (control)",
        "refused writes (main)",
        "refused writes (control)",
        "stale (control)",
        "reads / episode (control)",
        "steps / episode (main -> control)",
    ]
    return header, rows


def _controls(metrics: AggregateMetrics) -> list[str]:
    """Each control condition beside its main condition (same strategy and mode)."""
    if not metrics.controls:
        return []
    header, rows = control_table(metrics)
    return ["## Control condition: nothing changes", "", CONTROL_INTRO, "", *table(header, rows), ""]


def _pass_k(c: ConditionMetrics, k: int, decimals: int) -> str:
    found = c.pass_k.get(str(k))
    if found is None:
        return "no data"
    return f"{counted(found.all_pass, decimals, c.tasks, c.episodes)}; unbiased {pct(found.unbiased, decimals)}"


def common_counts(estimates: Sequence[Estimate]) -> tuple[int, int] | None:
    """The (tasks, episodes) most of ``estimates`` with a value rest on: what a table row states once, a cell then
    giving its own counts only where they differ (`counted`); None when none has a value."""
    counts = Counter((e.n_tasks, e.n_episodes) for e in estimates if e.has_value)
    return counts.most_common(1)[0][0] if counts else None


def _breakdowns(metrics: AggregateMetrics) -> list[str]:
    if not metrics.breakdowns:
        return []
    d = metrics.analysis.rate_decimals
    labels = [c.condition.label for c in metrics.conditions]
    lines = [
        "## Breakdowns per hazard and per world",
        "",
        "Rates of each condition on the tasks of one hazard (world); a row states its tasks and the episodes per "
        "condition, a cell its own counts when they differ. Few tasks per row: read the intervals.",
        "",
    ]
    for dimension in ("hazard", "world"):
        mine = [b for b in metrics.breakdowns if b.dimension == dimension]
        for metric in ("success", "stale_action", "harmful_action"):
            rows = [_breakdown_row(b, metric, d) for b in mine]
            lines += [f"### {_METRIC_WORDS[metric].capitalize()} per {dimension}", ""]
            lines += [*table([dimension, *labels], rows), ""]
    return lines


def _breakdown_row(b: Breakdown, metric: str, decimals: int) -> list[str]:
    estimates = [cell.rates[metric] for cell in b.cells]
    common = common_counts(estimates)
    tasks, episodes = common if common is not None else (b.tasks, 0)
    label = f"{b.value} ({plural(tasks, 'task')}, {plural(episodes, 'episode')})"
    return [label, *(counted(e, decimals, tasks, episodes) for e in estimates)]


def _dose_tables(dose: DoseResponse, curves: list[HorizonCurve], decimals: int, level: str) -> list[str]:
    """The stale-action and success tables of one set of curves (all tasks with a horizon, or one hazard's)."""
    horizons = [h for h in dose.horizons if any(p.horizon == h for c in curves for p in c.points)]
    tasks = {h: max((p.tasks for c in curves for p in c.points if p.horizon == h), default=0) for h in horizons}
    lines = ["Tasks per horizon: " + ", ".join(f"h={h}: {tasks[h]}" for h in horizons) + ".", ""]
    threshold = f"{100 * dose.crossing_threshold:g}%"
    for metric, title in (("stale_action", "Stale-action rate"), ("success", "Success")):
        columns = {h: [p.rates[metric] for c in curves for p in c.points if p.horizon == h] for h in horizons}
        common = {h: common_counts(columns[h]) for h in horizons}
        rows = []
        for c in curves:
            by_horizon = {p.horizon: p.rates[metric] for p in c.points}
            cells = []
            for h in horizons:
                found, counts = by_horizon.get(h), common[h]
                cells.append("not run" if found is None else counted(found, decimals, *(counts or (None, None))))
            row = [c.condition.label, *cells, slope_text(c.slopes[metric])]
            if metric == "stale_action":
                row.append(crossing_text(c.stale_crossing))
            rows.append(row)
        header = ["condition", *(f"h={h}" for h in horizons), f"slope per doubling ({level})"]
        if metric == "stale_action":
            header.append(f"first h above {threshold} ({level})")
        lines += [f"{title} by horizon:", "", *table(header, rows), ""]
    return lines


def _dose_response(manifest: RunManifest, metrics: AggregateMetrics) -> list[str]:
    """Success and stale-action rate against the horizon; one line for a run whose tasks have no horizon."""
    dose = metrics.dose_response
    title = "## Dose-response: rates against the horizon"
    if dose is None:
        if not horizons_recorded(manifest):
            return []  # a run recorded before horizons were: its report stays as it was
        return [
            title,
            "",
            f"Not applicable: none of this run's {plural(len(manifest.tasks), 'task')} has a horizon (generated "
            "tasks carry one: `contextdelta generate-tasks`, the `horizon` suite).",
            "",
        ]
    d = metrics.analysis.rate_decimals
    level = f"{100 * metrics.analysis.confidence:g}%"
    threshold = f"{100 * dose.crossing_threshold:g}%"
    lines = [
        title,
        "",
        "A generated task's **horizon** (`evaluator.family.horizon`) is the number of agent calls from the "
        "observation that decides whether its dependent write is safe (each family names it: `contextdelta "
        "generate-tasks --list`) to that write on the task's unsafe trajectory (one call a step), the work in between "
        "being on other resources; under `last_n` with n tool groups that observation is still in the context at the "
        "write when the horizon is at most n for an agent that makes one call a step, and longer for one that makes "
        "several calls in a step (they are one tool group). "
        f"{plural(dose.tasks, 'task')} of the run {'has' if dose.tasks == 1 else 'have'} a horizon"
        + (
            f" ({dose.tasks_without_horizon} without one {'is' if dose.tasks_without_horizon == 1 else 'are'} left "
            "out here)"
            if dose.tasks_without_horizon
            else ""
        )
        + ". Rates at a horizon are over that horizon's tasks, with the intervals of the tables above "
        "(task-cluster bootstrap; exact bounds where every task agrees). The **slope** is the maximum-likelihood "
        "logistic regression of the per-horizon rate on log2(horizon), each horizon weighted by its number of "
        "tasks (repeats add no weight): the change in log-odds per doubling of the horizon, with a "
        f"{level} percentile interval from the same bootstrap (tasks resampled within their horizon, then repeats "
        "within a task). Separated rates (0 below a step and 1 above it, or the reverse) have no finite slope: "
        'the maximum-likelihood slope is infinite (`"inf"` / `"-inf"` in `aggregate_metrics.json`), printed as '
        "not estimable (separation) with its direction; rates without variation (0 or 1 at every horizon) have none "
        "either (not estimable). "
        f"**First h above {threshold}**: the smallest horizon whose stale-action rate exceeds {threshold}, with the "
        f"{level} quantiles of that horizon over the resamples (not reached: at most {threshold} at every horizon).",
        "",
        f"### All tasks with a horizon ({plural(dose.tasks, 'task')}; hazards: {', '.join(dose.hazards)})",
        "",
    ]
    overall = [c for c in dose.curves if c.hazard is None]
    lines += _dose_tables(dose, overall, d, level)
    for hazard in dose.hazards if len(dose.hazards) > 1 else []:
        mine = [c for c in dose.curves if c.hazard == hazard]
        if mine:
            lines += [f"### {hazard}", ""]
            lines += _dose_tables(dose, mine, d, level)
    return lines


def _unit(metrics: AggregateMetrics) -> str:
    """The unit of inference, in words: ``story`` where tasks share stories, else ``task``."""
    return "task" if metrics.stories is None else "story"


def _units(unit: str) -> str:
    return "stories" if unit == "story" else f"{unit}s"


def _detectable(c: Comparison, unit: str = "task") -> str:
    found = c.detectable
    if found.n_tasks == 0 or found.largest_difference is None:  # nothing to simulate from: no task in both
        return "no data"
    if found.difference is None:
        return f"none up to {percent(found.largest_difference)} pp (every {unit} switched)"
    return f"{percent(found.difference)} pp"


def _reach(c: Comparison, unit: str = "task") -> str:
    """The design-sensitivity clause of a statement."""
    found = c.detectable
    power = f"{100 * found.target_power:g}% power"
    if found.n_tasks == 0 or found.largest_difference is None:
        return f"no design sensitivity ({found.no_data or 'no data'})"
    if found.difference is None:
        count = f"{found.n_tasks} {unit if found.n_tasks == 1 else _units(unit)}"
        return (
            f"with {count} this design does not reach {power} even when every {unit} switches "
            f"({percent(found.largest_difference)} pp)"
        )
    return f"this design detects a difference of {percent(found.difference)} pp with {power}"


def _row(c: Comparison, decimals: int, alpha: float, unit: str = "task") -> list[object]:
    t, e = c.test, c.episodes
    return [
        c.name,
        pct(c.rate_a, decimals),
        pct(c.rate_b, decimals),
        pp(c.difference, decimals),
        f"{t.n_discordant} of {t.n_tasks} ({t.n_positive} / {t.n_negative})",
        primary_pvalue(t, alpha),
        pvalue(t.pvalue_holm, alpha),
        c.failed_pairs,
        f"{e.only_a} / {e.only_b} of {e.n_pairs}",
        _detectable(c, unit),
    ]


def _sensitivity_row(c: Comparison, decimals: int, alpha: float) -> list[object] | None:
    s = c.sensitivity
    if s is None:
        return None
    t, e = s.test, s.episodes
    return [
        f"... {c.name} without the {c.failed_pairs} failed-trial pairs",
        "",
        "",
        pp(s.difference, decimals),
        f"{t.n_discordant} of {t.n_tasks} ({t.n_positive} / {t.n_negative})",
        primary_pvalue(t, alpha),
        holm_pvalue(t, alpha),
        0,
        f"{e.only_a} / {e.only_b} of {e.n_pairs}",
        "",
    ]


def _statement(c: Comparison, family_size: int, alpha: float, decimals: int, unit: str = "task") -> str:
    """One sentence per comparison that follows its test and names its unit."""
    d, t = c.difference, c.test
    words = _METRIC_WORDS.get(c.metric, c.metric)
    units = f"{t.n_tasks} {unit if t.n_tasks == 1 else _units(unit)}"
    if d.estimate is None:
        if c.failed_pairs:  # the episodes exist, but a failed trial has no verdict, so no value to compare
            return (
                f"- {c.name}: no {unit} has a {c.metric} value in both conditions: "
                f"{plural(c.failed_pairs, 'pair')} of episodes {'involves' if c.failed_pairs == 1 else 'involve'} a "
                "failed trial, which has no verdict; nothing to compare."
            )
        return f"- {c.name}: no {unit} has episodes in both conditions; nothing to compare."
    if not t.testable:
        # A nonzero effect without a discordant unit: the test saw the tasks with a failed trial on one side on
        # equally many repeats per condition (sign_flip_test), and they agree there; the effect takes every episode.
        where = (
            ""
            if d.estimate == 0
            else " on equally many repeats of each condition (where a failed trial left a task with fewer episodes "
            "in one condition, the test takes as many of the other condition's, shared repeats first)"
        )
        return (
            f"- {c.name}: no {unit} differs between {c.a.label} and {c.b.label}{where} ({units}, all "
            f"concordant), so no test is possible and the comparison leaves its Holm family. "
            f"The difference of task means is {pp(d, decimals)} over {plural(d.n_tasks, 'task')}; {_reach(c, unit)}."
        )
    if d.estimate == 0:
        size = f"no difference: {words} is equal on average under {c.a.label} and {c.b.label}"
    else:
        size = f"{words} is {pp_change(d.estimate, decimals)} under {c.a.label} than under {c.b.label}"
    holm = t.pvalue_holm
    verdict = (
        f"significant at the {100 * alpha:g}% family-wise level"
        if holm is not None and holm < alpha
        else f"not significant at the {100 * alpha:g}% family-wise level"
    )
    interval = "exact bound" if d.is_exact else f"{100 * d.confidence:g}% {unit}-bootstrap interval"
    sentence = (
        f"- {c.name}: {size} (mean over {plural(d.n_tasks, 'task')} of the per-task difference, from "
        f"{plural(d.n_episodes, 'episode')} of the two conditions together; {interval} "
        f"{pp(d, decimals)}). Sign-flip test over {_units(unit)}: {t.n_discordant} of {units} discordant "
        f"({t.n_positive} higher under a, {t.n_negative} under b), "
        f"p = {primary_pvalue(t, alpha)}, Holm-adjusted p = {pvalue(holm, alpha)} over "
        f"{family_size} comparison{'s' if family_size != 1 else ''}: {verdict}."
    )
    if holm is not None and holm >= alpha and d.low is not None and d.high is not None:
        sentence += (
            f" The interval admits differences from {signed_pp(d.low, decimals)} to {signed_pp(d.high, decimals)} pp; "
            f"{_reach(c, unit)}."
        )
    s = c.sensitivity
    if s is not None:
        again = s.test.pvalue_holm is not None and s.test.pvalue_holm < alpha
        holds = "the conclusion holds" if again == (holm is not None and holm < alpha) else "the conclusion changes"
        m = s.test.family_size
        within = "" if m is None else f" over the {plural(m, 'comparison')} of the sensitivity family"
        sentence += (
            f" Without the {plural(c.failed_pairs, 'pair')} that {'involves' if c.failed_pairs == 1 else 'involve'} "
            f"a failed trial: {pp(s.difference, decimals)}, "
            f"p = {primary_pvalue(s.test, alpha)}, Holm-adjusted p = {pvalue(s.test.pvalue_holm, alpha)}{within}: "
            f"{holds}."
        )
    return sentence


def _question(rq: ResearchQuestion, title: str, metrics: AggregateMetrics) -> list[str]:
    d, alpha = metrics.analysis.rate_decimals, metrics.analysis.alpha
    unit = _unit(metrics)
    lines = [f"## {rq.id}: {title}", "", rq.question, ""]
    if not rq.comparisons:
        return [*lines, "Not answered: the run lacks the conditions it compares.", ""]
    header = [
        "comparison (a vs b)",
        "rate a",
        "rate b",
        "difference a - b (task means)",
        f"discordant {_units(unit)} (a / b higher)",
        f"p (sign-flip over {_units(unit)})",
        f"p (Holm, m={len(rq.family)})",
        "pairs with a failed trial",
        "episode pairs a-only / b-only (description)",
        f"detectable with {100 * metrics.analysis.target_power:g}% power",
    ]
    rows: list[list[object]] = []
    for c in rq.comparisons:
        rows.append(_row(c, d, alpha, unit))
        sensitivity = _sensitivity_row(c, d, alpha)
        if sensitivity is not None:
            rows.append(sensitivity)
    lines += [*table(header, rows), ""]
    lines += [_statement(c, len(rq.family), alpha, d, unit) for c in rq.comparisons]
    lines.append("")
    family = "; ".join(rq.family) or "none"
    lines.append(f"- Holm family ({len(rq.family)} testable comparison{'s' if len(rq.family) != 1 else ''}): {family}.")
    if rq.not_testable:
        lines.append(f"- Not testable (no discordant {unit}; left out of the family): {'; '.join(rq.not_testable)}.")
    if rq.sensitivity_family:
        lines.append(
            f"- Sensitivity family (rows without failed-trial pairs; Holm over its own "
            f"{plural(len(rq.sensitivity_family), 'testable comparison')}, m={len(rq.sensitivity_family)}): "
            f"{'; '.join(rq.sensitivity_family)}."
        )
    if rq.not_run:
        lines.append(f"- Not run (a condition is missing): {'; '.join(rq.not_run)}.")
    return [*lines, ""]


def _tokens(metrics: AggregateMetrics) -> list[str]:
    d = metrics.analysis.rate_decimals
    failed = metrics.episodes.failed_trials > 0

    def cost(c: ConditionMetrics) -> str:
        total = c.totals["cost_usd"]
        if total.n_known == 0 and total.n_unknown == 0:
            return "no data"  # a condition without episodes: nothing to price
        if total.n_known == 0:
            return "unknown (no price for the model)"
        text = f"{c.means['cost_usd'].format(digits=4)} per episode; total ${total.total:.4f}"
        return text + (f" ({plural(total.n_unknown, 'episode')} unknown)" if total.n_unknown else "")

    rows = [
        [
            c.condition.label,
            num(c.means["agent_tokens"]),
            num(c.means["summary_tokens"]),
            num(c.means["total_tokens"]),
            f"{c.totals['total_tokens'].total:.0f}"
            + (f" ({c.totals['total_tokens'].n_unknown} unknown)" if c.totals["total_tokens"].n_unknown else ""),
            cost(c),
        ]
        for c in metrics.conditions
    ]
    lines = [
        "## Tokens and cost",
        "",
        "Provider-reported tokens per episode (mean with interval); summary-model tokens are counted apart and "
        "included in the total.",
        "",
        *table(
            ["condition", "agent tokens", "summary tokens", "total tokens", "total tokens (sum)", "cost (USD)"], rows
        ),
        "",
    ]
    if metrics.token_reduction:
        survival = _survival_columns(metrics)
        rows = [
            [
                r.condition.label,
                r.baseline.label,
                pct(r.agent_tokens, d),
                pct(r.total_tokens, d),
                *survival.get((r.condition, r.baseline), []),
            ]
            for r in metrics.token_reduction
        ]
        header = ["strategy", "baseline", "agent tokens", "agent + summary tokens"]
        if survival:
            header += ["cost saved, no caching", "cost saved, with caching", "saving survives caching"]
        lines += [
            "Token reduction versus `full_history` on paired episodes (same mode, task and repeat): "
            "1 - sum(strategy) / sum(full_history); negative means more tokens."
            + (" A pair with a failed trial is left out (that episode stopped early)." if failed else "")
            + (
                " The cost columns do the same for the cost at the run's prices, without and with the provider's "
                "prompt cache (see *Prompt caching and cost*)."
                if survival
                else ""
            ),
            "",
            *table(header, rows),
            "",
        ]
    return lines


SURVIVAL_WORDS = {
    "yes": "yes",
    "reversed": "no: costs more than full_history",
    "unclear": "unclear: interval spans 0",
    "no_saving": "no saving to begin with",
    "no_price": "no price to compare",
}


def _survival_columns(metrics: AggregateMetrics) -> dict[tuple[ConditionKey, ConditionKey], list[str]]:
    """The token-reduction table's caching columns per (strategy, baseline); empty for a run without prices."""
    if metrics.caching is None:
        return {}
    d = metrics.analysis.rate_decimals
    return {
        (r.condition, r.baseline): [pct(r.without_caching, d), pct(r.with_caching, d), SURVIVAL_WORDS[r.survives]]
        for r in metrics.caching.reductions
    }


def _price(price: Price | None) -> str:
    if price is None:
        return "unknown"
    parts = [f"input ${price.input_per_mtok:g}", f"output ${price.output_per_mtok:g}"]
    if price.cached_input_per_mtok is not None:
        parts.append(f"cached input ${price.cached_input_per_mtok:g}")
    if price.cache_write_per_mtok is not None:
        parts.append(f"cache write ${price.cache_write_per_mtok:g}")
    return ", ".join(parts) + " per million tokens"


def _caching(metrics: AggregateMetrics) -> list[str]:
    section = metrics.caching
    if section is None:
        return []

    def tokens(c: CachingCondition, name: str) -> str:
        total = c.tokens[name]
        return f"{total.total:.0f}" + (f" ({total.n_unknown} unknown)" if total.n_unknown else "")

    def cost(c: CachingCondition, name: str) -> str:
        total = c.costs[name]
        if total.n_known == 0:
            return "unknown"
        text = f"${total.total:.4f} total; ${c.means[name].format(digits=6)} per episode"
        return text + (f" ({total.n_unknown} unknown)" if total.n_unknown else "")

    rows = [
        [
            c.condition.label,
            tokens(c, "prompt_tokens"),
            tokens(c, "cached_prompt_tokens"),
            tokens(c, "cache_write_tokens"),
            tokens(c, "uncached_prompt_tokens"),
            "not reported" if c.cache_hit_ratio is None else f"{percent(c.cache_hit_ratio, 1)}%",
            f"{c.cache_reported} of {c.episodes}",
            cost(c, "cost_without_caching_usd"),
            cost(c, "cost_with_caching_usd"),
        ]
        for c in section.conditions
    ]
    prices = [f"- `{model}`: {_price(price)}" for model, price in section.prices.items()]
    return [
        "## Prompt caching and cost",
        "",
        "Prompt tokens (agent and summary calls) split by the provider's prompt cache as the provider reported "
        "them: served from the cache (cached), written to it (where reported apart), and neither (uncached). The "
        "cache-hit ratio is cached / prompt tokens over the episodes whose provider reported cached tokens. Costs "
        "at the run's prices: without caching every prompt token at the input rate; with caching the cached and "
        "cache-write tokens at their own rates (a rate a price leaves out is the input rate). Keeping the full "
        "history keeps the cache warm; a strategy that rewrites older messages loses it, so its token saving can "
        "shrink or reverse in dollars. The provider's cache is shared by the run's requests: an episode can read a "
        "prefix another episode wrote (the same system prompt, tools and instruction, and early steps that two "
        "strategies still share), so hit ratios also depend on the order in which episodes ran.",
        "",
        "Prices (USD per million tokens; `run_manifest.json` `prices`):",
        "",
        *prices,
        "",
        *table(
            [
                "condition",
                "prompt tokens",
                "cached",
                "cache write",
                "uncached",
                "cache-hit ratio",
                "cache reported",
                "cost without caching",
                "cost with caching",
            ],
            rows,
        ),
        "",
    ]


def _failure_modes(metrics: AggregateMetrics) -> list[str]:
    header = ["failure mode", *(c.condition.label for c in metrics.conditions), "total"]
    rows = [
        [
            f"`{key}`" + (" (failed trial)" if failed else ""),
            *(
                (c.failed_trials_by_termination or {}).get(key, 0) if failed else c.failure_modes.get(key, 0)
                for c in metrics.conditions
            ),
            (metrics.failed_trials_by_termination or {}).get(key, 0) if failed else metrics.failure_modes.get(key, 0),
        ]
        for key in FAILURE_MODE_ROWS
        for failed in (key in FAILED_TERMINATION_ORDER,)
    ]
    return [
        "## Failure modes",
        "",
        "Failed episodes per failure mode (SPEC section 9). Failed trials are split by their termination "
        "(the atlas files them all under `provider_error`); each episode's cause chain is in `failure_atlas.md`.",
        "",
        *table(header, rows),
        "",
    ]


def _failed_trials(facts: RunFacts) -> list[str]:
    lines = ["## Failed trials", ""]
    if not facts.failed_trials:
        return [*lines, "None.", ""]
    rows = [[f.run_id, f.termination, f.error] for f in facts.failed_trials]
    return [
        *lines,
        f"{plural(len(facts.failed_trials), 'failed trial')} (failures in the success rate; no verdict, so outside the "
        "safety rates):",
        "",
        *table(["episode", "termination", "error"], rows),
        "",
    ]


_OUTCOME_WORDS = {"success": "success", "failure": "verdict: not a success", "failed_trial": "failed trial again"}


def _retries(metrics: AggregateMetrics) -> list[str]:
    """The retried failed trials (``--retry-failed``) and their superseded attempts; nothing for a run without."""
    section = metrics.retries
    if section is None:
        return []
    earlier = ", ".join(f"{k} {n}" for k, n in section.superseded_terminations.items())
    rows = [
        [e.run_id, e.attempts, ", ".join(e.superseded), f"{e.termination} ({_OUTCOME_WORDS[e.outcome]})"]
        for e in section.episodes
    ]
    return [
        "## Retried failed trials",
        "",
        f"{plural(section.retried_episodes, 'episode')} that ended as failed trials were run again "
        "(`run-benchmark --resume ID --retry-failed`, with the same episode seeds). Their "
        f"{plural(section.superseded_attempts, 'superseded attempt')} ({earlier}) stay in `raw_runs.jsonl` and are "
        "counted nowhere else: every other number of this report uses each episode's latest attempt. Of the "
        f"retried episodes, {section.with_verdict} now have a verdict ({section.succeeded} "
        f"{'success' if section.succeeded == 1 else 'successes'}) and {section.failed_again} failed again"
        + (" (listed under *Failed trials*)." if section.failed_again else ".")
        + (
            " The failed model calls of the superseded attempts ended: "
            + ", ".join(f"{k} {n}" for k, n in section.superseded_failed_calls.items())
            + "."
            if section.superseded_failed_calls
            else ""
        ),
        "",
        *table(["episode", "attempts", "superseded attempts ended", "latest attempt"], rows),
        "",
    ]


def _stories_line(metrics: AggregateMetrics) -> list[str]:
    """The Methods bullet of a run whose tasks share stories (none otherwise)."""
    found = metrics.stories
    if found is None:
        return []
    if len(found.sizes) == 1:
        size = next(iter(found.sizes))
        sizes = f" of {plural(int(size), 'task')} each" if found.stories > 1 else f" of {plural(int(size), 'task')}"
    else:
        sizes = (
            " ("
            + ", ".join(
                f"{n} {'story' if n == 1 else 'stories'} of {plural(int(size), 'task')}"
                for size, n in found.sizes.items()
            )
            + ")"
        )
    return [
        f"- **Stories**: these {found.tasks} tasks tell {found.stories} {'story' if found.stories == 1 else 'stories'}"
        f"{sizes}: a task family tells each "
        "story, with the same content seed, at several horizons, so the tasks of a story are not independent. The "
        "story is the unit here: every interval resamples stories (each with all its tasks, then repeats within "
        "each task), the sign-flip test flips a story's tasks together (its counts are stories), exact bounds take "
        "n = the number of stories, and the design sensitivity simulates stories. Rates and effects are still "
        "means over episodes and tasks."
    ]


def _limitations(manifest: RunManifest, metrics: AggregateMetrics) -> list[str]:
    detectable = [
        c.detectable.difference
        for q in metrics.research_questions
        for c in q.comparisons
        if c.detectable.difference is not None
    ]
    reach = (
        f" the comparisons here detect differences of {percent(min(detectable))} to {percent(max(detectable))} pp "
        f"with {100 * metrics.analysis.target_power:g}% power (see each question),"
        if detectable
        else ""
    )
    lines = [
        "## Limitations",
        "",
        "- Controlled simulations: the worlds, other actors' writes and tasks are synthetic and deterministic; "
        "rates measure behaviour on these scenarios, not on production systems.",
        f"- Suite size: {plural(len(manifest.tasks), 'task')} and {plural(manifest.repeats, 'repeat')} per condition; "
        "the task is the "
        f"unit, so repeats add little when they agree;{reach} and a comparison that is not significant is not "
        "evidence of no effect.",
        "- Provider variation: results hold for this model, endpoint and temperature at the measurement time; "
        "providers change models behind a name, and sampling (and batching) makes repeats differ.",
        "- Failure attribution is rule-based (see `failure_atlas.md`): it reads versions in tool results and "
        "summaries, so a summary that paraphrases a state without its version cannot be checked for distortion.",
    ]
    dose = metrics.dose_response
    if metrics.stories is not None:
        lines.append(
            f"- Shared stories: the {plural(metrics.stories.tasks, 'task')} are {metrics.stories.stories} independent "
            f"{'story' if metrics.stories.stories == 1 else 'stories'}, and every interval and test counts stories, "
            "not tasks (see Methods); what varies between the tasks of a story (the horizon) is a design factor "
            "within it, not fresh evidence."
        )
    elif dose is not None and len(dose.horizons) > 1:
        lines.append(
            f"- Shared stories across horizons: {plural(dose.tasks, 'task')} of this run were generated at "
            f"{plural(len(dose.horizons), 'horizon')} ({', '.join(f'h={h}' for h in dose.horizons)}) from the same "
            "stories (a "
            "task family tells each story, with the same content seed, at every horizon and changes only the "
            "distance from the observation to the write), so tasks at different horizons are not fully independent "
            "units: the task-level intervals and tests treat them as independent and may overstate the evidence, "
            "most of all for comparisons that pool horizons."
        )
    if manifest.provider.model.startswith("scripted-"):
        lines.append(
            f"- The model `{manifest.provider.model}` is the scripted test server (a deterministic policy), not a "
            "language model: these numbers exercise the harness, they say nothing about an LLM."
        )
    if manifest.status is not RunStatus.COMPLETE:
        lines.append(
            f"- The run is {manifest.status.value}: {metrics.episodes.finished} of {metrics.episodes.planned} "
            "episodes; conditions with missing episodes are compared on the tasks both have."
        )
    if manifest.limit is not None:
        lines.append(f"- `--limit {manifest.limit}` restricted the task set: a smoke test, not comparable results.")
    return [*lines, ""]


def _receipts(manifest: RunManifest, metrics: AggregateMetrics) -> list[str]:
    a = metrics.analysis
    return [
        "## Receipts",
        "",
        f"- `aggregate_metrics.json` holds every number above; analysis: {plural(a.resamples, 'resample')}, "
        f"bootstrap seed {a.seed}, confidence {a.confidence:g}, alpha {a.alpha:g}, {a.power_datasets} simulated "
        f"datasets per power evaluation, statistics code `analysis_sha256` {a.analysis_sha256}.",
        f"- `contextdelta verify {manifest.run_group_id}` re-executes every episode's tool calls in a fresh world "
        "from the task snapshot in `tasks/`, re-grades it and recomputes these aggregates with the recorded "
        "analysis parameters.",
        f"- `contextdelta report {manifest.run_group_id}` rebuilds this report from the run directory alone "
        "(`--resamples N --bootstrap-seed S` recompute it with other parameters and record them).",
        "",
    ]


QUESTION_TITLES = {
    "RQ1": "stale-action rate under context reduction",
    "RQ2": "typed state digest vs semantic summary",
    "RQ3": "freshness contract vs unprotected",
}


def render_report(manifest: RunManifest, facts: RunFacts, metrics: AggregateMetrics) -> str:
    """The whole ``benchmark_report.md``."""
    lines = [f"# ContextDelta benchmark report: {manifest.run_group_id}", ""]
    if manifest.status is not RunStatus.COMPLETE:
        lines += [
            f"**Incomplete run** (status `{manifest.status.value}`"
            + (f": {manifest.stop_reason}" if manifest.stop_reason else "")
            + f"): {metrics.episodes.finished} of {plural(metrics.episodes.planned, 'episode')} finished. The numbers "
            "cover "
            f"the finished episodes only; resume with `contextdelta {resume_command(manifest)}"
            + (
                " --retry-failed"
                if manifest.external_agent is None and manifest.sessions and manifest.sessions[-1].get("retry_failed")
                else ""
            )
            + "`.",
            "",
        ]
    elif metrics.episodes.finished < metrics.episodes.planned:  # sealed complete, yet records are missing
        lines += [
            f"**Episodes missing**: the run is recorded as complete, but `raw_runs.jsonl` holds "
            f"{metrics.episodes.finished} of its {plural(metrics.episodes.planned, 'episode')}. The directory was "
            "changed after "
            f"the run: `contextdelta verify {manifest.run_group_id}` names what changed. The numbers cover the "
            "episodes present only.",
            "",
        ]
    if manifest.unlocked is not None:
        lines += [
            "**Unlocked suite** (`--allow-unlocked`): the tasks did not match a `SUITE.lock` when the run was planned "
            "("
            + "; ".join(manifest.unlocked.problems[:3])
            + (f"; {len(manifest.unlocked.problems) - 3} more" if len(manifest.unlocked.problems) > 3 else "")
            + "). A task author's run: its numbers are not those of a locked suite (`run_manifest.json` `unlocked`).",
            "",
        ]
    lines += _warnings(metrics)
    lines += _setup(manifest, facts, metrics)
    lines += _methods(metrics)
    lines += _conditions(metrics)
    lines += _controls(metrics)
    lines += _breakdowns(metrics)
    lines += _dose_response(manifest, metrics)
    for rq in metrics.research_questions:
        lines += _question(rq, QUESTION_TITLES.get(rq.id, rq.id), metrics)
    lines += _tokens(metrics)
    lines += _caching(metrics)
    lines += _failure_modes(metrics)
    lines += _failed_trials(facts)
    lines += _retries(metrics)
    lines += _limitations(manifest, metrics)
    lines += _receipts(manifest, metrics)
    return "\n".join(lines).rstrip("\n") + "\n"
