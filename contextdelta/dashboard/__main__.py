"""``python -m contextdelta.dashboard run app.py [options] -- [script arguments]``: Streamlit's own command line
(what ``contextdelta dashboard`` executes), started once the modules the pages need are imported (the report with
its statistics code, Altair, pandas), so their import cost is paid while the server starts instead of by the
first page a reader opens. As soon as Streamlit's runtime exists, the newest run of the results folder starts
loading in the background (`contextdelta.dashboard._ui.warm_up`): a page that opens it meanwhile waits for that
load instead of starting another."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import altair  # noqa: F401
import pandas  # noqa: F401
from streamlit import runtime
from streamlit.web import cli

import contextdelta.dashboard.tables  # noqa: F401
from contextdelta.dashboard.data import list_runs
from contextdelta.dashboard.launch import command_results_dir

RUNTIME_WAIT_S = 120.0
"""How long the warm-up waits for Streamlit's runtime before it gives up (the server did not start)."""


def _warm_newest(folder: Path) -> None:
    deadline = time.monotonic() + RUNTIME_WAIT_S
    while not runtime.exists():  # the caches belong to the runtime: load nothing before it exists
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)
    from contextdelta.dashboard import _ui

    newest = next((s for s in list_runs(folder) if s.readable), None)
    if newest is not None:
        _ui.warm_up(newest)


if __name__ == "__main__":
    folder = command_results_dir(sys.argv[1:])
    if folder is not None:
        threading.Thread(target=_warm_newest, args=(folder,), name="contextdelta-warm-newest", daemon=True).start()
    cli.main(prog_name="streamlit")
