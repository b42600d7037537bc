"""``check_task``: a predicate or prohibited action whose value the field or argument can never hold is a problem.

Such a predicate is decided by its own value, not by what the agent did (``status ne cancelld`` always holds, ``status
eq cancelld`` never does), and such a prohibited action never matches a call with a value of the argument's type;
the reference replay cannot see either when the predicate is a negative one or the hazard's grader is another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contextdelta.tasks import load_task
from contextdelta.tasks.checks import check_task
from tests.tasks.helpers import SUITE, edited, write_task


def problems(tmp_path: Path, edit: Any) -> list[str]:
    path = write_task(tmp_path, edited(edit))
    return [p.render() for p in check_task(str(path), load_task(path))]


def predicate(field: str, op: str, value: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["evaluator"]["expected_end_state"].append(
            {"resource": "order/order/A-1017", "field": field, "op": op, "value": value}
        )

    return edit


@pytest.mark.parametrize(
    ("field", "op", "value", "fragment"),
    [
        ("status", "ne", "cancelld", "status ne: the field is OrderStatus, so it never holds 'cancelld'"),
        ("status", "not_in", ["cancelld"], "status not_in: the field is OrderStatus, so it never holds 'cancelld'"),
        ("status", "not_in", "cancelled", "not_in takes a list of values, not 'cancelled'"),
        ("status", "ne", None, "so it never holds None"),
        ("total_cents", "ne", "9600", "the field is int, so it never holds '9600'"),
        ("total_cents", "lt", [1], "lt compares numbers or strings, not [1]"),
        ("version", "ne", "2", "version ne: the field is a version (an integer of 1 or more), so it never holds '2'"),
        ("version", "ne", 0, "the field is a version (an integer of 1 or more), so it never holds 0"),
        ("version", "gt", 0, "the field is a version (an integer of 1 or more), so it never holds 0"),
        ("notes", "not_contains", 5, "no element, substring or key of a list[Note] field can match 5"),
        ("notes", "not_contains", {"txt": "hi"}, "list[Note] field can match {'txt': 'hi'}"),
        ("notes", "len_eq", -1, "len_eq takes a length (an integer of 0 or more), not -1"),
        ("total_cents", "len_eq", 1, "the field is int, which has no length"),
    ],
)
def test_a_predicate_its_field_can_never_decide_is_named(
    tmp_path: Path, field: str, op: str, value: Any, fragment: str
) -> None:
    found = problems(tmp_path, predicate(field, op, value))
    assert len(found) == 1, found
    assert "evaluator.expected_end_state.5.value: order/order/A-1017" in found[0]
    assert fragment in found[0] and "give a value of the field's type" in found[0]


def test_a_list_index_the_graders_cannot_read_is_named(tmp_path: Path) -> None:
    for segment in ("--1", "\u00b2"):
        found = problems(tmp_path, predicate(f"items.{segment}.sku", "ne", "x"))
        assert len(found) == 1 and f"has no field '{segment}'" in found[0], found


@pytest.mark.parametrize(
    ("field", "op", "value"),
    [
        ("status", "ne", "cancelled"),
        ("status", "in", ["shipped", "delivered"]),
        ("cancellation_reason", "eq", None),
        ("notes", "not_contains", {"text": "refunded"}),
        ("notes", "contains", {"author": "agent"}),
        ("customer_name", "contains", "Priya"),
        ("shipping_address", "contains", "city"),
        ("items.0.sku", "eq", "MG-220"),
        ("items.-1.quantity", "ge", 1),
        ("notes", "len_eq", 0),
        ("version", "le", 3),
    ],
)
def test_a_predicate_of_the_fields_type_is_accepted(tmp_path: Path, field: str, op: str, value: Any) -> None:
    assert problems(tmp_path, predicate(field, op, value)) == []


def test_a_prohibited_action_with_an_argument_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["evaluator"]["prohibited_actions"] = [
            {
                "tool": "issue_refund",
                "args": {"order_id": "A-1042", "amount_cents": "8900"},
                "reason": "a second refund",
            }
        ]

    found = problems(tmp_path, edit)
    assert len(found) == 1, found
    assert "evaluator.prohibited_actions.0.args.amount_cents: issue_refund's amount_cents is int" in found[0]
    assert "the world reads it as 8900: write that (value: '8900')" in found[0]


def test_a_trigger_with_an_argument_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        (mutation,) = data["evaluator"]["hidden_mutations"]
        mutation["trigger"] = {"after_tool_call": {"tool": "get_order", "args": {"order_id": 1017}}}

    found = problems(tmp_path, edit)
    assert len(found) == 1, found
    assert "evaluator.hidden_mutations.0.trigger.after_tool_call.args.order_id: get_order's order_id is str" in found[0]
    assert "so the trigger would never match a call: give a value of that type (value: 1017)" in found[0]


def test_no_shipped_task_has_such_a_problem() -> None:
    for path in sorted(SUITE.glob("**/*.yaml")):
        found = [
            p.render()
            for p in check_task(str(path), load_task(path))
            if p.field.endswith(".value") or ".args." in p.field
        ]
        assert found == [], path


@pytest.mark.parametrize("part", ["trigger", "tool"])
def test_a_hidden_mutation_that_names_a_resource_the_task_does_not_have_is_named(tmp_path: Path, part: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        (mutation,) = data["evaluator"]["hidden_mutations"]
        if part == "trigger":
            mutation["trigger"] = {"after_tool_call": {"tool": "get_order", "args": {"order_id": "Q-1"}}}
        else:
            mutation["tool"]["args"]["order_id"] = "Z-9999"

    found = problems(tmp_path, edit)
    assert len(found) == 1, found
    if part == "trigger":
        assert "hidden_mutations.0.trigger.after_tool_call.args: get_order with these arguments addresses" in found[0]
        assert "order/order/Q-1, which is neither in the initial state" in found[0]
    else:
        assert "hidden_mutations.0.tool.args: issue_refund with these arguments writes order/order/Z-9999" in found[0]


def test_no_shipped_task_names_a_resource_it_does_not_have() -> None:
    for path in sorted(SUITE.glob("**/*.yaml")):
        found = [
            p.render() for p in check_task(str(path), load_task(path)) if "neither in the initial state" in p.message
        ]
        assert found == [], path


def test_a_clock_on_a_world_that_reads_none_is_named(tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        data["evaluator"]["clock"] = "2026-03-10T09:00:00"

    found = problems(tmp_path, edit)
    assert len(found) == 1, found
    assert "evaluator.clock: the order world reads no clock (only calendar does): remove it" in found[0]
    assert "(value: '2026-03-10T09:00:00')" in found[0]
