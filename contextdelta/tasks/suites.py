"""Task suites: which folder of task files a command reads, and how a run names it.

A suite is a folder of ``<world>/<id>.yaml`` files with its ``SUITE.lock``. The suites of the repository's
``tasks/`` folder ship in the package: ``setup.py`` maps ``tasks/`` to ``contextdelta._suites``, so every folder
below it travels by rule. Packaged suites are named by their folder: ``core`` is ``tasks/`` itself (the
hand-written tasks) and every folder below it holding a ``SUITE.lock`` is named by its path (``horizon`` is
``tasks/horizon/``). In a source checkout (an editable install) the packaged suites are ``tasks/`` itself.

``--tasks`` takes a folder or ``package:NAME``. Without it a command reads ``./tasks`` when that is a folder (a
clone of the repository, or a user's own suite) and otherwise the packaged ``core`` suite (an installed package
used from any other folder). A run records the source as named (``package:NAME``, or the folder relative to the
working directory: never an absolute path) with the hash of the whole suite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextdelta.tasks.loader import LOCK_NAME, load_directory
from contextdelta.tasks.lock import read_lock
from contextdelta.tasks.schema import suite_hash

PACKAGE_SCHEME = "package:"
CORE_SUITE = "core"
"""The packaged suite at the root of ``tasks/``: the hand-written tasks, and the default of an installed package."""
DEFAULT_TASKS = Path("tasks")
"""What ``--tasks`` means when it is not given, while that folder exists in the working directory."""

_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_INSTALLED_SUITES = _PACKAGE_DIR / "_suites"
"""Where the wheel puts ``tasks/`` (package data of ``contextdelta._suites``)."""
_CHECKOUT = _PACKAGE_DIR.parent


class SuiteError(ValueError):
    """A ``--tasks`` value that names no suite; the message is one line saying what to give instead."""


@dataclass(frozen=True)
class SuiteSource:
    """A suite as a command was asked for it: the name a run records, and the folder read on this machine."""

    source: str
    """``package:NAME``, or the folder relative to the working directory (what the manifest records)."""
    path: Path
    """The folder of task files (machine-specific; never recorded)."""

    @property
    def packaged(self) -> bool:
        """Whether the suite is one the package ships."""
        return self.source.startswith(PACKAGE_SCHEME)


def packaged_suites_root() -> Path | None:
    """The folder holding the packaged suites: the installed package data, or a source checkout's ``tasks/``;
    None when neither exists (a broken installation)."""
    if _INSTALLED_SUITES.is_dir():
        return _INSTALLED_SUITES
    checkout = _CHECKOUT / "tasks"
    # only a checkout of this repository: beside an installed package lies site-packages, not a repository
    if checkout.is_dir() and (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "setup.py").is_file():
        return checkout
    return None


def packaged_suites() -> dict[str, Path]:
    """Every packaged suite by name (``core`` first, then sorted): the root, and each folder below it that holds
    a ``SUITE.lock``."""
    root = packaged_suites_root()
    if root is None:
        return {}
    found: dict[str, Path] = {CORE_SUITE: root}
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(folder)
        if base != root and LOCK_NAME in names:
            found[base.relative_to(root).as_posix()] = base
    return {CORE_SUITE: root, **{name: found[name] for name in sorted(found) if name != CORE_SUITE}}


def recorded_source(path: Path) -> str:
    """How a run records a suite given as a folder: the folder relative to the working directory, POSIX-style,
    so nothing machine-specific (an absolute path, a home folder) enters a run directory."""
    try:
        return Path(os.path.relpath(path)).as_posix()
    except ValueError:  # another drive (Windows): no relative path exists
        return path.name


def resolve_suite(given: str | None) -> SuiteSource:
    """The suite ``--tasks`` names: ``package:NAME``, a folder, or (``None``) the default: ``./tasks`` when it is
    a folder, else the packaged ``core`` suite. Raises SuiteError for an unknown packaged name. A folder is not
    checked here: each command says in its own words what is wrong with it."""
    if given is None:
        if DEFAULT_TASKS.is_dir():
            return SuiteSource(DEFAULT_TASKS.as_posix(), DEFAULT_TASKS)
        return _packaged(CORE_SUITE, "no --tasks given and no ./tasks folder here")
    if given.startswith(PACKAGE_SCHEME):
        return _packaged(given.removeprefix(PACKAGE_SCHEME), f"--tasks {given}")
    if not given.strip():  # Path("") is the working directory: an unset variable would validate the whole tree
        raise SuiteError(
            f"--tasks {given!r} names nothing: give a task folder or package:NAME, or leave --tasks out (the default)"
        )
    return SuiteSource(recorded_source(Path(given)), Path(given))


def _packaged(name: str, context: str) -> SuiteSource:
    suites = packaged_suites()
    if not suites:
        raise SuiteError(f"{context}, and this installation ships no task suites; give a folder with --tasks DIR")
    if name not in suites:
        known = ", ".join(f"{PACKAGE_SCHEME}{n}" for n in suites)
        raise SuiteError(f"{context}: no packaged suite {name!r}; packaged: {known} (`contextdelta suites`)")
    return SuiteSource(f"{PACKAGE_SCHEME}{name}", suites[name])


@dataclass(frozen=True)
class SuiteSummary:
    """One packaged suite as ``contextdelta suites`` lists it."""

    name: str
    tasks: int
    suite_hash: str
    """The suite hash of its task files (what a run's manifest records as ``suite.sha256``)."""
    lock_matches: bool
    """Its ``SUITE.lock`` records that hash (``validate-tasks --tasks package:NAME`` checks everything else)."""
    problems: int
    """Task files that did not load (0 in a sound installation)."""
    generator: dict[str, Any] | None
    """What generated it (``generate-tasks``' version and arguments); None for hand-written tasks."""

    @property
    def source(self) -> str:
        """The ``--tasks`` value that names it."""
        return f"{PACKAGE_SCHEME}{self.name}"


def summarize_suite(name: str, path: Path) -> SuiteSummary:
    """Load one suite's files and hash them, and compare the hash with its lock."""
    loaded, problems = load_directory(path)
    computed = suite_hash([t.task for t in loaded])
    lock = read_lock(path / LOCK_NAME) if (path / LOCK_NAME).is_file() else None
    return SuiteSummary(
        name=name,
        tasks=len(loaded),
        suite_hash=computed,
        lock_matches=lock is not None and lock.suite_hash == computed,
        problems=len(problems),
        generator=lock.generator if lock is not None else None,
    )
