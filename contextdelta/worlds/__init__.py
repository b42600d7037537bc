"""Simulated, versioned worlds: resources, tools, guards, the freshness contract and hidden mutations."""

from contextdelta.worlds.model import (
    MutationEvent,
    Outcome,
    ProtectionMode,
    ResourceModel,
    Scope,
    ToolEvent,
    ToolKind,
    resource_key,
)
from contextdelta.worlds.mutations import (
    ActorToolCall,
    AfterObservation,
    AfterToolCall,
    BeforeStep,
    FieldPatch,
    HiddenMutation,
    Trigger,
)
from contextdelta.worlds.registry import WORLDS, get_world
from contextdelta.worlds.tools import (
    GuardViolation,
    InvalidCall,
    ToolArgs,
    ToolContext,
    ToolSpec,
    action_key,
    includes_arguments,
    tool,
)
from contextdelta.worlds.views import json_values_in, resource_views, shown_version, write_records
from contextdelta.worlds.world import ToolCallResult, World, WorldDefinition, WorldStateError

__all__ = [
    "WORLDS",
    "ActorToolCall",
    "AfterObservation",
    "AfterToolCall",
    "BeforeStep",
    "FieldPatch",
    "GuardViolation",
    "HiddenMutation",
    "InvalidCall",
    "MutationEvent",
    "Outcome",
    "ProtectionMode",
    "ResourceModel",
    "Scope",
    "ToolArgs",
    "ToolCallResult",
    "ToolContext",
    "ToolEvent",
    "ToolKind",
    "ToolSpec",
    "Trigger",
    "World",
    "WorldDefinition",
    "WorldStateError",
    "action_key",
    "get_world",
    "includes_arguments",
    "json_values_in",
    "resource_key",
    "resource_views",
    "shown_version",
    "tool",
    "write_records",
]
