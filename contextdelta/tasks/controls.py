"""The no-mutation control of a task: the same task with its hidden mutations switched off.

Switching the other actors off changes what the right end state is for the resources they would have
written (an order the warehouse would have shipped is now still open), and a task declares its expected end
state, ``unchanged`` list and prohibited actions for the world *with* those changes. The control therefore
drops every claim about the mutations' footprint (the resources a hidden mutation writes) and keeps every other
claim and every safety grader as they are. ``validate-tasks`` uses it to prove that the mutation is what makes
a stale-type unsafe trajectory unsafe, and ``run-benchmark --controls no_mutation`` grades control episodes
with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from contextdelta.tasks.schema import Task
from contextdelta.tasks.trajectory import TrajectoryError, replay, write_resource
from contextdelta.worlds import Outcome, ProtectionMode, WorldDefinition, WorldStateError, get_world, resource_key


class Control(StrEnum):
    """Control conditions ``run-benchmark --controls`` runs beside the main matrix."""

    NO_MUTATION = "no_mutation"
    """Every hidden mutation switched off; claims about the resources they would write dropped."""


def action_resource(definition: WorldDefinition, tool: str, args: Mapping[str, Any]) -> str | None:
    """The resource a (possibly partial) call of ``tool`` with ``args`` addresses, or None.

    Prohibited actions name only the arguments that must match (``{order_id: C-3105}``), so the tool's resource
    function reads the arguments without validating the rest.
    """
    exact = write_resource(definition, tool, args)
    if exact is not None:
        return exact
    spec = definition.tool(tool)
    if spec is None:
        return None
    try:
        primary = spec.resource(spec.args.model_construct(**dict(args)))
    except (AttributeError, KeyError, TypeError, ValueError):  # a partial call that does not name its resource
        return None
    return resource_key(definition.name, *primary) if primary is not None else None


def mutation_footprint(task: Task) -> frozenset[str]:
    """Every resource a hidden mutation of ``task`` writes: declared targets, plus whatever the mutations wrote
    while the reference solution ran unprotected (a tool mutation may write more than its primary resource, as
    cancelling an event frees its room)."""
    definition = get_world(task.world)
    keys: set[str] = set()
    for mutation in task.evaluator.hidden_mutations:
        if mutation.set is not None:
            keys.add(mutation.set.resource)
        if mutation.tool is not None:
            target = action_resource(definition, mutation.tool.name, mutation.tool.args)
            if target is not None:
                keys.add(target)
    if task.evaluator.hidden_mutations:
        try:
            run = replay(task, task.evaluator.reference_solution, ProtectionMode.UNPROTECTED)
        except (TrajectoryError, WorldStateError):  # validation reports these; the declared targets remain
            return frozenset(keys)
        for event in run.world.mutation_log:
            if event.outcome is Outcome.EXECUTED:
                keys.update(event.resources)
    return frozenset(keys)


def without_mutations(task: Task) -> Task:
    """The no-mutation control of ``task``: no hidden mutations, and no expected-end-state predicate,
    ``unchanged`` entry or prohibited action about a resource in the mutations' footprint.

    The id and version stay: a control is a condition of the same task, not another task. A task without
    hidden mutations comes back unchanged.
    """
    evaluator = task.evaluator
    if not evaluator.hidden_mutations:
        return task
    footprint = mutation_footprint(task)
    definition = get_world(task.world)
    quiet = evaluator.model_copy(
        update={
            "hidden_mutations": [],
            "expected_end_state": [p for p in evaluator.expected_end_state if p.resource not in footprint],
            "unchanged": [key for key in evaluator.unchanged if key not in footprint],
            "prohibited_actions": [
                a for a in evaluator.prohibited_actions if action_resource(definition, a.tool, a.args) not in footprint
            ],
        }
    )
    return task.model_copy(update={"evaluator": quiet})


def episode_task(task: Task, control: str | None) -> Task:
    """The task an episode runs and is graded by: ``task`` itself in the main matrix (``control`` None or empty),
    its no-mutation control under ``no_mutation``. Raises ValueError naming an unknown control."""
    if not control:
        return task
    if control == Control.NO_MUTATION:
        return without_mutations(task)
    raise ValueError(f"unknown control condition {control!r}; known: {', '.join(c.value for c in Control)}")


__all__ = ["Control", "action_resource", "episode_task", "mutation_footprint", "without_mutations"]
