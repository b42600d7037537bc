"""A derived file whose bytes are not UTF-8 (a run writes UTF-8 only) is a divergence naming the file, the byte and
the line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.rundir import BENCHMARK_REPORT, FAILURE_ATLAS, TASK_RESULTS, TOOL_EVENTS
from tests.report import runs

cli = CliRunner()


@pytest.mark.parametrize("name", [TASK_RESULTS, TOOL_EVENTS, BENCHMARK_REPORT, FAILURE_ATLAS])
def test_a_derived_file_that_is_not_utf8_is_named(tmp_path: Path, name: str) -> None:
    run = runs.copy_run(runs.single_task_run(), tmp_path / "results")
    data = (run / name).read_bytes()
    first_line = data.index(b"\n") + 1
    (run / name).write_bytes(data[:first_line] + b"\xff" + data[first_line:])
    out = cli.invoke(app, ["verify", str(run)])
    assert out.exit_code == 1, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    assert f"{name}: not UTF-8 text (invalid start byte at byte {first_line}, line 2): changed after the run" in (
        out.stdout
    )


def test_a_lone_surrogate_written_into_raw_runs_is_named_as_an_edit_of_its_field(tmp_path: Path) -> None:
    """A ``\\ud800`` escape without its pair (no writer of a run puts one there; UTF-8 cannot encode it) is an edit
    the seal names by record and field, never a UnicodeEncodeError traceback."""
    import json

    run = runs.copy_run(runs.single_task_run(), tmp_path / "results")
    raw = run / "raw_runs.jsonl"
    lines = raw.read_text().splitlines(keepends=True)
    record = json.loads(lines[0])
    record["trace"]["final_answer"] = "done \ud800"
    raw.write_text(json.dumps(record) + "\n" + "".join(lines[1:]))
    out = cli.invoke(app, ["verify", str(run)])
    assert out.exit_code == 1, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    said = " ".join(out.stdout.split())
    assert f"{record['run_id']}: trace.final_answer: raw_runs.jsonl line 1: edited after the run" in said, said
