"""Scripted trajectories: resolving a write's ``expected_version`` from what the agent saw, and replaying.

Version resolution reads only tool result texts (the JSON the agent received), never world internals, so the
scripted test server's oracle, which sees the same results over HTTP, resolves versions exactly as replay does.
A resource is *shown* by a result when some JSON object in it has ``"resource": key`` and an integer
``"version"``; a ``version_conflict`` error names the resource but carries no ``version`` and shows nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from contextdelta.tasks.schema import Task, TrajectoryCall, VersionFromCall
from contextdelta.worlds import ProtectionMode, ToolKind, World, WorldDefinition, resource_key, shown_version


class TrajectoryError(ValueError):
    """A trajectory call whose arguments or ``expected_version`` cannot be resolved."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(f"call {index}: {message}")
        self.index = index
        self.message = message


def latest_shown_version(results: Sequence[str], key: str) -> tuple[int, int] | None:
    """(index of the result, version) of the most recent result in ``results`` that showed ``key``."""
    for index in range(len(results) - 1, -1, -1):
        version = shown_version(results[index], key)
        if version is not None:
            return index, version
    return None


def write_resource(definition: WorldDefinition, tool: str, args: Mapping[str, Any]) -> str | None:
    """The ``world/kind/id`` key a write tool's ``expected_version`` refers to, for these arguments.

    None for a read tool, an unknown tool, arguments that do not validate, or a write without a resource.
    """
    spec = definition.tool(tool)
    if spec is None or spec.kind is not ToolKind.WRITE:
        return None
    try:
        parsed = spec.args.model_validate(dict(args))
    except ValidationError:
        return None
    primary = spec.resource(parsed)
    return resource_key(definition.name, *primary) if primary is not None else None


@dataclass(frozen=True)
class ResolvedCall:
    """A trajectory call ready to send: the arguments, and where its ``expected_version`` came from."""

    tool: str
    arguments: dict[str, Any]
    resource: str | None
    version_source: int | None
    """Index of the call whose result supplied ``expected_version`` (None when pinned or not sent)."""


def resolve_call(
    definition: WorldDefinition,
    call: TrajectoryCall,
    results: Sequence[str],
    mode: ProtectionMode,
    index: int | None = None,
) -> ResolvedCall:
    """The arguments to send for ``call`` after the tool results ``results`` (result i answers call i).

    Only write tools under the freshness contract get ``expected_version``: ``latest`` is the version in the
    most recent result that showed the write's resource, ``as_of_call: i`` the version shown in result i, an
    integer is sent as is. Raises :class:`TrajectoryError` when the version cannot be derived from ``results``.
    """
    position = len(results) if index is None else index
    arguments = dict(call.args)
    spec = definition.tool(call.tool)
    if spec is None or spec.kind is not ToolKind.WRITE:
        return ResolvedCall(call.tool, arguments, None, None)
    key = write_resource(definition, call.tool, arguments)
    if mode is not ProtectionMode.FRESHNESS_CONTRACT:
        return ResolvedCall(call.tool, arguments, key, None)
    wanted = call.expected_version
    source: int | None = None
    if isinstance(wanted, int):
        version = wanted
    elif key is None:
        raise TrajectoryError(position, f"{call.tool}: cannot tell which resource the write addresses")
    elif isinstance(wanted, VersionFromCall):
        if wanted.as_of_call >= len(results):
            raise TrajectoryError(position, f"as_of_call {wanted.as_of_call} is not an earlier call")
        shown = shown_version(results[wanted.as_of_call], key)
        if shown is None:
            raise TrajectoryError(position, f"the result of call {wanted.as_of_call} does not show {key}")
        version, source = shown, wanted.as_of_call
    else:
        latest = latest_shown_version(results, key)
        if latest is None:
            raise TrajectoryError(position, f"no earlier result shows {key}, so 'latest' has no version")
        source, version = latest
    arguments["expected_version"] = version
    return ResolvedCall(call.tool, arguments, key, source)


@dataclass
class Replay:
    """A finished replay: the world (events, mutation log, final state) and what was sent."""

    world: World
    initial_state: dict[str, dict[str, Any]]
    calls: list[ResolvedCall]

    @property
    def final_state(self) -> dict[str, dict[str, Any]]:
        """The world state after the last call."""
        return self.world.state()


def replay(task: Task, trajectory: Sequence[TrajectoryCall], mode: ProtectionMode) -> Replay:
    """Run ``trajectory`` against a fresh world of ``task`` in ``mode``, one call per agent step.

    Step ``i + 1`` begins (applying due ``before_step`` mutations) before call ``i``, as in the agent loop.
    Raises :class:`TrajectoryError` when a write's ``expected_version`` cannot be resolved.
    """
    world = task.build_world(mode)
    initial = world.state()
    results: list[str] = []
    sent: list[ResolvedCall] = []
    for index, call in enumerate(trajectory):
        world.begin_step(index + 1)
        resolved = resolve_call(world.definition, call, results, mode, index)
        outcome = world.call(call.tool, resolved.arguments, call_id=f"call-{index}")
        results.append(outcome.content)
        sent.append(resolved)
    return Replay(world=world, initial_state=initial, calls=sent)
