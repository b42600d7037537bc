"""A plug-in module that calls sys.exit() as it is imported (``tests.context.plugin_exits_on_import:Anything``)."""

import sys

sys.exit(5)
