"""Order world tools: reads return orders with their versions; writes enforce the order lifecycle."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PositiveInt

from contextdelta.worlds.model import ToolKind
from contextdelta.worlds.order.data_model import (
    REFUNDABLE_STATUSES,
    SHIPPED_STATUSES,
    Address,
    Note,
    Order,
    OrderStatus,
    Refund,
)
from contextdelta.worlds.tools import GuardViolation, MatchedEmail, ToolArgs, ToolContext, tool


class OrderRef(ToolArgs):
    order_id: str = Field(description="The order id, e.g. 'A-1001'.")


def _order(args: OrderRef) -> tuple[str, str]:
    return ("order", args.order_id)


class ListOrdersArgs(ToolArgs):
    customer_email: MatchedEmail | None = Field(default=None, description="Only orders of this customer email.")
    status: OrderStatus | None = Field(default=None, description="Only orders in this status.")


class RefundArgs(OrderRef):
    amount_cents: PositiveInt = Field(description="Amount to refund in integer cents (e.g. 1250 for $12.50).")
    reason: str = Field(min_length=1, description="Why the refund is issued; shown to the customer.")


class CancelArgs(OrderRef):
    reason: str = Field(min_length=1, description="Why the order is cancelled.")


class AddressArgs(OrderRef):
    name: str = Field(min_length=1, description="Recipient name.")
    line1: str = Field(min_length=1)
    line2: str | None = None
    city: str = Field(min_length=1)
    region: str | None = Field(default=None, description="State, province or region, if the country uses one.")
    postal_code: str = Field(min_length=1)
    country: str = Field(min_length=2, max_length=2, description="ISO 3166-1 alpha-2 country code, e.g. 'US'.")


ADDRESS_EFFECT = tuple(AddressArgs.model_fields)
"""Every part of the new address (the order and each address field): none of them is free text."""


class NoteArgs(OrderRef):
    text: str = Field(min_length=1, max_length=2000, description="The note to add to the order.")


@tool(ToolKind.READ, resource=_order)
def get_order(ctx: ToolContext, args: OrderRef) -> Any:
    """Get one order with its status, items, totals, refunds, shipping address, notes and current version."""
    return {"order": ctx.ref(Order, args.order_id)}


@tool(ToolKind.READ)
def list_orders(ctx: ToolContext, args: ListOrdersArgs) -> Any:
    """List orders, optionally filtered by customer email and/or status, each with its current version."""
    found = [
        ctx.ref(Order, order_id)
        for order_id, order in ctx.all(Order)
        if (args.customer_email is None or order.customer_email.lower() == args.customer_email.lower())
        and (args.status is None or order.status == args.status)
    ]
    return {"orders": found, "count": len(found)}


@tool(ToolKind.WRITE, resource=_order, effect=("order_id", "amount_cents"))  # not the reason
def issue_refund(ctx: ToolContext, args: RefundArgs) -> Any:
    """Refund part or all of a paid order to the customer's original payment method."""
    order = ctx.get(Order, args.order_id)
    if order.status == OrderStatus.REFUNDED:
        raise GuardViolation("already_refunded", f"Order {args.order_id} is already fully refunded.")
    if order.status not in REFUNDABLE_STATUSES:
        raise GuardViolation(
            "not_refundable", f"Order {args.order_id} is {order.status.value}; only paid orders can be refunded."
        )
    if args.amount_cents > order.refundable_cents:
        raise GuardViolation(
            "refund_exceeds_refundable",
            f"Refund of {args.amount_cents} cents exceeds the refundable amount of {order.refundable_cents} cents.",
            refundable_cents=order.refundable_cents,
        )
    order.refunded_cents += args.amount_cents
    order.refunds.append(Refund(amount_cents=args.amount_cents, reason=args.reason, by=ctx.actor))
    order.status = OrderStatus.REFUNDED if order.refundable_cents == 0 else OrderStatus.PARTIALLY_REFUNDED
    return {"refunded_cents": args.amount_cents, "order": ctx.put(args.order_id, order)}


@tool(ToolKind.WRITE, resource=_order, effect=("order_id",))  # not the reason
def cancel_order(ctx: ToolContext, args: CancelArgs) -> Any:
    """Cancel an order that has not shipped yet. Does not refund; issue a refund separately if one is owed."""
    order = ctx.get(Order, args.order_id)
    if order.status in SHIPPED_STATUSES:
        raise GuardViolation(
            "already_shipped", f"Order {args.order_id} has {order.status.value}; it cannot be cancelled."
        )
    if order.status in (OrderStatus.CANCELLED, OrderStatus.REFUNDED):
        raise GuardViolation("not_cancellable", f"Order {args.order_id} is {order.status.value}.")
    order.status = OrderStatus.CANCELLED
    order.cancellation_reason = args.reason
    return {"order": ctx.put(args.order_id, order)}


@tool(ToolKind.WRITE, resource=_order, effect=ADDRESS_EFFECT)
def update_shipping_address(ctx: ToolContext, args: AddressArgs) -> Any:
    """Replace the shipping address of an order that has not shipped yet."""
    order = ctx.get(Order, args.order_id)
    if order.status in SHIPPED_STATUSES:
        raise GuardViolation(
            "already_shipped", f"Order {args.order_id} has {order.status.value}; its address can no longer change."
        )
    if order.status in (OrderStatus.CANCELLED, OrderStatus.REFUNDED):
        raise GuardViolation("order_closed", f"Order {args.order_id} is {order.status.value}.")
    order.shipping_address = Address.model_validate(args.model_dump(exclude={"order_id", "expected_version"}))
    return {"order": ctx.put(args.order_id, order)}


@tool(ToolKind.WRITE, resource=_order, effect=("order_id", "text"))  # the text is the note: two notes differ
def add_order_note(ctx: ToolContext, args: NoteArgs) -> Any:
    """Add an internal note to an order (visible to staff, not to the customer)."""
    order = ctx.get(Order, args.order_id)
    order.notes.append(Note(author=ctx.actor, text=args.text))
    return {"order": ctx.put(args.order_id, order)}


TOOLS = (get_order, list_orders, issue_refund, cancel_order, update_shipping_address, add_order_note)
