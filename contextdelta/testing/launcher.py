"""Start the scripted server for a test or a benchmark and get its base URL.

    with serve_scripted("oracle", "tasks", fail_429=2, retry_after=3) as base_url:
        provider = OpenAIProvider(base_url=base_url, model="scripted-oracle")

By default the server runs in a subprocess started exactly as a user would start it
(``python -m contextdelta.testing.server ... --port 0``), so it does not share the caller's GIL; the free
port comes from its ``ready`` line. ``in_process=True`` serves from a thread of the calling process instead
(faster to start; fine for unit tests).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from contextdelta.testing.app import PromptCacheMode, ScriptedServer
from contextdelta.testing.faults import FaultPlan
from contextdelta.testing.policies import PolicyName


class ServerStartError(RuntimeError):
    """The scripted server subprocess exited or stayed silent instead of printing its ready line."""


@contextmanager
def serve_scripted(
    policy: PolicyName | str,
    tasks_dir: str | Path,
    *,
    latency_ms: int = 0,
    faults: FaultPlan | None = None,
    in_process: bool = False,
    startup_timeout_s: float = 30.0,
    prompt_cache: PromptCacheMode | str = PromptCacheMode.OFF,
    **fault_options: Any,
) -> Iterator[str]:
    """Run a scripted server on a free loopback port for the duration of the block; yields its base URL.

    Faults come either as a :class:`FaultPlan` or as its fields by keyword (``fail_429=2``,
    ``retry_after=3``, ``fail_500="every:3"``, ``drop_connection=1``, ``slow=1, slow_ms=500``, ...).
    ``prompt_cache`` makes the server report prompt caching (`PromptCacheMode`).
    """
    if faults is not None and fault_options:
        raise TypeError("pass faults either as a FaultPlan or as keyword options, not both")
    plan = faults or FaultPlan(**fault_options)
    name = PolicyName(policy)
    if in_process:
        with ScriptedServer(name, tasks_dir, faults=plan, latency_ms=latency_ms, prompt_cache=prompt_cache) as server:
            yield server.base_url
        return
    command = [
        sys.executable,
        "-m",
        "contextdelta.testing.server",
        "--policy",
        name.value,
        "--tasks",
        str(tasks_dir),
        "--port",
        "0",
        "--latency-ms",
        str(latency_ms),
        "--prompt-cache",
        PromptCacheMode(prompt_cache).value,
        *plan.cli_args(),
    ]
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=_child_env(), close_fds=True
        )
        try:
            base_url = _await_ready(process, startup_timeout_s, stderr)
            yield base_url
        finally:
            _stop(process)


def fetch_stats(base_url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """The server's request and fault counters (``GET /scripted/stats``)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/scripted/stats", timeout=timeout_s) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _await_ready(process: subprocess.Popen[str], timeout_s: float, stderr: IO[str]) -> str:
    assert process.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = process.stdout

    def pump() -> None:  # keep draining stdout so the child can never block on a full pipe
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, name="scripted-server-stdout", daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise ServerStartError(_startup_report("did not print its ready line in time", seen, stderr)) from None
        if line is None:
            process.wait(timeout=5)
            raise ServerStartError(_startup_report(f"exited with status {process.returncode}", seen, stderr))
        seen.append(line)
        if line.startswith("ready"):
            fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
            return fields["base_url"]


def _startup_report(what: str, stdout_lines: list[str], stderr: IO[str]) -> str:
    stderr.seek(0)
    err = stderr.read()[-4000:]
    out = "".join(stdout_lines)[-2000:]
    return f"scripted server {what}.\nstdout:\n{out}\nstderr:\n{err}"


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    if process.stdout is not None:
        process.stdout.close()
