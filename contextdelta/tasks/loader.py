"""Loading task files: YAML with line numbers, pydantic validation, and problems that name file, field, value.

YAML is read with a safe loader that keeps timestamps as strings (a task's times are the world's local times,
not YAML datetimes) and refuses duplicate keys, which plain YAML silently resolves to the last one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from contextdelta.tasks.schema import Task

TASK_SUFFIX = ".yaml"

_NO_VALUE: Any = object()


@dataclass(frozen=True)
class TaskProblem:
    """One problem found in a task file (or the suite lock): where it is, what is wrong, the offending value."""

    file: str
    field: str
    message: str
    value: Any = _NO_VALUE
    line: int | None = None

    @property
    def has_value(self) -> bool:
        """Whether the problem names an offending value."""
        return self.value is not _NO_VALUE

    def render(self) -> str:
        """``file[:line]: field: message (value: ...)`` on one line."""
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        if self.has_value:
            text += f" (value: {_short(self.value)})"
        return text


def _short(value: Any, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _TaskLoader(yaml.SafeLoader):
    """SafeLoader without the implicit timestamp type and with duplicate-key detection."""


_TaskLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping_without_duplicates(loader: _TaskLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_TaskLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def parse_yaml(text: str) -> Any:
    """Parse task YAML (timestamps stay strings; duplicate keys are an error)."""
    return yaml.load(text, Loader=_TaskLoader)  # _TaskLoader is a SafeLoader subclass


def _non_json(value: Any, path: tuple[int | str, ...]) -> Iterator[tuple[tuple[int | str, ...], str, Any]]:
    """Values canonical JSON cannot hold faithfully: non-finite numbers, non-string keys, YAML sets, bytes."""
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                yield (*path, str(key)), "mapping keys must be strings (quote it)", key
            else:
                yield from _non_json(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _non_json(child, (*path, index))
    elif isinstance(value, float) and not math.isfinite(value):
        yield path, "not a finite number", value
    elif value is not None and not isinstance(value, str | int | float | bool):
        yield path, f"not a JSON value ({type(value).__name__})", value


def _compose(text: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=_TaskLoader)
    except yaml.YAMLError:
        return None


def _key_is(key_node: yaml.Node, part: int | str) -> bool:
    """Whether a mapping key node is the key ``part`` (plain scalars compared as YAML reads them: ``on`` is True)."""
    text = getattr(key_node, "value", None)
    if not isinstance(text, str):
        return False
    if text == str(part):
        return True
    if isinstance(key_node, yaml.ScalarNode) and key_node.style is None:
        try:
            return str(parse_yaml(text)) == str(part)
        except yaml.YAMLError:
            return False
    return False


def _line_of(root: yaml.Node | None, path: Sequence[int | str]) -> int | None:
    """1-based line of the YAML node at ``path`` (or of its deepest existing ancestor)."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = next((pair for pair in node.value if _key_is(pair[0], part)), None)
            if match is None:
                return line
            key_node, node = match
            line = key_node.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required field is missing"
    return str(error["msg"])


def validation_problems(file: str, text: str, exc: ValidationError) -> list[TaskProblem]:
    """One problem per pydantic error, with the dotted field path, its line and the offending value."""
    root = _compose(text)
    problems = []
    for error in exc.errors(include_url=False):
        path = [p for p in error["loc"] if not isinstance(p, str) or not p.startswith(("function-", "literal["))]
        field = ".".join(str(p) for p in path)
        value = _NO_VALUE if error["type"] == "missing" else error.get("input", _NO_VALUE)
        problems.append(TaskProblem(file, field, _message(error), value, _line_of(root, path)))
    return problems


def load_task_text(file: str, text: str) -> tuple[Task | None, list[TaskProblem]]:
    """Parse and validate one task file's text; returns the task or the problems that prevent it."""
    try:
        data = parse_yaml(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        detail = " ".join(p for p in (exc.context, exc.problem) if p)
        return None, [TaskProblem(file, "", f"invalid YAML: {detail}", line=line)]
    except yaml.YAMLError as exc:
        return None, [TaskProblem(file, "", f"invalid YAML: {exc}")]
    if not isinstance(data, dict):
        return None, [TaskProblem(file, "", "a task file must be a YAML mapping", type(data).__name__)]
    strange = list(_non_json(data, ()))
    if strange:
        root = _compose(text)
        return None, [
            TaskProblem(file, ".".join(map(str, path)), message, value, _line_of(root, path))
            for path, message, value in strange
        ]
    try:
        task = Task.model_validate(data)
    except ValidationError as exc:
        return None, validation_problems(file, text, exc)
    return task, []


def load_task(path: Path) -> Task:
    """Load one task file; raises ValueError listing every problem."""
    task, problems = load_task_text(str(path), path.read_text(encoding="utf-8"))
    if task is None:
        raise ValueError("\n".join(p.render() for p in problems))
    return task


def task_files(directory: Path) -> list[Path]:
    """Every ``*.yaml`` below ``directory``, sorted."""
    return sorted(p for p in directory.rglob(f"*{TASK_SUFFIX}") if p.is_file())


@dataclass
class LoadedTask:
    """A task file that validated, with its path."""

    path: Path
    task: Task

    @property
    def file(self) -> str:
        """The path as problems show it."""
        return display_path(self.path)


def display_path(path: Path) -> str:
    """The path relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_directory(directory: Path) -> tuple[list[LoadedTask], list[TaskProblem]]:
    """Load every task file under ``directory``: ``<world>/<id>.yaml``.

    Checks per file: YAML, schema, the id matching the file name, the world matching the folder; and across
    files: duplicate ids. Returns the tasks that loaded and every problem found.
    """
    loaded: list[LoadedTask] = []
    problems: list[TaskProblem] = []
    by_id: dict[str, LoadedTask] = {}
    for path in task_files(directory):
        file = display_path(path)
        relative = path.relative_to(directory)
        if len(relative.parts) != 2:
            problems.append(TaskProblem(file, "", "task files live in <world>/<id>.yaml below the tasks folder"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            problems.append(TaskProblem(file, "", f"not UTF-8 text: {exc.reason} at byte {exc.start}"))
            continue
        task, found = load_task_text(file, text)
        problems.extend(found)
        if task is None:
            continue
        if task.id != path.stem:
            problems.append(TaskProblem(file, "id", f"does not match the file name {path.name!r}", task.id))
            continue
        if task.world != relative.parts[0]:
            problems.append(TaskProblem(file, "world", f"does not match the folder {relative.parts[0]!r}", task.world))
            continue
        if task.id in by_id:
            problems.append(TaskProblem(file, "id", f"duplicate id, also defined in {by_id[task.id].file}", task.id))
            continue
        entry = LoadedTask(path, task)
        by_id[task.id] = entry
        loaded.append(entry)
    return loaded, problems
