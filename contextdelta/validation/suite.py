"""``validate-tasks``: load, check and replay every task, and compare the suite with ``SUITE.lock``.

For each task (SPEC section 5): the reference solution passes end state and every safety grader in both
protection modes, and every hidden mutation executes during it; the unsafe trajectory, unprotected, fails the
grader its hazard targets (:func:`contextdelta.grading.targeted_grader`); under the freshness contract at least
one of its writes is blocked, including every write the unprotected run flagged as stale, duplicate or
prohibited. For ``authorization_boundary`` tasks the unsafe trajectory is refused as ``forbidden`` in both
modes instead.

Two controls prove that the task measures what it claims: a null agent (a final answer at once, no tool
call) fails in both modes; and in the no-mutation control (:func:`contextdelta.tasks.controls.without_mutations`)
the reference solution still passes every grader in both modes, and for a stale-type hazard
(:data:`STALE_HAZARDS`) the unsafe trajectory then passes the grader its hazard targets: the hidden mutation is
what makes it unsafe. A generated task (``evaluator.family``) must also have the horizon its family claims:
the dependent write is the ``horizon``-th call after the counted observation, and no call in between shows
the written resource.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from contextdelta._words import plural
from contextdelta.grading import GraderName, Verdict, blocked_writes, grade, targeted_grader
from contextdelta.tasks import (
    LOCK_NAME,
    MAX_FILE_BYTES,
    Hazard,
    LoadedTask,
    Replay,
    Task,
    TaskProblem,
    TrajectoryCall,
    TrajectoryError,
    check_task,
    display_path,
    load_directory,
    located,
    lock_problems,
    read_lock,
    render_lock,
    replay,
    suite_hash,
    without_mutations,
)
from contextdelta.tasks.families import FAMILIES, GENERATOR_VERSION, SuiteArguments, cell_params, generate_suite
from contextdelta.worlds import Outcome, ProtectionMode, ToolEvent, WorldStateError

MODES = (ProtectionMode.UNPROTECTED, ProtectionMode.FRESHNESS_CONTRACT)

STALE_HAZARDS = frozenset({Hazard.HIDDEN_MUTATION, Hazard.SUPERSEDED_OBSERVATION})
"""Hazards whose harm is acting on state another actor changed: with the change switched off, the unsafe
trajectory must pass its targeted grader. ``conflicting_observations`` is not one: its expected values are
derived from the conflicting value (double the *new* limit), so a world without the change has a different
right answer that the task does not declare; ``own_write_forgotten`` and ``authorization_boundary`` harm
without any other actor."""


@dataclass
class TaskReport:
    """One row of the validation table."""

    file: str
    id: str
    world: str | None = None
    hazard: Hazard | None = None
    target: GraderName | None = None
    content_hash: str | None = None
    reference_ok: bool | None = None
    unsafe_ok: bool | None = None
    null_ok: bool | None = None
    """A null agent (no tool calls) fails the task."""
    control_ok: bool | None = None
    """The no-mutation control: the reference passes, and a stale-type unsafe trajectory passes its target."""
    gap: int | None = None
    """Calls between the stale write of the unsafe trajectory and the last earlier result showing its resource."""
    problems: list[TaskProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem, and every check (reference, unsafe, null agent, no-mutation control) passed."""
        return (
            not self.problems
            and bool(self.reference_ok)
            and bool(self.unsafe_ok)
            and bool(self.null_ok)
            and bool(self.control_ok)
        )


@dataclass
class SuiteReport:
    """Everything ``validate-tasks`` found."""

    directory: Path
    rows: list[TaskReport]
    problems: list[TaskProblem]
    """Every problem, task-level and suite-level, in report order."""
    tasks: list[Task]
    lock_path: Path
    lock_found: bool
    loaded: list[LoadedTask] = field(default_factory=list)
    """Every task file that loaded, with its path (what a run reads)."""
    lock_problems: list[TaskProblem] = field(default_factory=list)
    """The problems of the ``SUITE.lock`` comparison (also in ``problems``): what ``--allow-unlocked`` accepts, but
    for ``lock_damage``."""
    lock_damage: list[TaskProblem] = field(default_factory=list)
    """The problems (also in ``lock_problems``) of a lock that cannot be read as one (``SuiteLock.problems``): no flag
    accepts them."""

    @property
    def ok(self) -> bool:
        """Every task and the lock passed: what ``validate-tasks`` exits 0 on."""
        return not self.problems and all(r.ok for r in self.rows)

    @property
    def suite_hash(self) -> str:
        """The suite hash of every task that loaded (SPEC section 5)."""
        return suite_hash(self.tasks)


@dataclass
class ReplayCheck:
    """The outcome of replaying one task's trajectories."""

    reference_ok: bool
    unsafe_ok: bool
    gap: int | None
    problems: list[TaskProblem]
    null_ok: bool = True
    control_ok: bool = True


def _verdict(task: Task, run: Replay) -> Verdict:
    return grade(task, run.world.events, run.world.mutation_log, run.initial_state, run.final_state)


def _run(
    file: str, task: Task, name: str, calls: list[TrajectoryCall], mode: ProtectionMode, problems: list[TaskProblem]
) -> Replay | None:
    try:
        run = replay(task, calls, mode)
    except TrajectoryError as exc:
        problems.append(
            TaskProblem(file, f"evaluator.{name}.{exc.index}.expected_version", f"{mode.value}: {exc.message}")
        )
        return None
    for event in run.world.events:
        if event.outcome is Outcome.INVALID:
            problems.append(
                TaskProblem(
                    file,
                    f"evaluator.{name}.{event.seq}",
                    f"{mode.value}: {event.tool} is an invalid call ({event.error_code})",
                    event.arguments,
                )
            )
    return run


def _last_observation(events: list[ToolEvent], seq: int, resource: str | None) -> int | None:
    seen = [e.seq for e in events if e.seq < seq and resource is not None and resource in e.resources_observed]
    return max(seen) if seen else None


def check_replays(file: str, task: Task) -> ReplayCheck:
    """Replay the reference solution and the unsafe trajectory of ``task`` in both modes and check them."""
    ev = task.evaluator
    problems: list[TaskProblem] = []
    reference_ok = True
    for mode in MODES:
        before = len(problems)
        run = _run(file, task, "reference_solution", ev.reference_solution, mode, problems)
        if run is None:
            reference_ok = False
            continue
        applied = {m.mutation_id: m for m in run.world.mutation_log}
        for i, mutation in enumerate(ev.hidden_mutations):
            happened = applied.get(mutation.id)
            if happened is None:
                problems.append(
                    TaskProblem(
                        file,
                        f"evaluator.hidden_mutations.{i}",
                        f"{mode.value}: did not execute during the reference run",
                        mutation.id,
                    )
                )
            elif happened.outcome is not Outcome.EXECUTED:
                problems.append(
                    TaskProblem(
                        file,
                        f"evaluator.hidden_mutations.{i}",
                        f"{mode.value}: was {happened.outcome.value} during the reference run ({happened.error_code})",
                        mutation.id,
                    )
                )
        verdict = _verdict(task, run)
        if not verdict.success:
            problems.append(
                TaskProblem(
                    file,
                    "evaluator.reference_solution",
                    f"{mode.value}: fails {', '.join(g.value for g in verdict.failed_graders)}: "
                    + "; ".join(verdict.reasons),
                )
            )
        reference_ok = reference_ok and len(problems) == before

    target = targeted_grader(task)
    unsafe_problems: list[TaskProblem] = []
    loose = _run(file, task, "unsafe_trajectory", ev.unsafe_trajectory, ProtectionMode.UNPROTECTED, unsafe_problems)
    strict = _run(
        file, task, "unsafe_trajectory", ev.unsafe_trajectory, ProtectionMode.FRESHNESS_CONTRACT, unsafe_problems
    )
    gap: int | None = None
    harmful: ToolEvent | None = None
    if loose is not None and strict is not None:
        verdict = _verdict(task, loose)
        if verdict.grader(target) is not False:
            unsafe_problems.append(
                TaskProblem(
                    file,
                    "evaluator.unsafe_trajectory",
                    f"unprotected: passes {target.value}, the grader hazard {ev.hazard.value} targets",
                )
            )
        strict_events = strict.world.events
        if ev.hazard is Hazard.AUTHORIZATION_BOUNDARY:
            for run, mode in ((loose, ProtectionMode.UNPROTECTED), (strict, ProtectionMode.FRESHNESS_CONTRACT)):
                if not any(e.outcome is Outcome.FORBIDDEN for e in run.world.events):
                    unsafe_problems.append(
                        TaskProblem(
                            file, "evaluator.unsafe_trajectory", f"{mode.value}: no write is refused as forbidden"
                        )
                    )
            harmful = next((e for e in strict_events if e.outcome is Outcome.FORBIDDEN), None)
        else:
            blocked = set(blocked_writes(strict_events))
            flagged = {f.seq for f in verdict.event_flags if f.stale or f.duplicate or f.prohibited}
            if not blocked:
                unsafe_problems.append(
                    TaskProblem(file, "evaluator.unsafe_trajectory", "freshness_contract: no write is blocked")
                )
            for seq in sorted(flagged - blocked):
                unsafe_problems.append(
                    TaskProblem(
                        file,
                        f"evaluator.unsafe_trajectory.{seq}",
                        "freshness_contract: this write is flagged when unprotected but not blocked",
                    )
                )
            harmful = next((e for e in strict_events if e.seq in blocked), None)
        if harmful is not None:
            last = _last_observation(strict_events, harmful.seq, harmful.resource)
            gap = harmful.seq - last - 1 if last is not None else harmful.seq
    if ev.family is not None and harmful is not None:
        unsafe_problems.extend(_horizon_problems(file, task, harmful.seq, gap))
    problems.extend(unsafe_problems)
    unsafe_ok = not unsafe_problems and loose is not None and strict is not None
    null_problems = _null_agent_problems(file, task)
    control_problems = _control_problems(file, task)
    problems.extend(null_problems + control_problems)
    return ReplayCheck(
        reference_ok, unsafe_ok, gap, problems, null_ok=not null_problems, control_ok=not control_problems
    )


def _horizon_problems(file: str, task: Task, write_seq: int, gap: int | None) -> list[TaskProblem]:
    """A generated task's horizon, re-derived from its unsafe trajectory under the contract: the blocked write
    is the ``horizon``-th call after the counted observation, which is the last earlier result showing it."""
    family = task.evaluator.family
    assert family is not None
    problems: list[TaskProblem] = []
    expected_write = family.observation_call + family.horizon
    if write_seq != expected_write or write_seq != len(task.evaluator.unsafe_trajectory) - 1:
        problems.append(
            TaskProblem(
                file,
                "evaluator.family.horizon",
                f"the dependent write is call {write_seq} of the unsafe trajectory, not call "
                f"{expected_write} (observation_call + horizon) and its last call",
                family.horizon,
            )
        )
    elif gap != family.horizon - 1:
        problems.append(
            TaskProblem(
                file,
                "evaluator.family.observation_call",
                f"a call between it and the dependent write shows the written resource (gap {gap}, "
                f"horizon {family.horizon})",
                family.observation_call,
            )
        )
    return problems


def _null_agent_problems(file: str, task: Task) -> list[TaskProblem]:
    """A null agent (one model call, a final answer, no tool call) must fail in both modes; mutations due
    before its single step still apply, as they would in the agent loop."""
    problems: list[TaskProblem] = []
    for mode in MODES:
        world = task.build_world(mode)
        initial = world.state()
        world.begin_step(1)
        verdict = grade(task, world.events, world.mutation_log, initial, world.state())
        if verdict.success:
            problems.append(
                TaskProblem(
                    file,
                    "evaluator.expected_end_state",
                    f"{mode.value}: a null agent (no tool calls) passes every grader; the task asks for nothing",
                )
            )
    return problems


def _control_problems(file: str, task: Task) -> list[TaskProblem]:
    """The no-mutation control: the reference passes every grader in both modes and, for a stale-type
    hazard, the unprotected unsafe trajectory passes the grader its hazard targets."""
    if not task.evaluator.hidden_mutations:
        return []
    quiet = without_mutations(task)
    problems: list[TaskProblem] = []
    for mode in MODES:
        run = _run(file, quiet, "reference_solution", quiet.evaluator.reference_solution, mode, problems)
        if run is None:
            continue
        verdict = _verdict(quiet, run)
        if not verdict.success:
            problems.append(
                TaskProblem(
                    file,
                    "evaluator.reference_solution",
                    f"no-mutation control, {mode.value}: fails {', '.join(g.value for g in verdict.failed_graders)}: "
                    + "; ".join(verdict.reasons),
                )
            )
    if task.evaluator.hazard in STALE_HAZARDS:
        target = targeted_grader(task)
        run = _run(
            file, quiet, "unsafe_trajectory", quiet.evaluator.unsafe_trajectory, ProtectionMode.UNPROTECTED, problems
        )
        if run is not None and _verdict(quiet, run).grader(target) is False:
            problems.append(
                TaskProblem(
                    file,
                    "evaluator.unsafe_trajectory",
                    f"no-mutation control, unprotected: still fails {target.value}, so the hidden mutation is not "
                    "what makes it unsafe",
                )
            )
    return problems


def _created(task: Task) -> set[str]:
    """Resources the reference solution creates (predicates may name them), or none if it cannot run."""
    try:
        run = replay(task, task.evaluator.reference_solution, ProtectionMode.UNPROTECTED)
    except (WorldStateError, TrajectoryError):
        return set()
    return set(run.final_state) - set(run.initial_state)


def _report(loaded: LoadedTask) -> TaskReport:
    task = loaded.task
    row = TaskReport(
        file=loaded.file,
        id=task.id,
        world=task.world,
        hazard=task.evaluator.hazard,
        target=targeted_grader(task),
        content_hash=task.content_hash,
    )
    row.problems = located(check_task(loaded.file, task, created=_created(task)), loaded.path)
    if row.problems:
        return row
    checked = check_replays(loaded.file, task)
    row.reference_ok, row.unsafe_ok, row.gap = checked.reference_ok, checked.unsafe_ok, checked.gap
    row.null_ok, row.control_ok = checked.null_ok, checked.control_ok
    row.problems.extend(located(list(checked.problems), loaded.path))
    return row


def task_report(file: str, task: Task) -> TaskReport:
    """Every check ``validate-tasks`` runs on one task (its checks and replays), for a task not yet written to
    ``file`` (``generate-tasks`` checks what it would write before writing anything)."""
    return _report(LoadedTask(Path(file), task))


def validate_suite(
    directory: Path, *, writing_lock: bool = False, checked: Mapping[str, TaskReport] | None = None
) -> SuiteReport:
    """Validate every task file under ``directory`` and compare with its ``SUITE.lock`` (if there is one).

    ``checked``: by content hash, clean reports of tasks this process already checked (`task_report`); a file
    holding such a task is not replayed again (the checks are pure functions of the task)."""
    loaded, file_problems = load_directory(directory)
    known = {h: r for h, r in (checked or {}).items() if r.ok}
    rows = [
        dataclasses.replace(known[entry.task.content_hash], file=entry.file)
        if entry.task.content_hash in known
        else _report(entry)
        for entry in loaded
    ]
    folder = display_path(directory)
    failed_files = sorted({p.file for p in file_problems if p.file != folder})
    rows.extend(TaskReport(file=f, id=Path(f).stem) for f in failed_files)
    rows.sort(key=lambda r: (r.world or "~", r.id))
    lock_path = directory / LOCK_NAME
    suite_level: list[TaskProblem] = []
    damage: list[TaskProblem] = []
    lock_found = lock_path.exists() or lock_path.is_symlink()  # a folder or a broken link there is named, not skipped
    if lock_found:
        not_loaded: dict[str, TaskProblem] = {}
        for problem in file_problems:  # the first problem of each task file that did not load, by its task id
            if problem.file in failed_files:
                not_loaded.setdefault(Path(problem.file).stem, problem)
        lock = read_lock(lock_path)
        suite_level = lock_problems(loaded, lock, writing=writing_lock, not_loaded=not_loaded)
        damage = suite_level[: len(lock.problems) + 1] if lock.problems else []  # its problems and the remedy
        # --write-lock keeps the record only where it holds; a task file that did not load is named already
        if lock.generator is not None and not writing_lock and not not_loaded and not damage:
            suite_level += generator_problems(lock_path, lock.generator, loaded)
    problems = file_problems + [p for r in rows for p in r.problems] + suite_level
    return SuiteReport(
        directory=directory,
        rows=rows,
        problems=problems,
        tasks=[entry.task for entry in loaded],
        lock_path=lock_path,
        lock_found=lock_found,
        loaded=list(loaded),
        lock_problems=suite_level,
        lock_damage=damage,
    )


_CHECKED: dict[tuple[str, str], SuiteReport] = {}
_CHECKED_MAX = 8


def suite_fingerprint(directory: Path) -> str:
    """SHA-256 over the relative path and bytes of every file (and the target of every symlink) below
    ``directory``: everything ``validate_suite`` reads, so an equal fingerprint means an equal report.

    A file over the loader's size limit counts by its size alone: the loader refuses it by size without reading
    it, so its bytes never change a report, and reading them (a stray multi-gigabyte file in the folder) would
    hold them all in memory before the refusal. Files are hashed as streams."""
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        name = path.relative_to(directory).as_posix()
        if path.is_symlink():
            digest.update(f"link {name} -> {os.readlink(path)}\n".encode("utf-8", "surrogateescape"))
        elif path.is_file():
            size = path.stat().st_size
            digest.update(f"file {name} {size}\n".encode("utf-8", "surrogateescape"))
            if size <= MAX_FILE_BYTES:
                with path.open("rb") as handle:
                    digest.update(hashlib.file_digest(handle, "sha256").digest())
    return digest.hexdigest()


def checked_suite(directory: Path) -> SuiteReport:
    """:func:`validate_suite` of ``directory``, reused within one process while no file below it changed (the
    run-benchmark preflight of a suite already checked costs one read of its files)."""
    key = (str(directory.resolve()), suite_fingerprint(directory))
    report = _CHECKED.get(key)
    if report is None:
        report = validate_suite(directory)
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.pop(next(iter(_CHECKED)))
        _CHECKED[key] = report
    return report


class SuiteRefused(ValueError):
    """A suite no run takes (:func:`runnable_suite`); the message lists every problem and how to fix it."""


@dataclass(frozen=True)
class RunnableSuite:
    """A suite a run takes: its tasks, and the problems of its ``SUITE.lock`` that ``allow_unlocked`` accepted
    (one line each, files relative to the suite folder; empty when the suite matched its lock)."""

    loaded: list[LoadedTask]
    unlocked: list[str]


def _relative(problem: TaskProblem, folder: Path) -> str:
    """A problem's one line with its file relative to the suite folder (no absolute path enters a manifest)."""
    shown, base = Path(problem.file), display_path(folder)
    try:
        name = shown.relative_to(base).as_posix()
    except ValueError:
        name = shown.name
    return dataclasses.replace(problem, file=name or LOCK_NAME).render()


def runnable_suite(directory: Path, source: str, *, allow_unlocked: bool = False) -> RunnableSuite:
    """The tasks of the suite in ``directory`` (named ``source`` in messages) a run may take: every
    ``validate-tasks`` check passed (:func:`checked_suite`: schema, semantic checks, trajectory replays, the
    no-mutation and null-agent controls, ``SUITE.lock``), else :class:`SuiteRefused` listing each problem. A missing
    or stale lock is accepted only with ``allow_unlocked`` (a task author's run); a lock that cannot be read as one
    never is. What run-benchmark (and its resume, run-external, serve-world) and the scripted server both load by.
    """
    report = checked_suite(directory)
    lock_only = {id(p) for p in report.lock_problems}
    problems = [p for p in report.problems if id(p) not in lock_only]
    if problems or (not report.ok and not report.problems):
        shown = problems if allow_unlocked else report.problems  # the lock's too, unless they are accepted
        listing = "\n".join(f"  {p.render()}" for p in shown) or "  (a check failed without a named problem)"
        raise SuiteRefused(
            f"the task suite {source} does not pass validate-tasks ({plural(len(shown), 'problem')}); "
            f"nothing was run. Fix {'it' if len(shown) == 1 else 'them'} (`contextdelta validate-tasks --tasks "
            f"{source}` shows the table):\n"
            f"{listing}"
        )
    if report.lock_damage:
        listing = "\n".join(f"  {_relative(p, directory)}" for p in report.lock_damage)
        raise SuiteRefused(
            f"the task suite {source} has a {LOCK_NAME} that cannot be read as a lock "
            f"({plural(len(report.lock_damage), 'problem')}); nothing was run. --allow-unlocked runs tasks that do "
            "not match a lock, never a lock that cannot be read: restore the file (e.g. `git checkout "
            f"{LOCK_NAME}`), or delete it and run `contextdelta validate-tasks --tasks {source} --write-lock`:\n"
            f"{listing}"
        )
    lock = [_relative(p, directory) for p in report.lock_problems]
    if not report.lock_found:
        lock = [f"{LOCK_NAME}: missing (the suite's tasks are not locked)"]
    if lock and not allow_unlocked:
        listing = "\n".join(f"  {line}" for line in lock)
        raise SuiteRefused(
            f"the task suite {source} is not locked: its {LOCK_NAME} is missing or does not match its tasks, so "
            "its numbers could not be cited as that suite's. Run `contextdelta validate-tasks --tasks "
            f"{source} --write-lock` once the tasks are final, or pass --allow-unlocked for a task author's "
            f"run (recorded in the manifest and at the top of the report):\n{listing}"
        )
    return RunnableSuite(loaded=list(report.loaded), unlocked=lock)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])


def generator_problems(lock_path: Path, generator: dict[str, Any], tasks: Sequence[LoadedTask]) -> list[TaskProblem]:
    """Whether a lock's generator record (``generate-tasks``' version and arguments) makes exactly ``tasks``.

    The record claims that regenerating with its arguments gives these files, so an edit of it (another seed,
    per-cell count, family or horizon) must be named like an edit of a task line. Every task must carry a family
    block of the recorded generator version, and the (family, horizon, content seed) cells must be the grid's; with
    the installed generator's version the tasks are also regenerated and compared by content hash (a task edited on
    purpose, its version bumped, is then no longer what the record generates).
    """
    file = display_path(lock_path)
    fix = "regenerate the suite with generate-tasks, or delete the generator line if the tasks were edited on purpose"

    def problem(why: str, value: Any) -> list[TaskProblem]:
        return [TaskProblem(file, "generator", f"{why}; {fix}", value)]

    version = generator.get("version")
    if type(version) is not int or version < 1:
        return problem("version is not a generator version (a whole number of 1 or more)", version)
    try:
        arguments = SuiteArguments.model_validate(generator.get("arguments"))
    except ValidationError as exc:
        return problem(f"arguments: {_first_error(exc)}", generator.get("arguments"))
    unknown = [name for name in arguments.families if name not in FAMILIES]
    if unknown and version == GENERATOR_VERSION:
        return problem(f"arguments.families: unknown family {unknown[0]!r}", unknown[0])
    if unknown:  # a family of another generator version: nothing here knows its grid
        return []
    made = [t for t in tasks if t.task.evaluator.family is not None]
    hand = [t for t in tasks if t.task.evaluator.family is None]
    if hand:
        return problem(f"{hand[0].task.id} has no evaluator.family block, so generate-tasks did not make it", version)
    other = [t for t in made if t.task.evaluator.family and t.task.evaluator.family.generator_version != version]
    if other:
        family = other[0].task.evaluator.family
        assert family is not None
        return problem(
            f"says generator version {version}, but {other[0].task.id} has generator_version "
            f"{family.generator_version}",
            version,
        )
    grid = {
        (name, horizon, cell_params(FAMILIES[name], horizon, index, arguments.seed).seed)
        for name in arguments.families
        for horizon in arguments.horizons
        for index in range(arguments.per_cell)
    }
    found: dict[tuple[str, int, int], str] = {}
    for t in made:
        family = t.task.evaluator.family
        assert family is not None
        found[(family.name, family.horizon, family.seed)] = t.task.id
    extra = sorted(found[cell] for cell in found.keys() - grid)
    if extra:
        return problem(
            f"the recorded arguments do not generate {len(extra)} of the {len(found)} tasks (e.g. {extra[0]})",
            generator.get("arguments"),
        )
    missing = sorted(grid - found.keys())
    if missing:
        name, horizon, seed = missing[0]
        return problem(
            f"the recorded arguments generate {plural(len(missing), 'task')} the folder lacks (e.g. family {name}, "
            f"horizon {horizon}, content seed {seed})",
            generator.get("arguments"),
        )
    if version != GENERATOR_VERSION:  # another generator made them: their content cannot be re-derived here
        return []
    regenerated = {
        g.task.id: g.task.content_hash
        for g in generate_suite(arguments, [FAMILIES[n] for n in arguments.families]).tasks
    }
    differ = sorted(t.task.id for t in made if regenerated.get(t.task.id) != t.task.content_hash)
    if differ:
        return problem(
            f"{plural(len(differ), 'task')} {'differs' if len(differ) == 1 else 'differ'} from what the recorded "
            f"arguments generate (e.g. {differ[0]})",
            differ[0],
        )
    return []


def write_lock(report: SuiteReport) -> Path:
    """Write ``SUITE.lock`` for a report's tasks atomically (temp file + replace), keeping the generator record of
    a generated suite's lock while it still generates exactly these tasks (`generator_problems`); a record that no
    longer does (tasks edited on purpose, their versions bumped) is dropped rather than kept as a false claim."""
    generator = read_lock(report.lock_path).generator if report.lock_found else None
    if generator is not None and generator_problems(report.lock_path, generator, report.loaded):
        generator = None
    text = render_lock(report.tasks, generator=generator)
    directory = report.lock_path.parent
    handle, temp = tempfile.mkstemp(prefix=".SUITE.lock.", dir=directory)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temp, report.lock_path)
    return report.lock_path


__all__ = [
    "STALE_HAZARDS",
    "ReplayCheck",
    "SuiteReport",
    "TaskReport",
    "check_replays",
    "checked_suite",
    "suite_fingerprint",
    "task_report",
    "validate_suite",
    "write_lock",
]
