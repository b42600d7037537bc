"""A deterministic plug-in strategy whose transform gives no valid context for the smallest history (the first
step of every episode) is refused before the run: exit 2 naming the plug-in and the problem, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from tests.runner.conftest import TASKS


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (
            "Raises",
            "plug-in strategy 'raises' (tests.runner.broken_plugins:Raises) gives no valid context for the smallest "
            "history (the system prompt and the instruction): its transform failed: RuntimeError: no history for me",
        ),
        ("ReturnsMessages", "transform returned list, not a TransformResult"),
        ("DropsTheInstruction", "a sequence needs at least the system prompt and the user instruction"),
    ],
)
def test_a_plugin_that_breaks_every_first_step_is_refused_before_the_run(
    oracle_url: str, tmp_path: Path, factory: str, message: str
) -> None:
    result = CliRunner().invoke(
        app,
        [
            "run-benchmark",
            "--tasks", str(TASKS),
            "--task-ids", "order-grinder-refund",
            "--strategies", f"full_history,tests.runner.broken_plugins:{factory}",
            "--base-url", oracle_url,
            "--model", "scripted-oracle",
            "--results-dir", str(tmp_path / "results"),
            "--no-store",
        ],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.stderr.split())
    assert "Traceback" not in result.output
    assert not (tmp_path / "results").exists()
