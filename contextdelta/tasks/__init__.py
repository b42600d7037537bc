"""Task files: schema, loading, hashing."""

from contextdelta.tasks.schema import (
    EvaluatorSpec,
    Hazard,
    Predicate,
    Principal,
    ProhibitedAction,
    PublicPart,
    PublicTask,
    Task,
    TrajectoryCall,
    VersionFromCall,
    suite_hash,
)

__all__ = [
    "EvaluatorSpec",
    "Hazard",
    "Predicate",
    "Principal",
    "ProhibitedAction",
    "PublicPart",
    "PublicTask",
    "Task",
    "TrajectoryCall",
    "VersionFromCall",
    "suite_hash",
]
