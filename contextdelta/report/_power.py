"""``contextdelta power --pilot RUN_ID --difference D``: how many tasks and repeats a planned run needs.

For every comparison of the research questions that the pilot ran, the pilot's own per-task rates of the two
conditions are the simulation model (`contextdelta.stats.PilotModel`); for each number of repeats, the fewest
tasks with which the primary test (the exact sign-flip test over tasks) reaches the target power for a difference
of ``D`` at the level of Holm's first step (alpha over the size of the question's family), and keeps it for the next
max(5, n/20) numbers of tasks (`contextdelta.stats.tasks_needed`). Where the pilot's tasks share stories (a task
family's story at several horizons) the unit is the story: the simulation draws stories (`pilot_design`) and the
plan counts tasks in whole stories.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from contextdelta.attribution import attribute_run
from contextdelta.report._conditions import BASELINE_STRATEGY
from contextdelta.report._context import MetricsContext
from contextdelta.report._controls import main_records
from contextdelta.report._format import percent, plural, table
from contextdelta.report._questions import comparisons_run
from contextdelta.report._table import EpisodeTable
from contextdelta.rundir import EpisodeRecord, RunManifest, RunStatus
from contextdelta.stats import (
    NO_PILOT_DATA,
    TARGET_POWER,
    AnalysisParams,
    pair_by_task,
    pilot_design,
    tasks_needed,
    unit_differences,
)

DEFAULT_REPEATS = (1, 2, 3, 5)
MAX_TASKS = 20_000


class PlannedComparison(BaseModel):
    """One comparison of a planned run: what the pilot showed and the tasks needed per number of repeats."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    question: str
    name: str
    metric: str
    pilot_tasks: int
    pilot_stories: int | None = Field(
        default=None, description="The pilot's stories where its tasks share them (the unit); None otherwise."
    )
    pilot_discordant_tasks: int = Field(
        description="Pilot units (tasks, or stories where tasks share them) that the primary test counts as "
        "discordant (a task with fewer episodes on one side taken on equally many per side, as the test takes it)."
    )
    mean_rate: float | None = Field(
        description="The outcome rate of either condition with the two pooled (the null); None: no data (no_data)."
    )
    largest_difference: float | None = Field(
        description="The largest difference the model can produce (all tasks switch); None: no data (no_data)."
    )
    level: float = Field(description="alpha / the number of comparisons of the question that the pilot ran.")
    tasks_needed: dict[str, int | None] = Field(
        description="Per number of repeats (keys): the fewest tasks n with the target power such that the next "
        "max(5, n/20) numbers of tasks reach it too (power is a sawtooth in n); None: more than max_tasks, beyond "
        "the largest difference, or no pilot task to simulate from (pilot_tasks 0)."
    )
    no_data: str | None = Field(
        default=None, description="Why nothing was simulated (pilot_tasks 0); None where the pilot has data."
    )


class PowerPlan(BaseModel):
    """The answer of ``contextdelta power``."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    pilot: str
    pilot_repeats: int
    difference: float
    target_power: float
    alpha: float
    datasets: int
    seed: int
    max_tasks: int
    comparisons: list[PlannedComparison]
    notes: list[str]
    story_size: int | None = Field(
        default=None,
        description="Tasks per story where the pilot's tasks share stories: the unit is then the story, and every "
        "number of tasks needed is a whole number of stories of this size; None: every task is its own unit.",
    )


def plan_run(
    manifest: RunManifest,
    records: Sequence[EpisodeRecord],
    difference: float,
    *,
    repeats: Sequence[int] = DEFAULT_REPEATS,
    params: AnalysisParams | None = None,
    target_power: float = TARGET_POWER,
    max_tasks: int = MAX_TASKS,
) -> PowerPlan:
    """Tasks needed per comparison and number of repeats to detect ``difference`` (rate scale, e.g. 0.10)."""
    ordered = sorted(main_records(records), key=lambda r: r.run_id)  # control episodes are no condition's
    table = EpisodeTable.from_records(ordered, attribute_run(ordered), manifest)
    return plan_from_table(
        manifest, table, difference, repeats=repeats, params=params, target_power=target_power, max_tasks=max_tasks
    )


def plan_from_table(
    manifest: RunManifest,
    table: EpisodeTable,
    difference: float,
    *,
    repeats: Sequence[int] = DEFAULT_REPEATS,
    params: AnalysisParams | None = None,
    target_power: float = TARGET_POWER,
    max_tasks: int = MAX_TASKS,
) -> PowerPlan:
    """`plan_run` from the pilot's episode table (its condition episodes): the comparisons, their tasks and
    their per-task estimates are the report's own (`comparisons_run`, `pair_by_task`)."""
    params = params or AnalysisParams()
    ctx = MetricsContext.build(manifest, table, params)
    rows = []
    story_size: int | None = None
    for qid, (kept, _, inputs) in comparisons_run(ctx).items():
        ran = [(name, metric, pair_by_task(*inputs[name])) for name, metric, _, _ in kept]
        for name, metric, pairs in ran:
            pilot, stories, size = pilot_design(pairs, 1)  # size: a unit's episodes per repeat (tasks in a story, or 1)
            if pairs.clusters is not None:
                story_size = size
            level = params.alpha / len(ran)
            needed: dict[str, int | None] = {}
            for r in repeats:
                if pairs.n_tasks == 0:  # nothing to simulate from: no pilot task has a value in both conditions
                    needed[str(r)] = None
                    continue
                units = tasks_needed(
                    pilot,
                    difference,
                    r * size,
                    level,
                    target_power=target_power,
                    datasets=params.power_datasets,
                    seed=params.seed,
                    max_tasks=max(1, max_tasks // size),
                )
                needed[str(r)] = None if units is None else units * size
            rows.append(
                PlannedComparison(
                    question=qid,
                    name=name,
                    metric=metric,
                    pilot_tasks=pairs.n_tasks,
                    pilot_stories=None if pairs.clusters is None else stories,
                    pilot_discordant_tasks=int((unit_differences(pairs.tested)[1] != 0).sum()),
                    mean_rate=pilot.mean_rate if pairs.n_tasks else None,
                    largest_difference=pilot.largest_difference if pairs.n_tasks else None,
                    no_data=None if pairs.n_tasks else NO_PILOT_DATA,
                    level=level,
                    tasks_needed=needed,
                )
            )
    notes = []
    if manifest.status is not RunStatus.COMPLETE:
        notes.append(
            f"the pilot is {manifest.status.value} ({manifest.counts.finished} of "
            f"{plural(manifest.counts.planned, 'episode')}): "
            "its per-task rates come from the episodes it finished, and tasks it did not reach are not in the plan"
        )
    failed = int(table.failed.sum())
    if failed:
        notes.append(
            f"the pilot has {plural(failed, 'failed trial')}: they count as failures in success and have no safety "
            "verdict, so "
            "the per-task rates of the safety metrics rest on fewer episodes (each condition's mean over its repeats "
            "with a verdict, which may be different repeats), and a task leaves a comparison only when every one of "
            "its episodes in one condition failed"
        )
    tasks = len(set(table.task_id.tolist()))
    if 0 < tasks < 5:
        notes.append(
            f"the pilot has {tasks} task{'s' if tasks > 1 else ''}: its per-task rates say little about the "
            "population of tasks a planned run draws from"
        )
    if manifest.repeats < 2:
        notes.append(
            "the pilot has one repeat per task, so it cannot show how repeats of a task vary: the model takes them "
            "as copies (as at temperature 0), and more repeats then never help; a pilot with 2 or more repeats "
            "measures it"
        )
    empty = [row.name for row in rows if row.pilot_tasks == 0]
    if empty:
        notes.append(
            f"{len(empty)} of {plural(len(rows), 'comparison')} ({', '.join(sorted(set(empty)))}) "
            f"{'has' if len(empty) == 1 else 'have'} no pilot task with a value in both conditions (every episode "
            "a failed trial, for a safety metric), so there is nothing to simulate "
            f"from: {'its' if len(empty) == 1 else 'their'} cells say no data, not a number of tasks"
        )
    if not rows:
        notes.append("the pilot ran no comparison of the research questions (a condition of each pair is missing)")
    if story_size is not None:
        notes.append(
            f"the pilot's tasks share stories (a task family tells each story at several horizons; up to {story_size} "
            "tasks in one): the primary test's unit is the story, so the simulation draws the pilot's stories (each "
            "task's outcomes from its own rates, a story's tasks swapped or switched together), and every number of "
            f"tasks below is whole stories of {plural(story_size, 'task')}"
        )
    return PowerPlan(
        pilot=manifest.run_group_id,
        pilot_repeats=manifest.repeats,
        difference=difference,
        target_power=target_power,
        alpha=params.alpha,
        datasets=params.power_datasets,
        seed=params.seed,
        max_tasks=max_tasks,
        comparisons=rows,
        notes=notes,
        story_size=story_size,
    )


def no_comparison_message(manifest: RunManifest, records: Sequence[EpisodeRecord]) -> str:
    """Why a pilot whose finished conditions form no research-question pair leaves ``power`` nothing to compute,
    and what pilot to run instead (its strategies and modes, with the other condition of a pair added)."""
    strategies, modes = list(manifest.strategies), list(manifest.protection_modes)
    finished = {(r.strategy, r.protection_mode) for r in main_records(records)}
    ran = [f"{s} / {m}" for s in strategies for m in modes if (s, m) in finished]
    other = "last_n" if BASELINE_STRATEGY in strategies else BASELINE_STRATEGY
    suggested = ",".join(dict.fromkeys([*strategies, other]))
    return (
        f"nothing to compute: the pilot has episodes of {plural(len(ran), 'condition')} ({', '.join(ran) or 'none'}), "
        "and every comparison "
        "of the research questions needs two: RQ1 a reduced strategy and full_history in one protection mode, RQ2 "
        "typed_state_digest and semantic_summary in one mode, RQ3 one strategy under both unprotected and "
        "freshness_contract. Run a pilot that holds one such pair on the tasks you plan to use, e.g. "
        f"`contextdelta run-benchmark --strategies {suggested} --protection-modes {','.join(modes)} --repeats 2 ...` "
        "(or add --protection-modes unprotected,freshness_contract), then pass it as --pilot"
    )


def no_data_message(manifest: RunManifest, plan: PowerPlan) -> str | None:
    """Why ``plan`` computed nothing although the pilot has research-question pairs: no comparison has a pilot task
    with a value in both conditions (its episodes failed trials); None when one has."""
    if not plan.comparisons or any(row.pilot_tasks for row in plan.comparisons):
        return None
    n = len(plan.comparisons)
    which = (
        f"the pilot's one comparison ({plan.comparisons[0].name})" if n == 1 else f"none of the pilot's {n} comparisons"
    )
    if manifest.external_agent is None:
        remedy = (
            f"Re-run the failed trials with `contextdelta run-benchmark --resume {manifest.run_group_id} "
            "--retry-failed` once the endpoint works, or run a new pilot"
        )
    else:  # run-external and serve-world re-run no failed trial: a new run of the agent is the pilot
        remedy = "Run the agent again into a new run (an external agent's run has no --retry-failed)"
    return (
        f"nothing to compute: {which} has {'no' if n == 1 else 'a'} task with a value in both conditions (their "
        f"episodes are failed trials, which have no verdict). {remedy}, then pass it as --pilot"
    )


def render_power_plan(plan: PowerPlan) -> str:
    """The plan as Markdown."""
    repeats = list(plan.comparisons[0].tasks_needed) if plan.comparisons else []
    lines = [
        f"# Power plan from pilot {plan.pilot}",
        "",
        f"Tasks a planned run needs so that the primary test (the exact sign-flip test over tasks) detects a "
        f"difference of {100 * plan.difference:g} percentage points with {100 * plan.target_power:g}% power, at "
        f"alpha {plan.alpha:g} over the comparisons of each research question (Holm's first step). Simulated from "
        f"the pilot's own per-task rates ({plural(plan.pilot_repeats, 'repeat')} per task; {plan.datasets:,} datasets "
        "per "
        f"evaluation, seed {plan.seed}); a difference is a share of tasks that switch entirely. The unit is the "
        "task: repeats help only as far as the pilot's repeats of a task disagree. The power of an exact test is a "
        "sawtooth in the number of tasks (one more task can lower it), so each cell is the first number of tasks n "
        "from which the next max(5, n/20) numbers of tasks also reach the target power, not merely the first that "
        "reaches it.",
        "",
    ]
    lines += [f"- note: {n}" for n in plan.notes]
    if plan.notes:
        lines.append("")

    def cell(value: int | None, row: PlannedComparison) -> str:
        if value is not None:
            return str(value)
        if row.pilot_tasks == 0:
            return "no data"
        if row.largest_difference is not None and plan.difference > row.largest_difference:
            return f"not reachable (at most {percent(row.largest_difference)} pp)"
        return f"more than {plan.max_tasks:,}"

    rows = [
        [
            c.question,
            c.name,
            f"{c.pilot_discordant_tasks} of {c.pilot_tasks}"
            if c.pilot_stories is None
            else f"{c.pilot_discordant_tasks} of {plural(c.pilot_stories, 'story', 'stories')} "
            f"({plural(c.pilot_tasks, 'task')})",
            "no data" if c.mean_rate is None else f"{percent(c.mean_rate)}% ({c.metric})",
            f"{c.level:.4f}",
            *(cell(c.tasks_needed[r], c) for r in repeats),
        ]
        for c in plan.comparisons
    ]
    header = [
        "question",
        "comparison",
        "pilot discordant tasks" if plan.story_size is None else "pilot discordant units",
        "pilot rate (both conditions pooled)",
        "test level (alpha / comparisons)",
        *(f"tasks, {plural(int(r), 'repeat')}" for r in repeats),
    ]
    return "\n".join([*lines, *table(header, rows), ""])
