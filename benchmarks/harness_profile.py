"""Where the harness's CPU per model call goes: the parts of a run, each timed in the CPU of the thread it runs on.

Runs ``run-benchmark`` in this process (the cost pass of ``harness_overhead.py``: every task x every default
strategy x both modes, one repeat, concurrency 1, one process, trace store on) against the scripted server in
its own process at latency 0, with each part below wrapped in ``time.thread_time`` (the CPU of the thread that runs
it, so a wait for the server or for another thread costs it nothing), and prints each part's CPU per model call.
Parts nest: the agent step holds the provider's side of a call and the world's tool calls.

    python benchmarks/harness_profile.py

The wrapping itself costs a little (about 150,000 clock reads); the figures locate the CPU, ``harness_overhead.py``
measures it. Prints figures only.
"""

from __future__ import annotations

import collections
import functools
import inspect
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from contextdelta.testing import serve_scripted  # noqa: E402

spent: dict[str, float] = {}
"""Thread CPU per part, in the order the parts were wrapped."""
calls: collections.Counter[str] = collections.Counter()


def timed(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` with a wrapper that adds its thread CPU to ``spent[label]``."""
    function: Callable[..., Any] = getattr(owner, name)
    spent[label] = 0.0
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def waited(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return await function(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - started
                calls[label] += 1

        setattr(owner, name, waited)
    else:

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[label] += time.thread_time() - started
                calls[label] += 1

        setattr(owner, name, run)


def instrument() -> None:
    import contextdelta.agent.loop as loop
    import contextdelta.context as context
    import contextdelta.providers.openai_compat as provider
    import contextdelta.report._build as reports
    import contextdelta.rundir.recorder as recorder
    import contextdelta.store._store as store
    import contextdelta.worlds.world as world

    timed(loop._Episode, "_step", "agent step on the event loop (all below it)")
    timed(provider.OpenAIProvider, "complete", "  provider, the event loop's side of a call")
    timed(provider, "_encode", "    request body")
    timed(provider.OpenAIProvider, "_response", "    response read and redacted")
    timed(provider._IoLoop, "run", "    hand-over to the I/O thread and back")
    timed(world.World, "call", "  world tool calls")
    timed(loop, "count_message_tokens", "  harness token counts")
    timed(loop._StepDraft, "record", "  step record")
    for name in context.__all__:
        member = getattr(context, name)
        if isinstance(member, type) and "transform" in vars(member):
            timed(member, "transform", f"  strategy {name}")
    timed(provider.OpenAIProvider, "_send", "provider I/O thread: one request (aiohttp)")
    timed(recorder.RunDirectoryRecorder, "episode", "run directory: record line, receipt, appends")
    timed(store.Store, "ingest_episodes", "trace store writer thread")
    timed(reports.ReportFiles, "finish", "reports at the end")


def main() -> None:
    instrument()
    from contextdelta.cli import main as cli

    with tempfile.TemporaryDirectory() as results, serve_scripted("oracle", ROOT / "tasks", latency_ms=0) as url:
        sys.argv = ["contextdelta", "run-benchmark", "--base-url", url, "--model", "scripted-oracle"]
        sys.argv += ["--tasks", str(ROOT / "tasks"), "--results-dir", results, "--quiet"]
        sys.argv += ["--workers", "1", "--concurrency", "1", "--repeats", "1"]
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            cli()
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    model_calls = calls["  provider, the event loop's side of a call"]
    print(f"machine: {platform.platform()} | cpus={os.cpu_count()} | python {platform.python_version()}")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{model_calls} model calls; the command in this process: {cpu:.2f} s CPU, {wall:.2f} s wall (start-up in)")
    print(f"{'part':<52} {'CPU ms per model call':>22} {'times run':>10}")
    for label in spent:
        if calls[label]:
            print(f"{label:<52} {1000 * spent[label] / max(1, model_calls):>22.3f} {calls[label]:>10}")


if __name__ == "__main__":
    main()
