"""Checks that a message list is a valid OpenAI chat sequence for a tool-using conversation."""

from __future__ import annotations

from collections.abc import Sequence

from contextdelta.context.base import Message

ROLES = frozenset({"system", "user", "assistant", "tool"})


def message_sequence_problems(messages: Sequence[Message]) -> list[str]:
    """Every way ``messages`` breaks the rules a chat-completions endpoint enforces; empty when valid.

    Rules: the system prompt comes first and a user message second; every assistant tool call is answered by
    exactly one tool message with its id, and all answers come right after the call's assistant message (before
    the next assistant or user message); no tool message answers a call that is not pending; ids are unique;
    an assistant message without tool calls has string content.
    """
    problems: list[str] = []
    if len(messages) < 2:
        return ["a sequence needs at least the system prompt and the user instruction"]
    if messages[0].get("role") != "system":
        problems.append("message 0 is not the system prompt")
    if messages[1].get("role") != "user":
        problems.append("message 1 is not a user message")
    pending: list[str] = []
    seen: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            problems.append(f"message {i}: unknown role {role!r}")
            continue
        if role == "tool":
            answered = message.get("tool_call_id")
            if answered not in pending:
                problems.append(f"message {i}: tool result {answered!r} answers no pending call")
            else:
                pending.remove(answered)
            if not isinstance(message.get("content"), str):
                problems.append(f"message {i}: tool result content is not text")
            continue
        if pending:
            problems.append(f"message {i}: tool calls {pending} were not answered before a {role} message")
            pending = []
        if role == "system" and i != 0:
            problems.append(f"message {i}: a system message after the first message")
        if role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                call_id = call.get("id") if isinstance(call, dict) else None
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(call_id, str) or not call_id:
                    problems.append(f"message {i}: a tool call without an id")
                    continue
                if call_id in seen:
                    problems.append(f"message {i}: duplicate tool call id {call_id!r}")
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    problems.append(f"message {i}: tool call {call_id!r} has no function name")
                seen.add(call_id)
                pending.append(call_id)
            if not calls and not isinstance(message.get("content"), str):
                problems.append(f"message {i}: an assistant message with neither content nor tool calls")
        elif not isinstance(message.get("content"), str):
            problems.append(f"message {i}: {role} content is not text")
    if pending:
        problems.append(f"tool calls {pending} at the end were never answered")
    return problems
