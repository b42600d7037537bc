"""Run group ids and episode run ids, and validation of ids given on the command line."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime
from pathlib import Path

RUN_GROUP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class RunIdError(ValueError):
    """A RUN_ID that is not a plain directory name, or that names no run directory."""


def new_run_group_id(now: datetime | None = None) -> str:
    """``YYYYmmddTHHMMSSZ-xxxxxx``: sortable by start time, unique by a random suffix."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def episode_run_id(task_id: str, strategy: str, mode: str, repeat: int, control: str = "") -> str:
    """The id of one episode inside a run group; stable, so resume can tell which episodes exist.

    ``task.strategy.mode.rREPEAT``; an episode of a control condition (``--controls``) has the control's name
    before the repeat: ``task.strategy.mode.no_mutation.rREPEAT``."""
    if control:
        return f"{task_id}.{strategy}.{mode}.{control}.r{repeat}"
    return f"{task_id}.{strategy}.{mode}.r{repeat}"


def validate_run_id(run_id: str) -> str:
    """Refuse anything but a plain name: no separators, no '..', nothing that could escape the results dir."""
    if not RUN_GROUP_ID.match(run_id) or ".." in run_id:
        raise RunIdError(
            f"invalid RUN_ID {run_id!r}: use the run directory's name as printed by run-benchmark "
            "(letters, digits, '-', '_', '.'; no path separators)"
        )
    return run_id


MANIFEST_NAME = "run_manifest.json"
"""The file that makes a folder a run directory (``contextdelta.rundir.layout.MANIFEST``)."""


def run_dir(results_dir: Path, run_id: str, *, must_exist: bool = True) -> Path:
    """The directory of run group ``run_id``: a name under ``results_dir``, or (for an existing run) a path to the
    run directory itself, such as the one ``run-benchmark`` printed as its last line. A path is accepted only when
    it is a directory holding ``run_manifest.json``; a name is refused unless it is a plain directory name."""
    if must_exist and _looks_like_a_path(run_id):
        path = Path(run_id)
        if not (path / MANIFEST_NAME).is_file():
            raise RunIdError(
                f"invalid RUN_ID {run_id!r}: not a run directory (no {MANIFEST_NAME} in it); give a run directory's "
                "name under --results-dir, or the path run-benchmark printed"
            )
        return path
    path = results_dir / validate_run_id(run_id)
    if must_exist and not path.is_dir():
        raise RunIdError(
            f"no run directory {path} (is --results-dir right? default comes from CONTEXTDELTA_RESULTS_DIR)"
        )
    return path


def _looks_like_a_path(run_id: str) -> bool:
    return "/" in run_id or "\\" in run_id or run_id in (".", "..") or Path(run_id).is_absolute()
