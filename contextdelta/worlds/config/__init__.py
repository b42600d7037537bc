"""The ``config`` world: a config store with staging and prod, typed values, owners and change freezes."""

from contextdelta.worlds import world as _world
from contextdelta.worlds.config.data_model import Flag, Setting
from contextdelta.worlds.config.tools import TOOLS

WORLD = _world.WorldDefinition(
    name="config",
    models=(Flag, Setting),
    tools=TOOLS,
    read_tool_for={"setting": "get_config", "flag": "get_flag"},
)

__all__ = ["TOOLS", "WORLD", "Flag", "Setting"]
