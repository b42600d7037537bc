"""Hand-built canonical histories for the context-strategy tests."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from contextdelta.canonical import canonical_json
from contextdelta.context import Message

SYSTEM: Message = {"role": "system", "content": "You are an operations agent."}
INSTRUCTION: Message = {"role": "user", "content": "Refund order A-1001."}
WRITE_TOOLS = frozenset({"issue_refund", "cancel_order", "add_order_note"})

Call = tuple[str, dict[str, Any] | str, Any]
"""(tool name, arguments (dict, or raw text), result (JSON data, or raw text))."""


def order(version: int, status: str = "paid", oid: str = "A-1001") -> dict[str, Any]:
    """A resource object as a tool result shows it."""
    return {"resource": f"order/order/{oid}", "version": version, "status": status, "total_cents": 12900}


def group(calls: Sequence[Call], content: str | None = None, ids: itertools.count[int] | None = None) -> list[Message]:
    """One tool group: the assistant message and one tool message per call, in call order."""
    counter = ids if ids is not None else itertools.count(1)
    numbered = [(f"call_{next(counter)}", call) for call in calls]
    assistant: Message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else canonical_json(args)},
            }
            for call_id, (name, args, _result) in numbered
        ],
    }
    results = [
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": result if isinstance(result, str) else canonical_json(result),
        }
        for call_id, (_name, _args, result) in numbered
    ]
    return [assistant, *results]


def history(*groups: Sequence[Call] | str) -> list[Message]:
    """SYSTEM, INSTRUCTION, then one group per argument; the string "nudge" adds an empty reply and a nudge."""
    ids = itertools.count(1)
    messages = [dict(SYSTEM), dict(INSTRUCTION)]
    for item in groups:
        if item == "nudge":
            messages += [{"role": "assistant", "content": ""}, {"role": "user", "content": "Continue."}]
        else:
            assert not isinstance(item, str)
            messages += group(item, ids=ids)
    return messages


def read(version: int, status: str = "paid", oid: str = "A-1001", tool: str = "get_order") -> Call:
    return (tool, {"order_id": oid}, {"order": order(version, status, oid)})


def reads(count: int) -> list[list[Call]]:
    """``count`` groups, each one read of a different order (group i reads A-100i at version i)."""
    return [[read(1, oid=f"A-{100 + i}")] for i in range(1, count + 1)]
