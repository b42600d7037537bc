"""``--workers N``: episodes spread over N worker processes on this machine, with the same single-writer design.

Each worker is a fresh interpreter (``python -m contextdelta.runner.worker FD``, never a re-import of the caller's
main module) running its own event loop with its own provider (HTTP connection pool) and
strategies, built from the :class:`EpisodeRuntime` the driver sends it (never from its own disk or environment);
it runs the jobs it is given concurrently and sends each :class:`EpisodeRecord` back. The driver alone hands
records to the recorders, so the run directory, the trace store, resume and ``verify`` are unchanged.

With ``--max-cost-usd`` the driver sends each worker the run's recorded spend at its start and after each record;
a worker's episodes stop (``budget_exceeded``) before a step once that plus what the worker's own running episodes
spent reaches the budget. What episodes in other workers spend is seen only when their records reach the driver,
so the run can overshoot by at most what they spend meanwhile.

The endpoint's rate limiter stays in the driver: with limits set, every HTTP attempt in a worker first asks the
driver for a ticket over the worker's socket (``contextdelta.runner.worker.PipeGate``), so limits hold across
all workers together.

Messages (pickled tuples over one socket pair per worker, ``multiprocessing.connection`` framing, read by the
event loop when readable)::

    driver -> worker   ("setup", sys.path, EpisodeRuntime, limited)   first, once
                       ("job", id, EpisodeJob)   ("grant", ticket_id, generation)   ("stop",)
                       ("spent", usd)   what the run's recorded episodes cost (``--max-cost-usd`` only)
    worker -> driver   ("record", id, EpisodeRecord)   ("error", id, traceback)
                       ("acquire", ticket_id, tokens)   ("release", generation, status, extra_tokens)
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import contextdelta
from contextdelta._words import plural
from contextdelta.providers import EndpointLimiter, LimiterStats
from contextdelta.rundir import EpisodeRecord
from contextdelta.runner.episode import EpisodeJob
from contextdelta.runner.execute import EpisodeRuntime, WorkerError

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 10.0
"""How long a worker gets to close its connections after ``stop`` before it is terminated."""
LOSSES_PER_EPISODE = 2
"""How many workers may die under one episode before the run stops. A worker killed from outside (the
out-of-memory killer, a stray ``kill``) takes only its running episodes with it, which nothing has recorded yet (the
driver alone records): they start again, from their seeds, on a new worker. One that keeps dying is a problem to
report (the run stops, ``incomplete``, and can be resumed), not to retry forever."""


@dataclass
class _Job:
    job: EpisodeJob
    future: asyncio.Future[EpisodeRecord]
    losses: int = 0
    """Workers that died while running it."""


@dataclass
class _Worker:
    name: str
    process: subprocess.Popen[bytes]
    conn: Connection
    pending: dict[int, _Job] = field(default_factory=dict)
    tickets: collections.Counter[int] = field(default_factory=collections.Counter)
    """The rate limiter's grants sent to this worker and not yet released, by ticket (several grants share one):
    released for it when it dies."""
    alive: bool = True


def exit_text(code: int) -> str:
    """How a process ended, in words: ``exit code 3``, ``killed by SIGKILL``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


class WorkerPoolExecutor:
    """An :class:`~contextdelta.runner.Executor` over ``workers`` spawned processes (see the module docstring)."""

    def __init__(self, runtime: EpisodeRuntime, workers: int, limiter: EndpointLimiter | None = None) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.runtime = runtime
        self.workers = workers
        self.limiter = limiter
        self._pool: list[_Worker] = []
        self._spent: float | None = None
        self._next_id = 0
        self._spawned = 0
        self._closing = False
        self._grants: set[asyncio.Task[None]] = set()

    def _start(self) -> None:
        for _ in range(self.workers):
            self._pool.append(self._spawn())

    def _spawn(self) -> _Worker:
        """Start one worker process and send it its setup (and the run's spend, under ``--max-cost-usd``)."""
        package_root = str(Path(contextdelta.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
        ours, theirs = socket.socketpair()
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "contextdelta.runner.worker", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        conn = Connection(ours.detach())
        self._spawned += 1
        worker = _Worker(f"worker {self._spawned} (pid {process.pid})", process, conn)
        # the sys.path lets the worker import what the driver can (plug-in strategies by module name)
        conn.send(("setup", list(sys.path), self.runtime, self.limiter is not None))
        if self._spent is not None:
            conn.send(("spent", self._spent))
        asyncio.get_running_loop().add_reader(conn.fileno(), self._readable, worker)
        return worker

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        if not self._pool:
            self._start()
        alive = [w for w in self._pool if w.alive]
        if not alive:
            raise WorkerError("every worker process has exited")
        worker = min(alive, key=lambda w: len(w.pending))
        self._next_id += 1
        future: asyncio.Future[EpisodeRecord] = asyncio.get_running_loop().create_future()
        self._send_job(worker, self._next_id, _Job(job, future))
        return await future

    def _send_job(self, worker: _Worker, job_id: int, pending: _Job) -> None:
        worker.pending[job_id] = pending
        with contextlib.suppress(OSError):  # it died just now: its reader finds it, and the job moves with its others
            worker.conn.send(("job", job_id, pending.job))

    def budget_spent(self, spent: float) -> None:
        """Tell every worker what the run's recorded episodes cost (``--max-cost-usd``; see the module docstring)."""
        self._spent = spent
        for worker in self._pool:
            if worker.alive:
                with contextlib.suppress(OSError):  # a worker gone is found by its reader
                    worker.conn.send(("spent", spent))

    def _readable(self, worker: _Worker) -> None:
        try:
            while worker.conn.poll():
                self._handle(worker, worker.conn.recv())
        except (EOFError, OSError):
            self._lost(worker)

    def _handle(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "record" or kind == "error":
            pending = worker.pending.pop(message[1], None)
            if pending is not None and not pending.future.done():
                if kind == "record":
                    pending.future.set_result(message[2])
                else:
                    # a harness bug outside the episode's own error handling: the traceback to the log, one line
                    # (its last, the exception) to the stop reason
                    log.error("harness error in %s:\n%s", worker.name, message[2])
                    last = message[2].strip().splitlines()[-1] if message[2].strip() else "no traceback"
                    pending.future.set_exception(
                        WorkerError(f"harness error in {worker.name} running episode {pending.job.spec.run_id}: {last}")
                    )
        elif kind == "acquire" and self.limiter is not None:
            task = asyncio.get_running_loop().create_task(self._grant(worker, message[1], message[2]))
            self._grants.add(task)
            task.add_done_callback(self._grants.discard)
        elif kind == "release" and self.limiter is not None:
            worker.tickets[message[1]] -= 1
            self.limiter.release(message[1], message[2], message[3])

    async def _grant(self, worker: _Worker, ticket_id: int, tokens: int) -> None:
        assert self.limiter is not None
        generation = await self.limiter.acquire(tokens)
        if not worker.alive:
            self.limiter.release(generation, None, 0)
            return
        try:
            worker.conn.send(("grant", ticket_id, generation))
        except OSError:
            self.limiter.release(generation, None, 0)
        else:
            worker.tickets[generation] += 1

    def _lost(self, worker: _Worker) -> None:
        """A worker process is gone (killed, crashed, its socket closed): release what the limiter granted it, and
        start its running episodes again on a new worker, each up to :data:`LOSSES_PER_EPISODE` times."""
        if not worker.alive:
            return
        worker.alive = False
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(worker.conn.fileno())
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=1.0)
        with contextlib.suppress(OSError):
            worker.conn.close()
        if self.limiter is not None:
            for generation in worker.tickets.elements():
                self.limiter.release(generation, None, 0)
        worker.tickets.clear()
        if worker.process.returncode is None:  # its connection broke, the process lives on: end it
            why = f"{worker.name} lost its connection to the driver"
            worker.process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.wait(timeout=1.0)
        else:
            why = f"{worker.name} exited ({exit_text(worker.process.returncode)})"
        running = {i: p for i, p in worker.pending.items() if not p.future.done()}
        worker.pending.clear()
        for pending in running.values():
            pending.losses += 1
        again = {i: p for i, p in running.items() if p.losses < LOSSES_PER_EPISODE}
        for pending in running.values():
            if pending.losses >= LOSSES_PER_EPISODE:
                pending.future.set_exception(
                    WorkerError(
                        f"{why} while running episode {pending.job.spec.run_id}, {plural(pending.losses, 'worker')} "
                        "that ran it all died"
                    )
                )
        if not again or self._closing:
            for pending in again.values():
                pending.future.set_exception(WorkerError(why))
            return
        try:
            replacement = self._spawn()
        except OSError as exc:
            for pending in again.values():
                pending.future.set_exception(WorkerError(f"{why}, and no worker could replace it: {exc}"))
            return
        self._pool.append(replacement)
        log.warning("%s; its %s start again on %s", why, plural(len(again), "running episode"), replacement.name)
        for job_id, pending in again.items():
            self._send_job(replacement, job_id, pending)

    async def aclose(self) -> None:
        self._closing = True
        loop = asyncio.get_running_loop()
        for worker in self._pool:
            if worker.alive:
                with contextlib.suppress(OSError):
                    worker.conn.send(("stop",))
        for task in list(self._grants):
            task.cancel()
        for worker in self._pool:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(worker.conn.fileno())
            try:
                await asyncio.to_thread(worker.process.wait, STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                worker.process.terminate()
                await asyncio.to_thread(worker.process.wait, STOP_TIMEOUT_S)
            worker.alive = False
            worker.conn.close()

    def rate_stats(self) -> LimiterStats | None:
        return self.limiter.snapshot() if self.limiter is not None else None
