"""Value types shared by every world: modes, outcomes, resources, scopes and the evaluator-only event log."""

from __future__ import annotations

import fnmatch
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class ProtectionMode(StrEnum):
    """How write tools guard against stale state (SPEC section 4)."""

    UNPROTECTED = "unprotected"
    """Write tools take no version argument."""
    FRESHNESS_CONTRACT = "freshness_contract"
    """Every write tool requires ``expected_version``; a mismatch blocks the write (HTTP If-Match / 412)."""


class ToolKind(StrEnum):
    """Whether a tool only reads state or may change it."""

    READ = "read"
    WRITE = "write"


class Outcome(StrEnum):
    """What happened to one tool call."""

    EXECUTED = "executed"
    """The call ran; a write changed the world."""
    BLOCKED = "blocked"
    """Freshness contract: ``expected_version`` did not match; no business logic ran."""
    REJECTED = "rejected"
    """A domain guard refused the call (it reached the business logic)."""
    FORBIDDEN = "forbidden"
    """The principal's authorization scope does not cover the write."""
    INVALID = "invalid"
    """Unknown tool, malformed or wrongly typed arguments, or an unknown resource id."""


class ResourceModel(BaseModel):
    """Base class of a world's resource kinds: the fields only; key and version are held by the world."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    kind: ClassVar[str]
    """The middle part of the resource key ``world/kind/id``."""


def resource_key(world: str, kind: str, resource_id: str) -> str:
    """The global key of a resource: ``world/kind/id``."""
    return f"{world}/{kind}/{resource_id}"


class Scope(BaseModel):
    """What the principal may write. Reads are never restricted."""

    model_config = ConfigDict(extra="forbid")

    write_tools: list[str] | None = Field(
        default=None, description="Write tools the principal may call; null allows every write tool."
    )
    resources: list[str] = Field(
        default_factory=lambda: ["*"],
        description="fnmatch patterns over resource keys (world/kind/id) the principal may write.",
    )
    limits: dict[str, int] = Field(
        default_factory=dict,
        description="Upper bounds on integer arguments, keyed 'tool.argument' (e.g. issue_refund.amount_cents).",
    )

    def refusal(self, tool: str, resource: str | None, arguments: dict[str, Any]) -> str | None:
        """Why this write is outside the scope, or None when it is allowed."""
        if self.write_tools is not None and tool not in self.write_tools:
            return f"the principal may not call {tool}"
        if resource is not None and not any(fnmatch.fnmatchcase(resource, p) for p in self.resources):
            return f"the principal may not write {resource}"
        for name, bound in sorted(self.limits.items()):
            limit_tool, _, argument = name.partition(".")
            value = arguments.get(argument)
            if limit_tool == tool and isinstance(value, int) and value > bound:
                return f"{argument}={value} exceeds the principal's limit of {bound}"
        return None


class ToolEvent(BaseModel):
    """One tool call as the evaluator sees it. Never shown to the model."""

    model_config = ConfigDict(extra="forbid")

    seq: int = Field(description="0-based position of the call in the episode.")
    step: int = Field(description="Agent step (model call) that issued the call.")
    index: int = Field(description="0-based position of the call within its step.")
    call_id: str | None = Field(default=None, description="The tool-call id from the model, if any.")
    actor: str = Field(default="agent", description="Who called: agent (other actors' writes are mutation events).")
    tool: str = Field(description="Tool name as called (may be unknown).")
    arguments: dict[str, Any] | str = Field(description="Parsed arguments, or the raw text when it was not JSON.")
    validated_arguments: dict[str, Any] | None = Field(
        default=None,
        description='The arguments as the tool interpreted them: validated, types coerced ("1000" -> 1000), '
        "defaults filled, as JSON. What the graders and hidden-mutation triggers compare. Null when the call failed "
        "before its arguments validated, and in records written before the field existed.",
    )
    kind: ToolKind | None = Field(description="read or write; null for an unknown tool.")
    resource: str | None = Field(description="The primary resource the call addresses, when it names one.")
    resources_written: list[str] = Field(
        default_factory=list, description="The resources the call wrote (executed writes only)."
    )
    resources_observed: list[str] = Field(
        default_factory=list, description="Resources whose state and version the result showed the agent."
    )
    observed_version: int | None = Field(
        description="Version of the primary resource the agent last saw in a tool result before this call."
    )
    observed_seq: int | None = Field(description="seq of the call whose result gave observed_version.")
    version_at_execution: int | None = Field(description="Version of the primary resource when the call ran.")
    expected_version: int | None = Field(default=None, description="The version precondition sent, if any.")
    outcome: Outcome = Field(description="executed, blocked, rejected, forbidden or invalid.")
    error_code: str | None = Field(default=None, description="The tool error's code, when the call failed.")
    result: str = Field(description="The exact tool result text returned to the model.")
    resource_states_before: dict[str, Any] = Field(
        default_factory=dict, description="version and fields of each touched resource immediately before."
    )
    state_before: str = Field(description="SHA-256 of the canonical world state before the call.")
    state_after: str = Field(description="SHA-256 of the canonical world state after the call.")

    def interpreted_arguments(self) -> dict[str, Any]:
        """The arguments as the tool acted on them: ``validated_arguments``, or for a call that never validated (or
        a record that predates that field) the parsed ``arguments`` as given; ``{}`` when they were not JSON."""
        if self.validated_arguments is not None:
            return self.validated_arguments
        return self.arguments if isinstance(self.arguments, dict) else {}


class MutationEvent(BaseModel):
    """One hidden mutation (another actor's write) as it was applied. Never shown to the model."""

    model_config = ConfigDict(extra="forbid")

    mutation_id: str = Field(description="The task's id of this hidden mutation.")
    actor: str = Field(description="The other actor who wrote.")
    step: int = Field(description="Agent step during or before which it applied.")
    after_seq: int | None = Field(description="seq of the tool call it followed; null for before_step triggers.")
    trigger: str = Field(description="after_tool_call, after_observation or before_step.")
    resources: list[str] = Field(description="The resources it wrote.")
    versions_before: dict[str, int | None] = Field(
        description="Each resource's version before it (null: did not exist)."
    )
    versions_after: dict[str, int | None] = Field(description="Each resource's version after it.")
    outcome: Outcome = Field(description="executed, or how the write failed.")
    error_code: str | None = Field(default=None, description="The error's code when it did not execute.")
    state_before: str = Field(description="SHA-256 of the world state before it.")
    state_after: str = Field(description="SHA-256 of the world state after it.")
