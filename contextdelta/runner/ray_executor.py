"""``--executor ray [--ray-address ADDR]``: episodes as tasks of Ray actors on a cluster (the optional ``ray`` extra).

The driver starts a local cluster for the run when no address is given (and stops it at the end), or joins an
existing one. It creates ``workers`` async actors (default: one per CPU of the cluster); each builds its own
provider and strategies from the :class:`EpisodeRuntime` the driver sends (never from its node's disk) and runs
the episodes it is given concurrently on its event loop; each :class:`EpisodeJob` carries its task. Records come
back to the driver, which alone writes the run directory and the trace store, so resume, SIGKILL safety, ``verify``
and the reports are those of any run. Actors belong to the driver's job: a killed driver takes them with it. An
actor that dies is restarted by Ray and its running episodes retried once; a second death stops the run
(``incomplete``, resumable).

With rate limits, the endpoint's :class:`EndpointLimiter` lives in one more actor that every HTTP attempt, on
any node, asks first (:class:`RayGate`), so the limits hold across the whole cluster.

Ray is imported only when this executor starts; on a remote cluster the ``contextdelta`` package itself is shipped
to the workers (``runtime_env`` ``py_modules``), so they run exactly the driver's harness source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from pathlib import Path
from typing import Any

import contextdelta
from contextdelta._collector import tuned_for_episodes
from contextdelta.providers import EndpointLimiter, EndpointLimits, LimiterStats
from contextdelta.rundir import EpisodeRecord
from contextdelta.runner.episode import EpisodeJob
from contextdelta.runner.execute import EpisodeRuntime, InProcessExecutor, WorkerError
from contextdelta.runner.pool import LOSSES_PER_EPISODE

LIMITER_MAX_CONCURRENCY = 100_000
"""Calls the limiter actor holds at once (each waiting attempt is one)."""


class RayGate:
    """An attempt's way through the limiter actor (a :class:`~contextdelta.providers.CallGate`)."""

    def __init__(self, limiter: Any, needs_tokens: bool) -> None:
        self.limiter = limiter
        self.needs_tokens = needs_tokens

    async def acquire(self, tokens: int) -> int:
        generation: int = await self.limiter.acquire.remote(tokens)
        return generation

    def release(self, ticket: int, status: int | None, extra_tokens: int) -> None:
        self.limiter.release.remote(ticket, status, extra_tokens)


class LimiterActor:
    """The endpoint's shared limiter as an async Ray actor (all its methods run on one event loop)."""

    def __init__(self, limits: EndpointLimits, concurrency: int) -> None:
        self.limiter = EndpointLimiter(limits, concurrency=concurrency)

    async def acquire(self, tokens: int) -> int:
        return await self.limiter.acquire(tokens)

    async def release(self, ticket: int, status: int | None, extra_tokens: int) -> None:
        self.limiter.release(ticket, status, extra_tokens)

    async def stats(self) -> LimiterStats:
        return self.limiter.snapshot()


class EpisodeActor:
    """One worker: an async actor that runs episodes concurrently with its own provider and strategies."""

    def __init__(self, runtime: EpisodeRuntime, limiter: Any) -> None:
        self.runtime = runtime
        self.limiter = limiter
        self.host: InProcessExecutor | None = None
        self.spent = 0.0
        self.collector = contextlib.ExitStack()  # this actor's process runs episodes until the actor ends
        self.collector.enter_context(tuned_for_episodes())

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        if self.host is None:  # built on the actor's own event loop, which owns the HTTP connection pool
            gate = RayGate(self.limiter, self.runtime.limits.tokens_per_minute is not None) if self.limiter else None
            self.host = InProcessExecutor.from_runtime(self.runtime, gate)
            self.host.budget_spent(self.spent)
        return await self.host.run(job)

    async def budget_spent(self, spent: float) -> None:
        """What the run's recorded episodes cost, from the driver (``--max-cost-usd``)."""
        self.spent = spent
        if self.host is not None:
            self.host.budget_spent(spent)

    async def close(self) -> None:
        if self.host is not None:
            await self.host.aclose()
        self.collector.close()


def _errors_to_stderr() -> None:
    """Send the cluster's error messages that Ray's driver prints (an actor died, a task is retried) to stderr. Ray
    prints them to stdout, from a thread that runs until the driver disconnects, and this command's stdout is its
    result (the run directory, as the last line). Ray's printing function is replaced at module level, where that
    thread looks it up; a Ray without it is left as it is."""
    from ray._private import worker as ray_worker

    printer = getattr(ray_worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "to_stderr", False):
        return

    def to_stderr(data: dict[str, Any], ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = to_stderr


class RayExecutor:
    """An :class:`~contextdelta.runner.Executor` on a Ray cluster (see the module docstring)."""

    def __init__(self, runtime: EpisodeRuntime, workers: int | None, address: str | None) -> None:
        self.runtime = runtime
        self.workers = workers
        self.address = address
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._limiter: Any = None
        self._connected = False
        """Whether this executor connected the driver to Ray: it then disconnects (or stops the cluster it started)."""
        self._started: asyncio.Task[None] | None = None
        self._stats: LimiterStats | None = None
        self._spent: float | None = None

    async def _start(self) -> None:
        if self.address is None:
            # a cluster started for this run serves this machine only: every Ray process on loopback, never on a
            # network interface (read by Ray when it is imported, and inherited by its processes)
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray  # the optional extra

        if not ray.is_initialized():
            options: dict[str, Any] = {
                "include_dashboard": False,
                "logging_level": logging.ERROR,
                "log_to_driver": False,
            }
            if self.address is not None:
                options["address"] = self.address
                options["runtime_env"] = {"py_modules": [str(Path(contextdelta.__file__).parent)]}
            else:  # a new cluster for this run: never one that `ray start` left recorded (perhaps long dead)
                options["address"] = "local"
            await asyncio.to_thread(ray.init, **options)
            self._connected = True
        _errors_to_stderr()
        cpus = float(ray.cluster_resources().get("CPU", 1.0))  # type: ignore[no-untyped-call]
        count = self.workers or max(1, math.floor(cpus))
        self.workers = count
        limits = self.runtime.limits
        if limits.active:
            self._limiter = (
                ray.remote(LimiterActor)
                .options(num_cpus=0, max_concurrency=LIMITER_MAX_CONCURRENCY)
                .remote(limits, self.runtime.concurrency)
            )
        per_actor = max(1, math.ceil(self.runtime.concurrency / count))
        # an actor killed from outside (the out-of-memory killer) is restarted and its running episodes sent again
        # (nothing recorded them: the driver alone records), as the local pool does (LOSSES_PER_EPISODE)
        remote = ray.remote(EpisodeActor).options(
            num_cpus=min(1.0, cpus / count),
            max_concurrency=per_actor + 1,
            max_restarts=LOSSES_PER_EPISODE - 1,
            max_task_retries=LOSSES_PER_EPISODE - 1,
        )
        self._actors = [remote.remote(self.runtime, self._limiter) for _ in range(count)]
        self._load = [0] * count
        if self._spent is not None:  # said before any job: an actor runs its calls in the order they were made
            for actor in self._actors:
                actor.budget_spent.remote(self._spent)

    def budget_spent(self, spent: float) -> None:
        """Tell every actor what the run's recorded episodes cost (``--max-cost-usd``): their running episodes stop
        once that plus the actor's own running episodes reach the budget; episodes on other actors are seen only
        when their records reach the driver, so the run can overshoot by what those spend meanwhile."""
        self._spent = spent
        for actor in self._actors:
            with contextlib.suppress(Exception):  # a dead actor is found by its next job
                actor.budget_spent.remote(spent)

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        if self._started is None:
            self._started = asyncio.ensure_future(self._start())
        await asyncio.shield(self._started)
        index = min(range(len(self._actors)), key=self._load.__getitem__)
        self._load[index] += 1
        try:
            record: EpisodeRecord = await self._actors[index].run.remote(job)
        except Exception as exc:
            if type(exc).__module__.startswith("ray"):
                raise WorkerError(f"episode {job.spec.run_id} failed on Ray: {exc}") from exc
            raise
        finally:
            self._load[index] -= 1
        return record

    async def aclose(self) -> None:
        if self._started is None:
            return
        import ray

        with contextlib.suppress(Exception):  # a failed start has nothing more to close
            await asyncio.shield(self._started)
        if self._limiter is not None:
            try:
                self._stats = await self._limiter.stats.remote()
            except Exception:  # a dead limiter actor: its stats are lost, the run's records are not
                self._stats = None
        closing = [actor.close.remote() for actor in self._actors]
        for ref in closing:
            with contextlib.suppress(Exception):  # an actor that died has nothing to close
                await ref
        for actor in [*self._actors, *([self._limiter] if self._limiter is not None else [])]:
            ray.kill(actor)
        self._actors = []
        if self._connected:  # stops a cluster started for the run; only disconnects from one given by address
            await asyncio.to_thread(ray.shutdown)

    def rate_stats(self) -> LimiterStats | None:
        return self._stats
