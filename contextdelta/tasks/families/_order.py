"""The order world's material for families: customers, products, orders, and the support work that fills a
horizon (notes and goodwill credits on other customers' orders)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from contextdelta.tasks.families._base import WorkItem, call, predicate
from contextdelta.tasks.schema import Principal

PRINCIPAL = Principal(
    name="Sam Whitaker", role="Customer support agent (Tier 2), BrightCart", email="sam.whitaker@brightcart.com"
)
COLLEAGUES = (
    "marco.alvarez@brightcart.com",
    "dana.okafor@brightcart.com",
    "lena.fischer@brightcart.com",
    "ravi.menon@brightcart.com",
)
CUSTOMERS = (
    ("Mei Tanaka", "mei.tanaka@icloud.com"),
    ("Priya Raman", "priya.raman@gmail.com"),
    ("Jonas Berg", "jonas.berg@outlook.com"),
    ("Ama Owusu", "ama.owusu@gmail.com"),
    ("Luis Ortega", "luis.ortega@yahoo.com"),
    ("Hannah Kim", "hannah.kim@proton.me"),
    ("Tomasz Nowak", "tomasz.nowak@gmail.com"),
    ("Fatima Zahra", "fatima.zahra@outlook.com"),
    ("Oliver Grant", "oliver.grant@icloud.com"),
    ("Sofia Costa", "sofia.costa@gmail.com"),
    ("Kwame Mensah", "kwame.mensah@yahoo.com"),
    ("Elena Petrova", "elena.petrova@proton.me"),
)
ADDRESSES = (
    ("1530 SE Division St", "Portland", "OR", "97202"),
    ("2207 NE Alberta St", "Portland", "OR", "97211"),
    ("88 Valencia St", "San Francisco", "CA", "94103"),
    ("410 W 45th St", "New York", "NY", "10036"),
    ("1200 Pearl St", "Boulder", "CO", "80302"),
    ("77 Summer St", "Boston", "MA", "02110"),
    ("3100 Fremont Ave N", "Seattle", "WA", "98103"),
    ("915 E 6th St", "Austin", "TX", "78702"),
    ("26 Peachtree Pl NW", "Atlanta", "GA", "30309"),
    ("1408 Chestnut St", "Philadelphia", "PA", "19102"),
)
PRODUCTS = (
    ("GRD-200", "Burr coffee grinder", 8900),
    ("KTL-15", "Gooseneck kettle", 6400),
    ("BLD-900", "High-speed blender", 18900),
    ("CW-12", "Tri-ply cookware set (12 pc)", 42900),
    ("KNF-8", "Knife block set (8 pc)", 21900),
    ("LMP-3", "Adjustable desk lamp", 5400),
    ("CHR-1", "Ergonomic office chair", 34900),
    ("MAT-2", "Standing desk mat", 4900),
    ("SPK-7", "Bookshelf speakers (pair)", 27900),
    ("TWL-6", "Bath towel set (6 pc)", 5900),
    ("PAN-10", "Cast iron skillet (10 in)", 3900),
    ("FLT-4", "Water filter pitcher", 3400),
)
NOTE_TOPICS = (
    ("a late delivery", "Customer asked about delivery timing; told them it is with the carrier."),
    ("gift wrapping", "Customer asked whether gift wrap can be added; not available after checkout."),
    ("an invoice copy", "Customer needs an invoice for expenses; sent a copy to their email."),
    ("a product question", "Customer asked about care instructions; sent the care guide."),
    ("the return window", "Customer asked about the return window; 30 days from delivery."),
    ("a warranty question", "Customer asked about warranty cover; 2 years from delivery."),
)
CREDIT_REASONS = (
    ("the box arrived dented", 500),
    ("the delivery came a day late", 700),
    ("a missing instruction leaflet", 300),
    ("a scuffed corner on the item", 1000),
    ("a wrong colour on the packing slip", 400),
)


def order_key(order_id: str) -> str:
    """The resource key of an order."""
    return f"order/order/{order_id}"


def dollars(cents: int) -> str:
    """``$12.50`` from 1250."""
    return f"${cents // 100}.{cents % 100:02d}"


@dataclass
class OrderBook:
    """The orders of one generated task and the ids already used, with a seeded source of names."""

    rng: random.Random
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    _customers: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._customers = list(CUSTOMERS)
        self.rng.shuffle(self._customers)
        self._prefix = self.rng.choice("ABCDEFGHJKLMNPRSTUVW")
        self._next = self.rng.randrange(1000, 8000)

    def customer(self) -> tuple[str, str]:
        """A customer not used yet in this task."""
        return self._customers.pop()

    def new_order(self, customer: tuple[str, str], status: str, items: int = 1, day: int = 1) -> str:
        """Add an order for ``customer`` with ``items`` distinct products; returns its id."""
        self._next += self.rng.randrange(3, 40)
        order_id = f"{self._prefix}-{self._next}"
        products = self.rng.sample(PRODUCTS, items)
        line1, city, region, postal = self.rng.choice(ADDRESSES)
        self.orders[order_id] = {
            "customer_name": customer[0],
            "customer_email": customer[1],
            "status": status,
            "placed_at": f"2026-03-{day:02d}T{self.rng.randrange(8, 21):02d}:{self.rng.randrange(0, 60):02d}:00",
            "items": [{"sku": s, "name": n, "quantity": 1, "unit_price_cents": p} for s, n, p in products],
            "total_cents": sum(p for _, _, p in products),
            "shipping_address": {
                "name": customer[0],
                "line1": line1,
                "city": city,
                "region": region,
                "postal_code": postal,
                "country": "US",
            },
        }
        return order_id

    def state(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The initial state: ``{"order": {...}}``."""
        return {"order": self.orders}


def support_work(book: OrderBook, distractors: list[str]) -> Iterator[WorkItem]:
    """Endless two-call support items cycling over ``distractors``: list the customer's orders, then add a note
    or issue a small goodwill credit. Each item leaves an end-state predicate (note count, refunded total).

    The read is a listing, not ``get_order``: an agent (or a scripted policy) that skips re-reading an order it
    still has in view would otherwise make fewer calls than the horizon counts."""
    notes: dict[str, int] = {d: 0 for d in distractors}
    credited: dict[str, int] = {d: 0 for d in distractors}
    turn = 0
    while True:
        slot = turn % len(distractors)
        order_id = distractors[slot]
        order = book.orders[order_id]
        name = order["customer_name"]
        key = order_key(order_id)
        if (turn // len(distractors) + slot) % 2 == 0 or credited[order_id] + 1000 > order["total_cents"] // 2:
            topic, text = NOTE_TOPICS[(turn // 2 + len(order_id)) % len(NOTE_TOPICS)]
            notes[order_id] += 1
            yield WorkItem(
                step=f"{name} ({order['customer_email']}) called about {topic} on order {order_id}: look up their "
                f'orders and add this note to that order: "{text}"',
                calls=(
                    call("list_orders", customer_email=order["customer_email"]),
                    call("add_order_note", order_id=order_id, text=text),
                ),
                predicates=(predicate(key, "notes", "len_eq", notes[order_id]),),
            )
        else:
            reason, cents = CREDIT_REASONS[(turn // 2 + len(name)) % len(CREDIT_REASONS)]
            credited[order_id] += cents
            yield WorkItem(
                step=f"{name} ({order['customer_email']}) reports {reason} on order {order_id}: look up their "
                f'orders and refund {dollars(cents)} as a goodwill credit (reason: "Goodwill credit: {reason}").',
                calls=(
                    call("list_orders", customer_email=order["customer_email"]),
                    call("issue_refund", order_id=order_id, amount_cents=cents, reason=f"Goodwill credit: {reason}"),
                ),
                predicates=(predicate(key, "refunded_cents", "eq", credited[order_id]),),
            )
        turn += 1


def status_lookup(book: OrderBook, order_id: str) -> WorkItem:
    """A one-call item: look an order up and report its status, without changing it."""
    order = book.orders[order_id]
    return WorkItem(
        step=f"{order['customer_name']} asked whether order {order_id} has shipped: look it up and tell me its "
        "status in your final answer (don't change it).",
        calls=(call("get_order", order_id=order_id),),
        facts=(str(order["status"]),),
    )
