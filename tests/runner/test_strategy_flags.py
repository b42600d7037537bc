"""A shared strategy flag (``--last-n``, ``--summary-trigger``, ``--summary-keep``, ``--token-budget``) and a
``--strategy-param`` that set the same parameter are refused (exit 2, both named, nothing created): the run used
one of them silently while the manifest recorded both."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.testing import serve_scripted

TASKS = Path(__file__).resolve().parents[2] / "tasks"
runner = CliRunner()


@pytest.mark.parametrize(
    ("strategy", "flag", "param", "message"),
    [
        ("last_n", ["--last-n", "5"], "last_n.n=3", "--last-n 5 and --strategy-param last_n.n=3"),
        (
            "typed_state_digest",
            ["--summary-keep", "2"],
            "typed_state_digest.keep=1",
            "--summary-keep 2 and --strategy-param typed_state_digest.keep=1",
        ),
        (
            "token_budget_trim",
            ["--token-budget", "900"],
            "token_budget_trim.budget=700",
            "--token-budget 900 and --strategy-param token_budget_trim.budget=700",
        ),
    ],
)
def test_a_flag_and_a_strategy_param_for_one_parameter_are_refused(
    tmp_path: Path, strategy: str, flag: list[str], param: str, message: str
) -> None:
    results = tmp_path / "results"
    with serve_scripted("oracle", TASKS) as url:
        args = ["run-benchmark", "--tasks", str(TASKS), "--base-url", url, "--model", "scripted-oracle"]
        args += ["--results-dir", str(results), "--task-ids", "order-grinder-refund", "--repeats", "1"]
        args += ["--strategies", strategy, "--protection-modes", "unprotected", "--quiet", "--no-store"]
        result = runner.invoke(app, [*args, *flag, "--strategy-param", param])
    assert result.exit_code == 2, result.output
    assert f"{message} set the same parameter of {strategy}; give only one of them" in " ".join(result.stderr.split())
    assert not results.exists() or not any(results.iterdir())
