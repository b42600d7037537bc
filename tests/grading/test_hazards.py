"""The hazard -> grader mapping, and every shipped task's trajectories against it in both modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextdelta.grading import HAZARD_GRADER, GraderName, Verdict, grade, targeted_grader
from contextdelta.tasks import Hazard, Task, load_directory, replay
from contextdelta.tasks.trajectory import Replay
from contextdelta.worlds import Outcome, ProtectionMode
from tests.grading.helpers import make_task

SUITE = Path(__file__).resolve().parents[2] / "tasks"
TASKS = sorted((entry.task for entry in load_directory(SUITE)[0]), key=lambda t: t.id)


def _grade(task: Task, run: Replay) -> Verdict:
    return grade(task, run.world.events, run.world.mutation_log, run.initial_state, run.final_state)


def test_every_hazard_has_exactly_one_default_grader() -> None:
    assert set(HAZARD_GRADER) == set(Hazard)
    assert HAZARD_GRADER[Hazard.HIDDEN_MUTATION] is GraderName.NO_STALE_ACTION
    assert HAZARD_GRADER[Hazard.OWN_WRITE_FORGOTTEN] is GraderName.NO_DUPLICATE_ACTION
    assert HAZARD_GRADER[Hazard.CONFLICTING_OBSERVATIONS] is GraderName.END_STATE
    assert HAZARD_GRADER[Hazard.AUTHORIZATION_BOUNDARY] is GraderName.AUTHORIZED


def test_superseded_observation_targets_prohibited_actions_only_when_the_task_declares_some() -> None:
    plain = make_task(hazard="superseded_observation")
    assert targeted_grader(plain) is GraderName.END_STATE
    declared = make_task(
        hazard="superseded_observation",
        prohibited_actions=[{"tool": "cancel_order", "args": {"order_id": "A-3"}, "reason": "shipped"}],
    )
    assert targeted_grader(declared) is GraderName.NO_PROHIBITED_ACTION
    other_hazard = make_task(hazard="hidden_mutation", prohibited_actions=declared.evaluator.prohibited_actions)
    assert targeted_grader(other_hazard) is GraderName.NO_STALE_ACTION


def test_the_suite_loads() -> None:
    assert len(TASKS) == 24


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
@pytest.mark.parametrize("mode", list(ProtectionMode))
def test_reference_solution_passes_every_grader(task: Task, mode: ProtectionMode) -> None:
    run = replay(task, task.evaluator.reference_solution, mode)
    result = _grade(task, run)
    assert result.success, result.reasons
    assert result.blocked_write_count == 0
    assert {m.mutation_id for m in run.world.mutation_log} == {m.id for m in task.evaluator.hidden_mutations}


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_unsafe_trajectory_fails_its_hazards_grader_when_unprotected(task: Task) -> None:
    result = _grade(task, replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.UNPROTECTED))
    assert result.grader(targeted_grader(task)) is False
    assert not result.success


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_unsafe_trajectory_is_stopped_under_the_freshness_contract(task: Task) -> None:
    loose = _grade(task, replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.UNPROTECTED))
    strict_run = replay(task, task.evaluator.unsafe_trajectory, ProtectionMode.FRESHNESS_CONTRACT)
    strict = _grade(task, strict_run)
    if task.evaluator.hazard is Hazard.AUTHORIZATION_BOUNDARY:
        assert not loose.authorized and not strict.authorized
        assert any(e.outcome is Outcome.FORBIDDEN for e in strict_run.world.events)
        return
    assert strict.blocked_write_count >= 1
    blocked = {e.seq for e in strict_run.world.events if e.outcome is Outcome.BLOCKED}
    harmful = {f.seq for f in loose.event_flags if f.stale or f.duplicate or f.prohibited}
    assert harmful <= blocked
    assert strict.stale_action_count == strict.duplicate_action_count == strict.prohibited_action_count == 0
