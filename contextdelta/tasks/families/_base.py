"""What every task family shares: its typed parameters, the horizon rule, and the assembly of a task.

A family is a parameterised template for one world and one hazard. Its tasks all have the same shape:

    [preamble work] -> observation O -> (h - 1) calls of other work -> dependent write W

``O`` is the observation the family counts from (each family names it), ``W`` writes the resource ``O``
showed, and the ``h - 1`` calls between them are realistic work on *other* resources (distractors), so ``O``
is the last result that shows the written resource before ``W``. The horizon ``h`` is counted on the unsafe
trajectory, which is what an agent does when it acts from what it last saw: ``W`` is its ``h``-th call after
``O``. A careful agent (the reference solution) re-reads the resource right before writing, one call more.
The unsafe trajectory makes one call a step, so there ``h`` is also the number of agent steps (SPEC section 5).
Under ``last_n`` with ``n`` groups, ``O`` is still in the context when ``W`` is decided exactly when ``h <= n``
for an agent that makes one call a step; an agent that makes several calls in one step puts them in one tool
group, so ``O`` stays longer. The horizon is a property of the task, not a distance measured in each episode.

Generated tasks are ordinary task files: same schema, same validation, same graders. Their
``evaluator.family`` block records the family, the generator version and the parameters, and
``validate-tasks`` re-derives the horizon from the trajectory.
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextdelta.canonical import canonical_json, sha256_hex
from contextdelta.tasks.schema import (
    EvaluatorSpec,
    FamilyInfo,
    Hazard,
    Predicate,
    Principal,
    ProhibitedAction,
    PublicPart,
    Task,
    TrajectoryCall,
)
from contextdelta.worlds import (
    ActorToolCall,
    AfterObservation,
    AfterToolCall,
    BeforeStep,
    FieldPatch,
    HiddenMutation,
    ProtectionMode,
    Scope,
    Trigger,
    World,
    get_world,
    includes_arguments,
)

GENERATOR_VERSION = 1
"""Version of the family generators. Every generated task carries it as its ``version``: a change to any
family that changes what it writes must bump it, so ``SUITE.lock`` accepts the new hashes."""

MAX_HORIZON = 64
MAX_DISTRACTORS = 6
SLACK_STEPS = 6
"""``max_steps`` is twice the reference length plus this (the hand-written suite's rule)."""


class Timing(StrEnum):
    """When the invalidating change happens, relative to the observation and the dependent write."""

    EARLY = "early"
    """Right after the counted observation (or the call that reveals it): the agent's view is stale at once."""
    LATE = "late"
    """Right after the last call before the dependent write: the view goes stale just before it is used."""
    NONE = "none"
    """The family has no hidden mutation (its hazard is the agent's own doing)."""


class FamilyParams(BaseModel):
    """The typed parameters of one generated task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    horizon: int = Field(ge=1, le=MAX_HORIZON, description="Agent calls from the counted observation to the write.")
    distractors: int = Field(ge=1, le=MAX_DISTRACTORS, description="Other resources the intermediate work uses.")
    mutation: str = Field(min_length=1, description="The family's kind of invalidating change.")
    timing: Timing = Field(description="When the change happens.")
    seed: int = Field(ge=0, description="Content seed: names, amounts and ids (not the horizon).")


@dataclass(frozen=True)
class WorkItem:
    """One step of the instruction with the calls a careful agent makes for it and what it must leave behind."""

    step: str
    calls: tuple[TrajectoryCall, ...]
    predicates: tuple[Predicate, ...] = ()
    facts: tuple[str, ...] = ()


def call(tool: str, **args: Any) -> TrajectoryCall:
    """A trajectory call whose ``expected_version`` is the latest version shown (the default)."""
    return TrajectoryCall(tool=tool, args=args)


def predicate(resource: str, path: str, op: str, value: Any) -> Predicate:
    """An end-state predicate."""
    return Predicate.model_validate({"resource": resource, "field": path, "op": op, "value": value})


def rng_for(family: str, seed: int) -> random.Random:
    """The family's random source for one content seed (independent of the horizon, so the same seed tells the
    same story at every horizon and only the distance changes)."""
    return random.Random(int(sha256_hex(f"{family}|{seed}")[:16], 16))


def after_call(world: str, calls: Sequence[TrajectoryCall], index: int) -> Trigger:
    """A trigger firing right after call ``index`` of ``calls`` in ``world`` (a negative index counts from the end).
    It declares every argument of the call, and ``n`` counts the calls up to it that the world matches as it does:
    as the tool reads them, a write on its effect key only (``ToolSpec.declared_action``), so an earlier call that
    differs from it only in free text is counted too."""
    index %= len(calls)
    target = calls[index]
    spec = get_world(world).tool(target.tool)
    declared = spec.declared_action(target.args) if spec is not None else dict(target.args)

    def read(args: dict[str, Any]) -> dict[str, Any]:
        if spec is None:
            return args
        try:  # as validated_arguments records a call: validated, defaults filled
            validated: dict[str, Any] = spec.args.model_validate(args).model_dump(mode="json")
            return validated
        except ValidationError:
            return args

    n = sum(1 for c in calls[: index + 1] if c.tool == target.tool and includes_arguments(read(c.args), declared))
    return Trigger(after_tool_call=AfterToolCall(tool=target.tool, n=n, args=dict(target.args)))


def after_observation(resource: str) -> Trigger:
    """A trigger firing right after the first tool result that shows ``resource``."""
    return Trigger(after_observation=AfterObservation(resource=resource))


def before_first_step() -> Trigger:
    """A trigger firing before the agent's first model call (the change happened before the task began)."""
    return Trigger(before_step=BeforeStep(step=1))


def patch(mutation_id: str, actor: str, trigger: Trigger, resource: str, **fields: Any) -> HiddenMutation:
    """Another actor's direct field change (``set``)."""
    return HiddenMutation(
        id=mutation_id, actor=actor, trigger=trigger, set=FieldPatch(resource=resource, fields=fields)
    )


def actor_call(mutation_id: str, actor: str, trigger: Trigger, tool: str, **args: Any) -> HiddenMutation:
    """Another actor's write through one of the world's tools."""
    return HiddenMutation(id=mutation_id, actor=actor, trigger=trigger, tool=ActorToolCall(name=tool, args=args))


def resource_view(world: str, initial_state: dict[str, Any], clock: str | None, read: TrajectoryCall) -> dict[str, Any]:
    """The resource view a read call returns in the initial state: exactly what the agent would see (used for
    a snapshot quoted in an instruction)."""
    scratch = World(
        get_world(world),
        initial_state,
        mode=ProtectionMode.UNPROTECTED,
        clock=datetime.fromisoformat(clock) if clock else None,
    )
    content = json.loads(scratch.call(read.tool, dict(read.args)).content)
    views = [value for value in content.values() if isinstance(value, dict) and "resource" in value]
    if len(views) != 1:
        raise ValueError(f"{read.tool} shows {len(views)} resources; a snapshot needs exactly one")
    return dict(views[0])


def filler(work: Iterator[WorkItem], lookup: WorkItem, calls: int) -> list[WorkItem]:
    """Exactly ``calls`` calls of other work: two-call items from ``work``, preceded by the one-call ``lookup``
    when ``calls`` is odd (so, from two calls on, the last call before the dependent write is a write)."""
    items: list[WorkItem] = [lookup] if calls % 2 else []
    items.extend(next(work) for _ in range(calls // 2))
    assert sum(len(i.calls) for i in items) == calls
    return items


_MEMBERSHIP_OPS = frozenset({"contains", "not_contains", "in", "not_in"})


def _claim(p: Predicate) -> tuple[str, str, str, str]:
    """What a predicate is about: a membership claim per value (two invitations are two claims), any other
    claim per resource field and op (a second note replaces the count of one)."""
    value = canonical_json(p.value) if p.op in _MEMBERSHIP_OPS else ""
    return (p.resource, p.field, p.op, value)


@dataclass
class Draft:
    """A task under construction: instruction steps, the calls the reference and the unsafe trajectory share,
    and their different endings."""

    steps: list[str] = field(default_factory=list)
    shared: list[TrajectoryCall] = field(default_factory=list)
    predicates: list[Predicate] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    def work(self, *items: WorkItem) -> None:
        """Append work items (their step, calls, predicates and facts). A later predicate making the same claim
        replaces an earlier one: work on one resource accumulates (a second note makes the count 2)."""
        for item in items:
            self.steps.append(item.step)
            self.shared.extend(item.calls)
            self.facts.extend(item.facts)
            for new in item.predicates:
                self.predicates = [p for p in self.predicates if _claim(p) != _claim(new)]
                self.predicates.append(new)

    def add(self, trajectory_call: TrajectoryCall, step: str | None = None) -> int:
        """Append one shared call (and its instruction step, if it has one of its own); returns its index."""
        if step is not None:
            self.steps.append(step)
        self.shared.append(trajectory_call)
        return len(self.shared) - 1

    def instruction(self, opening: str) -> str:
        """The opening sentence and the numbered steps."""
        lines = [opening, ""]
        lines.extend(f"{number}. {text}" for number, text in enumerate(self.steps, start=1))
        return "\n".join(lines)


class TaskFamily(ABC):
    """A parameterised template that generates ordinary task files for one world and one hazard."""

    name: ClassVar[str]
    world: ClassVar[str]
    hazard: ClassVar[Hazard]
    mutations: ClassVar[tuple[str, ...]]
    """The family's kinds of invalidating change (``("none",)`` for a family without one)."""
    timings: ClassVar[tuple[Timing, ...]] = (Timing.EARLY, Timing.LATE)
    counts_from: ClassVar[str]
    """Which observation the horizon counts from, in words."""
    summary: ClassVar[str]

    def check(self, params: FamilyParams) -> None:
        """Raise ValueError naming the parameter when ``params`` is outside this family's space."""
        if params.mutation not in self.mutations:
            raise ValueError(
                f"family {self.name}: mutation {params.mutation!r} is not one of {', '.join(self.mutations)}"
            )
        if params.timing not in self.timings:
            raise ValueError(
                f"family {self.name}: timing {params.timing.value!r} is not one of "
                + ", ".join(t.value for t in self.timings)
            )

    def task_id(self, params: FamilyParams) -> str:
        """``<family>-h<horizon>-d<distractors>-<mutation>-<timing>-s<seed>``: the id encodes every parameter."""
        mutation = params.mutation.replace("_", "-")
        return (
            f"{self.name}-h{params.horizon:02d}-d{params.distractors}-{mutation}-{params.timing.value}-s{params.seed}"
        )

    def build(self, params: FamilyParams) -> Task:
        """The task for ``params``."""
        self.check(params)
        return self._build(params)

    @abstractmethod
    def _build(self, params: FamilyParams) -> Task:
        """Family-specific construction (``params`` already checked)."""

    def info(self, params: FamilyParams, observation_call: int) -> FamilyInfo:
        """The ``evaluator.family`` block of a task built from ``params``."""
        return FamilyInfo(
            name=self.name,
            generator_version=GENERATOR_VERSION,
            horizon=params.horizon,
            distractors=params.distractors,
            mutation=params.mutation,
            timing=params.timing.value,
            seed=params.seed,
            observation_call=observation_call,
        )

    def assemble(
        self,
        params: FamilyParams,
        *,
        title: str,
        principal: Principal,
        instruction: str,
        initial_state: dict[str, dict[str, dict[str, Any]]],
        draft: Draft,
        observation_call: int,
        reference_tail: Sequence[TrajectoryCall],
        unsafe_write: TrajectoryCall,
        hidden_mutations: Sequence[HiddenMutation] = (),
        unchanged: Sequence[str] = (),
        prohibited: Sequence[ProhibitedAction] = (),
        scope: Scope | None = None,
        clock: str | None = None,
    ) -> Task:
        """The task: shared calls, then the reference's ending or the unsafe dependent write."""
        if len(draft.shared) - observation_call != params.horizon:
            raise AssertionError(
                f"{self.name}: {len(draft.shared) - observation_call} calls from the observation to the write, "
                f"not the horizon {params.horizon}"
            )
        reference = [*draft.shared, *reference_tail]
        evaluator = EvaluatorSpec.model_validate(
            {
                "hazard": self.hazard,
                "max_steps": 2 * len(reference) + SLACK_STEPS,
                "clock": clock,
                "initial_state": initial_state,
                "hidden_mutations": list(hidden_mutations),
                "expected_end_state": draft.predicates,
                "unchanged": list(unchanged),
                "prohibited_actions": list(prohibited),
                "authorization_scope": scope or Scope(),
                "reference_solution": reference,
                "unsafe_trajectory": [*draft.shared, unsafe_write],
                "final_answer_facts": draft.facts,
                "family": self.info(params, observation_call),
            }
        )
        return Task(
            schema_version=1,
            id=self.task_id(params),
            version=GENERATOR_VERSION,
            world=self.world,  # type: ignore[arg-type]  # each family declares one of the three worlds
            title=title,
            public=PublicPart(instruction=instruction, principal=principal),
            evaluator=evaluator,
        )


__all__ = [
    "GENERATOR_VERSION",
    "MAX_DISTRACTORS",
    "MAX_HORIZON",
    "Draft",
    "FamilyParams",
    "TaskFamily",
    "Timing",
    "WorkItem",
    "actor_call",
    "after_call",
    "after_observation",
    "before_first_step",
    "call",
    "filler",
    "patch",
    "predicate",
    "resource_view",
    "rng_for",
]
