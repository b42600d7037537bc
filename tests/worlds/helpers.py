"""Small initial states for each world and call helpers, shared by the world tests."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from contextdelta.worlds import HiddenMutation, ProtectionMode, Scope, ToolCallResult, World, get_world

CLOCK = datetime(2026, 12, 1, 9, 0)


def address(name: str = "Maya Chen", city: str = "Austin") -> dict[str, Any]:
    return {
        "name": name,
        "line1": "1200 Barton Springs Rd",
        "city": city,
        "region": "TX",
        "postal_code": "78704",
        "country": "US",
    }


def order(
    status: str = "paid", total: int = 12900, refunded: int = 0, email: str = "maya.chen@example.com"
) -> dict[str, Any]:
    return {
        "customer_name": "Maya Chen",
        "customer_email": email,
        "status": status,
        "placed_at": "2026-11-20T14:03:00",
        "items": [{"sku": "KB-204", "name": "Mechanical keyboard", "quantity": 1, "unit_price_cents": total}],
        "total_cents": total,
        "refunded_cents": refunded,
        "shipping_address": address(),
    }


ORDER_STATE = {
    "order": {
        "A-1001": order(),
        "A-1002": order(status="shipped", total=4550),
        "A-1003": order(status="pending", total=2000, email="li.wei@example.com"),
        "A-1004": order(status="refunded", total=3000, refunded=3000),
        "A-1005": order(status="cancelled", total=1500),
    }
}

CALENDAR_STATE = {
    "room": {
        "atlas": {
            "name": "Atlas",
            "building": "HQ 4F",
            "capacity": 6,
            "bookings": [{"event_id": "evt-1", "start": "2026-12-02T10:00", "end": "2026-12-02T11:00"}],
        },
        "borealis": {"name": "Borealis", "building": "HQ 2F", "capacity": 2, "bookings": []},
    },
    "event": {
        "evt-1": {
            "title": "Platform weekly",
            "room_id": "atlas",
            "start": "2026-12-02T10:00",
            "end": "2026-12-02T11:00",
            "organizer": "ana@corp.example",
            "attendees": ["ana@corp.example", "ben@corp.example"],
        },
        "evt-2": {
            "title": "Old retro",
            "room_id": "borealis",
            "start": "2026-12-03T15:00",
            "end": "2026-12-03T16:00",
            "organizer": "ana@corp.example",
            "status": "cancelled",
        },
    },
}

CONFIG_STATE = {
    "setting": {
        "prod:payments.retry_limit": {
            "environment": "prod",
            "key": "payments.retry_limit",
            "value_type": "integer",
            "value": 3,
            "owner": "payments@corp.example",
        },
        "prod:search.timeout_ms": {
            "environment": "prod",
            "key": "search.timeout_ms",
            "value_type": "number",
            "value": 250.0,
            "owner": "search@corp.example",
        },
        "prod:billing.currency": {
            "environment": "prod",
            "key": "billing.currency",
            "value_type": "string",
            "value": "USD",
            "owner": "billing@corp.example",
            "frozen": True,
            "freeze_reason": "quarter-end close",
        },
        "staging:payments.retry_limit": {
            "environment": "staging",
            "key": "payments.retry_limit",
            "value_type": "integer",
            "value": 5,
            "owner": "payments@corp.example",
        },
    },
    "flag": {
        "prod:new_checkout": {
            "environment": "prod",
            "name": "new_checkout",
            "enabled": True,
            "rollout_percent": 10,
            "owner": "checkout@corp.example",
        },
        "prod:dark_mode": {
            "environment": "prod",
            "name": "dark_mode",
            "enabled": False,
            "rollout_percent": 0,
            "owner": "web@corp.example",
            "frozen": True,
            "freeze_reason": "incident INC-4411",
        },
    },
}

STATES: dict[str, dict[str, Any]] = {"order": ORDER_STATE, "calendar": CALENDAR_STATE, "config": CONFIG_STATE}


def make_world(
    name: str,
    mode: ProtectionMode = ProtectionMode.UNPROTECTED,
    *,
    mutations: list[dict[str, Any]] | None = None,
    scope: Scope | None = None,
) -> World:
    return World(
        get_world(name),
        STATES[name],
        mode=mode,
        scope=scope,
        mutations=[HiddenMutation.model_validate(m) for m in mutations or []],
        clock=CLOCK if name == "calendar" else None,
    )


def read(world: World, tool: str, **args: Any) -> dict[str, Any]:
    result = world.call(tool, args)
    assert result.event.outcome == "executed", result.content
    return json.loads(result.content)  # type: ignore[no-any-return]


def write(world: World, tool: str, resource: str, /, **args: Any) -> ToolCallResult:
    """A write that is fresh in either mode: under the contract it sends the current version."""
    if world.mode is ProtectionMode.FRESHNESS_CONTRACT:
        args["expected_version"] = world.version(resource)
    return world.call(tool, args)


def error_code(result: ToolCallResult) -> str:
    return json.loads(result.content)["error"]["code"]  # type: ignore[no-any-return]
