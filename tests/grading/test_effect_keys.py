"""``no_duplicate_action`` compares each write tool's effect key: reworded free text is the same action, a
different effect argument is not (SPEC section 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextdelta.grading import DuplicateRule, Verdict, duplicate_actions
from contextdelta.tasks import Task, load_task, without_mutations
from contextdelta.worlds import WORLDS, Outcome, ToolKind, ToolSpec, tool
from tests.grading.helpers import colleague_refund, make_task, play, verdict

TASKS = Path(__file__).resolve().parents[2] / "tasks"

REFUND = {"order_id": "A-1", "amount_cents": 1000, "reason": "Damaged"}
EVENT_SLOT = {"room_id": "atlas-4f", "start": "2026-03-11T15:00", "end": "2026-03-11T16:00"}
NEW_EVENT = {**EVENT_SLOT, "title": "Payments design review", "organizer": "dana.kim@northwind.io"}


def shipped(path: str) -> Task:
    """A shipped task without its hidden mutations: only the agent's calls change the world."""
    return without_mutations(load_task(TASKS / path))


def graded(task: Task, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Verdict, list[Outcome]]:
    world, initial = play(task, calls)
    return verdict(task, world, initial), [e.outcome for e in world.events]


REWORDED = [
    pytest.param(
        make_task(),
        [("issue_refund", REFUND), ("issue_refund", {**REFUND, "reason": "Customer asked for it"})],
        [Outcome.EXECUTED, Outcome.EXECUTED],
        id="order-refund-reason",
    ),
    pytest.param(
        make_task(),
        [
            ("cancel_order", {"order_id": "A-2", "reason": "Customer request"}),
            ("cancel_order", {"order_id": "A-2", "reason": "The customer changed their mind"}),
        ],
        [Outcome.EXECUTED, Outcome.REJECTED],
        id="order-cancel-reason",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("create_event", NEW_EVENT),
            ("create_event", {**NEW_EVENT, "title": "Design review: payments", "description": "Agenda to follow"}),
        ],
        [Outcome.EXECUTED, Outcome.REJECTED],
        id="calendar-create-title",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("create_event", {**NEW_EVENT, "attendees": ["sofia.rossi@northwind.io", "omar.haddad@northwind.io"]}),
            (
                "create_event",
                {
                    **NEW_EVENT,
                    "organizer": "Dana.Kim@northwind.io",
                    "attendees": ["Omar.Haddad@northwind.io", "sofia.rossi@northwind.io"],
                },
            ),
        ],
        [Outcome.EXECUTED, Outcome.REJECTED],
        id="calendar-create-the-same-people-in-another-order-and-case",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("cancel_event", {"event_id": "evt-3", "reason": "Organizer is out"}),
            ("cancel_event", {"event_id": "evt-3", "reason": "Not needed any more"}),
        ],
        [Outcome.EXECUTED, Outcome.REJECTED],
        id="calendar-cancel-reason",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            (
                "update_attendees",
                {"event_id": "evt-5", "add": ["sofia.rossi@northwind.io", "omar.haddad@northwind.io"]},
            ),
            (
                "update_attendees",
                {"event_id": "evt-5", "add": ["Omar.Haddad@northwind.io", "Sofia.Rossi@northwind.io"]},
            ),
        ],
        [Outcome.EXECUTED, Outcome.EXECUTED],
        id="calendar-invite-again-in-another-order-and-case",
    ),
    pytest.param(
        shipped("config/cfg-checkout-ramp.yaml"),
        [
            ("set_config", {"environment": "prod", "key": "checkout.max_cart_items", "value": 75}),
            ("set_config", {"environment": "prod", "value": 75, "key": "checkout.max_cart_items"}),
        ],
        [Outcome.EXECUTED, Outcome.EXECUTED],
        id="config-same-value",  # the config world's writes have no free text: every argument is the effect
    ),
]


@pytest.mark.parametrize(("task", "calls", "outcomes"), REWORDED)
def test_a_repeat_with_other_free_text_or_list_order_is_a_duplicate(
    task: Task, calls: list[tuple[str, dict[str, Any]]], outcomes: list[Outcome]
) -> None:
    result, found = graded(task, calls)
    assert found == outcomes  # the repeat reached the business logic
    assert not result.no_duplicate_action
    assert result.duplicate_action_count == 1
    assert [f.seq for f in result.event_flags if f.duplicate] == [1]
    assert result.reasons[-1].endswith("repeats call 0")


DIFFERENT = [
    pytest.param(
        make_task(),
        [("issue_refund", REFUND), ("issue_refund", {**REFUND, "amount_cents": 1500})],
        id="order-refund-amount",
    ),
    pytest.param(
        make_task(),
        [
            ("add_order_note", {"order_id": "A-1", "text": "Customer called."}),
            ("add_order_note", {"order_id": "A-1", "text": "Refund issued."}),
        ],
        id="order-note-text-is-the-note",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("create_event", NEW_EVENT),
            ("create_event", {**NEW_EVENT, "start": "2026-03-11T17:00", "end": "2026-03-11T18:00"}),
        ],
        id="calendar-create-slot",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("reschedule_event", {"event_id": "evt-3", "start": "2026-03-11T11:00", "end": "2026-03-11T11:30"}),
            ("reschedule_event", {"event_id": "evt-3", "start": "2026-03-11T16:00", "end": "2026-03-11T16:30"}),
        ],
        id="calendar-reschedule-time",
    ),
    pytest.param(
        shipped("calendar/cal-design-review.yaml"),
        [
            ("update_attendees", {"event_id": "evt-5", "add": ["sofia.rossi@northwind.io"]}),
            (
                "update_attendees",
                {"event_id": "evt-5", "add": ["sofia.rossi@northwind.io", "omar.haddad@northwind.io"]},
            ),
        ],
        id="calendar-invite-someone-more",
    ),
    pytest.param(
        shipped("config/cfg-checkout-ramp.yaml"),
        [
            ("set_config", {"environment": "prod", "key": "checkout.max_cart_items", "value": 75}),
            ("set_config", {"environment": "prod", "key": "checkout.max_cart_items", "value": 80}),
        ],
        id="config-other-value",
    ),
    pytest.param(
        shipped("config/cfg-checkout-ramp.yaml"),
        [
            ("rollout_flag", {"environment": "prod", "flag": "new_checkout_flow", "percentage": 50}),
            ("rollout_flag", {"environment": "staging", "flag": "new_checkout_flow", "percentage": 50}),
        ],
        id="config-other-environment",
    ),
]


@pytest.mark.parametrize(("task", "calls"), DIFFERENT)
def test_a_write_that_differs_in_an_effect_argument_is_not_a_duplicate(
    task: Task, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    result, found = graded(task, calls)
    assert found == [Outcome.EXECUTED, Outcome.EXECUTED]
    assert result.no_duplicate_action and result.duplicate_action_count == 0


def test_the_earlier_rule_compares_every_argument() -> None:
    """What runs recorded before the effect keys were graded by (verify names the change with it)."""
    task = make_task()
    world, _ = play(task, [("issue_refund", REFUND), ("issue_refund", {**REFUND, "reason": "Other words"})])
    assert not duplicate_actions(world.events, task.world).passed
    assert duplicate_actions(world.events, task.world, DuplicateRule.ALL_ARGUMENTS).passed


def test_every_write_tool_declares_an_effect_key_of_its_own_parameters() -> None:
    for definition in WORLDS.values():
        for spec in definition.tools:
            if spec.kind is ToolKind.WRITE:
                assert spec.effect, f"{definition.name}.{spec.name}"
                assert set(spec.effect) <= set(spec.args.model_fields)
                assert "expected_version" not in spec.effect
            else:
                assert spec.effect == ()


def test_a_tool_declaration_with_a_wrong_effect_key_is_refused() -> None:
    refund = WORLDS["order"].tool("issue_refund")
    assert isinstance(refund, ToolSpec)

    def issue(ctx: Any, args: Any) -> Any:
        """Refund."""

    issue.__annotations__ = {"args": refund.args}
    with pytest.raises(ValueError, match="a write tool needs an effect key"):
        tool(ToolKind.WRITE)(issue)
    with pytest.raises(ValueError, match=r"effect key names \['expected_version'\]"):
        tool(ToolKind.WRITE, effect=("order_id", "expected_version"))(issue)
    with pytest.raises(ValueError, match="a read tool has no effect key"):
        tool(ToolKind.READ, effect=("order_id",))(issue)


def test_a_trigger_declaring_free_text_fires_on_a_call_worded_otherwise() -> None:
    """A generated horizon task declares its trigger's refund with the reason the instruction quotes; an agent that
    words the reason otherwise still issues that refund, and the other actor's change must follow."""
    trigger = {"after_tool_call": {"tool": "issue_refund", "args": REFUND}}
    task = make_task(hidden_mutations=[colleague_refund(trigger, order_id="A-2")])
    world, _ = play(task, [("issue_refund", {**REFUND, "reason": "Arrived broken"})])
    assert [m.mutation_id for m in world.mutation_log] == ["colleague-refund"]
    other_amount = play(task, [("issue_refund", {**REFUND, "amount_cents": 999})])[0]
    assert other_amount.mutation_log == []


def test_a_prohibited_action_declaring_free_text_matches_a_call_worded_otherwise() -> None:
    task = make_task(
        prohibited_actions=[{"tool": "cancel_order", "args": {"order_id": "A-2", "reason": "x"}, "reason": "no"}]
    )
    result, _ = graded(task, [("cancel_order", {"order_id": "A-2", "reason": "Customer request"})])
    assert not result.no_prohibited_action and result.prohibited_action_count == 1
    kept, _ = graded(task, [("cancel_order", {"order_id": "A-1", "reason": "x"})])
    assert kept.no_prohibited_action


def test_another_meeting_in_a_slot_an_earlier_booking_left_is_not_a_duplicate() -> None:
    """A booking moved away frees its slot; another organizer's meeting booked there was counted as a repeat of the
    first booking while the key was the slot alone."""
    task = shipped("calendar/cal-design-review.yaml")
    moved = {"event_id": "evt-6", "start": "2026-03-11T17:00", "end": "2026-03-11T18:00"}
    other = {**NEW_EVENT, "title": "Hiring sync", "organizer": "omar.haddad@northwind.io"}
    result, found = graded(task, [("create_event", NEW_EVENT), ("reschedule_event", moved), ("create_event", other)])
    assert found == [Outcome.EXECUTED, Outcome.EXECUTED, Outcome.EXECUTED]
    assert result.no_duplicate_action and result.duplicate_action_count == 0
