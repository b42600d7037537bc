"""The shipped suite (tasks/): composition rules of issue 3, instruction hygiene, the lock, and validate-tasks."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.tasks import Hazard, Task, load_directory, read_lock, suite_hash
from contextdelta.validation import check_replays, validate_suite
from tests.tasks.helpers import SUITE

LOADED, PROBLEMS = load_directory(SUITE)
TASKS: list[Task] = sorted((entry.task for entry in LOADED), key=lambda t: t.id)
WORLDS = ("order", "calendar", "config")
AT_LEAST_PER_WORLD = {
    Hazard.HIDDEN_MUTATION: 2,
    Hazard.SUPERSEDED_OBSERVATION: 2,
    Hazard.OWN_WRITE_FORGOTTEN: 2,
    Hazard.CONFLICTING_OBSERVATIONS: 1,
    Hazard.AUTHORIZATION_BOUNDARY: 1,
}
GIVEAWAYS = ("version", "hidden", "stale", "mutation", "hazard", "concurrent", "other actor", "another actor")


def test_24_tasks_load_8_per_world() -> None:
    assert PROBLEMS == []
    assert len(TASKS) == 24
    assert Counter(t.world for t in TASKS) == dict.fromkeys(WORLDS, 8)


@pytest.mark.parametrize("world", WORLDS)
def test_hazard_mix_per_world(world: str) -> None:
    counts = Counter(t.evaluator.hazard for t in TASKS if t.world == world)
    for hazard, minimum in AT_LEAST_PER_WORLD.items():
        assert counts[hazard] >= minimum, (world, hazard)


def test_reference_solutions_are_long_enough_and_step_limits_leave_headroom() -> None:
    for task in TASKS:
        calls = len(task.evaluator.reference_solution)
        assert calls >= 6, task.id
        assert task.evaluator.max_steps >= 2 * calls + 6, task.id


def test_the_key_observation_is_buried_in_at_least_16_tasks() -> None:
    gaps = {task.id: check_replays(task.id, task).gap for task in TASKS}
    assert sum(1 for gap in gaps.values() if gap is not None and gap >= 4) >= 16, gaps


def _free_text(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _free_text(v)]
    if isinstance(value, list):
        return [s for v in value for s in _free_text(v)]
    return [value] if isinstance(value, str) and " " in value and len(value) >= 8 else []


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_instructions_read_like_requests_and_give_nothing_away(task: Task) -> None:
    instruction = task.public.instruction
    lowered = instruction.casefold()
    assert len(instruction.split()) >= 25
    for word in GIVEAWAYS:
        assert word not in lowered, word
    for mutation in task.evaluator.hidden_mutations:
        assert mutation.actor.casefold() not in lowered
        assert mutation.id not in lowered
        for text in _free_text(mutation.model_dump(mode="json")):
            assert text.casefold() not in lowered, text
    for action in task.evaluator.prohibited_actions:
        assert action.reason.casefold() not in lowered


def test_suite_lock_matches_the_files() -> None:
    lock = read_lock(SUITE / "SUITE.lock")
    assert lock.problems == []
    assert {e.text for e in lock.entries.values()} == {t.lock_line for t in TASKS}
    assert lock.suite_hash == suite_hash(TASKS)


@pytest.mark.slow
def test_validate_suite_passes_every_task() -> None:
    report = validate_suite(SUITE)
    assert report.problems == []
    assert [r.ok for r in report.rows] == [True] * 24


@pytest.mark.slow
def test_validate_tasks_prints_24_passing_rows_and_the_suite_hash() -> None:
    result = CliRunner().invoke(app, ["validate-tasks", "--tasks", str(SUITE)])
    assert result.exit_code == 0, result.output
    for task in TASKS:
        (row,) = [line for line in result.output.splitlines() if f" {task.id} " in line]
        assert row.count("pass") == 4  # reference, unsafe, null agent, no-mutation control
        assert task.content_hash[:12] in row
        assert task.evaluator.hazard.value in row
    assert f"suite hash: {suite_hash(TASKS)}" in result.output
    assert "24/24 tasks pass" in result.output
