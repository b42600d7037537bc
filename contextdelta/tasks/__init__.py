"""Task files: schema, loading, hashing, trajectory replay. Validation lives in ``contextdelta.tasks.validation``
(it needs the graders, which import this package)."""

from contextdelta.tasks.loader import LoadedTask, TaskProblem, load_directory, load_task, load_task_text
from contextdelta.tasks.schema import (
    TASK_SCHEMA_VERSION,
    EvaluatorSpec,
    Hazard,
    Predicate,
    PredicateOp,
    Principal,
    ProhibitedAction,
    PublicPart,
    PublicTask,
    Task,
    TrajectoryCall,
    VersionFromCall,
    suite_hash,
)
from contextdelta.tasks.trajectory import (
    Replay,
    ResolvedCall,
    TrajectoryError,
    latest_shown_version,
    replay,
    resolve_call,
    write_resource,
)
from contextdelta.worlds.views import shown_version

__all__ = [
    "TASK_SCHEMA_VERSION",
    "EvaluatorSpec",
    "Hazard",
    "LoadedTask",
    "Predicate",
    "PredicateOp",
    "Principal",
    "ProhibitedAction",
    "PublicPart",
    "PublicTask",
    "Replay",
    "ResolvedCall",
    "Task",
    "TaskProblem",
    "TrajectoryCall",
    "TrajectoryError",
    "VersionFromCall",
    "latest_shown_version",
    "load_directory",
    "load_task",
    "load_task_text",
    "replay",
    "resolve_call",
    "shown_version",
    "suite_hash",
    "write_resource",
]
