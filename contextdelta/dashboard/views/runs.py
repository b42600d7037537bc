"""Runs: every run group in the results folder with its model, date, suite hash, status, counts and success. Once
shown, the selected run is loaded in the background for the page opened next."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

from contextdelta.dashboard import _ui
from contextdelta.dashboard._text import code
from contextdelta.dashboard.data import runs_rows, shared_run_groups, unnamed_folders

st.title("Runs")
folder, runs = _ui.runs_or_stop()
st.caption(f"Run groups in {code(folder)}, newest first. Pick one in the sidebar to open its other pages.")
rows = runs_rows(runs)
for row in rows:
    row["open"] = f"conditions?{urlencode({_ui.RUN_PARAM: row['folder']})}"
if rows:
    st.dataframe(
        rows,
        hide_index=True,
        column_order=["run group", "open", *[k for k in rows[0] if k not in ("run group", "open")]],
        column_config={
            "success": st.column_config.NumberColumn(
                "success",
                format="%.1f%%",
                help="succeeded / finished episodes of the main matrix (control episodes left out)",
            ),
            "open": st.column_config.LinkColumn("conditions", display_text="open"),
        },
    )
running = [s for s in runs if s.readable and s.in_progress]
if running:
    st.info(
        "Still in progress: "
        + ", ".join(f"{code(s.run_group_id)} ({s.finished} of {s.planned} episodes)" for s in running)
        + ". Their success is shown once they finish; reload for newer counts. A run whose session was killed stays "
        "in progress too: `contextdelta run-benchmark --resume RUN_ID` (or `run-external ... --resume RUN_ID`) "
        "finishes it."
    )
shared = shared_run_groups(runs)
if shared:
    st.warning(
        "More than one folder holds the same run group (a copied run directory?); the pickers tell them apart by "
        "folder:\n\n"
        + "\n".join(f"- {code(group)}: {', '.join(code(f) for f in folders)}" for group, folders in shared.items())
    )
unnamed = unnamed_folders(folder)
if unnamed:
    st.warning(
        "These folders are left out: their names are not UTF-8 text, so no page can show or link them. Rename them "
        "to open them here.\n\n" + "\n".join(f"- {code(name)}" for name in unnamed)
    )
broken = [s for s in runs if not s.readable]
if broken:
    st.error(
        "These folders are not readable run directories and are left out:\n\n"
        + "\n".join(f"- {code(s.run_group_id)}: {code(s.error)}" for s in broken)
    )
selected = _ui.select_run(folder, runs)
_ui.warm_up(selected)
