"""Phase 2 of a run, *execute*: start episodes on an executor and hand each record to the recorders.

The driver (:func:`drive`) decides *whether* to start the next episode (stop rules, signals, a concurrency
limit); an :class:`Executor` decides *where* it runs. Records come back to the driver, and only the driver
passes them on (``on_record``), so recorders never see two threads or processes. The in-process executor runs
episodes as anyio tasks of this event loop; an executor for worker processes or a cluster implements the same
two methods and ships the (picklable) :class:`EpisodeJob` instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.lowlevel

from contextdelta.agent import TerminationReason
from contextdelta.context import ContextStrategy, StrategyDescription, StrategyServices, rebuild_strategy
from contextdelta.providers import (
    AccessRefusal,
    CallGate,
    ChatProvider,
    EndpointLimits,
    LimiterStats,
    create_provider,
    refusal_fix,
    refusal_what,
)
from contextdelta.rundir import EpisodeRecord
from contextdelta.runner.episode import Costing, EpisodeJob, RunSpend, run_job, usage_fix
from contextdelta.settings import Settings


@dataclass(frozen=True)
class ProviderSpec:
    """How to build the run's provider: what a worker process or a Ray actor builds its own from (plain data,
    picklable; the API key stays a SecretStr)."""

    kind: str
    settings: Settings
    overrides: dict[str, Any] = field(default_factory=dict)

    def build(self, gate: CallGate | None = None) -> ChatProvider:
        """A new provider (its own HTTP connection pool, for the event loop that first uses it)."""
        extra: dict[str, Any] = {"gate": gate} if gate is not None else {}
        return create_provider(self.settings, kind=self.kind, **self.overrides, **extra)


@dataclass(frozen=True)
class EpisodeRuntime:
    """Everything an executor needs besides the jobs, as plain picklable data: the driver ships it to every worker
    process or Ray actor, which builds its provider and strategies from it (never from its own disk)."""

    provider: ProviderSpec | None
    """None when the caller handed over a provider object (library use): episodes then run in-process only."""
    strategies: tuple[StrategyDescription, ...]
    """Each strategy as recorded in the manifest: what a worker rebuilds it from (plug-ins included)."""
    summary_model: str
    costing: Costing
    limits: EndpointLimits = field(default_factory=EndpointLimits)
    concurrency: int = 1


class WorkerError(RuntimeError):
    """A worker process or Ray actor died, or failed outside an episode: a harness problem, never a model failure.
    The driver stops the run on it (``incomplete``, the message as the stop reason; ``--resume`` continues it)."""


class Executor(Protocol):
    """Where episodes run."""

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        """Run one episode and return its record (raise only for a harness bug)."""
        ...

    async def aclose(self) -> None:
        """Release what the executor holds (connections, workers); called once, when the driver is done."""
        ...

    # Optionally ``rate_stats() -> LimiterStats | None``: what the endpoint's shared rate limiter did, valid after
    # ``aclose`` (the executors of this package have it; the manifest records it when present).
    # Optionally ``budget_spent(spent: float) -> None``: what the run's recorded episodes cost, said by the driver
    # before the first job and after each record, so that running episodes stop at ``--max-cost-usd`` (RunSpend).


class InProcessExecutor:
    """Episodes as tasks of the driver's event loop, sharing one provider (its HTTP connection pool). Also what each
    worker process and Ray actor runs inside (built there with :meth:`from_runtime`)."""

    def __init__(
        self,
        provider: ChatProvider,
        strategies: Sequence[StrategyDescription],
        summary_model: str,
        costing: Costing,
        limiter: Any = None,
    ) -> None:
        self.provider = provider
        self.costing = costing
        services = StrategyServices(summary_provider=provider, summary_model=summary_model)
        # one configured strategy per name, built from its recorded description (an executor in another process
        # does the same); each episode works on its own copy (ContextStrategy.for_episode)
        self.strategies: dict[str, ContextStrategy] = {d.name: rebuild_strategy(d, services) for d in strategies}
        self.limiter = limiter
        """The endpoint's limiter when this executor owns it (in-process runs): its stats go to the manifest."""
        self.spend = RunSpend()
        """The run's spend its episodes check ``--max-cost-usd`` against (kept current by :meth:`budget_spent`)."""

    @classmethod
    def from_runtime(cls, runtime: EpisodeRuntime, gate: CallGate | None = None) -> InProcessExecutor:
        """Build the provider and strategies from shipped configuration (in a worker process or a Ray actor)."""
        if runtime.provider is None:
            raise RuntimeError("this run's provider was handed over as an object and cannot be rebuilt in a worker")
        provider = runtime.provider.build(gate)
        return cls(provider, runtime.strategies, runtime.summary_model, runtime.costing)

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        return await run_job(job, self.provider, self.strategies[job.spec.strategy], self.costing, self.spend)

    def budget_spent(self, spent: float) -> None:
        """What the run's recorded episodes cost (the driver's :class:`CostBudget` says it after each record)."""
        self.spend.set_recorded(spent)

    async def aclose(self) -> None:
        close = getattr(self.provider, "aclose", None)
        if close is not None:
            await close()

    def rate_stats(self) -> LimiterStats | None:
        snapshot = getattr(self.limiter, "snapshot", None)
        return snapshot() if snapshot is not None else None


class StopRule(Protocol):
    """A reason to stop starting episodes (episodes in flight always finish)."""

    def observe(self, record: EpisodeRecord) -> None:
        """See one finished episode (in the order the driver receives them)."""
        ...

    def stop_reason(self) -> str | None:
        """Checked before each episode starts: why no further episode may start, or None."""
        ...


def unreported_usage(record: EpisodeRecord) -> tuple[int, str] | None:
    """(step, which call) of the first model call of ``record`` whose reply reported no token usage, or None."""
    for step in record.trace.steps:
        if any(call.usage is None for call in step.context.summary_calls):
            return step.step, "a summary call"
        if step.response is not None and step.response.usage is None:
            return step.step, "the agent's call"
    return None


class CostBudget:
    """``--max-cost-usd``: no episode starts once the run (earlier sessions included) spent the budget. Running
    episodes check it too, before each step (``Costing.run_budget``): ``on_spent`` (the executor's
    ``budget_spent``) hears the recorded total at the start and after each record.

    An episode of this session whose cost is unknown (a reply without usage) stops the run: the budget cannot count
    what it spent. That stop bounded what went uncounted (the calls of one step per running episode), so a resume
    (a session against an endpoint that now reports usage) counts the earlier sessions' unknown costs as nothing
    and goes on; their ``cost_usd`` stays empty."""

    def __init__(
        self,
        max_cost_usd: float | None,
        done: Sequence[EpisodeRecord] = (),
        on_spent: Callable[[float], None] | None = None,
        endpoint: str | None = None,
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self.endpoint = endpoint or "the default OpenAI endpoint"
        self.spent = 0.0
        self.uncounted: str | None = None
        """Why this session's spend is unknown: the episode and step whose call reported no usage (the prices are
        known: the plan checked them)."""
        self.on_spent = on_spent if max_cost_usd is not None else None
        for record in done:  # earlier sessions: their spend counts, an unknown cost stopped that session already
            self.spent += record.cost_usd or 0.0
        if self.on_spent is not None:
            self.on_spent(self.spent)

    def observe(self, record: EpisodeRecord) -> None:
        self._count(record)
        if self.on_spent is not None:
            self.on_spent(self.spent)

    def _count(self, record: EpisodeRecord) -> None:
        self.spent += record.cost_usd or 0.0
        totals = record.trace.totals
        if record.cost_usd is None and totals.agent_calls + totals.summary_calls > 0 and self.uncounted is None:
            where = unreported_usage(record)
            at = f"step {where[0]} of episode {record.run_id} ({where[1]})" if where else f"episode {record.run_id}"
            self.uncounted = f"{self.endpoint} reported no token usage for {at}"

    def stop_reason(self) -> str | None:
        if self.max_cost_usd is None:
            return None
        if self.uncounted is not None:
            fix = usage_fix("--max-cost-usd")
            return (
                f"--max-cost-usd ${self.max_cost_usd} cannot be enforced: {self.uncounted}, so what the run spent is "
                f"unknown; {fix}, then continue the run with --resume"
            )
        if self.spent >= self.max_cost_usd:
            return f"budget exhausted: spent ${self.spent:.4f} of --max-cost-usd ${self.max_cost_usd}"
        return None


class AccessRefused:
    """Stop starting episodes once the endpoint refused a call in a way no retry changes: the key (HTTP 401), its
    permission (403), the model (404) or the account's quota or credit (402, a 429 ``insufficient_quota``), the
    classification the endpoint check refuses a run with before it starts (``contextdelta.providers.access_refusal``).
    Every further episode would fail the same way; the episodes in flight finish (as failed trials), the run ends
    ``incomplete`` with the reason, and ``--resume`` continues it once the key, model or account is put right."""

    def __init__(self, endpoint: str | None, model: str, summary_model: str | None = None) -> None:
        self.endpoint = endpoint or "the default OpenAI endpoint"
        self.model = model
        self.summary_model = summary_model or model
        self.reason: str | None = None

    def observe(self, record: EpisodeRecord) -> None:
        if self.reason is not None:
            return
        for step in record.trace.steps:
            failed = step.failed_call
            if failed is None or failed.refusal is None:
                continue
            refusal = AccessRefusal(failed.refusal)
            model = self.summary_model if failed.call == "summary" else self.model
            call = "a summary call" if failed.call == "summary" else "the agent's call"
            self.reason = (
                f"{self.endpoint} {refusal_what(refusal)} (HTTP {failed.status_code}) at step {step.step} of episode "
                f"{record.run_id} ({call}, model {model!r}); no further call can succeed, so no further episode "
                f"starts: {refusal_fix(refusal, model)}, then continue the run with --resume"
            )
            return

    def stop_reason(self) -> str | None:
        return self.reason


OUTAGE_TERMINATIONS = frozenset({TerminationReason.PROVIDER_ERROR, TerminationReason.HARNESS_ERROR})
"""Failed trials that say the endpoint (or the harness) is failing, which the circuit breaker counts. A context
window overflow or a spent budget is a property of the condition measured, not an outage, and never trips it."""
BREAKER_MIN_FINISHED = 20
"""The share rule of the circuit breaker waits for this many finished episodes in the session."""


class CircuitBreaker:
    """Stop starting episodes when the endpoint looks down: ``max_consecutive`` outage failures in a row (in the
    order episodes finish), or outage failures making more than ``max_failed_share`` of this session's finished
    episodes once ``min_finished`` finished. Only this session counts, so a resume after an outage starts afresh."""

    def __init__(self, max_consecutive: int, max_failed_share: float, min_finished: int = BREAKER_MIN_FINISHED) -> None:
        self.max_consecutive = max_consecutive
        self.max_failed_share = max_failed_share
        self.min_finished = min_finished
        self.finished = 0
        self.failed = 0
        self.in_a_row = 0
        self.last_error: str | None = None

    def observe(self, record: EpisodeRecord) -> None:
        self.finished += 1
        if record.trace.termination in OUTAGE_TERMINATIONS:
            self.failed += 1
            self.in_a_row += 1
            self.last_error = record.trace.error
        else:
            self.in_a_row = 0

    def stop_reason(self) -> str | None:
        last = f"; last error: {self.last_error}" if self.last_error else ""
        if self.in_a_row >= self.max_consecutive:
            trials = "failed trial" if self.in_a_row == 1 else "failed trials"
            return f"circuit breaker: {self.in_a_row} {trials} in a row{last}"
        share = self.failed / self.finished if self.finished else 0.0
        if self.finished >= self.min_finished and share > self.max_failed_share:
            return (
                f"circuit breaker: {self.failed} of {self.finished} episodes of this session are failed trials "
                f"(more than the --max-failed-share {self.max_failed_share:g}, {100 * self.max_failed_share:g}%){last}"
            )
        return None


class WriteFailure:
    """Stop starting episodes once the run directory refused a write (a full disk, a file-size limit): the
    episodes that finish can no longer be recorded."""

    def __init__(self, problem: Callable[[], str | None]) -> None:
        self.problem = problem

    def observe(self, record: EpisodeRecord) -> None:
        """Nothing to count: the run holds the write error."""

    def stop_reason(self) -> str | None:
        return self.problem()


SIGNAL_CHECKPOINTS = 5
"""Event-loop turns the driver yields before it stops watching signals: asyncio hands a delivered signal to its
handler a turn or two later."""


async def drive(
    jobs: Sequence[EpisodeJob],
    executor: Executor,
    on_record: Callable[[EpisodeRecord], None],
    *,
    rules: Sequence[StopRule] = (),
    concurrency: int = 1,
) -> str | None:
    """Run ``jobs`` in order, at most ``concurrency`` at once, until done, a stop rule fires or SIGINT/SIGTERM
    arrives. Each record goes to every rule, then to ``on_record``. Returns why it stopped early, or None."""
    stopped: list[str] = []
    limit = max(1, min(concurrency, len(jobs)))  # the wait below takes each slot back: never more than there are jobs
    handlers = _current_handlers()
    limiter = anyio.Semaphore(limit)

    async def one(job: EpisodeJob) -> None:
        try:
            try:
                record = await executor.run(job)
            except WorkerError as exc:  # the episodes in flight are lost, unrecorded: the run stops, resumable
                stopped.append(str(exc))
                group.cancel_scope.cancel()
                return
            for rule in rules:
                rule.observe(record)
            on_record(record)
        finally:
            limiter.release()

    def fired() -> str | None:
        return next((reason for rule in rules if (reason := rule.stop_reason()) is not None), None)

    try:
        async with anyio.create_task_group() as group:

            async def watch_signals() -> None:
                try:
                    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                        async for signum in signals:
                            stopped.append(f"interrupted by {signal.Signals(signum).name}")
                            group.cancel_scope.cancel()
                            return
                except (ValueError, RuntimeError):  # not the main thread: no signal handling there
                    await anyio.sleep_forever()

            group.start_soon(watch_signals)
            for job in jobs:
                await limiter.acquire()
                reason = fired()
                if reason is not None:
                    limiter.release()
                    stopped.append(reason)
                    break
                group.start_soon(one, job)
            # wait for the episodes in flight, then stop watching signals; a few checkpoints first, so that a signal
            # that arrived with the last episode is still handed to the watcher (and reported), not dropped
            for _ in range(limit):
                await limiter.acquire()
            for _ in range(SIGNAL_CHECKPOINTS):
                await anyio.lowlevel.checkpoint()
            group.cancel_scope.cancel()
    finally:
        # the signal receiver, once closed, left SIGTERM at its default (the process dies at once, the run stays
        # `running` and nothing says so): the handlers this driver found are back while the executor closes
        _restore_handlers(handlers)
        with anyio.CancelScope(shield=True):
            await executor.aclose()
    return stopped[0] if stopped else None


_WATCHED = (signal.SIGINT, signal.SIGTERM)


def _current_handlers() -> dict[signal.Signals, Any]:
    """The handlers of SIGINT and SIGTERM now (none off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.getsignal(signum) for signum in _WATCHED}


def _restore_handlers(handlers: dict[signal.Signals, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None:  # None: a handler not installed from Python, which cannot be put back
            signal.signal(signum, handler)
