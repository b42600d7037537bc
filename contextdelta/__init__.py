"""ContextDelta: does a tool-using agent act on stale state when it works from a reduced context?"""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("contextdelta")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
