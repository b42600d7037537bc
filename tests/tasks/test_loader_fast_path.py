"""The loader composes accepted YAML with libyaml and everything else with the Python parser: both paths must
load the same data, report the same lines and refuse the same files the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import contextdelta.tasks.loader as loader
from contextdelta.tasks import load_task_text

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "tasks").rglob("*.yaml"))
BASE = (ROOT / "tasks" / "order" / "order-grinder-refund.yaml").read_text(encoding="utf-8")
EDITS = [
    ("  max_steps: 22\n", "  max_steps: 22\n  on: yes\n"),  # a non-string key, with its line
    ("  max_steps: 22\n", "  max_steps: 22\n  max_steps: 23\n"),  # a duplicate key
    ("  max_steps: 22\n", "  max_steps: '22'\n"),  # a string where a number belongs
    ("  max_steps: 22\n", "  max_steps: 99999999999999999999999\n"),  # beyond 64 bits
    ("  max_steps: 22\n", "  max_steps: [22\n"),  # a syntax error
    ("  max_steps: 22\n", "  max_steps: !!int abc\n"),  # a tag that cannot convert
    ("  max_steps: 22\n", "  max_steps: 22\n  clock: 2026-03-11T14:00:00\n"),  # timestamps stay strings
    ("title: ", "title: &t "),  # an anchor ...
    ("  max_steps: 22\n", "  max_steps: 22\n  notes: *t\n"),  # ... and an alias to an undefined anchor
    ("  max_steps: 22\n", "  max_steps: 22\n" + "  deep: " + "[" * 45 + "]" * 45 + "\n"),  # beyond the nesting
    ("id: ", "id: \u00e9"),  # unicode in a scalar
]


def _both(text: str) -> tuple[object, object]:
    fast = load_task_text("t.yaml", text)
    saved = loader._FastTaskLoader
    loader._FastTaskLoader = None
    try:
        slow = load_task_text("t.yaml", text)
    finally:
        loader._FastTaskLoader = saved
    return fast, slow


@pytest.mark.slow
@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml has one path only")
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_task_loads_the_same_on_both_paths(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    composer, _ = loader._compose_bounded(text)
    assert isinstance(composer, loader._FastTaskLoader)  # the fast path is the one taken
    composer.dispose()
    fast, slow = _both(text)
    assert fast == slow


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml has one path only")
@pytest.mark.parametrize(("old", "new"), EDITS)
def test_edited_files_load_or_fail_the_same_on_both_paths(old: str, new: str) -> None:
    assert old in BASE
    fast, slow = _both(BASE.replace(old, new, 1))
    assert fast == slow
