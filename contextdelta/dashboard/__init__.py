"""The Streamlit dashboard (``contextdelta dashboard``): Runs, Conditions, Episodes, Failure atlas, Episode and
Compare.

Importing this package does not import Streamlit: the data layer (`contextdelta.dashboard.data`), the report's
numbers as table rows (`contextdelta.dashboard.tables`), the episode timeline (`contextdelta.dashboard.timeline`)
and the launcher (`contextdelta.dashboard.launch`) are plain Python; ``app.py`` and ``views/`` are the Streamlit
scripts.
"""

from contextdelta.dashboard.data import (
    ATLAS_FILTERS,
    EPISODE_FILTERS,
    AttemptRow,
    EpisodeSummary,
    FailureRow,
    RowFilter,
    RunData,
    RunLoadError,
    RunSummary,
    SearchHit,
    episode_search_fields,
    filter_from_query,
    filter_options,
    filter_query,
    filter_rows,
    list_runs,
    load_attempts,
    load_comparison,
    load_episode,
    load_run,
    search_episodes,
)
from contextdelta.dashboard.launch import APP_SCRIPT, exec_streamlit, streamlit_command, streamlit_env
from contextdelta.dashboard.timeline import EpisodeTimeline, episode_timeline

__all__ = [
    "APP_SCRIPT",
    "ATLAS_FILTERS",
    "EPISODE_FILTERS",
    "AttemptRow",
    "EpisodeSummary",
    "EpisodeTimeline",
    "FailureRow",
    "RowFilter",
    "RunData",
    "RunLoadError",
    "RunSummary",
    "SearchHit",
    "episode_search_fields",
    "episode_timeline",
    "exec_streamlit",
    "filter_from_query",
    "filter_options",
    "filter_query",
    "filter_rows",
    "list_runs",
    "load_attempts",
    "load_comparison",
    "load_episode",
    "load_run",
    "search_episodes",
    "streamlit_command",
    "streamlit_env",
]
