"""Fixtures for the runner tests: a scripted HTTP server per policy (module scope) and a results folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.rundir import RunDirectory, RunStatus
from contextdelta.runner import BenchmarkRequest
from contextdelta.testing import serve_scripted

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
    """Leave the finished run at ``path`` as a killed session leaves one: its manifest ``running`` (sealed as the
    runner writes it). A resume refuses a *finished* run whose sealed records are gone (an edit, not a kill), so a
    test that cuts records to have something to resume says the session was killed."""
    directory = RunDirectory(path)
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))


@pytest.fixture(scope="module")
def oracle_url() -> Iterator[str]:
    with serve_scripted("oracle", TASKS) as url:
        yield url


@pytest.fixture(scope="module")
def trusting_url() -> Iterator[str]:
    with serve_scripted("context_trusting", TASKS) as url:
        yield url
