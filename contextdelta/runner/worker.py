"""The worker-process side of ``--workers N`` (``python -m contextdelta.runner.worker FD``; see
:mod:`contextdelta.runner.pool` for the driver side and the messages).

A worker takes its configuration from the driver's first message (never from its own disk or ``.env``), builds its
provider and strategies, runs the jobs it is sent concurrently on its own event loop, and sends each record back.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import Any

from contextdelta._collector import tuned_for_episodes
from contextdelta.runner.episode import EpisodeJob
from contextdelta.runner.execute import EpisodeRuntime, InProcessExecutor


class PipeGate:
    """The worker side of the driver's rate limiter (a :class:`~contextdelta.providers.CallGate`)."""

    def __init__(self, conn: Connection, needs_tokens: bool) -> None:
        self.conn = conn
        self.needs_tokens = needs_tokens
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._next = 0

    async def acquire(self, tokens: int) -> int:
        self._next += 1
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = future
        self.conn.send(("acquire", self._next, tokens))
        return await future

    def granted(self, ticket_id: int, generation: int) -> None:
        future = self._waiting.pop(ticket_id, None)
        if future is None or future.done():  # the attempt was cancelled meanwhile: hand the ticket straight back
            self.release(generation, None, 0)
        else:
            future.set_result(generation)

    def release(self, ticket: int, status: int | None, extra_tokens: int) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(("release", ticket, status, extra_tokens))


def worker_main(fd: int) -> None:
    """The entry point of a worker process: take the setup message, then serve jobs until ``stop`` or until the
    driver goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle; it stops the workers
    conn = Connection(fd)
    kind, path, runtime, limited = conn.recv()
    if kind != "setup":
        raise SystemExit(f"contextdelta worker: expected the setup message first, got {kind!r}")
    sys.path[:] = [*path, *(p for p in sys.path if p not in path)]
    with tuned_for_episodes():
        asyncio.run(_serve(conn, runtime, limited))


async def _serve(conn: Connection, runtime: EpisodeRuntime, limited: bool) -> None:
    loop = asyncio.get_running_loop()
    gate = PipeGate(conn, runtime.limits.tokens_per_minute is not None) if limited else None
    host = InProcessExecutor.from_runtime(runtime, gate)
    stopped = asyncio.Event()
    running: set[asyncio.Task[None]] = set()

    async def run(job_id: int, job: EpisodeJob) -> None:
        try:
            record = await host.run(job)
            record.canonical_text()  # rendered here, on this worker's core, and shipped with the record
        except Exception:
            message: tuple[Any, ...] = ("error", job_id, traceback.format_exc())
        else:
            message = ("record", job_id, record)
        with contextlib.suppress(OSError):
            conn.send(message)

    def readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                kind = message[0]
                if kind == "job":
                    task = loop.create_task(run(message[1], message[2]))
                    running.add(task)
                    task.add_done_callback(running.discard)
                elif kind == "grant" and gate is not None:
                    gate.granted(message[1], message[2])
                elif kind == "spent":
                    host.budget_spent(message[1])
                elif kind == "stop":
                    stopped.set()
        except (EOFError, OSError):  # the driver is gone: nobody to send records to
            for task in running:
                task.cancel()
            stopped.set()

    loop.add_reader(conn.fileno(), readable)
    try:
        await stopped.wait()
    finally:
        loop.remove_reader(conn.fileno())
        # episodes still running when the driver stops the worker (a Ctrl-C, a stop rule) are no longer wanted: cancel
        # them before their provider closes, or they go on calling a closed client (retry warnings, "Event loop is
        # closed" tracebacks) until the process ends
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await host.aclose()
        conn.close()


if __name__ == "__main__":
    worker_main(int(sys.argv[1]))
