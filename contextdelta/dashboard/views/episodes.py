"""Episodes: every episode of a run (successes, failures and failed trials), filterable by strategy, protection
mode, outcome, failure mode, hazard, world and task, and searchable over its text (the instruction, the model's
replies, every tool call and result, the messages the strategy wrote). Filters and search live in the URL."""

from __future__ import annotations

import streamlit as st

from contextdelta.dashboard import _ui
from contextdelta.dashboard._text import code
from contextdelta.dashboard.data import EPISODE_FILTERS, filter_options, filter_rows, search_episodes

SEARCH_PARAM = "q"

st.title("Episodes")
folder, runs = _ui.runs_or_stop()
run = _ui.run_data_or_stop(_ui.select_run(folder, runs))
episodes = list(run.episodes)
st.caption(
    f"Run group {code(run.run_group_id)}: every finished episode. The search looks through each episode's instruction, "
    "the model's replies, every tool call with its arguments and the result it got, and the summaries and digests "
    "the strategy wrote (not the system prompt, which every episode shares); case does not matter."
)
if not episodes:
    st.info(f"Run {code(run.run_group_id)} has no finished episode yet.")
    st.stop()

episode_filter, query = _ui.filter_bar(
    EPISODE_FILTERS,
    filter_options(episodes, EPISODE_FILTERS),
    prefix="cd_episodes",
    run_id=run.name,
    search_param=SEARCH_PARAM,
    search_label="Search the episodes' text",
    columns=4,
)
shown = filter_rows(episodes, episode_filter)
hits = search_episodes(run.search, query, [e.run_id for e in shown]) if query else {}
if query:
    shown = [e for e in shown if e.run_id in hits]
searched = f"contain “{code(query)}”"
narrowed = [w for w, on in (("match the filters", episode_filter.active), (searched, bool(query))) if on]
st.markdown(f"**{len(shown)} of {len(episodes)} episodes**" + (f" {' and '.join(narrowed)}." if narrowed else "."))
if not shown:
    st.info("No episode matches." + (" Every word of a search must occur in the episode." if query else ""))
    st.stop()

rows = []
for e in shown:
    row = {"timeline": _ui.episode_link(run.name, e.run_id), **e.row()}
    if query:
        hit = hits[e.run_id]
        row |= {"match": f"{hit.where}: {hit.snippet}", "fields matched": hit.fields}
    rows.append(row)
first = ["timeline", "outcome", "failure mode", *(["match"] if query else []), "task", "strategy", "protection mode"]
rest = [k for k in rows[0] if k not in (*first, "episode") and (k != "control" or any(e.control for e in shown))]
st.dataframe(
    rows,
    hide_index=True,
    column_order=[*first, *rest, "episode"],
    column_config={
        "timeline": st.column_config.LinkColumn("timeline", display_text="open", width=64, pinned=True),
        "outcome": st.column_config.TextColumn("outcome", width=90),
        "failure mode": st.column_config.TextColumn("failure mode", width=180),
        "match": st.column_config.TextColumn("match", width=300),
        "fields matched": st.column_config.NumberColumn("fields", width=55),
    },
)
picked = st.selectbox("Open the timeline of", [e.run_id for e in shown], key="cd_episodes_open")
st.page_link(
    "views/episode.py",
    label=f"Episode timeline of {code(picked)}",
    icon=":material/timeline:",
    query_params={_ui.RUN_PARAM: run.name, _ui.EPISODE_PARAM: picked},
)
