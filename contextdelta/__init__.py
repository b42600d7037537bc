"""ContextDelta: does a tool-using agent act on stale state when it works from a reduced context?"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("contextdelta")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
