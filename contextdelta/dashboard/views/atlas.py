"""Failure atlas: every failed episode with its failure mode and cause (the decisive action, what it relied on, the
hidden mutation), filterable by failure mode, world, strategy, protection mode, task and hazard. Every filter lives
in the URL, so a link reproduces the view."""

from __future__ import annotations

import streamlit as st

from contextdelta._words import plural
from contextdelta.attribution import MODE_DESCRIPTIONS, MODE_PRECEDENCE
from contextdelta.dashboard import _ui
from contextdelta.dashboard._text import code
from contextdelta.dashboard.data import ATLAS_FILTERS, failure_mode_counts, filter_options, filter_rows

# Column order: the cause first (in view on a 1366 px screen), the episode's coordinates after it; the episode id
# is in the timeline link. (A bare string here would be shown on the page: Streamlit's magic.)
COLUMNS = [
    "timeline",
    "failure mode",
    "control",
    "decisive action",
    "relied on",
    "hidden mutation",
    "task",
    "strategy",
    "protection mode",
    "repeat",
    "failed graders",
    "termination",
    "world",
    "hazard",
    "explanation",
]

st.title("Failure atlas")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
failures = list(run.failures)
controls = sum(1 for f in failures if f.control)
st.caption(
    f"Run group {code(run.run_group_id)}: {plural(len(failures), 'failed episode')} of {len(run.episodes)} "
    "finished"
    + (
        f" ({controls} of them in control conditions, column control: counted apart from the main matrix, as the "
        "report does)"
        if controls
        else ""
    )
    + ". Each failure has one failure mode; the decisive action is the first action that counts against a "
    "grader. Every episode, successes included, is on the Episodes page."
)
if not run.episodes:
    st.info(f"Run {code(run.run_group_id)} has no finished episode yet: no failure to show.")
    st.stop()
if not failures:
    st.success(f"No failed episode: all {plural(len(run.episodes), 'finished episode')} succeeded.")
    st.stop()

atlas_filter, _ = _ui.filter_bar(ATLAS_FILTERS, filter_options(failures), prefix="cd_atlas", run_id=run.name)
shown = filter_rows(failures, atlas_filter)
st.markdown(f"**{len(shown)} of {len(failures)} failures**" + (" match the filters." if atlas_filter.active else "."))
if not shown:
    st.info("No failure matches these filters.")
    st.stop()
rows = [r.row() for r in shown]
for row in rows:
    row["timeline"] = _ui.episode_link(run.name, row["episode"])
st.dataframe(
    rows,
    hide_index=True,
    column_order=[c for c in COLUMNS if c != "control" or controls],
    column_config={
        "timeline": st.column_config.LinkColumn("timeline", display_text="open", width=64, pinned=True),
        "failure mode": st.column_config.TextColumn("failure mode", width=190),
        "decisive action": st.column_config.TextColumn("decisive action", width=230),
        "relied on": st.column_config.TextColumn("relied on", width=190),
        "hidden mutation": st.column_config.TextColumn("hidden mutation", width=190),
        "explanation": st.column_config.TextColumn("explanation", width="large"),
    },
)

picked = st.selectbox("Open the timeline of", [r.run_id for r in shown], key="cd_atlas_open")
st.page_link(
    "views/episode.py",
    label=f"Episode timeline of {code(picked)}",
    icon=":material/timeline:",
    query_params={_ui.RUN_PARAM: run.name, _ui.EPISODE_PARAM: picked},
)

with st.expander("Failures per mode and condition"):
    st.dataframe(failure_mode_counts(shown), hide_index=True)
with st.expander("What the failure modes mean"):
    for mode in MODE_PRECEDENCE:
        st.markdown(f"**`{mode.value}`**: {MODE_DESCRIPTIONS[mode]}")
