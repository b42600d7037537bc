"""Calendar world tools: a room's schedule and each event are versioned resources."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from pydantic import Field, PositiveInt

from contextdelta.worlds.calendar.data_model import Booking, Event, EventStatus, LocalDateTime, Room
from contextdelta.worlds.model import ToolKind
from contextdelta.worlds.tools import GuardViolation, MatchedEmail, ToolArgs, ToolContext, tool


class EventRef(ToolArgs):
    event_id: str = Field(description="The event id, e.g. 'evt-204'.")


def _event(args: EventRef) -> tuple[str, str]:
    return ("event", args.event_id)


class RoomArg(ToolArgs):
    room_id: str = Field(description="The room id, e.g. 'atlas-4f'.")


def _room(args: RoomArg) -> tuple[str, str]:
    return ("room", args.room_id)


class ListEventsArgs(ToolArgs):
    day: date | None = Field(default=None, description="Only events starting on this date (YYYY-MM-DD).")
    room_id: str | None = Field(default=None, description="Only events in this room.")
    attendee: MatchedEmail | None = Field(default=None, description="Only events this email attends or organizes.")
    include_cancelled: bool = Field(default=False, description="Also list cancelled events.")


class ListRoomsArgs(ToolArgs):
    min_capacity: PositiveInt | None = Field(default=None, description="Only rooms holding at least this many.")


class FreeSlotsArgs(RoomArg):
    day: date = Field(description="The date to search (YYYY-MM-DD).")
    duration_minutes: PositiveInt = Field(le=600, description="Length of the meeting in minutes.")


class CreateEventArgs(RoomArg):
    title: str = Field(min_length=1)
    start: LocalDateTime = Field(description="Local start time, e.g. 2026-12-03T14:30.")
    end: LocalDateTime = Field(description="Local end time, after start.")
    organizer: str = Field(min_length=3, description="Email of the organizer.")
    attendees: list[str] = Field(default_factory=list, description="Emails of the attendees.")
    description: str | None = None


class RescheduleArgs(EventRef):
    start: LocalDateTime = Field(description="New local start time.")
    end: LocalDateTime = Field(description="New local end time, after start.")
    room_id: str | None = Field(default=None, description="Move to this room; omit to keep the current room.")


class CancelEventArgs(EventRef):
    reason: str = Field(min_length=1, description="Why the event is cancelled; sent to attendees.")


class AttendeesArgs(EventRef):
    add: list[str] = Field(default_factory=list, description="Emails to invite.")
    remove: list[MatchedEmail] = Field(default_factory=list, description="Emails to uninvite.")


WORKDAY_START = time(8, 0)
WORKDAY_END = time(19, 0)


def _check_slot(ctx: ToolContext, room: Room, start: datetime, end: datetime, ignore: str | None) -> None:
    if end <= start:
        raise GuardViolation("invalid_time_range", f"The end ({end.isoformat()}) must be after the start.")
    if start < ctx.now():
        raise GuardViolation("in_the_past", f"{start.isoformat()} is in the past (it is now {ctx.now().isoformat()}).")
    for booking in room.bookings:
        if booking.event_id != ignore and booking.overlaps(start, end):
            raise GuardViolation(
                "room_double_booked",
                f"{room.name} is already booked from {booking.start.isoformat()} to {booking.end.isoformat()}.",
                conflicting_event_id=booking.event_id,
            )


def _check_capacity(room: Room, attendees: list[str]) -> None:
    if len(attendees) > room.capacity:
        raise GuardViolation(
            "over_capacity", f"{room.name} holds {room.capacity} people; the event has {len(attendees)} attendees."
        )


def _book(room: Room, event_id: str, start: datetime, end: datetime) -> None:
    room.bookings = sorted(
        [b for b in room.bookings if b.event_id != event_id] + [Booking(event_id=event_id, start=start, end=end)],
        key=lambda b: (b.start, b.event_id),
    )


def _unbook(room: Room, event_id: str) -> None:
    room.bookings = [b for b in room.bookings if b.event_id != event_id]


def _editable(ctx: ToolContext, event_id: str) -> Event:
    event = ctx.get(Event, event_id)
    if event.status is EventStatus.CANCELLED:
        raise GuardViolation("event_cancelled", f"Event {event_id} is cancelled and can no longer be changed.")
    return event


@tool(ToolKind.READ, resource=_event)
def get_event(ctx: ToolContext, args: EventRef) -> Any:
    """Get one event: title, room, start and end, organizer, attendees, status and current version."""
    return {"event": ctx.ref(Event, args.event_id)}


@tool(ToolKind.READ)
def list_events(ctx: ToolContext, args: ListEventsArgs) -> Any:
    """List events, optionally filtered by day, room and attendee, each with its current version."""
    found = []
    for event_id, event in ctx.all(Event):
        if event.status is EventStatus.CANCELLED and not args.include_cancelled:
            continue
        if args.day is not None and event.start.date() != args.day:
            continue
        if args.room_id is not None and event.room_id != args.room_id:
            continue
        people = {a.lower() for a in event.attendees} | {event.organizer.lower()}
        if args.attendee is not None and args.attendee.lower() not in people:
            continue
        found.append((event.start, event_id))
    return {"events": [ctx.ref(Event, event_id) for _, event_id in sorted(found)], "count": len(found)}


@tool(ToolKind.READ, resource=_room)
def get_room(ctx: ToolContext, args: RoomArg) -> Any:
    """Get one meeting room: building, capacity, its confirmed bookings and its current version."""
    return {"room": ctx.ref(Room, args.room_id)}


@tool(ToolKind.READ)
def list_rooms(ctx: ToolContext, args: ListRoomsArgs) -> Any:
    """List meeting rooms with building, capacity and current bookings."""
    rooms = [
        ctx.ref(Room, room_id)
        for room_id, room in ctx.all(Room)
        if args.min_capacity is None or room.capacity >= args.min_capacity
    ]
    return {"rooms": rooms, "count": len(rooms)}


@tool(ToolKind.READ, resource=_room)
def find_free_slots(ctx: ToolContext, args: FreeSlotsArgs) -> Any:
    """Find free windows in a room on one day (08:00-19:00) long enough for a meeting; returns the room too."""
    room = ctx.get(Room, args.room_id)
    cursor = datetime.combine(args.day, WORKDAY_START)
    day_end = datetime.combine(args.day, WORKDAY_END)
    need = timedelta(minutes=args.duration_minutes)
    slots = []
    for booking in room.bookings:
        if booking.end <= cursor or booking.start >= day_end:
            continue
        if booking.start - cursor >= need:
            slots.append({"start": cursor.isoformat(), "end": booking.start.isoformat()})
        cursor = max(cursor, booking.end)
    if day_end - cursor >= need:
        slots.append({"start": cursor.isoformat(), "end": day_end.isoformat()})
    return {"room": ctx.ref(Room, args.room_id), "day": args.day.isoformat(), "free": slots}


def _booking_form(effect: dict[str, Any]) -> dict[str, Any]:
    """A booking as the tool acts on it: the slot, and who meets there (the organizer and the attendees, emails
    matched case-insensitively, the attendees as a set), so the same meeting booked again with a reworded title is
    the same action, and another meeting in a slot an earlier booking left is not."""
    form = _email_sets(effect)
    if isinstance(form.get("organizer"), str):
        form["organizer"] = form["organizer"].lower()
    return form


@tool(
    ToolKind.WRITE,
    resource=_room,
    effect=("room_id", "start", "end", "organizer", "attendees"),  # the slot and who meets there; not title or text
    effect_form=_booking_form,
)
def create_event(ctx: ToolContext, args: CreateEventArgs) -> Any:
    """Book a new event in a room. The room's schedule is the resource this write changes."""
    room = ctx.get(Room, args.room_id)
    _check_slot(ctx, room, args.start, args.end, ignore=None)
    _check_capacity(room, args.attendees)
    event_id = ctx.next_id(Event, "evt-")
    event = Event(
        title=args.title,
        room_id=args.room_id,
        start=args.start,
        end=args.end,
        organizer=args.organizer,
        attendees=list(dict.fromkeys(args.attendees)),
        description=args.description,
    )
    _book(room, event_id, args.start, args.end)
    return {"event": ctx.put(event_id, event), "room": ctx.put(args.room_id, room)}


@tool(ToolKind.WRITE, resource=_event, effect=("event_id", "start", "end", "room_id"))
def reschedule_event(ctx: ToolContext, args: RescheduleArgs) -> Any:
    """Move an event to a new time, and optionally to another room."""
    event = _editable(ctx, args.event_id)
    target_id = args.room_id or event.room_id
    target = ctx.get(Room, target_id)
    _check_slot(ctx, target, args.start, args.end, ignore=args.event_id)
    _check_capacity(target, event.attendees)
    result: dict[str, Any] = {}
    if target_id != event.room_id:
        old = ctx.get(Room, event.room_id)
        _unbook(old, args.event_id)
        result["previous_room"] = ctx.put(event.room_id, old)
    _book(target, args.event_id, args.start, args.end)
    event.room_id, event.start, event.end = target_id, args.start, args.end
    result["event"] = ctx.put(args.event_id, event)
    result["room"] = ctx.put(target_id, target)
    return result


@tool(ToolKind.WRITE, resource=_event, effect=("event_id",))  # not the reason
def cancel_event(ctx: ToolContext, args: CancelEventArgs) -> Any:
    """Cancel an event and free its room. Attendees are notified with the reason."""
    event = _editable(ctx, args.event_id)
    room = ctx.get(Room, event.room_id)
    _unbook(room, args.event_id)
    event.status = EventStatus.CANCELLED
    event.cancellation_reason = args.reason
    return {"event": ctx.put(args.event_id, event), "room": ctx.put(event.room_id, room)}


def _email_sets(effect: dict[str, Any]) -> dict[str, Any]:
    """``add`` and ``remove`` as the tool acts on them: sets of emails matched case-insensitively (order, repeats
    and case aside), so an invitation sent again in another order or case is the same action."""
    return {
        name: sorted({e.lower() for e in value}) if name != "event_id" and _strings(value) else value
        for name, value in effect.items()
    }


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(e, str) for e in value)


@tool(ToolKind.WRITE, resource=_event, effect=("event_id", "add", "remove"), effect_form=_email_sets)
def update_attendees(ctx: ToolContext, args: AttendeesArgs) -> Any:
    """Invite and/or uninvite attendees of an event."""
    event = _editable(ctx, args.event_id)
    removed = {r.lower() for r in args.remove}
    attendees = [a for a in event.attendees if a.lower() not in removed]
    attendees += [a for a in args.add if a.lower() not in {x.lower() for x in attendees}]
    _check_capacity(ctx.get(Room, event.room_id), attendees)
    event.attendees = attendees
    return {"event": ctx.put(args.event_id, event)}


TOOLS = (
    get_event,
    list_events,
    get_room,
    list_rooms,
    find_free_slots,
    create_event,
    reschedule_event,
    cancel_event,
    update_attendees,
)
