"""A plug-in strategy that writes down the garbage collector's setting of the process it runs in (imported by path,
``tests.runner.collector_probe:CollectorProbe``, also by worker processes): what a test reads to see that episodes
run with the setting for runs (:mod:`contextdelta._collector`) wherever they run."""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Sequence

from contextdelta.context import Message, StrategyBase, TransformResult

LOG = "CONTEXTDELTA_TEST_COLLECTOR_LOG"
"""The environment variable naming the file each transform appends one JSON line to (nothing written without it)."""


class CollectorProbe(StrategyBase):
    """Full history, and a line per step: the process id, the collector's thresholds and its frozen objects."""

    name = "collector_probe"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        path = os.environ.get(LOG)
        if path and self.episode.seed is not None:  # an episode's step, not the run's probe before it starts
            seen = {"pid": os.getpid(), "threshold": list(gc.get_threshold()), "frozen": gc.get_freeze_count()}
            with open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps(seen) + "\n")
        return TransformResult(messages=list(history))
