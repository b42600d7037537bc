"""The dashboard's Streamlit entry script: ``contextdelta dashboard`` serves it (see `contextdelta.dashboard.launch`).

Four pages under ``st.navigation``: Runs, Conditions, Failure atlas and Episode; each page is a thin script in
``views/`` over `contextdelta.dashboard.data` and `contextdelta.dashboard.timeline`. A fifth, Horizon (the
dose-response of a run on generated tasks), reads `contextdelta.dashboard.dose_response`. The trace store's migrations
are applied once per process when the app starts.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from contextdelta.dashboard import _ui

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="ContextDelta", page_icon=":material/difference:", layout="wide")
_ui.apply_migrations()
PAGES = [
    st.Page(VIEWS / "runs.py", title="Runs", icon=":material/folder_open:", url_path="runs", default=True),
    st.Page(VIEWS / "conditions.py", title="Conditions", icon=":material/grid_view:", url_path="conditions"),
    st.Page(VIEWS / "horizon.py", title="Horizon", icon=":material/trending_up:", url_path="horizon"),
    st.Page(VIEWS / "atlas.py", title="Failure atlas", icon=":material/report:", url_path="atlas"),
    st.Page(VIEWS / "episode.py", title="Episode", icon=":material/timeline:", url_path="episode"),
]
st.navigation(PAGES).run()
