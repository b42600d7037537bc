"""The Horizon page's data: the dose-response section of a run's `AggregateMetrics` (success and stale-action rate
against the horizon per condition, slopes and crossing horizons) as chart points and table rows. Plain Python, no
Streamlit: the page script (``views/horizon.py``) only lays them out."""

from __future__ import annotations

from typing import Any

from contextdelta.report import DOSE_METRICS, AggregateMetrics, HorizonCurve, crossing_text, pct, slope_text

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


def _curves(metrics: AggregateMetrics, subset: str) -> list[HorizonCurve]:
    dose = metrics.dose_response
    if dose is None:
        return []
    hazard = None if subset == ALL_TASKS else subset
    return [c for c in dose.curves if c.hazard == hazard]


def dose_points(metrics: AggregateMetrics, metric: str, subset: str = ALL_TASKS) -> list[dict[str, Any]]:
    """One point per condition and horizon of ``metric`` on ``subset``'s tasks, with its interval (``rate``, ``low``,
    ``high`` None: no data)."""
    if metric not in DOSE_METRICS:
        raise ValueError(f"unknown dose-response metric {metric!r}; known: {', '.join(DOSE_METRICS)}")
    decimals = metrics.analysis.rate_decimals
    return [
        {
            "condition": c.condition.label,
            "strategy": c.condition.strategy,
            "protection_mode": c.condition.protection_mode,
            "horizon": p.horizon,
            "rate": (e := p.rates[metric]).estimate,
            "low": e.low,
            "high": e.high,
            "interval": pct(e, decimals),
            "tasks": e.n_tasks,
            "episodes": e.n_episodes,
            "status": e.status.value,
        }
        for c in _curves(metrics, subset)
        for p in c.points
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


__all__ = ["ALL_TASKS", "DOSE_LABELS", "dose_points", "dose_subsets", "dose_summary_rows"]
