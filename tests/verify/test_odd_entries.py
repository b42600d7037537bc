"""Entries a run does not leave in its directory: leftover temp files, symbolic links, FIFOs. verify notes them
(they are neither read nor sealed), never follows a link or opens a FIFO (which would wait for a writer forever),
and refuses one that stands where it reads a file (exit 2, naming it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import AGGREGATE_METRICS, MANIFEST, RAW_RUNS, TASK_RESULTS
from contextdelta.verify import verify_run
from tests.alarm import within
from tests.report import runs

cli = CliRunner()


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return runs.copy_run(runs.single_task_run(), tmp_path / "results")


@pytest.mark.slow
def test_leftover_temp_files_links_and_fifos_are_noted_not_followed(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not part of the run\n")
    (run / f".{MANIFEST}.abc123.tmp").write_text("{")
    (run / "tasks" / "order").mkdir(exist_ok=True)
    (run / "tasks" / "order" / ".x.yaml.tmp").write_text("half")
    (run / "notes.txt").symlink_to(outside)
    (run / "linked-folder").symlink_to(tmp_path, target_is_directory=True)  # not walked (it holds the run)
    os.mkfifo(run / "pipe")
    os.mkfifo(run / "tasks" / "order" / "pipe.txt")
    with within(20, "waiting (a FIFO was opened)"):
        result = verify_run(run)
    assert result.ok, result.lines()
    notes = "\n".join(result.notes)
    assert f".{MANIFEST}.abc123.tmp is a temp file left by a write that was killed half way: not sealed" in notes
    assert "tasks/order/.x.yaml.tmp is a temp file" in notes
    assert f"notes.txt is a symbolic link to {outside}: not a file a run writes" in notes
    assert f"linked-folder is a symbolic link to {tmp_path}" in notes
    assert "pipe is a FIFO (named pipe): not a file a run writes" in notes
    assert "tasks/order/pipe.txt is a FIFO (named pipe)" in notes
    with within(20, "waiting (a FIFO was opened)"):
        out = cli.invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
    assert out.exit_code == 0 and out.stdout == "MATCH\n"
    assert "note: pipe is a FIFO" in " ".join(out.stderr.split())


@pytest.mark.slow
def test_a_sealed_file_replaced_by_a_link_is_not_followed(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.csv"
    copy.write_bytes((run / TASK_RESULTS).read_bytes())  # the same bytes, behind a link
    (run / TASK_RESULTS).unlink()
    (run / TASK_RESULTS).symlink_to(copy)
    with within(20, "waiting (a FIFO was opened)"):
        out = cli.invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
    assert out.exit_code == 2
    message = " ".join(out.stderr.split())
    assert f"malformed run directory {run}: {TASK_RESULTS} is a symbolic link to {copy}" in message
    assert "never follows a link" in message


@pytest.mark.slow
@pytest.mark.parametrize("name", [RAW_RUNS, MANIFEST])
def test_a_fifo_where_a_run_file_belongs_is_refused_without_opening_it(run: Path, name: str) -> None:
    (run / name).unlink()
    os.mkfifo(run / name)
    with within(20, "waiting (a FIFO was opened)"):
        out = cli.invoke(app, ["verify", run.name, "--results-dir", str(run.parent)])
        assert out.exit_code == 2
        assert f"{name} is a FIFO (named pipe), not the file the run wrote" in " ".join(out.stderr.split())
        # every other reader refuses it too (a malformed run directory), rather than wait for a writer
        report = cli.invoke(app, ["report", run.name, "--results-dir", str(run.parent)])
    assert report.exit_code == 2
    assert "a FIFO (named pipe), not a regular file" in " ".join(report.stderr.split())


@pytest.mark.slow
def test_a_fifo_task_file_in_the_snapshot_is_named_without_opening_it(run: Path) -> None:
    os.mkfifo(run / "tasks" / "config" / "extra.yaml")
    with within(20, "waiting (a FIFO was opened)"):
        result = verify_run(run)
    assert any(d.field == "tasks/config/extra.yaml" and "not a regular file" in d.detail for d in result.divergences), (
        result.lines()
    )
    assert "tasks/config/extra.yaml is a FIFO (named pipe)" in "\n".join(result.notes)


@pytest.mark.slow
def test_readers_of_a_derived_file_that_is_a_fifo_do_not_wait(run: Path) -> None:
    """report and the dashboard read aggregate_metrics.json for its parameters and numbers: a FIFO there is
    unreadable (the numbers are recomputed), never opened."""
    from contextdelta.dashboard.data import load_run

    (run / AGGREGATE_METRICS).unlink()
    os.mkfifo(run / AGGREGATE_METRICS)
    with within(20, "waiting (a FIFO was opened)"):
        report = cli.invoke(app, ["report", run.name, "--results-dir", str(run.parent)])
        loaded = load_run(run)
    assert report.exit_code == 0, report.output
    assert loaded.metrics_source != AGGREGATE_METRICS
