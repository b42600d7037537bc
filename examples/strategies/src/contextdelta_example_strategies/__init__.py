"""``keep_writes``: an example ContextDelta plug-in strategy.

It keeps the pinned messages, every tool group in which the agent called a write tool, and the last ``n``
tool groups; every other group is dropped. The idea: a window like ``last_n`` that never lets the agent forget
its own writes (the ``own_write_forgotten`` hazard). It is a pure function of the history, so it declares
``deterministic = True`` and ``contextdelta verify`` re-derives the context it sent at every step.

Install it next to ContextDelta (``pip install -e examples/strategies``) and run it by its entry-point name
(``--strategies full_history,keep_writes``) or by path
(``--strategies contextdelta_example_strategies:KeepWrites``), with ``--strategy-param keep_writes.n=2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.context import PINNED, Message, StrategyBase, TransformResult, parse_history

__all__ = ["KeepWrites"]


class KeepWrites(StrategyBase):
    """Pinned messages, the agent's write groups, and the last ``n`` tool groups, in history order."""

    name = "keep_writes"
    deterministic = True

    def __init__(self, n: int = 3) -> None:
        super().__init__()
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"keep_writes: n must be an integer >= 0, got {n!r}")
        self.n = n

    @property
    def params(self) -> dict[str, Any]:
        return {"n": self.n}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Keep write groups and the last ``n`` groups; drop other groups and loose messages before the tail."""
        segments = parse_history(history)
        groups = [s for s in segments if s.kind == "group"]
        if len(groups) <= self.n:
            return TransformResult(messages=list(history))
        tail_start = groups[-self.n].start if self.n else groups[-1].end
        writes = self.episode.write_tools
        kept: list[int] = []
        for group in groups:
            if group.start >= tail_start:
                break
            calls = history[group.start].get("tool_calls") or []
            if any((call.get("function") or {}).get("name") in writes for call in calls):
                kept.extend(group.indices)
        kept.extend(range(tail_start, len(history)))
        removed = [i for i in range(PINNED, len(history)) if i not in set(kept)]
        return TransformResult(messages=[*history[:PINNED], *(history[i] for i in kept)], removed=removed)
