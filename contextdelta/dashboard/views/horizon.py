"""Horizon: the dose-response of a run on generated tasks: success and stale-action rate against the horizon per
strategy and protection mode, with task-cluster intervals, each rate's logistic slope and the first horizon whose
stale-action rate exceeds 10%, all from the run's aggregate metrics."""

from __future__ import annotations

import streamlit as st

from contextdelta.dashboard import _ui
from contextdelta.dashboard._charts import horizon_chart
from contextdelta.dashboard._text import code, plain
from contextdelta.dashboard.dose_response import (
    DOSE_LABELS,
    dose_gaps,
    dose_points,
    dose_subsets,
    dose_summary_rows,
    no_dose_response,
)

st.title("Horizon")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
metrics = run.metrics
dose = metrics.dose_response
if dose is None:
    st.info(no_dose_response(run.manifest))
    st.stop()

st.caption(
    f"Run group {code(run.run_group_id)} · model {code(run.manifest.provider.model)} · {dose.tasks} tasks with a "
    "horizon "
    f"(horizons {', '.join(str(h) for h in dose.horizons)}) · {int(100 * metrics.analysis.confidence)}% task-cluster "
    f"bootstrap intervals ({metrics.analysis.resamples:,} resamples; exact Clopper-Pearson bounds over a horizon's "
    f"tasks where they all agree) · source: {run.metrics_source}"
)
left, right = st.columns(2)
labels = {label: key for key, label in DOSE_LABELS.items()}
chosen = left.radio("rate", list(labels), horizontal=True, key="cd_horizon_metric")
subset = right.selectbox("tasks", dose_subsets(metrics), key="cd_horizon_subset")
metric = labels[str(chosen)]

points = dose_points(metrics, metric, str(subset))
gaps = dose_gaps(points)
if all(p["rate"] is None for p in points):
    st.info("No condition has an episode with a value on these tasks yet: nothing to chart.")
else:
    st.altair_chart(horizon_chart(points, title=str(chosen), gaps=gaps))
    if gaps:
        st.caption("No data (no line is drawn across these horizons): " + "; ".join(plain(g) for g in gaps))

st.subheader("Slopes and crossing horizons")
st.dataframe(dose_summary_rows(metrics, str(subset)), hide_index=True, height="content")
st.caption(
    "Slope: the maximum-likelihood logistic regression of the per-horizon rate on log2(horizon), each horizon "
    "weighted by its tasks (repeats add no weight): log-odds per doubling of the horizon, with a percentile interval "
    "from the same bootstrap (tasks resampled within their horizon). +inf / -inf: separated (0 below a step, 1 above "
    "it); not estimable: no variation. First horizon above the threshold: the smallest horizon whose stale-action "
    "rate exceeds it, with its interval over the resamples, or not reached."
)
