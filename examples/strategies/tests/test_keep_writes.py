"""The example plug-in strategy: what it keeps, and that ContextDelta's registry finds it."""

from __future__ import annotations

import anyio
from contextdelta_example_strategies import KeepWrites

from contextdelta.context import EpisodeContext, message_sequence_problems, resolve_strategy

SYSTEM = {"role": "system", "content": "You are an operations agent."}
INSTRUCTION = {"role": "user", "content": "Refund order A-1."}


def group(step: int, tool: str) -> list[dict[str, object]]:
    call_id = f"call_{step}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f'{{"step": {step}}}'},
    ]


def history(tools: list[str]) -> list[dict[str, object]]:
    messages = [SYSTEM, INSTRUCTION]
    for step, tool in enumerate(tools, start=1):
        messages += group(step, tool)
    return messages


def test_keeps_write_groups_and_the_last_n_groups() -> None:
    tools = ["get_order", "issue_refund", "get_order", "list_orders", "get_order", "add_order_note"]
    messages = history(tools)
    strategy = KeepWrites(n=2).for_episode(EpisodeContext(write_tools=frozenset({"issue_refund", "add_order_note"})))
    result = anyio.run(strategy.transform, messages)
    sent_tools = [m["tool_calls"][0]["function"]["name"] for m in result.messages if m.get("tool_calls")]
    assert sent_tools == ["issue_refund", "get_order", "add_order_note"]
    assert result.messages[:2] == [SYSTEM, INSTRUCTION]
    assert message_sequence_problems(result.messages) == []
    assert len(result.messages) - 2 + len(result.removed) == len(messages) - 2


def test_is_found_by_its_entry_point_and_by_path() -> None:
    assert resolve_strategy("keep_writes").source.kind == "entry_point"
    assert resolve_strategy("contextdelta_example_strategies:KeepWrites").name == "keep_writes"
