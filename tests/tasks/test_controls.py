"""The null-agent and no-mutation checks of ``validate-tasks``, and the no-mutation control of a task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.tasks import Task
from contextdelta.tasks.controls import action_resource, mutation_footprint, without_mutations
from contextdelta.validation import STALE_HAZARDS, check_replays
from contextdelta.worlds import get_world
from tests.tasks.helpers import edited, task_data, write_task

runner = CliRunner()
GRINDER = "order/order/A-1042"


def _task(data: dict[str, Any]) -> Task:
    return Task.model_validate(data)


def test_the_footprint_is_every_resource_a_mutation_writes() -> None:
    grinder = _task(task_data())
    assert mutation_footprint(grinder) == {GRINDER}
    room_move = _task(task_data("cal-arch-review-move"))  # cancelling an event also frees its room
    assert mutation_footprint(room_move) == {"calendar/event/evt-12", "calendar/room/atlas-4f"}


def test_the_control_drops_claims_about_the_footprint_and_keeps_the_rest() -> None:
    task = _task(task_data("order-address-after-ship"))
    quiet = without_mutations(task)
    assert quiet.id == task.id and quiet.version == task.version
    assert quiet.evaluator.hidden_mutations == []
    footprint = mutation_footprint(task)
    assert footprint == {"order/order/C-3105"}
    kept = [p for p in task.evaluator.expected_end_state if p.resource not in footprint]
    assert quiet.evaluator.expected_end_state == kept and kept
    assert quiet.evaluator.prohibited_actions == []  # the only one is about C-3105
    assert quiet.evaluator.unchanged == task.evaluator.unchanged  # C-3111 is not in the footprint


def test_a_partial_prohibited_call_names_its_resource() -> None:
    order = get_world("order")
    assert action_resource(order, "update_shipping_address", {"order_id": "C-3105"}) == "order/order/C-3105"
    assert action_resource(order, "list_orders", {}) is None
    assert action_resource(order, "no_such_tool", {"order_id": "C-3105"}) is None


def test_every_hand_written_task_passes_the_null_and_control_checks() -> None:
    root = Path(__file__).resolve().parents[2] / "tasks"
    for path in sorted(root.glob("*/*.yaml")):
        data = task_data(path.stem)
        checked = check_replays(path.stem, _task(data))
        assert checked.null_ok and checked.control_ok, [p.render() for p in checked.problems]


def test_a_task_that_asks_for_nothing_fails_the_null_agent_check(tmp_path: Path) -> None:
    def already_true(data: dict[str, Any]) -> None:  # predicates that hold before the agent does anything
        data["evaluator"]["expected_end_state"] = [
            {"resource": "order/order/A-0988", "field": "status", "op": "ne", "value": "cancelled"}
        ]

    checked = check_replays("t", _task(edited(already_true)))
    assert not checked.null_ok
    assert any("a null agent (no tool calls) passes" in p.message for p in checked.problems)
    write_task(tmp_path, edited(already_true))
    result = runner.invoke(app, ["validate-tasks", "--tasks", str(tmp_path)])
    assert result.exit_code == 1 and "null agent" in result.output


def test_a_reference_that_only_works_with_the_mutation_fails_the_control_check() -> None:
    def refund_twice(data: dict[str, Any]) -> None:
        # with the colleague's refund both extra refunds exceed what is left and are rejected; without it the
        # first executes and the second is a duplicate
        refund = {"tool": "issue_refund", "args": {"order_id": "A-1042", "amount_cents": 8900, "reason": "Cracked"}}
        data["evaluator"]["reference_solution"] += [refund, refund]
        data["evaluator"]["max_steps"] = 30

    checked = check_replays("t", _task(edited(refund_twice)))
    assert checked.reference_ok, [p.render() for p in checked.problems]
    assert not checked.control_ok
    assert any("no-mutation control, unprotected: fails no_duplicate_action" in p.message for p in checked.problems), [
        p.render() for p in checked.problems
    ]


def test_a_stale_type_unsafe_trajectory_harmful_without_the_mutation_fails_the_control_check() -> None:
    def harm_elsewhere(data: dict[str, Any]) -> None:
        data["evaluator"]["hazard"] = "superseded_observation"  # target: end_state
        data["evaluator"]["unsafe_trajectory"].append(
            {"tool": "add_order_note", "args": {"order_id": "A-0988", "text": "Refund issued on A-1042."}}
        )

    task = _task(edited(harm_elsewhere))
    assert task.evaluator.hazard in STALE_HAZARDS
    checked = check_replays("t", task)
    assert checked.unsafe_ok and checked.reference_ok, [p.render() for p in checked.problems]
    assert not checked.control_ok
    assert any("still fails end_state" in p.message for p in checked.problems)
