"""One planned episode, start to record: a fresh world, the agent loop, the graders, the cost.

:func:`run_job` is what every executor runs, wherever it runs: it reads nothing but its arguments (an
:class:`EpisodeJob` is plain, picklable data), writes nothing, and returns the :class:`EpisodeRecord` that the
driver hands to the recorders.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contextdelta.agent import BudgetCheck, EpisodeTotals, EpisodeTrace, run_episode
from contextdelta.context import ContextStrategy
from contextdelta.grading import grade
from contextdelta.providers import ChatProvider, Price
from contextdelta.rundir import FAILED_TERMINATIONS, EpisodeRecord, episode_cost
from contextdelta.runner.plan import EpisodeSpec
from contextdelta.tasks import Task, episode_task
from contextdelta.worlds import ProtectionMode, World


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ`` (the run directory's timestamp format)."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class EpisodeJob:
    """Everything one episode needs besides the provider and the strategy: plain data an executor can ship."""

    run_group_id: str
    spec: EpisodeSpec
    task: Task
    seed: int
    """The episode seed sent to the provider (``runner.plan.episode_seed``)."""
    max_steps: int
    attempt: int = 1
    """The attempt this run of the episode is (above 1: a failed trial re-run by ``--retry-failed``)."""


class RunSpend:
    """What the run has spent, as a running episode's budget check sees it (``--max-cost-usd``): the recorded
    episodes' costs, which the driver keeps current (:meth:`set_recorded`; in a worker process or a Ray actor, by a
    message from the driver), plus what each episode running in this process has spent so far.

    The check runs before each step, so an episode running when the budget is reached overshoots it by at most
    the calls of the step it is in (its agent call, and a summary call with ``semantic_summary``). In one process
    (the driver's own executor) nothing else escapes it: an episode finishes and its record is counted with no
    await in between. With worker processes or Ray, an episode in another worker is seen only once the driver recorded
    it, so the run can overshoot by what episodes in other workers spend meanwhile (at most their calls in flight
    and their steps before the driver's next message)."""

    def __init__(self, recorded: float = 0.0) -> None:
        self.recorded = recorded
        self.running: dict[str, float] = {}

    def set_recorded(self, spent: float) -> None:
        """The recorded episodes' total cost (earlier sessions' included), as the driver counted it."""
        self.recorded = spent

    def total(self) -> float:
        """Recorded plus running."""
        return self.recorded + sum(self.running.values())


@dataclass(frozen=True)
class Costing:
    """Prices and the budgets: an episode's cost in USD, None when a price or a usage is unknown."""

    prices: Mapping[str, Price | None]
    """The run's prices (``RunPlan.prices``, recorded in the manifest)."""
    model: str
    summary_model: str
    max_episode_cost_usd: float | None = None
    max_cost_usd: float | None = None
    """The run's budget (``--max-cost-usd``): no model call once the run's spend (:class:`RunSpend`) reaches it."""

    def cost(self, totals: EpisodeTotals) -> float | None:
        """What the episode costs so far, provider-reported cached prompt tokens at their rate (`episode_cost`)."""
        return episode_cost(totals, self.prices, self.model, self.summary_model)

    def episode_budget(self, totals: EpisodeTotals) -> str | None:
        """The agent loop's budget check: why to stop this episode, or None."""
        if self.max_episode_cost_usd is None:
            return None
        spent = self.cost(totals)
        if spent is None and not totals.usage_complete:  # the prices are known (the plan checked): usage is not
            return (
                f"--max-episode-cost-usd ${self.max_episode_cost_usd} cannot be enforced: the endpoint reported no "
                f"token usage, so what the episode spent is unknown; {usage_fix('--max-episode-cost-usd')}"
            )
        if spent is not None and spent >= self.max_episode_cost_usd:
            return f"episode cost ${spent:.4f} reached --max-episode-cost-usd ${self.max_episode_cost_usd}"
        return None

    def run_budget(self, spend: RunSpend, run_id: str, totals: EpisodeTotals) -> str | None:
        """The agent loop's check of the run's budget before each step: why to stop this episode, or None. It
        enters this episode's cost so far into ``spend``, where the other episodes of this process see it."""
        if self.max_cost_usd is None:
            return None
        own = self.cost(totals)
        if own is None and not totals.usage_complete:  # as CostBudget: what this episode spent cannot be counted
            return (
                f"--max-cost-usd ${self.max_cost_usd} cannot be enforced: the endpoint reported no token usage, so "
                f"what the episode spent is unknown; {usage_fix('--max-cost-usd')}"
            )
        spend.running[run_id] = own or 0.0
        total = spend.total()
        if total >= self.max_cost_usd:
            return (
                f"run cost ${total:.4f} (recorded episodes and those running) reached --max-cost-usd "
                f"${self.max_cost_usd}"
            )
        return None

    def budget_check(self, spend: RunSpend | None, run_id: str) -> BudgetCheck | None:
        """The check the agent loop runs before each step: the episode's budget and the run's, None with neither
        (the loop then checks nothing)."""
        checks: list[BudgetCheck] = []
        if self.max_episode_cost_usd is not None:
            checks.append(self.episode_budget)
        if self.max_cost_usd is not None and spend is not None:
            checks.append(functools.partial(self.run_budget, spend, run_id))
        if not checks:
            return None

        def check(totals: EpisodeTotals) -> str | None:
            return next((reason for c in checks if (reason := c(totals)) is not None), None)

        return check


def usage_fix(flag: str) -> str:
    """What to do when ``flag``'s budget cannot be enforced: the endpoint reports no token usage."""
    return f"run without {flag} (a run needs no price then), or against an endpoint that reports usage"


def build_world(task: Task, spec: EpisodeSpec) -> World:
    """The fresh world an episode runs in (the one place an episode's world is made): ``task``'s, or under a
    control condition its control's (:func:`contextdelta.tasks.episode_task`)."""
    return episode_task(task, spec.control).build_world(ProtectionMode(spec.protection_mode))


async def run_job(
    job: EpisodeJob,
    provider: ChatProvider,
    strategy: ContextStrategy,
    costing: Costing,
    spend: RunSpend | None = None,
) -> EpisodeRecord:
    """Run one episode and return its graded, costed record. Model and provider failures end the episode as a
    failed trial (recorded, never a success); only a harness bug raises. ``spend`` is the run's spend that the
    run's budget (``costing.max_cost_usd``) is checked against before each step; this episode's running cost is in
    it until the episode returns (then the driver counts its record)."""
    task, spec = job.task, job.spec
    world = build_world(task, spec)
    initial = world.state()
    started = utc_now()
    clock = time.perf_counter()
    try:
        trace = await run_episode(
            task.public_task,
            world,
            provider,
            strategy,
            max_steps=job.max_steps,
            seed=job.seed,
            budget=costing.budget_check(spend, spec.run_id),
        )
    finally:
        if spend is not None:
            spend.running.pop(spec.run_id, None)
    wall_s = time.perf_counter() - clock
    return episode_record(job, trace, initial, world, started, wall_s, costing.cost(trace.totals))


def episode_record(
    job: EpisodeJob,
    trace: EpisodeTrace,
    initial: dict[str, dict[str, Any]],
    world: World,
    started: str,
    wall_s: float,
    cost_usd: float | None,
) -> EpisodeRecord:
    """Grade a finished episode (its trace and the world it ran in) and make its record: the one place every
    episode, the built-in loop's or an external agent's, becomes a record. A failed trial is never a success."""
    spec = job.spec
    task = episode_task(job.task, spec.control)  # a control episode is graded by the task's control
    verdict = grade(task, trace.tool_events(), trace.mutation_events(), initial, world.state(), trace.final_answer)
    failed = trace.termination in FAILED_TERMINATIONS
    if failed and verdict.success:
        verdict = verdict.model_copy(update={"success": False})
    return EpisodeRecord(
        run_group_id=job.run_group_id,
        run_id=spec.run_id,
        task_id=task.id,
        task_version=task.version,
        task_hash=job.task.content_hash,  # the task file's hash, also for a control episode
        world=task.world,
        hazard=task.evaluator.hazard.value,
        strategy=spec.strategy,
        protection_mode=spec.protection_mode,
        repeat=spec.repeat,
        episode_seed=job.seed,
        started_at=started,
        finished_at=utc_now(),
        wall_s=round(wall_s, 6),
        failed=failed,
        cost_usd=cost_usd,
        verdict=verdict,
        trace=trace,
        control=spec.control or None,
        attempt=job.attempt,
    )
