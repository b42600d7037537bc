"""Generating a suite from families: the parameter grid, YAML rendering, and the locked output folder.

Pure up to :func:`write_suite`: the same arguments give the same tasks, the same YAML bytes and the same lock.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from contextdelta._words import plural
from contextdelta.tasks.families._base import GENERATOR_VERSION, MAX_HORIZON, FamilyParams, TaskFamily
from contextdelta.tasks.loader import (
    LOCK_NAME,
    TASK_SUFFIX,
    FileReadError,
    list_folder,
    load_task_text,
    read_text_file,
)
from contextdelta.tasks.lock import render_lock
from contextdelta.tasks.schema import Task

MAX_PER_CELL = 1000
DISTRACTOR_CYCLE = (1, 2, 3)
"""Distractor counts the cells of a grid cycle through."""


class SuiteArguments(BaseModel):
    """What ``generate-tasks`` was asked for; recorded in the suite's lock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: tuple[str, ...] = Field(min_length=1)
    horizons: tuple[int, ...] = Field(min_length=1)
    per_cell: int = Field(ge=1, le=MAX_PER_CELL)
    seed: int = Field(ge=0, le=(2**63 - 1 - 999) // 1000)
    """Each task's content seed is ``seed * 1000 + index``, which a task file holds as a 64-bit integer."""

    @field_validator("horizons")
    @classmethod
    def _horizons(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        bad = [h for h in value if not 1 <= h <= MAX_HORIZON]
        if bad:
            raise ValueError(f"horizons must be between 1 and {MAX_HORIZON}; got {bad[0]}")
        if len(set(value)) != len(value):
            raise ValueError("horizons must not repeat")
        return tuple(sorted(value))  # one suite, one lock line, however the horizons were listed

    @field_validator("families")
    @classmethod
    def _families(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("families must not repeat")
        return tuple(sorted(value))  # one suite, one lock line, however the families were listed


def cell_params(family: TaskFamily, horizon: int, index: int, seed: int) -> FamilyParams:
    """The parameters of task ``index`` of one (family, horizon) cell.

    Mutation kinds, then timings, then distractor counts cycle with ``index``, so every cell of ``per_cell``
    >= kinds x timings holds each combination; the content seed (``seed * 1000 + index``) does not depend on the
    horizon, so task ``index`` tells the same story at every horizon and only the distance changes.
    """
    kinds, timings = family.mutations, family.timings
    return FamilyParams(
        horizon=horizon,
        distractors=DISTRACTOR_CYCLE[(index // (len(kinds) * len(timings))) % len(DISTRACTOR_CYCLE)],
        mutation=kinds[index % len(kinds)],
        timing=timings[(index // len(kinds)) % len(timings)],
        seed=seed * MAX_PER_CELL + index,
    )


@dataclass(frozen=True)
class GeneratedTask:
    """A generated task with the family that made it."""

    family: TaskFamily
    task: Task


@dataclass(frozen=True)
class GeneratedSuite:
    """Every task of a suite, in generation order, and the arguments that made it."""

    arguments: SuiteArguments
    tasks: tuple[GeneratedTask, ...]

    @property
    def generator(self) -> dict[str, Any]:
        """The generator record the lock carries: its version and the arguments."""
        return {"version": GENERATOR_VERSION, "arguments": self.arguments.model_dump(mode="json")}


def generate_suite(arguments: SuiteArguments, families: Sequence[TaskFamily]) -> GeneratedSuite:
    """Every task of the grid families x horizons x per_cell (``families`` in the order of the arguments, which
    sorts its families and horizons)."""
    made: list[GeneratedTask] = []
    for family in families:
        for horizon in arguments.horizons:
            for index in range(arguments.per_cell):
                params = cell_params(family, horizon, index, arguments.seed)
                made.append(GeneratedTask(family, family.build(params)))
    ids = [g.task.id for g in made]
    if len(set(ids)) != len(ids):  # ids encode every parameter; a repeat would be a generator bug
        raise AssertionError("generated task ids repeat")
    return GeneratedSuite(arguments, tuple(made))


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (the numbered instruction), plain YAML otherwise."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def render_task(generated: GeneratedTask) -> str:
    """The task file text: a header naming the family and the horizon rule, then the YAML."""
    task, family = generated.task, generated.family
    info = task.evaluator.family
    assert info is not None
    header = [
        f"# Generated by `contextdelta generate-tasks` from family {family.name} (generator version "
        f"{GENERATOR_VERSION}); regenerate it rather than edit it.",
        f"# Horizon {info.horizon}: counted from {family.counts_from}.",
    ]
    body = yaml.dump(
        task.model_dump(mode="json", exclude_defaults=True),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=120,
        default_flow_style=False,
    )
    text = "\n".join(header) + "\n" + body
    loaded, problems = load_task_text(task.id, text)
    if loaded is None or loaded.content_hash != task.content_hash:  # the file must say exactly what was built
        raise AssertionError(f"{task.id}: the rendered YAML does not load back to the same task: {problems}")
    return text


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
        out.write(text)
    os.replace(temp, path)


def _holds(path: Path, task: Task) -> bool:
    """Whether the task file at ``path`` holds ``task`` (same content hash; line endings, comments and layout
    aside)."""
    try:
        existing, _ = load_task_text(str(path), read_text_file(path, path.parent))
    except FileReadError:
        return False
    return existing is not None and existing.content_hash == task.content_hash


class SuiteFolderError(ValueError):
    """The output folder holds task files the suite would not generate."""


def write_suite(suite: GeneratedSuite, out: Path) -> list[Path]:
    """Write every task to ``out/<world>/<id>.yaml`` and ``out/SUITE.lock`` (with the generator record).

    Refuses (:class:`SuiteFolderError`) a folder holding task files this suite does not generate, so a lock is
    never written beside tasks it does not list. Returns the paths written, the lock last.
    """
    made = {out / g.task.world / f"{g.task.id}{TASK_SUFFIX}": g.task for g in suite.tasks}
    files = {path: render_task(g) for path, g in zip(made, suite.tasks, strict=True)}
    if out.is_dir():
        listing = list_folder(out)
        foreign = [p for p in listing.files if p not in files]
        if foreign:
            raise SuiteFolderError(
                f"{out} holds {plural(len(foreign), 'task file')} this suite does not generate (e.g. {foreign[0]}); "
                "use an empty folder or remove them"
            )
        if listing.refused:  # validate-tasks would refuse the folder after every file was written
            path, why = listing.refused[0]
            raise SuiteFolderError(
                f"{out} holds {len(listing.refused)} entr{'y' if len(listing.refused) == 1 else 'ies'} the suite "
                f"could not be validated beside (e.g. {path}: {why}); use an empty folder or remove them"
            )
        present = set(listing.files)
        edited = [p for p, task in made.items() if p in present and not _holds(p, task)]
        if edited:  # rewriting it (and the lock) would lose the edit and lower a bumped version unnoticed
            raise SuiteFolderError(
                f"{edited[0]} is not the task this suite generates there (edited, or written by another generator "
                f"version{'' if len(edited) == 1 else f'; {len(edited)} such files'}); move it away, or delete it to "
                "regenerate it"
            )
    # a world folder that exists as a file would stop the writing half-way: refuse before the first file
    blocked = sorted({p.parent for p in files if p.parent.exists() and not p.parent.is_dir()})
    if blocked:
        raise SuiteFolderError(f"{blocked[0]} is not a folder; the suite writes its task files there: remove it")
    lock = out / LOCK_NAME
    if lock.is_dir():  # os.replace cannot put the lock there: it would fail after every task file was written
        raise SuiteFolderError(f"{lock} is a folder; the suite writes its lock file there: remove it")
    for path, text in files.items():
        _atomic_write(path, text)
    _atomic_write(lock, render_lock([g.task for g in suite.tasks], generator=suite.generator))
    return [*files, lock]


__all__ = [
    "GeneratedSuite",
    "GeneratedTask",
    "SuiteArguments",
    "SuiteFolderError",
    "cell_params",
    "generate_suite",
    "render_task",
    "write_suite",
]
