"""The Horizon page's data: the dose-response section of a run's `AggregateMetrics` (success and stale-action rate
against the horizon per condition, slopes and crossing horizons) as chart points and table rows. Plain Python, no
Streamlit: the page script (``views/horizon.py``) only lays them out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta._words import plural
from contextdelta.report import (
    DOSE_METRICS,
    AggregateMetrics,
    HorizonCurve,
    HorizonPoint,
    crossing_text,
    pct,
    slope_text,
)
from contextdelta.rundir import RunManifest
from contextdelta.stats import EstimateStatus

DOSE_LABELS = {"stale_action": "stale-action rate", "success": "success"}
"""The rates on the curves: metric key -> label."""
ALL_TASKS = "all tasks with a horizon"
"""The subset label of the curves over every task with a horizon (the others are hazards)."""


def dose_subsets(metrics: AggregateMetrics) -> list[str]:
    """The subsets the run has curves for: `ALL_TASKS`, then each hazard when the tasks with a horizon have several
    (empty when the run has no dose-response section)."""
    dose = metrics.dose_response
    if dose is None:
        return []
    return [ALL_TASKS, *(dose.hazards if len(dose.hazards) > 1 else [])]


def no_dose_response(manifest: RunManifest) -> str:
    """Why a run has no dose-response section, for the Horizon page (markdown): its tasks have horizons but none of
    them has a finished episode yet, or none of its tasks has one."""
    horizons = sorted({t.horizon for t in manifest.tasks if t.horizon is not None})
    if horizons:
        with_horizon = sum(1 for t in manifest.tasks if t.horizon is not None)
        return (
            f"Nothing to chart yet: {with_horizon} of the run's {plural(len(manifest.tasks), 'task')} "
            f"{'has' if with_horizon == 1 else 'have'} a horizon "
            f"(h={', '.join(str(h) for h in horizons)}), and none of them has a finished episode yet. The curves "
            "appear as their episodes finish; reload the page."
        )
    return (
        "This run has no dose-response: none of its tasks has a horizon. Generated tasks carry one "
        "(`contextdelta generate-tasks`, the `horizon` suite: `run-benchmark --tasks tasks/horizon`)."
    )


def _curves(metrics: AggregateMetrics, subset: str) -> list[HorizonCurve]:
    dose = metrics.dose_response
    if dose is None:
        return []
    hazard = None if subset == ALL_TASKS else subset
    return [c for c in dose.curves if c.hazard == hazard]


def dose_points(metrics: AggregateMetrics, metric: str, subset: str = ALL_TASKS) -> list[dict[str, Any]]:
    """One point per condition and horizon of ``subset``'s tasks (whether or not the condition has episodes
    there) of ``metric``, with its interval. A point without a value has ``rate``, ``low`` and ``high`` None,
    ``segment`` None and ``no_data`` saying why; the points with a value carry ``segment``, the number of their
    unbroken run of horizons within the condition (a line joins the points of one segment only, so it never draws
    a trend through a horizon without data)."""
    if metric not in DOSE_METRICS:
        raise ValueError(f"unknown dose-response metric {metric!r}; known: {', '.join(DOSE_METRICS)}")
    dose = metrics.dose_response
    if dose is None:
        return []
    decimals = metrics.analysis.rate_decimals
    curves = _curves(metrics, subset)
    # the horizons of the subset's tasks, as the report's tables have them (a hazard's tasks may lack some of the
    # run's horizons: no gap there, nothing was planned)
    horizons = sorted({p.horizon for c in curves for p in c.points})
    rows: list[dict[str, Any]] = []
    for c in curves:
        at = {p.horizon: p for p in c.points}
        segment, previous_known = 0, False
        for horizon in horizons:
            point = at.get(horizon)
            estimate = point.rates[metric] if point is not None else None
            known = estimate is not None and estimate.estimate is not None
            if known and not previous_known:
                segment += 1
            previous_known = known
            rows.append(
                {
                    "condition": c.condition.label,
                    "strategy": c.condition.strategy,
                    "protection_mode": c.condition.protection_mode,
                    "horizon": horizon,
                    "rate": estimate.estimate if estimate is not None else None,
                    "low": estimate.low if estimate is not None else None,
                    "high": estimate.high if estimate is not None else None,
                    "interval": pct(estimate, decimals) if estimate is not None else "no data",
                    "tasks": point.tasks if point is not None else 0,
                    "episodes": point.episodes if point is not None else 0,
                    "status": estimate.status.value if estimate is not None else EstimateStatus.NO_DATA.value,
                    "segment": segment if known else None,
                    "no_data": "" if known else _no_data_reason(point, metric),
                }
            )
    return rows


def _no_data_reason(point: HorizonPoint | None, metric: str) -> str:
    if point is None or not point.episodes:
        return "no episodes"
    if point.failed_trials == point.episodes:
        return f"only failed trials ({plural(point.episodes, 'episode')})"
    return f"no {DOSE_LABELS[metric]} verdict"


def dose_gaps(points: Sequence[dict[str, Any]]) -> list[str]:
    """Per condition that lacks a value at some horizon (`dose_points` rows): which horizons, and why, e.g.
    ``last_n / unprotected: h=4, 8 (no episodes)``. Empty when every condition has a value at every horizon."""
    gaps: dict[str, dict[str, list[int]]] = {}
    for row in points:
        if row["rate"] is None:
            gaps.setdefault(row["condition"], {}).setdefault(row["no_data"], []).append(row["horizon"])
    return [
        f"{condition}: "
        + "; ".join(f"h={', '.join(str(h) for h in horizons)} ({why})" for why, horizons in reasons.items())
        for condition, reasons in gaps.items()
    ]


def dose_summary_rows(metrics: AggregateMetrics, subset: str = ALL_TASKS) -> list[dict[str, Any]]:
    """Per condition on ``subset``'s tasks: each rate's logistic slope per doubling of the horizon and the first
    horizon whose stale-action rate exceeds the threshold, with their intervals (the report's wording)."""
    dose = metrics.dose_response
    if dose is None:
        return []
    threshold = f"{100 * dose.crossing_threshold:g}%"
    return [
        {
            "condition": c.condition.label,
            **{f"slope per doubling ({DOSE_LABELS[m]})": slope_text(c.slopes[m]) for m in DOSE_METRICS},
            f"first horizon above {threshold} stale": crossing_text(c.stale_crossing),
        }
        for c in _curves(metrics, subset)
    ]


__all__ = [
    "ALL_TASKS",
    "DOSE_LABELS",
    "dose_gaps",
    "dose_points",
    "dose_subsets",
    "dose_summary_rows",
    "no_dose_response",
]
