"""Conditions: the strategy x protection-mode rates (success, stale action, harmful action) with their bootstrap
intervals (or exact bounds), each strategy's paired difference from full_history, pass^k, flip rates, token cost,
the rates per hazard and per world, and the task-level comparisons of the research questions. Every number is
the report's (``aggregate_metrics.json``)."""

from __future__ import annotations

import streamlit as st

from contextdelta.dashboard import _charts, _ui
from contextdelta.dashboard._text import code, plain
from contextdelta.dashboard.tables import (
    BREAKDOWN_CHOICES,
    CHART_METRICS,
    baseline_difference_points,
    breakdown_modes,
    breakdown_rows,
    comparison_rows,
    condition_rows,
    control_rows,
    rate_matrix,
    rate_points,
    token_reduction_rows,
    uncharted,
    uncharted_differences,
)
from contextdelta.report import BASELINE_STRATEGY, CONTROL_INTRO

st.title("Conditions")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
metrics = run.metrics
main = metrics.episodes.main_matrix
episodes = f"{metrics.episodes.finished} of {metrics.episodes.planned} episodes" + (
    f" (control episodes included; main matrix, the conditions below: {main.finished} finished, {main.succeeded} "
    "succeeded)"
    if main is not None
    else ""
)
st.caption(
    f"Run group {code(run.run_group_id)} · model {code(run.manifest.provider.model)} · "
    f"status {run.manifest.status.value} · {episodes} · {int(100 * metrics.analysis.confidence)}% "
    f"hierarchical task-cluster bootstrap intervals ({metrics.analysis.resamples:,} resamples; exact Clopper-Pearson "
    f"bounds over tasks where every task agrees) · source: {run.metrics_source}"
)
# the report's warnings (failed trials, few tasks) before any number; a shard is already said by the notice above
for warning in metrics.warnings:
    if warning.code != "shard" or run.partial is None:
        st.warning(f"**{warning.code}**: {plain(warning.message)}")

points = rate_points(metrics)
if not any(p["rate"] is not None for p in points):
    st.info("No condition has a finished episode yet: nothing to chart.")
else:
    st.altair_chart(_charts.rate_chart(points, [label for _, label in CHART_METRICS]))
    missing = uncharted(points)
    if missing:
        st.caption(
            "Not in the chart, no value (no finished episode, or for the safety rates no episode with a verdict: "
            "only failed trials): " + "; ".join(plain(m) for m in missing)
        )

st.subheader("Difference from full_history")
differences = baseline_difference_points(metrics)
if any(p["difference"] is not None for p in differences):
    st.altair_chart(
        _charts.difference_chart(
            differences, title="strategy - full_history (pp, task means)", metrics=[m for _, m in CHART_METRICS]
        )
    )
    missing = uncharted_differences(differences)
    if missing:
        st.caption(
            "Not in the chart, no value (no task with an episode with a verdict in both conditions): "
            + "; ".join(plain(m) for m in missing)
        )
    st.caption(
        "Each strategy minus full_history in the same protection mode, paired by task (per task the mean over its "
        "repeats), with its task-cluster bootstrap interval: the research question RQ1 comparisons of the "
        "report, whose tests are in the task-level comparisons below."
    )
elif BASELINE_STRATEGY in run.manifest.strategies and len(run.manifest.strategies) > 1:
    others = [code(s) for s in run.manifest.strategies if s != BASELINE_STRATEGY]
    st.info(
        f"The run pairs {', '.join(others)} with full_history in each protection mode, but no pair has a value yet: "
        "no task has an episode with a verdict in both conditions (episodes not finished yet, or failed trials: see "
        "the per-condition table)."
    )
else:
    st.info(
        "Nothing to compare with full_history: the run does not have full_history and another strategy in the same "
        "protection mode."
    )

st.subheader("Rates by strategy and protection mode")
for tab, (key, _) in zip(st.tabs([label for _, label in CHART_METRICS]), CHART_METRICS, strict=True):
    with tab:
        st.dataframe(
            rate_matrix(metrics, key),
            hide_index=True,
            height="content",
            column_config={"strategy": _ui.label_column("strategy")},
        )

st.subheader("Per condition: rates, pass^k and token cost")
st.dataframe(
    condition_rows(metrics),
    hide_index=True,
    height="content",
    column_config={"condition": _ui.label_column("condition")},
)
if controls := control_rows(metrics):  # a run with --controls: the report's control table, as it prints it
    st.subheader("Control condition: nothing changes")
    st.caption(CONTROL_INTRO)  # the harness's own text (markdown: its flag in code)
    st.dataframe(
        controls,
        hide_index=True,
        height="content",
        column_config={"condition (control)": _ui.label_column("condition (control)")},
    )
reductions = token_reduction_rows(metrics)
if reductions:
    with st.expander("Token reduction versus full_history (paired episodes)"):
        st.dataframe(reductions, hide_index=True)

st.subheader("Per hazard and per world")
if metrics.breakdowns:
    left, middle, right = st.columns([2, 3, 4])
    dimension = str(left.radio("breakdown", ["hazard", "world"], horizontal=True, key="cd_breakdown_dimension"))
    modes = breakdown_modes(metrics)
    mode = str(middle.radio("protection mode", modes, horizontal=True, key="cd_breakdown_mode"))
    labels = {label: key for key, label in BREAKDOWN_CHOICES}
    chosen = str(right.radio("rate", list(labels), horizontal=True, key="cd_breakdown_metric"))
    st.dataframe(
        breakdown_rows(metrics, dimension, labels[chosen], mode),
        hide_index=True,
        height="content",
        column_config={dimension: _ui.label_column(dimension)},
    )
    st.caption(
        f"The {chosen} rate of each strategy ({plain(mode)}) on the tasks of one {dimension}: few tasks per row, so "
        "read the intervals."
    )
else:
    st.info("No finished episode yet: no breakdown.")

st.subheader("Task-level comparisons")
comparisons = comparison_rows(metrics)
if comparisons:
    st.dataframe(
        comparisons,
        hide_index=True,
        height="content",
        column_config={
            "question": st.column_config.TextColumn("question", width=64, pinned=True),
            "comparison": _ui.label_column("comparison", width=300),
            "difference a - b (task means)": st.column_config.TextColumn("difference a - b", width=160),
            "p (Holm)": st.column_config.TextColumn("p (Holm)", width=70),
            "p (sign-flip)": st.column_config.TextColumn("p (sign-flip)", width=90),
            "discordant tasks": st.column_config.NumberColumn("discordant", width=75),
            "discordant stories": st.column_config.NumberColumn("discordant stories", width=75),
            "a higher": st.column_config.NumberColumn("a higher", width=65),
            "b higher": st.column_config.NumberColumn("b higher", width=65),
        },
    )
    stories = metrics.stories
    st.caption(
        (
            "The unit is the task: per task the mean of each condition over its repeats; the test is an exact "
            "sign-flip test over tasks, Holm-adjusted within each research question over its testable comparisons "
            "(no discordant task: not testable)."
            if stories is None
            else f"The unit is the story: these {stories.tasks} tasks tell {stories.stories} stories (a task family's "
            "story at several horizons); per task the mean of each condition over its repeats, the test an exact "
            "sign-flip test over stories (a story's tasks flipped together), Holm-adjusted within each research "
            "question over its testable comparisons (no discordant story: not testable)."
        )
        + " 'both' / 'only a' / 'only b' / 'neither' count episode pairs: a description only."
    )
elif not run.episodes:
    st.info("No comparison yet: the run has no finished episode.")
else:
    st.info("No comparison applies: the run lacks the conditions the research questions pair.")
with st.expander("Research questions and their Holm families"):
    for q in metrics.research_questions:
        not_run = f" (not run: {', '.join(code(c) for c in q.not_run)})" if q.not_run else ""
        untestable = f" Not testable: {', '.join(code(c) for c in q.not_testable)}." if q.not_testable else ""
        family = ", ".join(code(c) for c in q.family) or "none"
        st.markdown(f"**{plain(q.id)}**: {plain(q.question)}{not_run} Family: {family}.{untestable}")
