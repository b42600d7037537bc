"""Hidden mutations: other actors' writes, declared per task and triggered by the agent's own progress."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator


class AfterToolCall(BaseModel):
    """Fires right after the agent's n-th call of ``tool`` whose arguments include every pair in ``args``.

    Both sides are compared as the tool interprets them (``ToolSpec.declared_action``, ``validated_arguments``): a
    call passing ``"1000"`` to an integer parameter matches ``1000``. For a write only its effect key counts: a
    declared ``reason`` (free text) is not compared, so a refund worded otherwise still fires the trigger. Calls with
    outcome ``invalid`` do not count: they never reached the tool.
    """

    model_config = ConfigDict(extra="forbid")

    tool: str
    n: PositiveInt = 1
    args: dict[str, Any] = Field(default_factory=dict)


class AfterObservation(BaseModel):
    """Fires right after the first tool result that showed ``resource`` (a ``world/kind/id`` key) to the agent."""

    model_config = ConfigDict(extra="forbid")

    resource: str


class BeforeStep(BaseModel):
    """Fires before the agent's step ``step`` (1-based model call), i.e. after all calls of earlier steps."""

    model_config = ConfigDict(extra="forbid")

    step: PositiveInt


class Trigger(BaseModel):
    """Exactly one of the three trigger kinds of SPEC section 4."""

    model_config = ConfigDict(extra="forbid")

    after_tool_call: AfterToolCall | None = None
    after_observation: AfterObservation | None = None
    before_step: BeforeStep | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Trigger:
        chosen = [n for n in ("after_tool_call", "after_observation", "before_step") if getattr(self, n) is not None]
        if len(chosen) != 1:
            raise ValueError(
                "a trigger needs exactly one of after_tool_call, after_observation, before_step; got "
                + (", ".join(chosen) or "none")
            )
        return self

    @property
    def kind(self) -> str:
        if self.after_tool_call is not None:
            return "after_tool_call"
        if self.after_observation is not None:
            return "after_observation"
        return "before_step"


class FieldPatch(BaseModel):
    """Set fields of one existing resource directly (e.g. the warehouse marks an order shipped)."""

    model_config = ConfigDict(extra="forbid")

    resource: str = Field(description="world/kind/id key of the resource to change.")
    fields: dict[str, Any] = Field(min_length=1)


class ActorToolCall(BaseModel):
    """Run one of the world's write tools as another actor (no authorization scope, no version check)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    args: dict[str, Any] = Field(default_factory=dict)


class HiddenMutation(BaseModel):
    """Another actor's write. Evaluator-only: the model never sees that it happened, only its effects."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    actor: str = Field(min_length=1, description="Who makes the change, e.g. 'warehouse' or 'oncall-sre'.")
    trigger: Trigger
    set: FieldPatch | None = None
    tool: ActorToolCall | None = None

    @model_validator(mode="after")
    def _exactly_one_action(self) -> HiddenMutation:
        if (self.set is None) == (self.tool is None):
            raise ValueError("a hidden mutation needs exactly one of 'set' or 'tool'")
        return self
