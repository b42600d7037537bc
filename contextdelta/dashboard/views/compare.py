"""Compare: two run groups (e.g. two models) condition by condition, the numbers of ``contextdelta compare``:
per shared condition and metric the task-level difference a - b with its interval, the exact sign-flip test over
tasks and its Holm adjustment; NOT COMPARABLE, with the reasons, when the task set, the system prompt or the tool
schemas differ. Both runs live in the URL (``?a=RUN&b=RUN``)."""

from __future__ import annotations

import streamlit as st

from contextdelta._words import plural
from contextdelta.dashboard import _charts, _ui
from contextdelta.dashboard._text import code, plain
from contextdelta.dashboard.data import RunLoadError
from contextdelta.dashboard.tables import (
    METRIC_LABELS,
    compare_difference_points,
    compare_tables,
    uncharted_differences,
)
from contextdelta.report import NotComparable

st.title("Compare")
folder, runs = _ui.runs_or_stop()
readable = [s for s in runs if s.readable]
st.caption(
    "Two run groups, run a minus run b, in every condition both ran: the same numbers as `contextdelta compare "
    "RUN_A RUN_B`. Within each condition, per task the mean of each run over its repeats; the difference of task "
    "means with a cluster bootstrap interval and an exact sign-flip test, Holm-adjusted over the testable "
    "conditions of each metric. The unit is the task, or the story where tasks share one (the facts below say "
    "which)."
)
if not readable:
    st.info(f"No readable run directory in {code(folder)}.")
    st.stop()
_ui.warn_unknown_pair(readable)  # first: a link to a run not here says so, whatever the folder holds
if len(readable) == 1:
    st.info(
        f"{code(folder)} holds one readable run directory, {code(readable[0].name)}: a comparison needs two. Run "
        "the same tasks again (another model, another setting) into this folder, then pick both here."
    )
    st.stop()
a, b = _ui.select_run_pair(readable)  # `a`/`b` naming no run here: warned above
if a.path.resolve() == b.path.resolve():  # every difference would be 0 by construction; `compare` refuses it too
    st.error(
        f"Run a and run b are the same run directory, {code(a.run_group_id)}: a run compared with itself has every "
        "difference zero by construction. Pick two different run groups."
    )
    st.stop()
st.markdown(f"- a: {code(a.label)}, model {code(a.model)}\n- b: {code(b.label)}, model {code(b.model)}")
for side, summary in (("a", a), ("b", b)):  # a run that holds part of its plan: its side covers that part only
    notice = _ui.partial_notice_of(summary)
    if notice is not None:
        st.warning(f"Run {side}: {notice}")
try:
    report = _ui.cached_comparison(a.path, b.path)
except RunLoadError as exc:
    st.error(f"A run directory is malformed and cannot be compared.\n\n{code(exc)}")
    st.stop()
except NotComparable as exc:
    st.error(f"**NOT COMPARABLE**: {'; '.join(code(r) for r in exc.reasons)}")
    st.caption(
        "Two runs compare only when they ran the same task set (suite hash), the same system prompt and the same "
        "tool schemas, as `contextdelta compare` requires."
    )
    st.stop()

unit = (
    "unit of the intervals and tests: the task"
    if report.stories is None
    else f"unit of the intervals and tests: the story ({plural(report.stories, 'story', 'stories')}: a task family's "
    "story at several horizons counts once)"
)
facts = [
    f"task set (suite hash) {code(report.suite_sha256[:12])}; {report.resamples:,} resamples, seed {report.seed}",
    unit,
    *(f"note: {code(n)}" for n in report.notes),
    *(
        f"only in {side} (not compared): {', '.join(code(k.label) for k in keys)}"
        for side, keys in (("a", report.only_in_a), ("b", report.only_in_b))
        if keys
    ),
]
st.markdown("\n".join(f"- {line}" for line in facts))

points = compare_difference_points(report)
if any(p["difference"] is not None for p in points):
    chart = _charts.difference_chart(
        points, title="run a - run b (pp, task means)", metrics=list(METRIC_LABELS.values())
    )
    st.altair_chart(chart)
if points and (missing := uncharted_differences(points)):
    st.caption(
        "Not in the chart, no value (no task with an episode with a verdict in both runs): "
        + "; ".join(plain(m) for m in missing)
    )

# Shorter headers and widths, so condition, difference, p-values and discordant tasks fit a 1366 px screen; the
# cells are `comparison_table`'s.
SHORT = {
    "difference a - b (task means)": ("difference a - b", 190),
    "p (sign-flip over tasks)": ("p (sign-flip)", 100),
    "discordant tasks (a / b higher)": ("discordant (a / b higher)", 150),
    "rate a": ("rate a", 170),
    "rate b": ("rate b", 170),
    "episode pairs a-only / b-only (description)": ("episode pairs a-only / b-only", 200),
}
if not report.shared_conditions:  # once, not per metric; the facts above say why
    st.info("No shared condition: nothing to compare.")
    st.stop()
for metric, rows in compare_tables(report):
    st.subheader(METRIC_LABELS.get(metric, metric))
    config = {}
    for name in rows[0]:
        label, width = SHORT.get(name, (name, 110))
        config[name] = st.column_config.TextColumn(label, width=width)
    config["condition"] = _ui.label_column("condition", width=240)
    st.dataframe(rows, hide_index=True, height="content", column_config=config)
