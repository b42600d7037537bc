"""Reading run directories written by earlier versions: what their records lack, re-derived from what they hold.

Records written before graders returned structured details (``Verdict.details``) carry only the reasons' text.
Nothing reads that text: the details are re-derived by grading the recorded episode again, from the run's own
task snapshot and the recorded event log and final state (the graders are pure functions of exactly these), so
every reader sees one shape of record. The rest of the recorded verdict is kept as recorded; ``verify`` still
compares all of it with its own re-execution.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contextdelta.grading import DuplicateRule, GraderDetail, grade
from contextdelta.rundir.records import EpisodeRecord
from contextdelta.tasks import Task, episode_task, load_directory
from contextdelta.worlds import ProtectionMode


def lacks_details(record: EpisodeRecord) -> bool:
    """The record was written before verdicts carried structured grader details."""
    return record.verdict.details is None


def regraded_details(record: EpisodeRecord, task: Task) -> list[GraderDetail]:
    """The grader details of a recorded episode, graded again from its event log and final state."""
    trace = record.trace
    task = episode_task(task, record.control)
    initial = task.build_world(ProtectionMode(record.protection_mode)).state()
    verdict = grade(  # by the duplicate rule such records were graded by (before the effect keys)
        task,
        trace.tool_events(),
        trace.mutation_events(),
        initial,
        trace.evaluator.final_state,
        trace.final_answer,
        duplicate_rule=DuplicateRule.ALL_ARGUMENTS,
    )
    assert verdict.details is not None  # grade always records details
    return verdict.details


def add_grader_details(records: Sequence[EpisodeRecord], snapshot: Path) -> list[EpisodeRecord]:
    """``records`` with details added where they lack them, from the task files in ``snapshot`` (the run
    directory's ``tasks/``). Raises ValueError naming the episode when its task is not in the snapshot."""
    if not any(lacks_details(r) for r in records):
        return list(records)
    loaded, _ = load_directory(snapshot)
    tasks = {t.task.id: t.task for t in loaded}
    upgraded: list[EpisodeRecord] = []
    for record in records:
        if lacks_details(record):
            task = tasks.get(record.task_id)
            if task is None or task.content_hash != record.task_hash:
                raise ValueError(
                    f"episode {record.run_id} was recorded without grader details, and its task "
                    f"{record.task_id} (hash {record.task_hash[:16]}) is not in the task snapshot {snapshot}"
                )
            verdict = record.verdict.model_copy(update={"details": regraded_details(record, task)})
            record = record.model_copy(update={"verdict": verdict})
        upgraded.append(record)
    return upgraded
