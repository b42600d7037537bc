"""Task files for the task tests: the shipped suite, and copies of its tasks edited into malformed ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from contextdelta.tasks.loader import parse_yaml

SUITE = Path(__file__).resolve().parents[2] / "tasks"
BASE_ID = "order-grinder-refund"
"""A hidden_mutation task with a mutation, predicates, an unchanged list and pinned-free trajectories."""


def suite_file(task_id: str) -> Path:
    return next(SUITE.glob(f"*/{task_id}.yaml"))


def task_data(task_id: str = BASE_ID) -> dict[str, Any]:
    """The parsed YAML of a shipped task."""
    data = parse_yaml(suite_file(task_id).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def dump(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200)


def write_task(root: Path, data: dict[str, Any], name: str | None = None, world: str | None = None) -> Path:
    """Write ``data`` to ``root/<world>/<name>.yaml`` (defaults: the task's own world and id)."""
    folder = root / (world or data["world"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or data['id']}.yaml"
    path.write_text(dump(data), encoding="utf-8")
    return path


def edited(edit: Callable[[dict[str, Any]], None], task_id: str = BASE_ID) -> dict[str, Any]:
    """A shipped task's data after ``edit`` changed it in place."""
    data = task_data(task_id)
    edit(data)
    return data
