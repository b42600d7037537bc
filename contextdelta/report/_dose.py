"""The dose-response section: success and stale-action rate against the horizon, per condition.

A task's horizon is its ``evaluator.family.horizon`` (generated tasks; see `contextdelta.tasks.families`), which the
run manifest records per task and ``verify`` re-derives from the task snapshot. Only tasks with a horizon count;
a run without any (the hand-written suite) has no section. Per condition, and per hazard when the tasks with a
horizon have several (families of different hazards respond differently: a superseded observation is visible in
the history until a window drops it, a hidden mutation never is): the rate at each horizon, the logistic slope of
each rate on log2(horizon), and the smallest horizon whose stale-action rate exceeds `CROSSING_THRESHOLD`, all from
one task-cluster bootstrap (`contextdelta.stats.dose_curves`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from contextdelta.report._conditions import DESIGN_METRIC
from contextdelta.report._context import MetricsContext
from contextdelta.report._models import ConditionKey, DoseResponse, HorizonCurve, HorizonPoint
from contextdelta.report._table import DOSE_METRICS
from contextdelta.stats import DoseInput, HorizonCrossing, dose_curves

CROSSING_THRESHOLD = 0.10
"""The stale-action rate whose first crossing along the horizon is reported."""

_Key = tuple[str | None, ConditionKey, str]
"""(hazard or None for all, condition, metric)."""


def dose_response_section(ctx: MetricsContext) -> DoseResponse | None:
    """The curves of every condition on the tasks with a horizon (and per hazard when there are several); None when
    no episode's task has a horizon."""
    table = ctx.table
    if table.horizon is None or not (table.horizon > 0).any():
        return None
    with_horizon = table.horizon > 0
    horizons = sorted({int(h) for h in table.horizon[with_horizon].tolist()})
    hazards = sorted(set(table.hazard[with_horizon].tolist()))
    subsets: list[str | None] = [None, *(hazards if len(hazards) > 1 else [])]
    inputs: dict[_Key, DoseInput] = {}
    cells: dict[tuple[str | None, ConditionKey], dict[int, npt.NDArray[np.int64]]] = {}
    for hazard in subsets:
        for k in ctx.keys:
            rows = ctx.rows((k.strategy, k.protection_mode))
            rows = rows[with_horizon[rows]]
            if hazard is not None:
                rows = rows[table.hazard[rows] == hazard]
            if not rows.size:
                continue
            by_horizon = {h: rows[table.horizon[rows] == h] for h in horizons}
            by_horizon = {h: r for h, r in by_horizon.items() if r.size}
            cells[(hazard, k)] = by_horizon
            for metric in DOSE_METRICS:
                samples = {h: table.sample(metric, r) for h, r in by_horizon.items()}
                designs = {h: table.sample(DESIGN_METRIC, r) for h, r in by_horizon.items() if samples[h].n_missing}
                threshold = CROSSING_THRESHOLD if metric == "stale_action" else None
                inputs[(hazard, k, metric)] = DoseInput(samples, designs, threshold)
    found = dose_curves(inputs, ctx.params)
    curves = []
    for (hazard, k), by_horizon in cells.items():
        points = [
            HorizonPoint(
                horizon=h,
                tasks=int(np.unique(table.task_id[r]).size),
                episodes=int(r.size),
                failed_trials=int(table.failed[r].sum()),
                rates={m: found[(hazard, k, m)].rates[h] for m in DOSE_METRICS},
            )
            for h, r in by_horizon.items()
        ]
        crossing = found[(hazard, k, "stale_action")].crossing
        assert isinstance(crossing, HorizonCrossing)
        curves.append(
            HorizonCurve(
                hazard=hazard,
                condition=k,
                points=points,
                slopes={m: found[(hazard, k, m)].slope for m in DOSE_METRICS},
                stale_crossing=crossing,
            )
        )
    return DoseResponse(
        horizons=horizons,
        tasks=int(np.unique(table.task_id[with_horizon]).size),
        tasks_without_horizon=int(np.unique(table.task_id[~with_horizon]).size),
        hazards=hazards,
        metrics=list(DOSE_METRICS),
        predictor="log2_horizon",
        crossing_threshold=CROSSING_THRESHOLD,
        curves=curves,
    )


__all__ = ["CROSSING_THRESHOLD", "dose_response_section"]
