"""Calendar world: every tool, every guard, in both protection modes."""

from __future__ import annotations

import json
from typing import Any

from contextdelta.worlds import Outcome, ProtectionMode
from tests.worlds.helpers import error_code, make_world, read, write

ATLAS = "calendar/room/atlas"
EVT1 = "calendar/event/evt-1"


def new_event(**overrides: object) -> dict[str, object]:
    args: dict[str, object] = {
        "room_id": "atlas",
        "title": "Design review",
        "start": "2026-12-02T14:00",
        "end": "2026-12-02T15:00",
        "organizer": "ana@corp.example",
        "attendees": ["ana@corp.example", "cy@corp.example"],
    }
    args.update(overrides)
    return args


def test_reads_return_versions() -> None:
    world = make_world("calendar")
    assert read(world, "get_event", event_id="evt-1")["event"]["version"] == 1
    assert read(world, "get_room", room_id="atlas")["room"]["capacity"] == 6
    assert [r["resource"] for r in read(world, "list_rooms", min_capacity=3)["rooms"]] == [ATLAS]
    day = read(world, "list_events", day="2026-12-02")
    assert [e["resource"] for e in day["events"]] == [EVT1]
    assert read(world, "list_events", attendee="BEN@corp.example")["count"] == 1
    assert read(world, "list_events", include_cancelled=True)["count"] == 2


def test_find_free_slots_skips_bookings() -> None:
    world = make_world("calendar")
    body = read(world, "find_free_slots", room_id="atlas", day="2026-12-02", duration_minutes=90)
    assert body["free"] == [
        {"start": "2026-12-02T08:00:00", "end": "2026-12-02T10:00:00"},
        {"start": "2026-12-02T11:00:00", "end": "2026-12-02T19:00:00"},
    ]
    assert body["room"]["resource"] == ATLAS
    assert read(world, "find_free_slots", room_id="atlas", day="2026-12-02", duration_minutes=121)["free"] == [
        {"start": "2026-12-02T11:00:00", "end": "2026-12-02T19:00:00"}
    ]


def test_create_event_books_the_room(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    result = write(world, "create_event", ATLAS, **new_event())
    assert result.event.outcome is Outcome.EXECUTED
    body = json.loads(result.content)
    assert body["event"]["resource"] == "calendar/event/evt-3"
    assert body["room"]["version"] == 2
    assert [b["event_id"] for b in body["room"]["bookings"]] == ["evt-1", "evt-3"]
    assert result.event.resources_written == ["calendar/event/evt-3", ATLAS]


def test_create_event_guards(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    cases = {
        "room_double_booked": new_event(start="2026-12-02T10:30", end="2026-12-02T11:30"),
        "in_the_past": new_event(start="2026-11-30T10:00", end="2026-11-30T11:00"),
        "invalid_time_range": new_event(start="2026-12-02T15:00", end="2026-12-02T14:00"),
        "over_capacity": new_event(room_id="borealis", attendees=["a@x", "b@x", "c@x"]),
    }
    before = world.state_hash()
    for code, args in cases.items():
        result = write(world, "create_event", f"calendar/room/{args['room_id']}", **args)
        assert (result.event.outcome, error_code(result)) == (Outcome.REJECTED, code)
    assert world.state_hash() == before


def test_reschedule_moves_between_rooms(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    result = write(
        world,
        "reschedule_event",
        EVT1,
        event_id="evt-1",
        start="2026-12-04T09:00",
        end="2026-12-04T10:00",
        room_id="borealis",
    )
    assert result.event.outcome is Outcome.EXECUTED, result.content
    body = json.loads(result.content)
    assert body["previous_room"]["bookings"] == []
    assert body["room"]["bookings"][0]["event_id"] == "evt-1"
    assert (world.version(EVT1), world.version(ATLAS), world.version("calendar/room/borealis")) == (2, 2, 2)


def test_reschedule_into_own_slot_is_not_a_double_booking(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    result = write(world, "reschedule_event", EVT1, event_id="evt-1", start="2026-12-02T10:30", end="2026-12-02T11:30")
    assert result.event.outcome is Outcome.EXECUTED, result.content


def test_cancel_event_frees_the_room_and_blocks_later_edits(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    result = write(world, "cancel_event", EVT1, event_id="evt-1", reason="team offsite")
    assert json.loads(result.content)["room"]["bookings"] == []
    edits: list[tuple[str, dict[str, Any]]] = [
        ("cancel_event", {"reason": "again"}),
        ("reschedule_event", {"start": "2026-12-05T10:00", "end": "2026-12-05T11:00"}),
        ("update_attendees", {"add": ["dee@corp.example"]}),
    ]
    for tool, args in edits:
        again = write(world, tool, EVT1, event_id="evt-1", **args)
        assert (again.event.outcome, error_code(again)) == (Outcome.REJECTED, "event_cancelled")


def test_update_attendees_adds_removes_and_respects_capacity(mode: ProtectionMode) -> None:
    world = make_world("calendar", mode)
    result = write(
        world,
        "update_attendees",
        EVT1,
        event_id="evt-1",
        add=["cy@corp.example", "ANA@corp.example"],
        remove=["ben@corp.example"],
    )
    assert json.loads(result.content)["event"]["attendees"] == ["ana@corp.example", "cy@corp.example"]
    crowd = [f"p{i}@corp.example" for i in range(6)]
    full = write(world, "update_attendees", EVT1, event_id="evt-1", add=crowd)
    assert (full.event.outcome, error_code(full)) == (Outcome.REJECTED, "over_capacity")


def test_times_with_utc_offsets_are_invalid() -> None:
    world = make_world("calendar")
    result = world.call("create_event", new_event(start="2026-12-02T14:00Z"))
    assert (result.event.outcome, error_code(result)) == (Outcome.INVALID, "invalid_arguments")
