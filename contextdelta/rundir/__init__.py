"""The run directory (SPEC section 9): its record models, its file layout and derived files, run ids, the file
primitives every writer uses, and the recorder interface through which a run writes everything.

    directory = RunDirectory(path)
    manifest, records = directory.read_manifest(), directory.read_episodes()
    task_result_row(record), render_tool_events(records)     # the derived files, from the episodes
    Recorder: start(RunStart) -> episode(EpisodeRecord)... -> finish(RunEnd)
"""

from contextdelta.rundir.ids import RUN_GROUP_ID, RunIdError, episode_run_id, new_run_group_id, run_dir, validate_run_id
from contextdelta.rundir.io import (
    JsonlError,
    JsonlWriter,
    atomic_write_json,
    atomic_write_text,
    read_jsonl,
    repair_torn_tail,
)
from contextdelta.rundir.layout import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    FAILURE_ATLAS,
    MANIFEST,
    RAW_RUNS,
    REQUIRED_FILES,
    TASK_RESULTS,
    TASKS_SNAPSHOT,
    TOOL_EVENTS,
    RunDirectory,
    RunDirectoryError,
    render_task_results,
    render_tool_events,
    task_result_row,
    tool_event_records,
)
from contextdelta.rundir.recorder import Recorder, Recorders, RunDirectoryRecorder, RunEnd, RunStart
from contextdelta.rundir.records import (
    FAILED_TERMINATIONS,
    RECORD_SCHEMA_VERSION,
    TASK_RESULT_COLUMNS,
    Counts,
    Environment,
    EpisodeRecord,
    GitInfo,
    Hashes,
    ProviderInfo,
    RunManifest,
    RunStatus,
    StrategyParams,
    TaskInfo,
    ToolEventRecord,
)

__all__ = [
    "AGGREGATE_METRICS",
    "BENCHMARK_REPORT",
    "FAILED_TERMINATIONS",
    "FAILURE_ATLAS",
    "MANIFEST",
    "RAW_RUNS",
    "RECORD_SCHEMA_VERSION",
    "REQUIRED_FILES",
    "RUN_GROUP_ID",
    "TASKS_SNAPSHOT",
    "TASK_RESULTS",
    "TASK_RESULT_COLUMNS",
    "TOOL_EVENTS",
    "Counts",
    "Environment",
    "EpisodeRecord",
    "GitInfo",
    "Hashes",
    "JsonlError",
    "JsonlWriter",
    "ProviderInfo",
    "Recorder",
    "Recorders",
    "RunDirectory",
    "RunDirectoryError",
    "RunDirectoryRecorder",
    "RunEnd",
    "RunIdError",
    "RunManifest",
    "RunStart",
    "RunStatus",
    "StrategyParams",
    "TaskInfo",
    "ToolEventRecord",
    "atomic_write_json",
    "atomic_write_text",
    "episode_run_id",
    "new_run_group_id",
    "read_jsonl",
    "render_task_results",
    "render_tool_events",
    "repair_torn_tail",
    "run_dir",
    "task_result_row",
    "tool_event_records",
    "validate_run_id",
]
