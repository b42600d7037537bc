"""``verify`` of a run whose plug-in strategy prints while its contexts are re-derived: stdout is MATCH alone."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from contextdelta.cli import app
from tests.verify.conftest import oracle_run


def test_verify_keeps_its_stdout_when_a_plugin_prints(tmp_path: Path) -> None:
    outcome = oracle_run(tmp_path, ["tests.runner.printing_plugin:Chatty"])
    assert outcome.manifest.counts.succeeded == 1
    result = CliRunner().invoke(app, ["verify", outcome.path.name, "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == "MATCH\n"
    assert "chatty transform" in result.stderr
