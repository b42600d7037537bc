"""``replay`` of a failed model call: each attempt's HTTP status, error and time, from a real run over HTTP against the
scripted server; and a run directory of 0.13.0, whose failed steps recorded none of it, replays as it did."""

from __future__ import annotations

import tarfile
from pathlib import Path

from typer.testing import CliRunner

from contextdelta.cli import app
from contextdelta.runner import run_benchmark
from contextdelta.testing import serve_scripted
from tests.runner.conftest import TASKS, benchmark_request

runner = CliRunner()
OLD_ARCHIVE = Path(__file__).parents[1] / "rundir" / "fixtures" / "run_0_13_0_failed_call.tar.gz"


def test_replay_shows_each_attempt_of_a_failed_call(tmp_path: Path) -> None:
    one = {"strategies": ["full_history"], "protection_modes": ["unprotected"], "task_ids": ["cal-design-review"]}
    with serve_scripted("oracle", TASKS, in_process=True, fail_429="at:2,3", retry_after=0) as url:
        outcome = run_benchmark(benchmark_request(url, tmp_path, max_retries=1, concurrency=1, **one))
    (record,) = outcome.records
    assert record.failed
    result = runner.invoke(app, ["replay", outcome.path.name, "--results-dir", str(tmp_path), "--run", record.run_id])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "model no response: HTTP 429 RateLimitError" in text
    assert "agent call: 2 attempts in " in text
    assert "#1 HTTP 429 RateLimitError rate_limit_exceeded (" in text
    assert "#2 HTTP 429 RateLimitError rate_limit_exceeded (" in text
    assert "access refused" not in text


def test_a_0_13_0_run_with_a_failed_call_replays_without_attempts(tmp_path: Path) -> None:
    with tarfile.open(OLD_ARCHIVE) as archive:
        archive.extractall(tmp_path, filter="data")
    (run,) = [p.name for p in tmp_path.iterdir()]
    result = runner.invoke(
        app, ["replay", run, "--results-dir", str(tmp_path), "--run", "cal-design-review.full_history.unprotected.r1"]
    )
    assert result.exit_code == 0, result.output
    assert "model no response: HTTP 429 RateLimitError" in result.stdout
    assert "agent call:" not in result.stdout
