"""Calendar world resources: rooms (whose schedule is a resource of its own) and events with attendees."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveInt

from contextdelta.worlds.model import ResourceModel


def _local(value: datetime) -> datetime:
    if value.tzinfo is not None:
        raise ValueError("use the calendar's local time without a UTC offset, e.g. 2026-12-03T14:30")
    return value


LocalDateTime = Annotated[datetime, AfterValidator(_local)]


class EventStatus(StrEnum):
    CONFIRMED = "confirmed"
    CANCELLED = "cancelled"


class Booking(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_id: str
    start: LocalDateTime
    end: LocalDateTime

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.start < end and start < self.end


class Room(ResourceModel):
    kind: ClassVar[str] = "room"

    name: str
    building: str
    capacity: PositiveInt
    bookings: list[Booking] = Field(default_factory=list, description="Confirmed events, sorted by start.")


class Event(ResourceModel):
    kind: ClassVar[str] = "event"

    title: str
    room_id: str
    start: LocalDateTime
    end: LocalDateTime
    organizer: str
    attendees: list[str] = Field(default_factory=list)
    status: EventStatus = EventStatus.CONFIRMED
    description: str | None = None
    cancellation_reason: str | None = None
