"""compare, power and export of a run that is not complete (running, killed, stopped early) say so on stderr: what
they show covers only the episodes recorded so far (report says the same), never silently the whole run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from tests.report import runs

cli = CliRunner()


@pytest.mark.parametrize(
    ("command", "what"),
    [
        (["compare", "RUN", "RUN"], "its side of the comparison comes"),
        (["power", "--difference", "0.2", "--pilot", "RUN"], "the plan comes"),
        (["export", "RUN", "--format", "inspect", "--out", "OUT"], "the export comes"),
    ],
)
def test_an_incomplete_run_is_noted(tmp_path: Path, command: list[str], what: str) -> None:
    run = runs.incomplete_run()
    args = [str(run) if a == "RUN" else str(tmp_path / "log.json") if a == "OUT" else a for a in command]
    out = cli.invoke(app, args)
    assert out.exit_code == 0, out.output
    text = " ".join(out.stderr.split())
    assert f"note: run {run.name} is incomplete (3 episodes planned): {what} from the episodes recorded so far" in text
    assert f"`contextdelta run-benchmark --resume {run.name}` finishes it" in text


def test_a_complete_run_is_not_noted() -> None:
    run = runs.single_task_run()
    out = cli.invoke(app, ["compare", str(run), str(run)])
    assert out.exit_code == 0, out.output
    assert "recorded so far" not in out.stderr
