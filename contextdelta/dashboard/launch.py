"""How ``contextdelta dashboard`` starts Streamlit, and how the app finds its results folder.

The command runs ``python -m contextdelta.dashboard run contextdelta/dashboard/app.py`` (Streamlit's command line,
started once the modules the pages need are imported, see ``__main__.py``) with every option that keeps it local
and quiet: bound to 127.0.0.1, headless (no browser opened, no e-mail prompt), usage statistics off (also in the
environment, ``STREAMLIT_BROWSER_GATHER_USAGE_STATS=false``), no links to outside help in error boxes, no file
watcher, no development mode. With an explicit ``server.address`` Streamlit never looks up the machine's external
IP either, so it makes no outside request; the page's favicon is an emoji (a ``data:`` URL, see ``app.py``), not a
Material icon, which the browser would fetch from fonts.gstatic.com.

The results folder reaches the app as a script argument after ``--`` (``-- --results-dir DIR``); a plain
``streamlit run contextdelta/dashboard/app.py`` without it reads ``CONTEXTDELTA_RESULTS_DIR`` (default
``results``). The trace store's URL travels as ``CONTEXTDELTA_DATABASE_URL`` in the environment; the script
argument ``--store-migrated`` says the command has applied its migrations already, so the app does not again.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

APP_SCRIPT = Path(__file__).resolve().with_name("app.py")
"""The Streamlit entry script (``st.navigation`` over the four pages)."""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501

STREAMLIT_OPTIONS: dict[str, str] = {
    "server.headless": "true",
    "browser.gatherUsageStats": "false",
    "client.showErrorLinks": "false",
    "global.developmentMode": "false",
    "server.fileWatcherType": "none",
    "server.runOnSave": "false",
    "client.toolbarMode": "viewer",
}
"""Streamlit configuration the dashboard always runs with (besides the address and port)."""

STREAMLIT_ENV: dict[str, str] = {"STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
"""Environment variables set for the Streamlit process (a second guard against usage statistics)."""


def streamlit_command(
    results_dir: Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    python: str = sys.executable,
    store_migrated: bool = False,
) -> list[str]:
    """The command line that serves the dashboard for ``results_dir`` on ``host:port``; ``store_migrated``: the
    caller has applied the trace store's migrations (the app skips them)."""
    options = {"server.address": host, "server.port": str(port), **STREAMLIT_OPTIONS}
    command = [python, "-m", "contextdelta.dashboard", "run", str(APP_SCRIPT)]
    for name, value in options.items():
        command += [f"--{name}", value]
    return [
        *command,
        "--",
        "--results-dir",
        str(results_dir.resolve()),
        *(["--store-migrated"] if store_migrated else []),
    ]


def streamlit_env(environ: Mapping[str, str], *, database_url: str | None = None) -> dict[str, str]:
    """The Streamlit process's environment: ``environ`` plus `STREAMLIT_ENV` (and the store URL when given)."""
    env = {**environ, **STREAMLIT_ENV}
    if database_url is not None:
        env["CONTEXTDELTA_DATABASE_URL"] = database_url
    return env


def _script_arguments(argv: Sequence[str]) -> argparse.Namespace | None:
    """The app's script arguments (after ``--`` to ``streamlit run app.py``); None when ``argv`` is not the app's
    (under ``AppTest`` or another host ``sys.argv`` belongs to someone else)."""
    if not argv or Path(argv[0]).resolve() != APP_SCRIPT:
        return None
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--results-dir", type=Path)
    parser.add_argument("--store-migrated", action="store_true")
    known, _ = parser.parse_known_args(list(argv[1:]))
    return known


def script_results_dir(argv: Sequence[str]) -> Path | None:
    """The ``--results-dir`` given after ``--`` to ``streamlit run app.py``; None when ``argv`` is not the app's
    or holds no such option."""
    known = _script_arguments(argv)
    value: Path | None = known.results_dir if known is not None else None
    return value


def command_results_dir(arguments: Sequence[str]) -> Path | None:
    """The ``--results-dir`` among the script arguments (after ``--``) of a `streamlit_command` line's arguments
    (``run app.py ... -- --results-dir DIR``); None without one."""
    if "--" not in arguments:
        return None
    return script_results_dir([str(APP_SCRIPT), *arguments[list(arguments).index("--") + 1 :]])


def store_migrated(argv: Sequence[str]) -> bool:
    """Whether the app was started with ``--store-migrated`` (by ``contextdelta dashboard``, after migrating)."""
    known = _script_arguments(argv)
    return bool(known is not None and known.store_migrated)


def resolve_results_dir(argv: Sequence[str], environ: Mapping[str, str]) -> Path:
    """Where the app looks for run directories: the script argument, else ``CONTEXTDELTA_RESULTS_DIR`` (from the
    environment or ``.env``), else ``results``."""
    given = script_results_dir(argv)
    if given is not None:
        return given
    if environ.get("CONTEXTDELTA_RESULTS_DIR"):
        return Path(environ["CONTEXTDELTA_RESULTS_DIR"])
    from contextdelta.settings import load_settings

    return Path(load_settings().results_dir)


def exec_streamlit(command: Sequence[str], env: Mapping[str, str]) -> None:
    """Replace this process by Streamlit (so a signal to the ``contextdelta dashboard`` process reaches it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], list(command), dict(env))
