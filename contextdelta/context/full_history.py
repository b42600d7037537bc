"""``full_history``: send the whole canonical history."""

from __future__ import annotations

from collections.abc import Sequence

from contextdelta.context.base import Message, StrategyBase, TransformResult, parse_history


class FullHistory(StrategyBase):
    """Everything, unchanged (the reference condition)."""

    name = "full_history"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """The history as it is (checked to be well formed)."""
        parse_history(history)
        return TransformResult(messages=list(history))
