"""``tasks/SUITE.lock``: the committed ``id@version:hash`` of every task and the suite hash.

A lock written by ``generate-tasks`` also holds one ``generator: {json}`` line: the generator version and the
arguments that produced the suite (regenerating with them gives the same files and the same lock).

Rules: a task whose content hash changed must carry a higher version than the lock records (editing a task
without bumping its version is an error even when regenerating the lock); a version may never go down; and
outside ``--write-lock`` the lock must list exactly the tasks present, with a suite hash matching its lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextdelta.canonical import canonical_json, sha256_hex
from contextdelta.tasks.loader import LOCK_NAME, FileReadError, LoadedTask, TaskProblem, display_path, read_text_file
from contextdelta.tasks.schema import Task, suite_hash

_LINE = re.compile(r"^(?P<id>[a-z0-9][a-z0-9\-]*)@(?P<version>[1-9][0-9]{0,17}):(?P<hash>[0-9a-f]{64})$")
_SUITE = re.compile(r"^suite_hash:\s*(?P<hash>[0-9a-f]{64})$")
_GENERATOR = re.compile(r"^generator:\s*(?P<json>.*)$")


@dataclass(frozen=True)
class LockEntry:
    """One ``id@version:hash`` line."""

    id: str
    version: int
    hash: str
    line: int

    @property
    def text(self) -> str:
        """The line as written in the lock."""
        return f"{self.id}@{self.version}:{self.hash}"


@dataclass
class SuiteLock:
    """A parsed lock file."""

    path: Path
    entries: dict[str, LockEntry] = field(default_factory=dict)
    suite_hash: str | None = None
    generator: dict[str, Any] | None = None
    """What generated the suite (``generate-tasks``): generator version and arguments; None if hand-written."""
    problems: list[TaskProblem] = field(default_factory=list)
    """What makes the file unreadable as a lock (a line of no known form, a task listed twice, a generator record
    that is not a JSON object, the suite hash missing or not that of its own lines, a file cut short): the lock is
    damaged, which no flag accepts (``--allow-unlocked`` accepts tasks that do not match a lock that was read)."""
    unreadable: bool = False
    """The file could not be read at all (too large, not UTF-8, a link out of the folder)."""

    def computed_hash(self) -> str:
        """The suite hash its own lines give (SPEC section 5)."""
        return sha256_hex("\n".join(sorted(e.text for e in self.entries.values())))


def render_lock(tasks: Sequence[Task], generator: dict[str, Any] | None = None) -> str:
    """The lock file text for ``tasks``: a header, the generator record (generated suites), the suite hash,
    and the sorted lines."""
    lines = sorted(t.lock_line for t in tasks)
    header = [
        "# ContextDelta task suite lock: one line per task, id@version:sha256 of the task's canonical JSON.",
        "# Regenerate with `contextdelta validate-tasks --write-lock`. Editing a task without bumping its",
        "# version is an error; the suite hash is the SHA-256 of the sorted lines below.",
    ]
    if generator is not None:
        header.append(f"generator: {canonical_json(generator)}")
    header.append(f"suite_hash: {suite_hash(list(tasks))}")
    return "\n".join([*header, *lines]) + "\n"


def _not_a_json_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def read_lock(path: Path) -> SuiteLock:
    """Parse a lock file; malformed lines become problems on the lock, never exceptions."""
    lock = SuiteLock(path)
    file = display_path(path)
    try:
        text = read_text_file(path, path.parent)
    except FileReadError as exc:
        lock.problems.append(TaskProblem(file, "", str(exc)))
        lock.unreadable = True
        return lock
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors save, as the YAML of a task file may start with
    lines = text.splitlines()
    if text and not text.endswith(("\n", "\r")):  # every lock validate-tasks writes ends its last line
        lock.problems.append(
            TaskProblem(
                file,
                "",
                "the last line has no newline: the file was cut short (truncated, or copied while it was written)",
                lines[-1],
                len(lines),
            )
        )
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        suite = _SUITE.match(text)
        if suite:
            lock.suite_hash = suite["hash"]
            continue
        generator = _GENERATOR.match(text)
        if generator:
            try:
                record = json.loads(generator["json"], parse_constant=_not_a_json_number)
            except json.JSONDecodeError as exc:
                lock.problems.append(TaskProblem(file, "generator", f"not JSON: {exc.msg}", generator["json"], number))
                continue
            except (ValueError, RecursionError) as exc:  # NaN/Infinity, or nesting past the interpreter's stack
                why = str(exc) if isinstance(exc, ValueError) else "nested too deeply"
                lock.problems.append(TaskProblem(file, "generator", f"not JSON: {why}", generator["json"], number))
                continue
            if not isinstance(record, dict):
                why = f"not a JSON object (a {type(record).__name__}); generate-tasks writes its arguments as one"
                lock.problems.append(TaskProblem(file, "generator", why, generator["json"], number))
                continue
            lock.generator = record
            continue
        match = _LINE.match(text)
        if match is None:
            lock.problems.append(TaskProblem(file, "", "not an 'id@version:sha256' line", text, number))
            continue
        if match["id"] in lock.entries:
            lock.problems.append(TaskProblem(file, "", "task listed twice", match["id"], number))
            continue
        lock.entries[match["id"]] = LockEntry(match["id"], int(match["version"]), match["hash"], number)
    if lock.suite_hash is None:
        lock.problems.append(TaskProblem(file, "suite_hash", "missing"))
    elif lock.suite_hash != lock.computed_hash():
        lock.problems.append(
            TaskProblem(file, "suite_hash", "does not match the lines of the lock (edited by hand?)", lock.suite_hash)
        )
    return lock


def lock_problems(
    tasks: Sequence[LoadedTask],
    lock: SuiteLock,
    *,
    writing: bool,
    not_loaded: Mapping[str, TaskProblem] | None = None,
) -> list[TaskProblem]:
    """Version and hash problems of ``tasks`` against ``lock``.

    When ``writing`` (``--write-lock``), only the version rules apply: new tasks, removed tasks and bumped
    versions are what regenerating the lock records. ``not_loaded``: by task id (its file's name), the first
    problem of each task file that did not load; a locked task among them is named as such, not as missing.
    """
    not_loaded = not_loaded or {}
    problems: list[TaskProblem] = []
    file = display_path(lock.path)
    if lock.problems:  # a damaged lock: never accepted, never regenerated over (the versions it held would be lost)
        remedy = (
            "cannot be read as a lock (the problems above), so no flag accepts it and --write-lock does not "
            "regenerate over it (the versions it held would be lost): restore it as validate-tasks wrote it (e.g. "
            f"`git checkout {LOCK_NAME}`), or delete it and run validate-tasks --write-lock"
        )
        problems.extend([*lock.problems, TaskProblem(file, "", remedy)])
    present = {t.task.id for t in tasks}
    for loaded in tasks:
        task = loaded.task
        entry = lock.entries.get(task.id)
        if entry is None:
            if not writing:
                problems.append(
                    TaskProblem(file, "", f"{task.id} is not in the lock; run validate-tasks --write-lock", task.id)
                )
            continue
        if task.version < entry.version:
            problems.append(
                TaskProblem(loaded.file, "version", f"is lower than the locked version {entry.version}", task.version)
            )
        elif task.version == entry.version and task.content_hash != entry.hash:
            problems.append(
                TaskProblem(
                    loaded.file,
                    "version",
                    f"content hash changed since {LOCK_NAME} ({entry.hash[:12]} -> {task.content_hash[:12]}) "
                    "but the version did not; bump it",
                    task.version,
                )
            )
        elif task.version > entry.version and not writing:
            problems.append(
                TaskProblem(
                    file,
                    "",
                    f"{task.id} is at version {task.version}, the lock at {entry.version}; "
                    "run validate-tasks --write-lock",
                    entry.text,
                    entry.line,
                )
            )
    if not writing:
        for entry in lock.entries.values():
            if entry.id in present:
                continue
            failed = not_loaded.get(entry.id)
            if failed is not None:
                why = f"lists a task whose file did not load ({failed.render()}); fix the file"
                problems.append(TaskProblem(file, "", why, entry.id, entry.line))
            else:
                problems.append(TaskProblem(file, "", "lists a task that does not exist", entry.id, entry.line))
    return problems
