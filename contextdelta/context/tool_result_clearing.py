"""``tool_result_clearing``: old tool results replaced by a fixed placeholder, the calls kept (context editing).

This mirrors what agent frameworks ship as "context editing" (Anthropic's ``clear_tool_uses``, LangChain's
``ClearToolUsesEdit``): once the history holds more than ``trigger`` tool groups, the results of all but the
last ``keep`` tool calls are replaced by :data:`CLEARED_PLACEHOLDER`, while the assistant messages with their
calls stay verbatim. The model still sees that it called a tool with these arguments, not what came back.

Decisions:
- ``trigger`` counts tool groups (as for the digest and the summary, so the three share one window) and
  ``keep`` counts tool calls (as the frameworks do): a group with several calls keeps only its last ones.
- Every other message (assistant text, loose messages, the nudge) stays; nothing is removed, so the sent
  sequence has exactly the history's length and shape. A cleared tool message is listed both in ``removed``
  (its canonical content was not sent) and in ``inserted`` (the placeholder is strategy-written text).
- The placeholder is fixed text with no JSON in it, so no resource view survives clearing.
- A pure function of the history: byte-identical output for identical histories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextdelta.canonical import sha256_hex
from contextdelta.context.base import (
    Message,
    StrategyBase,
    TransformResult,
    check_window,
    group_segments,
    parse_history,
)

CLEARED_PLACEHOLDER = "[tool result cleared to save context]"
"""The content every cleared tool result is replaced by."""


class ToolResultClearing(StrategyBase):
    """Every message kept, but the results of all but the last ``keep`` tool calls cleared after ``trigger``
    groups."""

    name = "tool_result_clearing"
    deterministic = True

    def __init__(self, trigger: int = 6, keep: int = 3) -> None:
        super().__init__()
        check_window(trigger, keep)
        self.trigger = trigger
        self.keep = keep

    @property
    def params(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "keep": self.keep, "placeholder_sha256": sha256_hex(CLEARED_PLACEHOLDER)}

    async def transform(self, history: Sequence[Message]) -> TransformResult:
        """Replace the older tool results by the placeholder (a pure function of the history)."""
        return clear_tool_results(history, self.trigger, self.keep)


def clear_tool_results(history: Sequence[Message], trigger: int, keep: int) -> TransformResult:
    """The history with the results of all but the last ``keep`` tool calls cleared, once it holds more than
    ``trigger`` tool groups; unchanged before."""
    groups = group_segments(parse_history(history))
    if len(groups) <= trigger:
        return TransformResult(messages=list(history))
    results = [i for g in groups for i in range(g.start + 1, g.end)]
    cleared = results[: max(0, len(results) - keep)]
    messages = list(history)
    for i in cleared:
        messages[i] = {"role": "tool", "tool_call_id": history[i]["tool_call_id"], "content": CLEARED_PLACEHOLDER}
    return TransformResult(messages=messages, removed=cleared, inserted=list(cleared))
