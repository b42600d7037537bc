"""The calendar world's material for families: rooms, people, events whose rooms' bookings agree with them,
and the scheduling work that fills a horizon (invitations on other events)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from contextdelta.tasks.families._base import WorkItem, call, predicate
from contextdelta.tasks.schema import Principal

CLOCK = "2026-04-13T08:30:00"
"""Monday morning; every generated event is later this week."""
PRINCIPAL = Principal(
    name="Sofia Rossi", role="Workplace coordinator, Northwind Labs", email="sofia.rossi@northwind.io"
)
PEOPLE = (
    "omar.haddad",
    "li.chen",
    "alex.moreno",
    "raj.patel",
    "grace.liu",
    "nina.kowalski",
    "david.osei",
    "maya.singh",
    "lucas.martin",
    "ingrid.holm",
    "samir.aziz",
    "chloe.dubois",
    "ben.carter",
    "yuki.sato",
    "amara.nwosu",
    "felix.wagner",
    "zoe.adams",
    "ivan.petrov",
    "hana.ito",
    "pablo.ruiz",
)
DOMAIN = "northwind.io"
ROOMS = (
    ("atlas-4f", "Atlas", "HQ 4F"),
    ("birch-2f", "Birch", "HQ 2F"),
    ("cedar-3f", "Cedar", "HQ 3F"),
    ("dune-1f", "Dune", "HQ 1F"),
    ("elm-5f", "Elm", "HQ 5F"),
    ("fir-2f", "Fir", "HQ 2F"),
)
TITLES = (
    "Quarterly planning",
    "Design review",
    "Vendor check-in",
    "Hiring sync",
    "Incident review",
    "Roadmap walkthrough",
    "Budget review",
    "Customer advisory call",
    "Onboarding session",
    "Security review",
    "Launch readiness",
    "Analytics deep dive",
)
DAYS = ("2026-04-14", "2026-04-15", "2026-04-16", "2026-04-17")
HOURS = (9, 10, 11, 13, 14, 15, 16)


def event_key(event_id: str) -> str:
    """The resource key of an event."""
    return f"calendar/event/{event_id}"


def email(person: str) -> str:
    """``first.last@northwind.io``."""
    return f"{person}@{DOMAIN}"


def hhmm(value: str) -> str:
    """``14:00`` from an ISO local time."""
    return value[11:16]


@dataclass
class Calendar:
    """Rooms and events of one generated task; bookings are kept in step with the events."""

    rng: random.Random
    rooms: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    _people: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for room_id, name, building in ROOMS:
            self.rooms[room_id] = {"name": name, "building": building, "capacity": 20, "bookings": []}
        self._people = list(PEOPLE)
        self.rng.shuffle(self._people)
        self._titles = list(TITLES)
        self.rng.shuffle(self._titles)
        self._next = self.rng.randrange(100, 700)

    def person(self) -> str:
        """Someone not used yet in this task."""
        return email(self._people.pop())

    def free(self, room_id: str, start: str, end: str) -> bool:
        """Whether ``room_id`` has no booking overlapping [start, end)."""
        return all(not (b["start"] < end and start < b["end"]) for b in self.rooms[room_id]["bookings"])

    def slot(self, room_id: str, minutes: int = 60, day: str | None = None) -> tuple[str, str]:
        """A free slot in ``room_id`` (on ``day`` if given), chosen by the seed."""
        candidates = [(d, h) for d in ([day] if day else DAYS) for h in HOURS]
        self.rng.shuffle(candidates)
        for d, h in candidates:
            start = f"{d}T{h:02d}:00:00"
            end = (datetime.fromisoformat(start) + timedelta(minutes=minutes)).isoformat()
            if self.free(room_id, start, end):
                return start, end
        raise ValueError(f"no free {minutes}-minute slot in {room_id}")

    def new_event(self, organizer: str, attendees: int = 3, room_id: str | None = None) -> str:
        """Add a confirmed event in a free slot of ``room_id`` (or a seeded room); returns its id."""
        room = room_id or self.rng.choice(ROOMS)[0]
        start, end = self.slot(room)
        self._next += self.rng.randrange(1, 9)
        event_id = f"evt-{self._next}"
        self.events[event_id] = {
            "title": self._titles.pop(),
            "room_id": room,
            "start": start,
            "end": end,
            "organizer": organizer,
            "attendees": [self.person() for _ in range(attendees)],
        }
        self.rooms[room]["bookings"] = sorted(
            [*self.rooms[room]["bookings"], {"event_id": event_id, "start": start, "end": end}],
            key=lambda b: (b["start"], b["event_id"]),
        )
        return event_id

    def state(self) -> dict[str, dict[str, dict[str, Any]]]:
        """The initial state: rooms and events."""
        return {"room": self.rooms, "event": self.events}


def invitation_work(cal: Calendar, distractors: list[str]) -> Iterator[WorkItem]:
    """Endless two-call items cycling over ``distractors``: list the organizer's events, then invite one more
    person (a listing rather than ``get_event``, so an agent that skips re-reading an event it still has in view
    makes as many calls as the horizon counts)."""
    turn = 0
    while True:
        event_id = distractors[turn % len(distractors)]
        event = cal.events[event_id]
        guest = cal.person() if cal._people else email(f"guest{turn}")
        yield WorkItem(
            step=f'{event["organizer"]} asked to add {guest} to "{event["title"]}" ({event_id}): list '
            f"{event['organizer']}'s events and invite them.",
            calls=(
                call("list_events", attendee=event["organizer"]),
                call("update_attendees", event_id=event_id, add=[guest]),
            ),
            predicates=(predicate(event_key(event_id), "attendees", "contains", guest),),
        )
        turn += 1


def room_lookup(cal: Calendar, event_id: str) -> WorkItem:
    """A one-call item: look an event up and report its room, without changing it."""
    event = cal.events[event_id]
    return WorkItem(
        step=f'Someone asked which room "{event["title"]}" ({event_id}) is in: look it up and tell me in your '
        "final answer (don't change it).",
        calls=(call("get_event", event_id=event_id),),
        facts=(str(event["room_id"]),),
    )
