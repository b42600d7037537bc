"""The dashboard's Streamlit entry script: ``contextdelta dashboard`` serves it (see `contextdelta.dashboard.launch`).

Pages under ``st.navigation``: Runs, Conditions, Episodes, Horizon, Failure atlas, Episode and Compare; each page
is a thin script in ``views/`` over `contextdelta.dashboard.data`, `contextdelta.dashboard.tables`,
`contextdelta.dashboard.timeline` and (Horizon: the dose-response of a run on generated tasks)
`contextdelta.dashboard.dose_response`, and each has its own URL (``/conditions``, ``/episodes``, ...). Runs, the
default page, is served at the root and again, hidden from the menu, at ``/runs``. The trace store's migrations are
applied once per process when the app starts (unless ``contextdelta dashboard`` has just applied them).

The favicon is an emoji: Streamlit turns it into a ``data:`` URL, where a Material icon would make the browser
fetch an SVG from fonts.gstatic.com (the dashboard makes no outside request).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from contextdelta.dashboard import _ui

VIEWS = Path(__file__).resolve().parent / "views"

st.set_page_config(page_title="ContextDelta", page_icon="🔺", layout="wide")
_ui.apply_migrations()
PAGES = [
    st.Page(VIEWS / "runs.py", title="Runs", icon=":material/folder_open:", url_path="", default=True),
    st.Page(VIEWS / "conditions.py", title="Conditions", icon=":material/grid_view:", url_path="conditions"),
    st.Page(VIEWS / "episodes.py", title="Episodes", icon=":material/list:", url_path="episodes"),
    st.Page(VIEWS / "horizon.py", title="Horizon", icon=":material/trending_up:", url_path="horizon"),
    st.Page(VIEWS / "atlas.py", title="Failure atlas", icon=":material/report:", url_path="atlas"),
    st.Page(VIEWS / "episode.py", title="Episode", icon=":material/timeline:", url_path="episode"),
    st.Page(VIEWS / "compare.py", title="Compare", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(VIEWS / "runs.py", title="Runs", url_path="runs", visibility="hidden"),
]
st.navigation(PAGES).run()
