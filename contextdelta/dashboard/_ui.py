"""Streamlit helpers shared by the pages: the results folder, cached loaders, the run and episode pickers (kept
in sync with ``st.query_params`` so a link reproduces the view) and the messages shown instead of a traceback.

Loaders are ``st.cache_data`` functions keyed by the run directory's path and its `run_signature` (modification
times and sizes of the directory and its key files), so a finished or growing run is reloaded, and nothing else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import streamlit as st

from contextdelta.dashboard.data import (
    AttemptRow,
    EpisodeSummary,
    RunData,
    RunLoadError,
    RunSummary,
    Signature,
    default_episode,
    list_runs,
    load_attempts,
    load_episode,
    load_run,
    results_dir_problem,
    results_signature,
    run_signature,
)
from contextdelta.dashboard.launch import resolve_results_dir
from contextdelta.rundir import EpisodeRecord

RUN_PARAM = "run"
EPISODE_PARAM = "episode"
_RUN_KEY = "cd_run"
_EPISODE_KEY = "cd_episode"


def results_dir() -> Path:
    """The results folder this app browses (script argument ``--results-dir``, else ``CONTEXTDELTA_RESULTS_DIR``)."""
    return resolve_results_dir(sys.argv, os.environ)


# ---- trace store ----------------------------------------------------------------------------------------------


@st.cache_resource(show_spinner=False)
def _migrate_store(url: str | None) -> str | None:
    from contextdelta.store import StoreError, open_store

    try:
        open_store(url).close()
    except StoreError as exc:
        return str(exc)
    return None


def apply_migrations() -> None:
    """Open the trace store once per process, which applies its migrations; a failure is a warning in the sidebar
    (the pages read run directories, which do not depend on the store)."""
    problem = _migrate_store(os.environ.get("CONTEXTDELTA_DATABASE_URL"))
    if problem is not None:
        st.sidebar.warning(f"Trace store not available: {problem}")


# ---- cached loaders -------------------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, max_entries=32)
def _runs(folder: str, signature: tuple[Signature, ...]) -> list[RunSummary]:
    return list_runs(Path(folder))


@st.cache_data(show_spinner="Loading the run directory…", max_entries=16)
def _run(path: str, signature: Signature) -> RunData:
    return load_run(Path(path))


@st.cache_data(show_spinner=False, max_entries=64)
def _episode(path: str, signature: Signature, run_id: str, attempt: int | None) -> EpisodeRecord:
    return load_episode(Path(path), run_id, attempt)


@st.cache_data(show_spinner=False, max_entries=64)
def _attempts(path: str, signature: Signature, run_id: str) -> list[AttemptRow]:
    return load_attempts(Path(path), run_id)


def cached_runs(folder: Path) -> list[RunSummary]:
    """Every run directory's summary, newest first (cached until a run directory changes)."""
    return _runs(str(folder), results_signature(folder))


def cached_run(path: Path) -> RunData:
    """One run directory, loaded (cached until it changes). Raises `RunLoadError`."""
    return _run(str(path), run_signature(path))


def cached_episode(path: Path, run_id: str, attempt: int | None = None) -> EpisodeRecord:
    """One episode of a run directory: its current record, or the given attempt (cached until it changes).
    Raises `RunLoadError`."""
    return _episode(str(path), run_signature(path), run_id, attempt)


def cached_attempts(path: Path, run_id: str) -> list[AttemptRow]:
    """Every attempt of one episode (cached until the run directory changes). Raises `RunLoadError`."""
    return _attempts(str(path), run_signature(path), run_id)


# ---- pickers --------------------------------------------------------------------------------------------------


def runs_or_stop() -> tuple[Path, list[RunSummary]]:
    """The results folder and its runs; shows why there is nothing and stops the page when there is none."""
    folder = results_dir()
    problem = results_dir_problem(folder)
    if problem is not None:
        st.info(problem)
        st.stop()
    return folder, cached_runs(folder)


def _query_value(param: str) -> str | None:
    values = st.query_params.get_all(param)
    return values[-1] if values else None


def _synced_selectbox(
    label: str,
    options: Sequence[str],
    *,
    key: str,
    param: str,
    fallback: str,
    format_func: Callable[[str], str],
    sidebar: bool = False,
) -> str:
    """A selectbox whose value follows the query parameter ``param`` and writes it back: the URL wins when it
    names a known option (a pasted link), then the current choice, then ``fallback``."""
    wanted = _query_value(param)
    current = st.session_state.get(key)
    if wanted in options:
        st.session_state[key] = wanted
    elif current not in options:
        st.session_state[key] = fallback

    def _changed() -> None:
        st.query_params[param] = st.session_state[key]

    where = st.sidebar if sidebar else st
    choice: str = where.selectbox(label, list(options), key=key, format_func=format_func, on_change=_changed)
    st.query_params[param] = choice
    return choice


def select_run(folder: Path, runs: list[RunSummary]) -> RunSummary:
    """The run picker in the sidebar (query parameter ``run``; default: the newest run)."""
    ids = [s.run_group_id for s in runs]
    by_id = {s.run_group_id: s for s in runs}
    wanted = _query_value(RUN_PARAM)
    if wanted is not None and wanted not in by_id:
        st.warning(f"There is no run group `{wanted}` in `{folder}`; showing `{ids[0]}` instead.")
    remembered = st.session_state.get("cd_last_run")
    fallback = remembered if remembered in by_id else ids[0]

    def label(run_id: str) -> str:
        s = by_id[run_id]
        return f"{run_id} ({s.status})" if s.status != "complete" else run_id

    choice = _synced_selectbox(
        "Run group", ids, key=_RUN_KEY, param=RUN_PARAM, fallback=fallback, format_func=label, sidebar=True
    )
    st.session_state["cd_last_run"] = choice
    selected = by_id[choice]
    st.sidebar.caption(
        f"Run group `{choice}`: {selected.status}"
        + (f", model `{selected.model}`" if selected.model else "")
        + f". Results folder: `{folder}`"
    )
    return by_id[choice]


def run_data_or_stop(summary: RunSummary) -> RunData:
    """The selected run's data, with a clear message (and the page stopped) when the directory is malformed, and a
    notice when the run is still in progress."""
    if not summary.readable:
        malformed(summary.run_group_id, summary.error or "unreadable")
    try:
        data = cached_run(summary.path)
    except RunLoadError as exc:
        malformed(summary.run_group_id, str(exc))
    if data.in_progress:
        in_progress(data)
    return data


def malformed(run_id: str, problem: str) -> NoReturn:
    """Say that a run directory cannot be read, and stop the page."""
    st.error(
        f"Run directory `{run_id}` is malformed and cannot be shown.\n\n{problem}\n\n"
        "Pick another run in the sidebar; `contextdelta verify RUN_ID` checks a run directory in full."
    )
    st.stop()


def in_progress(data: RunData) -> None:
    """The notice shown above a page for a run that is still running."""
    st.info(
        f"Run `{data.run_group_id}` is still in progress: {len(data.episodes)} of {data.manifest.counts.planned} "
        "episodes are finished. The figures below cover those episodes only; reload the page for newer ones."
    )


def select_episode(episodes: Sequence[EpisodeSummary]) -> EpisodeSummary:
    """The episode picker (query parameter ``episode``; default: the first failure with a hidden mutation)."""
    by_id = {e.run_id: e for e in episodes}
    wanted = _query_value(EPISODE_PARAM)
    if wanted is not None and wanted not in by_id:
        st.warning(f"This run has no episode `{wanted}`.")
    first = default_episode(episodes)
    assert first is not None
    choice = _synced_selectbox(
        "Episode",
        list(by_id),
        key=_EPISODE_KEY,
        param=EPISODE_PARAM,
        fallback=first.run_id,
        format_func=lambda run_id: by_id[run_id].label,
    )
    return by_id[choice]


def set_query(params: dict[str, str | list[str]]) -> None:
    """Make the URL's query string exactly ``params`` (keys with an empty list are left out)."""
    st.query_params.from_dict({k: v for k, v in params.items() if v})
