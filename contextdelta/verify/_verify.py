"""``verify RUN_ID``: re-derive every recorded fact of a run directory offline (SPEC section 10).

Checks, in order:

1. the directory: no link or special file where a run file is read (refused before anything is opened; other
   leftover temp files, links and FIFOs are noted, never followed or opened), manifest and episodes readable,
   status ``complete`` (``running``/``incomplete`` is refused first, with the resume command, unless
   ``allow_incomplete`` or the manifest's seal shows it was edited or removed), every file present; these are
   `VerifyError` (exit 2), not divergences;
1b. the seal (``_receipts.py``): the manifest's bytes and its parts, the receipts' hash chain, each line of
   ``raw_runs.jsonl`` against its receipt (an edit named by record and field; a line moved, torn, missing or not
   in the chain named as such), every other file's SHA-256; a run that must carry a seal and has none
   (``seal_expected``) is a divergence; a run directory from before receipts gets a note;
2. the task snapshot in ``tasks/``: each file loads, each task's version and content hash match the manifest,
   the suite hash, the public messages, the tool schemas and each task's horizon (the dose-response section's
   input; manifests written since horizons were recorded) re-derive;
3. the episode set: exactly the planned (task, strategy, mode, repeat) episodes, and the manifest counts (of
   each episode's current record); the attempts of every episode (``--retry-failed``): numbered 1, 2, ... in file
   order, every superseded attempt a failed trial, no more than the manifest's retry sessions allow;
4. each episode, every attempt of it (superseded ones too), re-executed in a fresh world built from the snapshot
   task: ``begin_step`` then every recorded tool call (name, raw arguments, call id); every tool result, tool event
   and hidden-mutation event, the final state and its hash compared with the record; for a deterministic strategy
   (built-in or plug-in), and for ``semantic_summary`` from its recorded summary replies, every step's context
   re-derived from the canonical history, and for an external agent's episode exactly "unknown" (no messages, no
   usage: ``_contexts.py``); the trace's task, mode, strategy, model, provider, seed, step limit, system prompt
   (text and hash) and tool schemas against the record and the manifest; then re-graded and every verdict field
   compared; ``cost_usd`` re-derived from the recorded usage at the run's recorded prices (runs that record them);
5. ``task_results.csv`` row by row and cell by cell, and ``tool_events.jsonl`` line by line, against what the
   episodes give (in the order the seal says they were written);
6. ``aggregate_metrics.json`` recomputed with its recorded analysis parameters (numbers equal within a
   relative 1e-9), and ``failure_atlas.md`` / ``benchmark_report.md`` rebuilt byte for byte. A run from before
   metrics schema 2 (its manifest has no ``seed_rule``) whose reports are of its older schema gets a note instead
   (those numbers mean other things and cannot be re-derived; ``report --write`` rebuilds them); any other
   schema mismatch is a divergence.

Differences between the installed code and the run's (harness or statistics hash) are reported as notes, since
they can explain a divergence.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from contextdelta._words import plural
from contextdelta.agent import initial_messages, system_prompt_sha256
from contextdelta.canonical import canonical_json, content_hash, sha256_hex
from contextdelta.context import count_tool_tokens
from contextdelta.grading import DetailKind, DuplicateRule, Verdict, grade
from contextdelta.report import (
    METRICS_SCHEMA_VERSION,
    NO_BLOCKED_WRITE,
    SHARD_WARNING,
    RunReport,
    build_report,
    params_of,
)
from contextdelta.rundir import (
    AGGREGATE_METRICS,
    BENCHMARK_REPORT,
    DERIVED_FILES,
    FAILED_TERMINATIONS,
    FAILURE_ATLAS,
    LEGACY_TASK_RESULT_COLUMNS,
    MANIFEST,
    RAW_RUNS,
    REQUIRED_FILES,
    TASK_RESULTS,
    TASKS_SNAPSHOT,
    TOOL_EVENTS,
    EpisodeAttempts,
    EpisodeRecord,
    RunDirectory,
    RunDirectoryError,
    RunManifest,
    RunStatus,
    SessionLock,
    episode_cost,
    horizons_recorded,
    parse_json,
    render_tool_events,
    stories_recorded,
    task_result_columns,
    task_result_row,
)
from contextdelta.rundir import (
    resume_command as run_resume_command,
)
from contextdelta.runner import EpisodeSpec, episode_seed, manifest_episodes, plan_sha256, source_hash
from contextdelta.stats import FLIP_NEEDS_REPEATS, analysis_sha256, rounded_half_even
from contextdelta.tasks import Task, episode_task, load_directory, suite_hash
from contextdelta.verify._contexts import (
    SUMMARY_STRATEGY,
    context_divergences,
    external_divergences,
    rebuild_run_strategies,
    rederive_limit,
)
from contextdelta.verify._receipts import (
    COPIED_WHILE_WRITING,
    check_seal,
    copied_while_writing,
    odd_entry_findings,
)
from contextdelta.worlds import ProtectionMode, ToolEvent, ToolKind, World, get_world, includes_arguments

REL_TOL = 1e-9
"""Relative tolerance for recomputed real-valued aggregates (BLAS summation order may change the last bits)."""
ABS_TOL = 1e-12
MAX_PER_FILE = 50
"""At most this many divergences are listed per derived file; the rest are counted in one line."""


class VerifyError(Exception):
    """A run directory verify cannot check: malformed or incomplete (exit 2). The message says why."""


class Divergence(BaseModel):
    """One fact that does not re-derive: which episode (or the run group) and which field."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    field: str
    detail: str

    def render(self) -> str:
        return f"{self.run_id}: {self.field}: {self.detail}"


@dataclass
class VerifyResult:
    """What verify found."""

    run_group_id: str
    episodes: int
    divergences: list[Divergence] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seal_expected: bool = True
    """Whether the run must carry a seal (it has receipts, or its recorded contextdelta version seals every run
    directory: ``RunDirectory.seal_expected``); one that must and has none is a divergence. False only for a run
    written before receipts, whose seal-only facts cannot be checked (a note says so)."""

    @property
    def ok(self) -> bool:
        return not self.divergences

    def lines(self) -> list[str]:
        """``["MATCH"]`` or one line per divergence."""
        return ["MATCH"] if self.ok else [d.render() for d in self.divergences]


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text_difference(recorded: str, derived: str, width: int = 30) -> str:
    """Where two texts first differ, with a little context from each."""
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, derived, strict=False)) if a != b), min(len(recorded), len(derived))
    )
    start = max(0, at - width)
    return (
        f"differs at character {at}: recorded {recorded[start : at + width]!r}, "
        f"re-executed {derived[start : at + width]!r}"
    )


def _differences(recorded: Any, derived: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(path, recorded, derived) of every leaf that differs; numbers compare within the tolerance."""
    if isinstance(recorded, dict) and isinstance(derived, dict):
        for key in sorted(set(recorded) | set(derived), key=str):
            child = f"{path}.{key}" if path else str(key)
            if key not in recorded:
                yield child, "(missing)", derived[key]
            elif key not in derived:
                yield child, recorded[key], "(missing)"
            else:
                yield from _differences(recorded[key], derived[key], child)
    elif isinstance(recorded, list) and isinstance(derived, list):
        if len(recorded) != len(derived):
            yield f"{path}.length" if path else "length", len(recorded), len(derived)
        for i, (a, b) in enumerate(zip(recorded, derived, strict=False)):
            yield from _differences(a, b, f"{path}[{i}]")
    elif (
        isinstance(recorded, int | float)
        and isinstance(derived, int | float)
        and not isinstance(recorded, bool)
        and not isinstance(derived, bool)
    ):
        if not math.isclose(recorded, derived, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            yield path, recorded, derived
    elif recorded != derived or type(recorded) is not type(derived):
        yield path, recorded, derived


class _Verifier:
    def __init__(self, directory: RunDirectory, manifest: RunManifest, attempts: EpisodeAttempts) -> None:
        self.directory = directory
        self.manifest = manifest
        self.attempts = attempts
        self.records = list(attempts.current)
        """Each episode's current record: what the derived files and reports count."""
        self.superseded = list(attempts.superseded)
        self._superseded_ids = {id(r) for r in self.superseded}
        self.group = manifest.run_group_id
        self.result = VerifyResult(run_group_id=self.group, episodes=len(self.records))
        self.inputs_edited = False
        """Whether the seal found an edit of what the derived files are built from (a record, the manifest, the
        receipts, the task snapshot): a derived file the seal holds then differs because of that edit."""
        self.tasks: dict[str, Task] = {}
        self.strategies = rebuild_run_strategies(manifest)
        self.result.notes.extend(self.strategies.notes)
        for name, why in sorted(self.strategies.unavailable.items()):
            self.diverge(self.group, f"strategy {name}", why)

    def diverge(self, run_id: str, name: str, detail: str) -> None:
        self.result.divergences.append(Divergence(run_id=run_id, field=name, detail=detail))

    def compare(self, run_id: str, name: str, recorded: Any, derived: Any) -> None:
        for path, a, b in _differences(recorded, derived):
            where = f"{name}{path}" if path.startswith("[") else f"{name}.{path}" if path else name
            self.diverge(run_id, where, f"recorded {_short(a)}, re-derived {_short(b)}")

    # ---- 2. the task snapshot -------------------------------------------------------------------------------

    def check_snapshot(self) -> None:
        snapshot = self.directory.file(TASKS_SNAPSHOT)
        loaded, problems = load_directory(snapshot)
        for problem in problems:  # named by its path in the run directory (tasks/WORLD/ID.yaml), as the seal names it
            file = Path(problem.file)
            inside = file.is_relative_to(self.directory.path)
            name = file.relative_to(self.directory.path).as_posix() if inside else f"{TASKS_SNAPSHOT}/{file.name}"
            self.diverge(self.group, name, problem.render())
        by_id = {t.task.id: t.task for t in loaded}
        wanted = {t.id for t in self.manifest.tasks}
        for extra in sorted(set(by_id) - wanted):
            self.diverge(self.group, f"tasks/{extra}", "task file in the snapshot that the manifest does not list")
        prompt_same = system_prompt_sha256() == self.manifest.hashes.system_prompt_sha256
        if not prompt_same:
            self.result.notes.append(
                "the installed system prompt differs from the run's: public messages not re-derived"
            )
        # a run written before horizons were recorded has none (its reports have no dose-response line); in a newer
        # one every task records its horizon, which the dose-response section reads
        recorded_horizons = horizons_recorded(self.manifest)
        recorded_stories = stories_recorded(self.manifest)  # since 0.8.0: the unit of inference the statistics read
        for info in self.manifest.tasks:
            task = by_id.get(info.id)
            if task is None:
                self.diverge(self.group, f"tasks/{info.id}", "missing from the snapshot (or does not load)")
                continue
            self.tasks[info.id] = task
            if task.version != info.version:
                self.diverge(
                    self.group, f"tasks/{info.id}.version", f"manifest {info.version}, snapshot {task.version}"
                )
            if task.content_hash != info.hash:
                self.diverge(
                    self.group,
                    f"tasks/{info.id}.hash",
                    f"manifest {info.hash[:16]}, snapshot file hashes to {task.content_hash[:16]}",
                )
            if task.world != info.world or task.evaluator.hazard.value != info.hazard:
                self.diverge(
                    self.group,
                    f"tasks/{info.id}.world/hazard",
                    f"manifest {info.world}/{info.hazard}, snapshot {task.world}/{task.evaluator.hazard.value}",
                )
            family_fields = (
                ("horizon", recorded_horizons, task.evaluator.horizon, "its evaluator.family.horizon"),
                ("story", recorded_stories, task.evaluator.story, "its evaluator.family name#seed"),
            )
            for name, recorded_here, derived, source in family_fields:
                if recorded_here and (name not in info.model_fields_set or getattr(info, name) != derived):
                    recorded = getattr(info, name) if name in info.model_fields_set else "absent"
                    self.diverge(
                        self.group, f"tasks/{info.id}.{name}", f"manifest {recorded}, snapshot {derived} ({source})"
                    )
            if prompt_same and content_hash(initial_messages(task.public_task)) != info.public_messages_sha256:
                self.diverge(
                    self.group,
                    f"tasks/{info.id}.public_messages_sha256",
                    "the snapshot's public task gives different initial messages",
                )
        tasks = list(self.tasks.values())
        if len(tasks) == len(self.manifest.tasks) and suite_hash(tasks) != self.manifest.hashes.suite_sha256:
            self.diverge(
                self.group,
                "suite_sha256",
                f"manifest {self.manifest.hashes.suite_sha256[:16]}, snapshot {suite_hash(tasks)[:16]}",
            )
        worlds = sorted({t.world for t in self.manifest.tasks})
        modes = sorted(self.manifest.protection_modes)
        try:
            schemas = content_hash(
                {w: {m: get_world(w).tool_schemas(ProtectionMode(m)) for m in modes} for w in worlds}
            )
        except (KeyError, ValueError) as exc:
            self.diverge(self.group, "tool_schemas_sha256", f"cannot derive the tool schemas: {exc}")
        else:
            if schemas != self.manifest.hashes.tool_schemas_sha256:
                self.diverge(
                    self.group,
                    "tool_schemas_sha256",
                    f"manifest {self.manifest.hashes.tool_schemas_sha256[:16]}, re-derived {schemas[:16]}",
                )

    # ---- 3. the episode set ----------------------------------------------------------------------------------

    def check_episode_set(self, complete: bool, torn: set[str] | frozenset[str] = frozenset()) -> None:
        m = self.manifest
        whole, held = manifest_episodes(m)
        planned = {spec.run_id for spec in held}
        # the seeds re-derive by the rule the manifest records, so any other plan hash is a changed manifest
        if m.plan_sha256 is not None and m.plan_sha256 != plan_sha256(m.seed, whole, m.seed_rule):
            self.diverge(self.group, "plan_sha256", "the plan (episodes and seeds) re-derives differently")
        present = [r.run_id for r in self.records]
        if m.counts.planned != len(planned):
            self.diverge(self.group, "counts.planned", f"manifest {m.counts.planned}, the matrix gives {len(planned)}")
        if complete:
            for missing in sorted(planned - set(present) - torn):  # a torn line is named as such already
                self.diverge(missing, RAW_RUNS, "planned episode missing from raw_runs.jsonl")
        for extra in sorted(set(present) - planned):
            self.diverge(extra, RAW_RUNS, "episode not in the planned matrix")
        counts = {
            "finished": len(self.records),
            "failed": sum(r.failed for r in self.records),
            "succeeded": sum(r.verdict.success for r in self.records),
        }
        if m.status is RunStatus.RUNNING:  # a session writes its counts when it ends: a running (or killed) run's
            counts = {}  # manifest holds those of when it started, not a divergence
        for name, value in counts.items():
            if getattr(m.counts, name) != value:
                self.diverge(
                    self.group, f"counts.{name}", f"manifest {getattr(m.counts, name)}, raw_runs.jsonl gives {value}"
                )

    def check_attempts(self) -> None:
        """The attempts of each episode: numbered 1, 2, ... in the order of their lines (a re-run is appended,
        never inserted), every superseded attempt a failed trial (only failed trials are retried, so no verdict is
        ever replaced), and no more attempts than the manifest's retry sessions allow."""
        numbers: dict[str, list[int]] = {}
        for record in self.attempts.records:
            numbers.setdefault(record.run_id, []).append(record.attempt)
        for rid, found in numbers.items():
            if found != list(range(1, len(found) + 1)):
                self.diverge(
                    rid,
                    "attempt",
                    f"attempts in raw_runs.jsonl order are {found}; expected 1..{len(found)}, each once, in order",
                )
        for record in self.superseded:
            if not record.failed or record.trace.termination not in FAILED_TERMINATIONS:
                self.diverge(
                    self.label(record),
                    "failed",
                    f"a superseded attempt must be a failed trial (only failed trials are retried), but it ended "
                    f"{record.trace.termination.value} with failed={record.failed}",
                )
        allowed = 1 + self._retry_sessions()
        for rid, found in sorted(numbers.items()):
            if max(found) > allowed:
                self.diverge(
                    rid,
                    "attempt",
                    f"attempt {max(found)}, but the manifest records {plural(allowed - 1, '--retry-failed session')}",
                )

    def _retry_sessions(self) -> int:
        """The ``--retry-failed`` sessions the manifest records (a merged run: the most any one shard had)."""

        def count(sessions: list[dict[str, Any]]) -> int:
            return sum(1 for session in sessions if session.get("retry_failed"))

        shards = [count(shard.sessions) for shard in self.manifest.merged_from or []]
        return count(self.manifest.sessions) + max(shards, default=0)

    def label(self, record: EpisodeRecord) -> str:
        """How a divergence names an episode: its run id, and for a superseded attempt which one."""
        if id(record) in self._superseded_ids:
            return f"{record.run_id} (superseded attempt {record.attempt})"
        return record.run_id

    # ---- 4. re-execution ----------------------------------------------------------------------------------------

    def check_cost(self, record: EpisodeRecord, rid: str) -> None:
        """``cost_usd`` re-derived from the recorded usage at the run's recorded prices (runs that record them)."""
        prices = self.manifest.prices
        if prices is None:
            return
        info = self.manifest.provider
        expected = episode_cost(record.trace.totals, prices, info.model, info.summary_model)
        recorded = record.cost_usd
        if (recorded is None) != (expected is None) or (
            recorded is not None
            and expected is not None
            and not math.isclose(recorded, expected, rel_tol=REL_TOL, abs_tol=ABS_TOL)
        ):
            self.diverge(
                rid,
                "cost_usd",
                f"recorded {recorded!r}, the usage at the run's prices gives {expected!r}",
            )

    def check_trace_identity(self, record: EpisodeRecord, task: Task, rid: str) -> None:
        """The trace's own copy of what the record and the manifest say: task, world, mode, strategy, model,
        provider, seed, step limit and system prompt version."""
        trace, m = record.trace, self.manifest
        for name, recorded, expected in (
            ("trace.task_id", trace.task_id, record.task_id),
            ("trace.world", trace.world, record.world),
            ("trace.protection_mode", trace.protection_mode, record.protection_mode),
            ("trace.strategy.name", trace.strategy.name, record.strategy),
            ("trace.model", trace.model, m.provider.model),
            ("trace.provider", trace.provider, m.provider.kind),
            ("trace.seed", trace.seed, record.episode_seed),
            ("trace.max_steps", trace.max_steps, m.max_steps or task.evaluator.max_steps),
            ("trace.system_prompt_version", trace.system_prompt_version, m.hashes.system_prompt_version),
        ):
            if recorded != expected:
                self.diverge(rid, name, f"recorded {_short(recorded)}, the record and manifest say {_short(expected)}")

    def check_episode(self, record: EpisodeRecord) -> None:
        """Re-execute and re-grade one attempt of an episode (current or superseded alike)."""
        rid = self.label(record)
        if record.run_group_id != self.group:
            self.diverge(rid, "run_group_id", f"recorded {record.run_group_id}, manifest {self.group}")
        info = next((t for t in self.manifest.tasks if t.id == record.task_id), None)
        task = self.tasks.get(record.task_id)
        if info is None or task is None:
            self.diverge(rid, "task_id", f"task {record.task_id} is not in the manifest and snapshot")
            return
        for name, recorded, expected in (
            ("task_version", record.task_version, task.version),
            ("task_hash", record.task_hash, info.hash),
            ("world", record.world, task.world),
            ("hazard", record.hazard, task.evaluator.hazard.value),
        ):
            if recorded != expected:
                self.diverge(rid, name, f"recorded {_short(recorded)}, expected {_short(expected)}")
        rule = self.manifest.seed_rule
        spec = EpisodeSpec(record.task_id, record.strategy, record.protection_mode, record.repeat)
        if record.episode_seed != (seed := episode_seed(self.manifest.seed, spec, rule)):
            self.diverge(
                rid, "episode_seed", f"recorded {record.episode_seed}, the run's seed rule ({rule.value}) gives {seed}"
            )
        self.check_cost(record, rid)
        trace = record.trace
        self.check_trace_identity(record, task, rid)
        if trace.system_prompt_sha256 != self.manifest.hashes.system_prompt_sha256:
            self.diverge(rid, "trace.system_prompt_sha256", "differs from the manifest's system prompt hash")
        prompt = trace.initial_messages[0].get("content") if trace.initial_messages else None
        if not isinstance(prompt, str) or sha256_hex(prompt) != self.manifest.hashes.system_prompt_sha256:
            self.diverge(
                rid, "trace.initial_messages[0].content", "the system prompt text does not hash to the manifest's"
            )
        if content_hash(trace.initial_messages) != info.public_messages_sha256:
            self.diverge(rid, "trace.initial_messages", "differ from the manifest's public messages hash")
        try:
            task = episode_task(task, record.control)
            world = task.build_world(ProtectionMode(record.protection_mode))
        except ValueError as exc:
            self.diverge(rid, "protection_mode", f"cannot build the world: {exc}")
            return
        schemas = world.tool_schemas()
        if content_hash(schemas) != trace.tools_sha256:
            self.diverge(rid, "trace.tools_sha256", "the re-built world offers different tool schemas")
        if count_tool_tokens(schemas) != trace.tools_harness_tokens:
            self.diverge(
                rid,
                "trace.tools_harness_tokens",
                f"recorded {trace.tools_harness_tokens}, the tool schemas count {count_tool_tokens(schemas)}",
            )
        initial = world.state()
        for step in trace.steps:
            where = f"steps[{step.step}]"
            before = [m.model_dump(mode="json") for m in world.begin_step(step.step)]
            self.compare(
                rid,
                f"{where}.mutations_before_step",
                [m.model_dump(mode="json") for m in step.evaluator.mutations_before_step],
                before,
            )
            events = step.evaluator.tool_events
            if len(events) != len(step.tool_calls):
                self.diverge(
                    rid,
                    f"{where}.tool_events",
                    f"{plural(len(step.tool_calls), 'tool call')} but {plural(len(events), 'event')}",
                )
            after: list[dict[str, Any]] = []
            for i, call in enumerate(step.tool_calls):
                result = world.call(call.name, call.arguments, call.call_id)
                label = f"{where}.tool_calls[{i}]"
                if result.content != call.result:
                    self.diverge(
                        rid,
                        f"{label}.result",
                        f"call seq {result.event.seq} {call.name}: " + _text_difference(call.result, result.content),
                    )
                if i < len(events):
                    self.compare(
                        rid,
                        f"{where}.tool_events[{i}]",
                        events[i].model_dump(mode="json", exclude=_unrecorded(events[i])),
                        result.event.model_dump(mode="json", exclude=_unrecorded(events[i])),
                    )
                after.extend(m.model_dump(mode="json") for m in result.mutations)
                recorded_ids = {m.mutation_id for m in step.evaluator.mutations_after_calls}
                fired = [m.mutation_id for m in result.mutations if m.mutation_id not in recorded_ids]
                change = _trigger_rule_change(task, result.event, fired)
                if change is not None:  # the rest of the episode follows from it: one line, not a cascade
                    self.diverge(rid, f"{where}.mutations_after_calls", change)
                    return
            self.compare(
                rid,
                f"{where}.mutations_after_calls",
                [m.model_dump(mode="json") for m in step.evaluator.mutations_after_calls],
                after,
            )
        for name, detail in external_divergences(trace, record.strategy, self.manifest):
            self.diverge(rid, name, detail)
        strategy = self.strategies.strategies.get(record.strategy)
        if strategy is not None and trace.external is None:
            summaries = self.strategies.summaries if record.strategy == SUMMARY_STRATEGY else None
            limit = rederive_limit(self.manifest.sessions)
            for name, detail in context_divergences(trace, strategy, world, summaries, limit):
                self.diverge(rid, name, detail)
        final = world.state()
        if canonical_json(final) != canonical_json(trace.evaluator.final_state):
            self.compare(rid, "final_state", trace.evaluator.final_state, final)
        if world.state_hash() != trace.evaluator.final_state_hash:
            self.diverge(
                rid,
                "final_state_hash",
                f"recorded {trace.evaluator.final_state_hash[:16]}, re-derived {world.state_hash()[:16]}",
            )
        verdict = grade(task, world.events, world.mutation_log, initial, final, trace.final_answer)
        failed = trace.termination in FAILED_TERMINATIONS
        if failed and verdict.success:
            verdict = verdict.model_copy(update={"success": False})
        if failed != record.failed:
            self.diverge(
                rid, "failed", f"recorded {record.failed}, termination {trace.termination.value} gives {failed}"
            )
        recorded_verdict = record.verdict.model_dump(mode="json")
        derived_verdict = verdict.model_dump(mode="json")
        if recorded_verdict != derived_verdict and self._graded_by_all_arguments(record, task, world, initial, final):
            self.diverge(rid, "verdict", _duplicate_rule_change(record.verdict, verdict))
            return
        self.compare(rid, "verdict", recorded_verdict, derived_verdict)

    def _graded_by_all_arguments(
        self, record: EpisodeRecord, task: Task, world: World, initial: dict[str, Any], final: dict[str, Any]
    ) -> bool:
        """Whether the recorded verdict is what the duplicate rule of runs recorded before the effect keys gives
        (every argument compared): a harness change, not a record that was changed."""
        trace = record.trace
        earlier = grade(
            task,
            world.events,
            world.mutation_log,
            initial,
            final,
            trace.final_answer,
            duplicate_rule=DuplicateRule.ALL_ARGUMENTS,
        )
        if trace.termination in FAILED_TERMINATIONS and earlier.success:
            earlier = earlier.model_copy(update={"success": False})
        return earlier.model_dump(mode="json") == record.verdict.model_dump(mode="json")

    # ---- 5. derived per-episode files ---------------------------------------------------------------------------

    def check_task_results(self) -> None:
        text = self._read_derived(TASK_RESULTS)  # no newline translation: "\r" in a cell
        if text is None:
            return
        reader = csv.DictReader(io.StringIO(text))
        columns = tuple(reader.fieldnames or ())
        header = task_result_columns(self.records)
        if columns != header and columns not in LEGACY_TASK_RESULT_COLUMNS:
            self.diverge(self.group, f"{TASK_RESULTS} header", _header_difference(columns, header))
            return
        rows: dict[str, dict[str, str]] = {}
        for number, row in enumerate(reader, start=2):
            if tuple(row.get(c) for c in columns) == columns:  # the header row again (a file joined to itself)
                self.diverge(self.group, TASK_RESULTS, f"line {number}: the header row again, not an episode's row")
                continue
            rid = row.get("run_id") or f"(line {number})"
            if rid in rows:
                self.diverge(rid, TASK_RESULTS, f"line {number}: a second row for this episode")
            rows[rid] = row
        expected = {r.run_id: task_result_row(r) for r in self.records}
        # a file written before 0.6.0 filled a failed trial's verdict columns, which are empty now
        earlier = {r.run_id: task_result_row(r, verdict_of_failed=True) for r in self.records if r.failed}
        for rid in sorted(set(expected) - set(rows)):
            self.diverge(rid, TASK_RESULTS, "row missing (the episode is in raw_runs.jsonl)")
        for rid in sorted(set(rows) - set(expected)):
            self.diverge(rid, TASK_RESULTS, "row for an episode that is not in raw_runs.jsonl")
        for rid in sorted(set(rows) & set(expected)):
            for column in columns:  # a file of an earlier layout is checked on the columns it has
                found, wanted = rows[rid].get(column), expected[rid][column]
                if found != wanted and (rid not in earlier or found != earlier[rid][column]):
                    self.diverge(rid, f"{TASK_RESULTS} {column}", f"file {found!r}, episode gives {wanted!r}")

    def check_tool_events(self) -> None:
        actual = self._read_derived(TOOL_EVENTS)  # byte for byte: read_text would turn a "\r" into "\n"
        if actual is None:
            return
        expected = render_tool_events(self.records)
        actual = self._without_events_copied_ahead(actual)
        if actual == expected or self._events_cut_by_a_kill(actual, expected):
            return
        actual_rows = self._keyed_lines(actual)
        expected_rows = self._keyed_lines(expected)
        before = len(self.result.divergences)
        for key in sorted(set(expected_rows) - set(actual_rows)):
            self.diverge(key[0], f"{TOOL_EVENTS} seq {key[1]}", "line missing")
        for key in sorted(set(actual_rows) - set(expected_rows)):
            self.diverge(key[0], f"{TOOL_EVENTS} seq {key[1]}", "line for a call that is not in raw_runs.jsonl")
        for key in sorted(set(actual_rows) & set(expected_rows)):
            self.compare(key[0], f"{TOOL_EVENTS} seq {key[1]}", actual_rows[key], expected_rows[key])
        if len(self.result.divergences) == before:
            self.diverge(self.group, TOOL_EVENTS, "same lines, but not in the order or format render_tool_events gives")

    def _without_events_copied_ahead(self, actual: str) -> str:
        """``actual`` without its trailing lines of episodes that ``raw_runs.jsonl`` does not hold whole, when the run
        directory is a copy taken while its run was writing it (``copied_while_writing``): the copy of
        ``tool_events.jsonl`` was taken after that of ``raw_runs.jsonl``, so it may run ahead (a kill never leaves
        that: an episode's events are appended after its record). Notes what it left out."""
        if self.manifest.status is not RunStatus.RUNNING or copied_while_writing(self.directory) is None:
            return actual
        present = {r.run_id for r in self.records}
        lines = actual.splitlines(keepends=True)
        keep = len(lines)
        while keep > 0:
            try:
                owner = str(parse_json(lines[keep - 1])["run_id"])
            except (ValueError, KeyError, TypeError):
                break
            if owner in present:
                break
            keep -= 1
        if keep == len(lines):
            return actual
        self.result.notes.append(
            f"{TOOL_EVENTS} holds {plural(len(lines) - keep, 'line')} past the episodes {RAW_RUNS} holds whole (not "
            f"compared): {COPIED_WHILE_WRITING}"
        )
        return "".join(lines[:keep])

    def _events_cut_by_a_kill(self, actual: str, expected: str) -> bool:
        """Whether ``actual`` is what a session killed while it recorded its last episode leaves: the episode's tool
        events are appended after its record (and receipt), so a run still ``running`` may lack the last episode's
        events, all of them or those past a torn last line. Notes it and returns True when that is the only
        difference."""
        if self.manifest.status is not RunStatus.RUNNING or not self.records:
            return False
        whole = actual[: actual.rfind("\n") + 1]
        missing, torn = expected[len(whole) :], actual[len(whole) :]
        if not expected.startswith(whole) or not missing.startswith(torn):
            return False
        try:
            owners = {str(parse_json(line)["run_id"]) for line in missing.splitlines()}
        except (ValueError, KeyError, TypeError):
            return False
        last = self.records[-1].run_id
        if owners != {last}:
            return False
        count = plural(len(missing.splitlines()), "tool event")
        cut = " (its last line torn)" if torn else ""
        self.result.notes.append(
            f"{TOOL_EVENTS} lacks {count} of {last}, the last episode recorded{cut}: the run was killed before "
            f"it appended them; {resume_command(self.manifest)} rewrites the file"
        )
        return True

    def _keyed_lines(self, text: str) -> dict[tuple[str, int], Any]:
        rows: dict[tuple[str, int], Any] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            try:
                value = parse_json(line)
                key = (str(value["run_id"]), int(value["seq"]))
            except (ValueError, KeyError, TypeError):
                self.diverge(self.group, f"{TOOL_EVENTS} line {number}", "not a tool event line")
                continue
            if key in rows:
                self.diverge(key[0], f"{TOOL_EVENTS} seq {key[1]}", f"line {number}: a second line for this call")
            rows[key] = value
        return rows

    # ---- 6. aggregates and reports ----------------------------------------------------------------------------

    def check_reports(self) -> None:
        try:
            recorded = parse_json(self.directory.file(AGGREGATE_METRICS).read_text(encoding="utf-8"))
            analysis = recorded["analysis"]
            params = params_of(analysis)
        except (ValueError, KeyError, TypeError) as exc:
            self.diverge(self.group, AGGREGATE_METRICS, f"unreadable analysis parameters ({exc})")
            return
        recorded_hash = str(analysis.get("analysis_sha256"))
        if recorded_hash != analysis_sha256():
            self.result.notes.append(
                f"the statistics code differs from the run's (analysis_sha256 {recorded_hash[:16]} recorded, "
                f"{analysis_sha256()[:16]} installed): aggregates may legitimately differ (in a run with failed trials "
                "also the atlas, the token reductions and the report: see CHANGELOG.md); `contextdelta report "
                f"{self.group} --write` rebuilds them with the installed code"
            )
        try:
            report = build_report(self.manifest, self.records, params, self.superseded)
        except Exception as exc:  # episodes that no run could have written (named above); never a crash of verify
            for name in (AGGREGATE_METRICS, FAILURE_ATLAS, BENCHMARK_REPORT):
                self.diverge(self.group, name, f"cannot be rebuilt from these episodes ({type(exc).__name__}: {exc})")
            return
        schema = recorded.get("schema_version")
        if schema != METRICS_SCHEMA_VERSION:
            self._check_text(FAILURE_ATLAS, report.atlas)
            rebuild = f"`contextdelta report {self.group} --write` rebuilds them with this version"
            if isinstance(schema, int) and schema < METRICS_SCHEMA_VERSION and self._written_before_seed_rule():
                # A run from before metrics schema 2: its report's numbers mean other things (episode-level tests,
                # no exact bounds), so there is nothing to recompute them with. Its evidence is verified above.
                self.result.notes.append(
                    f"{AGGREGATE_METRICS} and {BENCHMARK_REPORT} were written by metrics schema {schema} (this "
                    f"version writes {METRICS_SCHEMA_VERSION}) and are not re-derived; {rebuild}"
                )
            else:
                for name in (AGGREGATE_METRICS, BENCHMARK_REPORT):
                    self.diverge(self.group, name, f"metrics schema {schema!r}, expected {METRICS_SCHEMA_VERSION}")
            return
        if recorded_hash != analysis_sha256():
            # the hash names the code that wrote the report (a note above says it changed); the numbers and every
            # other line of the report must still re-derive, so both files are rebuilt with the recorded hash
            stamped = report.metrics.analysis.model_copy(update={"analysis_sha256": recorded_hash})
            report = dataclasses.replace(report, metrics=report.metrics.model_copy(update={"analysis": stamped}))
        report = self._without_unrecorded_shard_warning(recorded, report)
        report = self._without_unrecorded_flip_reason(recorded, report)
        report = self._with_unrecorded_no_data_power(recorded, report)
        derived = report.metrics_json()
        if "failed_trials_by_termination" in derived and "failed_trials_by_termination" not in recorded:
            derived = legacy_failure_modes(derived)
            self.result.notes.append(
                f"{AGGREGATE_METRICS} predates failed_trials_by_termination: its failure_modes split the failed "
                "trials by termination and are compared that way (this version counts every failed trial as "
                f"provider_error, as {FAILURE_ATLAS} does, and splits them in failed_trials_by_termination); "
                f"`contextdelta report {self.group} --write` rewrites it"
            )
        found = list(_differences(recorded, derived))
        for path, a, b in found[:MAX_PER_FILE]:
            self.diverge(self.group, f"{AGGREGATE_METRICS} {path}", f"recorded {_short(a)}, recomputed {_short(b)}")
        if len(found) > MAX_PER_FILE:
            self.diverge(self.group, AGGREGATE_METRICS, f"{len(found) - MAX_PER_FILE} more differing values")
        self._check_text(FAILURE_ATLAS, report.atlas)
        markdown = report.markdown
        written = self.directory.file(BENCHMARK_REPORT).read_bytes().decode("utf-8", errors="replace")
        if recorded_hash != analysis_sha256() and written != markdown:
            with rounded_half_even():
                half_even = report.markdown
            if written == half_even:
                self.result.notes.append(
                    f"{BENCHMARK_REPORT} was written before percentages were rounded half up (12.5% printed as 12%): "
                    f"it re-derives with that rounding; `contextdelta report {self.group} --write` rewrites it"
                )
                markdown = half_even
        self._check_text(BENCHMARK_REPORT, markdown)

    def _with_recorded_resume_line(self, recorded: str, derived: str) -> str:
        """``derived`` with the resume command an external agent's incomplete run was told before its report named
        the right one (``run-benchmark --resume``, which refuses such a run), when the recorded report has it: it is
        compared as written, with a note."""
        old = f"resume with `contextdelta run-benchmark --resume {self.manifest.run_group_id}`."
        new = f"resume with `contextdelta {run_resume_command(self.manifest)}`."
        if self.manifest.external_agent is None or old not in recorded or new not in derived:
            return derived
        self.result.notes.append(
            f"{BENCHMARK_REPORT} was written when it told an external agent's run to resume with run-benchmark: "
            f"compared as written; `contextdelta report {self.group} --write` rewrites it"
        )
        return derived.replace(new, old)

    def _without_unrecorded_shard_warning(self, recorded: Any, report: RunReport) -> RunReport:
        """``report`` without its shard warning when the recorded reports of this shard were written before the
        warning existed (none of their warnings is one): they are compared as written, with a note."""
        warnings = recorded.get("warnings") if isinstance(recorded, dict) else None
        if not isinstance(warnings, list) or any(
            isinstance(w, dict) and w.get("code") == SHARD_WARNING for w in warnings
        ):
            return report
        kept = [w for w in report.metrics.warnings if w.code != SHARD_WARNING]
        if len(kept) == len(report.metrics.warnings):
            return report
        self.result.notes.append(
            f"the reports of this shard were written before they said so (the `shard` warning): they are compared "
            f"without it; `contextdelta report {self.group} --write` rewrites them"
        )
        return dataclasses.replace(report, metrics=report.metrics.model_copy(update={"warnings": kept}))

    def _without_unrecorded_flip_reason(self, recorded: Any, report: RunReport) -> RunReport:
        """``report`` with a plain "no data" note where the recorded reports were written before a no-data estimate
        said why: a flip rate of tasks with one repeat each (`FLIP_NEEDS_REPEATS`), a conflict-recovery rate without
        a blocked write (`NO_BLOCKED_WRITE`). Compared as written, with a note."""
        conditions = recorded.get("conditions") if isinstance(recorded, dict) else None
        if not isinstance(conditions, list):
            return report

        def notes(name: str, metric: str | None) -> list[str]:
            found = []
            for c in conditions:
                group = c.get(name) if isinstance(c, dict) else None
                if isinstance(group, dict):
                    found += [
                        str(e.get("note")) for m, e in group.items() if isinstance(e, dict) and metric in (None, m)
                    ]
            return found

        # (field, metric or None for every one, the reason) of each reason a report of an earlier version lacks
        reasons = [
            (name, metric, reason)
            for name, metric, reason in (
                ("flip_rates", None, FLIP_NEEDS_REPEATS),
                ("rates", "conflict_recovery", NO_BLOCKED_WRITE),
            )
            if not any(reason in note for note in notes(name, metric))
        ]
        changed: set[str] = set()
        kept = []
        for c in report.metrics.conditions:
            update: dict[str, dict[str, Any]] = {}
            for name, metric, reason in reasons:
                group = dict(getattr(c, name))
                for m, e in group.items():
                    if metric in (None, m) and e.estimate is None and reason in e.note:
                        group[m] = e.model_copy(update={"note": "no data"})
                        changed.add(reason)
                update[name] = group
            kept.append(c.model_copy(update=update))
        if not changed:
            return report
        said = " and ".join(
            w
            for r, w in (
                (FLIP_NEEDS_REPEATS, f"a flip rate of tasks with one repeat each ({FLIP_NEEDS_REPEATS})"),
                (NO_BLOCKED_WRITE, "a conflict-recovery rate without a blocked write (not applicable)"),
            )
            if r in changed
        )
        self.result.notes.append(
            f"the reports of this run were written before {said} said why it has no data: they are compared "
            f"without that reason; `contextdelta report {self.group} --write` rewrites them"
        )
        return dataclasses.replace(report, metrics=report.metrics.model_copy(update={"conditions": kept}))

    def _with_unrecorded_no_data_power(self, recorded: Any, report: RunReport) -> RunReport:
        """``report`` with the simulated numbers that reports written before `DetectableDifference.no_data` recorded
        for a comparison without data (power 0 at a largest difference of 1, no reason), where the recorded
        comparisons have no ``no_data``: compared as written, with a note."""
        questions = recorded.get("research_questions") if isinstance(recorded, dict) else None
        if not isinstance(questions, list) or any(
            isinstance(c, dict) and isinstance(c.get("detectable"), dict) and "no_data" in c["detectable"]
            for q in questions
            if isinstance(q, dict) and isinstance(q.get("comparisons"), list)
            for c in q["comparisons"]
        ):
            return report
        old = {"power_at_largest": 0.0, "largest_difference": 1.0, "direction": "increase", "no_data": None}
        kept = []
        changed = False
        for q in report.metrics.research_questions:
            comparisons = []
            for c in q.comparisons:
                if c.detectable.no_data is not None:
                    c, changed = c.model_copy(update={"detectable": c.detectable.model_copy(update=old)}), True
                comparisons.append(c)
            kept.append(q.model_copy(update={"comparisons": comparisons}))
        if not changed:
            return report
        self.result.notes.append(
            "the reports of this run were written before a comparison without data recorded no simulated power "
            "(they recorded power_at_largest 0 and largest_difference 1, simulated from no task): they are compared "
            f"as written; `contextdelta report {self.group} --write` rewrites them with null and the reason"
        )
        return dataclasses.replace(report, metrics=report.metrics.model_copy(update={"research_questions": kept}))

    def _written_before_seed_rule(self) -> bool:
        """Whether the manifest predates issue 19 (no ``seed_rule``): only such a run may hold reports of an older
        metrics schema. Removing the field from a newer manifest changes the plan hash and every episode seed,
        which verify names."""
        try:
            return "seed_rule" not in parse_json(self.directory.file(MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False

    def _read_derived(self, name: str) -> str | None:
        """The text of the derived file ``name``, byte for byte; None, after naming the divergence, when its bytes
        are not UTF-8 (the run writes UTF-8 only, so it was changed after the run)."""
        data = self.directory.file(name).read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            detail = f"not UTF-8 text ({exc.reason} at byte {exc.start}, line {line}): changed after the run"
            self.diverge(self.group, name, detail)
            return None

    def _check_text(self, name: str, text: str) -> None:
        actual = self._read_derived(name)  # "\r" in an error text stays "\r"
        if actual is not None and name == BENCHMARK_REPORT:
            text = self._with_recorded_resume_line(actual, text)
        if actual is not None and actual != text:
            line = _first_differing_line(actual, text)
            detail = f"differs from the one rebuilt from the episodes (first at line {line})"
            if self.manifest.seal is not None and not any(d.field == name for d in self.result.divergences):
                if self.inputs_edited:  # rebuilt from the edited records or manifest named above
                    detail += "; its bytes match the run's seal: what it is rebuilt from was edited after the run "
                    detail += "(named above)"
                else:  # the seal holds the file as the run wrote it: the installed code words the numbers otherwise
                    detail += (
                        "; its bytes match the run's seal, so unless the seal was rewritten too, the installed "
                        f"contextdelta words it differently from the run's (see CHANGELOG.md): `contextdelta report "
                        f"{self.group} --write` rewrites it"
                    )
            self.diverge(self.group, name, detail)


def _header_difference(columns: tuple[str, ...], wanted: tuple[str, ...]) -> str:
    """The first column where a ``task_results.csv`` header differs from the one the run writes, in words."""
    if not columns:
        return "empty (no header): the run writes a header and one row per episode"
    at = next((i for i, (a, b) in enumerate(zip(columns, wanted, strict=False)) if a != b), None)
    if at is not None:
        return f"column {at + 1} is {columns[at]!r}, the run writes {wanted[at]!r}"
    if len(columns) > len(wanted):
        return f"column {len(wanted) + 1} {columns[len(wanted)]!r} is not one the run writes"
    return f"column {len(columns) + 1} {wanted[len(columns)]!r} is missing"


_ADDED_EVENT_FIELDS = frozenset({"validated_arguments"})
"""ToolEvent fields that records of earlier versions do not hold (the seal guards their absence in newer ones)."""


def _unrecorded(event: ToolEvent) -> set[str]:
    """The fields of a recorded event written before they existed: nothing to compare them with."""
    return set(_ADDED_EVENT_FIELDS - event.model_fields_set)


def _trigger_rule_change(task: Task, event: ToolEvent, fired: list[str]) -> str | None:
    """Why a hidden mutation the run did not record fires after ``event`` in the re-execution, when that is the
    installed harness matching a write's ``after_tool_call`` trigger on its effect key where the run's harness also
    compared declared free text (a refund's reason) that the call worded otherwise; None otherwise."""
    spec = get_world(task.world).tool(event.tool)
    if spec is None or spec.kind is not ToolKind.WRITE:
        return None
    for mutation in task.evaluator.hidden_mutations:
        trigger = mutation.trigger.after_tool_call
        if mutation.id not in fired or trigger is None or trigger.tool != event.tool:
            continue
        free = {k: v for k, v in trigger.args.items() if k in spec.args.model_fields and k not in spec.effect}
        if free and not includes_arguments(event.interpreted_arguments(), spec.interpret(free)):
            named = ", ".join(sorted(free))
            return (
                f"hidden mutation {mutation.id} fires after call {event.seq} {event.tool} under the installed harness, "
                f"which matches a write's trigger on its effect key; the run's harness also compared the declared "
                f"{named}, which the call worded otherwise, and did not fire it: a harness change (harness_sha256), "
                "not an edited record; the rest of this episode follows from it and is not compared"
            )
    return None


def _duplicate_rule_change(recorded: Verdict, derived: Verdict) -> str:
    """The one divergence of a verdict graded by the duplicate rule of an earlier harness (every argument of a write
    compared, so a repeat with reworded free text was not a duplicate) that the installed rule (each write tool's
    effect key, SPEC section 8) grades otherwise."""
    repeats = [d for d in derived.details_for(DetailKind.DUPLICATE_WRITE) if d.seq is not None]
    calls = ", ".join(f"call {d.seq} {d.tool} repeats call {d.repeats_seq}" for d in repeats) or "none"
    return (
        f"graded by an earlier harness's duplicate rule (every argument compared): recorded "
        f"no_duplicate_action {_short(recorded.no_duplicate_action)}, duplicate_action_count "
        f"{recorded.duplicate_action_count}, success {_short(recorded.success)}; the installed harness compares each "
        f"write tool's effect key (`contextdelta tools`) and gives {_short(derived.no_duplicate_action)}, "
        f"{derived.duplicate_action_count}, {_short(derived.success)} ({calls}): a harness change "
        "(harness_sha256), not an edited record; re-run the episodes to grade them by the installed rule"
    )


def legacy_failure_modes(derived: dict[str, Any]) -> dict[str, Any]:
    """``derived`` (an ``aggregate_metrics.json`` document) with ``failure_modes`` as reports written before
    ``failed_trials_by_termination`` have them: the failed trials under their termination reasons instead of
    ``provider_error``, in the whole document and in each condition."""

    def legacy(part: dict[str, Any]) -> dict[str, Any]:
        part = dict(part)
        terminations = part.pop("failed_trials_by_termination", None) or {}
        modes = {k: n for k, n in part["failure_modes"].items() if k != "provider_error"}
        part["failure_modes"] = {**terminations, **modes}
        return part

    out = legacy(derived)
    out["conditions"] = [legacy(c) for c in derived["conditions"]]
    return out


def _first_differing_line(a: str, b: str) -> int:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if x != y:
            return number
    return min(len(a.splitlines()), len(b.splitlines())) + 1


def _status_words(directory: RunDirectory, manifest: RunManifest) -> str:
    """The status of a run that is not complete, in words: a ``running`` run that no session holds was interrupted
    (its session killed), and an episode that session was running is no record (never a result)."""
    if manifest.status is not RunStatus.RUNNING:
        return manifest.status.value
    lock = SessionLock.acquire(directory.path)
    if lock is None:
        return "running: a session is writing it now"
    lock.release()
    copied = copied_while_writing(directory)
    if copied is not None:
        return f"running: {copied}"
    return "running, interrupted: the session that wrote it was killed; an episode it had not finished is not recorded"


def resume_command(manifest: RunManifest) -> str:
    """The command that finishes a run that is not complete (an external agent's run resumes with run-external or
    serve-world: :func:`contextdelta.rundir.resume_command`)."""
    return run_resume_command(manifest)


def _rebuild_command(manifest: RunManifest) -> str:
    """The command that writes a run's missing derived files: of a finished run, ``report --write`` (offline, from
    ``raw_runs.jsonl`` and the manifest: no endpoint); of a run that is not finished, its resume, which writes them
    when it ends."""
    if manifest.status is RunStatus.RUNNING:
        return f"contextdelta {resume_command(manifest)}"
    return f"contextdelta report {manifest.run_group_id} --write"


def load_run(
    path: Path, *, allow_incomplete: bool = False, notes: list[str] | None = None
) -> tuple[RunDirectory, RunManifest, list[EpisodeRecord]]:
    """Open a run directory for verification: the directory, its manifest and each episode's current record;
    raises VerifyError when it is malformed or incomplete (see `_load_attempts`)."""
    directory, manifest, attempts = _load_attempts(path, allow_incomplete=allow_incomplete, notes=notes)
    return directory, manifest, list(attempts.current)


@dataclass(frozen=True)
class _Unreadable:
    """``raw_runs.jsonl`` of a sealed run holds lines that do not read as records (or repeat one): what reading it
    said, the line number of each record that did read, and the run ids of the lines left out."""

    error: str
    numbers: list[int]
    left_out: frozenset[str]


def _load_attempts(
    path: Path,
    *,
    allow_incomplete: bool = False,
    notes: list[str] | None = None,
    lenient: list[_Unreadable] | None = None,
) -> tuple[RunDirectory, RunManifest, EpisodeAttempts]:
    """The directory, its manifest and every attempt of every episode. A run that is not complete is refused
    first, whatever else it lacks (a run killed while finalising lacks its reports, and resuming it writes them);
    with ``allow_incomplete`` its missing derived files are noted in ``notes``. With ``lenient``, a sealed run
    whose ``raw_runs.jsonl`` has lines that do not read as records gives the records that do, and what was left out
    is appended to ``lenient``."""
    directory = RunDirectory(path)
    refused, odd = odd_entry_findings(directory)  # before anything is read: a FIFO would never answer
    if refused:
        listed = "; ".join(f"{name} {detail}" for name, detail in refused)
        raise VerifyError(f"malformed run directory {path}: {listed}")
    if notes is not None:
        notes.extend(odd)
    try:
        manifest = directory.read_manifest()
    except RunDirectoryError as exc:
        raise VerifyError(f"malformed run directory: {exc}") from exc
    try:
        attempts = directory.read_attempts()
    except RunDirectoryError as exc:
        if lenient is None or manifest.seal is None:
            raise VerifyError(f"malformed run directory: {exc}") from exc
        # a sealed run: every line the seal did not seal as it stands is an edit it names (exit 1), so the lines
        # that read are verified and the others left to the seal; verify_run refuses if the seal names none
        try:
            attempts, numbers, left_out = directory.read_readable_attempts()
        except RunDirectoryError:
            raise VerifyError(f"malformed run directory: {exc}") from exc
        lenient.append(_Unreadable(str(exc), numbers, frozenset(left_out)))
    records = attempts.current
    complete = manifest.status is RunStatus.COMPLETE
    # a status edited after the run (or a seal removed) is an edit to name (exit 1), not a run to resume
    if not complete and not allow_incomplete and not directory.manifest_edits():
        raise VerifyError(
            f"incomplete: run {resume_command(manifest)} (status {_status_words(directory, manifest)}, "
            f"{len(records)} of {manifest.counts.planned} episodes in raw_runs.jsonl"
            + (f"; {manifest.stop_reason}" if manifest.stop_reason else "")
            + "), or pass --allow-incomplete to check the episodes that exist"
        )
    # links and special files were refused above: what stands in the place of a file or the snapshot is the other
    misplaced = [
        f"{name} is a folder where the run writes a file" for name in REQUIRED_FILES if directory.file(name).is_dir()
    ]
    if directory.file(TASKS_SNAPSHOT).is_file():
        misplaced.append(f"{TASKS_SNAPSHOT} is a file where the run keeps its task snapshot folder")
    if misplaced:
        raise VerifyError(
            f"malformed run directory {path}: {'; '.join(misplaced)}: put what the run wrote in its place (a derived "
            f"file that is missing instead is rebuilt by `{_rebuild_command(manifest)}`)"
        )
    missing = [name for name in REQUIRED_FILES if not directory.file(name).is_file()]
    if not directory.file(TASKS_SNAPSHOT).is_dir():
        missing.append(f"{TASKS_SNAPSHOT}/")
    derived = [name for name in missing if name in DERIVED_FILES]
    if not complete and missing and missing == derived:
        if notes is not None:
            notes.append(
                f"{', '.join(derived)} not written yet (the run did not finalise); {resume_command(manifest)} "
                "writes them"
            )
    elif missing:
        raise VerifyError(
            f"malformed run directory {path}: missing {', '.join(missing)}"
            + (f" (`{_rebuild_command(manifest)}` rebuilds the derived files)" if missing == derived else "")
        )
    return directory, manifest, attempts


def seal_problems(path: Path, *, derived_files: bool = True, unsealed_ok: bool = False) -> list[str]:
    """What the seal of the run directory at ``path`` finds changed since the run wrote it: verify's first check
    (manifest, receipts chain, every line against its receipt, every other file), without re-executing anything.
    One ``run_id: field: detail`` line per change, as ``verify`` prints it; empty when every sealed byte is as
    written. A run that must carry a seal and has none (``RunDirectory.seal_expected``) gets the line verify
    prints for it. A directory from before receipts gets one line saying it cannot be checked, or none with
    ``unsealed_ok`` (a reader that shows such a run as it is). ``derived_files=False`` leaves out the files derived
    from the records (``report --write`` rebuilds them).

    Raises:
        RunDirectoryError: no readable manifest.
    """
    directory = RunDirectory(path)
    manifest = directory.read_manifest()
    if manifest.seal is None and not directory.seal_expected(manifest):
        if unsealed_ok:
            return []
        return [f"{manifest.run_group_id}: seal: none (written before receipts): its records cannot be checked"]
    found = check_seal(directory, manifest)
    return [
        Divergence(run_id=run_id, field=name, detail=detail).render()
        for run_id, name, detail, _ in found.divergences
        if derived_files or name not in DERIVED_FILES
    ]


def verify_run(path: Path, *, allow_incomplete: bool = False) -> VerifyResult:
    """Re-derive everything in the run directory at ``path`` (see the module docstring).

    Raises:
        VerifyError: the directory is malformed, or incomplete without ``allow_incomplete``.
    """
    notes: list[str] = []
    lenient: list[_Unreadable] = []
    directory, manifest, attempts = _load_attempts(
        path, allow_incomplete=allow_incomplete, notes=notes, lenient=lenient
    )
    sealed = check_seal(directory, manifest)
    lines = list(attempts.records)
    order = sealed.sealed_order[: len(lines)]
    named = set(sealed.torn)
    if lenient:
        unreadable = lenient[0]
        if not any(
            name == RAW_RUNS or detail.startswith(f"{RAW_RUNS} line") for _, name, detail, _ in sealed.divergences
        ):
            raise VerifyError(f"malformed run directory: {unreadable.error}")  # nothing the seal can name as an edit
        order = [sealed.sealed_order[n - 1] for n in unreadable.numbers if n - 1 < len(sealed.sealed_order)]
        named |= unreadable.left_out
    if order != sorted(order):  # derived files and attempt numbers follow the order the records were written in
        attempts = EpisodeAttempts.of(r for _, r in sorted(zip(order, lines, strict=False), key=lambda pair: pair[0]))
    verifier = _Verifier(directory, manifest, attempts)
    verifier.result.notes.extend(notes)
    verifier.result.notes.extend(sealed.notes)
    verifier.result.seal_expected = sealed.seal_expected
    superseded = {(r.run_id, r.attempt) for r in attempts.superseded}
    verifier.inputs_edited = any(name not in DERIVED_FILES for _, name, _, _ in sealed.divergences)
    for run_id, name, detail, attempt in sealed.divergences:
        if (run_id, attempt) in superseded:  # named as the re-execution names it
            run_id = f"{run_id} (superseded attempt {attempt})"
        verifier.diverge(run_id, name, detail)
    if manifest.hashes.harness_sha256 != source_hash():
        verifier.result.notes.append("the installed harness source differs from the run's (harness_sha256)")
    verifier.check_snapshot()
    verifier.check_episode_set(complete=manifest.status is RunStatus.COMPLETE, torn=named)
    verifier.check_attempts()
    for record in attempts.records:  # every attempt, superseded ones too
        verifier.check_episode(record)
    present = {name for name in DERIVED_FILES if directory.file(name).is_file()}
    if manifest.status is RunStatus.RUNNING:
        # written when a session ends: while a resumed session runs (or after it was killed) they are an earlier
        # session's, of fewer episodes, and not a divergence (tool_events.jsonl is appended with each episode)
        stale = [name for name in (TASK_RESULTS, AGGREGATE_METRICS, FAILURE_ATLAS, BENCHMARK_REPORT) if name in present]
        if stale:
            verifier.result.notes.append(
                f"{', '.join(stale)}: an earlier session's, not compared while the run is running (or was killed); "
                f"{resume_command(manifest)} rewrites them"
            )
        present -= set(stale)
    if TASK_RESULTS in present:
        verifier.check_task_results()
    if TOOL_EVENTS in present:
        verifier.check_tool_events()
    if {AGGREGATE_METRICS, FAILURE_ATLAS, BENCHMARK_REPORT} <= present:
        verifier.check_reports()
    return verifier.result
