"""Fixtures for the runner tests: a scripted HTTP server per policy (module scope) and a results folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.rundir import RAW_RUNS, RAW_RUNS_RECEIPTS, EpisodeRecord, RunDirectory, RunStatus
from contextdelta.runner import BenchmarkRequest, run_benchmark
from contextdelta.testing import FaultPlan, ScriptedServer, serve_scripted

TASKS = Path(__file__).resolve().parents[2] / "tasks"
SMALL = ["order-grinder-refund", "cal-design-review", "cfg-search-ramp"]
"""One task per world: the runner tests' default task set."""


def benchmark_request(url: str, results: Path, **overrides: object) -> BenchmarkRequest:
    """A request for the scripted server at ``url``: the oracle policy on :data:`SMALL`, one repeat, every
    strategy and mode unless ``overrides`` say otherwise."""
    fields: dict[str, object] = {
        "tasks_dir": TASKS,
        "base_url": url,
        "model": "scripted-oracle",
        "results_dir": results,
        "task_ids": SMALL,
        "repeats": 1,
        "concurrency": 4,
    }
    fields.update(overrides)
    return BenchmarkRequest.model_validate(fields)


def as_killed(path: Path) -> None:
    """Leave the finished run at ``path`` as a killed first session leaves one: its manifest ``running``, sealed as
    the runner writes it when the session opens, and a receipt for each whole record. A resume refuses a run whose
    sealed records are gone (an edit, not a kill), so a test that cuts records to have something to resume says the
    session was killed."""
    directory = RunDirectory(path)
    # sealed as its first session opened it (no receipt yet); then the receipts of the records that are whole:
    # a record is appended before its receipt, so a kill never leaves a receipt without its record
    receipts = path / RAW_RUNS_RECEIPTS
    whole = [line for line in (path / RAW_RUNS).read_bytes().split(b"\n")[:-1] if line.endswith(b"}")]
    kept = b"".join(line + b"\n" for line in receipts.read_bytes().splitlines()[: len(whole)])
    receipts.write_bytes(b"")
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    receipts.write_bytes(kept)


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with serve_scripted("oracle", TASKS) as url:
        yield url


@pytest.fixture(scope="module")
def trusting_url() -> Iterator[str]:
    with serve_scripted("context_trusting", TASKS) as url:
        yield url


def retried_run(results: Path) -> tuple[Path, EpisodeRecord]:
    """A run (full_history, unprotected) whose first model call failed with HTTP 500 and no retry, resumed with
    --retry-failed against a healthy server: its directory and the superseded failed attempt's record."""
    strategies = {"strategies": ["full_history"], "protection_modes": ["unprotected"]}
    with ScriptedServer("oracle", TASKS, faults=FaultPlan(fail_500="at:1")) as server:
        first = run_benchmark(benchmark_request(server.base_url, results, max_retries=0, concurrency=1, **strategies))
        server.faults = FaultPlan()
        run_benchmark(benchmark_request(server.base_url, results, resume=str(first.path), retry_failed=True))
    (failed,) = [r for r in first.records if r.failed]
    return first.path, failed
