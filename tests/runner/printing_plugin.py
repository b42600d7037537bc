"""A strategy plug-in that writes to stdout on import and at every step, through ``print`` and through the file
descriptor itself (imported by path: ``tests.runner.printing_plugin:Chatty``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from contextdelta.context import Message, StrategyBase, TransformResult

print("chatty plug-in imported")


class Chatty(StrategyBase):
    name = "chatty"
    deterministic = True

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        print("chatty transform", end="")  # no line end: the next line written would run into it
        os.write(1, b"chatty on fd 1")
        return TransformResult(messages=list(history))
