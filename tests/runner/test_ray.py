"""``--executor ray``: episodes on a local Ray cluster that the test starts (``ray start --head``, loopback only),
driven through the command line as a user would. Slow: one cluster for the module (a few seconds to start)."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.rundir import RAW_RUNS, RunDirectory, RunStatus
from contextdelta.runner import EXIT_INCOMPLETE
from contextdelta.testing import fetch_stats, serve_scripted
from contextdelta.verify import verify_run
from tests.runner.conftest import TASKS
from tests.runner.test_benchmark import _cli as run_cli

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

SMALL = ["order-grinder-refund", "cal-design-review", "cfg-search-ramp"]
# the test cluster: loopback only, no token (nothing but this machine can reach it)
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A two-CPU Ray head node in its own process group, stopped (the whole group) after the module."""
    port = _free_port()
    log = tmp_path_factory.mktemp("ray") / "ray.log"
    command = [str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={port}", "--num-cpus=2"]
    command += ["--node-ip-address=127.0.0.1", "--include-dashboard=false", "--disable-usage-stats", "--block"]
    with log.open("w") as out:
        head = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **RAY_ENV}, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if head.poll() is not None:
                pytest.fail(f"ray start exited with {head.returncode}: {log.read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("the Ray head node did not open its port within 120 s")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(head.pid, signal.SIGKILL)  # the head node's process group: its GCS, raylet and workers
        head.wait(timeout=30)


def _cli(*args: str) -> subprocess.Popen[str]:
    return run_cli(*args, env=RAY_ENV)


def _args(url: str, results: Path, address: str, *extra: str) -> list[str]:
    return [
        "run-benchmark",
        "--tasks",
        str(TASKS),
        "--base-url",
        url,
        "--model",
        "scripted-oracle",
        "--results-dir",
        str(results),
        "--quiet",
        "--no-store",
        "--executor",
        "ray",
        "--ray-address",
        address,
        *extra,
    ]


def test_a_ray_run_with_a_shared_rate_limit_verifies(cluster: str, tmp_path: Path) -> None:
    rpm = 900.0
    with serve_scripted("oracle", TASKS) as url:
        matrix = ["--task-ids", ",".join(SMALL), "--strategies", "full_history,last_n", "--repeats", "1"]
        process = _cli(
            *_args(url, tmp_path, cluster, *matrix, "--workers", "2", "--concurrency", "6"),
            "--requests-per-minute",
            str(rpm),
        )
        out, err = process.communicate(timeout=300)
        served = fetch_stats(url)
    assert process.returncode == 0, err
    path = Path(out.strip().splitlines()[-1])
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == 12
    execution = manifest.sessions[-1]["execution"]
    assert execution["executor"] == "ray" and execution["workers"] == 2
    assert execution["ray_address"] == cluster
    stats = execution["rate_control"]["stats"]
    assert stats["requests"] == served["requests"]
    # one second of slack for grants that reach the server late (see test_executors)
    assert served["requests"] <= 1 + math.floor((served["arrival_span_s"] + 1.0) * rpm / 60)
    result = verify_run(path)
    assert result.ok, result.lines()


def test_a_ray_run_whose_driver_is_killed_resumes_to_complete_and_verifies(cluster: str, tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, latency_ms=100) as url:
        matrix = ["--task-ids", ",".join(SMALL), "--strategies", "full_history,last_n", "--repeats", "2"]
        process = _cli(*_args(url, tmp_path, cluster, *matrix, "--workers", "2", "--concurrency", "2"))
        deadline = time.monotonic() + 180
        raw: Path | None = None
        while time.monotonic() < deadline and process.poll() is None:
            found = list(tmp_path.glob(f"*/{RAW_RUNS}"))
            if found and len(found[0].read_bytes().splitlines()) >= 2:
                raw = found[0]
                break
            time.sleep(0.05)
        assert raw is not None, f"the run never wrote two episodes: {process.communicate()[1][-2000:]}"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        manifest = RunDirectory(raw.parent).read_manifest()
        assert manifest.status is RunStatus.RUNNING
        assert manifest.counts.planned == 24
        resumed = _cli(*_args(url, tmp_path, cluster, "--resume", raw.parent.name, "--workers", "2"))
        out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    assert out.strip().splitlines()[-1] == str(raw.parent)
    final = RunDirectory(raw.parent).read_manifest()
    assert final.status is RunStatus.COMPLETE and final.counts.finished == 24
    assert [s["execution"]["executor"] for s in final.sessions if "execution" in s] == ["ray"]
    result = verify_run(raw.parent)
    assert result.ok, result.lines()


def test_a_ray_run_stops_running_episodes_at_the_run_budget(cluster: str, tmp_path: Path) -> None:
    """The actors hear the run's recorded spend: with every call far past --max-cost-usd, no episode goes on to a
    second call (before, each in flight ran to its step cap and the run ended complete)."""
    from tests.providers.conftest import RawEndpoint
    from tests.runner.test_benchmark import HUGE_USAGE_CALL

    prices = tmp_path / "prices.json"
    prices.write_text('{"raw": {"input_per_mtok": 1.0, "output_per_mtok": 1.0}}')
    with RawEndpoint([HUGE_USAGE_CALL]) as endpoint:
        args = _args(endpoint.base_url, tmp_path / "results", cluster, "--workers", "2", "--concurrency", "3")
        args[args.index("scripted-oracle")] = "raw"
        process = _cli(*args, "--price-table", str(prices), "--max-cost-usd", "0.0001", "--max-steps", "4")
        out, err = process.communicate(timeout=300)
    assert process.returncode == EXIT_INCOMPLETE, err
    path = Path(out.strip().splitlines()[-1])
    manifest = RunDirectory(path).read_manifest()
    assert (manifest.stop_reason or "").startswith("budget exhausted")
    records = RunDirectory(path).read_episodes()
    assert 0 < len(records) <= 3
    assert all(r.trace.totals.agent_calls <= 1 and r.trace.termination.value == "budget_exceeded" for r in records)
    assert endpoint.requests == sum(r.trace.totals.agent_calls for r in records)


def _actor_pids() -> list[int]:
    """The processes of the episode actors (Ray titles them ``ray::EpisodeActor``), by /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if command.startswith(b"ray::EpisodeActor"):
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the actor processes through /proc")
def test_a_ray_actor_killed_mid_run_is_restarted_and_its_episodes_run_again(cluster: str, tmp_path: Path) -> None:
    """An actor's process killed from outside (the out-of-memory killer): Ray restarts the actor and retries its
    running episodes, which nothing had recorded; the run completes with every episode once and verifies."""
    with serve_scripted("oracle", TASKS, latency_ms=100) as url:
        matrix = ["--task-ids", ",".join(SMALL), "--strategies", "full_history,last_n", "--repeats", "2"]
        process = _cli(*_args(url, tmp_path, cluster, *matrix, "--workers", "2", "--concurrency", "4"))
        deadline = time.monotonic() + 180
        killed = None
        while time.monotonic() < deadline and process.poll() is None and killed is None:
            found = list(tmp_path.glob(f"*/{RAW_RUNS}"))
            actors = _actor_pids()
            if found and found[0].read_bytes() and actors:
                killed = actors[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
        assert killed is not None, f"no actor seen with an episode written: {process.communicate()[1][-2000:]}"
        out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    path = Path(out.strip().splitlines()[-1])
    manifest = RunDirectory(path).read_manifest()
    assert manifest.status is RunStatus.COMPLETE and manifest.counts.finished == 24
    lines = (path / RAW_RUNS).read_bytes().splitlines()
    assert len(lines) == 24  # each episode recorded once: the retried ones were never recorded before
    result = verify_run(path)
    assert result.ok, result.lines()
