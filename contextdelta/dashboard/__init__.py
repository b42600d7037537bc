"""The Streamlit failure-atlas browser (``contextdelta dashboard``): Runs, Conditions, Failure atlas and Episode.

Importing this package does not import Streamlit: the data layer (`contextdelta.dashboard.data`), the episode
timeline (`contextdelta.dashboard.timeline`) and the launcher (`contextdelta.dashboard.launch`) are plain Python;
``app.py`` and ``views/`` are the Streamlit scripts.
"""

from contextdelta.dashboard.data import (
    ATLAS_FILTERS,
    AtlasFilter,
    AttemptRow,
    EpisodeSummary,
    FailureRow,
    RunData,
    RunLoadError,
    RunSummary,
    filter_failures,
    filter_from_query,
    filter_options,
    filter_query,
    list_runs,
    load_attempts,
    load_episode,
    load_run,
)
from contextdelta.dashboard.launch import APP_SCRIPT, exec_streamlit, streamlit_command, streamlit_env
from contextdelta.dashboard.timeline import EpisodeTimeline, episode_timeline

__all__ = [
    "APP_SCRIPT",
    "ATLAS_FILTERS",
    "AtlasFilter",
    "AttemptRow",
    "EpisodeSummary",
    "EpisodeTimeline",
    "FailureRow",
    "RunData",
    "RunLoadError",
    "RunSummary",
    "episode_timeline",
    "exec_streamlit",
    "filter_failures",
    "filter_from_query",
    "filter_options",
    "filter_query",
    "list_runs",
    "load_attempts",
    "load_episode",
    "load_run",
    "streamlit_command",
    "streamlit_env",
]
