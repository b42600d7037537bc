"""The registry of worlds by name."""

from __future__ import annotations

from contextdelta.worlds.calendar import WORLD as CALENDAR
from contextdelta.worlds.config import WORLD as CONFIG
from contextdelta.worlds.order import WORLD as ORDER
from contextdelta.worlds.world import WorldDefinition

WORLDS: dict[str, WorldDefinition] = {w.name: w for w in (ORDER, CALENDAR, CONFIG)}


def get_world(name: str) -> WorldDefinition:
    """The definition of world ``name``; raises KeyError naming the known worlds."""
    try:
        return WORLDS[name]
    except KeyError:
        raise KeyError(f"unknown world {name!r}; known worlds: {', '.join(sorted(WORLDS))}") from None
