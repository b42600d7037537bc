"""Which suite a run read: ``--tasks`` as named (or the default), recorded in the manifest with the suite's hash."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextdelta.rundir.layout import RAW_RUNS
from contextdelta.rundir.records import RunStatus
from contextdelta.runner import BenchmarkError, run_benchmark
from contextdelta.tasks import load_task, read_lock, suite_hash
from contextdelta.testing import serve_scripted
from tests.runner.conftest import TASKS, as_killed, benchmark_request

HORIZON = TASKS / "horizon"
HORIZON_TASK = sorted((HORIZON / "order").glob("*.yaml"))[0].stem


@pytest.fixture(scope="module")
def horizon_url() -> Iterator[str]:
    with serve_scripted("oracle", HORIZON) as url:
        yield url


@pytest.mark.slow
def test_the_manifest_records_the_suite_as_named_and_the_hash_of_the_whole_suite(
    horizon_url: str, tmp_path: Path
) -> None:
    outcome = run_benchmark(
        benchmark_request(
            horizon_url,
            tmp_path,
            tasks_dir=HORIZON,
            suite_source="package:horizon",
            task_ids=[HORIZON_TASK],
            strategies=["full_history"],
            protection_modes=["unprotected"],
        )
    )
    manifest = outcome.manifest
    assert manifest.suite is not None
    lock = read_lock(HORIZON / "SUITE.lock")
    assert (manifest.suite.source, manifest.suite.sha256, manifest.suite.tasks) == (
        "package:horizon",
        lock.suite_hash,
        len(lock.entries),
    )
    # the hash of what ran (one task) is the run's task set; the suite's is the whole suite it came from
    ran = load_task(HORIZON / "order" / f"{HORIZON_TASK}.yaml")
    assert manifest.hashes.suite_sha256 == suite_hash([ran]) != manifest.suite.sha256
    on_disk = json.loads((outcome.path / "run_manifest.json").read_text())
    assert on_disk["suite"] == {"source": "package:horizon", "sha256": lock.suite_hash, "tasks": len(lock.entries)}
    report = (outcome.path / "benchmark_report.md").read_text()
    assert f"| suite | package:horizon ({len(lock.entries)} tasks; hash of the whole suite `{lock.suite_hash}`) |" in (
        report
    )


@pytest.mark.slow
def test_without_tasks_outside_a_clone_a_run_reads_the_packaged_core_suite(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./tasks here
    outcome = run_benchmark(
        benchmark_request(oracle_url, tmp_path / "results", tasks_dir=None, strategies=["full_history"])
    )
    assert outcome.manifest.suite is not None
    assert outcome.manifest.suite.source == "package:core"
    assert outcome.manifest.suite.sha256 == read_lock(TASKS / "SUITE.lock").suite_hash


@pytest.mark.slow
def test_a_folder_is_recorded_relative_to_the_working_directory(
    oracle_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(TASKS.parent)
    outcome = run_benchmark(
        benchmark_request(oracle_url, tmp_path, tasks_dir=TASKS.resolve(), strategies=["full_history"])
    )
    assert outcome.manifest.suite is not None
    assert outcome.manifest.suite.source == "tasks"
    assert str(TASKS.parent) not in (outcome.path / "run_manifest.json").read_text()


@pytest.mark.slow
def test_resume_without_tasks_reads_the_suite_the_run_recorded(
    horizon_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_benchmark(
        benchmark_request(
            horizon_url,
            tmp_path,
            tasks_dir=HORIZON,
            suite_source="package:horizon",
            task_ids=[HORIZON_TASK],
            strategies=["full_history", "last_n"],
            protection_modes=["unprotected"],
        )
    )
    raw = first.path / RAW_RUNS
    raw.write_bytes(raw.read_bytes().splitlines(keepends=True)[0])  # one episode lost
    as_killed(first.path)
    monkeypatch.chdir(tmp_path)  # ./tasks (the default) is not the suite this run read
    second = run_benchmark(
        benchmark_request(horizon_url, tmp_path, tasks_dir=None, task_ids=None, resume=str(first.path))
    )
    assert second.manifest.status is RunStatus.COMPLETE
    assert len(raw.read_text().splitlines()) == 2
    assert second.manifest.suite == first.manifest.suite


@pytest.mark.slow
def test_an_unknown_packaged_suite_on_resume_is_a_refusal(
    horizon_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_benchmark(
        benchmark_request(
            horizon_url,
            tmp_path,
            tasks_dir=HORIZON,
            suite_source="package:gone",
            task_ids=[HORIZON_TASK],
            strategies=["full_history"],
            protection_modes=["unprotected"],
        )
    )
    (first.path / RAW_RUNS).write_bytes(b"")
    as_killed(first.path)
    with pytest.raises(BenchmarkError, match=r"no packaged suite 'gone'; packaged: package:core, package:horizon"):
        run_benchmark(benchmark_request(horizon_url, tmp_path, tasks_dir=None, task_ids=None, resume=str(first.path)))
