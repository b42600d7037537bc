"""Numbers far beyond what a run can use: a plan too large for one run (a typo such as ``--repeats
99999999999999999999``) is refused before anything is created (exit 2, the factors and the flag to lower named),
instead of listing every episode until memory runs out; a ``--concurrency`` far above the plan finishes when the
episodes do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.testing import serve_scripted
from tests.alarm import within

TASKS = Path(__file__).resolve().parents[2] / "tasks"
runner = CliRunner()


@pytest.mark.parametrize(
    ("repeats", "episodes"), [("99999999999999999999", "199,999,999,999,999,999,998"), ("500001", "1,000,002")]
)
def test_a_plan_over_the_ceiling_is_refused_before_anything_is_written(
    tmp_path: Path, repeats: str, episodes: str
) -> None:
    results = tmp_path / "results"
    with serve_scripted("oracle", TASKS) as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(results), "--task-ids", "order-grinder-refund", "--repeats", repeats]
        args += ["--strategies", "full_history", "--protection-modes", "unprotected,freshness_contract"]
        args += ["--quiet", "--no-store"]
        with within(10, "planning or running (the plan was not refused)"):
            result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    text = " ".join(result.stderr.split())
    assert f"--repeats {repeats}: the plan would hold {episodes} episodes (1 task x 1 strategy x 2 modes" in text
    assert "lower --repeats" in text
    assert not results.exists() or not any(results.iterdir())


def test_a_concurrency_far_above_the_plan_finishes_as_soon_as_the_episodes_do(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with serve_scripted("oracle", TASKS) as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(results), "--task-ids", "order-grinder-refund", "--repeats", "1"]
        args += ["--strategies", "full_history", "--protection-modes", "unprotected"]
        args += ["--quiet", "--no-store", "--concurrency", "999999999999"]
        # the driver used to take back every one of the 10^12 slots before it returned
        with within(30, "running after the last episode"):
            result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1/1 episodes, 1 succeeded, 0 failed trials; status complete" in result.stderr + result.stdout
