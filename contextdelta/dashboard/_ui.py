"""Streamlit helpers shared by the pages: the results folder, cached loaders, the run and episode pickers and the
filter bar (kept in sync with ``st.query_params`` so a link reproduces the view), table column helpers, and the
messages shown instead of a traceback.

Loaders are cached by the run directory's path and its `run_signature` (modification times and sizes of the
directory and its key files), so a finished or growing run is reloaded, and nothing else. A loaded run
(`RunData`, with the searchable text of every episode) is an ``st.cache_resource``: one shared, read-only object,
not unpickled again on every rerun as ``st.cache_data`` would; the run list, single episodes and comparisons are
small and stay ``st.cache_data``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn
from urllib.parse import urlencode

import streamlit as st

from contextdelta._words import plural
from contextdelta.dashboard._text import code
from contextdelta.dashboard.data import (
    AttemptRow,
    EpisodeSummary,
    FilterField,
    RowFilter,
    RunData,
    RunLoadError,
    RunSummary,
    Signature,
    default_episode,
    filter_from_query,
    filter_query,
    list_runs,
    load_attempts,
    load_comparison,
    load_episode,
    load_run,
    partial_notice,
    results_dir_problem,
    results_signature,
    run_signature,
)
from contextdelta.dashboard.launch import resolve_results_dir, store_migrated
from contextdelta.rundir import EpisodeRecord, RunDirectory, RunDirectoryError

if TYPE_CHECKING:
    from contextdelta.report import ComparisonReport

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
    (the pages read run directories, which do not depend on the store). Skipped when ``contextdelta dashboard``
    has just applied them (its ``--store-migrated`` script argument): the first page need not wait for it."""
    if store_migrated(sys.argv):
        return
    problem = _migrate_store(os.environ.get("CONTEXTDELTA_DATABASE_URL"))
    if problem is not None:
        st.sidebar.warning(f"Trace store not available: {code(problem)}")


# ---- cached loaders -------------------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, max_entries=32)
def _runs(folder: str, signature: tuple[Signature, ...]) -> list[RunSummary]:
    return list_runs(Path(folder))


@st.cache_resource(show_spinner=False, max_entries=8)
def _run(path: str, signature: Signature) -> RunData:
    return load_run(Path(path))


@st.cache_data(show_spinner="Comparing the two run groups…", max_entries=16)
def _comparison(
    path_a: str, signature_a: Signature, path_b: str, signature_b: Signature
) -> tuple[ComparisonReport | None, list[str]]:
    from contextdelta.report import NotComparable

    try:
        return load_comparison(Path(path_a), Path(path_b)), []
    except NotComparable as exc:  # cached too: the verdict is as costly to reach as a comparison
        return None, list(exc.reasons)


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
    with st.spinner("Loading the run directory…"):
        return _run(str(path), run_signature(path))


def _warm(path: str, signature: Signature) -> None:
    import altair  # noqa: F401  (the charts of the next page)

    import contextdelta.dashboard.tables  # noqa: F401  (the report and the statistics code)

    with contextlib.suppress(RunLoadError):  # the page that opens the run says what is wrong with it
        _run(path, signature)


@st.cache_resource(show_spinner=False, max_entries=8)
def _warm_up(path: str, signature: Signature) -> threading.Thread:
    thread = threading.Thread(target=_warm, args=(path, signature), name="contextdelta-warm-up", daemon=True)
    thread.start()
    return thread


def warm_up(summary: RunSummary) -> None:
    """Load in a background thread what the next page needs: the report's modules and the charting library, and
    the run ``summary`` describes (into the shared cache, so a page that asks for it meanwhile waits for this load
    instead of starting another). Once per run directory state; nothing for a malformed one. Called as the server
    starts (the newest run) and once the Runs page is shown (the selected run)."""
    if summary.readable:
        _warm_up(str(summary.path), run_signature(summary.path))


def cached_episode(path: Path, run_id: str, attempt: int | None = None) -> EpisodeRecord:
    """One episode of a run directory: its current record, or the given attempt (cached until it changes).
    Raises `RunLoadError`."""
    return _episode(str(path), run_signature(path), run_id, attempt)


def cached_attempts(path: Path, run_id: str) -> list[AttemptRow]:
    """Every attempt of one episode (cached until the run directory changes). Raises `RunLoadError`."""
    return _attempts(str(path), run_signature(path), run_id)


def cached_comparison(path_a: Path, path_b: Path) -> ComparisonReport:
    """``contextdelta compare`` of two run directories (cached until either changes). Raises `RunLoadError` and
    `contextdelta.report.NotComparable`."""
    from contextdelta.report import NotComparable

    report, reasons = _comparison(str(path_a), run_signature(path_a), str(path_b), run_signature(path_b))
    if report is None:
        raise NotComparable(reasons)
    return report


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
    ids = [s.name for s in runs]
    by_id = {s.name: s for s in runs}
    wanted = _query_value(RUN_PARAM)
    if wanted is not None and wanted not in by_id:
        st.warning(f"There is no run group {code(wanted)} in {code(folder)}; showing {code(ids[0])} instead.")
    remembered = st.session_state.get("cd_last_run")
    fallback = remembered if remembered in by_id else ids[0]

    def label(name: str) -> str:
        s = by_id[name]
        notes = [n for n in (s.status if s.status != "complete" else "", s.part) if n]
        return f"{s.label} ({', '.join(notes)})" if notes else s.label

    choice = _synced_selectbox(
        "Run group", ids, key=_RUN_KEY, param=RUN_PARAM, fallback=fallback, format_func=label, sidebar=True
    )
    st.session_state["cd_last_run"] = choice
    selected = by_id[choice]
    st.sidebar.caption(
        f"Run group {code(selected.run_group_id)}"
        + (f" (folder {code(choice)})" if choice != selected.run_group_id else "")
        + f": {selected.status}"
        + (f", model {code(selected.model)}" if selected.model else "")
        + f". Results folder: {code(folder)}"
    )
    return by_id[choice]


def warn_unknown_pair(runs: list[RunSummary]) -> None:
    """A warning for each of the query parameters ``a`` and ``b`` that names no run in ``runs`` (a link to a run
    that was moved, or a typed name), before the pickers fall back to another run."""
    names = {s.name for s in runs}
    for param in ("a", "b"):
        wanted = _query_value(param)
        if wanted is not None and wanted not in names:
            below = "; pick one below" if len(names) > 1 else ""
            st.warning(f"There is no readable run group {code(wanted)} (`{param}`){below}.")


def select_run_pair(runs: list[RunSummary]) -> tuple[RunSummary, RunSummary]:
    """Two run pickers (query parameters ``a`` and ``b``): a defaults to the run last picked in the sidebar (else
    the newest), b to the newest other run of the same task set (else the newest other run)."""
    by_id = {s.name: s for s in runs}
    ids = list(by_id)
    remembered = st.session_state.get("cd_last_run")
    first = remembered if remembered in by_id else ids[0]

    def label(name: str) -> str:
        s = by_id[name]
        return f"{s.label} · {s.model} · {s.status} · {s.finished} episodes · suite {(s.suite_sha256 or '')[:12]}"

    left, right = st.columns(2)
    with left:
        a = _synced_selectbox("Run a", ids, key="cd_compare_a", param="a", fallback=first, format_func=label)
    others = [i for i in ids if i != a] or ids
    same_suite = [i for i in others if by_id[i].suite_sha256 == by_id[a].suite_sha256]
    with right:
        b = _synced_selectbox(
            "Run b", ids, key="cd_compare_b", param="b", fallback=(same_suite or others)[0], format_func=label
        )
    return by_id[a], by_id[b]


def run_data_or_stop(summary: RunSummary) -> RunData:
    """The selected run's data, with a clear message (and the page stopped) when the directory is malformed, and a
    notice when the run is still in progress, stopped early or one shard of a plan."""
    if not summary.readable:
        malformed(summary.name, summary.error or "unreadable")
    try:
        data = cached_run(summary.path)
    except RunLoadError as exc:
        malformed(summary.name, str(exc))
    if data.in_progress:
        in_progress(data)
    elif data.partial is not None:
        st.warning(data.partial)
    if data.changed:
        st.warning(
            f"Run {code(data.run_group_id)} was changed after its run ({plural(len(data.changed), 'change')} "
            f"found by its seal; first: {code(data.changed[0])}). The numbers here are recomputed from its episodes "
            f"as they now stand; {code(f'contextdelta verify {data.name}')} names every change."
        )
    return data


def partial_notice_of(summary: RunSummary) -> str | None:
    """`partial_notice` of the run a `RunSummary` names, from its manifest (None when that cannot be read: the
    page reports the malformed directory)."""
    try:
        manifest = RunDirectory(summary.path).read_manifest()
    except (RunDirectoryError, OSError, ValueError):
        return None
    return partial_notice(manifest, summary.finished or 0, summary.name)


def malformed(run_id: str, problem: str) -> NoReturn:
    """Say that a run directory (``run_id``: its folder's name) cannot be read, and stop the page."""
    st.error(
        f"Run directory {code(run_id)} is malformed and cannot be shown.\n\n{code(problem)}\n\n"
        "Pick another run in the sidebar; `contextdelta verify RUN_ID` checks a run directory in full."
    )
    st.stop()


def in_progress(data: RunData) -> None:
    """The notice shown above a page for a run that is still running."""
    st.info(data.partial or f"Run {code(data.run_group_id)} is still in progress.")


def select_episode(episodes: Sequence[EpisodeSummary]) -> EpisodeSummary:
    """The episode picker (query parameter ``episode``; default: the first failure with a hidden mutation)."""
    by_id = {e.run_id: e for e in episodes}
    wanted = _query_value(EPISODE_PARAM)
    if wanted is not None and wanted not in by_id:
        st.warning(f"This run has no episode {code(wanted)}.")
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


# ---- filters and tables ---------------------------------------------------------------------------------------


def filter_bar(
    fields: tuple[FilterField, ...],
    options: dict[str, list[str]],
    *,
    prefix: str,
    run_id: str,
    search_param: str | None = None,
    search_label: str = "Search",
    columns: int = 3,
) -> tuple[RowFilter, str]:
    """Multiselects for ``fields`` (and, with ``search_param``, a search box) whose values live in the URL: the
    URL decides what is selected when the page runs (a pasted link, a reload), and every change is written back,
    so a link reproduces the view. Returns the filter and the search text."""
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    from_url, ignored = filter_from_query(params, options, fields)
    if ignored:
        st.warning(f"Ignored filter values this run does not have: {', '.join(code(v) for v in ignored)}")

    def key(param: str) -> str:
        return f"{prefix}_{param}"

    def current() -> RowFilter:
        return RowFilter({f.param: tuple(st.session_state.get(key(f.param), ())) for f in fields}, fields)

    def text() -> str:
        return str(st.session_state.get(key(search_param), "")).strip() if search_param else ""

    def sync() -> None:
        wanted: dict[str, str | list[str]] = {RUN_PARAM: run_id, **filter_query(current())}
        if search_param and text():
            wanted[search_param] = text()
        set_query(wanted)

    for f in fields:
        st.session_state[key(f.param)] = list(from_url.values(f.param))
    if search_param:
        st.session_state[key(search_param)] = _query_value(search_param) or ""
        st.text_input(
            search_label,
            key=key(search_param),
            on_change=sync,
            placeholder='words or "a phrase"; every one must occur in the episode',
        )
    grid = st.columns(columns)
    for position, f in enumerate(fields):
        with grid[position % columns]:
            st.multiselect(f.label, options[f.param], key=key(f.param), on_change=sync, placeholder="all")
    sync()
    return current(), text()


def label_column(label: str, width: int | Literal["small", "medium", "large"] = "medium") -> Any:
    """A table's row-label column: pinned, so it stays in view when the table scrolls sideways."""
    return st.column_config.TextColumn(label, width=width, pinned=True)


def episode_link(run_id: str, episode: str) -> str:
    """The Episode page's URL of one episode (relative, for a table's link column)."""
    return f"episode?{urlencode({RUN_PARAM: run_id, EPISODE_PARAM: episode})}"
