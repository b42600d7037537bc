"""A run directory written before verdicts carried structured grader details still loads, reports and verifies.

``fixtures/run_before_grader_details.tar.gz`` is a real run directory written by commit 72806b9 (the scripted
``unsafe`` policy on four tasks, full_history and last_n, both modes, 16 episodes). Do not regenerate it: its
point is the old format.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.attribution import attribute_run
from contextdelta.cli import app
from contextdelta.dashboard import load_episode, load_run
from contextdelta.grading import describe
from contextdelta.report import build_report
from contextdelta.rundir import FAILURE_ATLAS, RAW_RUNS, RunDirectory, RunDirectoryError

ARCHIVE = Path(__file__).parent / "fixtures" / "run_before_grader_details.tar.gz"
RUN_ID = "20261201T074608Z-8f1020"
runner = CliRunner()


@pytest.fixture
def results(tmp_path: Path) -> Path:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path


def test_the_fixture_is_in_the_old_format(results: Path) -> None:
    lines = (results / RUN_ID / RAW_RUNS).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 16
    assert all("details" not in json.loads(line)["verdict"] for line in lines)


def test_old_records_load_with_details_regraded_from_the_snapshot(results: Path) -> None:
    records = RunDirectory(results / RUN_ID).read_episodes()
    assert len(records) == 16
    for record in records:
        assert record.verdict.details is not None
        # the re-derived details say exactly what the recorded text said
        assert [describe(d) for d in record.verdict.details] == record.verdict.reasons
    one = RunDirectory(results / RUN_ID).read_episode(records[0].run_id)
    assert one.verdict.details == records[0].verdict.details


@pytest.mark.slow
def test_old_run_reports_attributes_and_verifies(results: Path) -> None:
    directory = RunDirectory(results / RUN_ID)
    manifest, records = directory.read_manifest(), directory.read_episodes()
    # the atlas written back then is what today's attribution writes
    recorded_atlas = directory.file(FAILURE_ATLAS).read_text(encoding="utf-8")
    assert build_report(manifest, records).atlas == recorded_atlas
    assert len(attribute_run(records)) == 15

    verify = runner.invoke(app, ["verify", RUN_ID, "--results-dir", str(results)])
    assert verify.exit_code == 0, verify.output
    assert verify.stdout.splitlines()[0] == "MATCH"
    report = runner.invoke(app, ["report", RUN_ID, "--results-dir", str(results)])
    assert report.exit_code == 0 and RUN_ID in report.stdout
    attribute = runner.invoke(app, ["attribute", RUN_ID, "--results-dir", str(results), "--format", "json"])
    assert attribute.exit_code == 0
    assert len(json.loads(attribute.stdout)) == 15
    replay = runner.invoke(app, ["replay", RUN_ID, "--results-dir", str(results), "--run", records[0].run_id])
    assert replay.exit_code == 0 and "why: " in replay.stdout

    run = load_run(results / RUN_ID)
    assert len(run.failures) == 15
    assert load_episode(results / RUN_ID, records[0].run_id).verdict.details == records[0].verdict.details


def test_an_old_record_whose_task_left_the_snapshot_is_a_clear_error(results: Path) -> None:
    snapshot = results / RUN_ID / "tasks" / "order" / "order-split-refund.yaml"
    snapshot.unlink()
    with pytest.raises(RunDirectoryError, match=r"order-split-refund.*not in the task snapshot"):
        RunDirectory(results / RUN_ID).read_episodes()


OLD_FAILED_CALL = Path(__file__).parent / "fixtures" / "run_0_13_0_failed_call.tar.gz"
"""A real run directory written by 0.13.0 (commit 9faa5cc; the scripted ``oracle`` policy on two tasks, full_history,
both modes; an HTTP 500, two 429s and a hang injected, ``--max-retries 1``): one failed trial, recorded before a failed
step kept its attempts (``failed_call``). Do not regenerate it: its point is the old format."""


@pytest.mark.slow
def test_a_0_13_0_run_with_a_failed_call_reads_reports_and_verifies(tmp_path: Path) -> None:
    with tarfile.open(OLD_FAILED_CALL) as archive:
        archive.extractall(tmp_path, filter="data")
    (path,) = list(tmp_path.iterdir())
    lines = (path / RAW_RUNS).read_text(encoding="utf-8").splitlines()
    assert all('"failed_call"' not in line for line in lines)  # the old format
    records = RunDirectory(path).read_episodes()
    (failed,) = [r for r in records if r.failed]
    assert failed.trace.steps[-1].response is None and failed.trace.steps[-1].failed_call is None
    result = runner.invoke(app, ["verify", path.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0 and "MATCH" in result.stdout, result.output
    result = runner.invoke(app, ["report", path.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
