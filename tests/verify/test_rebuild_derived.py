"""A derived file of a finished run is a function of ``raw_runs.jsonl`` and the manifest: ``report --write`` rebuilds a
deleted one offline (the scripted server that ran the episodes is gone), and verify then says MATCH; one that was
edited instead is refused by ``report --write`` (rebuilding and resealing it would hide the edit) and still named by
verify as edited after the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import DERIVED_FILES
from tests.report import runs

cli = CliRunner()


def _invoke(*args: str) -> tuple[int, str, str]:
    result = cli.invoke(app, list(args))
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


@pytest.mark.parametrize("name", DERIVED_FILES)
def test_a_deleted_derived_file_is_rebuilt_offline_by_report_write_and_verifies_match(
    tmp_path: Path, name: str
) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    original = (run / name).read_bytes()
    (run / name).unlink()
    code, _, said = _invoke("verify", run.name, "--results-dir", str(tmp_path))
    assert code == 2
    assert f"missing {name} (`contextdelta report {run.name} --write` rebuilds the derived files)" in said, said
    code, _, said = _invoke("report", run.name, "--write", "--results-dir", str(tmp_path))
    assert code == 0, said
    assert (run / name).read_bytes() == original
    assert _invoke("verify", run.name, "--results-dir", str(tmp_path))[:2] == (0, "MATCH\n")


@pytest.mark.parametrize("name", DERIVED_FILES)
def test_an_edited_derived_file_is_not_rebuilt_over_and_stays_named_as_an_edit(tmp_path: Path, name: str) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path)
    (run / name).write_bytes((run / name).read_bytes() + b"\n")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    code, stdout, said = _invoke("report", run.name, "--write", "--results-dir", str(tmp_path))
    assert code == 2, said
    assert f"report would rebuild and reseal {name} of {run.name}, edited after the run" in said, said
    assert "delete it to have report --write rebuild it from raw_runs.jsonl" in said
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before  # nothing written
    code, stdout, _ = _invoke("verify", run.name, "--results-dir", str(tmp_path))
    assert code == 1
    assert f"{run.name}: {name}: edited after the run (its SHA-256 is not the one the manifest sealed)" in stdout
