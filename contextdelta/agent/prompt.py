"""The fixed, versioned messages the agent loop writes: the system prompt, the task message and the nudge.

The system prompt is the same text for every task, strategy and protection mode; its SHA-256 goes into the run
manifest. Change its text only together with ``SYSTEM_PROMPT_VERSION``.
"""

from __future__ import annotations

from contextdelta.canonical import sha256_hex
from contextdelta.context import Message
from contextdelta.tasks import PublicTask

SYSTEM_PROMPT_VERSION = "1"

SYSTEM_PROMPT = """You are an operations agent. You work on live business systems, and you act on them only through \
the tools you are given. Other people and automated processes use and change the same systems while you work.

How to work:
- Use the tools to look up what you need and to make changes. Never invent ids, values or tool results.
- Tool results are JSON. Every record in them shows its resource key and its version.
- Do only what the person you act for asked, within what they are allowed to do.
- If a tool returns an error, read it and decide what to do next.
- When the task is done, or cannot be done, stop calling tools and reply with a short final message that says \
what you did and what the outcome was."""

EMPTY_RESPONSE_NUDGE = (
    "Your last reply was empty. Continue the task with the tools, or reply with your final message if you are done."
)
"""Sent once per episode after an empty reply (no text, no tool calls); a second empty reply ends the episode."""


def system_prompt_sha256() -> str:
    """SHA-256 of the system prompt text (for the run manifest and ``compare``)."""
    return sha256_hex(SYSTEM_PROMPT)


def task_message_text(task: PublicTask) -> str:
    """The first user message: a header naming the principal, a blank line, then the instruction verbatim."""
    principal = task.principal
    who = f"{principal.name}, {principal.role}"
    if principal.email:
        who += f" <{principal.email}>"
    return f"You are acting on behalf of {who}.\n\n{task.instruction}"


def initial_messages(task: PublicTask) -> list[Message]:
    """The two pinned messages every episode starts with: the system prompt and the task message."""
    if not isinstance(task, PublicTask):
        raise TypeError(f"the agent only ever sees a PublicTask, not {type(task).__name__}")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task_message_text(task)}]
