"""The task file format (``schema_version: 1``): a public part for the model, an evaluator part for graders.

The two parts are separate types. Only :class:`PublicTask` is ever handed to the agent loop, so evaluator
data (initial state, hidden mutations, expected end state, trajectories) cannot reach a model by accident.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from contextdelta.canonical import content_hash, sha256_hex
from contextdelta.worlds import HiddenMutation, ProtectionMode, Scope, World, get_world

TASK_SCHEMA_VERSION = 1


def _not_blank(value: str) -> str:
    # kept as written (a hash covers the text): only refused when nothing but whitespace
    if not value.strip():
        raise ValueError("is blank (only whitespace): write the text, or leave the entry out")
    return value


Text = Annotated[str, Field(min_length=1), AfterValidator(_not_blank)]
"""Text that must say something: a blank instruction reaches the model as no task at all, a blank final-answer fact
is contained in every answer, a blank reason or name explains nothing."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hazard(StrEnum):
    """The primary way a reduced context leads to acting on stale state (SPEC section 5)."""

    HIDDEN_MUTATION = "hidden_mutation"
    SUPERSEDED_OBSERVATION = "superseded_observation"
    OWN_WRITE_FORGOTTEN = "own_write_forgotten"
    CONFLICTING_OBSERVATIONS = "conflicting_observations"
    AUTHORIZATION_BOUNDARY = "authorization_boundary"


class Principal(_Strict):
    """Who the agent acts as. Public: the model is told this."""

    name: Text
    role: Text = Field(description="e.g. 'Tier 2 customer support agent'.")
    email: str | None = None


class PublicTask(_Strict):
    """Everything about a task the model may see: its id (for logs only), world, instruction and principal."""

    id: str
    world: str
    instruction: str = Field(min_length=1)
    principal: Principal


class VersionFromCall(_Strict):
    """The version of the write's resource as shown in the result of trajectory call ``as_of_call`` (0-based)."""

    as_of_call: int = Field(ge=0)


class TrajectoryCall(_Strict):
    """One tool call of a scripted trajectory.

    ``expected_version`` applies to writes under the freshness contract only: ``latest`` (the default) is the
    version in the most recent result that showed the write's resource; an integer or ``as_of_call`` pins it.
    """

    tool: str
    args: dict[str, Any] = Field(default_factory=dict, description="Tool arguments, never expected_version.")
    expected_version: Literal["latest"] | int | VersionFromCall = "latest"

    @field_validator("expected_version")
    @classmethod
    def _a_version_that_can_exist(cls, value: Literal["latest"] | int | VersionFromCall) -> Any:
        # every resource starts at version 1: a pinned 0 or less is a version no read ever shows, so the write is
        # blocked under the contract whatever the trajectory did, and a task could pass on that alone
        if isinstance(value, int) and value < 1:
            raise ValueError(f"{value} is not a version (versions start at 1): pin 1 or more, or use latest")
        return value


PredicateOp = Literal["eq", "ne", "gt", "ge", "lt", "le", "in", "not_in", "contains", "not_contains", "len_eq"]
"""Comparison ops of an end-state predicate; their meaning is defined in :mod:`contextdelta.grading.predicates`."""


class Predicate(_Strict):
    """A condition on one field of one resource in the final state.

    ``field`` is a dotted path into the resource's fields (integer segments index lists, ``items.0.sku``);
    the special path ``version`` addresses the resource's version. A missing resource makes the predicate false;
    a missing field makes it false except for the negative ops ``ne``, ``not_in`` and ``not_contains``.
    """

    resource: str = Field(description="world/kind/id")
    field: str = Field(min_length=1)
    op: PredicateOp = "eq"
    value: Any = None


class ProhibitedAction(_Strict):
    """A call the agent must never make: tool name plus argument values that must all match."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    reason: Text


class FamilyInfo(_Strict):
    """Where a generated task came from: its family, the generator version and the family's parameters.

    Evaluator-only. The horizon counts agent tool calls in ``unsafe_trajectory``: the call at index
    ``observation_call`` is the observation the family counts from, and the dependent write is the call at
    ``observation_call + horizon`` (the trajectory's last call); ``validate-tasks`` checks both.
    """

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    generator_version: PositiveInt
    horizon: PositiveInt
    distractors: int = Field(ge=0)
    mutation: str = Field(min_length=1, description="The family's kind of invalidating change ('none' if it has none).")
    timing: str = Field(min_length=1, description="When that change happens ('early', 'late' or 'none').")
    seed: int = Field(ge=0, description="The content seed: names, amounts and ids.")
    observation_call: int = Field(ge=0, description="Index in unsafe_trajectory of the observation h counts from.")


RESOURCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+\-]*")
"""A resource id of an initial state: what a model reads in a result and types back into a call (``A-1042``,
``prod:payments.max_retries``); ``/`` separates the parts of a resource key ``world/kind/id``."""

MAX_STEPS = 1_000
"""Largest step limit of a task (and of run-benchmark's --max-steps): the shipped tasks use at most 50 and a
generated one at horizon 64 about 150; a larger limit only lets a model that never stops run on, and a typo of
1000000000 would never end an episode that loops at no cost (a local model, context that never fills)."""


class EvaluatorSpec(_Strict):
    """Evaluator-only data. Never rendered into a message or a tool schema."""

    hazard: Hazard
    max_steps: PositiveInt = Field(default=30, le=MAX_STEPS)
    clock: datetime | None = Field(default=None, description="The world's current time (calendar world).")
    initial_state: dict[str, dict[str, dict[str, Any]]] = Field(description="{kind: {id: fields}}")
    hidden_mutations: list[HiddenMutation] = Field(default_factory=list)
    expected_end_state: list[Predicate] = Field(min_length=1)
    unchanged: list[str] = Field(default_factory=list, description="Resource keys that must end unchanged.")
    prohibited_actions: list[ProhibitedAction] = Field(default_factory=list)
    authorization_scope: Scope = Field(default_factory=Scope)
    reference_solution: list[TrajectoryCall] = Field(min_length=1)
    unsafe_trajectory: list[TrajectoryCall] = Field(min_length=1)
    final_answer_facts: list[str] = Field(
        default_factory=list, description="Strings a correct final answer mentions (secondary signal only)."
    )
    family: FamilyInfo | None = Field(default=None, description="Set on tasks a task family generated.")

    @property
    def horizon(self) -> int | None:
        """The task's horizon (``family.horizon``); None for a task no family generated. The one definition the run
        manifest, the dose-response report and ``verify`` read."""
        return self.family.horizon if self.family is not None else None

    @property
    def story(self) -> str | None:
        """The story a generated task tells (``family.name#family.seed``): a family tells one story, with one content
        seed, at every horizon, so tasks of one story are not independent units of inference. None for a task no
        family generated (its own story)."""
        return f"{self.family.name}#{self.family.seed}" if self.family is not None else None

    @field_validator("initial_state")
    @classmethod
    def _resource_ids_a_model_can_type(
        cls, value: dict[str, dict[str, dict[str, Any]]]
    ) -> dict[str, dict[str, dict[str, Any]]]:
        for kind, resources in value.items():
            for resource_id in resources:
                if not RESOURCE_ID.fullmatch(resource_id):
                    raise ValueError(
                        f"{kind} id {resource_id!a} is not a resource id: use ASCII letters, digits and . _ : @ + -"
                        " (starting with a letter or digit; no spaces, slashes or invisible characters), as a model "
                        "must type it back from what it reads"
                    )
        return value

    @field_validator("final_answer_facts")
    @classmethod
    def _facts_say_something(cls, value: list[str]) -> list[str]:
        blank = [i for i, fact in enumerate(value) if not fact.strip()]  # an empty fact is in every answer
        if blank:
            raise ValueError(f"entry {blank[0]} is blank (only whitespace): write the fact, or leave the entry out")
        return value

    @model_validator(mode="after")
    def _unique_mutation_ids(self) -> EvaluatorSpec:
        ids = [m.id for m in self.hidden_mutations]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"hidden mutation ids must be unique; repeated: {', '.join(repeated)}")
        return self


class PublicPart(_Strict):
    """The ``public:`` block of a task file: the instruction and the principal."""

    instruction: Text
    principal: Principal


class Task(_Strict):
    """One benchmark task as stored in ``tasks/<world>/<id>.yaml``."""

    schema_version: Literal[1]
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    version: PositiveInt
    world: Literal["order", "calendar", "config"]
    title: Text
    public: PublicPart
    evaluator: EvaluatorSpec

    @field_validator("schema_version", mode="before")
    @classmethod
    def _schema_version_is_a_number(cls, value: Any) -> Any:
        # a Literal compares by ==, and True == 1: strict validation alone reads ``schema_version: true`` as 1
        if isinstance(value, bool):
            raise ValueError(f"{str(value).lower()} is a boolean; write schema_version: 1")
        return value

    @property
    def public_task(self) -> PublicTask:
        """The only view of this task that may reach the model."""
        return PublicTask(
            id=self.id, world=self.world, instruction=self.public.instruction, principal=self.public.principal
        )

    @property
    def content_hash(self) -> str:
        """SHA-256 of the task's canonical JSON (independent of YAML formatting and key order).

        An absent ``evaluator.family`` is left out of the JSON rather than hashed as null, so adding that
        optional block to the schema left the hash of every hand-written task as it was.
        """
        data = self.model_dump(mode="json")
        if data["evaluator"].get("family") is None:
            del data["evaluator"]["family"]
        return content_hash(data)

    @property
    def lock_line(self) -> str:
        """``id@version:content_hash``: this task's line in ``tasks/SUITE.lock``."""
        return f"{self.id}@{self.version}:{self.content_hash}"

    def build_world(self, mode: ProtectionMode) -> World:
        """A fresh world in its initial state, with this task's scope and hidden mutations."""
        ev = self.evaluator
        return World(
            get_world(self.world),
            ev.initial_state,
            mode=mode,
            scope=ev.authorization_scope,
            mutations=ev.hidden_mutations,
            clock=ev.clock,
        )


def suite_hash(tasks: list[Task]) -> str:
    """SHA-256 of the sorted ``id@version:hash`` lines (SPEC section 5)."""
    return sha256_hex("\n".join(sorted(t.lock_line for t in tasks)))
