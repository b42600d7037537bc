"""The ``config`` world: a config store with staging and prod, typed values, owners and change freezes."""

from contextdelta.worlds.config.data_model import Flag, Setting
from contextdelta.worlds.config.tools import TOOLS
from contextdelta.worlds.world import WorldDefinition

WORLD = WorldDefinition(
    name="config",
    models=(Flag, Setting),
    tools=TOOLS,
    read_tool_for={"setting": "get_config", "flag": "get_flag"},
)

__all__ = ["WORLD"]
