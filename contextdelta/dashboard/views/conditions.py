"""Conditions: the strategy x protection-mode matrix of success, stale-action and harmful-action rates with their
bootstrap intervals (or exact bounds), pass^k, flip rates, token cost, the rates per hazard and per world, and the
task-level comparisons of the research questions."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from contextdelta.dashboard import _ui
from contextdelta.dashboard.data import (
    BREAKDOWN_CHOICES,
    CHART_METRICS,
    breakdown_rows,
    comparison_rows,
    condition_rows,
    rate_matrix,
    rate_points,
    token_reduction_rows,
)

MODE_COLOURS = {"unprotected": "#c0392b", "freshness_contract": "#1f77b4"}

st.title("Conditions")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
metrics = run.metrics
st.caption(
    f"Run group `{run.run_group_id}` · model `{run.manifest.provider.model}` · status {run.manifest.status.value} · "
    f"{metrics.episodes.finished} of {metrics.episodes.planned} episodes · {int(100 * metrics.analysis.confidence)}% "
    f"hierarchical task-cluster bootstrap intervals ({metrics.analysis.resamples:,} resamples; exact Clopper-Pearson "
    f"bounds over tasks where every task agrees) · source: {run.metrics_source}"
)

points = pd.DataFrame(rate_points(metrics))
known = points.dropna(subset=["rate"])
if known.empty:
    st.info("No condition has a finished episode yet: nothing to chart.")
else:
    base = alt.Chart(known).encode(
        y=alt.Y("strategy:N", title=None),
        yOffset=alt.YOffset("protection_mode:N"),
        color=alt.Color(
            "protection_mode:N",
            title="protection mode",
            scale=alt.Scale(domain=list(MODE_COLOURS), range=list(MODE_COLOURS.values())),
            legend=alt.Legend(orient="bottom"),
        ),
    )
    bars = base.mark_errorbar(ticks=True, thickness=2).encode(
        x=alt.X("low:Q", title="rate", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
        x2="high:Q",
    )
    dots = base.mark_point(filled=True, size=70).encode(
        x=alt.X("rate:Q", scale=alt.Scale(domain=[0, 1])),
        tooltip=["condition", "metric", "interval", "episodes", "tasks", "status"],
    )
    chart = (
        alt.layer(bars, dots)
        .properties(width=230, height=alt.Step(16))
        .facet(column=alt.Column("metric:N", title=None, sort=[label for _, label in CHART_METRICS]))
    )
    st.altair_chart(chart)

st.subheader("Rates by strategy and protection mode")
st.dataframe(rate_matrix(metrics), hide_index=True, height="content")

st.subheader("Per condition: rates, pass^k and token cost")
st.dataframe(condition_rows(metrics), hide_index=True, height="content")
reductions = token_reduction_rows(metrics)
if reductions:
    with st.expander("Token reduction versus full_history (paired episodes)"):
        st.dataframe(reductions, hide_index=True)

st.subheader("Per hazard and per world")
if metrics.breakdowns:
    left, right = st.columns(2)
    dimension = left.radio("breakdown", ["hazard", "world"], horizontal=True, key="cd_breakdown_dimension")
    labels = dict((label, key) for key, label in BREAKDOWN_CHOICES)
    chosen = right.radio("rate", list(labels), horizontal=True, key="cd_breakdown_metric")
    st.dataframe(breakdown_rows(metrics, str(dimension), labels[str(chosen)]), hide_index=True, height="content")
    st.caption("Rates of each condition on the tasks of one hazard (world): few tasks per row, so read the intervals.")
else:
    st.info("No finished episode yet: no breakdown.")

st.subheader("Task-level comparisons")
comparisons = comparison_rows(metrics)
if comparisons:
    st.dataframe(comparisons, hide_index=True, height="content")
    st.caption(
        "The unit is the task: per task the mean of each condition over its repeats; the test is an exact sign-flip "
        "test over tasks, Holm-adjusted within each research question over its testable comparisons (no discordant "
        "task: not testable). 'both' / 'only a' / 'only b' / 'neither' count episode pairs: a description only."
    )
else:
    st.info("No comparison applies: the run lacks the conditions the research questions pair.")
with st.expander("Research questions and their Holm families"):
    for q in metrics.research_questions:
        not_run = f" (not run: {', '.join(q.not_run)})" if q.not_run else ""
        untestable = f" Not testable: {', '.join(q.not_testable)}." if q.not_testable else ""
        st.markdown(f"**{q.id}**: {q.question}{not_run} Family: {', '.join(q.family) or 'none'}.{untestable}")
