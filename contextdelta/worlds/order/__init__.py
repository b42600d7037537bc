"""The ``order`` world: e-commerce orders, refunds, cancellations and shipping addresses."""

from contextdelta.worlds import world as _world
from contextdelta.worlds.order.data_model import Order
from contextdelta.worlds.order.tools import TOOLS

WORLD = _world.WorldDefinition(name="order", models=(Order,), tools=TOOLS, read_tool_for={"order": "get_order"})

__all__ = ["TOOLS", "WORLD", "Order"]
