"""A minimal agent loop for the scripted-server tests: run tool calls against a task's world.

Deliberately tiny (the real loop lives in ``contextdelta.agent``): system + user message, one model call per
step, every tool call executed in order, optional context reduction before each call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextdelta.providers import ChatProvider, ProviderResponse, ToolCallRequest
from contextdelta.tasks import Task
from contextdelta.testing import ScriptedPolicy, ScriptedReply, TaskCatalog, load_task_files
from contextdelta.worlds import ProtectionMode, ToolEvent, World

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"
SYSTEM = "You are an operations agent. Use the tools."

Message = dict[str, Any]
Reducer = Callable[[list[Message]], list[Message]]


def fixture_tasks() -> dict[str, Task]:
    return {t.id: t for t in load_task_files(FIXTURES)}


def first_messages(task: Task) -> list[Message]:
    principal = task.public.principal
    header = f"You are acting on behalf of {principal.name}, {principal.role}."
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{header}\n\n{task.public.instruction}"},
    ]


def last_n(n: int) -> Reducer:
    """Keep the system and user messages and the last ``n`` complete tool groups."""

    def reduce(history: list[Message]) -> list[Message]:
        starts = [i for i, m in enumerate(history) if m["role"] == "assistant" and m.get("tool_calls")]
        keep_from = starts[-n] if len(starts) >= n else 2
        return [*history[:2], *history[keep_from:]]

    return reduce


@dataclass
class Episode:
    world: World
    history: list[Message] = field(default_factory=list)
    sent: list[list[Message]] = field(default_factory=list)
    final: str | None = None
    responses: list[ProviderResponse] = field(default_factory=list)

    @property
    def events(self) -> list[ToolEvent]:
        return self.world.events

    def calls(self) -> list[tuple[str, str]]:
        return [(e.tool, e.outcome.value) for e in self.world.events]


def _assistant(content: str | None, calls: Sequence[ToolCallRequest]) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return message


def _execute(episode: Episode, calls: Sequence[ToolCallRequest]) -> None:
    for call in calls:
        result = episode.world.call(call.name, call.arguments, call.id)
        episode.history.append({"role": "tool", "tool_call_id": call.id, "content": result.content})


def run_policy(
    policy: str, task: Task, mode: ProtectionMode, reducer: Reducer | None = None, max_steps: int = 30
) -> Episode:
    """Drive a ScriptedPolicy in-process (no HTTP)."""
    scripted = ScriptedPolicy(policy, TaskCatalog([task]))
    episode = Episode(world=task.build_world(mode), history=first_messages(task))
    tools = episode.world.tool_schemas()
    for step in range(1, max_steps + 1):
        episode.world.begin_step(step)
        sent = reducer(episode.history) if reducer else list(episode.history)
        episode.sent.append(sent)
        reply: ScriptedReply = scripted.respond(sent, tools)
        calls = [ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in reply.tool_calls]
        episode.history.append(_assistant(reply.content, calls))
        if not calls:
            episode.final = reply.content
            return episode
        _execute(episode, calls)
    return episode


async def run_provider(
    provider: ChatProvider,
    task: Task,
    mode: ProtectionMode,
    reducer: Reducer | None = None,
    max_steps: int = 30,
    complete: Callable[[list[Message], list[dict[str, Any]]], Awaitable[ProviderResponse]] | None = None,
) -> Episode:
    """Drive any ChatProvider (e.g. OpenAIProvider against the scripted server)."""
    episode = Episode(world=task.build_world(mode), history=first_messages(task))
    tools = episode.world.tool_schemas()
    for step in range(1, max_steps + 1):
        episode.world.begin_step(step)
        sent = reducer(episode.history) if reducer else list(episode.history)
        episode.sent.append(sent)
        response = await (complete or provider.complete)(sent, tools)
        episode.responses.append(response)
        episode.history.append(_assistant(response.content, response.tool_calls))
        if not response.tool_calls:
            episode.final = response.content
            return episode
        _execute(episode, response.tool_calls)
    return episode


def end_state_holds(task: Task, world: World) -> list[str]:
    """The expected_end_state predicates of ``task`` that do not hold in ``world`` (eq/ne/len_eq/gt/ge only)."""
    state = world.state()
    missed = []
    for predicate in task.evaluator.expected_end_state:
        entry = state[predicate.resource]
        value: Any = entry["version"] if predicate.field == "version" else entry["fields"]
        if predicate.field != "version":
            for part in predicate.field.split("."):
                value = value[part]
        checks = {
            "eq": lambda v, w: v == w,
            "ne": lambda v, w: v != w,
            "len_eq": lambda v, w: len(v) == w,
            "gt": lambda v, w: v > w,
            "ge": lambda v, w: v >= w,
        }
        if not checks[predicate.op](value, predicate.value):
            missed.append(f"{predicate.resource} {predicate.field} {predicate.op} {predicate.value!r}: got {value!r}")
    return missed


def stale_writes(world: World) -> list[ToolEvent]:
    """Executed writes whose resource was newer than the version the agent last observed."""
    return [
        e
        for e in world.events
        if e.kind is not None
        and e.kind.value == "write"
        and e.outcome.value == "executed"
        and e.observed_version is not None
        and e.version_at_execution is not None
        and e.version_at_execution > e.observed_version
    ]
