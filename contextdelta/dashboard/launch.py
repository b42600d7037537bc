"""How ``contextdelta dashboard`` starts Streamlit, and how the app finds its results folder.

The command runs ``python -m streamlit run contextdelta/dashboard/app.py`` with every option that keeps it local
and quiet: bound to 127.0.0.1, headless (no browser opened, no e-mail prompt), usage statistics off (also in the
environment, ``STREAMLIT_BROWSER_GATHER_USAGE_STATS=false``), no file watcher, no development mode. With an explicit
``server.address`` Streamlit never looks up the machine's external IP either, so it makes no outside request.

The results folder reaches the app as a script argument after ``--`` (``-- --results-dir DIR``); a plain
``streamlit run contextdelta/dashboard/app.py`` without it reads ``CONTEXTDELTA_RESULTS_DIR`` (default
``results``). The trace store's URL travels as ``CONTEXTDELTA_DATABASE_URL`` in the environment.
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
    "global.developmentMode": "false",
    "server.fileWatcherType": "none",
    "server.runOnSave": "false",
    "client.toolbarMode": "viewer",
}
"""Streamlit configuration the dashboard always runs with (besides the address and port)."""

STREAMLIT_ENV: dict[str, str] = {"STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
"""Environment variables set for the Streamlit process (a second guard against usage statistics)."""


def streamlit_command(
    results_dir: Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, python: str = sys.executable
) -> list[str]:
    """The command line that serves the dashboard for ``results_dir`` on ``host:port``."""
    options = {"server.address": host, "server.port": str(port), **STREAMLIT_OPTIONS}
    command = [python, "-m", "streamlit", "run", str(APP_SCRIPT)]
    for name, value in options.items():
        command += [f"--{name}", value]
    return [*command, "--", "--results-dir", str(results_dir.resolve())]


def streamlit_env(environ: Mapping[str, str], *, database_url: str | None = None) -> dict[str, str]:
    """The Streamlit process's environment: ``environ`` plus `STREAMLIT_ENV` (and the store URL when given)."""
    env = {**environ, **STREAMLIT_ENV}
    if database_url is not None:
        env["CONTEXTDELTA_DATABASE_URL"] = database_url
    return env


def script_results_dir(argv: Sequence[str]) -> Path | None:
    """The ``--results-dir`` given after ``--`` to ``streamlit run app.py``; None when ``argv`` is not the app's
    (under ``AppTest`` or another host ``sys.argv`` belongs to someone else) or holds no such option."""
    if not argv or Path(argv[0]).resolve() != APP_SCRIPT:
        return None
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--results-dir", type=Path)
    known, _ = parser.parse_known_args(list(argv[1:]))
    value: Path | None = known.results_dir
    return value


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
