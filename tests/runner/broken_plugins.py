"""Strategy plug-ins whose transform breaks on every episode's first step (imported by path,
``tests.runner.broken_plugins:...``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.context import Message, StrategyBase, TransformResult


class Raises(StrategyBase):
    name = "raises"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        raise RuntimeError("no history for me")


class ReturnsMessages(StrategyBase):
    name = "returns_messages"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> Any:
        return list(history)


class DropsTheInstruction(StrategyBase):
    name = "drops_the_instruction"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        return TransformResult(messages=list(history[:1]), removed=[1])
