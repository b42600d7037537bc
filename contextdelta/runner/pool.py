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
import contextlib
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import contextdelta
from contextdelta.providers import EndpointLimiter, LimiterStats
from contextdelta.rundir import EpisodeRecord
from contextdelta.runner.episode import EpisodeJob
from contextdelta.runner.execute import EpisodeRuntime

STOP_TIMEOUT_S = 10.0
"""How long a worker gets to close its connections after ``stop`` before it is terminated."""


class WorkerError(RuntimeError):
    """A worker process died or failed outside an episode (a harness bug, never a model failure)."""


@dataclass
class _Worker:
    name: str
    process: subprocess.Popen[bytes]
    conn: Connection
    pending: dict[int, asyncio.Future[EpisodeRecord]] = field(default_factory=dict)
    alive: bool = True


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
        self._grants: set[asyncio.Task[None]] = set()

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        package_root = str(Path(contextdelta.__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
        for number in range(self.workers):
            ours, theirs = socket.socketpair()
            process = subprocess.Popen(
                [sys.executable, "-m", "contextdelta.runner.worker", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
            theirs.close()
            conn = Connection(ours.detach())
            worker = _Worker(f"worker {number + 1} (pid {process.pid})", process, conn)
            # the sys.path lets the worker import what the driver can (plug-in strategies by module name)
            conn.send(("setup", list(sys.path), self.runtime, self.limiter is not None))
            if self._spent is not None:
                conn.send(("spent", self._spent))
            self._pool.append(worker)
            loop.add_reader(conn.fileno(), self._readable, worker)

    async def run(self, job: EpisodeJob) -> EpisodeRecord:
        if not self._pool:
            self._start()
        alive = [w for w in self._pool if w.alive]
        if not alive:
            raise WorkerError("every worker process has exited")
        worker = min(alive, key=lambda w: len(w.pending))
        self._next_id += 1
        future: asyncio.Future[EpisodeRecord] = asyncio.get_running_loop().create_future()
        worker.pending[self._next_id] = future
        worker.conn.send(("job", self._next_id, job))
        return await future

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
            future = worker.pending.pop(message[1], None)
            if future is not None and not future.done():
                if kind == "record":
                    future.set_result(message[2])
                else:
                    future.set_exception(WorkerError(f"episode failed in {worker.name}:\n{message[2]}"))
        elif kind == "acquire" and self.limiter is not None:
            task = asyncio.get_running_loop().create_task(self._grant(worker, message[1], message[2]))
            self._grants.add(task)
            task.add_done_callback(self._grants.discard)
        elif kind == "release" and self.limiter is not None:
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

    def _lost(self, worker: _Worker) -> None:
        if not worker.alive:
            return
        worker.alive = False
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(worker.conn.fileno())
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(timeout=1.0)
        error = WorkerError(f"{worker.name} exited (exit code {worker.process.returncode})")
        for future in worker.pending.values():
            if not future.done():
                future.set_exception(error)
        worker.pending.clear()

    async def aclose(self) -> None:
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
