"""Failure atlas: every failed episode with its failure mode and cause, filterable by failure mode, world,
strategy, protection mode, task and hazard. Every filter lives in the URL, so a link reproduces the view."""

from __future__ import annotations

import streamlit as st

from contextdelta.attribution import MODE_DESCRIPTIONS, MODE_PRECEDENCE
from contextdelta.dashboard import _ui
from contextdelta.dashboard.data import (
    ATLAS_FILTERS,
    AtlasFilter,
    failure_mode_counts,
    filter_failures,
    filter_from_query,
    filter_options,
    filter_query,
)

st.title("Failure atlas")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
failures = list(run.failures)
st.caption(
    f"Run group `{run.run_group_id}`: {len(failures)} failed episodes of {len(run.episodes)} finished. Each failure "
    "has one failure mode; the decisive action is the first action that counts against a grader."
)
if not failures:
    st.success("No failed episode in this run.")
    st.stop()

options = filter_options(failures)
from_url, ignored = filter_from_query({k: st.query_params.get_all(k) for k in st.query_params}, options)
if ignored:
    st.warning(f"Ignored filter values this run does not have: {', '.join(ignored)}")


def _key(param: str) -> str:
    return f"cd_atlas_{param}"


def _current() -> AtlasFilter:
    return AtlasFilter({f.param: tuple(st.session_state.get(_key(f.param), ())) for f in ATLAS_FILTERS})


def _sync_url() -> None:
    _ui.set_query({_ui.RUN_PARAM: run.run_group_id, **filter_query(_current())})


for f in ATLAS_FILTERS:  # the URL decides what is selected when the page runs (a pasted link, a reload)
    st.session_state[_key(f.param)] = list(from_url.values(f.param))
columns = st.columns(3)
for position, f in enumerate(ATLAS_FILTERS):
    with columns[position % 3]:
        st.multiselect(f.label, options[f.param], key=_key(f.param), on_change=_sync_url, placeholder="all")
atlas_filter = _current()
_sync_url()

shown = filter_failures(failures, atlas_filter)
st.markdown(f"**{len(shown)} of {len(failures)} failures**" + (" match the filters." if atlas_filter.active else "."))
if not shown:
    st.info("No failure matches these filters.")
    st.stop()
rows = [r.row() for r in shown]
for row in rows:
    row["timeline"] = f"episode?{_ui.RUN_PARAM}={run.run_group_id}&{_ui.EPISODE_PARAM}={row['episode']}"
st.dataframe(
    rows,
    hide_index=True,
    column_order=["episode", "timeline", *[k for k in rows[0] if k not in ("episode", "timeline")]],
    column_config={"timeline": st.column_config.LinkColumn("timeline", display_text="open")},
)

picked = st.selectbox("Open the timeline of", [r.run_id for r in shown], key="cd_atlas_open")
st.page_link(
    "views/episode.py",
    label=f"Episode timeline of {picked}",
    icon=":material/timeline:",
    query_params={_ui.RUN_PARAM: run.run_group_id, _ui.EPISODE_PARAM: picked},
)

with st.expander("Failures per mode and condition"):
    st.dataframe(failure_mode_counts(shown), hide_index=True)
with st.expander("What the failure modes mean"):
    for mode in MODE_PRECEDENCE:
        st.markdown(f"**`{mode.value}`**: {MODE_DESCRIPTIONS[mode]}")
