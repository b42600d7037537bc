"""A copy of a run directory taken while its run was still writing it (manifest ``running``, the last record cut
mid-JSON, the receipts and tool events copied a moment later than the records, so ahead of them) is an incomplete
copy, not an edit: verify says so and how to go on (copy again once the run is complete, or resume). The same cut
in a run whose manifest says ``complete`` is an edit, named with its line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RAW_RUNS, RAW_RUNS_RECEIPTS, RunDirectory, RunStatus
from tests.report import runs

cli = CliRunner()
COPY = "this directory is an incomplete copy of a run that was still writing it"


def _cut_last_line(run: Path, keep: int) -> int:
    raw = run / RAW_RUNS
    lines = raw.read_bytes().split(b"\n")[:-1]
    raw.write_bytes(b"".join(line + b"\n" for line in lines[:-1]) + lines[-1][:keep])
    return len(lines)


def _copied_while_running(tmp_path: Path) -> Path:
    """The single-task run as a copy taken while its session was recording the last episode: the manifest as the
    session opened it (``running``, sealed with no receipt yet), every receipt, every tool event, and
    ``raw_runs.jsonl`` copied first, mid-way through its last line."""
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    receipts = (run / RAW_RUNS_RECEIPTS).read_bytes()
    (run / RAW_RUNS_RECEIPTS).write_bytes(b"")
    directory = RunDirectory(run)
    directory.write_manifest(directory.read_manifest().model_copy(update={"status": RunStatus.RUNNING}))
    (run / RAW_RUNS_RECEIPTS).write_bytes(receipts)
    _cut_last_line(run, 700)
    return run


def _verify(run: Path, *extra: str) -> tuple[int, str, str]:
    result = cli.invoke(app, ["verify", run.name, "--results-dir", str(run.parent), *extra])
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def test_a_copy_taken_while_the_run_was_writing_says_so_and_how_to_go_on(tmp_path: Path) -> None:
    run = _copied_while_running(tmp_path)
    code, stdout, said = _verify(run)
    assert code == 2 and stdout == "", said
    assert f"incomplete: run run-benchmark --resume {run.name} (status running:" in said, said
    assert COPY in said and "copy it again once the run is complete, or resume it" in said, said
    assert "killed" not in said.split(COPY)[0]  # not blamed on a kill
    code, stdout, said = _verify(run, "--allow-incomplete")
    assert (code, stdout) == (0, "MATCH\n"), (stdout, said)
    assert "edited after the run" not in said and "chain sealed a whole record" not in said, said
    assert f"{RAW_RUNS} line 4 (" in said and "is cut short after 700 bytes, yet its receipt is in" in said, said
    assert "tool_events.jsonl holds" in said and "past the episodes raw_runs.jsonl holds whole" in said, said


def test_the_same_cut_in_a_complete_run_is_named_as_an_edit_of_its_line(tmp_path: Path) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    lines = _cut_last_line(run, 700)
    code, stdout, said = _verify(run)
    assert code == 1, (stdout, said)
    assert (
        f"{RAW_RUNS}: line {lines} is torn: cut short after 700 bytes, edited after the run (its manifest says "
        "complete; a copy taken while it ran would say running); the chain sealed a whole record"
    ) in stdout, stdout
    assert COPY not in stdout + said


def test_a_resume_of_such_a_copy_says_it_may_be_a_copy_to_take_again(tmp_path: Path) -> None:
    run = _copied_while_running(tmp_path)
    directory = RunDirectory(run)
    lost = directory.sealed_records_lost(directory.read_manifest())
    assert lost is not None
    assert "or this directory is a copy taken while its run was writing it" in lost, lost
    assert "copy it again once the run is complete" in lost
