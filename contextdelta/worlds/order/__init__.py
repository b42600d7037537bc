"""The ``order`` world: e-commerce orders, refunds, cancellations and shipping addresses."""

from contextdelta.worlds.order.data_model import Order
from contextdelta.worlds.order.tools import TOOLS
from contextdelta.worlds.world import WorldDefinition

WORLD = WorldDefinition(name="order", models=(Order,), tools=TOOLS, read_tool_for={"order": "get_order"})

__all__ = ["WORLD"]
