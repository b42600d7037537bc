"""Python's cyclic garbage collector, set for a process that runs many episodes at once.

A run keeps every finished episode's record until its reports are written, and dozens of episodes are in flight
at once. With the interpreter's default thresholds (a young collection every 700 allocations), in-flight objects
are promoted again and again, die old, and trigger full collections whose pause grows with everything the run
holds: measured on the default matrix at concurrency 32, 15 full collections of 23-436 ms, 4.4 s of pauses in a
60 s run, during which no reply is read and no request goes out (benchmarks/harness_overhead.py). So, for the
length of a run:

- what exists before the first episode (imports, tasks, the plan) is frozen: collections no longer walk it;
- young collections run every ``YOUNG_THRESHOLD`` allocations, so an episode's short-lived objects die young.

Only cycles wait longer to be freed; everything else is still freed when its last reference goes. At the end
the thresholds are restored and what the run made joins the oldest generation without a collection: restoring
alone made the next young collection walk every record the run held (370 ms after the same run).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

YOUNG_THRESHOLD = 100_000
"""Allocations between young collections (the interpreter's default is 700); chosen by measurement: at
concurrency 128, 20,000 left 1.4 s of collection in a run, 100,000 left 0.7 s."""


_depth = 0
"""Blocks entered and not yet left: only the outermost one sets and restores the collector."""


@contextlib.contextmanager
def tuned_for_episodes() -> Iterator[None]:
    """Freeze what exists now and collect young objects less often, until the block ends (then both are undone)."""
    global _depth
    if _depth:
        yield
        return
    _depth += 1
    previous = gc.get_threshold()
    gc.freeze()  # garbage among it waits for the unfreeze at the end, once
    gc.set_threshold(YOUNG_THRESHOLD, *previous[1:])
    try:
        yield
    finally:
        gc.freeze()  # the run's objects too: the unfreeze below moves them all to the oldest generation unwalked
        gc.set_threshold(*previous)
        gc.unfreeze()
        _depth -= 1
