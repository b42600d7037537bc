"""The report's numbers as the dashboard's table rows and chart points (no Streamlit here).

Every number comes from `contextdelta.report.AggregateMetrics` (the Conditions page) or from a
`contextdelta.report.ComparisonReport` (the Compare page), formatted by the report's own helpers (`pct`, `pp`,
`pvalue`, `primary_pvalue`, `comparison_table`), so a cell reads as the same line of ``benchmark_report.md`` or
``contextdelta compare`` does. Column order puts what a reader looks for first (the effect, its p-values and
discordant tasks; the rates), so it stays in view on a 1366 px screen; the page scripts pin the row labels.
"""

from __future__ import annotations

from typing import Any

from contextdelta.report import (
    BASELINE_STRATEGY,
    AggregateMetrics,
    ComparisonReport,
    ConditionMetrics,
    common_counts,
    comparison_table,
    control_table,
    counted,
    holm_pvalue,
    num,
    pct,
    percent,
    pp,
    primary_pvalue,
    pvalue,
)
from contextdelta.stats import Estimate

CHART_METRICS: tuple[tuple[str, str], ...] = (
    ("success", "success"),
    ("stale_action", "stale action"),
    ("harmful_action", "harmful action"),
)
"""The rates of the Conditions page's chart and matrices: (metric key, label)."""

METRIC_LABELS: dict[str, str] = dict(CHART_METRICS)
"""A compared metric's label (the chart facets)."""

BREAKDOWN_CHOICES: tuple[tuple[str, str], ...] = CHART_METRICS
"""The rates the breakdown tables offer: (metric key, label)."""


def _modes(metrics: AggregateMetrics) -> list[str]:
    return list(dict.fromkeys(c.condition.protection_mode for c in metrics.conditions))


def rate_points(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """One point per condition and chart metric with its interval (``rate``/``low``/``high`` None: no data)."""
    decimals = metrics.analysis.rate_decimals
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
                    "interval": pct(e, decimals),
                    "episodes": e.n_episodes,
                    "tasks": e.n_tasks,
                    "status": e.status.value,
                }
            )
    return points


def uncharted(points: list[dict[str, Any]]) -> list[str]:
    """The `rate_points` without a value (the chart leaves them out), one line per metric naming its conditions:
    ``"stale action: full_history / unprotected, last_n / unprotected"``; empty when every point has one."""
    missing: dict[str, list[str]] = {}
    for p in points:
        if p["rate"] is None:
            missing.setdefault(p["metric"], []).append(p["condition"])
    return [f"{metric}: {', '.join(conditions)}" for metric, conditions in missing.items()]


def uncharted_differences(points: list[dict[str, Any]]) -> list[str]:
    """The difference points (`baseline_difference_points`, `compare_difference_points`) without a value, which the
    difference chart leaves out: one line per metric naming ``label / group``; empty when every point has one."""
    missing: dict[str, list[str]] = {}
    for p in points:
        if p["difference"] is None:
            missing.setdefault(p["metric"], []).append(f"{p['label']} / {p['group']}")
    return [f"{metric}: {', '.join(labels)}" for metric, labels in missing.items()]


def rate_matrix(metrics: AggregateMetrics, metric: str) -> list[dict[str, Any]]:
    """The strategy x protection-mode matrix of one rate: one row per strategy, one column per mode, cells
    ``"62.5% [40.0%, 80.0%]"`` (``"not run"`` for a condition outside the run)."""
    modes = _modes(metrics)
    strategies = list(dict.fromkeys(c.condition.strategy for c in metrics.conditions))
    by_condition = {(c.condition.strategy, c.condition.protection_mode): c for c in metrics.conditions}
    decimals = metrics.analysis.rate_decimals
    rows = []
    for s in strategies:
        row: dict[str, Any] = {"strategy": s}
        for m in modes:
            found = by_condition.get((s, m))
            row[m] = pct(found.rates[metric], decimals) if found is not None else "not run"
        rows.append(row)
    return rows


def _pass_k_columns(c: ConditionMetrics, decimals: int) -> dict[str, str]:
    """pass^k and its unbiased estimate as the report's per-condition table prints them."""
    out: dict[str, str] = {}
    for key in sorted(c.pass_k, key=int):
        p = c.pass_k[key]
        out[f"pass^{key}"] = counted(p.all_pass, decimals, c.tasks, c.episodes)
        if int(key) > 1:
            out[f"pass^{key} unbiased"] = pct(p.unbiased, decimals)
    return out


def _total(value: float, known: int, unknown: int, digits: int = 0, why_unknown: str = "no usage reported") -> str:
    """A condition's total as the report words it: "no data" without an episode to count, "unknown (why)" where
    no episode's value is known, else the sum and how many episodes it leaves out."""
    if not known and not unknown:
        return "no data"
    if not known:
        return f"unknown ({why_unknown})"
    text = f"{value:,.{digits}f}"
    return text + (f" ({unknown} unknown)" if unknown else "")


def condition_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Per condition: the three rates, pass^k, flip rate, token cost (mean per episode and total), then counts."""
    d = metrics.analysis.rate_decimals
    rows = []
    for c in metrics.conditions:
        tokens, cost = c.totals["total_tokens"], c.totals["cost_usd"]
        rows.append(
            {
                "condition": c.condition.label,
                "success": pct(c.rates["success"], d),
                "stale action": pct(c.rates["stale_action"], d),
                "harmful action": pct(c.rates["harmful_action"], d),
                **_pass_k_columns(c, d),
                "flip rate (success)": counted(c.flip_rates["success"], d, c.tasks, c.episodes),
                "tokens / episode": num(c.means["total_tokens"]),
                "cost (USD)": _total(cost.total, cost.n_known, cost.n_unknown, 4, "no price for the model"),
                "episodes": c.episodes,
                "tasks": c.tasks,
                "failed trials": c.failed_trials,
                "episodes with a verdict": c.episodes_with_verdict,
                "agent tokens / episode": num(c.means["agent_tokens"]),
                "summary tokens / episode": num(c.means["summary_tokens"]),
                "total tokens": _total(tokens.total, tokens.n_known, tokens.n_unknown),
            }
        )
    return rows


def control_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """The report's control table (``--controls``), one dict a control condition: each beside its main condition;
    empty in a run without control episodes."""
    header, rows = control_table(metrics)
    return [dict(zip(header, row, strict=True)) for row in rows]


def token_reduction_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Token reduction of each reduced strategy versus full_history, paired (percent of the baseline)."""
    d = metrics.analysis.rate_decimals
    return [
        {
            "condition": t.condition.label,
            "baseline": t.baseline.label,
            "agent tokens saved": pct(t.agent_tokens, d),
            "agent + summary tokens saved": pct(t.total_tokens, d),
        }
        for t in metrics.token_reduction
    ]


def comparison_rows(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """Every comparison of every research question: the task-level effect and test first, then the rates, the
    failed-trial pairs, the design's detectable difference, and the episode-level 2x2 counts (a description)."""
    d, alpha = metrics.analysis.rate_decimals, metrics.analysis.alpha
    detectable = f"detectable ({100 * metrics.analysis.target_power:g}% power)"
    units = "tasks" if metrics.stories is None else "stories"  # the test's unit (stories where tasks share them)
    rows = []
    for q in metrics.research_questions:
        for c in q.comparisons:
            t, e = c.test, c.episodes
            found = c.detectable.difference
            rows.append(
                {
                    "question": q.id,
                    "comparison": c.name,
                    "difference a - b (task means)": pp(c.difference, d),
                    "p (Holm)": pvalue(t.pvalue_holm, alpha),
                    "p (sign-flip)": primary_pvalue(t, alpha),
                    f"discordant {units}": t.n_discordant,
                    "a higher": t.n_positive,
                    "b higher": t.n_negative,
                    units: t.n_tasks,
                    "rate a": pct(c.rate_a, d),
                    "rate b": pct(c.rate_b, d),
                    "metric": c.metric,
                    "pairs with a failed trial": c.failed_pairs,
                    "p without them (Holm)": holm_pvalue(c.sensitivity.test, alpha) if c.sensitivity else "-",
                    detectable: "no data"
                    if c.detectable.n_tasks == 0  # nothing to simulate from
                    else ("none" if found is None else f"{percent(found)} pp"),
                    "episode pairs": e.n_pairs,
                    "both": e.both,
                    "only a": e.only_a,
                    "only b": e.only_b,
                    "neither": e.neither,
                }
            )
    return rows


def _difference_point(
    label: str, group: str, metric: str, difference: Estimate, holm: float | None, decimals: int, alpha: float
) -> dict[str, Any]:
    return {
        "label": label,
        "group": group,
        "metric": metric,
        "difference": difference.estimate,
        "low": difference.low,
        "high": difference.high,
        "interval": pp(difference, decimals),
        "p (Holm)": pvalue(holm, alpha),
        "tasks": difference.n_tasks,
        "status": difference.status.value,
    }


def baseline_difference_points(metrics: AggregateMetrics) -> list[dict[str, Any]]:
    """The paired difference of each strategy from full_history in the same protection mode, with its interval:
    every research-question comparison whose condition b is full_history in a's mode (RQ1: the stale-action
    indicator), as the report prints it. ``label`` is the strategy, ``group`` the mode; ``difference``, ``low``
    and ``high`` are None where there is no data."""
    d = metrics.analysis.rate_decimals
    points = []
    for q in metrics.research_questions:
        for c in q.comparisons:
            if c.b.strategy != BASELINE_STRATEGY or c.a.protection_mode != c.b.protection_mode:
                continue
            metric = METRIC_LABELS.get(c.metric, c.metric)
            point = _difference_point(
                c.a.strategy, c.a.protection_mode, metric, c.difference, c.test.pvalue_holm, d, metrics.analysis.alpha
            )
            points.append({**point, "question": q.id, "comparison": c.name})
    return points


def breakdown_rows(
    metrics: AggregateMetrics, dimension: str, metric: str, mode: str | None = None
) -> list[dict[str, Any]]:
    """One row per hazard (or world): each condition's rate of ``metric`` on its tasks (with its counts where they
    differ from the row's), then the row's tasks and episodes per condition. With ``mode``, only that protection
    mode's conditions, headed by their strategy."""
    d = metrics.analysis.rate_decimals
    rows = []
    for b in metrics.breakdowns:
        if b.dimension != dimension:
            continue
        cells = [cell for cell in b.cells if mode is None or cell.condition.protection_mode == mode]
        # the row's counts as the report states them: those most of its cells rest on (a cell gives its own where
        # they differ: failed trials, which have no safety verdict, or a condition that ran fewer episodes)
        tasks, episodes = common_counts([cell.rates[metric] for cell in cells]) or (b.tasks, 0)
        row: dict[str, Any] = {dimension: b.value}
        for cell in cells:
            label = cell.condition.strategy if mode is not None else cell.condition.label
            row[label] = counted(cell.rates[metric], d, tasks, episodes)
        row |= {"tasks": tasks, "episodes per condition": episodes}
        rows.append(row)
    return rows


def breakdown_modes(metrics: AggregateMetrics) -> list[str]:
    """The protection modes of the run, in the report's order (the breakdown's mode choices)."""
    return _modes(metrics)


# ---- the Compare page -----------------------------------------------------------------------------------------

COMPARE_KEY_COLUMNS = (0, 3, 6, 5, 4, 1, 2, 7, 8)
"""`comparison_table`'s columns in the order the Compare page shows them: condition, difference, p (Holm),
p (sign-flip), discordant tasks, the two rates, the episode pairs, the failed-trial pairs and the row without them."""


def compare_tables(report: ComparisonReport) -> list[tuple[str, list[dict[str, str]]]]:
    """Per compared metric: its name and its table, every cell from `comparison_table` (what ``contextdelta
    compare`` prints), the columns in `COMPARE_KEY_COLUMNS` order."""
    out = []
    for family in report.families:
        headers, rows = comparison_table(family, report.rate_decimals, report.alpha, report.stories is not None)
        out.append((family.metric, [{headers[i]: row[i] for i in COMPARE_KEY_COLUMNS} for row in rows]))
    return out


def compare_difference_points(report: ComparisonReport) -> list[dict[str, Any]]:
    """Run a minus run b per shared condition and metric, with its interval: the Compare page's chart."""
    points = []
    for family in report.families:
        for row in family.comparisons:
            c = row.comparison
            metric = METRIC_LABELS.get(family.metric, family.metric)
            point = _difference_point(
                row.condition.strategy,
                row.condition.protection_mode,
                metric,
                c.difference,
                c.test.pvalue_holm,
                report.rate_decimals,
                report.alpha,
            )
            points.append({**point, "comparison": row.condition.label})
    return points
