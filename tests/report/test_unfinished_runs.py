"""compare, power and export of a run that is not complete (running, killed, stopped early) say so on stderr: what
they show covers only the episodes recorded so far (report says the same), never silently the whole run's; and
report, compare, power and export of one shard of a plan say that it is one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import RunDirectory
from contextdelta.rundir.layout import AGGREGATE_METRICS, BENCHMARK_REPORT, FAILURE_ATLAS
from contextdelta.verify import verify_run
from tests.report import runs

cli = CliRunner()


@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["compare", "RUN", "COPY"], "its side of the comparison comes"),
        (["power", "--difference", "0.2", "--pilot", "RUN"], "the plan comes"),
        (["export", "RUN", "--format", "inspect", "--out", "OUT"], "the export comes"),
    ],
)
def test_an_incomplete_run_is_noted(tmp_path: Path, command: list[str], what: str) -> None:
    run = runs.incomplete_run()
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    places = {"RUN": str(run), "COPY": str(copy), "OUT": str(tmp_path / "log.json")}
    args = [places.get(a, a) for a in command]
    out = cli.invoke(app, args)
    # power refuses this pilot (one condition: no pair to plan) after its note
    assert out.exit_code == (2 if command[0] == "power" else 0), out.output
    text = " ".join(out.stderr.split())
    assert f"note: run {run.name} is incomplete (3 episodes planned): {what} from the episodes recorded so far" in text
    assert f"`contextdelta run-benchmark --resume {run.name}` finishes it" in text


def test_a_complete_run_is_not_noted(tmp_path: Path) -> None:
    run = runs.single_task_run()
    shutil.copytree(run, tmp_path / "copy")
    out = cli.invoke(app, ["compare", str(run), str(tmp_path / "copy")])
    assert out.exit_code == 0, out.output
    assert "recorded so far" not in out.stderr


@pytest.mark.parametrize("second", ["same", "by-path", "dot-slash"])
def test_compare_refuses_one_run_given_twice(second: str) -> None:
    """compare RUN RUN exited 0 with a table of zero differences: both arguments name one run."""
    run = runs.single_task_run()
    other = {"same": run.name, "by-path": str(run), "dot-slash": str(run.parent / "." / run.name)}[second]
    out = cli.invoke(app, ["compare", run.name, other, "--results-dir", str(run.parent)])
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    message = " ".join(out.stderr.split())
    assert "both name the run directory" in message and "compare two different runs" in message


@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["report", "RUN"], "the report comes"),
        (["report", "RUN", "--format", "json"], "the report comes"),
        (["compare", "RUN", "COPY"], "its side of the comparison comes"),
        (["power", "--difference", "0.2", "--pilot", "RUN"], "the plan comes"),
        (["export", "RUN", "--format", "inspect", "--out", "OUT"], "the export comes"),
    ],
)
def test_a_shard_is_noted(tmp_path: Path, command: list[str], what: str) -> None:
    """A shard's status is complete and its report said '3 finished of 3 planned' with no word of the other
    shards: its comparisons silently left out every pair split between shards."""
    run = runs.shard_run()
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    places = {"RUN": str(run), "COPY": str(copy), "OUT": str(tmp_path / "log.json")}
    out = cli.invoke(app, [places.get(a, a) for a in command])
    assert out.exit_code == 0, out.output
    text = " ".join(out.stderr.split())
    assert f"note: run {run.name} is shard 1/2 of its plan (3 of the plan's episodes): {what} from this part" in text
    assert "`contextdelta merge` joins the shards into the run group" in text
    assert "is shard 1/2" not in out.stdout


def test_a_run_that_is_not_a_shard_is_not_noted_as_one(tmp_path: Path) -> None:
    run = runs.single_task_run()
    out = cli.invoke(app, ["report", str(run)])
    assert out.exit_code == 0, out.output
    assert "shard" not in out.stderr


SHARD_SAYS = "shard 1/2, not the whole plan"


def test_every_report_of_a_shard_says_so_and_others_do_not() -> None:
    """benchmark_report.md, failure_atlas.md and aggregate_metrics.json of a shard said nothing of the other
    shards (only `report`'s stderr did): a reader of the files took 3 episodes for the whole plan."""
    run = runs.shard_run()
    data = json.loads((run / AGGREGATE_METRICS).read_text())
    first = data["warnings"][0]
    assert first["code"] == "shard" and first["message"].startswith(SHARD_SAYS)
    assert "3 episodes of part 1 of 2" in first["message"]
    for name in (BENCHMARK_REPORT, FAILURE_ATLAS):
        third = (run / name).read_text().splitlines()[2]
        assert third.startswith(f"**{SHARD_SAYS.capitalize()}") and "`contextdelta merge`" in third, (name, third)
    for fmt in ("markdown", "json"):
        out = cli.invoke(app, ["report", str(run), "--format", fmt])
        assert out.exit_code == 0, out.output
        assert SHARD_SAYS in out.stdout.lower()
    whole = runs.single_task_run()
    for name in (BENCHMARK_REPORT, FAILURE_ATLAS, AGGREGATE_METRICS):
        assert "not the whole plan" not in (whole / name).read_text()


def test_verify_reads_a_shard_report_written_before_it_said_so(tmp_path: Path) -> None:
    path = runs.copy_run(runs.shard_run(), tmp_path)
    data = json.loads((path / AGGREGATE_METRICS).read_text())
    data["warnings"] = [w for w in data["warnings"] if w["code"] != "shard"]
    (path / AGGREGATE_METRICS).write_text(json.dumps(data, indent=2) + "\n")
    for name in (BENCHMARK_REPORT, FAILURE_ATLAS):
        lines = (path / name).read_text().splitlines(keepends=True)
        (path / name).write_text("".join(lines[:2] + lines[4:]))
    assert RunDirectory(path).reseal_files()
    result = verify_run(path)
    assert result.ok, result.lines()
    assert any("written before they said so" in n for n in result.notes), result.notes
