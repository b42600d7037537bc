"""Order world resources: orders with a payment/fulfilment lifecycle; money in integer cents."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, NonNegativeInt, PositiveInt

from contextdelta.worlds.model import ResourceModel


def _iso_time(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("not an ISO 8601 date and time; write it like 2026-03-02T12:30:00") from None
    return value


IsoTime = Annotated[str, AfterValidator(_iso_time)]
"""A time kept as the text the task wrote (what the model is shown), which must read as an ISO 8601 date and time:
``2026-13-45T99:03:00`` is an author's typo that a model would be shown as an order's date."""


class OrderStatus(StrEnum):
    PENDING = "pending"
    PAID = "paid"
    SHIPPED = "shipped"
    DELIVERED = "delivered"
    CANCELLED = "cancelled"
    PARTIALLY_REFUNDED = "partially_refunded"
    REFUNDED = "refunded"


REFUNDABLE_STATUSES = frozenset(
    {OrderStatus.PAID, OrderStatus.SHIPPED, OrderStatus.DELIVERED, OrderStatus.PARTIALLY_REFUNDED}
)
SHIPPED_STATUSES = frozenset({OrderStatus.SHIPPED, OrderStatus.DELIVERED})


class _Value(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Address(_Value):
    name: str
    line1: str
    line2: str | None = None
    city: str
    region: str | None = None
    postal_code: str
    country: str = Field(min_length=2, max_length=2, description="ISO 3166-1 alpha-2 country code.")


class LineItem(_Value):
    sku: str
    name: str
    quantity: PositiveInt
    unit_price_cents: NonNegativeInt


class Refund(_Value):
    amount_cents: PositiveInt
    reason: str
    by: str


class Note(_Value):
    author: str
    text: str


class Order(ResourceModel):
    kind: ClassVar[str] = "order"

    customer_name: str
    customer_email: str
    status: OrderStatus
    currency: str = "USD"
    placed_at: IsoTime
    items: list[LineItem] = Field(min_length=1)
    total_cents: NonNegativeInt
    refunded_cents: NonNegativeInt = 0
    refunds: list[Refund] = Field(default_factory=list)
    shipping_address: Address
    notes: list[Note] = Field(default_factory=list)
    cancellation_reason: str | None = None

    @property
    def refundable_cents(self) -> int:
        return self.total_cents - self.refunded_cents
