"""Command-line flag values shared by the typer apps (``contextdelta.cli`` and ``contextdelta.local_model``)."""

from __future__ import annotations

from pathlib import Path

import typer

PATH_METAVAR = "<path>"
"""How help shows a path flag (a flag with a parser is otherwise shown by its Python type)."""


def path_flag(value: str) -> Path:
    """The value of a path flag (``--results-dir``, ``--out``, ``--price-table``, ``--cache-dir``...). One that names
    nothing (``""`` or blanks) is refused: read as a path, ``""`` is the working folder and blanks a folder named by
    spaces, so ``--results-dir "$UNSET"`` wrote run directories, and ``generate-tasks --out ""`` a suite, where the
    command ran."""
    if not value.strip():
        raise typer.BadParameter(f"{value!r} names nothing: give a path (write . for the current folder)")
    return Path(value)
