"""Order world: every tool, every guard, in both protection modes."""

from __future__ import annotations

import json

import pytest

from contextdelta.worlds import Outcome, ProtectionMode, World, WorldStateError, get_world
from tests.worlds.helpers import error_code, make_world, order, read, write

KEY = "order/order/A-1001"


def test_get_order_returns_state_and_version(mode: ProtectionMode) -> None:
    world = make_world("order", mode)
    body = read(world, "get_order", order_id="A-1001")
    assert body["order"]["resource"] == KEY
    assert body["order"]["version"] == 1
    assert body["order"]["total_cents"] == 12900
    assert world.observed_version(KEY) == 1


def test_list_orders_filters_by_email_and_status() -> None:
    world = make_world("order")
    assert read(world, "list_orders")["count"] == 5
    by_email = read(world, "list_orders", customer_email="LI.WEI@example.com")
    assert [o["resource"] for o in by_email["orders"]] == ["order/order/A-1003"]
    shipped = read(world, "list_orders", status="shipped")
    assert [o["resource"] for o in shipped["orders"]] == ["order/order/A-1002"]
    assert world.events[-1].resources_observed == ["order/order/A-1002"]


def test_partial_then_full_refund(mode: ProtectionMode) -> None:
    world = make_world("order", mode)
    first = write(world, "issue_refund", KEY, order_id="A-1001", amount_cents=2900, reason="damaged keycap")
    assert first.event.outcome is Outcome.EXECUTED
    body = json.loads(first.content)["order"]
    assert (body["status"], body["refunded_cents"], body["version"]) == ("partially_refunded", 2900, 2)
    second = write(world, "issue_refund", KEY, order_id="A-1001", amount_cents=10000, reason="returned")
    body = json.loads(second.content)["order"]
    assert (body["status"], body["refunded_cents"], body["version"]) == ("refunded", 12900, 3)
    assert [r["amount_cents"] for r in body["refunds"]] == [2900, 10000]


@pytest.mark.parametrize(
    ("order_id", "amount", "code"),
    [
        ("A-1001", 12901, "refund_exceeds_refundable"),
        ("A-1004", 100, "already_refunded"),
        ("A-1003", 100, "not_refundable"),
        ("A-1005", 100, "not_refundable"),
    ],
)
def test_refund_guards(mode: ProtectionMode, order_id: str, amount: int, code: str) -> None:
    world = make_world("order", mode)
    before = world.state_hash()
    result = write(world, "issue_refund", f"order/order/{order_id}", order_id=order_id, amount_cents=amount, reason="x")
    assert result.event.outcome is Outcome.REJECTED
    assert error_code(result) == code
    assert world.state_hash() == before


def test_cancel_order_and_its_guards(mode: ProtectionMode) -> None:
    world = make_world("order", mode)
    ok = write(world, "cancel_order", "order/order/A-1003", order_id="A-1003", reason="customer request")
    assert json.loads(ok.content)["order"]["status"] == "cancelled"
    shipped = write(world, "cancel_order", "order/order/A-1002", order_id="A-1002", reason="late")
    assert (shipped.event.outcome, error_code(shipped)) == (Outcome.REJECTED, "already_shipped")
    again = write(world, "cancel_order", "order/order/A-1003", order_id="A-1003", reason="twice")
    assert (again.event.outcome, error_code(again)) == (Outcome.REJECTED, "not_cancellable")


def test_update_shipping_address_and_its_guard(mode: ProtectionMode) -> None:
    world = make_world("order", mode)
    new = {
        "name": "Maya Chen",
        "line1": "77 Lake St",
        "city": "Chicago",
        "region": "IL",
        "postal_code": "60601",
        "country": "US",
    }
    ok = write(world, "update_shipping_address", KEY, order_id="A-1001", **new)
    assert json.loads(ok.content)["order"]["shipping_address"]["city"] == "Chicago"
    shipped = write(world, "update_shipping_address", "order/order/A-1002", order_id="A-1002", **new)
    assert (shipped.event.outcome, error_code(shipped)) == (Outcome.REJECTED, "already_shipped")


def test_add_order_note_records_the_author(mode: ProtectionMode) -> None:
    world = make_world("order", mode)
    result = write(world, "add_order_note", "order/order/A-1002", order_id="A-1002", text="Customer called twice.")
    notes = json.loads(result.content)["order"]["notes"]
    assert notes == [{"author": "agent", "text": "Customer called twice."}]


@pytest.mark.parametrize("placed_at", ["2026-13-45T99:03:00", "last Tuesday", ""])
def test_an_order_placed_at_that_is_no_date_is_refused_naming_the_field(placed_at: str) -> None:
    state = {"order": {"A-1001": {**order(), "placed_at": placed_at}}}
    with pytest.raises(WorldStateError) as raised:
        World(get_world("order"), state)
    message = str(raised.value)
    assert "A-1001" in message and "placed_at" in message and "ISO 8601" in message and "2026-03-02T12:30:00" in message


@pytest.mark.parametrize("placed_at", ["2026-11-20T14:03:00", "2026-11-20T14:03", "2026-11-20T14:03:00Z"])
def test_an_iso_placed_at_is_kept_as_written(placed_at: str) -> None:
    state = {"order": {"A-1001": {**order(), "placed_at": placed_at}}}
    world = World(get_world("order"), state)
    assert read(world, "get_order", order_id="A-1001")["order"]["placed_at"] == placed_at
