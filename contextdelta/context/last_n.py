"""``last_n``: the pinned messages plus the last ``n`` complete tool groups.

Decision: the kept part is a contiguous tail of the history that starts at the n-th last tool group, so a
loose message inside it (the harness's nudge after an empty reply) stays, and loose messages before it go.
With fewer than ``n`` groups nothing is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.context.base import (
    PINNED,
    Message,
    StrategyBase,
    TransformResult,
    check_count,
    group_segments,
    parse_history,
    tail_from,
)


class LastN(StrategyBase):
    """System prompt, instruction, and the last ``n`` tool groups."""

    name = "last_n"
    deterministic = True

    def __init__(self, n: int = 3) -> None:
        super().__init__()
        check_count("last_n: n", n)
        if n < 0:
            raise ValueError(f"last_n: n must be >= 0, got {n}")
        self.n = n

    @property
    def params(self) -> dict[str, Any]:
        return {"n": self.n}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Drop everything between the instruction and the n-th last tool group."""
        segments = parse_history(history)
        groups = group_segments(segments)
        if len(groups) <= self.n:
            return TransformResult(messages=list(history))
        start = tail_from(segments, groups[-self.n] if self.n else None)
        return TransformResult(messages=[*history[:PINNED], *history[start:]], removed=list(range(PINNED, start)))
