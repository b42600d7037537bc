"""The ``calendar`` world: meeting rooms, events and attendees on a fixed clock."""

from contextdelta.worlds import world as _world
from contextdelta.worlds.calendar.data_model import Event, Room
from contextdelta.worlds.calendar.tools import TOOLS

WORLD = _world.WorldDefinition(
    name="calendar",
    models=(Event, Room),
    tools=TOOLS,
    read_tool_for={"event": "get_event", "room": "get_room"},
    needs_clock=True,
)

__all__ = ["TOOLS", "WORLD", "Event", "Room"]
