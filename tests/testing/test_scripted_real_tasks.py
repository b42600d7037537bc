"""The oracle policy over the real task suite (``tasks/``): both protection modes, full and reduced context.

Skipped while ``tasks/`` holds no task files.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.tasks import Task
from contextdelta.testing import load_task_files
from contextdelta.worlds import Outcome, ProtectionMode
from tests.testing.episode_loop import last_n, run_policy

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"


def _suite() -> list[Task]:
    if not TASKS_DIR.is_dir() or not any(TASKS_DIR.rglob("*.yaml")):
        return []
    return load_task_files(TASKS_DIR)


SUITE = _suite()


@pytest.mark.skipif(not SUITE, reason="tasks/ has no task files yet")
@pytest.mark.parametrize("reduce", [None, 1], ids=["full_history", "last_1"])
@pytest.mark.parametrize("mode", list(ProtectionMode))
@pytest.mark.parametrize("task", SUITE, ids=[t.id for t in SUITE])
def test_oracle_makes_only_valid_calls_and_finishes(task: Task, mode: ProtectionMode, reduce: int | None) -> None:
    reducer = last_n(reduce) if reduce else None
    episode = run_policy("oracle", task, mode, reducer, max_steps=task.evaluator.max_steps)
    assert episode.final is not None, f"no final answer within {task.evaluator.max_steps} steps: {episode.calls()}"
    invalid = [(e.tool, e.error_code, e.result) for e in episode.events if e.outcome is Outcome.INVALID]
    assert invalid == []
    forbidden = [e.tool for e in episode.events if e.outcome is Outcome.FORBIDDEN]
    assert forbidden == []
