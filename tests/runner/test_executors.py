"""Worker processes (``--workers N``) and per-endpoint rate control, end to end over the scripted HTTP server."""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contextdelta._collector import YOUNG_THRESHOLD
from contextdelta.cli import app
from contextdelta.rundir import RunDirectory, RunStatus
from contextdelta.runner import BenchmarkError, BenchmarkRequest, run_benchmark
from contextdelta.testing import fetch_stats, serve_scripted
from contextdelta.verify import verify_run
from tests.alarm import within
from tests.runner.collector_probe import LOG
from tests.runner.conftest import TASKS

SMALL = ["order-grinder-refund", "cal-design-review", "cfg-search-ramp"]


def request(url: str, results: Path, **overrides: object) -> BenchmarkRequest:
    fields: dict[str, object] = {
        "tasks_dir": TASKS,
        "base_url": url,
        "model": "scripted-context_trusting",
        "results_dir": results,
        "task_ids": SMALL,
        "strategies": ["full_history", "last_n"],
        "protection_modes": ["unprotected"],
        "repeats": 2,
        "seed": 3,
        "concurrency": 6,
    }
    fields.update(overrides)
    return BenchmarkRequest.model_validate(fields)


def execution(path: Path) -> dict[str, Any]:
    entry: dict[str, Any] = RunDirectory(path).read_manifest().sessions[-1]["execution"]
    return entry


@pytest.mark.slow
def test_worker_processes_run_their_episodes_with_the_collector_set_for_runs(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "collector.jsonl"
    monkeypatch.setenv(LOG, str(log))  # the worker processes inherit the driver's environment
    before = gc.get_threshold()
    probe = "tests.runner.collector_probe:CollectorProbe"
    run = run_benchmark(
        request(oracle_url, tmp_path / "runs", model="scripted-oracle", workers=2, strategies=[probe], repeats=1)
    )
    assert RunDirectory(run.path).read_manifest().status is RunStatus.COMPLETE
    seen = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert seen and os.getpid() not in {s["pid"] for s in seen}  # every step ran in a worker process
    assert all(s["threshold"] == [YOUNG_THRESHOLD, *before[1:]] and s["frozen"] > 0 for s in seen)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0  # the driver's own setting is given back


@pytest.mark.slow
def test_two_worker_processes_give_the_verdicts_of_one_process_and_verify(trusting_url: str, tmp_path: Path) -> None:
    one = run_benchmark(request(trusting_url, tmp_path, workers=1))
    two = run_benchmark(request(trusting_url, tmp_path, workers=2))
    assert two.manifest.status is RunStatus.COMPLETE
    assert execution(two.path) == {"executor": "local", "workers": 2, "rate_control": None}
    assert execution(one.path)["workers"] == 1
    assert {r.run_id: r.verdict for r in two.records} == {r.run_id: r.verdict for r in one.records}
    assert verify_run(two.path).ok


@pytest.mark.slow
def test_a_requests_per_minute_limit_holds_across_two_workers(tmp_path: Path) -> None:
    rpm = 600.0  # one request every 0.1 s for the whole run, whichever worker sends it
    with serve_scripted("oracle", TASKS) as url:
        outcome = run_benchmark(
            request(url, tmp_path, model="scripted-oracle", workers=2, concurrency=6, requests_per_minute=rpm)
        )
        served = fetch_stats(url)
    assert outcome.manifest.status is RunStatus.COMPLETE
    record = execution(outcome.path)
    assert record["workers"] == 2
    stats = record["rate_control"]["stats"]
    assert stats["requests"] == served["requests"] > 20
    assert stats["waited"] > 0
    # counted at the server: N requests evenly spaced at 60/rpm seconds need (N - 1) * 60/rpm seconds to arrive;
    # slack: one second of requests, for a grant that reaches the server late on a loaded machine (unlimited, the
    # same requests arrive within about a second, several times more than allowed)
    allowed = 1 + math.floor((served["arrival_span_s"] + 1.0) * rpm / 60)
    assert served["requests"] <= allowed, (served, allowed)
    assert record["rate_control"]["limits"]["requests_per_minute"] == rpm


@pytest.mark.slow
def test_adaptive_concurrency_backs_off_on_429_across_workers_and_is_recorded(tmp_path: Path) -> None:
    with serve_scripted("oracle", TASKS, fail_429="every:5", retry_after=0) as url:
        outcome = run_benchmark(
            request(url, tmp_path, model="scripted-oracle", workers=2, concurrency=6, adaptive_concurrency=True)
        )
        served = fetch_stats(url)
    assert outcome.manifest.status is RunStatus.COMPLETE
    assert not any(r.failed for r in outcome.records)  # retried, never a failed trial
    stats = execution(outcome.path)["rate_control"]["stats"]
    assert stats["throttled"] == served["faults"]["fail_429"] > 0
    assert stats["window_cuts"] >= 1
    assert stats["window_start"] == 6 and stats["window_min"] < 6
    assert verify_run(outcome.path).ok


@pytest.mark.slow
def test_in_process_limits_are_recorded_too(oracle_url: str, tmp_path: Path) -> None:
    outcome = run_benchmark(
        request(
            oracle_url,
            tmp_path,
            model="scripted-oracle",
            task_ids=SMALL[:1],
            repeats=1,
            workers=1,
            max_concurrent_requests=1,
        )
    )
    record = execution(outcome.path)
    assert record["workers"] == 1
    assert record["rate_control"]["stats"]["requests"] == sum(len(r.trace.steps) for r in outcome.records)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "out of range"),
        (["--executor", "dask"], "--executor 'dask': choose from local, ray"),
        (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray"),
        (["--requests-per-minute", "0"], "out of range"),
        (["--task-ids", "order-grinder-refund,order-grinder-refund"], "--task-ids: a value is listed twice"),
        (["--controls", "no_mutation,no_mutation"], "--controls: a value is listed twice"),
        (["--max-concurrent-requests", "-1"], "out of range"),
        (
            ["--workers", str(4 * (os.cpu_count() or 1) + 1), "--concurrency", "100000"],
            f"this machine has {os.cpu_count() or 1} cores",
        ),
    ],
)
def test_bad_execution_flags_are_refused_before_anything_runs(
    oracle_url: str, tmp_path: Path, flags: list[str], message: str
) -> None:
    base = ["run-benchmark", "--tasks", str(TASKS), "--base-url", oracle_url, "--model", "scripted-oracle"]
    out = CliRunner().invoke(app, [*base, "--results-dir", str(tmp_path), "--quiet", "--no-store", *flags])
    assert out.exit_code == 2, out.output
    assert message in " ".join(out.output.split())
    assert not any(tmp_path.iterdir())


def test_a_provider_object_runs_in_process_whatever_the_workers(oracle_url: str, tmp_path: Path) -> None:
    from contextdelta.providers import OpenAIProvider

    provider = OpenAIProvider(model="scripted-oracle", base_url=oracle_url)
    outcome = run_benchmark(request(oracle_url, tmp_path, task_ids=SMALL[:1], repeats=1, workers=4), provider=provider)
    assert execution(outcome.path)["workers"] == 1
    again = OpenAIProvider(model="scripted-oracle", base_url=oracle_url)  # a run closes the provider it was given
    with pytest.raises(BenchmarkError, match="--executor ray needs a provider built from settings"):
        run_benchmark(request(oracle_url, tmp_path, executor="ray"), provider=again)


@pytest.mark.slow
def test_worker_processes_leave_no_connection_pool_of_the_endpoint_check_open(oracle_url: str, tmp_path: Path) -> None:
    """The provider that checked the endpoint is not the workers' own: a run closes it all the same (left open, it
    keeps an I/O thread and a connection, and aiohttp warns "Unclosed client session" on stderr)."""
    from contextdelta.runner.benchmark import run_plan
    from contextdelta.runner.prepare import plan_run
    from contextdelta.settings import load_settings

    fields = {"model": "scripted-oracle", "task_ids": SMALL[:1], "repeats": 1, "workers": 2}
    plan = plan_run(request(oracle_url, tmp_path, **fields), load_settings())
    run_plan(plan)
    assert plan.provider is not None
    assert plan.provider._io.started is False  # type: ignore[attr-defined]
    assert plan.provider._session is None  # type: ignore[attr-defined]


def worker_pids() -> list[int]:
    """The worker processes of this process's pool, by /proc (Linux: where the suite runs)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat, command = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"contextdelta.runner.worker" in command:
            found.append(int(entry.name))
    return found


class _KillAWorkerAtFirstRecord:
    """A recorder that SIGKILLs one worker process when the first record arrives (the out-of-memory killer)."""

    def __init__(self) -> None:
        self.killed: list[int] = []

    def start(self, run: object) -> None:
        pass

    def episode(self, record: object) -> None:
        if not self.killed:
            pid = worker_pids()[0]
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)

    def finish(self, run: object) -> None:
        pass


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes through /proc")
def test_a_worker_killed_mid_run_loses_nothing_its_episodes_start_again(trusting_url: str, tmp_path: Path) -> None:
    """A worker killed from outside takes only its running, unrecorded episodes: they start again on a new worker,
    and the run completes with the verdicts of a one-process run. The rate limiter's grant the dead worker held is
    given back (with one request at a time, a grant lost would stall the run)."""
    one = run_benchmark(request(trusting_url, tmp_path, workers=1))
    killer = _KillAWorkerAtFirstRecord()
    with serve_scripted("context_trusting", TASKS, latency_ms=150) as url, within(180, "running after a worker died"):
        two = run_benchmark(request(url, tmp_path, workers=2, max_concurrent_requests=1), recorders=[killer])
    assert killer.killed
    assert two.manifest.status is RunStatus.COMPLETE and two.manifest.stop_reason is None
    assert sorted(r.run_id for r in two.records) == sorted(r.run_id for r in one.records)  # each once
    assert {r.run_id: r.verdict for r in two.records} == {r.run_id: r.verdict for r in one.records}
    assert verify_run(two.path).ok


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the worker processes through /proc")
def test_workers_that_keep_dying_stop_the_run_resumably_naming_the_episode(tmp_path: Path) -> None:
    """Every worker killed as soon as it is seen: each episode gets LOSSES_PER_EPISODE workers, then the run stops,
    `incomplete`, the stop reason naming the worker, how it ended and the episode (no traceback); resume completes."""
    stop = threading.Event()

    def kill_every_worker() -> None:
        while not stop.is_set():
            for pid in worker_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            stop.wait(0.05)

    killer = threading.Thread(target=kill_every_worker, daemon=True)
    with serve_scripted("context_trusting", TASKS, latency_ms=100) as url:
        killer.start()
        try:
            with within(180, "running while every worker dies"):
                stopped = run_benchmark(request(url, tmp_path, workers=2))
        finally:
            stop.set()
            killer.join()
        assert stopped.manifest.status is RunStatus.INCOMPLETE
        reason = stopped.manifest.stop_reason or ""
        assert re.fullmatch(
            r"worker \d+ \(pid \d+\) exited \(killed by SIGKILL\) while running episode \S+, 2 workers "
            r"that ran it all died",
            reason,
        ), reason
        resumed = run_benchmark(request(url, tmp_path, workers=2, resume=str(stopped.path)))
    assert resumed.manifest.status is RunStatus.COMPLETE and len(resumed.records) == 12
    assert verify_run(resumed.path).ok


@pytest.mark.slow
def test_ctrl_c_with_workers_stops_their_episodes_quietly_and_the_run_resumes(tmp_path: Path) -> None:
    """A stopped worker closed its provider while its episodes were still running: they went on calling a closed
    client, and the terminal showed retry warnings ("Server disconnected") and "Event loop is closed" tracebacks
    after the Ctrl-C. The worker now cancels them first; the run is incomplete, quietly, and resumes to MATCH."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "CONTEXTDELTA_WORKERS": "2"}
    with serve_scripted("oracle", TASKS, latency_ms=40) as url:
        common = ["--base-url", url, "--model", "scripted-oracle", "--quiet", "--no-store"]
        command = [
            *(sys.executable, "-m", "contextdelta", "run-benchmark", "--tasks", str(TASKS)),
            *("--results-dir", str(tmp_path), "--strategies", "full_history,last_n", "--repeats", "1"),
            *("--task-ids", "order-grinder-refund,cal-design-review,cfg-search-ramp", "--concurrency", "4", *common),
        ]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            with within(120, "waiting for the first record"):
                while not any(p.read_bytes().count(b"\n") for p in tmp_path.glob("*/raw_runs.jsonl")):
                    assert process.poll() is None, process.communicate()
                    time.sleep(0.01)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == 130, err
        for noise in ("retrying", "Traceback", "Event loop is closed", "Unclosed", "destroyed but it is pending"):
            assert noise not in err, err
        (path,) = list(tmp_path.iterdir())
        resumed = subprocess.run(
            [sys.executable, "-m", "contextdelta", "run-benchmark", "--resume", str(path), *common],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert verify_run(path).lines() == ["MATCH"]
